//! `ssh` transport (ssh2/libssh2), for Linux hosts (`sh`) and for Windows hosts reached over
//! OpenSSH (`ssh-powershell`, scripts run by `powershell.exe`).
//!
//! # Shape
//! Each [`SshTransport`] owns at most one SSH session, reused for every operation: a run is one
//! exec channel (script over stdin, no pty, nothing else sent first), file transfers use one
//! SFTP channel opened on first use and kept. The blocking libssh2 session lives on a
//! dedicated thread per connection (`session.rs`); the async side sends it jobs over a
//! channel and awaits a oneshot reply, so 50 hosts connect and run in parallel. Jobs for one
//! host run one after the other.
//!
//! # Connection settings
//! The plan's [`SshSpec`] is merged with the user's OpenSSH client config (`~/.ssh/config`,
//! `$HOME` respected; see [`SshOptions::user_ssh_dir`]), looked up by the plan's `address` as
//! a `Host` alias. Explicit plan values win; the config fills gaps:
//! - `HostName` replaces the address when the address matches a `Host` block;
//! - `Port` applies when the plan's port is 22 (the default: [`SshSpec`] cannot tell an
//!   explicit 22 from none);
//! - `User` applies when the plan's user is the default (`root`, or `Administrator` for
//!   `ssh-powershell`); become then follows the effective user (`sudo -n` unless root);
//! - `IdentityFile`s apply when the plan names no `private_key`;
//! - `ProxyJump` applies when the plan sets no `proxy_jump` (a `ProxyCommand` is refused).
//!
//! # Jump hosts
//! A host's [`ProxyJump`] (or `ProxyJump` of the config) is resolved here into a second
//! [`Target`]: a plan host with its own settings, or an address looked up in the config,
//! logged into with the target's keys (never its password). `session.rs` opens the jump
//! session first (host key verified like any), then a `direct-tcpip` channel to the target
//! bridged to a socket pair (`jump.rs`), and runs the target's session over it. One jump at
//! most: a jump host that would need one itself is refused.
//!
//! Authentication order and its rules: see `ssh/auth.rs`.
//!
//! # Host keys
//! Always verified before any credential is sent: against the plan's pinned `host_key`
//! (`SHA256:...` as `ssh-keygen -lf` prints it) if set; otherwise against `~/.ssh/known_hosts`,
//! `/etc/ssh/ssh_known_hosts` and kwin's own file (`.kwin/known_hosts`). A different key is
//! [`TransportError::HostKeyMismatch`] with both fingerprints; an unknown key is
//! [`TransportError::HostKeyUnknown`] unless [`SshOptions::accept_new_host_keys`], in which case
//! it is appended to kwin's file and reported by [`SshTransport::recorded_new_key`].
//!
//! # Timeouts and failures
//! TCP connect and each blocking step of the handshake and login are bounded by the plan's
//! `connect_timeout`. A run is bounded by its timeout (exactly: non-blocking I/O with `poll`);
//! a file transfer by [`SshOptions::io_timeout`] of silence. A timeout, a lost connection or
//! an oversized output retires the session; the next operation connects afresh. Idle
//! sessions send keepalives. Nothing retries here: the engine does, by
//! [`TransportError::is_retryable`].

mod auth;
mod channel_io;
mod config;
mod jump;
mod known_hosts;
mod session;
mod socket;

pub use known_hosts::RecordedHostKey;

use super::output::Keep;
use super::spec::{JumpAddress, ProxyJump, SshSpec};
use super::{Output, Shell, Transport, TransportError};
use crate::secret::Scrubber;
use async_trait::async_trait;
use auth::{Credentials, KeyOrigin};
use config::SshConfig;
use session::{Conn, Connected, Target};
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How long the async side waits beyond an operation's own limit before it gives up on the
/// connection thread (which enforces the limit itself; this only guards against a stuck call).
const GRACE: Duration = Duration::from_secs(5);

/// Options of the SSH transport that come from kwin, not from the plan's host entry.
#[derive(Debug, Clone)]
pub struct SshOptions {
    /// Record unknown host keys in [`SshOptions::kwin_known_hosts`] instead of refusing the
    /// host (`--accept-new-host-keys`). A changed key is refused either way.
    pub accept_new_host_keys: bool,
    /// kwin's own known_hosts file, `.kwin/known_hosts` next to the plan: consulted like
    /// `~/.ssh/known_hosts`, and the only file kwin writes (0600, directory 0700).
    pub kwin_known_hosts: PathBuf,
    /// Seconds between keepalives on a quiet connection; 0 disables them.
    pub keepalive_secs: u32,
    /// Longest silence tolerated during a file transfer (and the limit of the small command
    /// that moves an uploaded file into place).
    pub io_timeout: Duration,
    /// Scrubs secret values out of remote text that becomes part of an error message.
    pub scrubber: Option<Scrubber>,
    /// The user's OpenSSH directory: `config`, `known_hosts` and default keys are read from
    /// here (and `/etc/ssh/ssh_known_hosts`). `None` reads no OpenSSH client files at all —
    /// only the plan and kwin's own known_hosts (CI, tests).
    pub user_ssh_dir: Option<PathBuf>,
    /// The ssh-agent socket, asked when the plan names no key. `None`: no agent.
    pub ssh_agent: Option<PathBuf>,
}

impl SshOptions {
    /// Defaults: refuse unknown keys, keepalive every 30 s, 60 s transfer silence, no
    /// scrubber, OpenSSH files from `$HOME/.ssh`, the agent at `$SSH_AUTH_SOCK`.
    pub fn new(kwin_known_hosts: impl Into<PathBuf>) -> Self {
        SshOptions {
            accept_new_host_keys: false,
            kwin_known_hosts: kwin_known_hosts.into(),
            keepalive_secs: 30,
            io_timeout: Duration::from_secs(60),
            scrubber: None,
            user_ssh_dir: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".ssh")),
            ssh_agent: std::env::var_os("SSH_AUTH_SOCK")
                .filter(|s| !s.is_empty())
                .map(PathBuf::from),
        }
    }
}

struct Settings {
    host_name: String,
    spec: SshSpec,
    opts: SshOptions,
}

enum Job {
    Run {
        script: String,
        deadline: Instant,
        limit: Duration,
        keep: Keep,
        reply: oneshot::Sender<Result<Output, TransportError>>,
    },
    Put {
        path: String,
        bytes: Vec<u8>,
        mode: Option<u32>,
        reply: oneshot::Sender<Result<(), TransportError>>,
    },
    Get {
        path: String,
        reply: oneshot::Sender<Result<Vec<u8>, TransportError>>,
    },
    Close,
}

/// The handle on a running connection thread.
struct Live {
    jobs: mpsc::Sender<Job>,
    alive: Arc<AtomicBool>,
}

#[derive(Default)]
struct Seen {
    recorded: Vec<RecordedHostKey>,
    fingerprint: Option<String>,
}

/// The SSH connection to one host. Cheap to create; connects on [`Transport::connect`] or on
/// first use.
pub struct SshTransport {
    settings: Arc<Settings>,
    live: tokio::sync::Mutex<Option<Live>>,
    seen: std::sync::Mutex<Seen>,
}

impl fmt::Debug for SshTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SshTransport")
            .field("host", &self.settings.host_name)
            .field("address", &self.settings.spec.address)
            .field("port", &self.settings.spec.port)
            .field("user", &self.settings.spec.user)
            .finish()
    }
}

impl SshTransport {
    /// `host_name` is the plan's name of the host (used in messages); `spec` its resolved
    /// connection settings. Reads nothing and connects nowhere yet.
    pub fn new(host_name: &str, spec: &SshSpec, opts: SshOptions) -> Self {
        SshTransport {
            settings: Arc::new(Settings {
                host_name: host_name.to_string(),
                spec: spec.clone(),
                opts,
            }),
            live: tokio::sync::Mutex::new(None),
            seen: std::sync::Mutex::new(Seen::default()),
        }
    }

    /// The host key this transport recorded in kwin's known_hosts (with
    /// `accept_new_host_keys`), for the executor to report. `None` if it recorded nothing.
    pub fn recorded_new_key(&self) -> Option<RecordedHostKey> {
        self.seen().recorded.last().cloned()
    }

    /// Every host key this transport recorded: a jump host's, then the host's.
    pub fn recorded_new_keys(&self) -> Vec<RecordedHostKey> {
        self.seen().recorded.clone()
    }

    /// Fingerprint of the host key of the last successful connection.
    pub fn host_key_fingerprint(&self) -> Option<String> {
        self.seen().fingerprint.clone()
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        match self.seen.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// The job queue of a live connection, connecting first if there is none.
    async fn jobs(&self) -> Result<mpsc::Sender<Job>, TransportError> {
        let mut live = self.live.lock().await;
        if let Some(l) = live.as_ref() {
            if l.alive.load(Ordering::Acquire) {
                return Ok(l.jobs.clone());
            }
        }
        *live = None;
        let (jobs, rx) = mpsc::channel();
        let alive = Arc::new(AtomicBool::new(true));
        let (ready_tx, ready_rx) = oneshot::channel();
        let settings = Arc::clone(&self.settings);
        let thread_alive = Arc::clone(&alive);
        std::thread::Builder::new()
            .name(format!("kwin-ssh-{}", self.settings.host_name))
            .spawn(move || worker(&settings, rx, &thread_alive, ready_tx))
            .map_err(|e| TransportError::Local(format!("cannot start a thread: {e}")))?;
        let limit = self.connect_timeout() * 3 + GRACE;
        let connected = match tokio::time::timeout(limit, ready_rx).await {
            Ok(Ok(r)) => r?,
            Ok(Err(_)) => {
                return Err(self.connect_failed(
                    crate::transport::ConnectKind::Other,
                    "the connection thread ended",
                ))
            }
            Err(_) => {
                return Err(self.connect_failed(
                    crate::transport::ConnectKind::NoAnswer,
                    &format!("no ssh session within {}s", limit.as_secs()),
                ))
            }
        };
        {
            let mut seen = self.seen();
            seen.fingerprint = Some(connected.fingerprint);
            if !connected.recorded.is_empty() {
                seen.recorded = connected.recorded;
            }
        }
        *live = Some(Live {
            jobs: jobs.clone(),
            alive,
        });
        Ok(jobs)
    }

    fn connect_timeout(&self) -> Duration {
        Duration::from_secs(self.settings.spec.connect_timeout_secs.max(1))
    }

    fn connect_failed(&self, kind: crate::transport::ConnectKind, reason: &str) -> TransportError {
        TransportError::connect(
            format!("{}:{}", self.settings.spec.address, self.settings.spec.port),
            kind,
            reason,
        )
    }

    /// Forget the current connection (after the async side gave up on it).
    async fn retire(&self) {
        if let Some(l) = self.live.lock().await.take() {
            l.alive.store(false, Ordering::Release);
        }
    }

    /// Send a job and await its reply; `wait` bounds the wait when set.
    async fn call<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, TransportError>>) -> Job,
        wait: Option<(Duration, Duration)>,
    ) -> Result<T, TransportError> {
        let jobs = self.jobs().await?;
        let (tx, rx) = oneshot::channel();
        if jobs.send(make(tx)).is_err() {
            self.retire().await;
            return Err(self.lost());
        }
        let reply = match wait {
            Some((bound, limit)) => match tokio::time::timeout(bound, rx).await {
                Ok(r) => r,
                Err(_) => {
                    self.retire().await;
                    return Err(TransportError::Timeout(limit));
                }
            },
            None => rx.await,
        };
        match reply {
            Ok(r) => r,
            Err(_) => {
                self.retire().await;
                Err(self.lost())
            }
        }
    }

    fn lost(&self) -> TransportError {
        TransportError::ConnectionLost(format!(
            "the connection to {} ended",
            self.settings.host_name
        ))
    }
}

#[async_trait]
impl Transport for SshTransport {
    fn shell(&self) -> Shell {
        self.settings.spec.shell
    }

    async fn connect(&self) -> Result<(), TransportError> {
        self.jobs().await.map(|_| ())
    }

    async fn run_keeping(
        &self,
        script: &str,
        timeout: Duration,
        keep: &Keep,
    ) -> Result<Output, TransportError> {
        self.run_joined(&[script], timeout, keep).await
    }

    /// The script goes to the connection's thread as ONE owned copy of its parts.
    async fn run_joined(
        &self,
        parts: &[&str],
        timeout: Duration,
        keep: &Keep,
    ) -> Result<Output, TransportError> {
        let deadline = Instant::now() + timeout;
        let script = parts.concat();
        let keep = keep.clone();
        self.call(
            |reply| Job::Run {
                script,
                deadline,
                limit: timeout,
                keep,
                reply,
            },
            Some((timeout + GRACE, timeout)),
        )
        .await
    }

    async fn put(&self, path: &str, bytes: &[u8], mode: Option<u32>) -> Result<(), TransportError> {
        let (path, bytes) = (path.to_string(), bytes.to_vec());
        self.call(
            |reply| Job::Put {
                path,
                bytes,
                mode,
                reply,
            },
            None,
        )
        .await
    }

    async fn get(&self, path: &str) -> Result<Vec<u8>, TransportError> {
        let path = path.to_string();
        self.call(|reply| Job::Get { path, reply }, None).await
    }

    async fn close(&self) {
        if let Some(l) = self.live.lock().await.take() {
            l.alive.store(false, Ordering::Release);
            let _ = l.jobs.send(Job::Close);
        }
    }
}

/// The connection thread: connect, then serve jobs until the queue closes, a `Close` job
/// arrives, or the session breaks. Sends keepalives while idle.
fn worker(
    settings: &Settings,
    jobs: mpsc::Receiver<Job>,
    alive: &AtomicBool,
    ready: oneshot::Sender<Result<Connected, TransportError>>,
) {
    let opened = resolve(settings).and_then(Conn::open);
    let mut conn = match opened {
        Ok((conn, info)) => {
            if ready.send(Ok(info)).is_err() {
                alive.store(false, Ordering::Release);
                conn.disconnect();
                return;
            }
            conn
        }
        Err(e) => {
            alive.store(false, Ordering::Release);
            let _ = ready.send(Err(e));
            return;
        }
    };
    let keepalive = (settings.opts.keepalive_secs > 0)
        .then(|| Duration::from_secs(u64::from(settings.opts.keepalive_secs)));
    loop {
        let job = match keepalive {
            Some(k) => jobs.recv_timeout(k),
            None => jobs
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        let failed = match job {
            Err(mpsc::RecvTimeoutError::Timeout) => conn.keepalive().is_err(),
            Err(mpsc::RecvTimeoutError::Disconnected) | Ok(Job::Close) => {
                alive.store(false, Ordering::Release);
                conn.disconnect();
                return;
            }
            Ok(Job::Run {
                script,
                deadline,
                limit,
                keep,
                reply,
            }) => {
                if Instant::now() >= deadline {
                    // Waited out its time in the queue; the session is untouched.
                    let _ = reply.send(Err(TransportError::Timeout(limit)));
                    false
                } else {
                    let r = conn.run(&script, deadline, limit, &keep);
                    finish(r, reply, alive)
                }
            }
            Ok(Job::Put {
                path,
                bytes,
                mode,
                reply,
            }) => finish(conn.put(&path, &bytes, mode), reply, alive),
            Ok(Job::Get { path, reply }) => finish(conn.get(&path), reply, alive),
        };
        if failed {
            alive.store(false, Ordering::Release);
            // Tell the server (a dead connection fails fast), so it ends the session's
            // processes' pipes now rather than at its next keepalive.
            conn.disconnect();
            return;
        }
    }
}

/// Reply to a job; `true` when the result retires the session (marked dead before the reply
/// goes out, so a caller that retries at once gets a new connection).
fn finish<T>(
    r: Result<T, TransportError>,
    reply: oneshot::Sender<Result<T, TransportError>>,
    alive: &AtomicBool,
) -> bool {
    let retire = r.as_ref().err().is_some_and(session::retires);
    if retire {
        alive.store(false, Ordering::Release);
    }
    let _ = reply.send(r);
    retire
}

/// Merge the plan's settings with the OpenSSH client config (see the module docs), and the
/// jump host's, if the connection goes through one.
fn resolve(s: &Settings) -> Result<Target, TransportError> {
    let spec = &s.spec;
    let opts = &s.opts;
    let cfg = match &opts.user_ssh_dir {
        Some(dir) => SshConfig::load(dir).map_err(TransportError::Local)?,
        None => SshConfig::default(),
    };
    let mut t = resolve_one(&cfg, &s.host_name, spec, opts);
    let hc = cfg.resolve(&spec.address);
    let from_config = |what: &str| {
        format!(
            "~/.ssh/config: {what} for `{}` (set proxy_jump in the plan to override it, \"none\" to connect directly)",
            spec.address
        )
    };
    let jump = match &spec.proxy_jump {
        Some(ProxyJump::Direct) => None,
        Some(ProxyJump::Address(a)) => Some(resolve_jump_address(&cfg, a, &t, spec, opts)),
        Some(ProxyJump::Host { name, spec: js }) => {
            let mut j = resolve_one(&cfg, name, js, opts);
            j.label = format!("jump host {} on the way to {}", j.label, t.label);
            Some(j)
        }
        None => match hc.proxy_jump.as_deref().map(str::trim) {
            Some("none") => None,
            Some(v) => {
                let a = JumpAddress::parse(v).map_err(|why| {
                    TransportError::Local(from_config(&format!(
                        "ProxyJump {v} is not usable: {why}"
                    )))
                })?;
                Some(resolve_jump_address(&cfg, &a, &t, spec, opts))
            }
            None if hc.proxy_command => {
                return Err(TransportError::Local(from_config(
                    "ProxyCommand is set; kwin supports ProxyJump only",
                )))
            }
            None => None,
        },
    };
    if let Some(j) = &jump {
        // One jump at most: the jump host must not need one itself.
        let jhc = cfg.resolve(&j.alias);
        let own = match &spec.proxy_jump {
            Some(ProxyJump::Host { spec: js, .. }) => js.proxy_jump.as_ref(),
            _ => None,
        };
        let chained = if matches!(own, Some(ProxyJump::Direct)) {
            None
        } else if let Some(v) = jhc.proxy_jump.as_deref().map(str::trim) {
            (v != "none").then(|| format!("ProxyJump {v}"))
        } else {
            jhc.proxy_command.then(|| "ProxyCommand".to_string())
        };
        if let Some(via) = chained {
            return Err(TransportError::Local(format!(
                "{}: ~/.ssh/config gives it {via}: kwin reaches a host through at most one jump host",
                j.label
            )));
        }
    }
    t.jump = jump.map(Box::new);
    Ok(t)
}

/// A jump host given as an address (the plan's `proxy_jump`, or `ProxyJump` in
/// `~/.ssh/config`): resolved through `~/.ssh/config` by that address; the user is the one
/// written, else the config's, else the target's; logged into with the config's
/// `IdentityFile`s for it, then the target's keys (its agent too when the plan names no
/// key) and passphrase, never the target's password; its key checked against known_hosts.
fn resolve_jump_address(
    cfg: &SshConfig,
    a: &JumpAddress,
    target: &Target,
    spec: &SshSpec,
    opts: &SshOptions,
) -> Target {
    let hc = cfg.resolve(&a.host);
    let user = a
        .user
        .clone()
        .or_else(|| hc.user.clone())
        .unwrap_or_else(|| target.user.clone());
    let jspec = SshSpec {
        address: a.host.clone(),
        port: a.port.or(hc.port).unwrap_or(22),
        user: user.clone(),
        private_key: None,
        passphrase: spec.passphrase.clone(),
        password: None,
        host_key: None,
        become_root: false,
        shell: Shell::Posix,
        connect_timeout_secs: spec.connect_timeout_secs,
        proxy_jump: None,
    };
    let mut j = resolve_one(cfg, "", &jspec, opts);
    j.user = user;
    if let Some(k) = &spec.private_key {
        if !j.creds.keys.iter().any(|(p, _)| p == k) {
            // After the config's keys for the jump host, before the default ones.
            let at = j
                .creds
                .keys
                .iter()
                .position(|(_, o)| *o == KeyOrigin::Default)
                .unwrap_or(j.creds.keys.len());
            j.creds.keys.insert(at, (k.clone(), KeyOrigin::Plan));
        }
        j.creds.keys.retain(|(_, o)| *o != KeyOrigin::Default);
        j.creds.use_agent = false;
    }
    j.label = format!("jump host {} on the way to {}", j.label, target.label);
    j.pinnable = false;
    j
}

/// One host's settings merged with `~/.ssh/config` (no jump host).
fn resolve_one(cfg: &SshConfig, host_name: &str, spec: &SshSpec, opts: &SshOptions) -> Target {
    let hc = cfg.resolve(&spec.address);
    let host = hc.hostname.clone().unwrap_or_else(|| spec.address.clone());
    let port = if spec.port == 22 {
        hc.port.unwrap_or(22)
    } else {
        spec.port
    };
    let default_user = match spec.shell {
        Shell::Posix => "root",
        Shell::PowerShell => "Administrator",
    };
    let (user, become_root) = match &hc.user {
        Some(u) if spec.user == default_user && *u != spec.user => {
            (u.clone(), spec.shell == Shell::Posix && u != "root")
        }
        _ => (spec.user.clone(), spec.become_root),
    };

    let mut keys: Vec<(PathBuf, KeyOrigin)> = Vec::new();
    if let Some(k) = &spec.private_key {
        keys.push((k.clone(), KeyOrigin::Plan));
    } else if let Some(dir) = &opts.user_ssh_dir {
        let home = dir.parent().map(PathBuf::from).unwrap_or_default();
        for v in &hc.identity_files {
            let p = config::expand_identity(v, &home, &spec.address, &user);
            if p.is_file() && !keys.iter().any(|(k, _)| *k == p) {
                keys.push((p, KeyOrigin::SshConfig));
            }
        }
        for name in ["id_ed25519", "id_ecdsa", "id_rsa"] {
            let p = dir.join(name);
            if p.is_file() && !keys.iter().any(|(k, _)| *k == p) {
                keys.push((p, KeyOrigin::Default));
            }
        }
    }

    let mut known_files = Vec::new();
    if let Some(dir) = &opts.user_ssh_dir {
        known_files.push(dir.join("known_hosts"));
        known_files.push(PathBuf::from("/etc/ssh/ssh_known_hosts"));
    }
    known_files.push(opts.kwin_known_hosts.clone());

    let addr = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let label = if host_name.is_empty() || host_name == host {
        addr
    } else {
        format!("{host_name} ({addr})")
    };
    Target {
        label,
        alias: spec.address.clone(),
        pinnable: true,
        jump: None,
        host,
        port,
        user,
        become_root,
        shell: spec.shell,
        creds: Credentials {
            keys,
            use_agent: spec.private_key.is_none(),
            agent_socket: opts.ssh_agent.clone(),
            passphrase: spec.passphrase.clone(),
            password: spec.password.clone(),
        },
        pinned: spec.host_key.clone().filter(|k| !k.trim().is_empty()),
        known_files,
        kwin_known_hosts: opts.kwin_known_hosts.clone(),
        accept_new: opts.accept_new_host_keys,
        connect_timeout: Duration::from_secs(spec.connect_timeout_secs.max(1)),
        io_timeout: opts.io_timeout.max(Duration::from_secs(1)),
        keepalive: (opts.keepalive_secs > 0)
            .then(|| Duration::from_secs(u64::from(opts.keepalive_secs))),
        shown_key_types: Vec::new(),
        scrubber: opts.scrubber.clone(),
    }
}

/// The PowerShell bootstrap `ssh-powershell` hosts run (reads the script from stdin and runs it
/// as one script block), for syntax checks.
pub fn powershell_bootstrap() -> &'static str {
    session::PS_BOOTSTRAP
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(address: &str, port: u16, user: &str) -> SshSpec {
        SshSpec {
            address: address.into(),
            port,
            user: user.into(),
            private_key: None,
            passphrase: None,
            password: None,
            host_key: None,
            become_root: user != "root",
            shell: Shell::Posix,
            connect_timeout_secs: 5,
            proxy_jump: None,
        }
    }

    #[test]
    fn ssh_config_fills_gaps_plan_wins() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let ssh = dir.path().join(".ssh");
        std::fs::create_dir_all(&ssh).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            ssh.join("config"),
            "Host lab-*\n  HostName 10.9.0.1\n  Port 2200\n  User ubuntu\n  IdentityFile ~/.ssh/lab_key\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ssh.join("lab_key"), "k").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ssh.join("id_ed25519"), "k").unwrap_or_else(|e| panic!("{e}"));
        let mut opts = SshOptions::new(dir.path().join(".kwin/known_hosts"));
        opts.user_ssh_dir = Some(ssh.clone());
        let settings = |spec: SshSpec| Settings {
            host_name: "cp1".into(),
            spec,
            opts: opts.clone(),
        };

        // Defaults in the plan: the config fills host, port, user (and become), keys.
        let t = resolve(&settings(spec("lab-cp1", 22, "root"))).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (t.host.as_str(), t.port, t.user.as_str()),
            ("10.9.0.1", 2200, "ubuntu")
        );
        assert!(t.become_root);
        assert_eq!(t.label, "cp1 (10.9.0.1:2200)");
        assert_eq!(
            t.creds.keys,
            vec![
                (ssh.join("lab_key"), KeyOrigin::SshConfig),
                (ssh.join("id_ed25519"), KeyOrigin::Default)
            ]
        );
        assert!(t.creds.use_agent);
        assert_eq!(
            t.known_files,
            vec![
                ssh.join("known_hosts"),
                PathBuf::from("/etc/ssh/ssh_known_hosts"),
                dir.path().join(".kwin/known_hosts")
            ]
        );

        // Explicit plan values win.
        let mut s = spec("lab-cp1", 2022, "admin");
        s.private_key = Some(dir.path().join("plan_key"));
        let t = resolve(&settings(s)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (t.host.as_str(), t.port, t.user.as_str()),
            ("10.9.0.1", 2022, "admin")
        );
        assert_eq!(
            t.creds.keys,
            vec![(dir.path().join("plan_key"), KeyOrigin::Plan)]
        );
        assert!(!t.creds.use_agent);

        // No match: the plan as is; no OpenSSH dir: only kwin's known_hosts.
        let mut none = settings(spec("10.0.0.9", 22, "root"));
        none.opts.user_ssh_dir = None;
        let t = resolve(&none).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (t.host.as_str(), t.port, t.user.as_str()),
            ("10.0.0.9", 22, "root")
        );
        assert!(!t.become_root);
        assert!(t.creds.keys.is_empty());
        assert_eq!(t.known_files, vec![dir.path().join(".kwin/known_hosts")]);
    }
}
