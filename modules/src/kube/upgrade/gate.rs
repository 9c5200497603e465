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
use kwin_engine::diag::{Diagnostic, Diagnostics};
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
    /// Whether kwin may carry out an allowed upgrade. Until the upgrade recipes exist, a plan
    /// whose version differs from what the cluster runs is refused (`upgrade-not-supported`):
    /// the build recipes alone would re-pin the packages without `kubeadm upgrade`.
    pub upgrades: bool,
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
            upgrades: false,
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
    let verdict = skew::check(&spec.target, &state, &spec.nodes).map_err(GateError::Refused)?;
    match &verdict {
        Verdict::Upgrade(u) if !spec.upgrades => {
            let what = if u.control_planes.is_empty() {
                let nodes: Vec<String> = u
                    .kubelets
                    .iter()
                    .map(|(n, v)| format!("{n} runs kubelet v{v}"))
                    .collect();
                if nodes.is_empty() {
                    "nodes are still cordoned by an earlier upgrade".to_string()
                } else {
                    nodes.join(", ")
                }
            } else {
                format!("the control plane runs v{}", u.from)
            };
            Err(GateError::Refused(vec![Refusal {
                code: skew::Code::NotSupported,
                at: skew::At::Version,
                summary: format!(
                    "kubernetes_version {} differs from what the cluster runs ({what}): this kwin does not upgrade a running cluster, and applying the plan would re-pin packages without `kubeadm upgrade`",
                    spec.target
                ),
                hint: format!(
                    "set kubernetes_version = \"{}\" (what the cluster runs), or upgrade it with kubeadm (kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade) first",
                    u.from
                ),
            }]))
        }
        _ => Ok(verdict),
    }
}

/// Why the gate stopped a run, as diagnostics.
pub fn error_diagnostics(e: &GateError, plan: &LoadedPlan, first_cp: &str) -> Diagnostics {
    match e {
        GateError::Refused(r) => diagnostics(r, plan),
        GateError::Unknown(why) => {
            let at = plan
                .host(first_cp)
                .and_then(|h| plan.loc(&format!("hosts[{}].name", h.index)));
            let mut d = Diagnostics::default();
            d.push(
                Diagnostic::error("upgrade-unreachable", why.clone())
                    .with_hint("check the connection to the first control plane (`kwin facts --limit` it, or its host log under .kwin/logs/), then run kwin again")
                    .at(at),
            );
            d
        }
        GateError::Interrupted => Diagnostics::default(),
    }
}

/// The refusals as diagnostics at the plan's `cluster.kubernetes_version` or the host's
/// `[[hosts]]` entry.
pub fn diagnostics(refusals: &[Refusal], plan: &LoadedPlan) -> Diagnostics {
    let mut d = Diagnostics::default();
    for r in refusals {
        let at = match &r.at {
            skew::At::Version => plan.loc("cluster.kubernetes_version"),
            skew::At::Host(name) => plan
                .host(name)
                .and_then(|h| plan.loc(&format!("hosts[{}].name", h.index))),
        };
        d.push(
            error(r.code, r.summary.clone())
                .with_hint(r.hint.clone())
                .at(at),
        );
    }
    d
}

/// The diagnostic of a refusal code: each code written out, so the table of diagnostic codes
/// (docs/diagnostics.md, checked against the source) sees every one.
fn error(code: skew::Code, summary: String) -> Diagnostic {
    use skew::Code as C;
    match code {
        C::Downgrade => Diagnostic::error("upgrade-downgrade", summary),
        C::SkipMinor => Diagnostic::error("upgrade-skip-minor", summary),
        C::KubeletNewer => Diagnostic::error("upgrade-kubelet-newer", summary),
        C::KubeletTooOld => Diagnostic::error("upgrade-kubelet-too-old", summary),
        C::Unreachable => Diagnostic::error("upgrade-unreachable", summary),
        C::NotKubeadm => Diagnostic::error("upgrade-not-kubeadm", summary),
        C::NotSupported => Diagnostic::error("upgrade-not-supported", summary),
    }
}
