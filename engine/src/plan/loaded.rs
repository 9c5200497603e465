//! A plan file loaded and resolved: [`LoadedPlan`] (the model, every host resolved, the
//! source map for diagnostics) and [`ResolvedHost`] (one host after the inventory and
//! `[defaults.*]` were merged in, with its connection spec).

use super::model::{Os, PlanFile, Role, Selector};
use super::net::{ClusterNet, CniSettings};
use super::spans::SpanIndex;
use super::syntax;
use crate::diag::{Location, SourceMap};
use crate::transport::spec::{ConnSpec, SecretSource};
use std::path::{Path, PathBuf};

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

    /// The node's IP: `node_ip`, else `address` when it is an IP address (a DNS name is
    /// left to kubelet to resolve); `None` otherwise.
    pub fn node_ip(&self) -> Option<&str> {
        match &self.node_ip {
            Some(ip) => Some(ip),
            None => self
                .address
                .parse::<std::net::IpAddr>()
                .is_ok()
                .then_some(self.address.as_str()),
        }
    }
}

/// (Here, not in `model.rs`: the model knows nothing of resolved hosts.)
impl Selector {
    /// Whether this selector picks host `h` (an empty selector picks every host).
    pub fn matches(&self, h: &ResolvedHost) -> bool {
        (self.hosts.is_empty() || self.hosts.iter().any(|n| n == &h.name))
            && (self.roles.is_empty() || h.role.is_some_and(|r| self.roles.contains(&r)))
            && self.os.is_none_or(|os| os == h.os)
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
    /// The plan's variables that have a value (`plan/vars.rs`), typed as declared.
    pub vars: std::collections::BTreeMap<String, super::vars::VarValue>,
    /// The hosts `--limit` chose (`plan::limit::select`); `None`: every host. Templates see
    /// it as `host.chosen` (`Effective`).
    pub limit: Option<std::collections::BTreeSet<String>>,
}

impl LoadedPlan {
    /// The values of the plan's variables marked `sensitive`: secrets of every run, and never
    /// in a diagnostic.
    pub fn sensitive_values(&self) -> Vec<crate::secret::Secret> {
        super::vars::sensitive_values(&self.file.variables, &self.vars)
    }

    /// Location of the value at `path` (e.g. `hosts[2].address`), or of the nearest parent
    /// that has one.
    pub fn loc(&self, path: &str) -> Option<Location> {
        self.source.span(self.spans.find(path))
    }

    /// Location of the key at `path` (for "remove this key" diagnostics).
    pub fn key_loc(&self, path: &str) -> Option<Location> {
        self.source.span(self.spans.key(path))
    }

    /// Whether `--limit` chose host `name` (every host without `--limit`).
    pub fn chosen(&self, name: &str) -> bool {
        self.limit.as_ref().is_none_or(|l| l.contains(name))
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

/// Top-level directories of a kwin checkout that example plans point into.
const CHECKOUT_DIRS: &[&str] = &["target", "modules", "lab", "plans", "examples", "tests"];

/// A hint for a missing file whose path, as written, leaves the plan's directory (`../`):
/// the plan was moved away from what it points to. A path into a kwin checkout (kwin's own
/// example plans name the lab's inventory, `../target/lab/hosts.toml`, and test fixtures)
/// says so.
pub fn outside_hint(written: &str) -> Option<String> {
    let mut rest = written;
    let mut ups = 0;
    while let Some(r) = rest.strip_prefix("../") {
        rest = r;
        ups += 1;
    }
    if ups == 0 {
        return None;
    }
    let first = rest.split('/').next().unwrap_or("");
    Some(if ups == 1 && CHECKOUT_DIRS.contains(&first) {
        format!(
            "`{written}` points into a kwin checkout (`{rest}`): this plan is one of kwin's examples, which run from the checkout they are in (e.g. `kwin validate examples/<plan>.toml` there, after `lab/up.sh` for the lab's inventory); a copy elsewhere must name files of its own"
        )
    } else {
        format!(
            "`{written}` leaves the plan's directory: a plan copied or moved away from the files it names no longer finds them; name them from where the plan is now"
        )
    })
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
