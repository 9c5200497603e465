//! Shared by the reliability and security tests: a real `sshd` on 127.0.0.1 (started and
//! stopped by the test), peak-memory measurement, and running one test alone in a process.

#![allow(dead_code)]

use kwin_engine::plan::SshSpec;
use kwin_engine::transport::ssh::{SshOptions, SshTransport};
use kwin_engine::transport::Shell;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Peak resident set size of this process so far (VmHWM), in bytes.
pub fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Run test `name` of this binary alone in a child process (peak memory is then its own);
/// `true` in that child, where the caller does the measured work.
pub fn alone(name: &str) -> bool {
    if std::env::var("KWIN_ALONE").as_deref() == Ok(name) {
        return true;
    }
    let exe = std::env::current_exe().expect("test binary");
    let out = Command::new(exe)
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env("KWIN_ALONE", name)
        .output()
        .expect("run the test binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{name} in its own process failed:\n{text}"
    );
    assert!(text.contains("1 passed"), "{name} did not run:\n{text}");
    false
}

pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// One sshd on 127.0.0.1 (root login with a key), in a private mount namespace with its own
/// `/root`, so the machine's shell start-up files play no part.
pub struct Sshd {
    pub dir: tempfile::TempDir,
    pub port: u16,
    child: Option<Child>,
    pub host_fp: String,
}

pub fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Sshd {
    pub fn start() -> Option<Sshd> {
        if !is_root() || !Path::new("/usr/sbin/sshd").exists() {
            eprintln!("skipping the ssh part: it needs root and /usr/sbin/sshd");
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("kwin-rel-ssh-")
            .tempdir()
            .expect("tempdir");
        let d = dir.path();
        std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
        for k in ["host_ed25519", "id_ed25519"] {
            run_ok(
                Command::new("ssh-keygen")
                    .args(["-q", "-t", "ed25519", "-N", "", "-C", "kwin-test", "-f"])
                    .arg(d.join(k)),
            );
        }
        std::fs::create_dir_all(d.join("roothome")).expect("mkdir");
        std::fs::copy(d.join("id_ed25519.pub"), d.join("authorized_keys")).expect("copy");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
        std::fs::write(
            d.join("sshd_config"),
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_ed25519\nPidFile none\n\
                 AuthorizedKeysFile {d}/authorized_keys\nUsePAM no\nStrictModes no\nUseDNS no\n\
                 PermitRootLogin prohibit-password\nPasswordAuthentication no\n\
                 MaxStartups 100:30:200\nSubsystem sftp /usr/lib/openssh/sftp-server\n",
                d = d.display()
            ),
        )
        .expect("sshd_config");
        let fp = run_ok(
            Command::new("ssh-keygen")
                .arg("-lf")
                .arg(d.join("host_ed25519.pub")),
        );
        let host_fp = fp.split_whitespace().nth(1).unwrap_or_default().to_string();
        let mut s = Sshd {
            dir,
            port,
            child: None,
            host_fp,
        };
        s.spawn();
        Some(s)
    }

    fn spawn(&mut self) {
        let d = self.dir.path().display().to_string();
        let script = format!(
            "mkdir -p /run/sshd && mount --bind {d}/roothome /root && \
             exec /usr/sbin/sshd -D -e -f {d}/sshd_config"
        );
        let log = std::fs::File::create(self.dir.path().join("sshd.log")).expect("log");
        let child = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("unshare sshd");
        self.child = Some(child);
        let t0 = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(t0.elapsed() < Duration::from_secs(10), "sshd did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn transport(&self) -> SshTransport {
        let spec = SshSpec {
            address: "127.0.0.1".into(),
            port: self.port,
            user: "root".into(),
            private_key: Some(self.dir.path().join("id_ed25519")),
            passphrase: None,
            password: None,
            host_key: Some(self.host_fp.clone()),
            become_root: false,
            shell: Shell::Posix,
            connect_timeout_secs: 10,
            proxy_jump: None,
        };
        let mut o = SshOptions::new(self.dir.path().join(".kwin/known_hosts"));
        o.user_ssh_dir = None;
        o.ssh_agent = None;
        SshTransport::new("out-test", &spec, o)
    }

    /// Stop sshd (sessions end with it).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// A new host key, and sshd restarted with it (as after a reinstall, or an impostor).
    pub fn rekey(&mut self) {
        self.stop();
        let key = self.dir.path().join("host_ed25519");
        let _ = std::fs::remove_file(&key);
        let _ = std::fs::remove_file(key.with_extension("pub"));
        run_ok(
            Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-C", "kwin-test", "-f"])
                .arg(&key),
        );
        let fp = run_ok(
            Command::new("ssh-keygen")
                .arg("-lf")
                .arg(key.with_extension("pub")),
        );
        self.host_fp = fp.split_whitespace().nth(1).unwrap_or_default().to_string();
        self.spawn();
    }

    /// The client key that logs in as root.
    pub fn client_key(&self) -> PathBuf {
        self.dir.path().join("id_ed25519")
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // sshd's session children die with their connections; the listener goes here.
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
