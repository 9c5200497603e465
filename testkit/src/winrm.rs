//! The lab's WinRM stand-in (`lab/winrm-stand-in`: a WinRM server whose NTLM side is the real
//! `pyspnego` acceptor, scripts run by `/bin/sh`; a stand-in, never Windows).
//!
//! - [`venv`] / [`python`]: its Python environment, set up once per test process
//!   (`lab/winrm-stand-in/setup.sh`); a failure fails the test.
//! - [`Server`]: a stand-in process, started and read until it says it is ready; its
//!   stdout lines (ready, rebooting) stay readable; killed on drop.
//! - [`TwoListeners`]: one stand-in as two Windows hosts, `ww1` over HTTP (NTLM) and `ww2`
//!   over HTTPS (Basic, a self-signed certificate), with its operations log.
//! - [`StandInHost`] ([`start_stand_in`]): the stand-in as a Windows host with files of its
//!   own, for end-to-end tests: `isolated-stand-in.sh` runs it in a mount namespace where
//!   /etc and /var/lib are overlays writing into a temp dir and /run is a tmpfs, with the
//!   lab's stand-in programs first on PATH (`kubeadm` is kubeadm-stand-in). `reboot`,
//!   `shutdown`, `systemctl`, `poweroff` and `halt` on that PATH refuse to run: the stand-in
//!   shares the machine's kernel, and nothing a test sends it may restart the machine.

use crate::host::workspace;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::sync::OnceLock;
use std::time::Duration;

/// The stand-in's virtual environment (`KWIN_WINRM_VENV`, default `target/winrm-venv`), set
/// up once per test process.
pub fn venv() -> PathBuf {
    static VENV: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let r = VENV.get_or_init(|| {
        let venv = std::env::var_os("KWIN_WINRM_VENV")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace().join("target/winrm-venv"));
        let out = Command::new("bash")
            .arg(workspace().join("lab/winrm-stand-in/setup.sh"))
            .env("KWIN_WINRM_VENV", &venv)
            .output()
            .map_err(|e| format!("cannot run setup.sh: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "setup.sh failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(venv)
    });
    match r {
        Ok(v) => v.clone(),
        Err(e) => panic!("this lab test needs the WinRM stand-in, which cannot be set up: {e}"),
    }
}

/// The stand-in's Python.
pub fn python() -> PathBuf {
    venv().join("bin/python")
}

/// `lab/winrm-stand-in/<name>`.
pub fn lab_file(name: &str) -> PathBuf {
    workspace().join("lab/winrm-stand-in").join(name)
}

/// A running stand-in process; killed on drop.
pub struct Server {
    child: Child,
    lines: Receiver<String>,
    /// Every stdout line seen so far.
    pub seen: Vec<String>,
    /// The first `winrm-stand-in ready ...` line.
    pub ready: String,
}

impl Server {
    /// Start `cmd` (stdout is read here) and wait until it prints its ready line.
    pub fn spawn(mut cmd: Command) -> Server {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start the WinRM stand-in: {e}"));
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
                Err(e) => panic!("the WinRM stand-in is not ready: {e} ({seen:?})"),
            }
        };
        seen.push(ready.clone());
        Server {
            child,
            lines: rx,
            seen,
            ready,
        }
    }

    /// `host:port` of `http=` or `https=` in the ready line.
    pub fn addr(&self, key: &str) -> String {
        self.ready
            .split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no {key} in the ready line: {}", self.ready))
    }

    /// The port of `http=` or `https=` in the ready line.
    pub fn port(&self, key: &str) -> String {
        let a = self.addr(key);
        a.rsplit_once(':')
            .map(|(_, p)| p.to_string())
            .unwrap_or_else(|| panic!("no port in {a}"))
    }

    /// Read the stdout lines printed so far.
    pub fn drain(&mut self) {
        while let Ok(l) = self.lines.try_recv() {
            self.seen.push(l);
        }
    }

    /// How many times the host restarted.
    pub fn reboots(&mut self) -> usize {
        self.drain();
        self.seen
            .iter()
            .filter(|l| l.starts_with("winrm-stand-in rebooting"))
            .count()
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

    /// The process id (for tests that signal it).
    pub fn id(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How to start the isolated stand-in host.
pub struct Options<'a> {
    /// Environment variable holding the WinRM password, and the password.
    pub password_env: &'a str,
    pub password: &'a str,
    /// `--reboot-down-secs`.
    pub down_secs: u32,
    /// The real kubeadm, for `kubeadm version` on the host.
    pub kubeadm: Option<&'a str>,
}

/// The stand-in as a Windows host with files of its own.
pub struct StandInHost {
    pub server: Server,
    /// The HTTP port.
    pub port: String,
    /// The stand-in host's private files: `upper/etc`, `upper/var-lib`.
    host_dir: PathBuf,
    /// The stand-in server's state (boot-time).
    state_dir: PathBuf,
    _dir: tempfile::TempDir,
}

impl StandInHost {
    pub fn reboots(&mut self) -> usize {
        self.server.reboots()
    }

    pub fn wait_back(&mut self, timeout: Duration) {
        self.server.wait_back(timeout)
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

/// The isolated stand-in Windows host (see the module docs).
pub fn start_stand_in(o: &Options<'_>) -> StandInHost {
    let venv = venv();
    let dir = tempfile::tempdir().expect("tmp");
    let host_dir = dir.path().join("host");
    let state_dir = dir.path().join("winrm-state");
    let bin = dir.path().join("bin");
    for d in [&host_dir, &state_dir, &bin] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    for (name, target) in [
        ("kubeadm", "kubeadm-stand-in"),
        ("windows-feature-stand-in", "windows-feature-stand-in"),
    ] {
        std::os::unix::fs::symlink(lab_file(target), bin.join(name)).expect("symlink");
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
    let on_boot = format!("{} boot", lab_file("windows-feature-stand-in").display());
    let down = o.down_secs.to_string();
    let mut cmd = Command::new(lab_file("isolated-stand-in.sh"));
    cmd.arg(&host_dir)
        .arg(venv.join("bin/python"))
        .arg(lab_file("server.py"))
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
        .stderr(Stdio::null());
    let server = Server::spawn(cmd);
    let port = server.port("http=");
    StandInHost {
        server,
        port,
        host_dir,
        state_dir,
        _dir: dir,
    }
}

/// One stand-in (its state in a temp dir) listening on HTTP (NTLM, message encryption) and
/// HTTPS (Basic, a self-signed certificate) for user `Administrator`, whose password it reads
/// from `password_env`; every WinRM operation it serves is logged to [`TwoListeners::ops`].
pub struct TwoListeners {
    _server: Server,
    /// `host:port` of each listener.
    pub http: String,
    pub https: String,
    /// The HTTPS certificate's SHA-256 fingerprint.
    pub fingerprint: String,
    /// The operations log (`--ops-log`: one JSON line per operation).
    pub ops: PathBuf,
    password_env: String,
    _state: tempfile::TempDir,
}

impl TwoListeners {
    /// Start it with `password` in `password_env` (the plan names the same variable).
    pub fn start(password_env: &str, password: &str) -> Self {
        let state = tempfile::tempdir().expect("tmp");
        let ops = state.path().join("ops.jsonl");
        let mut cmd = Command::new(python());
        cmd.arg(lab_file("server.py"))
            .args(["--http", "127.0.0.1:0", "--https", "127.0.0.1:0"])
            .args(["--user", "Administrator", "--password-env", password_env])
            .args(["--auth", "ntlm,basic", "--state"])
            .arg(state.path())
            .arg("--ops-log")
            .arg(&ops)
            .env(password_env, password)
            .stderr(Stdio::null());
        let server = Server::spawn(cmd);
        let sums = std::fs::read_to_string(state.path().join("cert.sha256")).expect("cert.sha256");
        TwoListeners {
            http: server.addr("http="),
            https: server.addr("https="),
            fingerprint: sums.lines().next().expect("fingerprint").trim().to_string(),
            _server: server,
            ops,
            password_env: password_env.to_string(),
            _state: state,
        }
    }

    /// The port of `http` or `https`.
    pub fn port(addr: &str) -> &str {
        addr.rsplit_once(':').map(|(_, p)| p).expect("port")
    }

    /// The plan's `[defaults.windows]` and its two hosts: `ww1` over HTTP, `ww2` over HTTPS
    /// with Basic and the certificate pinned.
    pub fn hosts_toml(&self) -> String {
        format!(
            r#"
[defaults.windows]
transport = "winrm"
user = "Administrator"
password_env = "{env}"

[[hosts]]
name = "ww1"
address = "127.0.0.1"
os = "windows"
https = false
port = {http}

[[hosts]]
name = "ww2"
address = "127.0.0.1"
os = "windows"
https = true
auth = "basic"
port = {https}
cert_fingerprint = "{fp}"
"#,
            env = self.password_env,
            http = Self::port(&self.http),
            https = Self::port(&self.https),
            fp = self.fingerprint,
        )
    }
}
