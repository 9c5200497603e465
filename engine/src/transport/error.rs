//! What can go wrong on a connection, classified for the engine's retry policy
//! ([`TransportError::is_retryable`]).

use std::time::Duration;
use thiserror::Error;

/// Errors of a transport, classified for the retry policy.
#[derive(Debug, Error)]
pub enum TransportError {
    /// Could not establish a connection (refused, no answer, unreachable, DNS). Retryable: a
    /// host that is booting refuses, then accepts. The reason is worded the same for every
    /// transport ([`connect_reason`]).
    #[error("cannot connect to {address}: {reason}")]
    Connect {
        address: String,
        reason: String,
        kind: ConnectKind,
    },
    /// An established connection broke. Retryable for idempotent operations.
    #[error("connection lost: {0}")]
    ConnectionLost(String),
    /// The host's identity did not match. Never retryable.
    #[error("host key mismatch for {host}: expected {expected}, got {actual}")]
    HostKeyMismatch {
        host: String,
        expected: String,
        actual: String,
    },
    /// Unknown host key and no pin, and new keys are not accepted. `fix` says how to trust it
    /// (a pin where the plan can hold one, else known_hosts).
    #[error("host key of {host} is unknown ({actual}); {fix}")]
    HostKeyUnknown {
        host: String,
        actual: String,
        fix: String,
    },
    /// Credentials refused. Never retryable.
    #[error("authentication failed for {user}@{host}: {reason}")]
    Auth {
        host: String,
        user: String,
        reason: String,
    },
    /// TLS certificate not trusted or fingerprint mismatch. Never retryable.
    #[error("TLS failure: {0}")]
    Tls(String),
    /// The operation did not finish within its time limit.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The remote side reported a protocol-level fault (e.g. a WS-Management fault).
    #[error("remote fault: {0}")]
    Remote(String),
    /// Output exceeded the limit kwin accepts from one command.
    #[error("output exceeded {limit} bytes")]
    OutputTooLarge { limit: usize },
    /// Once the run's output budget is spent, a command whose output kwin reads sent more
    /// than [`super::output::AFTER_BUDGET`] bytes on one stream.
    #[error("output exceeded {after} bytes after the run's output budget of {budget} bytes was spent (settings.output_budget_mib)")]
    OutputBudgetSpent { budget: u64, after: usize },
    /// Local IO (reading a key file, etc.).
    #[error("{0}")]
    Local(String),
}

/// What kind of connect failure a [`TransportError::Connect`] is: the host answered that
/// nothing listens (`Refused`), did not answer in time, cannot be routed to, or its name
/// did not resolve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectKind {
    Refused,
    NoAnswer,
    Unreachable,
    Resolve,
    Other,
}

impl TransportError {
    /// Whether retrying the same operation after a backoff may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            TransportError::Connect { .. } | TransportError::ConnectionLost(_)
        )
    }

    /// A connect failure of `kind` to `address`.
    pub fn connect(
        address: impl Into<String>,
        kind: ConnectKind,
        reason: impl Into<String>,
    ) -> Self {
        TransportError::Connect {
            address: address.into(),
            reason: reason.into(),
            kind,
        }
    }

    /// A connect failure from the socket's error, worded by [`connect_reason`].
    pub fn connect_io(address: impl Into<String>, e: &std::io::Error, timeout: Duration) -> Self {
        let (kind, reason) = connect_reason(e, timeout);
        TransportError::connect(address, kind, reason)
    }

    /// The port refused the connection: the host is up, nothing listens there (yet).
    pub fn is_refused(&self) -> bool {
        matches!(
            self,
            TransportError::Connect {
                kind: ConnectKind::Refused,
                ..
            }
        )
    }
}

/// The words every transport uses for a socket that could not connect: never the raw
/// `os error N`.
pub fn connect_reason(e: &std::io::Error, timeout: Duration) -> (ConnectKind, String) {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::ConnectionRefused => (
            ConnectKind::Refused,
            "connection refused: the host is up, but nothing listens on that port yet".into(),
        ),
        K::TimedOut | K::WouldBlock => (
            ConnectKind::NoAnswer,
            format!("no answer within {}s", timeout.as_secs()),
        ),
        K::HostUnreachable => (
            ConnectKind::Unreachable,
            "host unreachable (no route to it: down, still booting, or a firewall that rejects)"
                .into(),
        ),
        K::NetworkUnreachable => (
            ConnectKind::Unreachable,
            "network unreachable (this machine has no route to that address)".into(),
        ),
        K::ConnectionReset => (ConnectKind::Other, "connection reset".into()),
        K::AddrNotAvailable => (
            ConnectKind::Unreachable,
            "address not available on this machine".into(),
        ),
        _ => {
            // The OS's sentence without its `(os error N)` tail, lowercased.
            let s = e.to_string();
            let s = match s.rfind(" (os error ") {
                Some(i) => s[..i].to_string(),
                None => s,
            };
            let mut c = s.chars();
            let s = match c.next() {
                Some(f) => f.to_lowercase().collect::<String>() + c.as_str(),
                None => s,
            };
            (ConnectKind::Other, s)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_name_the_failure_without_os_error_numbers() {
        let t = Duration::from_secs(10);
        let of = |k| connect_reason(&std::io::Error::from(k), t);
        assert_eq!(
            of(std::io::ErrorKind::ConnectionRefused).0,
            ConnectKind::Refused
        );
        assert_eq!(of(std::io::ErrorKind::TimedOut).1, "no answer within 10s");
        // EHOSTUNREACH, as a connect(2) gives it
        let e = std::io::Error::from_raw_os_error(113);
        let (k, why) = connect_reason(&e, t);
        assert_eq!(k, ConnectKind::Unreachable);
        assert!(!why.contains("os error"), "{why}");
        let e = std::io::Error::from_raw_os_error(95);
        assert!(!connect_reason(&e, t).1.contains("os error"));
    }
}
