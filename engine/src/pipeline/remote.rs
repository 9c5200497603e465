//! One host of a session, for work that is not a task graph: `kwin verify`'s checks and
//! `kwin kubeconfig`'s read, run from the first control plane.
//!
//! [`Remote`] is the narrow interface such work sees (the verify runner in `kwin-modules`
//! holds nothing else): run a script, emit an event, wait. [`HostRemote`] implements it over
//! the session's [`Conn`]: every script and its output in the host log, scrubbed, retried
//! after a lost connection per `[settings]` (callers send read-only or idempotent scripts
//! only), with the run's [`Cancel`]: after Ctrl-C a [`RunKind::Check`] script or a wait
//! returns [`Interrupted`] at once, a [`RunKind::Cleanup`] script still runs.

use crate::event::{Event, EventSink};
use crate::exec::conn::{Backoff, Conn, LogStdout};
use crate::exec::Cancel;
use crate::secret::Scrubber;
use crate::transport::Output;
use async_trait::async_trait;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Ctrl-C was pressed: stop, clean up what must be, report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupted;

/// Why a remote script gave no output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteError {
    Interrupted,
    /// The transport's error (scrubbed).
    Failed(String),
}

impl std::fmt::Display for RemoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RemoteError::Interrupted => f.write_str("interrupted"),
            RemoteError::Failed(e) => f.write_str(e),
        }
    }
}

/// How a script relates to Ctrl-C and to the host log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    /// A check: not started after Ctrl-C, abandoned when Ctrl-C comes while it runs.
    Check,
    /// Cleanup of what the work created: runs even after Ctrl-C.
    Cleanup,
    /// A read whose stdout is a secret (the admin kubeconfig): like `Check`, and its stdout
    /// is never logged.
    Secret,
}

/// The host a piece of work runs on, as that work sees it.
#[async_trait]
pub trait Remote: Send + Sync {
    /// The host's name in the plan.
    fn host(&self) -> &str;
    /// Connect (retried per `[settings]`); the error is the transport's, scrubbed.
    async fn connect(&self) -> Result<(), String>;
    /// Run `script` (`what` names it in the host log).
    async fn run(
        &self,
        what: &str,
        script: &str,
        timeout: Duration,
        kind: RunKind,
    ) -> Result<Output, RemoteError>;
    /// Send an event to the session's consumer.
    fn emit(&self, e: Event);
    /// `text` with every secret of the session masked.
    fn scrub(&self, text: &str) -> String;
    /// Wait `d`, unless Ctrl-C comes first.
    async fn sleep(&self, d: Duration) -> Result<(), Interrupted>;
    /// The time deadlines are measured in.
    fn now(&self) -> Instant;
    /// Whether Ctrl-C was pressed.
    fn interrupted(&self) -> bool;
    /// Close the connection.
    async fn close(&self);
}

/// [`Remote`] over a session's connection to one host.
pub struct HostRemote {
    pub(crate) conn: Arc<Conn>,
    pub(crate) events: EventSink,
    pub(crate) scrubber: Scrubber,
    pub(crate) cancel: Cancel,
    pub(crate) retries: u32,
    pub(crate) retry_delay: Duration,
    /// `settings.wait_for_hosts`, for the first connection.
    pub(crate) wait_for_hosts: Duration,
}

impl HostRemote {
    fn backoff(&self) -> Backoff {
        Backoff::new(self.retries, self.retry_delay)
    }
}

#[async_trait]
impl Remote for HostRemote {
    fn host(&self) -> &str {
        &self.conn.host
    }

    async fn connect(&self) -> Result<(), String> {
        let connected = self
            .conn
            .connect_retrying(self.backoff().waiting(self.wait_for_hosts));
        tokio::select! {
            r = connected => r.map_err(|e| self.scrubber.scrub(&e.to_string())),
            () = self.cancel.cancelled() => Err("interrupted".into()),
        }
    }

    async fn run(
        &self,
        what: &str,
        script: &str,
        timeout: Duration,
        kind: RunKind,
    ) -> Result<Output, RemoteError> {
        let log = match kind {
            RunKind::Secret => LogStdout::TaskOutputs,
            RunKind::Check | RunKind::Cleanup => LogStdout::Yes,
        };
        let run = async {
            self.conn
                .run_idempotent(what, script, timeout, self.backoff(), log)
                .await
                .map_err(|e| RemoteError::Failed(self.scrubber.scrub(&e.to_string())))
        };
        match kind {
            RunKind::Cleanup => run.await,
            RunKind::Check | RunKind::Secret => {
                if self.cancel.is_cancelled() {
                    return Err(RemoteError::Interrupted);
                }
                tokio::select! {
                    r = run => r,
                    () = self.cancel.cancelled() => Err(RemoteError::Interrupted),
                }
            }
        }
    }

    fn emit(&self, e: Event) {
        self.events.send(e);
    }

    fn scrub(&self, text: &str) -> String {
        self.scrubber.scrub(text)
    }

    async fn sleep(&self, d: Duration) -> Result<(), Interrupted> {
        tokio::select! {
            () = tokio::time::sleep(d) => Ok(()),
            () = self.cancel.cancelled() => Err(Interrupted),
        }
    }

    fn now(&self) -> Instant {
        Instant::now()
    }

    fn interrupted(&self) -> bool {
        self.cancel.is_cancelled()
    }

    async fn close(&self) {
        self.conn.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::logs::HostLog;
    use crate::transport::local::LocalTransport;

    /// A `HostRemote` on this machine (`local` transport), logging into `dir`.
    fn remote(dir: &std::path::Path) -> (HostRemote, crate::exec::Canceller) {
        let scrubber = Scrubber::new();
        let (log, err) = HostLog::open(dir, "h", scrubber.clone());
        assert!(err.is_none(), "{err:?}");
        let (events, _rx) = EventSink::channel();
        let (canceller, cancel) = Cancel::pair();
        let transport = Arc::new(LocalTransport { become_root: false });
        let r = HostRemote {
            conn: Arc::new(Conn::new("h", transport, log)),
            events,
            scrubber,
            cancel,
            retries: 0,
            retry_delay: Duration::from_millis(1),
            wait_for_hosts: Duration::ZERO,
        };
        (r, canceller)
    }

    // The output is `key-data`; neither script contains it.
    const READ: &str = "printf 'key-%s\\n' data";

    #[tokio::test]
    async fn a_secret_read_reaches_the_caller_and_never_the_host_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (r, _c) = remote(dir.path());
        r.connect().await.expect("connect");
        let t = Duration::from_secs(10);
        let secret = r.run("secret read", READ, t, RunKind::Secret).await;
        let check = r
            .run("check read", "printf 'out-%s\\n' put", t, RunKind::Check)
            .await;
        r.close().await;
        assert_eq!(secret.expect("runs").stdout, b"key-data\n");
        assert_eq!(check.expect("runs").stdout, b"out-put\n");
        let log = std::fs::read_to_string(dir.path().join("h.log")).expect("host log");
        assert!(log.contains("secret read") && log.contains(READ), "{log}");
        assert!(
            log.contains("out-put"),
            "a check's output is logged:\n{log}"
        );
        assert!(
            !log.contains("key-data"),
            "the secret read's output is logged:\n{log}"
        );
    }

    #[tokio::test]
    async fn after_ctrl_c_a_check_is_not_run_and_a_cleanup_is() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (r, c) = remote(dir.path());
        r.connect().await.expect("connect");
        c.cancel();
        let t = Duration::from_secs(10);
        assert_eq!(
            r.run("check", "echo checked", t, RunKind::Check).await,
            Err(RemoteError::Interrupted)
        );
        let cleanup = r.run("cleanup", "echo cleaned", t, RunKind::Cleanup).await;
        assert_eq!(cleanup.expect("runs").stdout, b"cleaned\n");
        assert_eq!(r.sleep(Duration::from_secs(30)).await, Err(Interrupted));
        r.close().await;
    }
}
