//! The one place a host's [`ConnSpec`] becomes a [`Transport`].
//!
//! Construction never touches the network; connecting happens in the host worker, so a host
//! that cannot be reached fails alone, with the transport's message.

use super::local::LocalTransport;
use super::output::Keep;
use super::spec::ConnSpec;
pub use super::spec::WINRM_STAND_IN_ENV;
use super::ssh::{SshOptions, SshTransport};
use super::winrm::{Dialect, WinrmTransport};
use super::{Output, Shell, Transport, TransportError};
use crate::secret::Scrubber;
use async_trait::async_trait;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

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
    /// Through a jump host, both keys it recorded, `; `-separated.
    pub fn recorded_host_key(&self) -> Option<String> {
        let keys: Vec<String> = self
            .ssh
            .as_ref()
            .map(|s| s.recorded_new_keys())
            .unwrap_or_default()
            .iter()
            .map(|k| k.to_string())
            .collect();
        (!keys.is_empty()).then(|| keys.join("; "))
    }
}

/// The transport for host `name`, reached as `spec` says.
pub fn transport_for(
    name: &str,
    spec: &ConnSpec,
    opts: &ConnectOptions,
    scrubber: &Scrubber,
) -> Made {
    match spec {
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
            let ssh = Arc::new(SshTransport::new(name, spec, o));
            Made {
                transport: ssh.clone(),
                ssh: Some(ssh),
            }
        }
        ConnSpec::Winrm(w) => match WinrmTransport::new(name, w) {
            Ok(t) => {
                // Test seam for kwin's own tests against lab/winrm-stand-in (a WinRM server
                // that runs scripts with /bin/sh): never set outside them. The build phase
                // asks the same function for the shell modules are built for.
                let t = if spec.script_shell() == Shell::Posix {
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
    async fn run_keeping(
        &self,
        _script: &str,
        _timeout: Duration,
        _keep: &Keep,
    ) -> Result<Output, TransportError> {
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
