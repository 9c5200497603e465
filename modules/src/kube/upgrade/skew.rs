//! The Kubernetes version skew policy, checked before any host changes: may the cluster go
//! from what it runs ([`ClusterState`]) to the plan's `kubernetes_version`, and in what order.
//!
//! Sources:
//! - Version skew policy, kubernetes/website `content/en/releases/version-skew-policy.md`
//!   @ `01bc0975`: kube-apiservers within one minor of each other; "kube-apiserver [must] not
//!   skip minor versions when upgrading, even in single-instance clusters"; kubelet "must not
//!   be newer than kube-apiserver, and may be up to three minor versions older (kubelet < 1.25
//!   may only be up to two minor versions older)"; upgrade order: kube-apiserver first, then
//!   kubelets.
//! - kubeadm `cmd/kubeadm/app/phases/upgrade/policy.go` @ `8b56eb85` (`EnforceVersionPolicies`):
//!   a target more than one minor above the cluster is mandatory-refused ("kubeadm can upgrade
//!   only 1 minor version at a time"), as is a downgrade of more than one minor; kwin refuses
//!   every downgrade, since it never re-installs an older control plane.
//!
//! Every refusal is collected (not only the first), each with what to write instead.

use super::cluster::{ClusterFacts, ClusterState};
use semver::Version;

/// A node of the plan, in plan order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanNode {
    /// The Node's name in the cluster (the host's name).
    pub name: String,
    pub control_plane: bool,
    /// The containerd version the node must run (`1.7.27`) where kwin pins it (Windows
    /// workers; Linux nodes with containerd from its release), else `None`.
    pub containerd: Option<String>,
}

impl PlanNode {
    /// `containerd://1.7.27`: what the Node reports once it runs [`PlanNode::containerd`].
    pub fn runtime(&self) -> Option<String> {
        self.containerd
            .as_ref()
            .map(|v| format!("containerd://{}", v.trim_start_matches('v')))
    }
}

/// Where a refusal points in the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum At {
    /// `cluster.kubernetes_version`.
    Version,
    /// The host's `[[hosts]]` entry.
    Host(String),
}

/// The diagnostic codes of the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    Downgrade,
    SkipMinor,
    KubeletNewer,
    KubeletTooOld,
    Unreachable,
    NotKubeadm,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Downgrade => "upgrade-downgrade",
            Code::SkipMinor => "upgrade-skip-minor",
            Code::KubeletNewer => "upgrade-kubelet-newer",
            Code::KubeletTooOld => "upgrade-kubelet-too-old",
            Code::Unreachable => "upgrade-unreachable",
            Code::NotKubeadm => "upgrade-not-kubeadm",
        }
    }
}

/// One broken rule: a diagnostic code, what is wrong, and what to write instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: Code,
    pub at: At,
    pub summary: String,
    pub hint: String,
}

/// What an apply will do about versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No cluster yet: it is built at the plan's version.
    NewCluster,
    /// Every control plane and every node of the plan runs the plan's version (and the
    /// pinned containerd).
    Current(Version),
    Upgrade(Box<UpgradePlan>),
}

/// An allowed upgrade, in the order it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradePlan {
    /// The oldest kube-apiserver, or kubeadm-config's version when that is older (an
    /// `upgrade apply` that did not finish).
    pub from: Version,
    pub to: Version,
    /// Control planes whose kube-apiserver is not at `to`, in plan order (the first control
    /// plane runs `kubeadm upgrade apply`, the others `kubeadm upgrade node`); the first
    /// also when kubeadm-config records an older version than `to` (its `upgrade apply` did
    /// not finish).
    pub control_planes: Vec<String>,
    /// Nodes of the plan whose kubelet is not at `to`: control planes first, then workers, in
    /// plan order (with `from` and the kubelet each runs).
    pub kubelets: Vec<(String, Version)>,
    /// Nodes kwin cordoned in an earlier run and did not uncordon (`kwin.dev/cordoned`): their
    /// upgrade is finished, then they are uncordoned.
    pub resume: Vec<(String, String)>,
    /// Nodes of the plan whose container runtime is not the pinned containerd, in plan order:
    /// the node, what it reports now (`containerd://1.7.24`; empty: nothing), the version it
    /// gets (`1.7.27`).
    pub runtimes: Vec<(String, String, String)>,
    /// Nodes in the cluster that are not in the plan: they keep their version.
    pub not_in_plan: Vec<String>,
    /// What each control plane's kube-apiserver runs (kubeadm-config's version under
    /// `kubeadm-config` when no mirror pod was found).
    pub apiservers: std::collections::BTreeMap<String, Version>,
    /// kubeadm-config's `kubernetesVersion`: what `kubeadm upgrade apply` last finished.
    pub cluster_version: Option<Version>,
}

/// The policy: `target` is the plan's `kubernetes_version`, `nodes` the plan's nodes in plan
/// order.
pub fn check(
    target: &Version,
    state: &ClusterState,
    nodes: &[PlanNode],
) -> Result<Verdict, Vec<Refusal>> {
    let f = match state {
        ClusterState::New => return Ok(Verdict::NewCluster),
        ClusterState::Unreachable(why) => {
            return Err(vec![Refusal {
                code: Code::Unreachable,
                at: At::Version,
                summary: format!(
                    "the cluster is initialised but its API server does not answer ({}): kwin cannot check the version skew policy, so it changes nothing",
                    first_line(why)
                ),
                // A `kubeadm init` that failed halfway leaves the same state (its kubeconfig
                // written, no API server): only a reset gets such a host out of it.
                hint: "bring the control plane back (`kubectl get --raw /readyz` on the first control plane), then run kwin again; if its `kubeadm init` never finished, `kwin reset` the plan, then apply it again".into(),
            }]);
        }
        ClusterState::Running(f) => f,
    };
    let mut refusals = Vec::new();
    // No mirror pod yet (a kubelet that has not posted it since `kubeadm init`): what kubeadm
    // recorded in kubeadm-config stands for the control plane.
    let recorded: std::collections::BTreeMap<String, Version> = f
        .cluster_version
        .iter()
        .map(|v| ("kubeadm-config".to_string(), v.clone()))
        .collect();
    let servers = if f.apiservers.is_empty() {
        &recorded
    } else {
        &f.apiservers
    };
    let (Some((old_cp, a0)), Some((new_cp, a1))) = (
        servers.iter().min_by(|a, b| a.1.cmp(b.1)),
        servers.iter().max_by(|a, b| a.1.cmp(b.1)),
    ) else {
        return Err(vec![Refusal {
            code: Code::NotKubeadm,
            at: At::Version,
            summary: "the cluster has no kube-apiserver mirror pods in kube-system and no kubeadm-config: it is not a kubeadm control plane with static pods, which is what kwin builds and upgrades".into(),
            hint: "kwin upgrades only clusters it built with kubeadm; upgrade this one with its own tooling".into(),
        }]);
    };
    let t = format!("{target}");
    if target < a1 {
        refusals.push(Refusal {
            code: Code::Downgrade,
            at: At::Version,
            summary: format!(
                "kubernetes_version {t} is older than the control plane ({new_cp} runs v{a1}): kwin never downgrades a cluster"
            ),
            hint: format!("set kubernetes_version = \"{a1}\" (what runs) or newer"),
        });
    } else if target.major != a0.major || target.minor > a0.minor + 1 {
        refusals.push(Refusal {
            code: Code::SkipMinor,
            at: At::Version,
            summary: format!(
                "kubernetes_version {t} is more than one minor above the control plane ({old_cp} runs v{a0}): the version skew policy says kube-apiserver must not skip minor versions when upgrading"
            ),
            hint: format!(
                "upgrade to a {}.{} release first (kubernetes_version = \"{}.{}.<patch>\"), apply, then set {t}",
                a0.major,
                a0.minor + 1,
                a0.major,
                a0.minor + 1
            ),
        });
    }
    // Control planes already a minor apart (an upgrade left half done) need no rule of
    // their own: any target but the newer minor is a downgrade or skips a minor from the
    // oldest, and both refusals name the version that finishes the upgrade.
    // A downgrade makes every kubelet newer than the target: one refusal says it.
    let downgrade = !refusals.is_empty() && target < a1;
    for n in nodes {
        let Some(k) = f.nodes.get(&n.name).and_then(|n| n.kubelet.as_ref()) else {
            continue;
        };
        if k > target {
            if downgrade {
                continue;
            }
            refusals.push(Refusal {
                code: Code::KubeletNewer,
                at: At::Host(n.name.clone()),
                summary: format!(
                    "{} runs kubelet v{k}, newer than kubernetes_version {t}: the version skew policy forbids a kubelet newer than kube-apiserver, and kwin never downgrades a kubelet",
                    n.name
                ),
                hint: format!("set kubernetes_version to {k} or newer, so the control plane is upgraded first"),
            });
        } else if k.major == target.major {
            // kubelet < 1.25 may be only two minors older than kube-apiserver.
            let allowed = if k.minor < 25 { 2 } else { 3 };
            if target.minor > k.minor + allowed {
                refusals.push(Refusal {
                    code: Code::KubeletTooOld,
                    at: At::Host(n.name.clone()),
                    summary: format!(
                        "{}'s kubelet v{k} would be {} minors behind {t}; the version skew policy allows {allowed}",
                        n.name,
                        target.minor - k.minor
                    ),
                    hint: format!(
                        "upgrade the cluster to {}.{} first, so the kubelet follows one step at a time",
                        k.major,
                        k.minor + allowed
                    ),
                });
            }
        }
    }
    if !refusals.is_empty() {
        return Err(refusals);
    }
    Ok(verdict(target, a0, f, nodes, servers))
}

fn verdict(
    target: &Version,
    a0: &Version,
    f: &ClusterFacts,
    nodes: &[PlanNode],
    servers: &std::collections::BTreeMap<String, Version>,
) -> Verdict {
    let behind = servers.values().any(|v| v != target);
    // `kubeadm upgrade apply` records the version in kubeadm-config when it finishes, after
    // every manifest: behind the target there, the first control plane's upgrade did not
    // finish (cut off), even with its kube-apiserver at the target already.
    let unfinished = f.cluster_version.as_ref().is_some_and(|v| v < target);
    let first = nodes.iter().find(|n| n.control_plane).map(|n| &n.name);
    let control_planes: Vec<String> = nodes
        .iter()
        .filter(|n| n.control_plane)
        .filter(|n| match f.apiservers.get(&n.name) {
            Some(v) => v != target || (unfinished && Some(&n.name) == first),
            // Known only from kubeadm-config: every control plane follows it.
            None => f.apiservers.is_empty() && behind,
        })
        .map(|n| n.name.clone())
        .collect();
    // Shown from what kubeadm last finished, when that is older than every kube-apiserver.
    let from = match &f.cluster_version {
        Some(v) if v < a0 => v.clone(),
        _ => a0.clone(),
    };
    let order = nodes
        .iter()
        .filter(|n| n.control_plane)
        .chain(nodes.iter().filter(|n| !n.control_plane));
    let kubelets: Vec<(String, Version)> = order
        .filter_map(|n| {
            let k = f.nodes.get(&n.name)?.kubelet.as_ref()?;
            (k != target).then(|| (n.name.clone(), k.clone()))
        })
        .collect();
    let resume: Vec<(String, String)> = nodes
        .iter()
        .filter_map(|n| {
            let mark = f.nodes.get(&n.name)?.kwin_mark.as_ref()?;
            Some((n.name.clone(), mark.clone()))
        })
        .collect();
    let runtimes: Vec<(String, String, String)> = nodes
        .iter()
        .filter_map(|n| {
            let want = n.runtime()?;
            let node = f.nodes.get(&n.name)?;
            let now = node.runtime.clone().unwrap_or_default();
            (now != want).then(|| {
                let v = n.containerd.as_deref().unwrap_or_default();
                (n.name.clone(), now, v.trim_start_matches('v').to_string())
            })
        })
        .collect();
    let not_in_plan = f
        .nodes
        .keys()
        .filter(|k| !nodes.iter().any(|n| &n.name == *k))
        .cloned()
        .collect();
    if control_planes.is_empty() && kubelets.is_empty() && resume.is_empty() && runtimes.is_empty()
    {
        return Verdict::Current(target.clone());
    }
    Verdict::Upgrade(Box::new(UpgradePlan {
        from,
        to: target.clone(),
        control_planes,
        kubelets,
        resume,
        runtimes,
        not_in_plan,
        apiservers: servers.clone(),
        cluster_version: f.cluster_version.clone(),
    }))
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("no answer").trim()
}

#[cfg(test)]
mod tests {
    use super::super::cluster::NodeFacts;
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).expect("version")
    }

    fn cluster(apiservers: &[(&str, &str)], kubelets: &[(&str, &str)]) -> ClusterState {
        let mut f = ClusterFacts::default();
        for (n, ver) in apiservers {
            f.apiservers.insert(n.to_string(), v(ver));
        }
        for (n, ver) in kubelets {
            f.nodes.insert(
                n.to_string(),
                NodeFacts {
                    kubelet: Some(v(ver)),
                    runtime: Some("containerd://1.7.24".into()),
                    ready: true,
                    unschedulable: false,
                    kwin_mark: None,
                },
            );
        }
        ClusterState::Running(f)
    }

    fn plan() -> Vec<PlanNode> {
        ["cp1", "w1", "w2"]
            .iter()
            .map(|n| PlanNode {
                name: n.to_string(),
                control_plane: *n == "cp1",
                containerd: None,
            })
            .collect()
    }

    fn codes(r: Result<Verdict, Vec<Refusal>>) -> Vec<&'static str> {
        r.expect_err("refused")
            .iter()
            .map(|r| r.code.as_str())
            .collect()
    }

    #[test]
    fn a_new_cluster_and_a_current_one_pass() {
        assert_eq!(
            check(&v("1.31.4"), &ClusterState::New, &plan()),
            Ok(Verdict::NewCluster)
        );
        let c = cluster(
            &[("cp1", "1.31.4")],
            &[("cp1", "1.31.4"), ("w1", "1.31.4"), ("w2", "1.31.4")],
        );
        assert_eq!(
            check(&v("1.31.4"), &c, &plan()),
            Ok(Verdict::Current(v("1.31.4")))
        );
    }

    #[test]
    fn one_minor_up_is_an_upgrade_control_plane_first() {
        let c = cluster(
            &[("cp1", "1.31.4")],
            &[
                ("w2", "1.31.4"),
                ("cp1", "1.31.4"),
                ("w1", "1.30.9"),
                ("old", "1.31.4"),
            ],
        );
        let Ok(Verdict::Upgrade(u)) = check(&v("1.32.5"), &c, &plan()) else {
            panic!("not an upgrade")
        };
        assert_eq!((u.from, u.to.clone()), (v("1.31.4"), v("1.32.5")));
        assert_eq!(u.control_planes, ["cp1"]);
        let order: Vec<&str> = u.kubelets.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(order, ["cp1", "w1", "w2"]);
        assert_eq!(u.not_in_plan, ["old"]);
        // A patch release is an upgrade too.
        assert!(matches!(
            check(&v("1.31.9"), &c, &plan()),
            Ok(Verdict::Upgrade(_))
        ));
    }

    #[test]
    fn two_minors_a_downgrade_and_a_major_are_refused_with_the_next_step() {
        let c = cluster(&[("cp1", "1.31.4")], &[("cp1", "1.31.4")]);
        let r = check(&v("1.33.1"), &c, &plan()).expect_err("refused");
        assert_eq!(r[0].code, Code::SkipMinor);
        assert!(r[0].hint.contains("1.32.<patch>"), "{}", r[0].hint);
        assert_eq!(
            codes(check(&v("1.31.3"), &c, &plan())),
            ["upgrade-downgrade"]
        );
        assert_eq!(
            codes(check(&v("2.0.0"), &c, &plan())),
            ["upgrade-skip-minor"]
        );
    }

    #[test]
    fn a_kubelet_newer_than_the_plan_is_refused_at_its_host() {
        let c = cluster(&[("cp1", "1.31.4")], &[("cp1", "1.31.4"), ("w2", "1.31.9")]);
        let r = check(&v("1.31.5"), &c, &plan()).expect_err("refused");
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].code, Code::KubeletNewer);
        assert_eq!(r[0].at, At::Host("w2".into()));
    }

    #[test]
    fn a_kubelet_too_far_behind_is_refused_with_the_policy_window() {
        let c = cluster(&[("cp1", "1.31.4")], &[("w1", "1.28.2"), ("w2", "1.24.0")]);
        // 1.28 → 1.32: four minors; 1.24 → 1.27 would be three, but < 1.25 allows two.
        let r = check(&v("1.32.0"), &c, &plan()).expect_err("refused");
        let hosts: Vec<&At> = r.iter().map(|r| &r.at).collect();
        assert_eq!(hosts, [&At::Host("w1".into()), &At::Host("w2".into())]);
        assert!(r.iter().all(|r| r.code == Code::KubeletTooOld));
        let c = cluster(&[("cp1", "1.31.4")], &[("w1", "1.28.2")]);
        assert!(
            check(&v("1.31.4"), &c, &plan()).is_ok(),
            "three minors are allowed"
        );
    }

    #[test]
    fn half_upgraded_control_planes_must_finish_first() {
        let mut nodes = plan();
        nodes.insert(
            1,
            PlanNode {
                name: "cp2".into(),
                control_plane: true,
                containerd: None,
            },
        );
        let c = cluster(&[("cp1", "1.32.5"), ("cp2", "1.31.4")], &[]);
        let Ok(Verdict::Upgrade(u)) = check(&v("1.32.5"), &c, &nodes) else {
            panic!("finishing the upgrade is allowed")
        };
        assert_eq!(u.control_planes, ["cp2"]);
        assert_eq!(
            codes(check(&v("1.31.9"), &c, &nodes)),
            ["upgrade-downgrade"]
        );
        assert!(matches!(
            check(&v("1.32.6"), &c, &nodes),
            Ok(Verdict::Upgrade(_))
        ));
        assert_eq!(
            codes(check(&v("1.33.0"), &c, &nodes)),
            ["upgrade-skip-minor"]
        );
    }

    #[test]
    fn without_mirror_pods_kubeadm_config_stands_for_the_control_plane() {
        let mut c = cluster(&[], &[("cp1", "1.31.4")]);
        if let ClusterState::Running(f) = &mut c {
            f.cluster_version = Some(v("1.31.4"));
        }
        assert_eq!(
            check(&v("1.31.4"), &c, &plan()),
            Ok(Verdict::Current(v("1.31.4")))
        );
        assert_eq!(
            codes(check(&v("1.33.1"), &c, &plan())),
            ["upgrade-skip-minor"]
        );
        let Ok(Verdict::Upgrade(u)) = check(&v("1.32.5"), &c, &plan()) else {
            panic!("an upgrade")
        };
        assert_eq!(u.control_planes, ["cp1"]);
    }

    /// `kubeadm upgrade apply` cut off after it replaced the kube-apiserver manifest (its
    /// mirror pod at the target) but before it recorded the version in kubeadm-config, which
    /// it writes last: the first control plane's upgrade is not finished, and the upgrade is
    /// shown from the recorded version.
    #[test]
    fn an_upgrade_apply_that_did_not_finish_is_still_to_do() {
        let mut c = cluster(
            &[("cp1", "1.33.1")],
            &[("cp1", "1.32.5"), ("w1", "1.32.5"), ("w2", "1.32.5")],
        );
        if let ClusterState::Running(f) = &mut c {
            f.cluster_version = Some(v("1.32.5"));
        }
        let Ok(Verdict::Upgrade(u)) = check(&v("1.33.1"), &c, &plan()) else {
            panic!("an upgrade")
        };
        assert_eq!((u.from.clone(), u.to.clone()), (v("1.32.5"), v("1.33.1")));
        assert_eq!(u.control_planes, ["cp1"]);
        assert_eq!(u.cluster_version, Some(v("1.32.5")));
        // Finished: kubeadm-config at the target, the control plane is done.
        if let ClusterState::Running(f) = &mut c {
            f.cluster_version = Some(v("1.33.1"));
        }
        let Ok(Verdict::Upgrade(u)) = check(&v("1.33.1"), &c, &plan()) else {
            panic!("the kubelets are still to do")
        };
        assert_eq!(u.from, v("1.33.1"));
        assert!(u.control_planes.is_empty(), "{:?}", u.control_planes);
    }

    #[test]
    fn unreachable_and_not_kubeadm_change_nothing() {
        let r = check(
            &v("1.31.4"),
            &ClusterState::Unreachable("connection refused\nmore".into()),
            &plan(),
        )
        .expect_err("refused");
        assert_eq!(r[0].code, Code::Unreachable);
        assert!(r[0].summary.contains("connection refused") && !r[0].summary.contains("more"));
        // A half-done `kubeadm init` looks the same: the way out is named.
        assert!(r[0].hint.contains("`kwin reset`"), "{}", r[0].hint);
        assert_eq!(
            codes(check(&v("1.31.4"), &cluster(&[], &[]), &plan())),
            ["upgrade-not-kubeadm"]
        );
    }

    #[test]
    fn kwin_marks_are_resumed() {
        let mut c = cluster(&[("cp1", "1.32.5")], &[("cp1", "1.32.5"), ("w1", "1.32.5")]);
        if let ClusterState::Running(f) = &mut c {
            if let Some(n) = f.nodes.get_mut("w1") {
                n.kwin_mark = Some("upgrade 20261124-210301 2026-11-24T21:03:00Z".into());
            }
        }
        let Ok(Verdict::Upgrade(u)) = check(&v("1.32.5"), &c, &plan()) else {
            panic!("a marked node is work left")
        };
        assert!(u.control_planes.is_empty() && u.kubelets.is_empty());
        assert_eq!(u.resume[0].0, "w1");
    }

    #[test]
    fn a_pinned_containerd_the_nodes_do_not_run_is_an_upgrade_of_its_own() {
        let c = cluster(
            &[("cp1", "1.31.4")],
            &[("cp1", "1.31.4"), ("w1", "1.31.4"), ("w2", "1.31.4")],
        );
        let mut nodes = plan();
        // w1 pinned at what it runs, w2 at a new release (a `v` is the tag's), cp1 unpinned.
        nodes[1].containerd = Some("1.7.24".into());
        nodes[2].containerd = Some("v1.7.27".into());
        let Ok(Verdict::Upgrade(u)) = check(&v("1.31.4"), &c, &nodes) else {
            panic!("containerd 1.7.27 on w2 is work to do")
        };
        assert!(u.control_planes.is_empty() && u.kubelets.is_empty());
        assert_eq!(
            u.runtimes,
            [(
                "w2".to_string(),
                "containerd://1.7.24".to_string(),
                "1.7.27".to_string()
            )]
        );
        nodes[2].containerd = Some("1.7.24".into());
        assert_eq!(
            check(&v("1.31.4"), &c, &nodes),
            Ok(Verdict::Current(v("1.31.4")))
        );
    }
}
