//! One established SSH connection: connecting (TCP, handshake, host key, auth), running a
//! script over one exec channel, SFTP. Everything here blocks; it runs only on the
//! connection's own thread (see `ssh.rs`).
//!
//! Script runs use libssh2 in non-blocking mode with `poll(2)` on the socket, so stdin is
//! written while stdout and stderr are read (no deadlock when a script prints more than the
//! channel window before it has read all of its input) and the deadline is exact. SFTP uses
//! blocking mode with the session timeout as the longest tolerated silence.

use super::auth::{self, Credentials};
use super::channel_io::LIBSSH2_ERROR_EAGAIN;
use super::jump::Tunnel;
use super::known_hosts::{self, Recorded, RecordedHostKey, Verdict};
use super::socket::Socket;
use crate::quote::{ps_quote, sh_quote};
use crate::secret::Scrubber;
use crate::transport::output::{Collector, Keep, Live, Stream};
use crate::transport::{ConnectKind, Output, Shell, TransportError, MAX_OUTPUT};
use rustix::event::{PollFd, PollFlags, Timespec};
use ssh2::{BlockDirections, ErrorCode, MethodType, Session, Sftp};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const LIBSSH2_ERROR_TIMEOUT: i32 = -9;

/// Key exchange: curve25519 first (the post-quantum default of recent OpenSSH costs about
/// 90 ms more per connection), then NIST ECDH and large DH groups. libssh2 drops names it
/// does not support and adds `ext-info-c` and the strict-KEX marker itself.
const KEX_PREFS: &str = "curve25519-sha256,curve25519-sha256@libssh.org,ecdh-sha2-nistp256,\
ecdh-sha2-nistp384,ecdh-sha2-nistp521,diffie-hellman-group16-sha512,\
diffie-hellman-group18-sha512,diffie-hellman-group14-sha256";
/// AEAD ciphers first; CTR modes (with encrypt-then-MAC) only as fallback.
const CIPHER_PREFS: &str = "aes128-gcm@openssh.com,chacha20-poly1305@openssh.com,\
aes256-gcm@openssh.com,aes128-ctr,aes256-ctr";
const MAC_PREFS: &str =
    "hmac-sha2-256-etm@openssh.com,hmac-sha2-512-etm@openssh.com,hmac-sha2-256,hmac-sha2-512";

/// Everything one connection attempt needs, resolved from the plan, the OpenSSH config and
/// kwin's options.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// `name (host:port)` for messages.
    pub label: String,
    /// The address as the plan (or the jump value) gave it: the `~/.ssh/config` alias.
    pub alias: String,
    /// Whether the plan can pin this host's key (`host_key`); a jump host given as an
    /// address cannot, its key must be in known_hosts.
    pub pinnable: bool,
    /// The jump host the connection goes through (which has none itself).
    pub jump: Option<Box<Target>>,
    pub host: String,
    pub port: u16,
    pub user: String,
    pub become_root: bool,
    pub shell: Shell,
    pub creds: Credentials,
    pub pinned: Option<String>,
    /// known_hosts files consulted (OpenSSH's and kwin's own).
    pub known_files: Vec<PathBuf>,
    pub kwin_known_hosts: PathBuf,
    pub accept_new: bool,
    pub connect_timeout: Duration,
    pub io_timeout: Duration,
    pub keepalive: Option<Duration>,
    pub scrubber: Option<Scrubber>,
    /// Host key types the host has already shown in this connect and that did not match the
    /// pin: not asked for again.
    pub shown_key_types: Vec<String>,
}

/// Facts about a fresh connection, for the async side.
#[derive(Debug, Clone)]
pub(crate) struct Connected {
    pub fingerprint: String,
    /// Host keys recorded in kwin's known_hosts: the jump host's, then the host's.
    pub recorded: Vec<RecordedHostKey>,
}

pub(crate) struct Conn {
    sess: Session,
    /// The socket libssh2 reads and writes, for `poll` (the same descriptor: no copy).
    sock: Socket,
    sftp: Option<Sftp>,
    t: Target,
    /// The channel through the jump host, when there is one (dropped after the session).
    _tunnel: Option<Tunnel>,
}

fn connect_err(t: &Target, kind: ConnectKind, reason: impl Into<String>) -> TransportError {
    TransportError::connect(addr_label(&t.host, t.port), kind, reason)
}

fn addr_label(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn is_code(e: &ssh2::Error, code: i32) -> bool {
    e.code() == ErrorCode::Session(code)
}

/// A host's key that does not match the plan's pin: its type and fingerprint.
struct Unpinned {
    kind: String,
    fingerprint: String,
}

/// How one connection attempt ended without a connection.
enum Attempt {
    /// The host offered a key of a type, not the pinned one: worth asking for another type.
    Unpinned(Unpinned),
    Failed(TransportError),
}

impl From<TransportError> for Attempt {
    fn from(e: TransportError) -> Self {
        Attempt::Failed(e)
    }
}

impl Conn {
    /// TCP connect (bounded by the connect timeout), handshake, host key check, auth.
    ///
    /// A host has one key per type, and the plan's pin (a SHA-256 fingerprint) does not say
    /// which: when the key the host offers does not match it, kwin connects again asking for
    /// the host's other key types, until one matches (the pin authenticates the host either
    /// way) or none is left; then the error lists every key the host showed.
    pub fn open(t: Target) -> Result<(Conn, Connected), TransportError> {
        let mut shown: Vec<Unpinned> = Vec::new();
        loop {
            let mut attempt = t.clone();
            attempt.shown_key_types = shown.iter().map(|u| u.kind.clone()).collect();
            let last = match Conn::open_once(attempt) {
                Err(Attempt::Unpinned(u)) => u,
                // Asked only for types the host does not have: the keys it showed are all.
                Err(Attempt::Failed(_)) if !shown.is_empty() => break,
                Err(Attempt::Failed(e)) => return Err(e),
                Ok(c) => return Ok(c),
            };
            shown.push(last);
            let kinds: Vec<String> = shown.iter().map(|u| u.kind.clone()).collect();
            if known_hosts::hostkey_prefs_except(&[], &kinds).is_empty() {
                break;
            }
        }
        let keys: Vec<String> = shown
            .iter()
            .map(|u| format!("{} ({})", u.fingerprint, u.kind))
            .collect();
        Err(TransportError::HostKeyMismatch {
            host: t.label.clone(),
            expected: format!(
                "{} (pinned in the plan)",
                t.pinned.as_deref().map(str::trim).unwrap_or_default()
            ),
            actual: format!(
                "{}: none of the host's keys is the pinned one (its key types each have their own fingerprint: `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` on the host prints its ed25519 key's), so this is not the host that was pinned",
                keys.join(", ")
            ),
        })
    }

    fn open_once(mut t: Target) -> Result<(Conn, Connected), Attempt> {
        let known = if t.pinned.is_some() {
            Vec::new()
        } else {
            known_hosts::lookup(&t.known_files, &t.host, t.port).map_err(TransportError::Local)?
        };
        let mut sess = Session::new().map_err(|e| TransportError::Local(e.to_string()))?;
        let mut recorded = Vec::new();
        let (sock, tunnel) = match t.jump.take() {
            None => (Socket::new(tcp_connect(&t)?), None),
            Some(j) => {
                // Say it was the jump host that could not be reached, by its name (its
                // label: "jump host bastion (10.0.0.1:22) on the way to …"), not the host.
                let jump = j.label.clone();
                let (jconn, info) = Conn::open(*j).map_err(|e| match e {
                    TransportError::Connect { reason, kind, .. } => TransportError::Connect {
                        address: jump,
                        reason,
                        kind,
                    },
                    other => other,
                })?;
                recorded.extend(info.recorded);
                let (stream, tunnel) = jconn.tunnel_to(&t)?;
                (Socket::new(stream), Some(tunnel))
            }
        };
        sess.set_tcp_stream(sock.clone());
        Conn::handshake(t, sess, sock, tunnel, &known, recorded)
    }

    /// A `direct-tcpip` channel from this (jump host) session to `t`'s address, bridged to
    /// one end of a socket pair by a pump thread that owns this session; the other end is
    /// the socket for `t`'s session.
    fn tunnel_to(self, t: &Target) -> Result<(UnixStream, Tunnel), TransportError> {
        self.sess.set_timeout(millis(t.connect_timeout));
        let ch = self
            .sess
            .channel_direct_tcpip(&t.host, t.port, None)
            .map_err(|e| {
                let why = if is_code(&e, LIBSSH2_ERROR_TIMEOUT) {
                    format!("no answer within {}s", t.connect_timeout.as_secs())
                } else {
                    lower(e.message())
                };
                connect_err(
                    t,
                    ConnectKind::Other,
                    format!("{} could not open a connection to it: {why}", self.t.label),
                )
            })?;
        let (mine, theirs) = UnixStream::pair()
            .map_err(|e| TransportError::Local(format!("cannot make a socket pair: {e}")))?;
        let keepalive = self.t.keepalive;
        let name = format!("kwin-ssh-jump-{}", t.host);
        let tunnel = Tunnel::start(&name, self.sess, self.sock, ch, theirs, keepalive)
            .map_err(|e| TransportError::Local(format!("cannot start a thread: {e}")))?;
        Ok((mine, tunnel))
    }

    /// Handshake, host key check, auth over a connected socket.
    fn handshake(
        t: Target,
        mut sess: Session,
        sock: Socket,
        tunnel: Option<Tunnel>,
        known: &[known_hosts::KnownKey],
        mut recorded: Vec<RecordedHostKey>,
    ) -> Result<(Conn, Connected), Attempt> {
        sess.set_timeout(millis(t.connect_timeout));
        let prefs = [
            (MethodType::Kex, KEX_PREFS.to_string()),
            (
                MethodType::HostKey,
                known_hosts::hostkey_prefs_except(known, &t.shown_key_types),
            ),
            (MethodType::CryptCs, CIPHER_PREFS.to_string()),
            (MethodType::CryptSc, CIPHER_PREFS.to_string()),
            (MethodType::MacCs, MAC_PREFS.to_string()),
            (MethodType::MacSc, MAC_PREFS.to_string()),
        ];
        for (kind, pref) in prefs {
            sess.method_pref(kind, &pref)
                .map_err(|e| TransportError::Local(format!("ssh algorithms: {}", e.message())))?;
        }
        sess.handshake().map_err(|e| {
            if is_code(&e, LIBSSH2_ERROR_TIMEOUT) {
                connect_err(
                    &t,
                    ConnectKind::NoAnswer,
                    format!(
                        "ssh handshake: no answer within {}s",
                        t.connect_timeout.as_secs()
                    ),
                )
            } else {
                connect_err(
                    &t,
                    ConnectKind::Other,
                    format!("ssh handshake: {}", lower(e.message())),
                )
            }
        })?;

        let (blob, _) = sess
            .host_key()
            .ok_or_else(|| connect_err(&t, ConnectKind::Other, "the server sent no host key"))?;
        let blob = blob.to_vec();
        if let Some(pin) = &t.pinned {
            let fingerprint = known_hosts::fingerprint(&blob);
            if !known_hosts::pinned_matches(pin, &fingerprint) {
                let kind = known_hosts::key_type_of(&blob).unwrap_or_else(|| "unknown type".into());
                return Err(Attempt::Unpinned(Unpinned { kind, fingerprint }));
            }
        }
        recorded.extend(check_host_key(&t, known, &blob)?);
        let fingerprint = known_hosts::fingerprint(&blob);

        auth::authenticate(&sess, &t.user, &t.creds).map_err(|reason| TransportError::Auth {
            host: t.label.clone(),
            user: t.user.clone(),
            reason: scrub(&t, &reason),
        })?;

        if let Some(k) = t.keepalive {
            sess.set_keepalive(false, k.as_secs().clamp(1, u32::MAX as u64) as u32);
        }
        sess.set_timeout(millis(t.io_timeout));
        Ok((
            Conn {
                sess,
                sock,
                sftp: None,
                t,
                _tunnel: tunnel,
            },
            Connected {
                fingerprint,
                recorded,
            },
        ))
    }
}

/// TCP connect to `t`'s address, bounded by the connect timeout.
fn tcp_connect(t: &Target) -> Result<TcpStream, TransportError> {
    let addrs: Vec<_> = (t.host.as_str(), t.port)
        .to_socket_addrs()
        .map_err(|e| {
            connect_err(
                t,
                ConnectKind::Resolve,
                format!("cannot resolve the name: {e}"),
            )
        })?
        .collect();
    let mut last = None;
    for a in &addrs {
        match TcpStream::connect_timeout(a, t.connect_timeout) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(e) => TransportError::connect_io(addr_label(&t.host, t.port), &e, t.connect_timeout),
        None => connect_err(t, ConnectKind::Resolve, "the name resolved to no address"),
    })
}

impl Conn {
    /// Send a keepalive if one is due. `Err` when the connection is gone.
    pub fn keepalive(&self) -> Result<(), ()> {
        self.sess.keepalive_send().map(|_| ()).map_err(|_| ())
    }

    /// Best-effort polite goodbye.
    pub fn disconnect(mut self) {
        self.sftp = None;
        self.sess.set_blocking(true);
        self.sess.set_timeout(500);
        let _ = self.sess.disconnect(None, "kwin done", None);
    }

    /// Run `script` with the host's shell; the channel's stdin carries the script.
    pub fn run(
        &mut self,
        script: &str,
        deadline: Instant,
        limit: Duration,
        keep: &Keep,
    ) -> Result<Output, TransportError> {
        let command = self.shell_command();
        let mut out = self.exec(command, script.as_bytes(), deadline, limit, keep)?;
        if self.t.shell == Shell::PowerShell {
            out.stderr = crate::transport::clixml::decode_stderr(&out.stderr);
        }
        if self.t.become_root {
            self.check_sudo(&out)?;
        }
        Ok(out)
    }

    fn shell_command(&self) -> &'static str {
        match (self.t.shell, self.t.become_root) {
            (Shell::PowerShell, _) => powershell_command(),
            (Shell::Posix, false) => "sh -s",
            (Shell::Posix, true) => "sudo -n sh -s",
        }
    }

    /// `sudo -n` refuses with exit 1 and a "password is required" message when the user has
    /// no passwordless sudo (or "you must have a tty" under `Defaults requiretty`): that is a
    /// credentials problem, not a failed script.
    fn check_sudo(&self, out: &Output) -> Result<(), TransportError> {
        let err = String::from_utf8_lossy(&out.stderr);
        if out.exit == 1
            && out.stdout.is_empty()
            && err.starts_with("sudo: ")
            && (err.contains("password is required")
                || err.contains("terminal is required")
                || err.contains("must have a tty"))
        {
            return Err(TransportError::Auth {
                host: self.t.label.clone(),
                user: self.t.user.clone(),
                reason: format!(
                    "become needs passwordless sudo without a tty, and `sudo -n` refused ({})",
                    scrub(&self.t, err.trim())
                ),
            });
        }
        Ok(())
    }

    /// One exec channel: `command`, `stdin` written while stdout/stderr are read, until the
    /// channel closes or `deadline` passes.
    fn exec(
        &mut self,
        command: &str,
        stdin: &[u8],
        deadline: Instant,
        limit: Duration,
        keep: &Keep,
    ) -> Result<Output, TransportError> {
        if Instant::now() >= deadline {
            return Err(TransportError::Timeout(limit));
        }
        self.sess.set_blocking(false);
        let r = self.exec_nonblocking(command, stdin, deadline, limit, keep);
        self.sess.set_blocking(true);
        r
    }

    fn exec_nonblocking(
        &mut self,
        command: &str,
        stdin: &[u8],
        deadline: Instant,
        limit: Duration,
        keep: &Keep,
    ) -> Result<Output, TransportError> {
        let w = Waiter {
            sess: &self.sess,
            sock: &self.sock,
            deadline,
            limit,
            keepalive: self.t.keepalive,
        };
        let mut ch = w.retry("open a channel", || self.sess.channel_session())?;
        w.retry("start the shell", || ch.exec(command))?;

        // PowerShell's stderr is CLIXML, decoded once whole (`run`): never shown live.
        let err_live = match self.t.shell {
            Shell::Posix => Live::Lines,
            Shell::PowerShell => Live::AtEnd,
        };
        let (mut stdout, mut stderr) = (
            Collector::new(keep, Stream::Stdout, Live::Lines),
            Collector::new(keep, Stream::Stderr, err_live),
        );
        let label = &self.t.label;
        super::channel_io::drive(
            &mut ch,
            stdin,
            &mut stdout,
            &mut stderr,
            limit,
            || w.wait(),
            |e| TransportError::ConnectionLost(format!("{label}: {}", lower(&e.to_string()))),
        )?;
        w.retry("close the channel", || ch.close())?;
        w.retry("close the channel", || ch.wait_close())?;
        let exit = match ch.exit_signal().ok().and_then(|s| s.exit_signal) {
            Some(sig) => 128 + signal_number(&sig),
            None => ch.exit_status().map_err(|e| self.lost("exit status", &e))?,
        };
        Ok(Output {
            stdout: stdout.finish(),
            stderr: stderr.finish(),
            exit,
        })
    }

    fn lost(&self, what: &str, e: &ssh2::Error) -> TransportError {
        TransportError::ConnectionLost(format!("{}: {what}: {}", self.t.label, lower(e.message())))
    }

    /// Map an error of a blocking SFTP call: SFTP status codes are the remote file system's
    /// answer; anything else means the session is gone.
    fn sftp_err(&self, what: &str, e: ssh2::Error) -> TransportError {
        match e.code() {
            ErrorCode::SFTP(_) => TransportError::Remote(format!("{what}: {}", e.message())),
            ErrorCode::Session(LIBSSH2_ERROR_TIMEOUT) => TransportError::Timeout(self.t.io_timeout),
            ErrorCode::Session(_) => self.lost(what, &e),
        }
    }

    fn sftp_io_err(&self, what: &str, e: std::io::Error) -> TransportError {
        match e.kind() {
            std::io::ErrorKind::TimedOut => TransportError::Timeout(self.t.io_timeout),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied => {
                TransportError::Remote(format!("{what}: {}", lower(&e.to_string())))
            }
            _ => TransportError::ConnectionLost(format!(
                "{}: {what}: {}",
                self.t.label,
                lower(&e.to_string())
            )),
        }
    }

    /// The session's SFTP channel, opened on first use and kept.
    fn sftp(&mut self) -> Result<&Sftp, TransportError> {
        if self.sftp.is_none() {
            self.sess.set_blocking(true);
            let s = self.sess.sftp().map_err(|e| match e.code() {
                ErrorCode::Session(LIBSSH2_ERROR_TIMEOUT) => {
                    TransportError::Timeout(self.t.io_timeout)
                }
                _ => TransportError::Remote(format!(
                    "cannot start sftp on {}: {}",
                    self.t.label,
                    lower(e.message())
                )),
            })?;
            self.sftp = Some(s);
        }
        match &self.sftp {
            Some(s) => Ok(s),
            None => Err(TransportError::Local("sftp channel missing".into())),
        }
    }

    /// Upload `bytes` to `remote` (an SFTP path) as a new file, private (0600) while it is
    /// written, then given `mode` if set. A partial file is removed on failure.
    fn upload(
        &mut self,
        remote: &str,
        bytes: &[u8],
        mode: Option<u32>,
    ) -> Result<(), TransportError> {
        use ssh2::{FileStat, OpenFlags, OpenType};
        self.sess.set_blocking(true);
        let flags =
            OpenFlags::WRITE | OpenFlags::CREATE | OpenFlags::EXCLUSIVE | OpenFlags::TRUNCATE;
        let mut file = {
            let sftp = self.sftp()?;
            sftp.open_mode(Path::new(remote), flags, 0o600, OpenType::File)
        }
        .map_err(|e| self.sftp_err(&format!("cannot create {remote}"), e))?;
        let mut written = Ok(());
        for chunk in bytes.chunks(1024 * 1024) {
            if let Err(e) = file.write_all(chunk) {
                written = Err(self.sftp_io_err(&format!("writing {remote}"), e));
                break;
            }
        }
        if let (Ok(()), Some(perm)) = (&written, mode) {
            let stat = FileStat {
                size: None,
                uid: None,
                gid: None,
                perm: Some(perm),
                atime: None,
                mtime: None,
            };
            written = file
                .setstat(stat)
                .map_err(|e| self.sftp_err(&format!("cannot set the mode of {remote}"), e));
        }
        if written.is_ok() {
            written = file
                .close()
                .map_err(|e| self.sftp_err(&format!("writing {remote}"), e));
        }
        drop(file);
        if let Err(e) = &written {
            if !retires(e) {
                self.remove_quietly(remote, None);
            }
        }
        written
    }

    fn remove_quietly(&mut self, remote: &str, dir: Option<&str>) {
        if let Ok(sftp) = self.sftp() {
            let _ = sftp.unlink(Path::new(remote));
            if let Some(d) = dir {
                let _ = sftp.rmdir(Path::new(d));
            }
        }
    }

    /// Atomic write: upload to a temporary name, then move into place in one step.
    ///
    /// - POSIX, no become: SFTP to `DIR/.kwin-tmp-N` (0600 while written, then `mode`), then
    ///   `mv -f` over a `sh -s` channel (SFTP v3 rename refuses to replace an existing file,
    ///   and the ssh2 crate does not expose OpenSSH's posix-rename extension).
    /// - POSIX with become: SFTP to a private `0700` directory under `/tmp`, then under
    ///   `sudo -n`: `install -o 0 -g 0 -m MODE` to `DIR/.kwin-tmp-N`, `mv -f` into place; the
    ///   file ends up owned by root.
    /// - PowerShell: SFTP to `DIR\.kwin-tmp-N`, then `Move-Item -Force`.
    ///
    /// `mode` defaults to 0644. The temporary file is removed on failure.
    pub fn put(
        &mut self,
        path: &str,
        bytes: &[u8],
        mode: Option<u32>,
    ) -> Result<(), TransportError> {
        let nonce = crate::fs::new_nonce();
        let mode = mode.unwrap_or(0o644) & 0o7777;
        match (self.t.shell, self.t.become_root) {
            (Shell::PowerShell, _) => {
                let tmp_win = win_sibling(path, &format!(".kwin-tmp-{nonce}"));
                let tmp_sftp = sftp_win_path(&tmp_win);
                self.upload(&tmp_sftp, bytes, None)?;
                let script = format!(
                    "$ErrorActionPreference = 'Stop'\r\n\
                     try {{ Move-Item -LiteralPath {t} -Destination {p} -Force }} \
                     catch {{ Remove-Item -LiteralPath {t} -Force -ErrorAction SilentlyContinue; \
                     [Console]::Error.WriteLine($_.Exception.Message); exit 1 }}\r\n",
                    t = ps_quote(&tmp_win),
                    p = ps_quote(path),
                );
                self.finish_put(path, &script)
            }
            (Shell::Posix, false) => {
                let tmp = posix_sibling(path, &format!(".kwin-tmp-{nonce}"));
                self.upload(&tmp, bytes, Some(mode))?;
                // One process: the shell execs mv (the mode was set over SFTP).
                let script = format!(
                    "if [ -d {p} ]; then echo {p}: is a directory >&2; exit 1; fi\n\
                     exec mv -f -- {t} {p}\n",
                    t = sh_quote(&tmp),
                    p = sh_quote(path),
                );
                let r = self.finish_put(path, &script);
                if matches!(r, Err(TransportError::Remote(_))) {
                    self.remove_quietly(&tmp, None);
                }
                r
            }
            (Shell::Posix, true) => {
                let dir = format!("/tmp/.kwin-{nonce}");
                let src = format!("{dir}/data");
                self.sess.set_blocking(true);
                {
                    let sftp = self.sftp()?;
                    sftp.mkdir(Path::new(&dir), 0o700)
                }
                .map_err(|e| self.sftp_err(&format!("cannot create {dir}"), e))?;
                if let Err(e) = self.upload(&src, bytes, None) {
                    if !retires(&e) {
                        self.remove_quietly(&src, Some(&dir));
                    }
                    return Err(e);
                }
                let tmp = posix_sibling(path, &format!(".kwin-tmp-{nonce}"));
                let script = format!(
                    "umask 077\n\
                     rc=0\n\
                     if [ -d {p} ]; then echo {p}: is a directory >&2; rc=1; else\n\
                     install -o 0 -g 0 -m {mode:o} -- {s} {t} && mv -f -- {t} {p} || rc=$?\n\
                     fi\n\
                     rm -rf -- {t} {d}\n\
                     exit $rc\n",
                    s = sh_quote(&src),
                    t = sh_quote(&tmp),
                    p = sh_quote(path),
                    d = sh_quote(&dir),
                );
                let r = self.finish_put(path, &script);
                if matches!(&r, Err(e) if !retires(e)) {
                    // sudo refused: the private directory is still there, and still ours.
                    self.remove_quietly(&src, Some(&dir));
                }
                r
            }
        }
    }

    fn finish_put(&mut self, path: &str, script: &str) -> Result<(), TransportError> {
        let deadline = Instant::now() + self.t.io_timeout;
        let out = self.run(script, deadline, self.t.io_timeout, &Keep::all())?;
        if out.success() {
            Ok(())
        } else {
            Err(TransportError::Remote(format!(
                "cannot write {path}: {}",
                scrub(&self.t, String::from_utf8_lossy(&out.stderr).trim())
            )))
        }
    }

    /// Read a file: SFTP, or `sudo -n cat` over a channel with become.
    pub fn get(&mut self, path: &str) -> Result<Vec<u8>, TransportError> {
        if self.t.become_root {
            let deadline = Instant::now() + self.t.io_timeout;
            let out = self.run(
                &format!("exec cat -- {}\n", sh_quote(path)),
                deadline,
                self.t.io_timeout,
                &Keep::all(),
            )?;
            if !out.success() {
                return Err(TransportError::Remote(format!(
                    "cannot read {path}: {}",
                    scrub(&self.t, String::from_utf8_lossy(&out.stderr).trim())
                )));
            }
            return Ok(out.stdout);
        }
        let remote = match self.t.shell {
            Shell::PowerShell => sftp_win_path(path),
            Shell::Posix => path.to_string(),
        };
        self.sess.set_blocking(true);
        let mut file = {
            let sftp = self.sftp()?;
            sftp.open(Path::new(&remote))
        }
        .map_err(|e| self.sftp_err(&format!("cannot read {path}"), e))?;
        let mut data = Vec::new();
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = file
                .read(&mut buf)
                .map_err(|e| self.sftp_io_err(&format!("reading {path}"), e))?;
            if n == 0 {
                break;
            }
            if data.len() + n > MAX_OUTPUT {
                return Err(TransportError::OutputTooLarge { limit: MAX_OUTPUT });
            }
            data.extend_from_slice(&buf[..n]);
        }
        Ok(data)
    }
}

/// Reads the whole script from stdin as UTF-8 bytes and runs it as one script block.
/// (`-Command -` would run stdin line by line like an interactive prompt: a multi-line block
/// runs only after an empty line, and the console code page mangles non-ASCII text.)
/// `exit N` in the script sets the exit code; a terminating error exits 1; otherwise 0.
/// Progress records are silenced; errors arrive on stderr as CLIXML (an effect of
/// `-EncodedCommand`) and are decoded back to text (`transport/clixml.rs`).
pub(crate) const PS_BOOTSTRAP: &str = "$ProgressPreference = 'SilentlyContinue'\n\
$i = [Console]::OpenStandardInput()\n\
$m = New-Object System.IO.MemoryStream\n\
$i.CopyTo($m)\n\
$s = [System.Text.Encoding]::UTF8.GetString($m.ToArray())\n\
try { & ([scriptblock]::Create($s)) } catch { [Console]::Error.WriteLine($_.ToString()); exit 1 }\n\
exit 0\n";

/// `powershell.exe ... -EncodedCommand <bootstrap>`: base64 of UTF-16LE, so no shell on the
/// way (cmd.exe or PowerShell as the OpenSSH default shell) can misread it.
fn powershell_command() -> &'static str {
    static CMD: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CMD.get_or_init(|| {
        use base64::Engine;
        let utf16: Vec<u8> = PS_BOOTSTRAP
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        format!(
            "powershell.exe -NoProfile -NonInteractive -ExecutionPolicy Bypass -EncodedCommand {}",
            base64::engine::general_purpose::STANDARD.encode(utf16)
        )
    })
}

/// Errors after which the session cannot be trusted (a channel may be half-read).
pub(crate) fn retires(e: &TransportError) -> bool {
    matches!(
        e,
        TransportError::ConnectionLost(_)
            | TransportError::Timeout(_)
            | TransportError::OutputTooLarge { .. }
            | TransportError::OutputBudgetSpent { .. }
    )
}

/// Waits on the socket in non-blocking mode, bounded by a deadline.
struct Waiter<'a> {
    sess: &'a Session,
    sock: &'a Socket,
    deadline: Instant,
    limit: Duration,
    keepalive: Option<Duration>,
}

impl Waiter<'_> {
    /// Block until the socket is ready in the direction libssh2 waits for, the deadline, or
    /// the keepalive interval (then a keepalive goes out if due).
    fn wait(&self) -> Result<(), TransportError> {
        let now = Instant::now();
        if now >= self.deadline {
            return Err(TransportError::Timeout(self.limit));
        }
        let mut slice = self.deadline - now;
        if let Some(k) = self.keepalive {
            slice = slice.min(k);
        }
        let flags = match self.sess.block_directions() {
            BlockDirections::Outbound | BlockDirections::Both => PollFlags::IN | PollFlags::OUT,
            _ => PollFlags::IN,
        };
        let ts = Timespec {
            tv_sec: slice.as_secs() as _,
            tv_nsec: slice.subsec_nanos() as _,
        };
        let mut fds = [PollFd::new(self.sock, flags)];
        if let Ok(0) = rustix::event::poll(&mut fds, Some(&ts)) {
            if self.keepalive.is_some() {
                let _ = self.sess.keepalive_send();
            }
        }
        Ok(())
    }

    /// Repeat a non-blocking libssh2 call until it stops asking to be called again.
    fn retry<T>(
        &self,
        what: &str,
        mut f: impl FnMut() -> Result<T, ssh2::Error>,
    ) -> Result<T, TransportError> {
        loop {
            match f() {
                Ok(v) => return Ok(v),
                Err(e) if is_code(&e, LIBSSH2_ERROR_EAGAIN) => self.wait()?,
                Err(e) if is_code(&e, LIBSSH2_ERROR_TIMEOUT) => {
                    return Err(TransportError::Timeout(self.limit))
                }
                Err(e) => {
                    return Err(TransportError::ConnectionLost(format!(
                        "cannot {what}: {}",
                        lower(e.message())
                    )))
                }
            }
        }
    }
}

/// Verify the presented host key: the pinned fingerprint, else the known_hosts files; an
/// unknown key is recorded in kwin's file when new keys are accepted.
fn check_host_key(
    t: &Target,
    known: &[known_hosts::KnownKey],
    blob: &[u8],
) -> Result<Option<RecordedHostKey>, TransportError> {
    let fp = known_hosts::fingerprint(blob);
    let kind = known_hosts::key_type_of(blob).unwrap_or_else(|| "unknown type".into());
    let mismatch = |expected: String| TransportError::HostKeyMismatch {
        host: t.label.clone(),
        expected,
        actual: format!("{fp} ({kind})"),
    };
    if let Some(pin) = &t.pinned {
        return if known_hosts::pinned_matches(pin, &fp) {
            Ok(None)
        } else {
            Err(mismatch(format!("{} (pinned in the plan)", pin.trim())))
        };
    }
    let verdict_err = |v: Verdict| match v {
        Verdict::Revoked { source } => mismatch(format!("any key but the revoked one ({source})")),
        Verdict::Mismatch { expected } => mismatch(expected.join(" or ")),
        Verdict::Match | Verdict::Unknown => mismatch("a known key".into()),
    };
    match known_hosts::verify(known, blob) {
        Verdict::Match => Ok(None),
        Verdict::Unknown if t.accept_new => {
            match known_hosts::append(&t.kwin_known_hosts, &t.host, t.port, blob)
                .map_err(TransportError::Local)?
            {
                Recorded::Written => Ok(Some(RecordedHostKey {
                    host: known_hosts::host_token(&t.host, t.port),
                    fingerprint: fp.clone(),
                    file: t.kwin_known_hosts.clone(),
                })),
                Recorded::AlreadyThere => Ok(None),
                Recorded::Conflict(v) => Err(verdict_err(v)),
            }
        }
        Verdict::Unknown => Err(TransportError::HostKeyUnknown {
            host: t.label.clone(),
            actual: fp.clone(),
            fix: if t.pinnable {
                format!("pin it with host_key = \"{fp}\" or run with --accept-new-host-keys")
            } else {
                format!(
                    "add it to ~/.ssh/known_hosts as `{} {kind} ...` once you have checked it, or run with --accept-new-host-keys",
                    known_hosts::host_token(&t.host, t.port)
                )
            },
        }),
        v => Err(verdict_err(v)),
    }
}

fn scrub(t: &Target, s: &str) -> String {
    match &t.scrubber {
        Some(sc) => sc.scrub(s),
        None => s.to_string(),
    }
}

fn millis(d: Duration) -> u32 {
    d.as_millis().clamp(1, u32::MAX as u128) as u32
}

fn lower(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

fn signal_number(name: &str) -> i32 {
    match name.trim_start_matches("SIG") {
        "HUP" => 1,
        "INT" => 2,
        "QUIT" => 3,
        "ILL" => 4,
        "ABRT" => 6,
        "FPE" => 8,
        "KILL" => 9,
        "SEGV" => 11,
        "PIPE" => 13,
        "ALRM" => 14,
        "TERM" => 15,
        "USR1" => 10,
        "USR2" => 12,
        _ => 127,
    }
}

/// `name` in the directory of POSIX path `path`.
fn posix_sibling(path: &str, name: &str) -> String {
    match path.rfind('/') {
        Some(i) => format!("{}/{name}", &path[..i]),
        None => name.to_string(),
    }
}

/// `name` in the directory of Windows path `path` (either separator).
fn win_sibling(path: &str, name: &str) -> String {
    match path.rfind(['\\', '/']) {
        Some(i) => format!("{}\\{name}", &path[..i]),
        None => name.to_string(),
    }
}

/// Windows OpenSSH's SFTP server names `C:\k\x` as `/C:/k/x`.
fn sftp_win_path(path: &str) -> String {
    let p = path.replace('\\', "/");
    let b = p.as_bytes();
    if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        format!("/{p}")
    } else {
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_sftp_paths_and_signals_are_derived() {
        assert_eq!(posix_sibling("/etc/kw/a.conf", ".t"), "/etc/kw/.t");
        assert_eq!(posix_sibling("/a", ".t"), "/.t");
        assert_eq!(posix_sibling("rel", ".t"), ".t");
        assert_eq!(win_sibling("C:\\k\\config", ".t"), "C:\\k\\.t");
        assert_eq!(win_sibling("C:/k/config", ".t"), "C:/k\\.t");
        assert_eq!(sftp_win_path("C:\\k\\.t"), "/C:/k/.t");
        assert_eq!(sftp_win_path("/C:/k/x"), "/C:/k/x");
        assert_eq!(signal_number("KILL"), 9);
        assert_eq!(signal_number("SIGTERM"), 15);
    }

    #[test]
    fn powershell_bootstrap_round_trips() {
        use base64::Engine;
        let cmd = powershell_command();
        let b64 = cmd
            .strip_prefix(
                "powershell.exe -NoProfile -NonInteractive -ExecutionPolicy Bypass -EncodedCommand ",
            )
            .unwrap_or_else(|| panic!("{cmd}"));
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap_or_default();
        let units: Vec<u16> = bytes
            .chunks(2)
            .map(|c| u16::from_le_bytes([c[0], c.get(1).copied().unwrap_or(0)]))
            .collect();
        assert_eq!(
            String::from_utf16(&units).ok().as_deref(),
            Some(PS_BOOTSTRAP)
        );
        assert!(cmd.len() < 2000, "cmd.exe limits command lines");
    }
}
