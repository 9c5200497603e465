//! End to end on real components: `kwin apply lab/cluster/plan.toml` builds Kubernetes 1.37.2
//! on containerd 2.3.7 with flannel VXLAN on three lab hosts (`lab/up.sh 3 --nodes`, the
//! registry and mirror of `lab/cluster/up.sh`), every program the lab built from its upstream
//! module (lab/build/build.sh): real apt, kubeadm init and join, the kubelet, etcd, the API
//! server, CoreDNS, kube-proxy and flannel. Then `kwin verify` runs agnhost pods (pod to pod
//! across nodes, service, DNS, NodePort, egress), and a second apply changes nothing.
//!
//! The oracle is the cluster's own: the API server's Nodes (kubelet and containerd versions,
//! Ready) and verify's checks, which run real pods.
//!
//! Lab 18 (`KWIN_LAB_ID=18`) of its own. A lab test behind the `real-lab` feature (root, the
//! lab's builds in /var/cache/kwin-lab): `cargo test --features real-lab --test
//! e2e_real_cluster -- --include-ignored`; failing, never skipping, without what it needs.
#![cfg(feature = "real-lab")]

use kwin_testkit::host::workspace;
use kwin_testkit::kwin;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const LAB_ID: &str = "18";

/// `script` of the checkout, run as root for lab 18; its output when it fails.
fn lab_script(script: &str, args: &[&str]) {
    let out = Command::new(workspace().join(script))
        .args(args)
        .env("KWIN_LAB_ID", LAB_ID)
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
struct RealLab;

impl RealLab {
    fn up() -> RealLab {
        lab_script("lab/up.sh", &["3", "--nodes"]);
        let lab = RealLab;
        lab_script("lab/cluster/up.sh", &[]);
        lab
    }

    fn dir() -> PathBuf {
        workspace().join(format!("target/lab-{LAB_ID}"))
    }
}

impl Drop for RealLab {
    fn drop(&mut self) {
        for s in ["lab/cluster/down.sh", "lab/down.sh"] {
            let _ = Command::new(workspace().join(s))
                .env("KWIN_LAB_ID", LAB_ID)
                .output();
        }
    }
}

/// The plan lab/cluster/up.sh wrote for lab 18 (its addresses, inventory and the digests of
/// what this machine's lab built), in `dir`.
fn write_plan(dir: &Path) {
    let text = std::fs::read_to_string(RealLab::dir().join("cluster/plan.toml"))
        .expect("lab/cluster/up.sh's plan");
    assert!(text.contains(&format!("10.{}.255.1", 213 + 18)), "{text}");
    std::fs::write(dir.join("plan.toml"), text).expect("plan.toml");
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
    let _lab = RealLab::up();
    let plan = tempfile::tempdir().expect("tempdir");
    let dir = plan.path();
    write_plan(dir);

    let cold = kwin!(dir, &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(cold.code, 0, "cold apply:\n{cold}");
    let s = summary(&cold);
    assert!(s["changed"].as_u64().unwrap_or(0) > 0, "{s}");
    // verify ran real pods: every check passed, none skipped.
    assert_eq!(s["verify"]["failed"], 0, "{s}");
    assert_eq!(s["verify"]["skipped"], 0, "{s}");
    assert!(s["verify"]["passed"].as_u64().unwrap_or(0) >= 8, "{s}");

    // The Nodes the real kubelets registered, as the API server reports them.
    let nodes = kwin!(
        dir,
        &[
            "exec",
            "plan.toml",
            "--limit",
            "h1",
            "--",
            "kubectl --kubeconfig /etc/kubernetes/admin.conf get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.status.nodeInfo.kubeletVersion} {.status.nodeInfo.containerRuntimeVersion} {.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}'",
        ]
    );
    assert_eq!(nodes.code, 0, "{nodes}");
    for h in ["h1", "h2", "h3"] {
        let want = format!("{h} v1.37.2 containerd://2.3.7 True");
        assert!(nodes.stdout.contains(&want), "{want}:\n{nodes}");
    }

    let warm = kwin!(dir, &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(warm.code, 0, "warm apply:\n{warm}");
    let s = summary(&warm);
    assert_eq!(s["changed"], 0, "{s}");
    assert_eq!(s["verify"]["failed"], 0, "{s}");
}
}
