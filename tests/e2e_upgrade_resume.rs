//! End to end: an upgrade that is interrupted — by Ctrl-C, by a PodDisruptionBudget that
//! blocks a drain, by a worker lost in the middle of its upgrade window — leaves every node
//! either at its old or at its new version, never cordoned and forgotten; running `kwin
//! apply` again continues from where it stopped, and the apply after that changes nothing.
//!
//! The lab cluster of `examples/lab-cluster.toml` (flannel; h1 the control plane, h2 and h3
//! Linux workers; real sshd, apt/dpkg from the lab's signed repositories, kube-apiserver +
//! etcd, kubectl; the kubeadm, kubelet, systemctl and status stand-ins of
//! `lab/cluster-stand-in`), built at 1.31.4 by `kwin apply`, with a pod owned by a ReplicaSet
//! on each worker, so every worker's drain evicts something. kwin runs with `--output json`
//! and is read line by line as it runs (`Kwin::spawn`): the test acts at a given event.
//!
//! The oracle is what the cluster and the stand-ins record, not kwin's report: the Nodes
//! (kubelet version, `spec.unschedulable`, kwin's `kwin.dev/cordoned` mark) as the real API
//! server has them, the kubelet stand-in's `violations.log` (a kubelet newer than an
//! apiserver, an upgrade of a node that was not drained), the kubeadm stand-in's calls
//! (`upgrade apply` on h1 before any `upgrade node`, none refused), the status stand-in's
//! node timeline (one node unschedulable at a time, the order of upgrades), dpkg.
//!
//! - `ctrl_c_and_a_budget_blocked_drain_and_each_time_apply_again_converges` (lab 14):
//!   1.31.4 → 1.32.5, one Ctrl-C once h2's drain has finished: exit 130, h2 cordoned with
//!   kwin's mark, h3 untouched; `kwin apply` again goes on from h2's drain (a no-op now) and
//!   converges; then 0 changed. 1.32.5 → 1.33.1 with a pod on h2 whose budget allows no
//!   disruption: the apply fails on h2's drain naming the pod, takes its cordon off h2,
//!   starts no later wave, and leaves h1 upgraded; again with Ctrl-C twice while h2's drain
//!   waits on the pod (the second exits at once: the drain is cut off, h2 stays cordoned with
//!   kwin's mark): the next apply fails the same way and takes that cordon off too; without
//!   the budget the next apply converges; then 0 changed.
//! - `a_lost_worker_and_a_cut_off_upgrade_apply_and_each_time_apply_again_converges`
//!   (lab 15): 1.31.4 → 1.32.5 with h2's link cut (`lab/fault.sh cut`) once its drain has
//!   finished: the apply fails on h2 (its step times out: `step_timeout` is 40 s for that
//!   run), h3's wave does not start, h1 stays upgraded; healed, `kwin apply` converges; then
//!   0 changed. 1.32.5 → 1.33.1 with Ctrl-C twice inside h1's `kubeadm upgrade apply`, once
//!   the kube-apiserver manifest is replaced: kubeadm-config still records 1.32.5; `kwin
//!   plan` shows h1's control plane as still to do; the next apply runs the upgrade apply
//!   again, once, and converges; then 0 changed.
//!
//! Labs 14 and 15, one cluster build per test. Lab tests (root, the API tier's binaries from
//! `lab/apiserver/build.sh`): ignored by `cargo test`, failing when run without them.
#![allow(clippy::print_stderr)]

use kwin_testkit::cluster::{epoch, with_version, write_plan, Cluster, NodeRow};
use kwin_testkit::kwin;
use kwin_testkit::kwin::{Live, Run};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

const HOSTS: [&str; 3] = ["h1", "h2", "h3"];

/// `kwin apply --output json`, to the end.
fn apply(dir: &Path, what: &str) -> Run {
    let t = Instant::now();
    let r = kwin!(dir, &["apply", "plan.toml", "--output", "json"]);
    eprintln!(
        "{what}: exit {} in {:.1}s",
        r.code,
        t.elapsed().as_secs_f64()
    );
    r
}

/// `kwin apply --output json`, running: read as it goes.
fn spawn_apply(dir: &Path) -> Live {
    kwin!(dir)
        .args(["apply", "plan.toml", "--output", "json"])
        .spawn()
}

/// The plan of `examples/lab-cluster.toml` for this lab at `version`, with a short drain
/// timeout (a blocked drain fails in 10 s) and `step_timeout` seconds per step.
fn plan(c: &Cluster, version: &str, step_timeout: u32) -> String {
    let text = c.example("lab-cluster.toml").replace(
        "step_timeout = 150",
        &format!("step_timeout = {step_timeout}"),
    );
    assert!(text.contains(&format!("step_timeout = {step_timeout}")));
    with_version(&text, version) + "\n[upgrade]\ndrain_timeout = \"10s\"\n"
}

/// Is `e` the `task_finished` of `host`/`task` with `status`?
fn finished(e: &Value, host: &str, task: &str, status: &str) -> bool {
    e["event"] == "task_finished" && e["host"] == host && e["task"] == task && e["status"] == status
}

fn node<'a>(nodes: &'a [NodeRow], name: &str) -> &'a NodeRow {
    nodes
        .iter()
        .find(|n| n.name == name)
        .unwrap_or_else(|| panic!("no Node {name}: {nodes:?}"))
}

/// After a run that stopped: `node` runs kubelet `v<version>`, and is cordoned with kwin's
/// mark (`cordoned`) or schedulable and unmarked.
fn assert_node(nodes: &[NodeRow], name: &str, version: &str, cordoned: bool) {
    let n = node(nodes, name);
    assert_eq!(
        (n.kubelet.as_str(), n.cordoned, n.mark.is_some()),
        (format!("v{version}").as_str(), cordoned, cordoned),
        "{name}: {nodes:?}"
    );
    if let Some(mark) = &n.mark {
        assert!(mark.starts_with("upgrade 20"), "{name}: mark `{mark}`");
    }
}

/// dpkg's versions of kubeadm, kubelet and kubectl on `host`.
fn packages(c: &Cluster, host: &str) -> String {
    c.lab
        .ssh(
            host,
            "dpkg-query -W -f '${Version} ' kubeadm kubelet kubectl",
        )
        .trim()
        .to_string()
}

/// No kubelet stand-in saw a skew or an undrained upgrade.
fn assert_no_violations(c: &Cluster) {
    for h in HOSTS {
        assert_eq!(
            c.violations(h),
            "",
            "{h}: the kubelet stand-in saw a skew or an undrained upgrade"
        );
    }
}

/// The image of h1's kube-apiserver mirror pod (the kubelet stand-in posts it from the
/// manifest).
fn apiserver_image(c: &Cluster) -> String {
    c.kubectl(&[
        "-n",
        "kube-system",
        "get",
        "pod",
        "kube-apiserver-h1",
        "-o",
        "jsonpath={.spec.containers[0].image}",
    ])
}

/// `r` failed on h2's drain to 1.33.1, blocked by app/guarded's budget, and said `uncordoned`;
/// h1 is upgraded, h2 and h3 untouched (1.32.5, schedulable, unmarked), the pod still there.
fn assert_blocked(c: &Cluster, r: &Run, uncordoned: &str) {
    assert_eq!(r.code, 1, "{r}");
    assert_eq!(with_status(r, "failed"), ["h1/upgrade-drain@h2"], "{r}");
    let why = r.task("h1", "upgrade-drain@h2")["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        why.contains("app/guarded: its PodDisruptionBudget does not allow evicting it now"),
        "{why}"
    );
    assert!(why.contains(uncordoned), "`{uncordoned}` not in: {why}");
    // The waves after it do not start.
    for t in [
        "upgrade-uncordon@h2",
        "upgrade-drain@h3",
        "upgrade-uncordon@h3",
    ] {
        assert_eq!(r.task("h1", t)["status"], "skipped", "{t}:\n{r}");
    }
    for h in ["h2", "h3"] {
        assert_eq!(
            r.task(h, "kubeadm-upgrade-node")["status"],
            "skipped",
            "{r}"
        );
    }
    let nodes = c.nodes();
    assert_node(&nodes, "h1", "1.33.1", false);
    assert_node(&nodes, "h2", "1.32.5", false);
    assert_node(&nodes, "h3", "1.32.5", false);
    assert_eq!(c.app_pods(), "guarded");
    for h in ["h2", "h3"] {
        assert_eq!(packages(c, h), "1.32.5-1.1 1.32.5-1.1 1.32.5-1.1", "{h}");
    }
    assert_no_violations(c);
}

/// The tasks of `r` that finished with `status`, as `host/task`.
fn with_status(r: &Run, status: &str) -> Vec<String> {
    r.events()
        .iter()
        .filter(|e| e["event"] == "task_finished" && e["status"] == status)
        .map(|e| {
            format!(
                "{}/{}",
                e["host"].as_str().unwrap_or("?"),
                e["task"].as_str().unwrap_or("?")
            )
        })
        .collect()
}

/// A lab cluster `id` built at 1.31.4 with the `web` workload on h2 and h3, then an apply
/// to 1.32.5 (with `step_timeout` seconds per step) running until h1 has drained h2: the
/// cluster, the plan's directory, the running apply and when the upgrade started.
fn upgrading_with_h2_drained(
    id: &str,
    step_timeout: u32,
) -> (Cluster, tempfile::TempDir, Live, f64) {
    let c = Cluster::up(id, 3);
    let dir = c.lab.plan_dir("");
    write_plan(dir.path(), &plan(&c, "1.31.4", 150));
    let cold = apply(dir.path(), "cold apply at 1.31.4");
    assert_eq!(cold.code, 0, "{cold}");
    c.workload(&["h2", "h3"]);
    let since = epoch();
    write_plan(dir.path(), &plan(&c, "1.32.5", step_timeout));
    let mut live = spawn_apply(dir.path());
    live.wait_for(Duration::from_secs(180), "h2's drain", |e| {
        finished(e, "h1", "upgrade-drain@h2", "changed")
    });
    (c, dir, live, since)
}

kwin_testkit::lab_test! {
#[test]
fn ctrl_c_and_a_budget_blocked_drain_and_each_time_apply_again_converges() {
    let t0 = Instant::now();
    // 1.32.5, Ctrl-C once h2's drain has finished.
    let (c, dir_, live, since) = upgrading_with_h2_drained("14", 150);
    let dir = dir_.path();
    live.interrupt();
    let stopped = live.finish(Duration::from_secs(150));
    assert_eq!(stopped.code, 130, "{stopped}");
    assert_eq!(stopped.summary()["outcome"], "interrupted", "{stopped}");
    assert!(
        with_status(&stopped, "skipped")
            .iter()
            .any(|t| t == "h1/upgrade-uncordon@h2"),
        "nothing was left to resume:\n{stopped}"
    );
    // Each node old or new: h1 upgraded and uncordoned, h2 drained (its pod evicted) and
    // cordoned with kwin's mark at its old kubelet, h3 untouched.
    let nodes = c.nodes();
    assert_node(&nodes, "h1", "1.32.5", false);
    assert_node(&nodes, "h2", "1.31.4", true);
    assert_node(&nodes, "h3", "1.31.4", false);
    assert_eq!(c.app_pods(), "web-h3", "h2's pod was not evicted, or h3's was");
    assert_eq!(packages(&c, "h3"), "1.31.4-1.1 1.31.4-1.1 1.31.4-1.1");
    assert_no_violations(&c);
    let calls = c.kubeadm_calls(&HOSTS, since);
    assert!(
        calls.iter().all(|e| e["result"] == "ok" && e["node"] != "h3"),
        "{calls:?}"
    );

    // Apply again: it goes on from h2's drain (already drained: a no-op) and converges.
    let resumed = apply(dir, "apply after Ctrl-C");
    assert_eq!(resumed.code, 0, "{resumed}");
    for (host, task, status) in [
        ("h1", "cp-kubeadm-upgrade", "ok"),
        ("h1", "cp-kubelet-restart", "ok"),
        ("h1", "upgrade-drain@h2", "ok"),
        ("h1", "upgrade-uncordon@h2", "changed"),
        ("h2", "kubelet-restart", "changed"),
        ("h1", "upgrade-drain@h3", "changed"),
        ("h1", "upgrade-uncordon@h3", "changed"),
    ] {
        assert_eq!(resumed.task(host, task)["status"], status, "{host}/{task}:\n{resumed}");
    }
    c.assert_upgraded(&HOSTS, "1.32.5");
    let calls = c.assert_kubeadm_in_order(&HOSTS, "h1", "1.32.5", since);
    let applies = calls.iter().filter(|e| e["verb"] == "upgrade apply").count();
    assert_eq!(applies, 1, "`kubeadm upgrade apply` sent again: {calls:?}");
    c.assert_rolled(since, 1, "1.32.5", &HOSTS);
    assert_eq!(c.app_pods(), "", "a worker was not drained");
    let again = apply(dir, "apply after the resumed upgrade");
    assert_eq!(again.code, 0, "{again}");
    assert_eq!(again.summary()["changed"], 0, "{again}");

    // 1.33.1 with a pod on h2 that its PodDisruptionBudget does not let go: the apply
    // upgrades h1, fails on h2's drain naming the pod, takes its own cordon off h2 (nothing
    // on it changed), and starts no later wave.
    c.guarded_pod("h2");
    let since = epoch();
    write_plan(dir, &plan(&c, "1.33.1", 150));
    let blocked = apply(dir, "apply with the blocking budget");
    assert_blocked(&c, &blocked, "h2 is uncordoned again: nothing on it was changed");

    // Again, with Ctrl-C twice while h2's drain waits on the pod: the second exits at once,
    // the drain is cut off, h2 stays cordoned with kwin's mark.
    let mut live = spawn_apply(dir);
    live.wait_for(Duration::from_secs(180), "h2's drain", |e| {
        e["event"] == "task_planned" && e["task"] == "upgrade-drain@h2" && e["change"] == true
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while !node(&c.nodes(), "h2").cordoned {
        assert!(Instant::now() < deadline, "h2's drain never cordoned it");
        std::thread::sleep(Duration::from_millis(200));
    }
    live.interrupt();
    // Two signals, not one: a SIGINT still pending when the next is sent is delivered once,
    // and kwin's answer to the first leaves no trace to wait for.
    std::thread::sleep(Duration::from_millis(300));
    live.interrupt();
    let killed = live.finish(Duration::from_secs(30));
    assert_eq!(killed.code, 130, "{killed}");
    let nodes = c.nodes();
    assert_node(&nodes, "h1", "1.33.1", false);
    assert_node(&nodes, "h2", "1.32.5", true);
    assert_node(&nodes, "h3", "1.32.5", false);
    assert_no_violations(&c);
    // The next apply fails on that drain the same way, and takes the cordon the cut-off
    // run left off h2 too: never cordoned and forgotten.
    let blocked = apply(dir, "apply with the blocking budget after Ctrl-C twice");
    assert_blocked(
        &c,
        &blocked,
        "h2 is uncordoned again (kwin cordoned it in an earlier run)",
    );

    // Without the budget: the next apply converges, then nothing is left to change.
    c.kubectl(&["-n", "app", "delete", "pdb", "guarded"]);
    let resumed = apply(dir, "apply without the budget");
    assert_eq!(resumed.code, 0, "{resumed}");
    assert_eq!(resumed.task("h1", "cp-kubeadm-upgrade")["status"], "ok", "{resumed}");
    c.assert_upgraded(&HOSTS, "1.33.1");
    c.assert_kubeadm_in_order(&HOSTS, "h1", "1.33.1", since);
    c.assert_rolled(since, 1, "1.33.1", &HOSTS);
    assert_eq!(c.app_pods(), "", "h2 was not drained");
    let again = apply(dir, "apply after the upgrade");
    assert_eq!(again.code, 0, "{again}");
    assert_eq!(again.summary()["changed"], 0, "{again}");
    eprintln!("lab 14: {:.1}s", t0.elapsed().as_secs_f64());
}
}

kwin_testkit::lab_test! {
#[test]
fn a_lost_worker_and_a_cut_off_upgrade_apply_and_each_time_apply_again_converges() {
    let t0 = Instant::now();
    // 1.32.5; h2's link cut once its drain has finished. A lost host answers nothing: its
    // running step ends at `step_timeout` (40 s here).
    let (c, dir_, live, since) = upgrading_with_h2_drained("15", 40);
    let dir = dir_.path();
    c.lab.fault("cut", "h2");
    let cut = live.finish(Duration::from_secs(180));
    assert_eq!(cut.code, 1, "{cut}");
    // It fails for h2, named, and for what depends on it; nothing else failed.
    let failed = with_status(&cut, "failed");
    assert!(
        !failed.is_empty() && failed.iter().all(|t| t.starts_with("h2/")),
        "{failed:?}\n{cut}"
    );
    let error = cut.host("h2")["error"].as_str().unwrap_or_default().to_string();
    assert!(error.contains("timed out"), "h2's error: {error}\n{cut}");
    eprintln!("lost h2: failed {failed:?}: {error}");
    for (host, task) in [
        ("h1", "upgrade-uncordon@h2"),
        ("h1", "upgrade-drain@h3"),
        ("h3", "kubeadm-upgrade-node"),
        ("h1", "upgrade-uncordon@h3"),
    ] {
        let t = cut.task(host, task);
        assert_eq!(t["status"], "skipped", "{host}/{task}:\n{cut}");
        assert!(
            t["message"].as_str().is_some_and(|m| m.contains("h2")),
            "{host}/{task} does not name h2: {t}"
        );
    }
    // Each node old or new: h1 upgraded, h2 cordoned with kwin's mark, h3 untouched.
    let nodes = c.nodes();
    assert_node(&nodes, "h1", "1.32.5", false);
    assert_node(&nodes, "h2", "1.31.4", true);
    assert_node(&nodes, "h3", "1.31.4", false);
    assert_eq!(packages(&c, "h3"), "1.31.4-1.1 1.31.4-1.1 1.31.4-1.1");
    let calls = c.kubeadm_calls(&["h1", "h3"], since);
    assert!(
        calls.iter().all(|e| e["result"] == "ok" && e["node"] == "h1"),
        "{calls:?}"
    );

    // Healed: apply again converges, then changes nothing.
    c.lab.fault("heal", "h2");
    assert_no_violations(&c);
    write_plan(dir, &plan(&c, "1.32.5", 150));
    let resumed = apply(dir, "apply after healing h2");
    assert_eq!(resumed.code, 0, "{resumed}");
    assert_eq!(resumed.task("h1", "cp-kubeadm-upgrade")["status"], "ok", "{resumed}");
    assert_eq!(resumed.task("h1", "upgrade-drain@h2")["status"], "ok", "{resumed}");
    c.assert_upgraded(&HOSTS, "1.32.5");
    c.assert_kubeadm_in_order(&HOSTS, "h1", "1.32.5", since);
    c.assert_rolled(since, 1, "1.32.5", &HOSTS);
    assert_eq!(c.app_pods(), "", "a worker was not drained");
    let again = apply(dir, "apply after the upgrade");
    assert_eq!(again.code, 0, "{again}");
    assert_eq!(again.summary()["changed"], 0, "{again}");

    // 1.33.1, Ctrl-C twice while `kubeadm upgrade apply` runs on h1, once it has replaced
    // the kube-apiserver manifest: the second Ctrl-C exits at once, the upgrade apply is cut
    // off before it records the version in kubeadm-config (which it writes last).
    let since = epoch();
    write_plan(dir, &plan(&c, "1.33.1", 150));
    let mut live = spawn_apply(dir);
    live.wait_for(Duration::from_secs(180), "h1's kubeadm upgrade apply", |e| {
        e["event"] == "task_planned" && e["task"] == "cp-kubeadm-upgrade" && e["change"] == true
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while !apiserver_image(&c).ends_with(":v1.33.1") {
        assert!(Instant::now() < deadline, "the kube-apiserver manifest was never replaced");
        std::thread::sleep(Duration::from_millis(200));
    }
    live.interrupt();
    // Two signals, not one: a SIGINT still pending when the next is sent is delivered once,
    // and kwin's answer to the first leaves no trace to wait for.
    std::thread::sleep(Duration::from_millis(300));
    live.interrupt();
    let killed = live.finish(Duration::from_secs(30));
    assert_eq!(killed.code, 130, "{killed}");
    // What kwin started on h1 has ended: no kubeadm runs there any more.
    let deadline = Instant::now() + Duration::from_secs(60);
    let kubeadm = |cmd: &str| {
        cmd.split(' ')
            .take(2)
            .any(|w| matches!(w.rsplit('/').next(), Some("kubeadm" | "kubeadm-stand-in")))
    };
    while c.lab.processes("h1").iter().any(|(_, cmd)| kubeadm(cmd)) {
        assert!(Instant::now() < deadline, "kubeadm still runs on h1");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        (apiserver_image(&c).rsplit(':').next().map(str::to_string), c.cluster_version()),
        (Some("v1.33.1".to_string()), "v1.32.5".to_string()),
        "not an upgrade apply cut off half way (kube-apiserver at the target, kubeadm-config not)"
    );
    assert_node(&c.nodes(), "h1", "1.32.5", false);
    assert_no_violations(&c);
    // `kwin plan` shows h1's control plane as still to do, from what kubeadm recorded.
    let shown = kwin!(dir, &["plan", "plan.toml", "--output", "json"]);
    assert_eq!(shown.code, 0, "{shown}");
    let section = shown.upgrade_section();
    assert_eq!(
        (section["from"].as_str(), section["to"].as_str()),
        (Some("1.32.5"), Some("1.33.1")),
        "{section}"
    );
    let first = &section["steps"][0];
    assert_eq!(
        (first["node"].as_str(), first["part"].as_str()),
        (Some("h1"), Some("control plane")),
        "the unfinished control plane is not in the upgrade section: {section}"
    );
    assert!(
        first["now"].as_str().is_some_and(|n| n.contains("kubeadm-config v1.32.5")),
        "{section}"
    );
    // Apply again: the upgrade apply runs again (it did not finish), once; everything
    // converges; then nothing is left to change.
    let resumed = apply(dir, "apply after the cut-off upgrade apply");
    assert_eq!(resumed.code, 0, "{resumed}");
    assert_eq!(resumed.task("h1", "cp-kubeadm-upgrade")["status"], "changed", "{resumed}");
    c.assert_upgraded(&HOSTS, "1.33.1");
    assert_eq!(c.cluster_version(), "v1.33.1");
    let calls = c.assert_kubeadm_in_order(&HOSTS, "h1", "1.33.1", since);
    let applies: Vec<&Value> = calls.iter().filter(|e| e["verb"] == "upgrade apply").collect();
    assert_eq!(applies.len(), 1, "{applies:?}");
    c.assert_rolled(since, 1, "1.33.1", &HOSTS);
    let again = apply(dir, "apply after the upgrade");
    assert_eq!(again.code, 0, "{again}");
    assert_eq!(again.summary()["changed"], 0, "{again}");
    eprintln!("lab 15: {:.1}s", t0.elapsed().as_secs_f64());
}
}
