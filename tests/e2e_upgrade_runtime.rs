//! End to end: a two-node lab cluster (h1 control plane, h2 worker; flannel) whose containerd
//! comes from its release (`runtime.containerd_source = "release"`, the lab mirror's
//! tarballs, see lab/cluster-stand-in/README.md) is built at containerd 1.7.24, then
//! `versions.containerd` is raised to 1.7.27 with Kubernetes unchanged: `kwin plan` shows a
//! row per node, and `kwin apply` drains each node (one at a time) before the new binaries
//! go in and containerd restarts, and uncordons it once its Node reports
//! `containerd://1.7.27`. The next apply changes nothing.
//!
//! The oracle is the stand-ins', not kwin's report: containerd.service's runner records the
//! version each start runs, the kubelet stand-in reports it in the Node and logs
//! `undrained-runtime-upgrade` if it changes while the Node is schedulable or has pods to
//! evict; the status stand-in's timeline says how many nodes were unschedulable at once.
//!
//! Lab 17 (`KWIN_LAB_ID=17`) of its own. A lab test (root, the API tier's binaries from
//! `lab/apiserver/build.sh`, the cached Debian containerd and runc packages): ignored by
//! `cargo test`, failing when run without what it needs.

use kwin_testkit::cluster::{self, Cluster};
use kwin_testkit::kwin;
use std::path::Path;

const LAB_ID: &str = "17";
const FROM: &str = "1.7.24";
const TO: &str = "1.7.27";
/// The runc release the lab mirror serves beside them (lab/cluster-stand-in/mirror.sh).
const RUNC: &str = "1.3.3";

/// h1 and h2 of lab 17 and the stand-ins, the mirror serving Kubernetes 1.31.4 and both
/// containerd releases.
fn up() -> Cluster {
    Cluster::up_with(
        LAB_ID,
        2,
        &[
            ("KWIN_LAB_K8S_VERSIONS", "1.31.4"),
            ("KWIN_LAB_CONTAINERD_VERSIONS", &format!("{FROM} {TO}")),
        ],
    )
}

/// `name runtime unschedulable mark` of each Node.
fn nodes(c: &Cluster) -> String {
    c.kubectl(&[
        "get",
        "nodes",
        "-o",
        r#"jsonpath={range .items[*]}{.metadata.name} {.status.nodeInfo.containerRuntimeVersion} {.spec.unschedulable} {.metadata.annotations.kwin\.dev/cordoned}{"\n"}{end}"#,
    ])
}

/// examples/lab-cluster.toml for lab 17: h1 and h2 only, containerd from its release at
/// `containerd`, every release download pinned (the lab mirror is plain HTTP).
fn write_plan(c: &Cluster, dir: &Path, containerd: &str) {
    let text = c.example("lab-cluster.toml");
    let (h3, _) = text
        .split_once("[[hosts]]\nname = \"h3\"")
        .expect("the example's h3");
    let mut pins = vec![
        format!(
            "\"runc.amd64\" = \"{}\"",
            c.served(&format!(
                "github.com/opencontainers/runc/releases/download/v{RUNC}/runc.amd64"
            ))
        ),
        format!(
            "\"containerd.service\" = \"{}\"",
            c.served(&format!(
                "raw.githubusercontent.com/containerd/containerd/v{containerd}/containerd.service"
            ))
        ),
    ];
    for v in [FROM, TO] {
        let name = format!("containerd-{v}-linux-amd64.tar.gz");
        pins.push(format!(
            "{name:?} = \"{}\"",
            c.served(&format!(
                "github.com/containerd/containerd/releases/download/v{v}/{name}"
            ))
        ));
    }
    let text = h3
        .replace(
            "linux = \"containerd\"",
            &format!(
                "linux = \"containerd\"\ncontainerd_source = \"release\"\n\n[versions]\ncontainerd = \"{containerd}\"\nrunc = \"{RUNC}\""
            ),
        )
        .replace(
            "openpgp = {",
            &format!("sha256 = {{ {} }}\nopenpgp = {{", pins.join(", ")),
        );
    assert!(
        text.contains(&format!("containerd = \"{containerd}\"")),
        "{text}"
    );
    cluster::write_plan(dir, &text);
}

fn apply(dir: &Path) -> kwin_testkit::kwin::Run {
    kwin!(dir, &["apply", "plan.toml", "--output", "json"])
}

kwin_testkit::lab_test! {
#[test]
fn a_containerd_release_change_drains_each_node_first() {
    let c = up();
    let plan = c.lab.plan_dir("");
    let dir = plan.path();

    write_plan(&c, dir, FROM);
    let cold = apply(dir);
    assert_eq!(cold.code, 0, "cold apply:\n{cold}");
    assert_eq!(
        nodes(&c),
        format!("h1 containerd://{FROM}  \nh2 containerd://{FROM}  \n"),
        "the Nodes do not report the release's containerd"
    );
    let warm = apply(dir);
    assert_eq!(warm.code, 0, "{warm}");
    assert_eq!(warm.summary()["changed"], 0, "warm apply changed something:\n{warm}");

    // A pod on h2 a drain must evict (owned by a controller, so the drain may): it is gone
    // before containerd changes under it.
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web-0\n  namespace: default\n  ownerReferences:\n  - {apiVersion: apps/v1, kind: StatefulSet, name: web, uid: 6d1f5b56-0000-4000-8000-000000000017, controller: true}\nspec:\n  nodeName: h2\n  containers:\n  - name: c\n    image: registry.k8s.io/pause:3.10\n";
    let pod_file = dir.join("pod.yaml");
    std::fs::write(&pod_file, pod).expect("pod");
    c.kubectl(&["create", "-f", &pod_file.display().to_string()]);

    // The change: `kwin plan` shows it per node (Kubernetes unchanged) and changes nothing.
    write_plan(&c, dir, TO);
    let shown = kwin!(dir, &["plan", "plan.toml", "--output", "json"]);
    assert_eq!(shown.code, 0, "{shown}");
    let section = shown.upgrade_section();
    assert_eq!(section["from"], section["to"], "{section}");
    let rows: Vec<(u64, String, String, String)> = section["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["step"].as_u64().unwrap_or(0),
                r["node"].as_str().unwrap_or("").to_string(),
                r["now"].as_str().unwrap_or("").to_string(),
                r["then"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let then = format!("drain, containerd {TO} installed, restarted, uncordon");
    assert_eq!(
        rows,
        [
            (1, "h1".into(), format!("containerd {FROM}"), then.clone()),
            (2, "h2".into(), format!("containerd {FROM}"), then),
        ],
        "{section}"
    );
    let human = kwin!(dir, &["plan", "plan.toml"]);
    assert!(human.stdout.contains("upgrade: Kubernetes v1.31.4 (unchanged"), "{human}");
    assert_eq!(
        c.lab.ssh("h2", "/usr/local/bin/containerd --version | cut -d' ' -f3").trim(),
        format!("v{FROM}"),
        "kwin plan changed containerd"
    );

    let since = cluster::epoch();
    let up = apply(dir);
    assert_eq!(up.code, 0, "apply of containerd {TO}:\n{up}");
    // The oracle first: containerd never changed under a schedulable or undrained node.
    for h in ["h1", "h2"] {
        assert_eq!(c.violations(h), "", "{h}: containerd changed under a schedulable or undrained node");
        let seen = c.lab.ssh(h, "grep 'container runtime' /var/log/kubelet-stand-in.log || true");
        assert!(
            seen.contains(&format!(
                "container runtime containerd://{FROM} -> containerd://{TO} (node cordoned, 0 pod(s) to evict)"
            )),
            "{h}: the kubelet stand-in did not see the new runtime on a drained node:\n{seen}"
        );
    }

    for (t, want) in [
        ("h1/cp-upgrade-drain@h1", "changed"),
        ("h1/cp-upgrade-containerd-release", "changed"),
        ("h1/cp-upgrade-containerd", "changed"),
        ("h1/cp-upgrade-uncordon@h1", "changed"),
        ("h1/upgrade-drain@h2", "changed"),
        ("h2/upgrade-containerd-release", "changed"),
        ("h2/upgrade-containerd", "changed"),
        ("h1/upgrade-uncordon@h2", "changed"),
        // The install path leaves joined nodes to the drained window.
        ("h1/containerd-release", "ok"),
        ("h2/containerd-release", "ok"),
        ("h2/containerd", "ok"),
        // Nothing of Kubernetes changes.
        ("h2/kubeadm-upgrade-node", "ok"),
        ("h2/kubelet-restart", "ok"),
    ] {
        let (host, task) = t.split_once('/').expect("host/task");
        assert_eq!(up.task(host, task)["status"], want, "{t}:\n{up}");
    }
    assert_eq!(
        nodes(&c),
        format!("h1 containerd://{TO}  \nh2 containerd://{TO}  \n"),
        "a node not at containerd {TO}, left cordoned or marked"
    );
    let evicted = c.kubectl(&["-n", "default", "get", "pods", "-o", "name"]);
    assert_eq!(evicted.trim(), "", "the drain did not evict web-0");
    // One node unschedulable at a time, none left.
    c.assert_drained_in_turn(since, 1);

    let again = apply(dir);
    assert_eq!(again.code, 0, "{again}");
    assert_eq!(again.summary()["changed"], 0, "the apply after the change changed something:\n{again}");
}
}
