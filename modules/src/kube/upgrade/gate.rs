//! The gate: before any host of a plan with `[cluster]` changes (`kwin plan`, `kwin apply`,
//! `--check`), read what the cluster runs from the first control plane — one script over the
//! session's [`Remote`] — and check the version skew policy against the plan's
//! `kubernetes_version` ([`super::skew::check`]).
//!
//! A refusal stops the command before any host is touched. So does a first control plane that
//! cannot be reached or whose answer cannot be read: without the cluster's versions kwin
//! cannot tell whether the run would upgrade it.

use super::cluster::{self, ClusterState};
use super::skew::{self, PlanNode, Refusal, Verdict};
use kwin_engine::pipeline::{Remote, RemoteError, RunKind};
use kwin_engine::plan::effective::Effective;
use kwin_engine::plan::model::Role;
use kwin_engine::plan::LoadedPlan;
use semver::Version;
use std::time::Duration;

/// What the gate checks a plan against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateSpec {
    pub target: Version,
    /// The plan's nodes in plan order (a Node is named after its host).
    pub nodes: Vec<PlanNode>,
    pub kubeconfig: String,
}

impl GateSpec {
    /// The plan's gate; `None` without `[cluster]`.
    pub fn for_plan(eff: &Effective, plan: &LoadedPlan) -> Option<GateSpec> {
        let c = eff.cluster.as_ref()?;
        let target = cluster::kube_version(&c.kubernetes_version).ok()?;
        let nodes = plan
            .nodes()
            .map(|h| PlanNode {
                name: h.name.clone(),
                control_plane: h.role == Some(Role::ControlPlane),
            })
            .collect();
        Some(GateSpec {
            target,
            nodes,
            kubeconfig: super::super::ADMIN_CONF.to_string(),
        })
    }
}

/// Why the gate stops a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateError {
    /// The policy refuses the plan's version.
    Refused(Vec<Refusal>),
    /// The first control plane could not be asked (connection, script, parse): the error,
    /// scrubbed.
    Unknown(String),
    Interrupted,
}

/// Read the cluster from `remote` (the first control plane) and check the policy.
pub async fn check(remote: &dyn Remote, spec: &GateSpec) -> Result<Verdict, GateError> {
    let host = remote.host().to_string();
    let unknown = |why: String| {
        GateError::Unknown(format!(
            "cannot read the cluster's versions from {host}: {why}; kwin changes nothing it cannot check against the version skew policy"
        ))
    };
    remote.connect().await.map_err(unknown)?;
    let out = remote
        .run(
            "upgrade gate: the cluster's versions",
            &cluster::script(&spec.kubeconfig),
            Duration::from_secs(90),
            RunKind::Check,
        )
        .await
        .map_err(|e| match e {
            RemoteError::Interrupted => GateError::Interrupted,
            RemoteError::Failed(e) => unknown(e),
        })?;
    if out.exit != 0 {
        let err = remote.scrub(String::from_utf8_lossy(&out.stderr).trim());
        return Err(unknown(format!("exit {}: {err}", out.exit)));
    }
    let state: ClusterState =
        cluster::parse(&String::from_utf8_lossy(&out.stdout)).map_err(unknown)?;
    skew::check(&spec.target, &state, &spec.nodes).map_err(GateError::Refused)
}
