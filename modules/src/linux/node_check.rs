//! `node_check`: what a Linux node runs, against what the cluster needs — never changes the
//! host.
//!
//! Parameters:
//!
//! | name | type | default | meaning |
//! |---|---|---|---|
//! | `distributions` | list of `{ id, version, name }` | `[]` (any) | os-release `ID` / `VERSION_ID` pairs supported; another distribution is a warning |
//! | `refuse_cgroup_v1` | string | none | refuse a cgroup v1 node, with this reason |
//!
//! The fact reads the distribution (`/etc/os-release`) and the cgroup version (the file
//! system at `/sys/fs/cgroup`: `cgroup2fs` is cgroup v2). The plan is a no-op naming them
//! ("Debian GNU/Linux 12 (bookworm), cgroup v2"); a no-op with a warning when
//! `distributions` is given and the node's `ID` / `VERSION_ID` is not one of them; a
//! precondition error for the host, with `refuse_cgroup_v1`'s reason, on a cgroup v1 node
//! (the kubelet of Kubernetes 1.35 and later refuses to start there).
//!
//! ```toml
//! [[tasks]]
//! name = "node check"
//! module = "node_check"
//! on = { os = "linux" }
//! params = { distributions = [{ id = "debian", version = "12", name = "Debian 12" }], refuse_cgroup_v1 = "the kubelet refuses cgroup v1" }
//! ```

use super::facts::node::{Cgroup, NodeOsFact};
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{Ctx, Module, ModuleError, ParamError, Plan};
use kwin_engine::transport::Shell;
use serde::Deserialize;

/// A distribution the node may run.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Distribution {
    /// os-release `ID` (`debian`, `ubuntu`).
    pub id: String,
    /// os-release `VERSION_ID` (`12`, `24.04`).
    pub version: String,
    /// How to name it in a warning.
    pub name: String,
}

/// Params of `node_check`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeCheckParams {
    /// The distributions supported: a node running another one gets a warning (it is not
    /// refused). Empty or left out: any distribution.
    #[serde(default)]
    pub distributions: Vec<Distribution>,
    /// Refuse a node on cgroup v1, giving this reason (e.g. the kubelet's `failCgroupV1`).
    /// Left out (or empty): cgroup v1 is fine.
    pub refuse_cgroup_v1: Option<String>,
}

#[derive(Debug, Clone)]
pub struct NodeCheck {
    distributions: Vec<Distribution>,
    refuse_cgroup_v1: Option<String>,
}

impl Described for NodeCheck {
    const NAME: &'static str = "node_check";
    const DOC: &'static str =
        "a precondition: the node's distribution and cgroup version (os-release, /sys/fs/cgroup)";
    type Params = NodeCheckParams;

    fn from_params(p: NodeCheckParams, _shell: Shell) -> Result<Self, ParamError> {
        for (i, d) in p.distributions.iter().enumerate() {
            if d.id.is_empty() || d.version.is_empty() {
                return Err(ParamError::at(
                    format!("distributions.{i}"),
                    "`id` and `version` must not be empty",
                ));
            }
        }
        Ok(NodeCheck {
            distributions: p.distributions,
            refuse_cgroup_v1: p.refuse_cgroup_v1.filter(|r| !r.trim().is_empty()),
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![FactSample::linux(NodeOsFact)]
    }
}

impl Module for NodeCheck {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&NodeOsFact, shell)]
    }

    fn reads(&self) -> Vec<String> {
        vec!["/etc/os-release".into(), "/sys/fs/cgroup".into()]
    }

    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let os = facts.get(&NodeOsFact)?;
        let cgroup = match os.cgroup() {
            Cgroup::V2 => "cgroup v2".to_string(),
            Cgroup::V1 => "cgroup v1".to_string(),
            Cgroup::Unknown => format!(
                "cgroup version unknown ({} at /sys/fs/cgroup)",
                os.cgroup_fs.as_deref().unwrap_or("nothing")
            ),
        };
        if let (Cgroup::V1, Some(reason)) = (os.cgroup(), &self.refuse_cgroup_v1) {
            return Err(ModuleError::Precondition(format!(
                "{} runs cgroup v1 (/sys/fs/cgroup is {}): {reason}",
                os.name(),
                os.cgroup_fs.as_deref().unwrap_or("?")
            )));
        }
        let why = format!("{}, {cgroup}", os.name());
        let known = self.distributions.is_empty()
            || self.distributions.iter().any(|d| {
                os.id.as_deref() == Some(d.id.as_str())
                    && os.version_id.as_deref() == Some(d.version.as_str())
            });
        if known {
            return Ok(Plan::noop(why));
        }
        let names: Vec<&str> = self.distributions.iter().map(|d| d.name.as_str()).collect();
        Ok(Plan::noop_warning(
            why,
            format!(
                "{} (ID={} VERSION_ID={}) is not a distribution kwin supports ({}): its packages, containerd and signing-key tools may differ from what kwin's recipes expect",
                os.name(),
                os.id.as_deref().unwrap_or("?"),
                os.version_id.as_deref().unwrap_or("?"),
                names.join(", ")
            ),
        ))
    }
}
