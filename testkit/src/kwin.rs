//! The `kwin` binary, run by a test: `kwin!(dir)` (a [`Kwin`] to add arguments, environment
//! and stdin to) or `kwin!(dir, &["apply", "plan.toml"])` (run at once), giving a [`Run`].
//!
//! A test that must act while kwin runs (send Ctrl-C after a given event, cut a host, time
//! when output arrives) starts it with [`Kwin::spawn`] instead and reads its stdout line by
//! line as kwin writes it ([`Live`]).
//!
//! `CARGO_BIN_EXE_kwin` exists only in the tests of the `kwin` package, hence a macro: it
//! reads the variable where it is used.

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

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

    /// Start it (stdin closed) and read its stdout as it arrives: a [`Live`] run.
    pub fn spawn(mut self) -> Live {
        self.cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(Stdio::null());
        let t0 = Instant::now();
        let mut child = match self.cmd.spawn() {
            Ok(c) => c,
            Err(e) => panic!("cannot run kwin: {e}"),
        };
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().expect("kwin's stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send((t0.elapsed(), line)).is_err() {
                    break;
                }
            }
        });
        let mut stderr = child.stderr.take().expect("kwin's stderr");
        let err = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = stderr.read_to_end(&mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        });
        Live {
            child: Some(child),
            t0,
            rx,
            stderr: Some(err),
            lines: Vec::new(),
            ended: false,
        }
    }
}

/// A running `kwin` ([`Kwin::spawn`]): its stdout lines as they arrive, each with the time
/// since the start at which it arrived. Dropped before [`Live::finish`] (a failing test), the
/// process is killed: a test never leaves a kwin behind.
pub struct Live {
    child: Option<Child>,
    t0: Instant,
    rx: mpsc::Receiver<(Duration, String)>,
    stderr: Option<std::thread::JoinHandle<String>>,
    lines: Vec<(Duration, String)>,
    ended: bool,
}

impl Live {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Read lines until a JSON event for which `pred` holds and return it. Fails the test
    /// (naming `what` and showing every line so far) when stdout ends first or `limit`
    /// passes.
    pub fn wait_for(
        &mut self,
        limit: Duration,
        what: &str,
        mut pred: impl FnMut(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok((at, line)) => {
                    let event = serde_json::from_str::<Value>(&line).ok();
                    self.lines.push((at, line));
                    if let Some(e) = event {
                        if pred(&e) {
                            return e;
                        }
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("no {what} within {limit:?}:\n{}", self.text())
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    self.ended = true;
                    panic!("kwin ended before {what}:\n{}", self.text())
                }
            }
        }
    }

    /// Send SIGINT (Ctrl-C) to kwin.
    pub fn interrupt(&self) {
        let sent = Command::new("kill")
            .args(["-INT", &self.pid().to_string()])
            .status()
            .expect("kill -INT");
        assert!(sent.success(), "kill -INT {}", self.pid());
    }

    /// Every stdout line so far.
    fn text(&self) -> String {
        self.lines.iter().map(|(_, l)| format!("{l}\n")).collect()
    }

    /// Wait for kwin to end, at most `limit` from now (past it, kwin is killed and the test
    /// fails: kwin must never hang); the whole run.
    pub fn finish(self, limit: Duration) -> Run {
        self.finish_timed(limit).0
    }

    /// [`Live::finish`], with every stdout line and the time (since the start) it arrived.
    pub fn finish_timed(mut self, limit: Duration) -> (Run, Vec<(Duration, String)>) {
        let deadline = Instant::now() + limit;
        while !self.ended {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(l) => self.lines.push(l),
                Err(mpsc::RecvTimeoutError::Disconnected) => self.ended = true,
                Err(mpsc::RecvTimeoutError::Timeout) => break,
            }
        }
        let mut child = self.child.take().expect("a running kwin");
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "kwin still running {:?} after it started: it hangs\n{}",
                        self.t0.elapsed(),
                        self.text()
                    );
                }
                Err(e) => panic!("waiting for kwin: {e}"),
            }
        };
        let stderr = self
            .stderr
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default();
        let run = Run {
            code: status.code().unwrap_or(-1),
            stdout: self.text(),
            stderr,
        };
        (run, std::mem::take(&mut self.lines))
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
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
    /// The `upgrade` event: the upgrade section of `kwin plan` / `kwin apply`.
    pub fn upgrade_section(&self) -> Value {
        self.events()
            .into_iter()
            .find(|e| e["event"] == "upgrade")
            .unwrap_or_else(|| panic!("no upgrade section:\n{self}"))
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
