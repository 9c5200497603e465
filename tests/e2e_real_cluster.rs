//! End to end on real components: `kwin apply lab/cluster/plan.toml` builds Kubernetes 1.37.2
//! on containerd 2.3.7 with flannel VXLAN on three lab hosts (`lab/up.sh 3 --nodes`, the
//! registry and mirror of `lab/cluster/up.sh`), every program the lab built from its upstream
//! module (lab/build/build.sh): real apt, kubeadm init and join, the kubelet, etcd, the API
//! server, CoreDNS, kube-proxy and flannel. Then `kwin verify` runs agnhost pods (pod to pod
//! across nodes, service, DNS, NodePort, egress), and a second apply changes nothing; `kwin
//! reset` with the real kubeadm leaves no pod, file or link of the cluster, and the next apply
//! builds it again. A lab test like every other (root, the lab's default build in
//! /var/cache/kwin-lab: `lab/build/build.sh`, which `.ci/run` runs): the README's test command
//! runs it.
//!
//! The oracle is the cluster's own: the API server's Nodes (kubelet and containerd versions,
//! Ready) and verify's checks, which run real pods.
//!
//! Behind the `real-lab` feature, because each needs another full Kubernetes build (20 minutes
//! or more of two cores) besides the default one:
//!
//! Upgrade: the same lab at the previous minor (1.36.3, built when asked:
//! `LAB_K8S_FULL="1.36.3 1.37.2" lab/build/build.sh`) runs a Deployment of real pods; the plan
//! moves to 1.37.2 and `kwin apply` upgrades it with real `kubeadm upgrade apply`/`node`, real
//! drains evicting those pods, every node back Ready and uncordoned at 1.37.2; then 0 changed.
//!
//! containerd 1.x to 2.x: the same lab at 1.35 (the last minor that supports containerd 1.x;
//! built when asked: `LAB_K8S_FULL="1.35.4 1.37.2" lab/build/build.sh`) on containerd 1.7.29
//! from its release runs a Deployment of real pods; the plan moves containerd to 2.3.7 with
//! Kubernetes unchanged, and `kwin apply` drains each node before the new binaries go in and
//! containerd restarts (config version 2 read by 2.x), every node back Ready and uncordoned on
//! `containerd://2.3.7`, the pods evicted and running again; then 0 changed.
//! `cargo test --features real-lab --test e2e_real_cluster -- --include-ignored`.
//!
//! Labs 18, 16 and 15 (`KWIN_LAB_ID`) of their own, one test at a time (two real clusters at once
//! are more than two cores carry); failing, never skipping, without what they need.

use kwin_testkit::host::workspace;
use kwin_testkit::kwin;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const LAB_ID: &str = "18";
/// The upgrade test's lab.
#[cfg(feature = "real-lab")]
const UPGRADE_LAB_ID: &str = "16";
/// The previous minor the upgrade starts from (lab/build/versions.sh LAB_K8S_PREVIOUS).
const PREVIOUS: &str = "1.36.3";
const NEWEST: &str = "1.37.2";
/// The containerd move's lab.
#[cfg(feature = "real-lab")]
const CONTAINERD_LAB_ID: &str = "15";
/// The last minor that supports containerd 1.x (lab/build/versions.sh LAB_K8S_CONTAINERD1;
/// engine/src/plan/versions.toml's matrix).
const CONTAINERD1_MINOR: &str = "1.35.4";
/// The containerd releases the move goes from and to (lab/build/versions.sh LAB_CONTAINERD).
const CONTAINERD_FROM: &str = "1.7.29";
const CONTAINERD_TO: &str = "2.3.7";

/// The lab's versions are lab/build/versions.sh's: the constants above are checked against it,
/// so a version the lab builds has one owner.
fn assert_lab_versions() {
    let out = Command::new("bash")
        .arg("-c")
        .arg(
            "source lab/build/versions.sh && \
             printf '%s\\n' \"$LAB_K8S_NEWEST\" \"$LAB_K8S_PREVIOUS\" \"$LAB_K8S_CONTAINERD1\" \"$LAB_CONTAINERD\"",
        )
        .current_dir(workspace())
        .output()
        .expect("bash");
    let text = String::from_utf8_lossy(&out.stdout);
    let want =
        format!("{NEWEST}\n{PREVIOUS}\n{CONTAINERD1_MINOR}\n{CONTAINERD_FROM} {CONTAINERD_TO}\n");
    assert_eq!(text, want, "lab/build/versions.sh and this test disagree");
}

/// One real cluster at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `script` of the checkout, run as root for lab `id` with `env`; its output when it fails.
fn lab_script(id: &str, env: &[(&str, &str)], script: &str, args: &[&str]) {
    let out = Command::new(workspace().join(script))
        .args(args)
        .env("KWIN_LAB_ID", id)
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("{script}: {e}"));
    assert!(
        out.status.success(),
        "{script} {args:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The lab's hosts and services, taken down on drop (services first).
struct RealLab {
    id: &'static str,
}

impl RealLab {
    fn up(id: &'static str, env: &[(&str, &str)]) -> RealLab {
        lab_script(id, env, "lab/up.sh", &["3", "--nodes"]);
        let lab = RealLab { id };
        lab_script(id, env, "lab/cluster/up.sh", &[]);
        lab
    }

    fn dir(&self) -> PathBuf {
        workspace().join(format!("target/lab-{}", self.id))
    }

    /// The plan lab/cluster/up.sh wrote for this lab (its addresses, inventory and the
    /// digests of what this machine's lab built), in `dir`; its text.
    fn write_plan(&self, dir: &Path) -> String {
        let text = std::fs::read_to_string(self.dir().join("cluster/plan.toml"))
            .expect("lab/cluster/up.sh's plan");
        let id: u32 = self.id.parse().expect("lab id");
        assert!(text.contains(&format!("10.{}.255.1", 213 + id)), "{text}");
        std::fs::write(dir.join("plan.toml"), &text).expect("plan.toml");
        text
    }
}

impl Drop for RealLab {
    fn drop(&mut self) {
        for s in ["lab/cluster/down.sh", "lab/down.sh"] {
            let _ = Command::new(workspace().join(s))
                .env("KWIN_LAB_ID", self.id)
                .output();
        }
    }
}

/// `kubectl` with the admin kubeconfig on h1, through `kwin exec`: its stdout.
fn kubectl(dir: &Path, args: &str) -> String {
    on(
        dir,
        "h1",
        &format!("kubectl --kubeconfig /etc/kubernetes/admin.conf {args}"),
    )
}

/// `script` as root on lab host `host`, through `kwin exec`: its stdout.
fn on(dir: &Path, host: &str, script: &str) -> String {
    let run = kwin!(dir, &["exec", "plan.toml", "--limit", host, "--", script]);
    assert_eq!(run.code, 0, "{host}: {script}:\n{run}");
    run.stdout
        .lines()
        .filter(|l| {
            !(l.starts_with(&format!("=== {host}:"))
                || l.starts_with("exec: ")
                || l.starts_with("logs: "))
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Every Node's name, kubelet version, runtime, Ready status and whether it is cordoned.
fn nodes(dir: &Path) -> String {
    kubectl(
        dir,
        "get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.status.nodeInfo.kubeletVersion} {.status.nodeInfo.containerRuntimeVersion} {.status.conditions[?(@.type==\"Ready\")].status} unschedulable={.spec.unschedulable}{\"\\n\"}{end}'",
    )
}

fn summary(run: &kwin_testkit::kwin::Run) -> Value {
    kwin_testkit::kwin::events(&run.stdout)
        .into_iter()
        .find(|e| e["event"] == "summary")
        .unwrap_or_else(|| panic!("no summary:\n{run}"))
}

kwin_testkit::lab_test! {
#[test]
fn a_real_cluster_runs_pods_and_the_next_apply_changes_nothing() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    assert_lab_versions();
    let lab = RealLab::up(LAB_ID, &[]);
    let plan = tempfile::tempdir().expect("tempdir");
    let dir = plan.path();
    lab.write_plan(dir);

    let cold = kwin!(dir, &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(cold.code, 0, "cold apply:\n{cold}");
    let s = summary(&cold);
    assert!(s["changed"].as_u64().unwrap_or(0) > 0, "{s}");
    // verify ran real pods: every check passed, none skipped.
    assert_eq!(s["verify"]["failed"], 0, "{s}");
    assert_eq!(s["verify"]["skipped"], 0, "{s}");
    assert!(s["verify"]["passed"].as_u64().unwrap_or(0) >= 8, "{s}");

    // The Nodes the real kubelets registered, as the API server reports them.
    let cold_nodes = nodes(dir);
    for h in ["h1", "h2", "h3"] {
        let want = format!("{h} v{NEWEST} containerd://2.3.7 True unschedulable=\n");
        assert!(cold_nodes.contains(&want), "{want}:\n{cold_nodes}");
    }

    // The API server's /version is the plan's.
    let version = kubectl(dir, "version --output json");
    let version: Value = serde_json::from_str(&version).unwrap_or_else(|e| panic!("{e}: {version}"));
    assert_eq!(
        version["serverVersion"]["gitVersion"],
        format!("v{NEWEST}"),
        "{version}"
    );

    let warm = kwin!(dir, &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(warm.code, 0, "warm apply:\n{warm}");
    let s = summary(&warm);
    assert_eq!(s["changed"], 0, "{s}");
    assert_eq!(s["verify"]["failed"], 0, "{s}");

    // kwin reset with the real kubeadm: workers drained and reset, the control plane last;
    // containerd still answers (it stops when /etc/cni/net.d, which it watches, is removed:
    // the directory is emptied) with no container left in its Kubernetes namespace; nothing
    // of the cluster on disk or in the links.
    let reset = kwin!(dir, &["reset", "plan.toml", "--yes", "--output", "json"]);
    assert_eq!(reset.code, 0, "reset:\n{reset}");
    for h in ["h1", "h2", "h3"] {
        let left = on(
            dir,
            h,
            &format!(
                "ls -d /etc/kubernetes /var/lib/cni /run/flannel {} 2>/dev/null; \
             ls -A /etc/cni/net.d; \
             ip -o link show | grep -oE 'cni0|flannel[.][0-9]+'; \
             ctr --namespace k8s.io containers list --quiet 2>/tmp/ctr.err || \
             {{ echo containerd does not answer; cat /tmp/ctr.err; }}; true",
                // etcd's data on the control plane (the lab hosts' root, the machine's, may
                // have a /var/lib/etcd of its own: workers are not asked)
                if h == "h1" { "/var/lib/etcd" } else { "" }
            ),
        );
        assert_eq!(left.trim(), "", "{h} after reset:\n{left}");
    }
    // The hosts are fit for a cluster again: the next apply builds it from scratch.
    let again = kwin!(dir, &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(again.code, 0, "apply after reset:\n{again}");
    let s = summary(&again);
    assert_eq!(s["verify"]["failed"], 0, "{s}");
    assert_eq!(s["verify"]["skipped"], 0, "{s}");
    let rebuilt = nodes(dir);
    for h in ["h1", "h2", "h3"] {
        let want = format!("{h} v{NEWEST} containerd://2.3.7 True unschedulable=\n");
        assert!(rebuilt.contains(&want), "{want}:\n{rebuilt}");
    }
}
}

kwin_testkit::lab_test! {
#[cfg(feature = "real-lab")]
#[test]
fn a_real_cluster_upgrades_from_the_previous_minor_draining_real_pods() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    assert_lab_versions();
    let both = format!("{PREVIOUS} {NEWEST}");
    let lab = RealLab::up(UPGRADE_LAB_ID, &[("LAB_K8S_FULL", &both)]);
    let plan = tempfile::tempdir().expect("tempdir");
    let dir = plan.path();
    let text = lab.write_plan(dir);
    let at = |v: &str| {
        let t = text.replace(
            &format!("kubernetes_version = \"{NEWEST}\""),
            &format!("kubernetes_version = \"{v}\""),
        );
        assert!(t.contains(&format!("kubernetes_version = \"{v}\"")), "{t}");
        std::fs::write(dir.join("plan.toml"), t).expect("plan.toml");
    };

    at(PREVIOUS);
    let cold = kwin!(dir, &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(cold.code, 0, "apply at {PREVIOUS}:\n{cold}");
    let before = nodes(dir);
    for h in ["h1", "h2", "h3"] {
        let want = format!("{h} v{PREVIOUS} containerd://2.3.7 True unschedulable=\n");
        assert!(before.contains(&want), "{want}:\n{before}");
    }

    // Real pods for the drains to evict: agnhost pause on the workers, two per node.
    let uids_before = drained_pods(dir);

    at(NEWEST);
    let upgrade = kwin!(dir, &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(upgrade.code, 0, "upgrade to {NEWEST}:\n{upgrade}");
    let s = summary(&upgrade);
    assert!(s["changed"].as_u64().unwrap_or(0) > 0, "{s}");
    assert_eq!(s["verify"]["failed"], 0, "{s}");

    let after = nodes(dir);
    for h in ["h1", "h2", "h3"] {
        let want = format!("{h} v{NEWEST} containerd://2.3.7 True unschedulable=\n");
        assert!(after.contains(&want), "{want}:\n{after}");
    }
    let version = kubectl(dir, "get --raw /version");
    assert!(
        version.contains(&format!("\"v{NEWEST}\"")),
        "the API server reports {NEWEST}:\n{version}"
    );
    // The drains evicted every pod of the Deployment: none of them is the pod it was, and
    // the Deployment is whole again.
    assert_all_evicted(dir, &uids_before);

    let warm = kwin!(dir, &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(warm.code, 0, "apply after the upgrade:\n{warm}");
    assert_eq!(summary(&warm)["changed"], 0, "{warm}");
}
}

/// The Deployment `drained`: four agnhost pods for the drains to evict; their UIDs.
#[cfg(feature = "real-lab")]
fn drained_pods(dir: &Path) -> String {
    kubectl(
        dir,
        "create deployment drained --image=registry.k8s.io/e2e-test-images/agnhost:2.66.1 --replicas=4 -- /agnhost pause",
    );
    kubectl(dir, "rollout status deployment/drained --timeout=180s");
    let uids = kubectl(
        dir,
        "get pods -l app=drained -o jsonpath='{.items[*].metadata.uid}'",
    );
    assert_eq!(uids.split_whitespace().count(), 4, "{uids}");
    uids
}

/// The Deployment `drained` is whole again and none of its pods is one of `before`.
#[cfg(feature = "real-lab")]
fn assert_all_evicted(dir: &Path, before: &str) {
    kubectl(dir, "rollout status deployment/drained --timeout=180s");
    let after = kubectl(
        dir,
        "get pods -l app=drained -o jsonpath='{.items[*].metadata.uid}'",
    );
    assert_eq!(after.split_whitespace().count(), 4, "{after}");
    for uid in before.split_whitespace() {
        assert!(!after.contains(uid), "pod {uid} was never evicted: {after}");
    }
}

kwin_testkit::lab_test! {
#[cfg(feature = "real-lab")]
#[test]
fn an_existing_containerd_1_7_node_moves_to_2_x_with_a_drain() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    assert_lab_versions();
    let lab = RealLab::up(CONTAINERD_LAB_ID, &[]);
    let plan = tempfile::tempdir().expect("tempdir");
    let dir = plan.path();
    let text = lab.write_plan(dir);
    let with = |containerd: &str| {
        let t = text
            .replace(
                &format!("kubernetes_version = \"{NEWEST}\""),
                &format!("kubernetes_version = \"{CONTAINERD1_MINOR}\""),
            )
            .replace(
                "[runtime]\nlinux = \"containerd\"\n",
                "[runtime]\nlinux = \"containerd\"\ncontainerd_source = \"release\"\n",
            )
            .replace(
                "\n[artifacts]\n",
                &format!("\n[versions]\ncontainerd = \"{containerd}\"\n\n[artifacts]\n"),
            );
        for want in [
            format!("kubernetes_version = \"{CONTAINERD1_MINOR}\""),
            "containerd_source = \"release\"".to_string(),
            format!("[versions]\ncontainerd = \"{containerd}\""),
            format!("\"containerd-{containerd}-linux-amd64.tar.gz\" = "),
        ] {
            assert!(t.contains(&want), "{want}:\n{t}");
        }
        std::fs::write(dir.join("plan.toml"), t).expect("plan.toml");
    };

    with(CONTAINERD_FROM);
    let cold = kwin!(dir, &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(cold.code, 0, "apply on containerd {CONTAINERD_FROM}:\n{cold}");
    let before = nodes(dir);
    for h in ["h1", "h2", "h3"] {
        let want =
            format!("{h} v{CONTAINERD1_MINOR} containerd://{CONTAINERD_FROM} True unschedulable=\n");
        assert!(before.contains(&want), "{want}:\n{before}");
    }
    let uids = drained_pods(dir);

    with(CONTAINERD_TO);
    let moved = kwin!(dir, &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(moved.code, 0, "containerd to {CONTAINERD_TO}:\n{moved}");
    let s = summary(&moved);
    assert!(s["changed"].as_u64().unwrap_or(0) > 0, "{s}");
    assert_eq!(s["verify"]["failed"], 0, "{s}");
    let after = nodes(dir);
    for h in ["h1", "h2", "h3"] {
        let want =
            format!("{h} v{CONTAINERD1_MINOR} containerd://{CONTAINERD_TO} True unschedulable=\n");
        assert!(after.contains(&want), "{want}:\n{after}");
    }
    // Each worker was drained before its containerd changed: the pods were evicted.
    assert_all_evicted(dir, &uids);

    let warm = kwin!(dir, &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(warm.code, 0, "apply after the move:\n{warm}");
    assert_eq!(summary(&warm)["changed"], 0, "{warm}");
}
}
