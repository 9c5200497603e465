//! The Kubernetes modules against a real API server (lab/apiserver: kube-apiserver, etcd and
//! kubectl of the newest Kubernetes the lab builds, LAB_K8S_NEWEST of lab/build/versions.sh):
//! the recipes' own params (examples/*.toml expanded with the built-in recipes, the CNI
//! manifest taken from `cni.manifest_file`), each module's fact and step scripts run through
//! `LocalTransport` as the engine runs them, then the objects read back with kubectl.
//!
//! A lab test (root, the API tier's programs built by `lab/apiserver/build.sh`; the tier is
//! the test kit's): ignored by `cargo test`, failing when run without them.

mod kube_common;

use kube_common::{expand, fixture, plan_text, task};
use kwin_engine::fact::{batch_script, new_nonce, parse_batch};
use kwin_engine::module::Registry;
use kwin_engine::module::{Change, Ctx, Inputs, Module, ModuleError, Plan, Step};
use kwin_engine::task::Task;
use kwin_engine::transport::local::LocalTransport;
use kwin_engine::transport::{Output, Shell, Transport};
use kwin_modules::Builtin;
use kwin_testkit::api::Tier;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

// ------------------------------------------------------------------------- the tier

// ---------------------------------------------------------------- the host (local)

/// The control plane: this machine, reached through kwin's local transport; kubeadm from the
/// tier's cache first on PATH.
struct Host {
    rt: tokio::runtime::Runtime,
    t: LocalTransport,
    prefix: String,
}

impl Host {
    fn new(tier: &Tier) -> Host {
        let bin = Path::new(&tier.var("KUBEADM_BIN"))
            .parent()
            .expect("bin dir")
            .display()
            .to_string();
        Host {
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime"),
            t: LocalTransport { become_root: false },
            prefix: format!("PATH={bin}:$PATH; export PATH\n"),
        }
    }

    fn run(&self, script: &str) -> Output {
        self.rt
            .block_on(self.t.run(
                &format!("{}{script}", self.prefix),
                Duration::from_secs(180),
            ))
            .expect("local transport")
    }

    /// Probe the module's facts in one batch, as the engine does, and plan.
    fn plan(&self, m: &dyn Module, inputs: &Inputs) -> Result<Plan, ModuleError> {
        let queries = m.facts(Shell::Posix);
        let nonce = new_nonce();
        let script = batch_script(Shell::Posix, &queries, &nonce);
        let out = self.run(&script);
        let facts = parse_batch(&queries, &out, &nonce).expect("parse probe");
        let nonce = kwin_engine::module::new_plan_nonce();
        let ctx = Ctx {
            shell: Shell::Posix,
            host: "cp1",
            inputs,
            nonce: &nonce,
        };
        m.plan(&facts, &ctx)
    }

    /// Run a change's steps, each in its own subshell as the engine does.
    fn exec(&self, c: &Change) -> Result<(), String> {
        for s in &c.steps {
            match s {
                Step::Run(_) | Step::Inline(_) => {
                    // A run step in its own subshell, an inline one as the function it is.
                    let out = match s {
                        Step::Run(script) => self.run(&format!("(\n{script}\n)")),
                        _ => self.run(&s.standalone().unwrap_or_default()),
                    };
                    if !out.success() {
                        return Err(format!(
                            "exit {}: {}{}",
                            out.exit,
                            String::from_utf8_lossy(&out.stdout),
                            String::from_utf8_lossy(&out.stderr)
                        ));
                    }
                }
                Step::Put {
                    path,
                    content,
                    mode,
                } => self
                    .rt
                    .block_on(self.t.put(path, content, *mode))
                    .map_err(|e| e.to_string())?,
                Step::Reboot(_) => return Err("unexpected reboot".into()),
            }
        }
        Ok(())
    }

    /// Plan, carry out the change, plan again: the second plan must be NoOp.
    fn converge(&self, what: &str, m: &dyn Module) -> Change {
        let c = match self.plan(m, &Inputs::new()) {
            Ok(Plan::Change(c)) => c,
            other => panic!("{what}: expected a change, got {other:?}"),
        };
        self.exec(&c)
            .unwrap_or_else(|e| panic!("{what}: step failed: {e}"));
        match self.plan(m, &Inputs::new()) {
            Ok(Plan::NoOp { .. }) => c,
            other => panic!("{what}: did not converge: {other:?}"),
        }
    }
}

// ------------------------------------------------------------------------ helpers

fn build(module: &str, params: &Value) -> Box<dyn Module> {
    Builtin
        .build(module, Shell::Posix, params)
        .unwrap_or_else(|e| panic!("{module}: {e}"))
}

/// A recipe task's module, pointed at the tier (and a private manifest cache).
fn module_of(t: &Task, tier: &Tier, cache: &Path) -> Box<dyn Module> {
    let mut p = (*t.params).clone();
    p["kubeconfig"] = json!(tier.kubeconfig());
    if t.module == "kube_apply" {
        p["cache_dir"] = json!(cache.display().to_string());
    }
    build(&t.module, &p)
}

/// A Windows DaemonSet manifest, applied as rendered: `windowsOptions.hostProcess` (GA in
/// Kubernetes 1.26) is part of the API server's schema, so strict field validation takes it.
fn windows_module(t: &Task, tier: &Tier, cache: &Path) -> Box<dyn Module> {
    let manifest = t.params["manifest"].as_str().expect("manifest");
    assert!(manifest.contains("hostProcess: true"), "{}", t.id);
    module_of(t, tier, cache)
}

/// A recipe's `command` task pointed at the tier: its scripts name the admin kubeconfig.
fn command_on_tier(t: &Task, tier: &Tier) -> Box<dyn Module> {
    assert_eq!(t.module, "command", "{}", t.id);
    let mut p = (*t.params).clone();
    for key in ["onlyif", "unless", "run"] {
        if let Some(text) = p[key].as_str() {
            let text = text.replace(
                "/etc/kubernetes/admin.conf",
                &tier.kubeconfig().display().to_string(),
            );
            p[key] = json!(text);
        }
    }
    build("command", &p)
}

fn kubectl(tier: &Tier, args: &[&str]) -> String {
    let out = Command::new(tier.kubectl_bin())
        .arg("--kubeconfig")
        .arg(tier.kubeconfig())
        .args(args)
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn get_json(tier: &Tier, args: &[&str]) -> Value {
    let mut a = vec!["get"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&kubectl(tier, &a)).expect("kubectl json")
}

fn rv(tier: &Tier, args: &[&str]) -> String {
    get_json(tier, args)["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .to_string()
}

/// JSON inside a ConfigMap value.
fn cm_json(tier: &Tier, ns: &str, name: &str, key: &str) -> Value {
    let cm = get_json(tier, &["configmap", "-n", ns, name]);
    let text = cm["data"][key]
        .as_str()
        .unwrap_or_else(|| panic!("{ns}/{name} has no {key}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{ns}/{name} {key}: {e}: {text}"))
}

/// A second plan is NoOp, and re-running the apply step writes nothing: the objects keep
/// their resourceVersion.
fn assert_no_write(
    host: &Host,
    tier: &Tier,
    what: &str,
    m: &dyn Module,
    c: &Change,
    objects: &[&[&str]],
) {
    let before: Vec<String> = objects.iter().map(|o| rv(tier, o)).collect();
    assert!(
        host.plan(m, &Inputs::new()).is_ok_and(|p| p.is_noop()),
        "{what}: second plan is not a no-op"
    );
    host.exec(c)
        .unwrap_or_else(|e| panic!("{what}: re-apply failed: {e}"));
    let after: Vec<String> = objects.iter().map(|o| rv(tier, o)).collect();
    assert_eq!(before, after, "{what}: a repeated apply wrote objects");
}

/// The flannel example (vxlan, Windows workers), or for host-gw the Linux-only host-gw plan
/// (validation refuses host-gw with Windows nodes).
fn flannel_plan(backend: &str) -> Vec<Task> {
    let cni = format!(
        "[cni]\nmanifest_file = \"{}\"\n",
        fixture("kube-flannel.yml").display()
    );
    let rel = if backend == "host-gw" {
        "tests/plans/good/flannel-host-gw-linux.toml"
    } else {
        "examples/flannel.toml"
    };
    let text = plan_text(rel, &[("[cni]\n", &cni)]);
    expand(rel, &text)
}

// --------------------------------------------------------------------------- tests

kwin_testkit::lab_test! {
#[test]
fn api_tier() {
    let tier = Tier::start();
    // kubectl's discovery cache is per API server address: another tier that used this port
    // before (with the Calico CRDs) must not tell kubectl that kinds are served here.
    let kube_cache = tempfile::tempdir().expect("kubectl cache dir");
    std::env::set_var("KUBECACHEDIR", kube_cache.path());
    let host = Host::new(&tier);
    let cache = tempfile::tempdir().expect("cache dir");
    upgrade_facts(&host, &tier);
    drain_and_uncordon(&host, &tier);
    runtime_drain(&host, &tier);
    old_flannel_windows_objects(&host, &tier, cache.path());
    flannel(&host, &tier, cache.path());
    status_churn(&host, &tier, cache.path());
    runtime_classes(&host, &tier, cache.path());
    calico(&host, &tier, cache.path());
    calico_v3(&host, &tier);
    waits(&host, &tier, cache.path());
    let values = join_data(&host, &tier);
    join(&host, &tier, &values);
    init(&host, &tier);
}
}

/// The upgrade gate's one script (`kube::upgrade::cluster`) against the real API server and
/// kubectl: kube-apiserver mirror pods (a pod bound to its node, as the kubelet posts them),
/// kubeadm-config (uploaded by the tier's real kubeadm), Nodes with kubelet versions, Ready, a cordon and kwin's mark; then the skew
/// policy on what was read.
fn upgrade_facts(host: &Host, tier: &Tier) {
    use kwin_modules::kube::upgrade::{cluster, skew};
    let parse = |host: &Host| {
        let out = host.run(&cluster::script(&tier.kubeconfig().display().to_string()));
        assert_eq!(out.exit, 0, "{}", String::from_utf8_lossy(&out.stderr));
        cluster::parse(&String::from_utf8_lossy(&out.stdout)).expect("parse cluster facts")
    };
    let objects = format!(
        r#"apiVersion: v1
kind: Node
metadata:
  name: up-cp1
---
apiVersion: v1
kind: Node
metadata:
  name: up-w1
  annotations:
    {mark}: "upgrade 20261125-031500 2026-11-25T03:15:00Z"
spec:
  unschedulable: true
---
apiVersion: v1
kind: Pod
metadata:
  name: kube-apiserver-up-cp1
  namespace: kube-system
  labels: {{component: kube-apiserver, tier: control-plane}}
spec:
  nodeName: up-cp1
  containers:
  - name: kube-apiserver
    image: registry.k8s.io/kube-apiserver:v1.31.4
"#,
        mark = cluster::CORDON_MARK
    );
    let file = write_temp(&objects);
    kubectl(tier, &["create", "-f", &file]);
    for (node, kubelet, ready) in [("up-cp1", "v1.31.4", "True"), ("up-w1", "v1.30.9", "False")] {
        set_status(
            tier,
            &["node", node],
            json!({
                "nodeInfo": {"kubeletVersion": kubelet, "containerRuntimeVersion": "containerd://1.7.24"},
                "conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady",
                    "lastHeartbeatTime": "2026-11-25T03:15:00Z",
                    "lastTransitionTime": "2026-11-25T03:15:00Z"}]
            }),
        );
    }
    let state = parse(host);
    let cluster::ClusterState::Running(f) = &state else {
        panic!("not read as a running cluster: {state:?}")
    };
    let v = |s: &str| semver::Version::parse(s).expect("version");
    assert_eq!(f.apiservers.get("up-cp1"), Some(&v("1.31.4")), "{f:?}");
    // kubeadm-config is the one the tier's real kubeadm uploaded (`upload-config`).
    let config = kubectl(
        tier,
        &[
            "-n",
            "kube-system",
            "get",
            "cm",
            "kubeadm-config",
            "-o",
            "jsonpath={.data.ClusterConfiguration}",
        ],
    );
    let uploaded = config
        .lines()
        .find_map(|l| l.strip_prefix("kubernetesVersion: v"))
        .expect("kubeadm wrote kubernetesVersion");
    assert_eq!(f.cluster_version, Some(v(uploaded.trim())), "{config}");
    let w1 = &f.nodes["up-w1"];
    assert_eq!(w1.kubelet, Some(v("1.30.9")));
    assert_eq!(w1.runtime.as_deref(), Some("containerd://1.7.24"));
    assert!(
        w1.unschedulable && !w1.ready && w1.kwin_mark.is_some(),
        "{w1:?}"
    );
    assert!(f.nodes["up-cp1"].ready);
    let mut plan = [("up-cp1", true), ("up-w1", false)].map(|(n, cp)| skew::PlanNode {
        name: n.into(),
        control_plane: cp,
        containerd: None,
    });
    let Ok(skew::Verdict::Upgrade(u)) = skew::check(&v("1.32.5"), &state, &plan) else {
        panic!("one minor up is an upgrade")
    };
    assert_eq!(u.control_planes, ["up-cp1"]);
    assert_eq!(u.resume.len(), 1);
    let refused = skew::check(&v("1.33.1"), &state, &plan).expect_err("two minors");
    assert_eq!(refused[0].code, skew::Code::SkipMinor);
    // A pinned containerd the worker does not run: a row of its own.
    plan[1].containerd = Some("1.7.27".into());
    let Ok(skew::Verdict::Upgrade(u)) = skew::check(&v("1.31.4"), &state, &plan) else {
        panic!("a new containerd is an upgrade")
    };
    assert_eq!(u.runtimes.len(), 1, "{:?}", u.runtimes);
    assert_eq!(u.runtimes[0].1, "containerd://1.7.24");
    kubectl(tier, &["delete", "-f", &file, "--wait=false"]);
    // The pod has no kubelet to finish its deletion: remove it at once.
    kubectl(
        tier,
        &[
            "-n",
            "kube-system",
            "delete",
            "pod",
            "kube-apiserver-up-cp1",
            "--grace-period=0",
            "--force",
            "--ignore-not-found",
        ],
    );
    // An admin kubeconfig that does not exist: a new cluster.
    let out = host.run(&cluster::script("/nonexistent/admin.conf"));
    assert_eq!(
        cluster::parse(&String::from_utf8_lossy(&out.stdout)),
        Ok(cluster::ClusterState::New)
    );
}

/// `kube_drain` and `kube_uncordon` with the real kubectl against the real API server: the
/// cordon and kwin's mark set in one patch and taken off in one; a drain blocked by a pod
/// without a controller and by a PodDisruptionBudget names the pods and takes its cordon
/// back; an administrator's cordon is never lifted; uncordon waits for the kubelet version.
fn drain_and_uncordon(host: &Host, tier: &Tier) {
    let kc = tier.kubeconfig().display().to_string();
    let mark = kwin_modules::kube::node::CORDON_MARK;
    let nodes = "apiVersion: v1\nkind: Node\nmetadata:\n  name: dr-w1\n---\napiVersion: v1\nkind: Node\nmetadata:\n  name: dr-w2\n---\napiVersion: v1\nkind: Node\nmetadata:\n  name: dr-w3\n";
    let file = write_temp(nodes);
    kubectl(tier, &["create", "-f", &file]);
    let status = |node: &str, kubelet: &str, heartbeat: &str| {
        set_status(
            tier,
            &["node", node],
            json!({
                "nodeInfo": {"kubeletVersion": kubelet},
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                    "lastHeartbeatTime": heartbeat,
                    "lastTransitionTime": "2026-11-25T03:15:00Z"}]
            }),
        )
    };
    for n in ["dr-w1", "dr-w2", "dr-w3"] {
        status(n, "v1.31.4", "2026-11-25T03:15:00Z");
    }
    let drain = |node: &str, timeout: &str| {
        build(
            "kube_drain",
            &json!({"node": node, "until": {"kubelet": "1.32.5"}, "timeout": timeout, "kubeconfig": kc}),
        )
    };
    let uncordon = |node: &str, timeout: &str| {
        build(
            "kube_uncordon",
            &json!({"node": node, "until": {"kubelet": "1.32.5"}, "timeout": timeout, "kubeconfig": kc}),
        )
    };
    let cordon_of = |node: &str| {
        let n = get_json(tier, &["node", node]);
        (
            n["spec"]["unschedulable"].as_bool().unwrap_or(false),
            n["metadata"]["annotations"][mark]
                .as_str()
                .map(str::to_string),
        )
    };
    let plan_of = |m: &dyn Module| host.plan(m, &Inputs::new()).expect("plan");

    // A node with nothing on it: cordoned with kwin's mark, drained.
    let m = drain("dr-w1", "10s");
    let Plan::Change(c) = plan_of(m.as_ref()) else {
        panic!("dr-w1 runs v1.31.4: a drain")
    };
    host.exec(&c).expect("drain of an empty node");
    let (cordoned, marked) = cordon_of("dr-w1");
    assert!(cordoned, "dr-w1 not cordoned");
    assert!(
        marked
            .as_deref()
            .is_some_and(|m| m.starts_with("upgrade 20")),
        "{marked:?}"
    );

    // Uncordon waits for the kubelet version: at v1.31.4 it times out naming it.
    let u = uncordon("dr-w1", "2s");
    let Plan::Change(c) = plan_of(u.as_ref()) else {
        panic!("a marked node is uncordoned")
    };
    let err = host.exec(&c).expect_err("kubelet still v1.31.4");
    assert!(
        err.contains("it reports kubelet v1.31.4, Ready=True"),
        "{err}"
    );
    assert!(cordon_of("dr-w1").0, "uncordoned too early");
    // At the version and Ready, but in a status from before kwin's cordon (a kubelet that has
    // not posted since, a node that went down): not uncordoned, and the timeout says why.
    status("dr-w1", "v1.32.5", &mark_time(tier, "dr-w1", -1));
    let err = host
        .exec(&c)
        .expect_err("the Ready is older than the cordon");
    assert!(
        err.contains("it reports kubelet v1.32.5, Ready=True"),
        "{err}"
    );
    assert!(err.contains("older than kwin's cordon"), "{err}");
    assert!(cordon_of("dr-w1").0, "uncordoned on a stale Ready");
    // The kubelet posts again after the cordon: uncordoned.
    status("dr-w1", "v1.32.5", &mark_time(tier, "dr-w1", 1));
    host.converge("uncordon dr-w1", u.as_ref());
    assert_eq!(cordon_of("dr-w1"), (false, None));
    // At the version, the drain is a no-op.
    assert!(plan_of(drain("dr-w1", "10s").as_ref()).is_noop());

    // A pod without a controller blocks the drain: named, the cordon taken back.
    let bare = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bare\n  namespace: default\nspec:\n  nodeName: dr-w2\n  containers:\n  - name: c\n    image: registry.k8s.io/pause:3.10\n";
    kubectl(tier, &["create", "-f", &write_temp(bare)]);
    let Plan::Change(c) = plan_of(drain("dr-w2", "5s").as_ref()) else {
        panic!("dr-w2: a drain")
    };
    assert!(
        c.diff
            .as_deref()
            .is_some_and(|d| d.contains("- evict default/bare (no controller)")),
        "{:?}",
        c.diff
    );
    let err = host.exec(&c).expect_err("a bare pod blocks the drain");
    assert!(err.contains("drain of dr-w2 stopped"), "{err}");
    assert!(err.contains("default/bare"), "{err}");
    assert!(err.contains("force = true"), "{err}");
    assert!(err.contains("dr-w2 is uncordoned again"), "{err}");
    assert_eq!(cordon_of("dr-w2"), (false, None));

    // A PodDisruptionBudget that allows no disruption (no controller computes its status
    // here, so the eviction API refuses every eviction) blocks it until the timeout.
    let guarded = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: db-0\n  namespace: default\n  labels: {app: db}\n  ownerReferences:\n  - {apiVersion: apps/v1, kind: StatefulSet, name: db, uid: 8d1f5b56-0000-4000-8000-000000000001, controller: true}\nspec:\n  nodeName: dr-w3\n  containers:\n  - name: c\n    image: registry.k8s.io/pause:3.10\n---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: db\n  namespace: default\nspec:\n  minAvailable: 1\n  selector:\n    matchLabels: {app: db}\n";
    kubectl(tier, &["create", "-f", &write_temp(guarded)]);
    // Running and Ready, as a kubelet would report it: the eviction API lets Pending pods
    // go regardless of budgets (`canIgnorePDB`).
    set_status(
        tier,
        &["-n", "default", "pod", "db-0"],
        json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}),
    );
    // An administrator's cordon first: drained, never uncordoned by kwin.
    kubectl(tier, &["cordon", "dr-w3"]);
    let Plan::Change(c) = plan_of(drain("dr-w3", "4s").as_ref()) else {
        panic!("dr-w3: a drain")
    };
    assert!(
        c.diff
            .as_deref()
            .is_some_and(|d| d.contains("cordoned by someone else")),
        "{:?}",
        c.diff
    );
    let err = host.exec(&c).expect_err("the PDB blocks the drain");
    assert!(
        err.contains("default/db-0: its PodDisruptionBudget does not allow evicting it now"),
        "{err}"
    );
    assert!(!err.contains("uncordoned again"), "{err}");
    assert_eq!(
        cordon_of("dr-w3"),
        (true, None),
        "the administrator's cordon stays"
    );
    assert!(plan_of(uncordon("dr-w3", "5s").as_ref()).is_noop());

    // kwin's own cordon, left by an earlier run that was killed during its drain (the mark
    // is on the node): the drain fails the same way, and that cordon is taken back too —
    // the node still runs its old kubelet, so nothing of its upgrade happened, and the next
    // apply drains it again first. Never cordoned and forgotten.
    kubectl(
        tier,
        &[
            "patch",
            "node",
            "dr-w3",
            "--type=merge",
            "-p",
            &format!(
                r#"{{"metadata":{{"annotations":{{"{mark}":"upgrade 2026-11-25T03:15:00Z"}}}}}}"#
            ),
        ],
    );
    let Plan::Change(c) = plan_of(drain("dr-w3", "4s").as_ref()) else {
        panic!("dr-w3: a drain")
    };
    assert!(
        c.diff
            .as_deref()
            .is_some_and(|d| d.contains("cordoned by kwin earlier")),
        "{:?}",
        c.diff
    );
    let err = host.exec(&c).expect_err("the PDB blocks the drain again");
    assert!(
        err.contains("default/db-0: its PodDisruptionBudget does not allow evicting it now"),
        "{err}"
    );
    assert!(err.contains("dr-w3 is uncordoned again"), "{err}");
    assert_eq!(
        cordon_of("dr-w3"),
        (false, None),
        "kwin's cordon from the earlier run stays on after the failed drain"
    );

    for args in [
        [
            "-n",
            "default",
            "delete",
            "pod",
            "bare",
            "db-0",
            "--grace-period=0",
            "--force",
        ]
        .as_slice(),
        &["-n", "default", "delete", "pdb", "db"],
        &["delete", "-f", &file],
    ] {
        kubectl(tier, args);
    }
}

/// `kube_drain` and `kube_uncordon` with `until.containerd`: a node at the kubelet version
/// whose runtime is not at containerd's is drained; the uncordon waits until the Node
/// reports `containerd://<version>` (what the kubelet writes from the runtime's CRI
/// `Version`); then the drain is a no-op. A drain another task asks for (`only_if`) follows
/// its input.
fn runtime_drain(host: &Host, tier: &Tier) {
    let kc = tier.kubeconfig().display().to_string();
    let file = write_temp("apiVersion: v1\nkind: Node\nmetadata:\n  name: rt-w1\n");
    kubectl(tier, &["create", "-f", &file]);
    let status = |runtime: &str, heartbeat: &str| {
        set_status(
            tier,
            &["node", "rt-w1"],
            json!({
                "nodeInfo": {"kubeletVersion": "v1.32.5", "containerRuntimeVersion": runtime},
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                    "lastHeartbeatTime": heartbeat,
                    "lastTransitionTime": "2026-11-25T03:15:00Z"}]
            }),
        )
    };
    status("containerd://1.7.24", "2026-11-25T03:15:00Z");
    let until = json!({"kubelet": "1.32.5", "containerd": "v1.7.27"});
    let drain = build(
        "kube_drain",
        &json!({"node": "rt-w1", "until": until, "timeout": "10s", "kubeconfig": kc}),
    );
    let uncordon = build(
        "kube_uncordon",
        &json!({"node": "rt-w1", "until": until, "timeout": "2s", "kubeconfig": kc}),
    );
    let plan_of = |m: &dyn Module, inputs: &Inputs| host.plan(m, inputs).expect("plan");
    let Plan::Change(c) = plan_of(drain.as_ref(), &Inputs::new()) else {
        panic!("rt-w1 runs containerd 1.7.24: a drain")
    };
    assert!(
        c.reason.contains("containerd 1.7.24, not 1.7.27"),
        "{}",
        c.reason
    );
    host.exec(&c).expect("drain of rt-w1");
    let Plan::Change(c) = plan_of(uncordon.as_ref(), &Inputs::new()) else {
        panic!("rt-w1 is marked: an uncordon")
    };
    let err = host.exec(&c).expect_err("the runtime is still 1.7.24");
    assert!(
        err.contains("it reports kubelet v1.32.5, Ready=True, runtime containerd://1.7.24"),
        "{err}"
    );
    assert_eq!(
        get_json(tier, &["node", "rt-w1"])["spec"]["unschedulable"],
        json!(true),
        "uncordoned before the runtime is at its version"
    );
    status("containerd://1.7.27", &mark_time(tier, "rt-w1", 1));
    host.converge("uncordon rt-w1", uncordon.as_ref());
    assert!(plan_of(drain.as_ref(), &Inputs::new()).is_noop());

    // Asked for by another task's output: drained while it says `true`, not otherwise.
    let asked = build(
        "kube_drain",
        &json!({"node": "rt-w1", "only_if": "reboot_pending", "reason": "reboot", "timeout": "10s", "kubeconfig": kc}),
    );
    let with = |v: &str| {
        let mut i = Inputs::new();
        i.insert(
            "reboot_pending",
            kwin_engine::secret::Secret::new(v.to_string()),
        );
        i
    };
    assert!(matches!(
        host.plan(asked.as_ref(), &Inputs::new()),
        Err(ModuleError::InputPending(n)) if n == "reboot_pending"
    ));
    assert!(plan_of(asked.as_ref(), &with("false")).is_noop());
    let Plan::Change(c) = plan_of(asked.as_ref(), &with("true")) else {
        panic!("a drain asked for")
    };
    host.exec(&c).expect("drain for a reboot");
    let mark = get_json(tier, &["node", "rt-w1"])["metadata"]["annotations"]
        [kwin_modules::kube::node::CORDON_MARK]
        .as_str()
        .map(str::to_string);
    assert!(
        mark.as_deref().is_some_and(|m| m.starts_with("reboot 20")),
        "{mark:?}"
    );
    assert!(plan_of(asked.as_ref(), &with("true")).is_noop(), "drained");
    // The node restarts (recipe windows-reboot): until its kubelet posts again, the Node
    // shows the Ready it posted before it went down, at the versions. That is not proof the
    // node came back: no uncordon.
    let Plan::Change(c) = plan_of(uncordon.as_ref(), &Inputs::new()) else {
        panic!("rt-w1 is marked: an uncordon")
    };
    assert!(
        c.reason.contains("in a status posted after 20"),
        "{}",
        c.reason
    );
    let err = host
        .exec(&c)
        .expect_err("the Ready from before the reboot is stale");
    assert!(err.contains("older than kwin's cordon"), "{err}");
    assert_eq!(
        get_json(tier, &["node", "rt-w1"])["spec"]["unschedulable"],
        json!(true),
        "uncordoned on the Ready from before the reboot"
    );
    // Back up: the kubelet posts a status after the cordon.
    status("containerd://1.7.27", &mark_time(tier, "rt-w1", 1));
    host.converge("uncordon rt-w1 after the reboot", uncordon.as_ref());
    kubectl(tier, &["delete", "-f", &file]);
}

/// A cluster an earlier kwin built keeps the flannel Windows objects its `flannel-windows`
/// step applied in kube-system (plans/cni-flannel.toml from e9c6f79 to 733e649: the
/// sigwindowstools HostProcess DaemonSet, its ConfigMaps, ServiceAccount and
/// ClusterRoleBinding, and kube-proxy-windows with the sigwindowstools image). The recipe's
/// `flannel-windows-old` step deletes exactly those kwin applied (its field manager) and
/// leaves an object of the same name someone else made, and the ServiceAccount (which had
/// only a name: server-side apply records no manager for it); the current kube-proxy-windows
/// takes the old one over in place (same name; server-side apply drops the fields kwin no
/// longer applies). A second plan is a no-op.
fn old_flannel_windows_objects(host: &Host, tier: &Tier, cache: &Path) {
    let tasks = flannel_plan("vxlan");
    // What the old step applied (object identities as it rendered them; bodies trimmed).
    let old = r#"apiVersion: v1
kind: ServiceAccount
metadata:
  name: flannel
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: flannel-windows
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: flannel}
subjects: [{kind: ServiceAccount, name: flannel, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: kube-flannel-windows-cfg
  namespace: kube-system
  labels: {app: flannel, tier: node}
data:
  cni-conf-containerd.json: '{"name": "flannel.4096"}'
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: kube-flannel-ds-windows-amd64
  namespace: kube-system
  labels: {app: flannel-windows, tier: node}
spec:
  selector:
    matchLabels: {app: flannel-windows}
  template:
    metadata:
      labels: {app: flannel-windows, tier: node}
    spec:
      nodeSelector: {kubernetes.io/os: windows, kubernetes.io/arch: amd64}
      hostNetwork: true
      serviceAccountName: flannel
      tolerations: [{operator: Exists}]
      containers:
      - name: kube-flannel
        image: sigwindowstools/flannel:v0.21.5-hostprocess
        volumeMounts: [{name: flannel-cfg, mountPath: /etc/kube-flannel/}]
      volumes: [{name: flannel-cfg, configMap: {name: kube-flannel-cfg}}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: kube-proxy-windows
  namespace: kube-system
  labels: {k8s-app: kube-proxy-windows}
spec:
  selector:
    matchLabels: {k8s-app: kube-proxy-windows}
  updateStrategy: {type: RollingUpdate}
  template:
    metadata:
      labels: {k8s-app: kube-proxy-windows}
    spec:
      nodeSelector: {kubernetes.io/os: windows}
      hostNetwork: true
      serviceAccountName: kube-proxy
      tolerations: [{operator: Exists}]
      containers:
      - name: kube-proxy
        image: sigwindowstools/kube-proxy:v1.31.4-flannel-hostprocess
        env: [{name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}]
        volumeMounts: [{name: kube-proxy, mountPath: /var/lib/kube-proxy}]
      volumes: [{name: kube-proxy, configMap: {name: kube-proxy}}]
"#;
    let kc = tier.kubeconfig().display().to_string();
    host.converge(
        "the old kwin's flannel Windows objects",
        build(
            "kube_apply",
            &json!({"manifest": old, "kubeconfig": kc, "cache_dir": cache.display().to_string()}),
        )
        .as_ref(),
    );
    // A ConfigMap of an old name that kwin did not apply (here: made with kubectl create,
    // its own field manager).
    kubectl(
        tier,
        &[
            "-n",
            "kube-system",
            "create",
            "configmap",
            "kube-flannel-cfg",
            "--from-literal=net-conf.json={}",
        ],
    );
    let sa = get_json(tier, &["-n", "kube-system", "serviceaccount", "flannel"]);
    assert!(
        !sa["metadata"]["managedFields"]
            .to_string()
            .contains("\"kwin\""),
        "server-side apply recorded kwin for a ServiceAccount with only a name: {sa}"
    );
    let step = task(&tasks, "cp1", "flannel-windows-old");
    assert_eq!(step.module, "kube_delete");
    let m = module_of(step, tier, cache);
    let c = host.converge("flannel-windows-old", m.as_ref());
    assert!(
        c.reason.starts_with("3 object(s) applied by kwin exist"),
        "{}",
        c.reason
    );
    let exists = |args: &[&str]| {
        let mut a = vec!["get"];
        a.extend_from_slice(args);
        a.push("--ignore-not-found");
        !kubectl(tier, &a).trim().is_empty()
    };
    for gone in [
        [
            "-n",
            "kube-system",
            "daemonset",
            "kube-flannel-ds-windows-amd64",
        ]
        .as_slice(),
        &["-n", "kube-system", "configmap", "kube-flannel-windows-cfg"],
        &["clusterrolebinding", "flannel-windows"],
    ] {
        assert!(!exists(gone), "{gone:?} is still there");
    }
    assert!(
        exists(&["-n", "kube-system", "configmap", "kube-flannel-cfg"]),
        "an object kwin did not apply was deleted"
    );
    assert!(exists(&["-n", "kube-system", "serviceaccount", "flannel"]));
    // The current kube-proxy-windows replaces the old one in place.
    let kp = windows_module(task(&tasks, "cp1", "kube-proxy-windows"), tier, cache);
    host.converge("kube-proxy-windows over the old one", kp.as_ref());
    let ds = get_json(
        tier,
        &["-n", "kube-system", "daemonset", "kube-proxy-windows"],
    );
    let pod = &ds["spec"]["template"]["spec"];
    let text = pod.to_string();
    assert!(!text.contains("sigwindowstools"), "{text}");
    assert!(!text.contains("POD_IP"), "{text}");
    assert!(
        pod["volumes"]
            .as_array()
            .is_some_and(|v| v.iter().all(|v| v["name"] != "kube-proxy")),
        "{text}"
    );
    for args in [
        [
            "-n",
            "kube-system",
            "delete",
            "configmap",
            "kube-flannel-cfg",
        ]
        .as_slice(),
        &["-n", "kube-system", "delete", "serviceaccount", "flannel"],
        &[
            "-n",
            "kube-system",
            "delete",
            "daemonset",
            "kube-proxy-windows",
        ],
        &[
            "-n",
            "kube-system",
            "delete",
            "configmap",
            "kube-proxy-windows",
        ],
    ] {
        kubectl(tier, args);
    }
}

fn flannel(host: &Host, tier: &Tier, cache: &Path) {
    // host-gw first, then VXLAN over it: the second is an update of the same objects.
    let tasks = flannel_plan("host-gw");
    let m = module_of(task(&tasks, "cp1", "flannel"), tier, cache);
    let c = host.converge("flannel host-gw", m.as_ref());
    assert!(
        c.reason
            .contains("namespace kube-flannel does not exist yet"),
        "{}",
        c.reason
    );
    let net = cm_json(tier, "kube-flannel", "kube-flannel-cfg", "net-conf.json");
    assert_eq!(
        net,
        json!({"Network": "10.244.0.0/16", "Backend": {"Type": "host-gw"}})
    );
    let cni = cm_json(tier, "kube-flannel", "kube-flannel-cfg", "cni-conf.json");
    assert_eq!(cni["name"], "cbr0");

    let tasks = flannel_plan("vxlan");
    let m = module_of(task(&tasks, "cp1", "flannel"), tier, cache);
    let c = host.converge("flannel vxlan", m.as_ref());
    assert_eq!(c.action.to_string(), "update");
    let diff = c.diff.clone().unwrap_or_default();
    assert!(diff.contains("+") && diff.contains("4096"), "{diff}");
    assert!(!diff.contains("/tmp/"), "{diff}");
    let net = cm_json(tier, "kube-flannel", "kube-flannel-cfg", "net-conf.json");
    assert_eq!(
        net,
        json!({"Network": "10.244.0.0/16", "Backend": {"Type": "vxlan", "VNI": 4096, "Port": 4789}})
    );
    let cni = cm_json(tier, "kube-flannel", "kube-flannel-cfg", "cni-conf.json");
    assert_eq!(cni["name"], "vxlan0");
    assert_eq!(cni["plugins"][0]["type"], "flannel");
    let ds = get_json(
        tier,
        &["daemonset", "-n", "kube-flannel", "kube-flannel-ds"],
    );
    let spec = &ds["spec"]["template"]["spec"];
    assert_eq!(spec["nodeSelector"], json!({"kubernetes.io/os": "linux"}));
    // The rest of the upstream DaemonSet is untouched.
    assert_eq!(spec["priorityClassName"], "system-node-critical");
    assert_eq!(
        spec["containers"][0]["image"],
        "ghcr.io/flannel-io/flannel:v0.26.7"
    );
    let objects: [&[&str]; 3] = [
        &["configmap", "-n", "kube-flannel", "kube-flannel-cfg"],
        &["daemonset", "-n", "kube-flannel", "kube-flannel-ds"],
        &["namespace", "kube-flannel"],
    ];
    assert_no_write(host, tier, "flannel", m.as_ref(), &c, &objects);

    // Drift is seen and repaired.
    kubectl(
        tier,
        &[
            "patch",
            "configmap",
            "-n",
            "kube-flannel",
            "kube-flannel-cfg",
            "--type=merge",
            "-p",
            r#"{"data":{"net-conf.json":"{\"Network\":\"10.244.0.0/16\",\"Backend\":{\"Type\":\"vxlan\",\"VNI\":1}}"}}"#,
        ],
    );
    let c = host.converge("flannel drift", m.as_ref());
    assert!(
        c.reason
            .contains("1 object differs: v1.ConfigMap.kube-flannel.kube-flannel-cfg"),
        "{}",
        c.reason
    );
    assert_eq!(
        cm_json(tier, "kube-flannel", "kube-flannel-cfg", "net-conf.json")["Backend"]["VNI"],
        4096
    );

    // A patch whose object is not in the manifest is an error, not a silent no-op.
    let mut p = (*task(&tasks, "cp1", "flannel").params).clone();
    p["kubeconfig"] = json!(tier.kubeconfig());
    p["patches"][0]["name"] = json!("kube-flannel-config");
    let broken = build("kube_apply", &p);
    match host.plan(broken.as_ref(), &Inputs::new()) {
        Err(ModuleError::Precondition(e)) => assert!(
            e.contains(
                "patch target ConfigMap kube-flannel/kube-flannel-config is not in the manifest"
            ),
            "{e}"
        ),
        other => panic!("expected a missing patch target, got {other:?}"),
    }

    // Windows: kube-proxy (recipe kube-proxy-windows) in kube-system, flanneld next to the
    // Linux DaemonSet in kube-flannel, both on the host-process base image.
    let m = windows_module(task(&tasks, "cp1", "kube-proxy-windows"), tier, cache);
    let c = host.converge("kube-proxy-windows", m.as_ref());
    let ds = get_json(
        tier,
        &["daemonset", "-n", "kube-system", "kube-proxy-windows"],
    );
    let spec = &ds["spec"]["template"]["spec"];
    assert_eq!(
        spec["securityContext"]["windowsOptions"]["runAsUserName"],
        "NT AUTHORITY\\system"
    );
    assert_eq!(spec["serviceAccountName"], "kube-proxy");
    let env = &spec["containers"][0]["env"];
    let env_value = |env: &Value, name: &str| {
        env.as_array()
            .and_then(|a| a.iter().find(|e| e["name"] == name))
            .map(|e| e["value"].clone())
            .unwrap_or(Value::Null)
    };
    assert_eq!(env_value(env, "KUBE_NETWORK"), "flannel.4096");
    // The directory is named by the plan's Kubernetes version (examples/flannel.toml's).
    let example =
        std::fs::read_to_string(kwin_testkit::host::workspace().join("examples/flannel.toml"))
            .expect("examples/flannel.toml");
    let version = example
        .lines()
        .find_map(|l| l.strip_prefix("kubernetes_version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("the example's kubernetes_version");
    let flannel = example
        .lines()
        .find_map(|l| l.strip_prefix("flannel = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("the example's versions.flannel");
    assert_eq!(
        env_value(env, "KWIN_KUBE_PROXY"),
        format!("C:\\k\\kube-proxy\\v{version}\\kube-proxy.exe")
    );
    let script = get_json(
        tier,
        &["configmap", "-n", "kube-system", "kube-proxy-windows"],
    )["data"]["kube-proxy.ps1"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(script.contains("& $env:KWIN_KUBE_PROXY @flags"), "{script}");
    let objects: [&[&str]; 2] = [
        &["daemonset", "-n", "kube-system", "kube-proxy-windows"],
        &["configmap", "-n", "kube-system", "kube-proxy-windows"],
    ];
    assert_no_write(host, tier, "kube-proxy-windows", m.as_ref(), &c, &objects);

    let m = windows_module(task(&tasks, "cp1", "flannel-windows"), tier, cache);
    let c = host.converge("flannel-windows", m.as_ref());
    let win = cm_json(
        tier,
        "kube-flannel",
        "kube-flannel-windows",
        "cni-conf.json",
    );
    assert_eq!(win["name"], "flannel.4096");
    assert_eq!(win["delegate"]["type"], "sdnoverlay");
    assert_eq!(
        win["delegate"]["AdditionalArgs"][0]["Value"]["Settings"]["Exceptions"],
        json!(["10.96.0.0/12", "10.244.0.0/16"])
    );
    let ds = get_json(
        tier,
        &[
            "daemonset",
            "-n",
            "kube-flannel",
            "kube-flannel-ds-windows-amd64",
        ],
    );
    let spec = &ds["spec"]["template"]["spec"];
    assert_eq!(spec["serviceAccountName"], "flannel");
    assert_eq!(
        spec["volumes"][1]["configMap"]["name"], "kube-flannel-cfg",
        "the Windows flanneld reads the Linux DaemonSet's network configuration"
    );
    assert_eq!(
        env_value(&spec["containers"][0]["env"], "KWIN_FLANNELD"),
        format!("C:\\k\\flannel\\{flannel}\\flanneld.exe")
    );
    let objects: [&[&str]; 2] = [
        &[
            "daemonset",
            "-n",
            "kube-flannel",
            "kube-flannel-ds-windows-amd64",
        ],
        &["configmap", "-n", "kube-flannel", "kube-flannel-windows"],
    ];
    assert_no_write(host, tier, "flannel-windows", m.as_ref(), &c, &objects);
}

/// The tier's CA and admin client certificate and key (from its kubeconfig) as
/// `ca.crt`, `client.crt`, `client.key` in `dir`; returns the API server's URL.
fn write_credentials(tier: &Tier, dir: &Path) -> String {
    use base64::Engine as _;
    let text = std::fs::read_to_string(tier.kubeconfig()).expect("read kubeconfig");
    let kc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).expect("kubeconfig yaml");
    let field = |v: &serde_yaml_ng::Value| v.as_str().expect("kubeconfig field").to_string();
    let cluster = &kc["clusters"][0]["cluster"];
    let user = &kc["users"][0]["user"];
    for (file, data) in [
        ("ca.crt", &cluster["certificate-authority-data"]),
        ("client.crt", &user["client-certificate-data"]),
        ("client.key", &user["client-key-data"]),
    ] {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(field(data))
            .expect("base64 in kubeconfig");
        std::fs::write(dir.join(file), bytes).expect("write credential");
    }
    field(&cluster["server"]).trim_end_matches('/').to_string()
}

/// A DaemonSet kwin applies, in the namespace `default`, with this container image.
fn churn_module(tier: &Tier, cache: &Path, image: &str) -> Box<dyn Module> {
    let manifest = format!(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: kwin-churn\n  namespace: default\n\
         spec:\n  selector:\n    matchLabels: {{app: kwin-churn}}\n  template:\n    metadata:\n\
         \x20     labels: {{app: kwin-churn}}\n    spec:\n      containers:\n      - name: c\n\
         \x20       image: {image}\n"
    );
    build(
        "kube_apply",
        &json!({
            "manifest": manifest,
            "kubeconfig": tier.kubeconfig(),
            "cache_dir": cache.display().to_string(),
        }),
    )
}

/// A controller writing an object's status while kwin diffs it (the DaemonSet controller
/// right after a first apply, pods being created): kubectl diff reads the object twice (GET,
/// then the server-side dry run), so a write in between puts a newer status and
/// resourceVersion on one side only. kwin never manages either; the diff must stay empty,
/// and a real change of the spec must still show.
fn status_churn(host: &Host, tier: &Tier, cache: &Path) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    let m = churn_module(tier, cache, "registry.example/churn:1");
    host.converge("churn daemonset", m.as_ref());
    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    // The writer: one curl with the tier's admin credentials, batches of status patches on
    // one connection, each with new values (a new resourceVersion every time), as fast as the
    // API server takes them; a kubectl process per write is too slow to land between
    // kubectl diff's two reads reliably.
    let creds = tempfile::tempdir().expect("credentials dir");
    let url = format!(
        "{}/apis/apps/v1/namespaces/default/daemonsets/kwin-churn/status",
        write_credentials(tier, creds.path())
    );
    let writer = {
        let (stop, writes) = (Arc::clone(&stop), Arc::clone(&writes));
        let dir = creds.path().to_path_buf();
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let mut config = String::new();
                for _ in 0..50 {
                    n += 1;
                    let patch = json!({"status": {"observedGeneration": n,
                        "currentNumberScheduled": n, "desiredNumberScheduled": n,
                        "numberMisscheduled": 0, "numberReady": n % 7}})
                    .to_string()
                    .replace('"', "\\\"");
                    config.push_str(&format!(
                        "url = \"{url}\"\nrequest = \"PATCH\"\n\
                         header = \"Content-Type: application/merge-patch+json\"\n\
                         data = \"{patch}\"\noutput = \"/dev/null\"\n\
                         write-out = \"%{{http_code}}\\n\"\ncacert = \"{d}/ca.crt\"\n\
                         cert = \"{d}/client.crt\"\nkey = \"{d}/client.key\"\nnext\n",
                        d = dir.display()
                    ));
                }
                let cfg = dir.join("curl.cfg");
                std::fs::write(&cfg, config).expect("write curl config");
                let out = Command::new("curl")
                    .args(["-sS", "-K"])
                    .arg(&cfg)
                    .output()
                    .expect("run curl");
                let ok = String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .filter(|l| *l == "200")
                    .count();
                assert!(
                    ok > 0,
                    "status writes fail: {}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                writes.fetch_add(ok as u64, Ordering::Relaxed);
            }
        })
    };
    let changed = churn_module(tier, cache, "registry.example/churn:2");
    let mut differing = Vec::new();
    let mut spec_change = None;
    for i in 0..20 {
        match host.plan(m.as_ref(), &Inputs::new()) {
            Ok(Plan::NoOp { .. }) => {}
            Ok(Plan::Change(c)) => differing.push(format!(
                "run {i}: {}\n{}",
                c.reason,
                c.diff.unwrap_or_default()
            )),
            Err(e) => differing.push(format!("run {i}: {e}")),
        }
        if i == 10 {
            spec_change = Some(host.plan(changed.as_ref(), &Inputs::new()));
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("status writer");
    let writes = writes.load(Ordering::Relaxed);
    assert!(writes >= 100, "only {writes} status writes happened");
    assert!(
        differing.is_empty(),
        "{} of 20 diffs planned a change kwin did not cause ({writes} status writes):\n{}",
        differing.len(),
        differing.join("\n")
    );
    match spec_change {
        Some(Ok(Plan::Change(c))) => {
            assert!(
                c.reason
                    .contains("1 object differs: apps.v1.DaemonSet.default.kwin-churn"),
                "{}",
                c.reason
            );
            let diff = c.diff.unwrap_or_default();
            assert!(
                diff.contains("-      - image: registry.example/churn:1")
                    && diff.contains("+      - image: registry.example/churn:2"),
                "{diff}"
            );
            // Only the spec (and the template generation annotation the API server keeps
            // with it): no status, no metadata.generation or resourceVersion.
            for line in diff
                .lines()
                .filter(|l| !l.starts_with("---") && !l.starts_with("+++"))
            {
                let text = line.get(1..).unwrap_or_default();
                assert!(
                    !(text.starts_with("status:")
                        || text.starts_with("  generation:")
                        || text.starts_with("  resourceVersion:")),
                    "{line:?} in\n{diff}"
                );
            }
        }
        other => panic!("the image change was not seen: {other:?}"),
    }
}

fn runtime_classes(host: &Host, tier: &Tier, cache: &Path) {
    let tasks = flannel_plan("vxlan");
    let m = module_of(task(&tasks, "cp1", "runtime-classes"), tier, cache);
    let c = host.converge("runtime-classes", m.as_ref());
    assert!(c.reason.contains("3 new objects"), "{}", c.reason);
    let rc = get_json(tier, &["runtimeclass", "windows-2019"]);
    assert_eq!(rc["handler"], "runhcs-wcow-process");
    assert_eq!(
        rc["scheduling"]["nodeSelector"],
        json!({
            "kubernetes.io/os": "windows",
            "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/windows-build": "10.0.17763"
        })
    );
    assert_eq!(
        rc["scheduling"]["tolerations"],
        json!([{"key": "os", "operator": "Equal", "value": "windows", "effect": "NoSchedule"}])
    );
    assert_eq!(
        get_json(tier, &["runtimeclass", "windows-2022"])["scheduling"]["nodeSelector"]
            ["node.kubernetes.io/windows-build"],
        "10.0.20348"
    );
    let objects: [&[&str]; 1] = [&["runtimeclass", "windows-2019"]];
    assert_no_write(host, tier, "runtime-classes", m.as_ref(), &c, &objects);
}

fn calico(host: &Host, tier: &Tier, cache: &Path) {
    let cni = format!(
        "[cni]\nmanifest_file = \"{}\"\n",
        fixture("tigera-crds.yaml").display()
    );
    let text = plan_text("examples/calico.toml", &[("[cni]\n", &cni)]);
    let tasks = expand("examples/calico.toml", &text);
    let m = |name: &str| module_of(task(&tasks, "cp1", name), tier, cache);

    // Before the operator's CRDs exist, the Installation cannot be compared: a pending change.
    match host.plan(m("calico-installation").as_ref(), &Inputs::new()) {
        Ok(Plan::Change(c)) => assert!(
            c.reason
                .contains("kind Installation (operator.tigera.io/v1) is not served yet"),
            "{}",
            c.reason
        ),
        other => panic!("installation before its CRD: {other:?}"),
    }
    host.converge("tigera-operator", m("tigera-operator").as_ref());
    let crds = m("calico-crds");
    if let Ok(Plan::Change(c)) = host.plan(crds.as_ref(), &Inputs::new()) {
        host.exec(&c).expect("wait for CRDs");
    }
    assert!(host
        .plan(crds.as_ref(), &Inputs::new())
        .is_ok_and(|p| p.is_noop()));
    for name in [
        "calico-services-endpoint",
        "calico-installation",
        "kube-proxy-windows",
    ] {
        let module = if name == "kube-proxy-windows" {
            windows_module(task(&tasks, "cp1", name), tier, cache)
        } else {
            m(name)
        };
        let c = host.converge(name, module.as_ref());
        assert!(host
            .plan(module.as_ref(), &Inputs::new())
            .is_ok_and(|p| p.is_noop()));
        let _ = c;
    }
    // IPAM and Felix in the group the operator installed: here the fixture's
    // crd.projectcalico.org/v1 CRDs (an existing or upgraded cluster).
    let settings = command_on_tier(task(&tasks, "cp1", "calico-ipam-felix"), tier);
    let c = host.converge("calico-ipam-felix", settings.as_ref());
    assert_eq!(c.reason, "`onlyif` succeeded");
    let objects: [&[&str]; 2] = [
        &["ipamconfigs.crd.projectcalico.org", "default"],
        &["felixconfigurations.crd.projectcalico.org", "default"],
    ];
    assert_no_write(
        host,
        tier,
        "calico-ipam-felix",
        settings.as_ref(),
        &c,
        &objects,
    );
    let inst = get_json(tier, &["installation", "default"]);
    let net = &inst["spec"]["calicoNetwork"];
    assert_eq!(net["bgp"], "Disabled");
    assert_eq!(net["windowsDataplane"], "HNS");
    assert_eq!(
        inst["spec"]["windowsNodes"],
        json!({"cniBinDir": "/opt/cni/bin", "cniConfigDir": "/etc/cni/net.d"})
    );
    assert_eq!(net["ipPools"][0]["encapsulation"], "VXLAN");
    assert_eq!(net["ipPools"][0]["cidr"], "192.168.0.0/16");
    assert_eq!(inst["spec"]["serviceCIDRs"], json!(["10.96.0.0/12"]));
    // kwin applies no IP pool (the Installation's pool is the operator's, which this tier
    // does not run): none exists.
    assert!(
        kubectl(
            tier,
            &["get", "ippools.crd.projectcalico.org", "-o", "name"]
        )
        .trim()
        .is_empty(),
        "an IP pool exists though no operator made one"
    );
    let felix = get_json(
        tier,
        &["felixconfigurations.crd.projectcalico.org", "default"],
    );
    assert_eq!(felix["spec"]["ipipEnabled"], false);
    assert_eq!(felix["spec"]["vxlanVNI"], 4096);
    assert_eq!(felix["spec"]["vxlanPort"], 4789);
    let ipam = get_json(tier, &["ipamconfigs.crd.projectcalico.org", "default"]);
    assert_eq!(ipam["spec"]["strictAffinity"], true);
    let ep = get_json(
        tier,
        &[
            "configmap",
            "-n",
            "tigera-operator",
            "kubernetes-services-endpoint",
        ],
    );
    assert_eq!(ep["data"]["KUBERNETES_SERVICE_HOST"], "10.0.56.10"); // cp1 in examples/calico.toml
    assert_eq!(ep["data"]["KUBERNETES_SERVICE_PORT"], "6443");

    // The hand-over of the pool an earlier kwin applied (field manager `kwin`, no label): its
    // step labels it for the operator, once; a pool someone else made is left alone.
    let owner = command_on_tier(task(&tasks, "cp1", "calico-ippool-owner"), tier);
    assert!(
        host.plan(owner.as_ref(), &Inputs::new())
            .is_ok_and(|p| p.is_noop()),
        "the hand-over ran without a pool"
    );
    let old_pool = "apiVersion: crd.projectcalico.org/v1\nkind: IPPool\nmetadata:\n  name: default-ipv4-ippool\nspec:\n  cidr: 192.168.0.0/16\n  blockSize: 26\n  ipipMode: Never\n  vxlanMode: Always\n  natOutgoing: true\n  nodeSelector: all()\n";
    kubectl(
        tier,
        &[
            "apply",
            "--server-side",
            "--field-manager=someone",
            "-f",
            &write_temp(old_pool),
        ],
    );
    assert!(
        host.plan(owner.as_ref(), &Inputs::new())
            .is_ok_and(|p| p.is_noop()),
        "the hand-over took a pool kwin did not make"
    );
    kubectl(
        tier,
        &[
            "delete",
            "ippools.crd.projectcalico.org",
            "default-ipv4-ippool",
        ],
    );
    kubectl(
        tier,
        &[
            "apply",
            "--server-side",
            "--field-manager=kwin",
            "-f",
            &write_temp(old_pool),
        ],
    );
    host.converge("calico-ippool-owner", owner.as_ref());
    let pool = get_json(
        tier,
        &["ippools.crd.projectcalico.org", "default-ipv4-ippool"],
    );
    assert_eq!(
        pool["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "tigera-operator"
    );
    assert_eq!(
        pool["spec"]["vxlanMode"], "Always",
        "the spec is the operator's to change"
    );
    kubectl(
        tier,
        &[
            "delete",
            "ippools.crd.projectcalico.org",
            "default-ipv4-ippool",
        ],
    );

    // cni-ready waits for the operator's TigeraStatus `calico` (no operator here: made by hand).
    let ready = m("cni-ready");
    match host.plan(ready.as_ref(), &Inputs::new()) {
        Ok(Plan::Change(c)) => assert!(
            c.reason.contains("tigerastatus calico: not found"),
            "{}",
            c.reason
        ),
        other => panic!("cni-ready before the status exists: {other:?}"),
    }
    kubectl(tier, &["apply", "--server-side", "--field-manager=test", "-f", &write_temp(
        "apiVersion: operator.tigera.io/v1\nkind: TigeraStatus\nmetadata:\n  name: calico\nspec: {}\n",
    )]);
    set_status(
        tier,
        &["tigerastatus", "calico"],
        json!({"conditions": [
        {"type": "Available", "status": "False", "reason": "ResourceNotReady", "message": "calico-node is rolling out"}]}),
    );
    match host.plan(ready.as_ref(), &Inputs::new()) {
        Ok(Plan::Change(c)) => assert!(
            c.reason.contains(
                "tigerastatus calico NotAvailable: ResourceNotReady: calico-node is rolling out"
            ),
            "{}",
            c.reason
        ),
        other => panic!("cni-ready while rolling out: {other:?}"),
    }
    set_status(
        tier,
        &["tigerastatus", "calico"],
        json!({"conditions": [
        {"type": "Available", "status": "True", "reason": "AllResourcesAvailable", "message": "all objects are available"}]}),
    );
    assert!(host
        .plan(ready.as_ref(), &Inputs::new())
        .is_ok_and(|p| p.is_noop()));
}

/// A minimal CRD of Calico's projectcalico.org/v3 group, as the tigera-operator installs on a
/// new cluster serving MutatingAdmissionPolicy (projectcalico/calico
/// api/config/crd/projectcalico.org_*.yaml): the spec fields kwin writes, typed, no others
/// allowed.
fn calico_v3_crd(plural: &str, kind: &str, spec: &str) -> String {
    format!(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.projectcalico.org
spec:
  group: projectcalico.org
  names: {{ kind: {kind}, listKind: {kind}List, plural: {plural}, singular: {singular} }}
  scope: Cluster
  versions:
    - name: v3
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            apiVersion: {{ type: string }}
            kind: {{ type: string }}
            metadata: {{ type: object }}
            spec:
              type: object
              properties:
{spec}",
        singular = kind.to_ascii_lowercase(),
    )
}

/// The step calico-ipam-felix on a cluster whose operator installed the projectcalico.org/v3
/// CRDs (a new cluster): no crd.projectcalico.org group at all. Its guard answers at once
/// while no group is served; its run waits for the CRDs, then writes IPAMConfiguration and
/// FelixConfiguration in v3; a second run writes nothing; a changed field is put back. The
/// IP pool hand-over reads the v3 group too.
fn calico_v3(host: &Host, tier: &Tier) {
    let tasks = expand(
        "examples/calico.toml",
        &plan_text("examples/calico.toml", &[]),
    );
    for crd in [
        "ipamconfigs.crd.projectcalico.org",
        "felixconfigurations.crd.projectcalico.org",
        "ippools.crd.projectcalico.org",
    ] {
        kubectl(tier, &["delete", "crd", crd, "--wait=true"]);
    }
    let settings = command_on_tier(task(&tasks, "cp1", "calico-ipam-felix"), tier);
    let started = std::time::Instant::now();
    let c = match host.plan(settings.as_ref(), &Inputs::new()) {
        Ok(Plan::Change(c)) => c,
        other => panic!("calico-ipam-felix before any Calico CRD: {other:?}"),
    };
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the guard waited: {:?}",
        started.elapsed()
    );
    assert_eq!(c.reason, "`onlyif` succeeded");
    let ipam_crd = calico_v3_crd(
        "ipamconfigurations",
        "IPAMConfiguration",
        "                strictAffinity: { type: boolean }
                autoAllocateBlocks: { type: boolean }
                maxBlocksPerHost: { type: integer }
",
    );
    let felix_crd = calico_v3_crd(
        "felixconfigurations",
        "FelixConfiguration",
        "                ipipEnabled: { type: boolean }
                vxlanEnabled: { type: boolean }
                vxlanVNI: { type: integer }
                vxlanPort: { type: integer }
",
    );
    // The operator installs the CRDs once the step has looked for them and is waiting (each
    // look asks for at least two of them).
    let looked = requests(tier, "customresourcedefinitions", "GET");
    let ran = std::thread::scope(|s| {
        s.spawn(|| {
            wait_for_requests(tier, "customresourcedefinitions", "GET", looked + 1);
            kubectl(
                tier,
                &[
                    "apply",
                    "--server-side",
                    "--field-manager=operator",
                    "-f",
                    &write_temp(&format!("{ipam_crd}---\n{felix_crd}")),
                ],
            );
        });
        host.exec(&c)
    });
    ran.unwrap_or_else(|e| panic!("calico-ipam-felix with v3 CRDs: {e}"));
    assert!(
        host.plan(settings.as_ref(), &Inputs::new())
            .is_ok_and(|p| p.is_noop()),
        "calico-ipam-felix did not converge in projectcalico.org/v3"
    );
    let ipam = get_json(tier, &["ipamconfigurations.projectcalico.org", "default"]);
    assert_eq!(
        (&ipam["apiVersion"], &ipam["kind"]),
        (&json!("projectcalico.org/v3"), &json!("IPAMConfiguration"))
    );
    assert_eq!(
        ipam["spec"],
        json!({"strictAffinity": true, "autoAllocateBlocks": true})
    );
    let felix = get_json(tier, &["felixconfigurations.projectcalico.org", "default"]);
    assert_eq!(felix["apiVersion"], "projectcalico.org/v3");
    assert_eq!(
        felix["spec"],
        json!({"ipipEnabled": false, "vxlanEnabled": true, "vxlanVNI": 4096, "vxlanPort": 4789})
    );
    for resource in [
        "ipamconfigurations.projectcalico.org",
        "felixconfigurations.projectcalico.org",
    ] {
        let managers = kubectl(
            tier,
            &[
                "get",
                resource,
                "default",
                "--show-managed-fields",
                "-o",
                "jsonpath={.metadata.managedFields[*].manager}",
            ],
        );
        assert_eq!(managers, "kwin", "{resource}");
    }
    let objects: [&[&str]; 2] = [
        &["ipamconfigurations.projectcalico.org", "default"],
        &["felixconfigurations.projectcalico.org", "default"],
    ];
    assert_no_write(
        host,
        tier,
        "calico-ipam-felix (v3)",
        settings.as_ref(),
        &c,
        &objects,
    );

    // Someone else changes a field kwin sets: the next plan sees it, the run puts it back.
    kubectl(
        tier,
        &[
            "patch",
            "felixconfigurations.projectcalico.org",
            "default",
            "--type=merge",
            "-p",
            r#"{"spec":{"vxlanPort":4790}}"#,
        ],
    );
    host.converge("calico-ipam-felix (drift)", settings.as_ref());
    assert_eq!(
        get_json(tier, &["felixconfigurations.projectcalico.org", "default"])["spec"]["vxlanPort"],
        4789
    );

    // The hand-over of a pool kwin applied reads the group that serves IP pools: v3 here.
    let owner = command_on_tier(task(&tasks, "cp1", "calico-ippool-owner"), tier);
    assert!(
        host.plan(owner.as_ref(), &Inputs::new())
            .is_ok_and(|p| p.is_noop()),
        "the hand-over ran without a pool"
    );
    let pool_crd = calico_v3_crd(
        "ippools",
        "IPPool",
        "                cidr: { type: string }
                blockSize: { type: integer }
                ipipMode: { type: string }
                vxlanMode: { type: string }
                natOutgoing: { type: boolean }
                nodeSelector: { type: string }
",
    );
    kubectl(
        tier,
        &[
            "apply",
            "--server-side",
            "--field-manager=operator",
            "-f",
            &write_temp(&pool_crd),
        ],
    );
    kubectl(
        tier,
        &[
            "wait",
            "--for=condition=Established",
            "crd/ippools.projectcalico.org",
            "--timeout=60s",
        ],
    );
    let pool = "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata:\n  name: default-ipv4-ippool\nspec:\n  cidr: 192.168.0.0/16\n  blockSize: 26\n  ipipMode: Never\n  vxlanMode: Always\n  natOutgoing: true\n  nodeSelector: all()\n";
    kubectl(
        tier,
        &[
            "apply",
            "--server-side",
            "--field-manager=kwin",
            "-f",
            &write_temp(pool),
        ],
    );
    host.converge("calico-ippool-owner (v3)", owner.as_ref());
    assert_eq!(
        get_json(tier, &["ippools.projectcalico.org", "default-ipv4-ippool"])["metadata"]["labels"]
            ["app.kubernetes.io/managed-by"],
        "tigera-operator"
    );
    for crd in [
        "ipamconfigurations.projectcalico.org",
        "felixconfigurations.projectcalico.org",
        "ippools.projectcalico.org",
    ] {
        kubectl(tier, &["delete", "crd", crd, "--wait=true"]);
    }
}

/// The time in kwin's cordon mark on `node` (`reboot 2026-11-25T03:15:00Z`), moved by
/// `secs` seconds: a Ready heartbeat just before or just after kwin's cordon.
fn mark_time(tier: &Tier, node: &str, secs: i64) -> String {
    let mark = get_json(tier, &["node", node])["metadata"]["annotations"]
        [kwin_modules::kube::node::CORDON_MARK]
        .as_str()
        .unwrap_or_else(|| panic!("{node} carries no mark"))
        .to_string();
    let at = mark.rsplit(' ').next().unwrap_or_default();
    let date = |args: &[&str]| {
        let out = Command::new("date").args(args).output().expect("date");
        assert!(out.status.success(), "date {args:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let epoch: i64 = date(&["-u", "-d", at, "+%s"])
        .parse()
        .unwrap_or_else(|e| panic!("mark {mark:?}: {e}"));
    date(&[
        "-u",
        "-d",
        &format!("@{}", epoch + secs),
        "+%Y-%m-%dT%H:%M:%SZ",
    ])
}

fn write_temp(text: &str) -> String {
    let f = tempfile::Builder::new()
        .suffix(".yaml")
        .tempfile()
        .expect("temp file");
    std::fs::write(f.path(), text).expect("write temp");
    let (_, p) = f.keep().expect("keep temp");
    p.display().to_string()
}

/// How many `verb` requests (LIST, WATCH, GET, ...) on `resource` the API server has served
/// (its `apiserver_request_total` counter, every response code).
fn requests(tier: &Tier, resource: &str, verb: &str) -> u64 {
    let metrics = kubectl(tier, &["get", "--raw", "/metrics"]);
    let (res, verb) = (
        format!("resource=\"{resource}\""),
        format!("verb=\"{verb}\""),
    );
    metrics
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{") && l.contains(&res))
        .filter(|l| l.contains(&verb) && l.contains("subresource=\"\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Wait until the API server has answered more than `before` requests of `verb` on
/// `resource` (a step's first look at what it then waits for).
fn wait_for_requests(tier: &Tier, resource: &str, verb: &str, before: u64) {
    let t0 = std::time::Instant::now();
    while requests(tier, resource, verb) <= before {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no {verb} of {resource} after {before}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn set_status(tier: &Tier, object: &[&str], status: Value) {
    let patch = json!({ "status": status }).to_string();
    let mut a = vec!["patch"];
    a.extend_from_slice(object);
    a.extend_from_slice(&["--subresource=status", "--type=merge", "-p", &patch]);
    kubectl(tier, &a);
}

fn waits(host: &Host, tier: &Tier, cache: &Path) {
    let tasks = flannel_plan("vxlan");
    // The DaemonSet has never been looked at by a controller (there is none here).
    let mut p = (*task(&tasks, "cp1", "cni-ready").params).clone();
    p["kubeconfig"] = json!(tier.kubeconfig());
    p["timeout"] = json!("2s");
    p["interval"] = json!(1);
    let ds = build("kube_wait", &p);
    let c = match host.plan(ds.as_ref(), &Inputs::new()) {
        Ok(Plan::Change(c)) => c,
        other => panic!("cni-ready: {other:?}"),
    };
    assert!(
        c.reason
            .contains("daemonset kube-flannel/kube-flannel-ds: generation 1 not observed yet")
            || c.reason
                .contains("daemonset kube-flannel/kube-flannel-ds: generation 2 not observed yet"),
        "{}",
        c.reason
    );
    let err = host.exec(&c).expect_err("the wait must time out");
    assert!(
        err.contains("timed out after 2s waiting for DaemonSet kube-flannel-ds to roll out"),
        "{err}"
    );
    assert!(
        err.contains("daemonset kube-flannel/kube-flannel-ds: generation"),
        "{err}"
    );
    let generation = get_json(
        tier,
        &["daemonset", "-n", "kube-flannel", "kube-flannel-ds"],
    )["metadata"]["generation"]
        .clone();
    let status = |ready: u32| {
        json!({"observedGeneration": generation, "desiredNumberScheduled": 2,
        "currentNumberScheduled": 2, "updatedNumberScheduled": 2, "numberMisscheduled": 0,
        "numberReady": ready, "numberAvailable": ready})
    };
    set_status(
        tier,
        &["daemonset", "-n", "kube-flannel", "kube-flannel-ds"],
        status(1),
    );
    match host.plan(ds.as_ref(), &Inputs::new()) {
        Ok(Plan::Change(c)) => assert_eq!(
            c.reason,
            "daemonset kube-flannel/kube-flannel-ds: 1 of 2 ready"
        ),
        other => panic!("cni-ready 1 of 2: {other:?}"),
    }
    set_status(
        tier,
        &["daemonset", "-n", "kube-flannel", "kube-flannel-ds"],
        status(2),
    );
    assert!(host
        .plan(ds.as_ref(), &Inputs::new())
        .is_ok_and(|p| p.is_noop()));

    // Every node Ready (cluster-ready): lw1 becomes Ready while the step waits.
    let _ = cache;
    for (name, os) in [
        ("cp1", "linux"),
        ("lw1", "linux"),
        ("ww1", "windows"),
        ("ww2", "windows"),
    ] {
        kubectl(tier, &["apply", "--server-side", "--field-manager=test", "-f", &write_temp(&format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels:\n    kubernetes.io/os: {os}\n"))]);
        let ready = if name == "lw1" {
            json!({"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "container runtime network not ready"})
        } else {
            json!({"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"})
        };
        set_status(tier, &["node", name], json!({"conditions": [ready]}));
    }
    let mut p = (*task(&tasks, "cp1", "nodes-ready").params).clone();
    assert_eq!(p["names"], json!(["cp1", "lw1", "ww1", "ww2"]));
    p["kubeconfig"] = json!(tier.kubeconfig());
    p["timeout"] = json!("60s");
    p["interval"] = json!("1s");
    let nodes = build("kube_wait", &p);
    let c = match host.plan(nodes.as_ref(), &Inputs::new()) {
        Ok(Plan::Change(c)) => c,
        other => panic!("nodes-ready: {other:?}"),
    };
    assert_eq!(
        c.reason,
        "node lw1 NotReady: KubeletNotReady: container runtime network not ready"
    );
    // The wait follows the API server's stream of changes instead of asking again every
    // `interval`: however long it waits, it lists the Nodes once (the watch's own list).
    let lists = || requests(tier, "nodes", "LIST");
    let before = lists();
    std::thread::scope(|s| {
        s.spawn(|| {
            // Three seconds of waiting (three `interval`s): the time is what is tested.
            std::thread::sleep(Duration::from_secs(3));
            set_status(
                tier,
                &["node", "lw1"],
                json!({"conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"}]}),
            );
        });
        host.exec(&c).expect("nodes become ready while waiting");
    });
    let listed = lists() - before;
    assert!(
        listed <= 1,
        "the wait listed the Nodes {listed} times in 3 s (interval 1s): it polls instead of watching"
    );
    assert!(host
        .plan(nodes.as_ref(), &Inputs::new())
        .is_ok_and(|p| p.is_noop()));

    // It returns when the API server reports the change, not at the next check: with an
    // `interval` of a minute, lw1 turning Ready after the wait's first look ends the wait
    // long before a poll would have looked again.
    set_status(
        tier,
        &["node", "lw1"],
        json!({"conditions": [
        {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "restarting"}]}),
    );
    p["interval"] = json!("60s");
    p["timeout"] = json!("120s");
    let slow = build("kube_wait", &p);
    let c = match host.plan(slow.as_ref(), &Inputs::new()) {
        Ok(Plan::Change(c)) => c,
        other => panic!("nodes-ready, interval 60s: {other:?}"),
    };
    // lw1 turns Ready once the wait has listed the Nodes (the watch's list): after its first
    // look, so a poll would only see it at the next check, a minute on.
    let listed = requests(tier, "nodes", "LIST");
    let took = std::thread::scope(|s| {
        s.spawn(|| {
            wait_for_requests(tier, "nodes", "LIST", listed);
            set_status(
                tier,
                &["node", "lw1"],
                json!({"conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"}]}),
            );
        });
        let t = std::time::Instant::now();
        host.exec(&c).expect("lw1 becomes ready while waiting");
        t.elapsed()
    });
    assert!(
        took < Duration::from_secs(30),
        "the wait took {took:?} for a change made after its first look: it waited for its next check (interval 60s)"
    );

    // A Node deleted while the wait watches it is not found any more, not Ready: the wait
    // times out naming it.
    kubectl(
        tier,
        &[
            "apply",
            "--server-side",
            "--field-manager=test",
            "-f",
            &write_temp("apiVersion: v1\nkind: Node\nmetadata:\n  name: gone1\n"),
        ],
    );
    set_status(
        tier,
        &["node", "gone1"],
        json!({"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"}]}),
    );
    let gone = build(
        "kube_wait",
        &json!({"kind": "Node", "names": ["gone1", "ww1"], "condition": "Ready",
        "kubeconfig": tier.kubeconfig(), "timeout": "4s", "interval": "1s"}),
    );
    set_status(
        tier,
        &["node", "ww1"],
        json!({"conditions": [
        {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "starting"}]}),
    );
    let c = match host.plan(gone.as_ref(), &Inputs::new()) {
        Ok(Plan::Change(c)) => c,
        other => panic!("gone1: {other:?}"),
    };
    let listed = requests(tier, "nodes", "LIST");
    let err = std::thread::scope(|s| {
        s.spawn(|| {
            // Deleted while the wait watches it (after the watch's list).
            wait_for_requests(tier, "nodes", "LIST", listed);
            kubectl(tier, &["delete", "node", "gone1"]);
            set_status(
                tier,
                &["node", "ww1"],
                json!({"conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"}]}),
            );
        });
        host.exec(&c)
            .expect_err("a deleted node never becomes Ready")
    });
    assert!(
        err.contains("timed out after 4s waiting for Node gone1, ww1 to be Ready:")
            && err.contains("node gone1: not found")
            && !err.contains("node ww1"),
        "{err}"
    );

    // A CRD-backed kind that is not served at all: not ready, named, no error.
    let unserved = build(
        "kube_wait",
        &json!({"kind": "Widget", "names": ["w1"], "condition": "Ready",
        "kubeconfig": tier.kubeconfig()}),
    );
    let c = match host.plan(unserved.as_ref(), &Inputs::new()) {
        Ok(Plan::Change(c)) => c,
        other => panic!("unserved kind: {other:?}"),
    };
    assert_eq!(
        c.reason,
        "widget w1: kind Widget is not served by the API server yet"
    );
    // Waiting for it retries every `interval` (nothing to watch yet) and times out naming it.
    let unserved = build(
        "kube_wait",
        &json!({"kind": "Widget", "names": ["w1"], "condition": "Ready",
        "kubeconfig": tier.kubeconfig(), "timeout": "3s", "interval": "1s"}),
    );
    let c = match host.plan(unserved.as_ref(), &Inputs::new()) {
        Ok(Plan::Change(c)) => c,
        other => panic!("unserved kind: {other:?}"),
    };
    let err = host
        .exec(&c)
        .expect_err("an unserved kind never becomes Ready");
    assert!(
        err.contains("timed out after 3s waiting for Widget w1 to be Ready:")
            && err.contains("widget w1: kind Widget is not served by the API server yet"),
        "{err}"
    );
    let healthy = build(
        "kube_wait",
        &json!({"condition": "healthy", "kubeconfig": tier.kubeconfig()}),
    );
    assert!(host
        .plan(healthy.as_ref(), &Inputs::new())
        .is_ok_and(|p| p.is_noop()));

    // kube-proxy rolled out (cluster-ready's last step): absent here (the tier runs no
    // kubeadm add-ons), it counts as done; a kube-proxy that has not rolled out is waited for.
    let mut p = (*task(&tasks, "cp1", "kube-proxy-rollout").params).clone();
    p["kubeconfig"] = json!(tier.kubeconfig());
    p["timeout"] = json!("2s");
    p["interval"] = json!(1);
    let kp = build("kube_wait", &p);
    match host.plan(kp.as_ref(), &Inputs::new()) {
        Ok(Plan::NoOp { why, .. }) => assert!(why.contains("(or absent: optional)"), "{why}"),
        other => panic!("kube-proxy-rollout without kube-proxy: {other:?}"),
    }
    kubectl(tier, &["apply", "--server-side", "--field-manager=test", "-f", &write_temp(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: kube-proxy\n  namespace: kube-system\n\
         spec:\n  selector:\n    matchLabels:\n      k8s-app: kube-proxy\n  template:\n    metadata:\n\
         \x20     labels:\n        k8s-app: kube-proxy\n    spec:\n      containers:\n\
         \x20     - name: kube-proxy\n        image: registry.k8s.io/kube-proxy:v1.37.2\n")]);
    match host.plan(kp.as_ref(), &Inputs::new()) {
        Ok(Plan::Change(c)) => assert!(
            c.reason
                .contains("daemonset kube-system/kube-proxy: generation 1 not observed yet"),
            "{}",
            c.reason
        ),
        other => panic!("kube-proxy-rollout while it rolls out: {other:?}"),
    }
    let generation = get_json(tier, &["daemonset", "-n", "kube-system", "kube-proxy"])["metadata"]
        ["generation"]
        .clone();
    set_status(
        tier,
        &["daemonset", "-n", "kube-system", "kube-proxy"],
        json!({"observedGeneration": generation, "desiredNumberScheduled": 2,
        "currentNumberScheduled": 2, "updatedNumberScheduled": 2, "numberMisscheduled": 0,
        "numberReady": 2, "numberAvailable": 2}),
    );
    assert!(host
        .plan(kp.as_ref(), &Inputs::new())
        .is_ok_and(|p| p.is_noop()));
    // Planned while it rolled out, gone by the time the wait runs: an optional object that is
    // absent is done at once, with no watch for events that will never come.
    set_status(
        tier,
        &["daemonset", "-n", "kube-system", "kube-proxy"],
        json!({"observedGeneration": generation, "desiredNumberScheduled": 2,
        "currentNumberScheduled": 2, "updatedNumberScheduled": 1, "numberMisscheduled": 0,
        "numberReady": 1, "numberAvailable": 1}),
    );
    let c = match host.plan(kp.as_ref(), &Inputs::new()) {
        Ok(Plan::Change(c)) => c,
        other => panic!("kube-proxy-rollout while it rolls out: {other:?}"),
    };
    kubectl(
        tier,
        &["delete", "daemonset", "-n", "kube-system", "kube-proxy"],
    );
    let watches = requests(tier, "daemonsets", "WATCH");
    host.exec(&c).expect("an absent optional DaemonSet is done");
    assert_eq!(
        requests(tier, "daemonsets", "WATCH"),
        watches,
        "the wait watched DaemonSets for an absent optional one"
    );
}

fn join_data(host: &Host, tier: &Tier) -> BTreeMap<String, String> {
    let tasks = flannel_plan("vxlan");
    let mut p = (*task(&tasks, "cp1", "join-data").params).clone();
    assert_eq!(p["ttl"], "2h");
    let endpoint = format!("127.0.0.1:{}", tier.var("APISERVER_PORT"));
    p["kubeconfig"] = json!(tier.kubeconfig());
    p["api_endpoint"] = json!(endpoint);
    p["pki_dir"] = json!(tier.state.join("pki").display().to_string());
    p["upload_certs"] = json!(true);
    p["kubeadm_config"] = json!(tier.var("KUBEADM_CONFIG"));
    let m = build("kube_join_data", &p);
    assert!(host
        .plan(m.as_ref(), &Inputs::new())
        .is_ok_and(|p| p.is_noop()));
    let script = m.output(Shell::Posix).expect("an output script");
    let out = host.run(&script);
    assert!(
        out.success(),
        "output script: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let values: BTreeMap<String, String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(
        values.keys().map(String::as_str).collect::<Vec<_>>(),
        ["api_endpoint", "ca_cert_hash", "certificate_key", "token"]
    );
    assert_eq!(values["api_endpoint"], endpoint);
    let token = &values["token"];
    let (id, secret) = token.split_once('.').expect("token id.secret");
    assert_eq!((id.len(), secret.len()), (6, 16), "{token}");
    // The token exists in the cluster, with about the ttl asked for.
    let s = get_json(
        tier,
        &[
            "secret",
            "-n",
            "kube-system",
            &format!("bootstrap-token-{id}"),
        ],
    );
    assert_eq!(s["type"], "bootstrap.kubernetes.io/token");
    // The CA hash equals what kubeadm itself prints in a join command.
    let join = Command::new(tier.var("KUBEADM_BIN"))
        .args(["token", "create", "--print-join-command", "--kubeconfig"])
        .arg(tier.kubeconfig())
        .output()
        .expect("kubeadm");
    let join = String::from_utf8_lossy(&join.stdout).into_owned();
    let kubeadm_hash = join
        .split_whitespace()
        .skip_while(|w| *w != "--discovery-token-ca-cert-hash")
        .nth(1)
        .unwrap_or_else(|| panic!("no hash in {join:?}"));
    assert_eq!(values["ca_cert_hash"], kubeadm_hash);
    let key = &values["certificate_key"];
    assert!(
        key.len() == 64 && key.bytes().all(|b| b.is_ascii_hexdigit()),
        "{key}"
    );
    get_json(tier, &["secret", "-n", "kube-system", "kubeadm-certs"]);
    // Every run makes a fresh token.
    let again = host.run(&script);
    assert!(!String::from_utf8_lossy(&again.stdout).contains(token.as_str()));
    values
}

/// What the tier lacks for a node's discovery, made by hand: the bootstrap signer's JWS of
/// `cluster-info` for `token` (kube-controller-manager's job) and the kubelet configuration
/// with its RBAC (`kubeadm init phase upload-config kubelet`, which waits for a Node).
fn prepare_discovery(host: &Host, tier: &Tier, token: &str) {
    let (id, secret) = token.split_once('.').expect("token");
    let script = format!(
        "set -e\nb64u() {{ base64 -w0 | tr '+/' '-_' | tr -d '='; }}\n\
         f=$(mktemp)\n\
         kubectl --kubeconfig {kc} get configmap -n kube-public cluster-info -o jsonpath='{{.data.kubeconfig}}' > \"$f\"\n\
         h=$(printf '{{\"alg\":\"HS256\",\"kid\":\"%s\"}}' {id} | b64u)\n\
         p=$(b64u < \"$f\")\n\
         rm -f \"$f\"\n\
         sig=$(printf '%s.%s' \"$h\" \"$p\" | openssl dgst -sha256 -mac HMAC -macopt key:{secret} -binary | b64u)\n\
         kubectl --kubeconfig {kc} patch configmap -n kube-public cluster-info --type=merge -p \"{{\\\"data\\\":{{\\\"jws-kubeconfig-{id}\\\":\\\"$h..$sig\\\"}}}}\"\n",
        kc = tier.kubeconfig().display()
    );
    let out = host.run(&script);
    assert!(
        out.success(),
        "sign cluster-info: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The unversioned name kubeadm has used since 1.24 (its UnversionedKubeletConfigMap
    // feature, GA in 1.25; cmd/kubeadm/app/constants: KubeletBaseConfigurationConfigMap), with
    // the Role kubeadm:kubelet-config; `kubelet-config-1.MINOR` was kubeadm 1.23's and older.
    let name = "kubelet-config";
    kubectl(tier, &["apply", "--server-side", "--field-manager=test", "-f", &write_temp(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: kube-system\ndata:\n  kubelet: |\n    apiVersion: kubelet.config.k8s.io/v1beta1\n    kind: KubeletConfiguration\n    cgroupDriver: systemd\n\
---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: kubeadm:{name}\n  namespace: kube-system\nrules:\n  - apiGroups: [\"\"]\n    resources: [configmaps]\n    resourceNames: [{name}]\n    verbs: [get]\n\
---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: kubeadm:{name}\n  namespace: kube-system\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: kubeadm:{name}\nsubjects:\n  - apiGroup: rbac.authorization.k8s.io\n    kind: Group\n    name: system:bootstrappers:kubeadm:default-node-token\n"))]);
}

/// kubeadm_join's real script and JoinConfiguration, with the join data kube_join_data made,
/// through kubeadm's own discovery: the node finds the API server at `api_endpoint`, checks
/// its CA against `ca_cert_hash` and authenticates with `token`. The tier has no kubelet, so
/// the join stops after discovery and preflight: `kubeadm` is a shim that runs
/// `kubeadm join phase preflight` where the module runs `kubeadm join`.
fn join(host: &Host, tier: &Tier, values: &BTreeMap<String, String>) {
    prepare_discovery(host, tier, &values["token"]);
    let dir = tempfile::tempdir().expect("shim dir");
    let shim = dir.path().join("kubeadm");
    std::fs::write(
        &shim,
        format!(
            "#!/bin/sh\nif [ \"$1\" = join ]; then shift; exec {k} join phase preflight --ignore-preflight-errors=all \"$@\"; fi\nexec {k} \"$@\"\n",
            k = tier.var("KUBEADM_BIN")
        ),
    )
    .expect("write shim");
    let chmod = Command::new("chmod")
        .arg("755")
        .arg(&shim)
        .status()
        .expect("chmod");
    assert!(chmod.success());
    let tasks = flannel_plan("vxlan");
    let mut p = (*task(&tasks, "lw1", "kubeadm-join").params).clone();
    p["kubeadm"] = json!(shim.display().to_string());
    p["creates"] = json!(dir.path().join("kubelet.conf").display().to_string());
    let m = Builtin
        .build("kubeadm_join", Shell::Posix, &p)
        .expect("kubeadm_join");
    let mut inputs = Inputs::new();
    for k in ["token", "ca_cert_hash", "api_endpoint"] {
        inputs.insert(k, kwin_engine::secret::Secret::new(values[k].clone()));
    }
    let c = match host.plan(m.as_ref(), &inputs) {
        Ok(Plan::Change(c)) => c,
        other => panic!("kubeadm-join: {other:?}"),
    };
    assert!(!c
        .diff
        .clone()
        .unwrap_or_default()
        .contains(&values["token"]));
    host.exec(&c)
        .unwrap_or_else(|e| panic!("kubeadm join discovery: {e}"));

    // A wrong CA hash: kubeadm refuses the cluster.
    let mut wrong = Inputs::new();
    wrong.insert(
        "token",
        kwin_engine::secret::Secret::new(values["token"].clone()),
    );
    wrong.insert(
        "api_endpoint",
        kwin_engine::secret::Secret::new(values["api_endpoint"].clone()),
    );
    wrong.insert(
        "ca_cert_hash",
        kwin_engine::secret::Secret::new(format!("sha256:{}", "0".repeat(64))),
    );
    let c = match host.plan(m.as_ref(), &wrong) {
        Ok(Plan::Change(c)) => c,
        other => panic!("kubeadm-join: {other:?}"),
    };
    let err = host
        .exec(&c)
        .expect_err("a wrong CA hash must fail the join");
    assert!(
        err.contains("none of the public keys") || err.contains("not pinned"),
        "{err}"
    );
}

fn init(host: &Host, tier: &Tier) {
    let m = build(
        "kubeadm_init",
        &json!({"config": "/etc/kubernetes/kubeadm-config.yaml", "creates": tier.kubeconfig()}),
    );
    match host.plan(m.as_ref(), &Inputs::new()) {
        Ok(Plan::NoOp { why, .. }) => assert!(why.contains("healthy"), "{why}"),
        other => panic!("initialised cluster: {other:?}"),
    }
    // The same admin kubeconfig pointing at a port nobody listens on: a clear failure, never
    // a second kubeadm init.
    let text = std::fs::read_to_string(tier.kubeconfig()).expect("admin.conf");
    let port = tier.var("APISERVER_PORT");
    let dead = tier.state.join("dead.conf");
    std::fs::write(&dead, text.replace(&format!(":{port}"), ":1")).expect("write");
    let m = build(
        "kubeadm_init",
        &json!({"config": "/etc/kubernetes/kubeadm-config.yaml", "creates": dead.display().to_string(),
                "health_timeout": "1s"}),
    );
    match host.plan(m.as_ref(), &Inputs::new()) {
        Err(ModuleError::Precondition(e)) => {
            assert!(
                e.contains("exists but the API server does not answer"),
                "{e}"
            );
            assert!(e.contains("kubeadm reset -f"), "{e}");
        }
        other => panic!("unhealthy control plane: {other:?}"),
    }
}
