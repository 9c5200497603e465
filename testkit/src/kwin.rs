//! The `kwin` binary, run by a test: `kwin!(dir)` (a [`Kwin`] to add arguments, environment
//! and stdin to) or `kwin!(dir, &["apply", "plan.toml"])` (run at once), giving a [`Run`].
//!
//! `CARGO_BIN_EXE_kwin` exists only in the tests of the `kwin` package, hence a macro: it
//! reads the variable where it is used.

use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `kwin!(dir)`: the binary, to run in `dir`; `kwin!(dir, args)`: that, run with `args`.
#[macro_export]
macro_rules! kwin {
    ($dir:expr $(,)?) => {
        $crate::kwin::Kwin::new(env!("CARGO_BIN_EXE_kwin"), $dir)
    };
    ($dir:expr, $args:expr $(,)?) => {
        $crate::kwin::Kwin::new(env!("CARGO_BIN_EXE_kwin"), $dir)
            .args($args)
            .run()
    };
}

/// A `kwin` command line to run.
#[derive(Debug)]
pub struct Kwin {
    cmd: Command,
    stdin: Option<Vec<u8>>,
}

impl Kwin {
    /// The binary at `bin`, run in `dir`. `KWIN_TEST_BIN` names another build to run
    /// instead (an older one, to see what a test catches).
    pub fn new(bin: &str, dir: impl AsRef<Path>) -> Kwin {
        let bin = std::env::var("KWIN_TEST_BIN").unwrap_or_else(|_| bin.to_string());
        let mut cmd = Command::new(bin);
        cmd.current_dir(dir.as_ref());
        Kwin { cmd, stdin: None }
    }
    pub fn arg(mut self, a: impl AsRef<std::ffi::OsStr>) -> Kwin {
        self.cmd.arg(a);
        self
    }
    pub fn args<S: AsRef<std::ffi::OsStr>>(mut self, a: impl IntoIterator<Item = S>) -> Kwin {
        self.cmd.args(a);
        self
    }
    pub fn env(mut self, k: impl AsRef<std::ffi::OsStr>, v: impl AsRef<std::ffi::OsStr>) -> Kwin {
        self.cmd.env(k, v);
        self
    }
    pub fn env_remove(mut self, k: impl AsRef<std::ffi::OsStr>) -> Kwin {
        self.cmd.env_remove(k);
        self
    }
    /// Text on kwin's stdin (else none: stdin is closed).
    pub fn stdin(mut self, text: impl Into<Vec<u8>>) -> Kwin {
        self.stdin = Some(text.into());
        self
    }
    /// The command, for a test that drives the process itself (signals, timing).
    pub fn command(self) -> Command {
        self.cmd
    }

    /// Run to the end.
    pub fn run(mut self) -> Run {
        self.cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        self.cmd.stdin(if self.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        let mut child = match self.cmd.spawn() {
            Ok(c) => c,
            Err(e) => panic!("cannot run kwin: {e}"),
        };
        if let (Some(text), Some(mut w)) = (self.stdin.take(), child.stdin.take()) {
            let _ = w.write_all(&text);
        }
        let out = match child.wait_with_output() {
            Ok(o) => o,
            Err(e) => panic!("kwin: {e}"),
        };
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// What a run of `kwin` gave.
#[derive(Debug, Clone)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// stdout and stderr, one after the other.
    pub fn out(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
    pub fn last_line(&self) -> &str {
        self.stdout.lines().last().unwrap_or("")
    }
    /// The JSON events (with `--output json`).
    pub fn events(&self) -> Vec<Value> {
        events(&self.stdout)
    }
    /// The `summary` event: the last line of every `--output json` stream.
    pub fn summary(&self) -> Value {
        summary(&self.stdout)
    }
    /// The run id of `run_started`.
    pub fn run_id(&self) -> String {
        self.events()
            .iter()
            .find(|e| e["event"] == "run_started")
            .and_then(|e| e["run_id"].as_str().map(str::to_string))
            .unwrap_or_else(|| panic!("no run_started event:\n{self}"))
    }
    /// The `task_finished` event of `host`/`task`.
    pub fn task(&self, host: &str, task: &str) -> Value {
        self.events()
            .into_iter()
            .find(|e| e["event"] == "task_finished" && e["host"] == host && e["task"] == task)
            .unwrap_or_else(|| panic!("no task_finished for {host}/{task}:\n{self}"))
    }
    /// The `host_finished` event of `host`.
    pub fn host(&self, host: &str) -> Value {
        self.events()
            .into_iter()
            .find(|e| e["event"] == "host_finished" && e["host"] == host)
            .unwrap_or_else(|| panic!("no host_finished for {host}:\n{self}"))
    }
    /// `host`'s tasks in the order they finished, with their status.
    pub fn finished(&self, host: &str) -> Vec<(String, String)> {
        finished(&self.stdout, host)
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// The JSON events in `stdout`.
pub fn events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The `summary` event in `stdout`: the last line of every `--output json` stream (its run
/// counts, `verify`, `logs`, `outcome`, `exit_code`).
pub fn summary(stdout: &str) -> Value {
    events(stdout)
        .into_iter()
        .rfind(|e| e["event"] == "summary")
        .unwrap_or_else(|| panic!("no summary in:\n{stdout}"))
}

/// `host`'s tasks in the order they finished, with their status.
pub fn finished(stdout: &str, host: &str) -> Vec<(String, String)> {
    events(stdout)
        .iter()
        .filter(|e| e["event"] == "task_finished" && e["host"] == host)
        .map(|e| {
            (
                e["task"].as_str().unwrap_or_default().to_string(),
                e["status"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Round trips (remote runs and puts) of `host` in run `run_id`, from its log under
/// `dir/.kwin`.
pub fn round_trips(dir: &Path, run_id: &str, host: &str) -> usize {
    let log = dir
        .join(".kwin/logs")
        .join(run_id)
        .join(format!("{host}.log"));
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter(|l| {
            l.starts_with("[+")
                && (l.contains("] run #") && l.contains(" bytes, timeout") || l.contains("] put #"))
        })
        .count()
}

/// Every file under `p`, recursively.
pub fn walk(p: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                v.extend(walk(&p));
            } else {
                v.push(p);
            }
        }
    }
    v
}
