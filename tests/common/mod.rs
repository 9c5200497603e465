//! Shared harness of the end-to-end tests: the lab (real sshd hosts, brought up here with
//! `lab/up.sh`), the `kwin` binary, and plans written into a temp dir.
//!
//! The tests need root (network namespaces). Without root they say so and pass without
//! running; with root, any problem bringing the lab up is a failure.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// The lab the end-to-end tests use (`KWIN_LAB_ID`, default 1): a lab of its own, so the
/// tests run while the default lab (0) is up for something else.
pub fn lab_id() -> String {
    std::env::var("KWIN_LAB_ID").unwrap_or_else(|_| "1".to_string())
}

/// A running lab; torn down on drop.
pub struct Lab {
    pub inventory: PathBuf,
    pub ssh_config: PathBuf,
}

/// Bring up `n` lab hosts, or `None` (with a message) when not root.
pub fn lab(n: usize) -> Option<Lab> {
    if !is_root() {
        eprintln!("skipping end-to-end test: it needs root to start lab hosts (lab/up.sh)");
        return None;
    }
    let names = kwin_engine::module::Registry::names(&kwin_modules::Builtin);
    for m in ["file", "directory", "line_in_file", "sysctl", "command"] {
        assert!(
            names.contains(&m),
            "the end-to-end plans need the Linux module `{m}`, which this build does not have"
        );
    }
    let out = Command::new("bash")
        .arg(repo().join("lab/up.sh"))
        .env("KWIN_LAB_ID", lab_id())
        .arg(n.to_string())
        .current_dir(repo())
        .output()
        .expect("run lab/up.sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "lab/up.sh {n} failed:\n{text}");
    // "lab: 3 hosts up in 1.0s; inventory target/lab/hosts.toml"
    let inv = text
        .lines()
        .rev()
        .find_map(|l| l.split("inventory ").nth(1))
        .map(|p| p.trim().to_string())
        .unwrap_or_else(|| "target/lab/hosts.toml".into());
    let inventory = if Path::new(&inv).is_absolute() {
        PathBuf::from(inv)
    } else {
        repo().join(inv)
    };
    assert!(
        inventory.exists(),
        "no inventory at {}:\n{text}",
        inventory.display()
    );
    let ssh_config = inventory.with_file_name("ssh_config");
    Some(Lab {
        inventory,
        ssh_config,
    })
}

impl Lab {
    /// Run `cmd` on `host` with the system ssh client; stdout.
    pub fn ssh(&self, host: &str, cmd: &str) -> String {
        let out = Command::new("ssh")
            .arg("-F")
            .arg(&self.ssh_config)
            .arg(host)
            .arg(cmd)
            .output()
            .expect("ssh");
        assert!(
            out.status.success(),
            "ssh {host} {cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// sha256 of each path (or "missing") on `host`.
    pub fn hashes(&self, host: &str, paths: &[&str]) -> String {
        let script: Vec<String> = paths
            .iter()
            .map(|p| format!("sha256sum {p} 2>/dev/null || echo missing {p}"))
            .collect();
        self.ssh(host, &script.join("; "))
    }

    pub fn fault(&self, what: &str, host: &str) {
        let out = Command::new("bash")
            .arg(repo().join("lab/fault.sh"))
            .env("KWIN_LAB_ID", lab_id())
            .args([what, host])
            .current_dir(repo())
            .output()
            .expect("lab/fault.sh");
        assert!(
            out.status.success(),
            "lab/fault.sh {what} {host}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo().join("lab/down.sh"))
            .env("KWIN_LAB_ID", lab_id())
            .current_dir(repo())
            .output();
    }
}

/// A temp dir holding `plan.toml`: `text` with its `inventory` pointing at the lab's.
pub fn plan_dir(lab: &Lab, text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tmp");
    let text: String = text
        .lines()
        .map(|l| {
            if l.starts_with("inventory = ") {
                format!("inventory = {:?}", lab.inventory.display().to_string())
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(dir.path().join("plan.toml"), text).expect("write plan");
    dir
}

pub struct Kwin {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Kwin {
    pub fn last_line(&self) -> &str {
        self.stdout.lines().last().unwrap_or("")
    }
    /// JSON events (with `--output json`).
    pub fn events(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
    pub fn run_id(&self) -> String {
        self.events()
            .iter()
            .find(|e| e["event"] == "run_started")
            .and_then(|e| e["run_id"].as_str().map(str::to_string))
            .expect("run_started event")
    }
    pub fn task(&self, host: &str, task: &str) -> serde_json::Value {
        self.events()
            .into_iter()
            .find(|e| e["event"] == "task_finished" && e["host"] == host && e["task"] == task)
            .unwrap_or_else(|| panic!("no task_finished for {host}/{task}:\n{}", self.stdout))
    }
    pub fn host(&self, host: &str) -> serde_json::Value {
        self.events()
            .into_iter()
            .find(|e| e["event"] == "host_finished" && e["host"] == host)
            .unwrap_or_else(|| panic!("no host_finished for {host}:\n{}", self.stdout))
    }
    pub fn summary(&self) -> serde_json::Value {
        serde_json::from_str(self.last_line()).expect("last line is JSON")
    }
}

impl std::fmt::Display for Kwin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

pub fn kwin(dir: &Path, args: &[&str]) -> Kwin {
    let out: Output = Command::new(env!("CARGO_BIN_EXE_kwin"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run kwin");
    Kwin {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Round trips (remote runs and puts) of host `host` in run `run_id`, from its log.
pub fn round_trips(dir: &Path, run_id: &str, host: &str) -> usize {
    let log = dir
        .join(".kwin/logs")
        .join(run_id)
        .join(format!("{host}.log"));
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    text.lines()
        .filter(|l| {
            l.starts_with("[+")
                && (l.contains("] run #") && l.contains(" bytes, timeout") || l.contains("] put #"))
        })
        .count()
}
