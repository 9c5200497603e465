//! The plan: loading `plan.toml` into a typed model, resolving each host's connection, and
//! validating every rule the domain imposes.
//!
//! Flow: [`load`] reads the file (syntax errors, unknown keys, wrong types → diagnostics with
//! line and column, see `structure.rs`), merges the inventory and `[defaults.*]` into each
//! host, and produces a [`LoadedPlan`]; `validate::validate` checks cross-field rules. Both
//! report all problems at once; [`check`] runs both and returns everything, even when the
//! plan only partly loads. Nothing here touches a host or reads a secret's value.
//!
//! Effective values with defaults applied are methods of [`LoadedPlan`]:
//! [`LoadedPlan::cluster_net`] (CIDRs, DNS IP, max pods), [`LoadedPlan::cni_settings`],
//! [`LoadedPlan::kubernetes_version`], [`LoadedPlan::control_planes`].

pub mod effective;
pub mod load;
pub mod model;
pub mod net;
pub mod proxy;
pub mod schema;
pub mod spans;
pub mod structure;
pub mod syntax;
pub mod validate;
pub mod versions;

pub use load::{load, load_str};
pub use model::*;
pub use net::{ClusterNet, CniSettings};

use crate::diag::{Diagnostics, SourceMap};
use crate::module::Registry;
use crate::secret::Secret;
use crate::transport::Shell;
use spans::SpanIndex;
use std::path::{Path, PathBuf};

/// Load and validate the plan at `path`: every diagnostic (errors and warnings), sorted by
/// position. `recipe_steps` are the step names `after` may name besides the plan's tasks.
pub fn check(path: &Path, registry: &dyn Registry, recipe_steps: &[String]) -> Diagnostics {
    match load::read(path) {
        Ok(text) => check_str(path, &text, registry, recipe_steps),
        Err(d) => d,
    }
}

/// [`check`] on `text`, as if read from `path`.
pub fn check_str(
    path: &Path,
    text: &str,
    registry: &dyn Registry,
    recipe_steps: &[String],
) -> Diagnostics {
    let partial = load::load_partial(path, text);
    let mut diags = partial.diags;
    if let Some(plan) = &partial.plan {
        diags.extend(validate::validate_with(
            plan,
            registry,
            recipe_steps,
            &partial.pruned,
        ));
    }
    diags.dedup().sorted()
}

/// Where a secret comes from. The plan names the source, never the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    Env(String),
    File(PathBuf),
}

impl SecretSource {
    /// Read the secret now (at connect time, not at load time). A value shorter than
    /// [`crate::secret::MIN_SECRET_LEN`] is refused: it could not be kept out of the output.
    pub fn read(&self) -> Result<Secret, String> {
        let secret = self.read_raw()?;
        let len = secret.expose().len();
        if len < crate::secret::MIN_SECRET_LEN {
            let from = match self {
                SecretSource::Env(var) => format!("environment variable {var}"),
                SecretSource::File(path) => path.display().to_string(),
            };
            return Err(if len == 0 {
                format!("the secret in {from} is empty")
            } else {
                format!(
                    "the secret in {from} is shorter than {} bytes: kwin cannot keep a value that short out of its output",
                    crate::secret::MIN_SECRET_LEN
                )
            });
        }
        Ok(secret)
    }

    fn read_raw(&self) -> Result<Secret, String> {
        match self {
            SecretSource::Env(var) => std::env::var(var)
                .map(Secret::new)
                .map_err(|_| format!("environment variable {var} is not set")),
            SecretSource::File(path) => load::read_bounded(path, 64 * 1024)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))
                .and_then(|b| {
                    String::from_utf8(b)
                        .map_err(|_| format!("{} is not UTF-8 text", path.display()))
                })
                .map(|s| Secret::new(s.lines().next().unwrap_or("").to_string())),
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

impl ResolvedHost {
    /// The address the node registers with: `node_ip`, else `address`.
    pub fn node_address(&self) -> &str {
        self.node_ip.as_deref().unwrap_or(&self.address)
    }
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

    /// Location of the key at `path` (for "remove this key" diagnostics).
    pub fn key_loc(&self, path: &str) -> Option<crate::diag::Location> {
        self.source.span(self.spans.key(path))
    }

    pub fn host(&self, name: &str) -> Option<&ResolvedHost> {
        self.hosts.iter().find(|h| h.name == name)
    }

    /// The cluster's address plan with defaults applied; `None` without `[cluster]` (or, in
    /// a plan that did not pass validation, when a CIDR or the DNS IP does not parse).
    pub fn cluster_net(&self) -> Option<ClusterNet> {
        self.file
            .cluster
            .as_ref()
            .and_then(|c| ClusterNet::from_cluster(c).ok())
    }

    /// The pod network settings with defaults applied; `None` without `[cni]`.
    pub fn cni_settings(&self) -> Option<CniSettings> {
        self.file.cni.as_ref().map(CniSettings::from_cni)
    }

    /// The Kubernetes version; `None` without `[cluster]` or if it does not parse.
    pub fn kubernetes_version(&self) -> Option<semver::Version> {
        let c = self.file.cluster.as_ref()?;
        syntax::version(&c.kubernetes_version, false).ok()
    }

    /// Hosts with role control-plane, in file order: the first runs `kubeadm init`.
    pub fn control_planes(&self) -> impl Iterator<Item = &ResolvedHost> {
        self.hosts
            .iter()
            .filter(|h| h.role == Some(Role::ControlPlane))
    }

    /// The host that runs `kubeadm init`.
    pub fn first_control_plane(&self) -> Option<&ResolvedHost> {
        self.control_planes().next()
    }

    /// Hosts that are cluster nodes (have a role), in file order.
    pub fn nodes(&self) -> impl Iterator<Item = &ResolvedHost> {
        self.hosts.iter().filter(|h| h.role.is_some())
    }

    /// Whether any host is a Windows host.
    pub fn has_windows(&self) -> bool {
        self.hosts.iter().any(|h| h.os == Os::Windows)
    }

    pub fn resolve_path(&self, p: &str) -> PathBuf {
        resolve_path(&self.base_dir, p)
    }

    /// Secrets the plan names beyond connections (the proxy credentials, in every form they
    /// take in rendered files), for the run's scrubber. Unreadable ones are left out: the
    /// expansion reports them.
    pub fn plan_secrets(&self) -> Vec<Secret> {
        self.proxy_credentials()
            .and_then(|(src, _)| proxy::ProxyCredentials::read(&src).ok())
            .map(|c| c.secrets())
            .unwrap_or_default()
    }

    /// Where the proxy credentials come from (`[proxy] credentials_env` / `credentials_file`),
    /// and the plan path naming it; not read here.
    pub fn proxy_credentials(&self) -> Option<(SecretSource, &'static str)> {
        let p = self.file.proxy.as_ref()?;
        match (&p.credentials_env, &p.credentials_file) {
            (Some(v), _) => Some((SecretSource::Env(v.clone()), "proxy.credentials_env")),
            (None, Some(f)) => Some((
                SecretSource::File(self.resolve_path(f)),
                "proxy.credentials_file",
            )),
            (None, None) => None,
        }
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

#[cfg(test)]
mod tests {
    use super::SecretSource;

    #[test]
    fn short_or_empty_secrets_are_refused_with_their_source() {
        let dir = tempfile::tempdir().expect("tmp");
        let f = dir.path().join("pw");
        std::fs::write(&f, "abc\nignored second line\n").expect("write");
        let e = SecretSource::File(f.clone()).read().expect_err("3 bytes");
        assert!(e.contains("shorter than 4") && e.contains("pw"), "{e}");
        std::fs::write(&f, "\n").expect("write");
        let e = SecretSource::File(f.clone()).read().expect_err("empty");
        assert!(e.contains("is empty"), "{e}");
        std::fs::write(&f, "abcd\n").expect("write");
        let s = SecretSource::File(f).read().expect("4 bytes");
        assert_eq!(s.expose(), "abcd");
        let e = SecretSource::File(dir.path().join("none"))
            .read()
            .expect_err("missing");
        assert!(e.contains("cannot read"), "{e}");
    }
}
