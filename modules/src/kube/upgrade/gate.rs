//! The gate: before any host of a plan with `[cluster]` changes (`kwin plan`, `kwin apply`,
//! `--check`), read what the cluster runs from the first control plane — one script over the
//! session's [`Remote`] — and check the version skew policy against the plan's
//! `kubernetes_version` ([`super::skew::check`]).
//!
//! A refusal stops the command before any host is touched. So does a first control plane that
//! cannot be reached or whose answer cannot be read: without the cluster's versions kwin
//! cannot tell whether the run would upgrade it.

use super::cluster::{self, ClusterState};
use super::skew::{self, PlanNode, Refusal, UpgradePlan, Verdict};
use kwin_engine::diag::{Diagnostic, Diagnostics};
use kwin_engine::event::{Event, UpgradeStep};
use kwin_engine::pipeline::{Remote, RemoteError, RunKind};
use kwin_engine::plan::effective::Effective;
use kwin_engine::plan::model::Role;
use kwin_engine::plan::LoadedPlan;
use semver::Version;
use std::collections::BTreeSet;
use std::time::Duration;

/// What the gate checks a plan against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateSpec {
    pub target: Version,
    /// The plan's nodes in plan order (a Node is named after its host).
    pub nodes: Vec<PlanNode>,
    pub kubeconfig: String,
    /// The plan's Windows nodes (workers in the same chain as Linux workers; their rows say
    /// what differs).
    pub windows: BTreeSet<String>,
    /// `upgrade.max_unavailable`: workers (Linux and Windows) upgraded at once.
    pub max_unavailable: usize,
}

impl GateSpec {
    /// The plan's gate; `None` without `[cluster]`.
    pub fn for_plan(eff: &Effective, plan: &LoadedPlan) -> Option<GateSpec> {
        let c = eff.cluster.as_ref()?;
        let target = cluster::kube_version(&c.kubernetes_version).ok()?;
        // Where kwin pins containerd: Windows workers (always its release), Linux nodes with
        // containerd from its release (the distribution's package is not pinned).
        let linux_release = eff
            .runtime
            .as_ref()
            .is_some_and(|r| r.linux == "containerd" && r.containerd_source == "release");
        let containerd = eff.versions.as_ref().map(|v| v.containerd.clone());
        let nodes = plan
            .nodes()
            .map(|h| PlanNode {
                name: h.name.clone(),
                control_plane: h.role == Some(Role::ControlPlane),
                containerd: match h.os {
                    kwin_engine::plan::model::Os::Windows => containerd.clone(),
                    _ if linux_release => containerd.clone(),
                    _ => None,
                },
            })
            .collect();
        let windows = plan
            .nodes()
            .filter(|h| h.os == kwin_engine::plan::model::Os::Windows)
            .map(|h| h.name.clone())
            .collect();
        Some(GateSpec {
            target,
            nodes,
            kubeconfig: super::super::ADMIN_CONF.to_string(),
            windows,
            max_unavailable: eff.upgrade.as_ref().map_or(1, |u| u.max_unavailable),
        })
    }
}

/// Why the gate stops a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateError {
    /// The policy refuses the plan's version.
    Refused(Vec<Refusal>),
    /// The first control plane could not be reached at all: the connection's error,
    /// scrubbed. Nothing is known of the cluster (it may not exist yet).
    Unreachable(String),
    /// The first control plane was reached but could not tell (script, parse): the error,
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
    remote.connect().await.map_err(GateError::Unreachable)?;
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

/// The upgrade `u` as `kwin plan` shows it: one row per step, in the order the upgrade
/// recipes run it (control planes one at a time, `kubeadm upgrade apply` on the first; then
/// each control plane's kubelet and containerd; then the workers, Linux and Windows, in waves
/// of `max_unavailable`, in plan order, as `expand::serial_batches` makes them), and notes
/// on what is left as it is. A node whose only change is containerd (Kubernetes unchanged)
/// has its row in the same place: it is drained for it in the same recipes.
pub fn section(spec: &GateSpec, u: &UpgradePlan) -> Event {
    let to = &spec.target;
    let mut steps = Vec::new();
    let mut notes = Vec::new();
    let mut step = 0;
    let mut row = |step: usize, node: &str, part: &str, now: String, then: String| {
        steps.push(UpgradeStep {
            step,
            node: node.to_string(),
            part: part.to_string(),
            now,
            then,
        })
    };
    let first_cp = spec
        .nodes
        .iter()
        .find(|n| n.control_plane)
        .map(|n| n.name.as_str());
    for cp in &u.control_planes {
        step += 1;
        let running = u
            .apiservers
            .get(cp)
            .or_else(|| u.apiservers.get("kubeadm-config"));
        let mut now = running.map_or("kube-apiserver (unknown)".to_string(), |v| {
            format!("kube-apiserver v{v}")
        });
        // An `upgrade apply` cut off: what kubeadm last recorded, too.
        if let (true, Some(cv), Some(v)) =
            (Some(cp.as_str()) == first_cp, &u.cluster_version, running)
        {
            if cv != v {
                now.push_str(&format!(", kubeadm-config v{cv}"));
            }
        }
        let then = if Some(cp.as_str()) == first_cp {
            format!("kubeadm {to} installed, kubeadm upgrade apply v{to}")
        } else {
            format!("kubeadm {to} installed, kubeadm upgrade node")
        };
        row(step, cp, "control plane", now, then);
    }
    let kubelet_of = |name: &str| u.kubelets.iter().find(|(n, _)| n == name).map(|(_, v)| v);
    let runtime_of = |name: &str| {
        u.runtimes
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, now, then)| (now.as_str(), then.as_str()))
    };
    // What a node runs now that changes: `kubelet v1.31.4`, `containerd 1.7.24`.
    let now_of = |name: &str| {
        let mut now = Vec::new();
        if let Some(v) = kubelet_of(name) {
            now.push(format!("kubelet v{v}"));
        }
        if let Some((rt, _)) = runtime_of(name) {
            now.push(match rt.split_once("://") {
                Some((n, v)) => format!("{n} {v}"),
                None if rt.is_empty() => "containerd (not reported)".to_string(),
                None => rt.to_string(),
            });
        }
        now.join(", ")
    };
    for n in spec.nodes.iter().filter(|n| n.control_plane) {
        let kubelet = kubelet_of(&n.name).is_some();
        let runtime = runtime_of(&n.name);
        if !kubelet && runtime.is_none() {
            continue;
        }
        step += 1;
        let mut then = vec!["drain".to_string()];
        if let Some((_, v)) = runtime {
            then.push(format!("containerd {v} installed, restarted"));
        }
        if kubelet {
            then.push(format!("kubelet and kubectl {to}, restart"));
        }
        then.push("uncordon".into());
        row(step, &n.name, "kubelet", now_of(&n.name), then.join(", "));
    }
    // Linux and Windows workers in one chain of waves (recipe upgrade-worker), plan order.
    let workers: Vec<&PlanNode> = spec.nodes.iter().filter(|n| !n.control_plane).collect();
    for wave in kwin_engine::expand::serial_batches(&workers, spec.max_unavailable) {
        let due: Vec<&str> = wave
            .iter()
            .filter(|n| kubelet_of(&n.name).is_some() || runtime_of(&n.name).is_some())
            .map(|n| n.name.as_str())
            .collect();
        if due.is_empty() {
            continue;
        }
        step += 1;
        for name in due {
            let windows = spec.windows.contains(name);
            let mut then = vec!["drain".to_string()];
            if let Some((_, v)) = runtime_of(name) {
                then.push(if windows {
                    format!("containerd service stopped, containerd.exe {v} installed, started")
                } else {
                    format!("containerd {v} installed, restarted")
                });
            }
            if kubelet_of(name).is_some() {
                then.push(if windows {
                    format!("kubeadm.exe {to}, kubeadm upgrade node, kubelet service stopped, kubelet.exe {to} installed, started")
                } else {
                    format!("kubeadm {to}, kubeadm upgrade node, kubelet and kubectl {to}, restart")
                });
            }
            then.push("uncordon".into());
            row(step, name, "worker", now_of(name), then.join(", "));
        }
    }
    for (node, mark) in &u.resume {
        notes.push(format!(
            "{node} is cordoned by kwin ({mark}): its upgrade is finished, then it is uncordoned"
        ));
    }
    for node in &u.not_in_plan {
        notes.push(format!("{node} is not in the plan: it keeps its version"));
    }
    Event::Upgrade {
        from: u.from.to_string(),
        to: to.to_string(),
        steps,
        notes,
    }
}

/// Why the gate stopped a run, as diagnostics.
pub fn error_diagnostics(e: &GateError, plan: &LoadedPlan, first_cp: &str) -> Diagnostics {
    match e {
        GateError::Refused(r) => diagnostics(r, plan),
        GateError::Unreachable(why) => {
            let at = plan
                .host(first_cp)
                .and_then(|h| plan.loc(&format!("hosts[{}].name", h.index)));
            let mut d = Diagnostics::default();
            d.push(
                Diagnostic::error(
                    "upgrade-unreachable",
                    format!(
                        "the first control plane `{first_cp}` cannot be reached ({why}): kwin changes no host until it can read there which Kubernetes version the cluster runs, if any (version skew policy)"
                    ),
                )
                .with_hint("check that the host is up and reachable (settings.wait_for_hosts waits for one still starting); `kwin plan` plans the other hosts meanwhile")
                .at(at),
            );
            d
        }
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

/// `kwin plan` with the first control plane unreachable: a warning, and the other hosts are
/// planned (nothing changes in a plan). Nothing is known of the cluster, so nothing is said of
/// an upgrade.
pub fn unreachable_warning(why: &str, plan: &LoadedPlan, first_cp: &str) -> Diagnostic {
    let at = plan
        .host(first_cp)
        .and_then(|h| plan.loc(&format!("hosts[{}].name", h.index)));
    Diagnostic::warning(
        "upgrade-unchecked",
        format!(
            "the first control plane `{first_cp}` cannot be reached ({why}): this plan cannot tell whether the cluster exists or would be upgraded; the other hosts are planned"
        ),
    )
    .with_hint(format!(
        "`kwin apply` changes nothing until `{first_cp}` answers (it reads the cluster's versions there first)"
    ))
    .at(at)
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).expect("version")
    }

    /// Windows workers are rows of the waves they fall in (plan order, `max_unavailable`
    /// counting Linux and Windows workers alike), not a note.
    #[test]
    fn windows_workers_are_rows_in_their_wave() {
        let node = |name: &str, control_plane: bool| PlanNode {
            name: name.into(),
            control_plane,
            containerd: None,
        };
        let spec = GateSpec {
            target: v("1.32.5"),
            nodes: vec![
                node("cp1", true),
                node("lw1", false),
                node("ww1", false),
                node("lw2", false),
            ],
            kubeconfig: "/etc/kubernetes/admin.conf".into(),
            windows: ["ww1".to_string()].into_iter().collect(),
            max_unavailable: 2,
        };
        let u = UpgradePlan {
            from: v("1.31.4"),
            to: v("1.32.5"),
            control_planes: vec!["cp1".into()],
            kubelets: ["cp1", "lw1", "ww1", "lw2"]
                .iter()
                .map(|n| (n.to_string(), v("1.31.4")))
                .collect(),
            resume: vec![],
            runtimes: vec![],
            not_in_plan: vec![],
            apiservers: [("cp1".to_string(), v("1.31.4"))].into_iter().collect(),
            cluster_version: Some(v("1.31.4")),
        };
        let Event::Upgrade { steps, notes, .. } = section(&spec, &u) else {
            panic!("not an upgrade section");
        };
        let rows: Vec<(usize, &str, &str)> = steps
            .iter()
            .map(|s| (s.step, s.node.as_str(), s.part.as_str()))
            .collect();
        assert_eq!(
            rows,
            [
                (1, "cp1", "control plane"),
                (2, "cp1", "kubelet"),
                (3, "lw1", "worker"),
                (3, "ww1", "worker"),
                (4, "lw2", "worker"),
            ]
        );
        let ww1 = steps.iter().find(|s| s.node == "ww1").expect("ww1 row");
        assert_eq!(ww1.now, "kubelet v1.31.4");
        assert!(
            ww1.then
                .contains("kubeadm.exe 1.32.5, kubeadm upgrade node")
                && ww1.then.contains("kubelet.exe 1.32.5"),
            "{}",
            ww1.then
        );
        assert!(notes.is_empty(), "{notes:?}");
    }

    /// A containerd version change alone (Kubernetes unchanged) gives rows in the places the
    /// recipes drain for it: each control plane, then the workers' waves.
    #[test]
    fn containerd_alone_gives_rows_per_node_in_their_waves() {
        let node = |name: &str, control_plane: bool, containerd: Option<&str>| PlanNode {
            name: name.into(),
            control_plane,
            containerd: containerd.map(str::to_string),
        };
        let spec = GateSpec {
            target: v("1.31.4"),
            nodes: vec![
                node("cp1", true, Some("1.7.27")),
                node("lw1", false, Some("1.7.27")),
                node("ww1", false, Some("1.7.27")),
                node("lw2", false, Some("1.7.27")),
            ],
            kubeconfig: "/etc/kubernetes/admin.conf".into(),
            windows: ["ww1".to_string()].into_iter().collect(),
            max_unavailable: 1,
        };
        let u = UpgradePlan {
            from: v("1.31.4"),
            to: v("1.31.4"),
            control_planes: vec![],
            kubelets: vec![("lw2".to_string(), v("1.31.3"))],
            resume: vec![],
            runtimes: ["cp1", "ww1", "lw2"]
                .iter()
                .map(|n| (n.to_string(), "containerd://1.7.24".into(), "1.7.27".into()))
                .collect(),
            not_in_plan: vec![],
            apiservers: [("cp1".to_string(), v("1.31.4"))].into_iter().collect(),
            cluster_version: Some(v("1.31.4")),
        };
        let Event::Upgrade { steps, .. } = section(&spec, &u) else {
            panic!("not an upgrade section");
        };
        let rows: Vec<(usize, &str, &str, &str)> = steps
            .iter()
            .map(|s| (s.step, s.node.as_str(), s.now.as_str(), s.then.as_str()))
            .collect();
        assert_eq!(
            rows,
            [
                (1, "cp1", "containerd 1.7.24", "drain, containerd 1.7.27 installed, restarted, uncordon"),
                (2, "ww1", "containerd 1.7.24", "drain, containerd service stopped, containerd.exe 1.7.27 installed, started, uncordon"),
                (3, "lw2", "kubelet v1.31.3, containerd 1.7.24", "drain, containerd 1.7.27 installed, restarted, kubeadm 1.31.4, kubeadm upgrade node, kubelet and kubectl 1.31.4, restart, uncordon"),
            ]
        );
    }

    /// A control plane whose kube-apiserver runs the target while kubeadm-config records an
    /// older version (`kubeadm upgrade apply` cut off): its row says both.
    #[test]
    fn an_unfinished_upgrade_apply_shows_what_kubeadm_recorded() {
        let spec = GateSpec {
            target: v("1.33.1"),
            nodes: vec![PlanNode {
                name: "cp1".into(),
                control_plane: true,
                containerd: None,
            }],
            kubeconfig: "/etc/kubernetes/admin.conf".into(),
            windows: Default::default(),
            max_unavailable: 1,
        };
        let u = UpgradePlan {
            from: v("1.32.5"),
            to: v("1.33.1"),
            control_planes: vec!["cp1".into()],
            kubelets: vec![("cp1".into(), v("1.32.5"))],
            resume: vec![],
            runtimes: vec![],
            not_in_plan: vec![],
            apiservers: [("cp1".to_string(), v("1.33.1"))].into_iter().collect(),
            cluster_version: Some(v("1.32.5")),
        };
        let Event::Upgrade { from, steps, .. } = section(&spec, &u) else {
            panic!("not an upgrade section");
        };
        assert_eq!(from, "1.32.5");
        assert_eq!(
            (steps[0].part.as_str(), steps[0].now.as_str()),
            (
                "control plane",
                "kube-apiserver v1.33.1, kubeadm-config v1.32.5"
            )
        );
    }
}
