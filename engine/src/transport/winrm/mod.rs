//! `winrm` transport: Windows hosts over WS-Management / Windows Remote Shell (WinRS).
//!
//! One [`WinrmTransport`] per host owns ONE HTTP connection (`http.rs`), authenticated with
//! NTLM (`auth.rs`, sealed with message encryption over http, `crypt.rs`) or Basic over https;
//! https trusts a pinned fingerprint, a CA file or the system roots (`tls.rs`).
//!
//! A `run` is one WinRS command in the transport's shell: Command `powershell.exe ...
//! -Command -` → Send the script on stdin (chunks under the envelope limit, `End="true"` on
//! the last) → Receive (long polls; `w:TimedOut` means poll again) until the command is Done →
//! Signal terminate (releases it). The shell is created by the first run and kept: 4 requests
//! per run instead of 5, and no shell host process started per run on Windows. A kept shell
//! that has vanished (idle timeout, restart) is replaced when Command reports it unknown; after
//! any failed run the shell is deleted and the next run creates a new one. stdout
//! comes back as the bytes the host wrote (a UTF-16LE byte order mark is decoded, a UTF-8 one
//! dropped); a CLIXML stderr is turned into readable text (`transport/clixml.rs`). When the run's time
//! limit passes, the command is terminated, the shell deleted, and the result is
//! [`TransportError::Timeout`]. `close` deletes the shell.
//!
//! `put` streams base64 chunks over stdin of a short `-EncodedCommand` receiver that writes a
//! temporary file, checks its SHA-256 and renames it into place; `get` prints base64.
//! The scripts are in `scripts.rs`.
//!
//! Runs on one transport are serialised (one connection carries one request at a time).
//! The transport does not retry: errors are classified for the engine's retry policy
//! (refused/reset/unreachable → `Connect`/`ConnectionLost`, retryable).

mod auth;
mod crypt;
mod http;
pub mod scripts;
mod soap;
mod tls;

pub use http::Stats;
pub use scripts::Dialect;

use super::output::{Collector, Keep, Live, Stream};
use super::{Output, Shell, Transport, TransportError};
use crate::transport::spec::WinrmSpec;
use async_trait::async_trait;
use base64::Engine as _;
use sha2::{Digest, Sha256};
use soap::{Fault, Header};
use std::time::{Duration, Instant};

/// Most stdin bytes in one Send (the envelope stays well under the 500 KiB default limit).
pub const STDIN_CHUNK: usize = 200 * 1024;
/// File bytes per upload chunk: a multiple of 3, so each base64 line (+ newline) is one
/// complete base64 text of at most [`STDIN_CHUNK`] bytes.
pub const UPLOAD_CHUNK: usize = 144 * 1024;
/// Longest single Receive long poll.
const RECEIVE_POLL: Duration = Duration::from_secs(20);
/// Time allowed for one non-Receive request.
const REQUEST_LIMIT: Duration = Duration::from_secs(60);
/// Extra time a request may take beyond the run's deadline before the run is abandoned.
const GRACE: Duration = Duration::from_secs(2);
/// Budget for releasing a command (and deleting its shell after a failure).
const CLEANUP: Duration = Duration::from_secs(5);
/// Budget for deleting the kept shell in `close`.
const CLOSE_LIMIT: Duration = Duration::from_secs(2);

/// A WinRM connection to one Windows host.
pub struct WinrmTransport {
    dialect: Dialect,
    session: tokio::sync::Mutex<Session>,
}

/// The connection and the shell kept between runs.
struct Session {
    http: http::Client,
    shell: Option<String>,
}

impl std::fmt::Debug for WinrmTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WinrmTransport")
            .field("dialect", &self.dialect)
            .finish_non_exhaustive()
    }
}

enum OpError {
    Fault(Fault),
    Transport(TransportError),
}

impl From<TransportError> for OpError {
    fn from(e: TransportError) -> Self {
        OpError::Transport(e)
    }
}

impl OpError {
    fn into_transport(self, what: &str) -> TransportError {
        match self {
            // The shell vanished under a running operation: the host restarted (or the
            // service did). Retrying the whole run is the right reaction.
            OpError::Fault(f) if f.is_shell_not_found() => TransportError::ConnectionLost(format!(
                "{what}: the shell is gone (did the host restart?): {f}"
            )),
            OpError::Fault(f) => TransportError::Remote(format!("{what}: {f}")),
            OpError::Transport(e) => e,
        }
    }
}

fn bad_reply(what: &str, e: soap::BadReply) -> TransportError {
    TransportError::Remote(format!("{what}: {}", e.0))
}

/// An http-level timeout before the run's deadline means the host stopped answering
/// (retryable); at or after the deadline it is the run's own timeout.
fn settle(e: OpError, deadline: Instant) -> OpError {
    match e {
        OpError::Transport(TransportError::Timeout(t)) if Instant::now() < deadline => {
            OpError::Transport(TransportError::ConnectionLost(format!(
                "no reply within {t:?}"
            )))
        }
        OpError::Transport(TransportError::Timeout(_)) => {
            OpError::Transport(TransportError::Timeout(Duration::ZERO))
        }
        other => other,
    }
}

/// Time left until `deadline` plus the grace, capped at `cap`; `None` once it has passed.
fn budget(deadline: Instant, cap: Duration) -> Option<Duration> {
    let left = deadline.checked_duration_since(Instant::now())?;
    Some((left + GRACE).min(cap))
}

/// One SOAP exchange: build the envelope with a fresh message id, post it, sort the reply.
async fn exchange(
    c: &mut http::Client,
    operation_timeout: Duration,
    limit: Duration,
    build: impl FnOnce(&Header<'_>) -> String,
) -> Result<(String, Vec<u8>), OpError> {
    let id = soap::new_message_id();
    let to = c.url().to_string();
    let xml = build(&Header {
        to: &to,
        message_id: &id,
        operation_timeout,
    });
    let reply = c.post(xml.as_bytes(), limit).await?;
    match reply.status {
        200 => Ok((id, reply.body)),
        500 => match soap::fault(&reply.body) {
            Some(_) if soap::relates_to(&reply.body).is_some_and(|r| r != id) => {
                Err(OpError::Transport(TransportError::Remote(format!(
                    "a fault relating to another message than {id}: not an answer to this request"
                ))))
            }
            Some(f) => Err(OpError::Fault(f)),
            None if reply.body.is_empty() => Err(OpError::Transport(TransportError::Remote(
                "http 500 with an empty body (the service refused the request, e.g. an \
                 unencrypted message)"
                    .into(),
            ))),
            None => Err(OpError::Transport(TransportError::Remote(
                "http 500 without a ws-management fault".into(),
            ))),
        },
        503 => Err(OpError::Transport(TransportError::ConnectionLost(
            "the winrm service is unavailable (http 503)".into(),
        ))),
        s => Err(OpError::Transport(TransportError::Remote(format!(
            "unexpected http status {s}"
        )))),
    }
}

/// stdout as UTF-8: a UTF-16LE byte order mark means the host wrote UTF-16; a UTF-8 one is
/// dropped; anything else is kept as-is.
pub fn decode_stdout(bytes: Vec<u8>) -> Vec<u8> {
    if let Some(rest) = bytes.strip_prefix(&[0xFF, 0xFE]) {
        let units: Vec<u16> = rest
            .chunks(2)
            .map(|c| u16::from_le_bytes([c[0], *c.get(1).unwrap_or(&0)]))
            .collect();
        return String::from_utf16_lossy(&units).into_bytes();
    }
    if let Some(rest) = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]) {
        return rest.to_vec();
    }
    bytes
}

/// What one command needs.
struct CommandSpec<'a> {
    command: &'a str,
    args: &'a [&'a str],
    /// stdin, already cut into the pieces each Send carries.
    stdin: Vec<&'a [u8]>,
    /// What of the output to keep (step output against the run's budget).
    keep: &'a Keep,
}

impl WinrmTransport {
    /// A transport for `host_name` (the plan's name, used in messages) reaching `spec`.
    /// Nothing is sent until [`Transport::connect`] or the first operation; the password is
    /// read from `spec.password` each time a connection is authenticated.
    pub fn new(host_name: &str, spec: &WinrmSpec) -> Result<Self, TransportError> {
        Ok(WinrmTransport {
            dialect: Dialect::PowerShell,
            session: tokio::sync::Mutex::new(Session {
                http: http::Client::new(host_name, spec)?,
                shell: None,
            }),
        })
    }

    /// Use `dialect` for the transport's own scripts (`put`, `get`, the stdin wrapper of
    /// `run`). [`Dialect::PosixStandIn`] exists only for the lab's WinRM stand-in host, which
    /// runs scripts with `/bin/sh`.
    pub fn with_script_dialect(mut self, dialect: Dialect) -> Self {
        self.dialect = dialect;
        self
    }

    /// Connection counters (connections opened, requests sent).
    pub async fn stats(&self) -> Stats {
        self.session.lock().await.http.stats()
    }

    /// The WinRS shell kept between runs, if any (diagnostics).
    pub async fn shell_id(&self) -> Option<String> {
        self.session.lock().await.shell.clone()
    }

    /// How long the last connect + authentication took.
    pub async fn last_connect_time(&self) -> Option<Duration> {
        self.session.lock().await.http.last_connect
    }

    /// Run `command` with `args` in the transport's shell, feeding `stdin`, within `timeout`.
    async fn run_command(
        &self,
        spec: CommandSpec<'_>,
        timeout: Duration,
    ) -> Result<Output, TransportError> {
        let deadline = Instant::now() + timeout;
        let mut guard = self.session.lock().await;
        let session = &mut *guard;
        let mut shell_id = None;
        let mut command_id = None;
        let result = self
            .in_shell(session, &spec, deadline, &mut shell_id, &mut command_id)
            .await;
        let result = match result {
            Err(TransportError::Timeout(_)) => Err(TransportError::Timeout(timeout)),
            other => other,
        };
        // A finished command is released and its shell kept for the next run. After any
        // failure the command is terminated and the shell deleted, so the next run starts
        // clean. Failures here do not change the run's result.
        let cleanup = Instant::now() + CLEANUP;
        let c = &mut session.http;
        if let (Some(shell), Some(cmd)) = (&shell_id, &command_id) {
            if let Some(limit) = budget(cleanup, CLEANUP) {
                let _ = exchange(c, REQUEST_LIMIT, limit, |h| {
                    soap::signal_terminate(h, shell, cmd)
                })
                .await;
            }
        }
        session.shell = match (&result, shell_id) {
            (Ok(_), Some(shell)) => Some(shell),
            (Err(_), Some(shell)) => {
                if let Some(limit) = budget(cleanup, CLEANUP) {
                    let _ =
                        exchange(c, REQUEST_LIMIT, limit, |h| soap::delete_shell(h, &shell)).await;
                }
                None
            }
            (_, None) => None,
        };
        result
    }

    /// Create a shell.
    async fn create_shell(
        c: &mut http::Client,
        deadline: Instant,
    ) -> Result<String, TransportError> {
        let limit =
            budget(deadline, REQUEST_LIMIT).ok_or(TransportError::Timeout(Duration::ZERO))?;
        let (id, body) = exchange(c, REQUEST_LIMIT, limit, soap::create_shell)
            .await
            .map_err(|e| settle(e, deadline).into_transport("create shell"))?;
        soap::parse_shell_id(&body, &id).map_err(|e| bad_reply("create shell", e))
    }

    /// Start the command in `shell`; its CommandId.
    async fn start_command(
        c: &mut http::Client,
        shell: &str,
        spec: &CommandSpec<'_>,
        deadline: Instant,
    ) -> Result<String, OpError> {
        let limit = budget(deadline, REQUEST_LIMIT)
            .ok_or(OpError::Transport(TransportError::Timeout(Duration::ZERO)))?;
        let (id, body) = exchange(c, REQUEST_LIMIT, limit, |h| {
            soap::command(h, shell, spec.command, spec.args)
        })
        .await?;
        soap::parse_command_id(&body, &id)
            .map_err(|e| OpError::Transport(bad_reply("start command", e)))
    }

    async fn in_shell(
        &self,
        session: &mut Session,
        spec: &CommandSpec<'_>,
        deadline: Instant,
        shell_out: &mut Option<String>,
        command_out: &mut Option<String>,
    ) -> Result<Output, TransportError> {
        let timed_out = || TransportError::Timeout(Duration::ZERO);
        let c = &mut session.http;
        let (shell_id, kept) = match session.shell.take() {
            Some(id) => (id, true),
            None => (Self::create_shell(c, deadline).await?, false),
        };
        *shell_out = Some(shell_id.clone());
        let (shell_id, cmd) = match Self::start_command(c, &shell_id, spec, deadline).await {
            Ok(cmd) => (shell_id, cmd),
            // The kept shell expired or the host restarted since the last run: the command
            // did not start, so a new shell is safe.
            Err(OpError::Fault(f)) if kept && f.is_shell_not_found() => {
                let fresh = Self::create_shell(c, deadline).await?;
                *shell_out = Some(fresh.clone());
                let cmd = Self::start_command(c, &fresh, spec, deadline)
                    .await
                    .map_err(|e| settle(e, deadline).into_transport("start command"))?;
                (fresh, cmd)
            }
            Err(e) => return Err(settle(e, deadline).into_transport("start command")),
        };
        let shell_id = shell_id.as_str();
        *command_out = Some(cmd.clone());

        let pieces = spec.stdin.len();
        for (i, piece) in spec.stdin.iter().enumerate() {
            let last = i + 1 == pieces;
            let limit = budget(deadline, REQUEST_LIMIT).ok_or_else(timed_out)?;
            let (id, body) = exchange(c, REQUEST_LIMIT, limit, |h| {
                soap::send(h, shell_id, &cmd, piece, last)
            })
            .await
            .map_err(|e| settle(e, deadline).into_transport("send stdin"))?;
            soap::parse_ack(&body, &id).map_err(|e| bad_reply("send stdin", e))?;
        }

        // Shown live as `decode` gives them at the end: stdout without a UTF-8 byte order
        // mark (UTF-16 only whole); PowerShell's stderr is CLIXML, decoded only whole.
        let err_live = match self.dialect {
            Dialect::PowerShell => Live::AtEnd,
            Dialect::PosixStandIn => Live::Lines,
        };
        let (mut stdout, mut stderr) = (
            Collector::new(spec.keep, Stream::Stdout, Live::Utf8Lines),
            Collector::new(spec.keep, Stream::Stderr, err_live),
        );
        loop {
            let left = deadline
                .checked_duration_since(Instant::now())
                .ok_or_else(timed_out)?;
            let poll = left.min(RECEIVE_POLL).max(Duration::from_millis(500));
            let limit = poll + Duration::from_secs(10);
            match exchange(c, poll, limit, |h| soap::receive(h, shell_id, &cmd)).await {
                Ok((id, body)) => {
                    let r = soap::parse_receive(&body, &id).map_err(|e| bad_reply("receive", e))?;
                    stdout.push(&r.stdout)?;
                    stderr.push(&r.stderr)?;
                    if let Some(code) = r.done {
                        return Ok(Output {
                            stdout: stdout.finish(),
                            stderr: stderr.finish(),
                            exit: code,
                        });
                    }
                }
                Err(OpError::Fault(f)) if f.is_timed_out() => continue,
                Err(e) => return Err(settle(e, deadline).into_transport("receive")),
            }
        }
    }

    fn decode(&self, out: Output) -> Output {
        Output {
            stdout: decode_stdout(out.stdout),
            stderr: super::clixml::decode_stderr(&out.stderr),
            exit: out.exit,
        }
    }
}

/// Time allowed for moving `len` bytes in `put`/`get` (the trait gives no limit).
fn transfer_timeout(len: usize) -> Duration {
    Duration::from_secs(120 + (len / 65_536) as u64)
}

#[async_trait]
impl Transport for WinrmTransport {
    /// PowerShell; `Posix` under the stand-in dialect (the stand-in runs `/bin/sh`).
    fn shell(&self) -> Shell {
        match self.dialect {
            Dialect::PowerShell => Shell::PowerShell,
            Dialect::PosixStandIn => Shell::Posix,
        }
    }

    /// Always PowerShell: a WinRM host is a Windows host, whatever dialect its scripts use.
    fn reboot_shell(&self) -> Shell {
        Shell::PowerShell
    }

    /// A new authenticated connection. A kept shell survives it (shells do not belong to
    /// connections); if it has vanished meanwhile, the next run replaces it.
    async fn connect(&self) -> Result<(), TransportError> {
        self.session.lock().await.http.connect().await
    }

    async fn run_keeping(
        &self,
        script: &str,
        timeout: Duration,
        keep: &Keep,
    ) -> Result<Output, TransportError> {
        let stdin = scripts::run_stdin(self.dialect, script);
        let mut pieces: Vec<&[u8]> = stdin.chunks(STDIN_CHUNK).collect();
        if pieces.is_empty() {
            pieces.push(&[]);
        }
        let out = self
            .run_command(
                CommandSpec {
                    command: scripts::POWERSHELL,
                    args: &scripts::RUN_ARGS,
                    stdin: pieces,
                    keep,
                },
                timeout,
            )
            .await?;
        Ok(self.decode(out))
    }

    async fn put(&self, path: &str, bytes: &[u8], mode: Option<u32>) -> Result<(), TransportError> {
        let sha = hex::encode(Sha256::digest(bytes));
        let nonce = &crate::fs::new_nonce()[..16];
        let script = scripts::upload_script(self.dialect, path, &sha, nonce, mode);
        let args = scripts::encoded_command_args(&script);
        if scripts::command_line_len(scripts::POWERSHELL, &args) > scripts::COMMAND_LINE_LIMIT {
            return Err(TransportError::Local(format!(
                "put {path}: the path is too long for the upload command line"
            )));
        }
        let b64 = base64::engine::general_purpose::STANDARD;
        let lines: Vec<Vec<u8>> = bytes
            .chunks(UPLOAD_CHUNK)
            .map(|c| {
                let mut line = b64.encode(c).into_bytes();
                line.push(b'\n');
                line
            })
            .collect();
        let mut pieces: Vec<&[u8]> = lines.iter().map(Vec::as_slice).collect();
        if pieces.is_empty() {
            pieces.push(&[]);
        }
        let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self
            .run_command(
                CommandSpec {
                    command: scripts::POWERSHELL,
                    args: &arg_refs,
                    stdin: pieces,
                    keep: &Keep::all(),
                },
                transfer_timeout(bytes.len()),
            )
            .await?;
        let out = self.decode(out);
        let reported = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.exit != 0 || reported != sha {
            let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
            let detail = if reported.len() == 64 && reported != sha {
                format!("checksum mismatch: sent sha256 {sha}, the host wrote {reported}")
            } else if stderr.is_empty() {
                format!("upload exited with {}", out.exit)
            } else {
                stderr
            };
            return Err(TransportError::Remote(format!("put {path}: {detail}")));
        }
        Ok(())
    }

    async fn get(&self, path: &str) -> Result<Vec<u8>, TransportError> {
        let script = scripts::get_script(self.dialect, path);
        let out = self.run(&script, transfer_timeout(0) * 2).await?;
        if out.exit != 0 {
            let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
            return Err(TransportError::Remote(format!("get {path}: {stderr}")));
        }
        let text: Vec<u8> = out
            .stdout
            .into_iter()
            .filter(|b| !b.is_ascii_whitespace())
            .collect();
        base64::engine::general_purpose::STANDARD
            .decode(&text)
            .map_err(|e| TransportError::Remote(format!("get {path}: output is not base64: {e}")))
    }

    /// Deletes the kept shell (briefly: the host may be going down) and drops the connection.
    async fn close(&self) {
        let mut s = self.session.lock().await;
        if let Some(shell) = s.shell.take() {
            let _ = exchange(&mut s.http, REQUEST_LIMIT, CLOSE_LIMIT, |h| {
                soap::delete_shell(h, &shell)
            })
            .await;
        }
        s.http.disconnect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A WinRM host is restarted as Windows whatever its script dialect: under the lab
    /// stand-in's POSIX dialect a POSIX `reboot` would restart the machine running the
    /// stand-in.
    #[test]
    fn a_winrm_host_reboots_as_windows_in_every_dialect() {
        let spec = crate::transport::spec::WinrmSpec {
            address: "127.0.0.1".into(),
            port: 1,
            user: "Administrator".into(),
            password: crate::transport::spec::SecretSource::Env("KWIN_TEST_UNSET_PASSWORD".into()),
            https: false,
            auth: crate::transport::spec::WinrmAuth::Ntlm,
            cert_fingerprint: None,
            ca_file: None,
            insecure: false,
            connect_timeout_secs: 1,
        };
        for dialect in [Dialect::PowerShell, Dialect::PosixStandIn] {
            let t = match WinrmTransport::new("ww1", &spec) {
                Ok(t) => t.with_script_dialect(dialect),
                Err(e) => panic!("transport: {e}"),
            };
            assert_eq!(t.reboot_shell(), Shell::PowerShell, "{dialect:?}");
        }
    }

    #[test]
    fn stdout_is_decoded_from_utf8_or_utf16_and_loses_its_bom() {
        assert_eq!(decode_stdout(b"plain\n".to_vec()), b"plain\n");
        assert_eq!(decode_stdout(vec![0xEF, 0xBB, 0xBF, b'a']), b"a");
        let utf16: Vec<u8> = [0xFF, 0xFE]
            .into_iter()
            .chain("hé ✓\r\n".encode_utf16().flat_map(u16::to_le_bytes))
            .collect();
        assert_eq!(decode_stdout(utf16), "hé ✓\r\n".as_bytes());
        assert_eq!(decode_stdout(vec![0xFF, 0xFE, b'a']), b"a");
    }

    #[test]
    fn chunk_sizes_fit_the_envelope() {
        const {
            assert!(UPLOAD_CHUNK.is_multiple_of(3));
            assert!(UPLOAD_CHUNK / 3 * 4 < STDIN_CHUNK);
        }
        assert!(soap::send_envelope_len(STDIN_CHUNK) < 500 * 1024);
    }
}
