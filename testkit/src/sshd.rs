//! A private OpenSSH server on 127.0.0.1 and a free port, in a mount namespace of its own:
//! there `/etc/passwd`, `/etc/shadow`, `/etc/group`, `/etc/sudoers.d` and `/root` are
//! bind-mounted copies, so users `kwuser` (passwordless sudo) and `kwnopw` (a password, no
//! sudo) exist for it, and nothing on the machine changes. Keys are made with `ssh-keygen`,
//! which also gives the fingerprints tests expect. Needs root, `/usr/sbin/sshd`, `unshare`
//! and `openssl` (a lab peer: use it from a [`crate::lab_test!`]).

use kwin_engine::plan::SshSpec;
use kwin_engine::transport::ssh::{SshOptions, SshTransport};
use kwin_engine::transport::Shell;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The passphrase of the client key `id_pass`.
pub const PASSPHRASE: &str = "kwin-test-passphrase";
/// The password of `kwnopw`.
pub const PASSWORD: &str = "kwin-test-password-9";

/// `sh -c cmd`: its stdout; a failure fails the test.
pub fn sh(cmd: &str) -> String {
    let out = Command::new("sh")
        .args(["-c", cmd])
        .output()
        .unwrap_or_else(|e| panic!("sh -c {cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Write `text` to `path` with `mode`; a failure fails the test.
pub fn write(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// `mkdir -p path` with `mode`; a failure fails the test.
pub fn mkdir(path: &Path, mode: u32) {
    std::fs::create_dir_all(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// A new ed25519 key pair at `path` (and `path.pub`).
pub fn keygen(path: &Path, passphrase: &str) {
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(path.with_extension("pub"));
    let out = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-C",
            "kwin-test",
            "-N",
            passphrase,
            "-f",
        ])
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("ssh-keygen: {e}"));
    assert!(out.status.success(), "ssh-keygen failed");
}

/// `SHA256:...` of a public key file, as OpenSSH computes it.
pub fn fingerprint(pub_file: &Path) -> String {
    let out = sh(&format!("ssh-keygen -lf {}", pub_file.display()));
    out.split_whitespace()
        .nth(1)
        .unwrap_or_else(|| panic!("ssh-keygen -lf: {out}"))
        .to_string()
}

/// A TCP port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("bind: {e}"))
}

/// Every descendant of `pid` (children first found, deepest last).
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(p) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|s| s.parse::<u32>().ok());
        if let Some(pp) = ppid {
            parent_of.push((p, pp));
        }
    }
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for (child, _) in parent_of.iter().filter(|(_, pp)| *pp == p) {
            out.push(*child);
            frontier.push(*child);
        }
    }
    out
}

/// One sshd with its keys, users and files; stopped on drop.
pub struct Sshd {
    pub dir: tempfile::TempDir,
    pub port: u16,
    child: Option<Child>,
    /// The host key's `SHA256:...` fingerprint.
    pub host_fp: String,
    /// The host's second key, ECDSA (kwin asks for ed25519 first): its fingerprint.
    pub host_ecdsa_fp: String,
}

impl Sshd {
    pub fn start() -> Sshd {
        Sshd::start_with("")
    }

    /// With extra `sshd_config` lines.
    pub fn start_with(extra_config: &str) -> Sshd {
        crate::tier::enter_lab();
        assert!(
            Path::new("/usr/sbin/sshd").exists(),
            "this lab test needs /usr/sbin/sshd (apt-get install openssh-server)"
        );
        let dir = tempfile::Builder::new()
            .prefix("kwin-ssh-test-")
            .tempdir()
            .unwrap_or_else(|e| panic!("tempdir: {e}"));
        let d = dir.path().to_path_buf();
        mkdir(&d, 0o755);
        keygen(&d.join("host_ed25519"), "");
        sh(&format!(
            "rm -f {k} {k}.pub && ssh-keygen -q -t ecdsa -b 256 -N '' -f {k}",
            k = d.join("host_ecdsa").display()
        ));
        keygen(&d.join("id_ed25519"), "");
        keygen(&d.join("id_pass"), PASSPHRASE);
        keygen(&d.join("id_wrong"), "");
        let authorized = format!(
            "{}{}",
            std::fs::read_to_string(d.join("id_ed25519.pub")).unwrap_or_default(),
            std::fs::read_to_string(d.join("id_pass.pub")).unwrap_or_default()
        );
        mkdir(&d.join("auth"), 0o755);
        for u in ["root", "kwuser", "kwnopw"] {
            write(&d.join("auth").join(u), &authorized, 0o644);
        }

        // Users that exist only inside the sshd's mount namespace.
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        let used: Vec<u32> = passwd
            .lines()
            .filter_map(|l| l.split(':').nth(2)?.parse().ok())
            .collect();
        let uid = (4200u32..60000)
            .find(|u| !used.contains(u) && !used.contains(&(u + 1)))
            .unwrap_or(4200);
        let hash = sh(&format!("openssl passwd -6 {PASSWORD}"));
        let etc = d.join("etc");
        mkdir(&etc, 0o755);
        let home = |u: &str| d.join("home").join(u);
        write(
            &etc.join("passwd"),
            &format!(
                "{passwd}kwuser:x:{uid}:{uid}::{}:/bin/sh\nkwnopw:x:{u2}:{u2}::{}:/bin/sh\n",
                home("kwuser").display(),
                home("kwnopw").display(),
                u2 = uid + 1
            ),
            0o644,
        );
        let shadow = std::fs::read_to_string("/etc/shadow").unwrap_or_default();
        write(
            &etc.join("shadow"),
            &format!(
                "{shadow}kwuser:*:19000:0:99999:7:::\nkwnopw:{}:19000:0:99999:7:::\n",
                hash.trim()
            ),
            0o640,
        );
        let group = std::fs::read_to_string("/etc/group").unwrap_or_default();
        write(
            &etc.join("group"),
            &format!("{group}kwuser:x:{uid}:\nkwnopw:x:{u2}:\n", u2 = uid + 1),
            0o644,
        );
        mkdir(&d.join("sudoers.d"), 0o755);
        write(
            &d.join("sudoers.d/kwin-test"),
            "kwuser ALL=(ALL:ALL) NOPASSWD: ALL\n",
            0o440,
        );
        for (u, id) in [("kwuser", uid), ("kwnopw", uid + 1)] {
            mkdir(&home(u), 0o755);
            std::os::unix::fs::chown(home(u), Some(id), Some(id))
                .unwrap_or_else(|e| panic!("chown: {e}"));
        }
        mkdir(&d.join("roothome"), 0o700);
        mkdir(&d.join("rootonly"), 0o700);
        mkdir(&d.join("shared"), 0o777);

        let port = free_port();
        write(
            &d.join("sshd_config"),
            &format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_ed25519\nHostKey {d}/host_ecdsa\n\
                 PidFile none\nAuthorizedKeysFile {d}/auth/%u\nUsePAM no\nStrictModes no\n\
                 UseDNS no\nPermitRootLogin prohibit-password\nPasswordAuthentication yes\n\
                 KbdInteractiveAuthentication no\nMaxStartups 200:30:400\nMaxSessions 100\n\
                 MaxAuthTries 10\nSubsystem sftp /usr/lib/openssh/sftp-server\n{extra_config}\n",
                d = d.display()
            ),
            0o644,
        );
        let host_fp = fingerprint(&d.join("host_ed25519.pub"));
        let host_ecdsa_fp = fingerprint(&d.join("host_ecdsa.pub"));
        let mut s = Sshd {
            dir,
            port,
            child: None,
            host_fp,
            host_ecdsa_fp,
        };
        s.spawn();
        s
    }

    /// A file under the server's directory.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// The client key that logs in (as root, kwuser or kwnopw).
    pub fn client_key(&self) -> PathBuf {
        self.path("id_ed25519")
    }

    /// Start sshd (again, after [`Sshd::stop`]) and wait until it listens.
    pub fn spawn(&mut self) {
        let d = self.dir.path().display().to_string();
        let script = format!(
            "mkdir -p /run/sshd && mount --bind {d}/etc/passwd /etc/passwd && \
             mount --bind {d}/etc/shadow /etc/shadow && \
             mount --bind {d}/etc/group /etc/group && \
             mount --bind {d}/sudoers.d /etc/sudoers.d && \
             mount --bind {d}/roothome /root && \
             exec /usr/sbin/sshd -D -e -f {d}/sshd_config"
        );
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path("sshd.log"))
            .unwrap_or_else(|e| panic!("sshd.log: {e}"));
        let child = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("unshare: {e}"));
        self.child = Some(child);
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    panic!(
                        "sshd exited ({status}): {}",
                        std::fs::read_to_string(self.path("sshd.log")).unwrap_or_default()
                    );
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("sshd did not listen on port {}", self.port);
    }

    /// Stop the listening sshd and every session process under it.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            for pid in descendants(c.id()) {
                let _ = Command::new("kill")
                    .args(["-9", &pid.to_string()])
                    .stderr(Stdio::null())
                    .status();
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// A new host key, and sshd restarted with it (as after a reinstall, or an impostor).
    pub fn rekey(&mut self) {
        self.stop();
        keygen(&self.path("host_ed25519"), "");
        self.host_fp = fingerprint(&self.path("host_ed25519.pub"));
        self.spawn();
    }

    /// How kwin reaches the server as `user` (root logs in directly, others with sudo).
    pub fn spec(&self, user: &str) -> SshSpec {
        SshSpec {
            address: "127.0.0.1".into(),
            port: self.port,
            user: user.into(),
            private_key: Some(self.client_key()),
            passphrase: None,
            password: None,
            host_key: Some(self.host_fp.clone()),
            become_root: user != "root",
            shell: Shell::Posix,
            connect_timeout_secs: 5,
            proxy_jump: None,
        }
    }

    /// Options that read no file of the machine's user (`~/.ssh`, the agent).
    pub fn opts(&self) -> SshOptions {
        let mut o = SshOptions::new(self.path(".kwin/known_hosts"));
        o.user_ssh_dir = None;
        o.ssh_agent = None;
        o
    }

    /// kwin's SSH transport to the server as `user`.
    pub fn transport(&self, user: &str) -> SshTransport {
        SshTransport::new("h1", &self.spec(user), self.opts())
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.stop();
    }
}
