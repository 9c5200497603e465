//! The plan: loading `plan.toml` into a typed model, resolving each host's connection, and
//! validating every rule the domain imposes.
//!
//! Flow: [`load`] reads the file (syntax errors, unknown keys, wrong types → diagnostics with
//! line and column), merges the inventory and `[defaults.*]` into each host, and produces a
//! [`LoadedPlan`]; `validate::validate` checks cross-field rules. Both report all problems at
//! once. Nothing here touches a host or reads a secret's value.

pub mod load;
pub mod model;
pub mod schema;
pub mod spans;
pub mod validate;

pub use load::{load, load_str};
pub use model::*;

use crate::diag::SourceMap;
use crate::secret::Secret;
use crate::transport::Shell;
use spans::SpanIndex;
use std::path::{Path, PathBuf};

/// Where a secret comes from. The plan names the source, never the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    Env(String),
    File(PathBuf),
}

impl SecretSource {
    /// Read the secret now (at connect time, not at load time).
    pub fn read(&self) -> Result<Secret, String> {
        match self {
            SecretSource::Env(var) => std::env::var(var)
                .map(Secret::new)
                .map_err(|_| format!("environment variable {var} is not set")),
            SecretSource::File(path) => std::fs::read_to_string(path)
                .map(|s| Secret::new(s.lines().next().unwrap_or("").to_string()))
                .map_err(|e| format!("cannot read {}: {e}", path.display())),
        }
    }
}

/// SSH connection settings of one host, fully resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshSpec {
    pub address: String,
    pub port: u16,
    pub user: String,
    /// Private key file; `None`: ssh-agent.
    pub private_key: Option<PathBuf>,
    pub passphrase: Option<SecretSource>,
    pub password: Option<SecretSource>,
    /// Pinned `SHA256:...` fingerprint.
    pub host_key: Option<String>,
    /// `sudo -n` for a non-root user.
    pub become_root: bool,
    /// Posix for Linux, PowerShell for `ssh-powershell` Windows hosts.
    pub shell: Shell,
    pub connect_timeout_secs: u64,
}

/// WinRM connection settings of one host, fully resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WinrmSpec {
    pub address: String,
    pub port: u16,
    pub user: String,
    pub password: SecretSource,
    pub https: bool,
    pub auth: WinrmAuth,
    /// Pinned SHA-256 of the server certificate, lowercase hex without colons.
    pub cert_fingerprint: Option<String>,
    pub ca_file: Option<PathBuf>,
    pub insecure: bool,
    pub connect_timeout_secs: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnSpec {
    Ssh(SshSpec),
    Winrm(WinrmSpec),
    Local { become_root: bool },
}

impl ConnSpec {
    pub fn shell(&self) -> Shell {
        match self {
            ConnSpec::Ssh(s) => s.shell,
            ConnSpec::Winrm(_) => Shell::PowerShell,
            ConnSpec::Local { .. } => Shell::Posix,
        }
    }
}

/// One host after defaults and inventory were applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedHost {
    /// Position in the plan's `[[hosts]]` array (for diagnostics).
    pub index: usize,
    pub name: String,
    pub address: String,
    pub os: Os,
    pub role: Option<Role>,
    pub node_ip: Option<String>,
    pub interface: Option<String>,
    pub labels: std::collections::BTreeMap<String, String>,
    pub taints: Vec<String>,
    pub conn: ConnSpec,
}

/// A plan file loaded and resolved.
#[derive(Debug, Clone)]
pub struct LoadedPlan {
    pub path: PathBuf,
    /// Directory relative paths in the plan are resolved against.
    pub base_dir: PathBuf,
    pub file: PlanFile,
    pub hosts: Vec<ResolvedHost>,
    pub source: SourceMap,
    pub spans: SpanIndex,
}

impl LoadedPlan {
    /// Location of the value at `path` (e.g. `hosts[2].address`), or of the nearest parent
    /// that has one.
    pub fn loc(&self, path: &str) -> Option<crate::diag::Location> {
        self.source.span(self.spans.find(path))
    }

    pub fn host(&self, name: &str) -> Option<&ResolvedHost> {
        self.hosts.iter().find(|h| h.name == name)
    }

    pub fn resolve_path(&self, p: &str) -> PathBuf {
        resolve_path(&self.base_dir, p)
    }
}

/// `~/x` → home, relative → against `base`.
pub fn resolve_path(base: &Path, p: &str) -> PathBuf {
    if let Some(rest) = p.strip_prefix("~/") {
        if let Some(home) = std::env::var_os("HOME") {
            return PathBuf::from(home).join(rest);
        }
    }
    let pb = PathBuf::from(p);
    if pb.is_absolute() {
        pb
    } else {
        base.join(pb)
    }
}
