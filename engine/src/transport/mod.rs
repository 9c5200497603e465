//! Transports: how kwin reaches a host.
//!
//! A [`Transport`] runs a script on one host (sent over stdin, never as a command line), puts
//! and gets files, and says which [`Shell`] the host speaks. Implementations:
//! - `ssh` (ssh2, blocking, confined to a thread per connection in `ssh.rs`), also carrying
//!   PowerShell for `ssh-powershell` Windows hosts;
//! - `winrm` (hyper + rustls on one owned connection, WS-Management shell operations, NTLM
//!   via sspi with message encryption, or Basic over HTTPS) in `winrm/`;
//! - `local` (runs on the machine kwin runs on; tests and self-provisioning).
//!
//! Only this folder knows ssh2, reqwest, hyper, rustls and sspi. Transports do not retry on
//! their own: the engine applies the retry policy using [`TransportError::is_retryable`].

pub use crate::shell::{Output, Shell, MAX_OUTPUT};
use async_trait::async_trait;
use std::time::Duration;

pub mod clixml;
pub mod connect;
mod error;
pub mod http;
pub mod local;
/// The strict mock transport, for tests only (`test-support`).
#[cfg(any(test, feature = "test-support"))]
pub mod mock;
pub mod output;
pub mod spec;
pub mod ssh;
pub mod winrm;

pub use error::{connect_reason, ConnectKind, TransportError};

/// A connection to one host.
#[async_trait]
pub trait Transport: Send + Sync {
    /// The language scripts for this host are written in.
    fn shell(&self) -> Shell;
    /// The language of the host's own restart and boot-id commands (`exec::reboot`). The same
    /// as [`Transport::shell`], except for a WinRM host under the lab stand-in's POSIX dialect:
    /// its module scripts run in `/bin/sh`, but it is restarted as a Windows host, never with
    /// a POSIX `reboot`.
    fn reboot_shell(&self) -> Shell {
        self.shell()
    }
    /// Establish (or re-establish) the connection. Called once before first use and again
    /// after a retryable error.
    async fn connect(&self) -> Result<(), TransportError>;
    /// Run `script` (sent over stdin to the host's shell; with `become`, under sudo), keeping
    /// of the output what `keep` says: step output counts against the run's budget, and with
    /// `-v` a tap gets its lines as they arrive (see [`output`]). What every transport
    /// implements: one that streams filters while reading (memory stays bounded); one that
    /// reads the output whole applies `keep` afterwards ([`output::keep_output`]).
    async fn run_keeping(
        &self,
        script: &str,
        timeout: Duration,
        keep: &output::Keep,
    ) -> Result<Output, TransportError>;
    /// [`Transport::run_keeping`] keeping everything (up to [`MAX_OUTPUT`] per stream).
    async fn run(&self, script: &str, timeout: Duration) -> Result<Output, TransportError> {
        self.run_keeping(script, timeout, &output::Keep::all())
            .await
    }
    /// [`Transport::run_keeping`] of the script `parts` make together. A transport that
    /// copies a script anyway (to hand it to the thread that talks to the host) joins them in
    /// that copy, so a big script wrapped by the caller is in memory once, not twice: a run
    /// on hundreds of hosts holds a batch per host at once.
    async fn run_joined(
        &self,
        parts: &[&str],
        timeout: Duration,
        keep: &output::Keep,
    ) -> Result<Output, TransportError> {
        self.run_keeping(&parts.concat(), timeout, keep).await
    }
    /// Write `bytes` to `path` atomically (temp name + rename), with `mode` on POSIX hosts.
    async fn put(&self, path: &str, bytes: &[u8], mode: Option<u32>) -> Result<(), TransportError>;
    /// Read the file at `path`.
    async fn get(&self, path: &str) -> Result<Vec<u8>, TransportError>;
    /// Drop the connection (for reboots and shutdown).
    async fn close(&self);
}
