//! The lab's WinRM stand-in as a Windows host with files of its own, for end-to-end tests:
//! `lab/winrm-stand-in/isolated-stand-in.sh` runs the server in a mount namespace where /etc
//! and /var/lib are overlays writing into a temp dir and /run is a tmpfs, with the lab's
//! stand-in programs first on PATH (`kubeadm` is kubeadm-stand-in). `reboot`, `shutdown`,
//! `systemctl`, `poweroff` and `halt` on that PATH refuse to run: the stand-in shares the
//! machine's kernel, and nothing a test sends it may restart the machine.
#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

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

/// Whether CI asked for the stand-in (a test that cannot start it fails instead of skipping).
pub fn stand_in_required() -> bool {
    std::env::var("KWIN_REQUIRE_WINRM_STANDIN").is_ok_and(|s| !s.is_empty() && s != "0")
}

pub fn setup_venv() -> PathBuf {
    let venv = repo().join("target/winrm-venv");
    let setup = Command::new("bash")
        .arg(repo().join("lab/winrm-stand-in/setup.sh"))
        .env("KWIN_WINRM_VENV", &venv)
        .output()
        .expect("run lab/winrm-stand-in/setup.sh");
    assert!(
        setup.status.success(),
        "cannot set up the WinRM stand-in: {}",
        String::from_utf8_lossy(&setup.stderr)
    );
    venv
}

/// How to start the stand-in host.
pub struct Options<'a> {
    /// Environment variable holding the WinRM password, and the password.
    pub password_env: &'a str,
    pub password: &'a str,
    /// `--reboot-down-secs`.
    pub down_secs: u32,
    /// The real kubeadm, for `kubeadm version` on the host.
    pub kubeadm: Option<&'a str>,
}

pub struct StandIn {
    child: Child,
    pub port: String,
    lines: Receiver<String>,
    /// Every stdout line seen so far.
    pub seen: Vec<String>,
    /// The stand-in host's private files: `upper/etc`, `upper/var-lib`.
    host_dir: PathBuf,
    /// The stand-in server's state (boot-time).
    state_dir: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl StandIn {
    /// Read the stdout lines printed so far.
    pub fn drain(&mut self) {
        while let Ok(l) = self.lines.try_recv() {
            self.seen.push(l);
        }
    }

    /// Wait until the host is up again after a reboot (a new ready line), or panic.
    pub fn wait_back(&mut self, timeout: Duration) {
        self.drain();
        let readies = |seen: &[String]| {
            seen.iter()
                .filter(|l| l.starts_with("winrm-stand-in ready"))
                .count()
        };
        let want = self.reboots() + 1;
        while readies(&self.seen) < want {
            match self.lines.recv_timeout(timeout) {
                Ok(l) => self.seen.push(l),
                Err(e) => panic!("the stand-in did not come back: {e} ({:?})", self.seen),
            }
        }
    }

    pub fn reboots(&mut self) -> usize {
        self.drain();
        self.seen
            .iter()
            .filter(|l| l.starts_with("winrm-stand-in rebooting"))
            .count()
    }

    pub fn boot_time(&self) -> String {
        std::fs::read_to_string(self.state_dir.join("boot-time"))
            .expect("boot-time")
            .trim()
            .to_string()
    }

    /// A file the stand-in host wrote under its private /etc or /var/lib.
    pub fn host_file(&self, path: &str) -> Option<String> {
        let p = if let Some(rest) = path.strip_prefix("/etc/") {
            self.host_dir.join("upper/etc").join(rest)
        } else if let Some(rest) = path.strip_prefix("/var/lib/") {
            self.host_dir.join("upper/var-lib").join(rest)
        } else {
            panic!("{path} is not under the stand-in host's private /etc or /var/lib")
        };
        std::fs::read_to_string(p).ok()
    }
}

/// The stand-in Windows host: isolated files, the lab's stand-in programs first on PATH
/// (`kubeadm` is kubeadm-stand-in), the real kubeadm for `kubeadm version`.
pub fn start_stand_in(venv: &Path, o: &Options<'_>) -> StandIn {
    let dir = tempfile::tempdir().expect("tmp");
    let host_dir = dir.path().join("host");
    let state_dir = dir.path().join("winrm-state");
    let bin = dir.path().join("bin");
    for d in [&host_dir, &state_dir, &bin] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let lab = repo().join("lab/winrm-stand-in");
    for (name, target) in [
        ("kubeadm", "kubeadm-stand-in"),
        ("windows-feature-stand-in", "windows-feature-stand-in"),
    ] {
        std::os::unix::fs::symlink(lab.join(target), bin.join(name)).expect("symlink");
    }
    // The stand-in shares the machine's kernel: whatever reaches its shell must never
    // restart the machine.
    for name in ["reboot", "shutdown", "systemctl", "poweroff", "halt"] {
        let p = bin.join(name);
        std::fs::write(
            &p,
            format!("#!/bin/sh\necho 'stand-in host: {name} refused (it would restart the machine)' >&2\nexit 1\n"),
        )
        .expect("write stub");
        let mut perm = std::fs::metadata(&p).expect("stub").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(&p, perm).expect("chmod stub");
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let on_boot = format!("{} boot", lab.join("windows-feature-stand-in").display());
    let down = o.down_secs.to_string();
    let mut child = Command::new(lab.join("isolated-stand-in.sh"))
        .arg(&host_dir)
        .arg(venv.join("bin/python"))
        .arg(lab.join("server.py"))
        .args(["--http", "127.0.0.1:0", "--user", "Administrator"])
        .args(["--password-env", o.password_env, "--auth", "ntlm"])
        .args([
            "--reboot-down-secs",
            &down,
            "--on-boot",
            &on_boot,
            "--state",
        ])
        .arg(&state_dir)
        .env(o.password_env, o.password)
        .env(
            "KWIN_STANDIN_KUBEADM",
            o.kubeadm.unwrap_or("/nonexistent/kubeadm"),
        )
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the stand-in");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let ready = loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(l) if l.starts_with("winrm-stand-in ready") => break l,
            Ok(l) => seen.push(l),
            Err(e) => panic!("the isolated WinRM stand-in is not ready: {e} ({seen:?})"),
        }
    };
    seen.push(ready.clone());
    let port = ready
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http="))
        .and_then(|a| a.rsplit_once(':').map(|(_, p)| p.to_string()))
        .expect("port in ready line");
    StandIn {
        child,
        port,
        lines: rx,
        seen,
        host_dir,
        state_dir,
        _dir: dir,
    }
}

pub fn events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

pub fn summary(stdout: &str) -> Value {
    events(stdout)
        .into_iter()
        .rfind(|e| e["event"] == "summary")
        .unwrap_or_else(|| panic!("no summary in:\n{stdout}"))
}

/// ww1's tasks in the order they finished, with their status.
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

/// Run the kwin binary in `dir` against stand-in hosts: `(exit code, stdout, stderr)`.
pub fn kwin(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kwin"));
    c.args(args)
        .current_dir(dir)
        .env("KWIN_WINRM_STAND_IN", "1");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("run kwin");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
