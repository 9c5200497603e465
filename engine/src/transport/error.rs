//! What can go wrong on a connection, classified for the engine's retry policy
//! ([`TransportError::is_retryable`]).

use std::time::Duration;
use thiserror::Error;

/// Errors of a transport, classified for the retry policy.
#[derive(Debug, Error)]
pub enum TransportError {
    /// Could not establish a connection (refused, unreachable, DNS). Retryable: a host that
    /// is booting refuses, then accepts.
    #[error("cannot connect to {address}: {reason}")]
    Connect { address: String, reason: String },
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
    /// Local IO (reading a key file, etc.).
    #[error("{0}")]
    Local(String),
}

impl TransportError {
    /// Whether retrying the same operation after a backoff may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            TransportError::Connect { .. } | TransportError::ConnectionLost(_)
        )
    }
}
