//! End to end: a lab cluster built at 1.31.4 by `kwin apply examples/lab-cluster.toml`
//! (flannel; one control plane, two Linux workers on lab hosts, real sshd, real apt/dpkg from
//! the lab's signed per-minor repositories, real kube-apiserver + etcd, real kubectl; the
//! kubeadm, kubelet and systemctl stand-ins of `lab/cluster-stand-in`) is upgraded to 1.32.5
//! by changing `kubernetes_version` and running `kwin apply` again.
//!
//! What the stand-ins record is the oracle, not kwin's own report: the kubelet stand-in logs
//! every skew or undrained upgrade it sees (`/var/lib/kubelet-stand-in/violations.log`), the
//! kubeadm stand-in every call and whether it refused it (`/var/log/kubeadm-stand-in.log`),
//! and the status stand-in every change of a Node's schedulability, readiness and kubelet
//! version (`timeline.log`).
//!
//! The same upgrade of `examples/lab-cluster-calico.toml` (Calico through the tigera
//! operator's objects): the control plane, then the workers one at a time, every drained node
//! uncordoned, the next apply changing nothing.
//!
//! Labs 9 (flannel) and 16 (Calico), one cluster build per test; the two run at once. Lab
//! tests (root, the API tier's binaries from `lab/apiserver/build.sh`): ignored by `cargo
//! test`, failing when run without what they need. Interrupted upgrades, a blocked drain and
//! a lost worker: tests/e2e_upgrade_resume.rs.

use kwin_testkit::cluster::{epoch, with_version, write_plan as write_plan_text, Cluster};
use kwin_testkit::kwin;
use std::path::Path;
use std::time::Instant;

const LAB_ID: &str = "9";
const CALICO_LAB_ID: &str = "16";
const FROM: &str = "1.31.4";
const TO: &str = "1.32.5";

/// `examples/<example>` for the cluster's lab at `version`.
fn write_plan(c: &Cluster, dir: &Path, example: &str, version: &str) {
    write_plan_text(dir, &with_version(&c.example(example), version));
}

/// Tasks of the upgrade recipes in a run, with their status (`host/task`).
fn upgrade_tasks(run: &kwin_testkit::kwin::Run) -> Vec<(String, String)> {
    const STEPS: &[&str] = &[
        "cp-upgrade-kubeadm-package",
        "cp-kubeadm-upgrade",
        "cp-upgrade-drain",
        "cp-upgrade-kubelet-packages",
        "cp-kubelet-restart",
        "cp-upgrade-uncordon",
        "upgrade-drain",
        "upgrade-kubeadm-package",
        "kubeadm-upgrade-node",
        "upgrade-kubelet-packages",
        "kubelet-restart",
        "upgrade-uncordon",
    ];
    run.events()
        .iter()
        .filter(|e| e["event"] == "task_finished")
        .filter_map(|e| {
            let task = e["task"].as_str()?;
            let step = task.split('@').next()?;
            STEPS.contains(&step).then(|| {
                (
                    format!("{}/{task}", e["host"].as_str().unwrap_or("?")),
                    e["status"].as_str().unwrap_or("?").to_string(),
                )
            })
        })
        .collect()
}

/// kubeadm-config and h1's kube-apiserver mirror pod at `version`.
fn assert_control_plane_at(c: &Cluster, version: &str) {
    assert_eq!(c.cluster_version(), format!("v{version}"), "kubeadm-config");
    let apiserver = c.kubectl(&[
        "-n",
        "kube-system",
        "get",
        "pod",
        "kube-apiserver-h1",
        "-o",
        "jsonpath={.spec.containers[0].image}",
    ]);
    assert!(apiserver.ends_with(&format!(":v{version}")), "{apiserver}");
}

fn apply(dir: &Path) -> (kwin_testkit::kwin::Run, f64) {
    let t = Instant::now();
    let r = kwin!(dir, &["apply", "plan.toml", "--output", "json"]);
    (r, t.elapsed().as_secs_f64())
}

kwin_testkit::lab_test! {
#[test]
#[allow(clippy::print_stderr)]
fn flannel_upgrade_one_minor() {
    let c = Cluster::up(LAB_ID, 3);
    let plan = c.lab.plan_dir("");
    let dir = plan.path();

    // A cold apply builds the cluster at 1.31.4; every upgrade step is a no-op there (fresh
    // nodes are built at the version), and nothing waits on them but cluster-ready.
    write_plan(&c, dir, "lab-cluster.toml", FROM);
    let (cold, cold_s) = apply(dir);
    assert_eq!(cold.code, 0, "cold apply:\n{cold}");
    let ups = upgrade_tasks(&cold);
    assert_eq!(ups.len(), 6 + 2 * 6, "{ups:?}");
    for (t, status) in &ups {
        assert_eq!(status, "ok", "{t} was not a no-op on a cold apply:\n{cold}");
    }
    let (warm, warm_s) = apply(dir);
    assert_eq!(warm.code, 0, "{warm}");
    assert_eq!(warm.summary()["changed"], 0, "warm apply changed something:\n{warm}");
    eprintln!("cold apply {cold_s:.1}s, warm apply {warm_s:.1}s");

    // The upgrade: `kwin plan` shows it first, in order, and changes nothing.
    write_plan(&c, dir, "lab-cluster.toml", TO);
    let shown = kwin!(dir, &["plan", "plan.toml", "--output", "json"]);
    assert_eq!(shown.code, 0, "{shown}");
    let section = shown.upgrade_section();
    assert_eq!((section["from"].as_str(), section["to"].as_str()), (Some(FROM), Some(TO)));
    let rows: Vec<(u64, &str, &str)> = section["steps"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| {
                    (
                        r["step"].as_u64().unwrap_or(0),
                        r["node"].as_str().unwrap_or(""),
                        r["part"].as_str().unwrap_or(""),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        rows,
        [
            (1, "h1", "control plane"),
            (2, "h1", "kubelet"),
            (3, "h2", "worker"),
            (4, "h3", "worker"),
        ],
        "{section}"
    );
    let human = kwin!(dir, &["plan", "plan.toml"]);
    assert!(
        human.stdout.contains(&format!("upgrade: v{FROM} → v{TO}")),
        "{human}"
    );
    assert!(
        c.lab.ssh("h2", "dpkg-query -W -f '${Version}' kubelet").starts_with(FROM),
        "kwin plan changed a package"
    );
    let since = epoch();
    let (up, up_s) = apply(dir);
    assert_eq!(up.code, 0, "upgrade apply:\n{up}");
    eprintln!("upgrade apply {up_s:.1}s");
    for (t, want) in [
        ("h1/cp-kubeadm-upgrade", "changed"),
        ("h1/cp-upgrade-drain@h1", "changed"),
        ("h1/cp-kubelet-restart", "changed"),
        ("h1/cp-upgrade-uncordon@h1", "changed"),
        ("h1/upgrade-drain@h2", "changed"),
        ("h2/kubeadm-upgrade-node", "changed"),
        ("h2/kubelet-restart", "changed"),
        ("h1/upgrade-uncordon@h3", "changed"),
    ] {
        let (host, task) = t.split_once('/').expect("host/task");
        assert_eq!(up.task(host, task)["status"], want, "{t}:\n{up}");
    }
    // The install path left the joined nodes' packages to the upgrade steps.
    for h in ["h1", "h2", "h3"] {
        let why = up.task(h, "kubernetes-packages");
        assert_eq!(why["status"], "ok", "{h}: {why}");
    }

    // Every node at the version, as the kubelets, kubeadm and dpkg report it; kubeadm-config
    // and the apiserver's mirror pod at the version.
    c.assert_upgraded(&["h1", "h2", "h3"], TO);
    assert_control_plane_at(&c, TO);

    // kubeadm: `upgrade apply` on h1 before any `upgrade node`, nothing refused.
    c.assert_kubeadm_in_order(&["h1", "h2", "h3"], "h1", TO, since);

    // The timeline: never more than max_unavailable (1) node unschedulable, none left, h1's
    // kubelet at the version first.
    c.assert_rolled(since, 1, TO, &["h1", "h2", "h3"]);

    // Converged: the next apply changes nothing.
    let (again, again_s) = apply(dir);
    assert_eq!(again.code, 0, "{again}");
    assert_eq!(again.summary()["changed"], 0, "the apply after the upgrade changed something:\n{again}");
    eprintln!("apply after the upgrade {again_s:.1}s");
}
}

kwin_testkit::lab_test! {
#[test]
#[allow(clippy::print_stderr)]
fn calico_upgrade_one_minor() {
    let c = Cluster::up(CALICO_LAB_ID, 3);
    let plan = c.lab.plan_dir("");
    let dir = plan.path();
    write_plan(&c, dir, "lab-cluster-calico.toml", FROM);
    let (cold, cold_s) = apply(dir);
    assert_eq!(cold.code, 0, "cold apply:\n{cold}");
    eprintln!("calico: cold apply {cold_s:.1}s");
    // A pod on each worker, so each drain evicts one.
    c.workload(&["h2", "h3"]);

    write_plan(&c, dir, "lab-cluster-calico.toml", TO);
    let since = epoch();
    let (up, up_s) = apply(dir);
    assert_eq!(up.code, 0, "upgrade apply:\n{up}");
    eprintln!("calico: upgrade apply {up_s:.1}s");
    // Every node drained and uncordoned by kwin, none skipped or failed.
    let ups = upgrade_tasks(&up);
    for t in [
        "h1/cp-upgrade-drain@h1",
        "h1/cp-upgrade-uncordon@h1",
        "h1/upgrade-drain@h2",
        "h1/upgrade-uncordon@h2",
        "h1/upgrade-drain@h3",
        "h1/upgrade-uncordon@h3",
    ] {
        assert!(
            ups.iter().any(|(task, status)| task == t && status == "changed"),
            "{t} did not change: {ups:?}"
        );
    }
    assert!(
        ups.iter().all(|(_, status)| status == "ok" || status == "changed"),
        "{ups:?}"
    );
    assert_eq!(c.app_pods(), "", "a worker was not drained");

    // The stand-ins' record: every node at the version, uncordoned and unmarked, no skew;
    // kubeadm in order; control plane first, then the workers one at a time.
    c.assert_upgraded(&["h1", "h2", "h3"], TO);
    assert_control_plane_at(&c, TO);
    c.assert_kubeadm_in_order(&["h1", "h2", "h3"], "h1", TO, since);
    c.assert_rolled(since, 1, TO, &["h1", "h2", "h3"]);
    // Still a Calico cluster: the Installation's IP pool is untouched by the upgrade.
    let pool = c.kubectl(&[
        "get",
        "installation",
        "default",
        "-o",
        "jsonpath={.spec.calicoNetwork.ipPools[0].encapsulation}",
    ]);
    assert_eq!(pool, "VXLAN");

    let (again, again_s) = apply(dir);
    assert_eq!(again.code, 0, "{again}");
    assert_eq!(again.summary()["changed"], 0, "the apply after the upgrade changed something:\n{again}");
    eprintln!("calico: apply after the upgrade {again_s:.1}s");
}
}
