//! The one place a host's [`ConnSpec`] becomes a [`Transport`].
//!
//! Construction never touches the network; connecting happens in the host worker, so a host
//! that cannot be reached fails alone, with the transport's message.

use crate::plan::{ConnSpec, ResolvedHost};
use crate::secret::Scrubber;
use crate::transport::local::LocalTransport;
use crate::transport::ssh::{SshOptions, SshTransport};
use crate::transport::winrm::{Dialect, WinrmTransport};
use crate::transport::{Output, Shell, Transport, TransportError};
use async_trait::async_trait;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Environment variable that makes WinRM hosts speak the POSIX dialect of the lab's WinRM
/// stand-in host (`lab/winrm-stand-in`), for kwin's end-to-end tests only.
pub const WINRM_STAND_IN_ENV: &str = "KWIN_WINRM_STAND_IN";

/// What every transport of a run shares.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    pub accept_new_host_keys: bool,
    /// kwin's own known_hosts (`.kwin/known_hosts`).
    pub known_hosts: PathBuf,
}

/// A host's transport, plus what the CLI may want to tell the user about it afterwards.
pub struct Made {
    pub transport: Arc<dyn Transport>,
    ssh: Option<Arc<SshTransport>>,
}

impl Made {
    /// "recorded new host key SHA256:... for h1 in .kwin/known_hosts", after a run with
    /// `--accept-new-host-keys` met an unknown key.
    pub fn recorded_host_key(&self) -> Option<String> {
        self.ssh
            .as_ref()
            .and_then(|s| s.recorded_new_key())
            .map(|k| k.to_string())
    }
}

/// The transport for `host`.
pub fn transport_for(host: &ResolvedHost, opts: &ConnectOptions, scrubber: &Scrubber) -> Made {
    match &host.conn {
        ConnSpec::Local { become_root } => Made {
            transport: Arc::new(LocalTransport {
                become_root: *become_root,
            }),
            ssh: None,
        },
        ConnSpec::Ssh(spec) => {
            let mut o = SshOptions::new(&opts.known_hosts);
            o.accept_new_host_keys = opts.accept_new_host_keys;
            o.scrubber = Some(scrubber.clone());
            let ssh = Arc::new(SshTransport::new(&host.name, spec, o));
            Made {
                transport: ssh.clone(),
                ssh: Some(ssh),
            }
        }
        ConnSpec::Winrm(spec) => match WinrmTransport::new(&host.name, spec) {
            Ok(t) => {
                // Test seam for kwin's own tests against lab/winrm-stand-in (a WinRM server
                // that runs scripts with /bin/sh): never set outside them.
                let t = if std::env::var_os(WINRM_STAND_IN_ENV).is_some() {
                    t.with_script_dialect(Dialect::PosixStandIn)
                } else {
                    t
                };
                Made {
                    transport: Arc::new(t),
                    ssh: None,
                }
            }
            Err(e) => Made {
                transport: Arc::new(Unavailable {
                    shell: Shell::PowerShell,
                    reason: e.to_string(),
                }),
                ssh: None,
            },
        },
    }
}

/// Secrets a host's connection uses (passwords, passphrases), for the run's scrubber. Sources
/// that cannot be read are skipped here; connecting reports them.
pub fn connection_secrets(host: &ResolvedHost) -> Vec<crate::secret::Secret> {
    let sources = match &host.conn {
        ConnSpec::Ssh(s) => vec![s.password.as_ref(), s.passphrase.as_ref()],
        ConnSpec::Winrm(w) => vec![Some(&w.password)],
        ConnSpec::Local { .. } => vec![],
    };
    sources
        .into_iter()
        .flatten()
        .filter_map(|s| s.read().ok())
        .collect()
}

/// A transport kwin cannot offer for this host: every connect fails with `reason`.
#[derive(Debug)]
struct Unavailable {
    shell: Shell,
    reason: String,
}

#[async_trait]
impl Transport for Unavailable {
    fn shell(&self) -> Shell {
        self.shell
    }
    async fn connect(&self) -> Result<(), TransportError> {
        Err(TransportError::Local(self.reason.clone()))
    }
    async fn run(&self, _script: &str, _timeout: Duration) -> Result<Output, TransportError> {
        Err(TransportError::Local(self.reason.clone()))
    }
    async fn put(&self, _p: &str, _b: &[u8], _m: Option<u32>) -> Result<(), TransportError> {
        Err(TransportError::Local(self.reason.clone()))
    }
    async fn get(&self, _p: &str) -> Result<Vec<u8>, TransportError> {
        Err(TransportError::Local(self.reason.clone()))
    }
    async fn close(&self) {}
}
