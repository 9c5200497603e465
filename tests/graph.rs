//! `kwin graph`: golden text output of the example plans, the graph's structural guarantees, and
//! the diagnostics of broken plans and recipes.
//!
//! Goldens live in tests/golden/*.txt; `KWIN_BLESS=1 cargo test --test graph` rewrites them.

use kwin_engine::diag::Diagnostics;
use kwin_engine::graph::{EdgeKind, TaskGraph};
use kwin_engine::task::Origin;
use kwin_testkit::kwin;
use kwin_testkit::kwin::Run;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `kwin ARGS` in the repository.
fn kwin_at_root(args: &[&str]) -> Run {
    kwin!(root())
        // The SSH key the example plans name (`~/.ssh/id_ed25519`) exists there.
        .env("HOME", root().join("tests/plans/home"))
        .args(args)
        .run()
}

/// Compare `actual` with tests/golden/<name>.txt, or rewrite it with KWIN_BLESS=1.
fn golden(name: &str, actual: &str) {
    let path = root().join("tests/golden").join(format!("{name}.txt"));
    if std::env::var_os("KWIN_BLESS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().expect("golden dir")).expect("mkdir golden");
        std::fs::write(&path, actual).expect("write golden");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with KWIN_BLESS=1 to create it)",
            path.display()
        )
    });
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from `kwin graph --format text` at line {}:\n  golden: {:?}\n  actual: {:?}\n\
             (KWIN_BLESS=1 cargo test --test graph rewrites the goldens)",
            path.display(),
            line + 1,
            expected.lines().nth(line),
            actual.lines().nth(line)
        );
    }
}

fn graph_text_golden(plan: &str, name: &str) {
    let out = kwin_at_root(&["graph", plan, "--format", "text"]);
    assert!((out.code == 0), "kwin graph {plan}: {}", out.stderr.clone());
    golden(name, &out.stdout.clone());
}

#[test]
fn golden_flannel() {
    graph_text_golden("examples/flannel.toml", "flannel");
}

#[test]
fn golden_calico() {
    graph_text_golden("examples/calico.toml", "calico");
}

#[test]
fn golden_docker() {
    graph_text_golden("tests/plans/docker.toml", "docker");
}

#[test]
fn golden_tasks_without_cluster() {
    graph_text_golden("tests/plans/tasks.toml", "tasks");
}

fn load_str(text: &str) -> kwin_engine::plan::LoadedPlan {
    kwin_engine::plan::load_str(Path::new("plan.toml"), text).unwrap_or_else(|d| panic!("{d}"))
}

fn expand(plan: &kwin_engine::plan::LoadedPlan) -> Result<TaskGraph, Diagnostics> {
    let tasks = kwin_engine::expand::expand(plan, kwin_modules::recipes::RECIPES)?;
    TaskGraph::build(tasks)
}

fn build(path: &str) -> TaskGraph {
    let plan = kwin_engine::plan::load(&root().join(path)).unwrap_or_else(|d| panic!("{d}"));
    expand(&plan).unwrap_or_else(|d| panic!("{d}"))
}

fn node(g: &TaskGraph, id: &str) -> petgraph::graph::NodeIndex {
    let (h, n) = id.split_once('/').expect("host/task");
    g.node(&kwin_engine::task::TaskId::new(h, n))
        .unwrap_or_else(|| panic!("no task {id}"))
}

fn ids_named<'a>(
    g: &'a TaskGraph,
    name: &'a str,
) -> impl Iterator<Item = petgraph::graph::NodeIndex> + 'a {
    g.graph
        .node_indices()
        .filter(move |n| g.task(*n).id.name == name)
}

fn has_edge(g: &TaskGraph, from: &str, to: &str, kind: EdgeKind) -> bool {
    let (f, t) = (node(g, from), node(g, to));
    g.dependencies(t).any(|(d, k)| d == f && k == kind)
}

/// The guarantees every cluster graph gives, whatever the goldens say.
fn check_cluster_structure(g: &TaskGraph, cp: &str, windows: &[&str]) {
    let join_data = node(g, &format!("{cp}/join-data"));
    let init = node(g, &format!("{cp}/kubeadm-init"));
    let cni_ready = node(g, &format!("{cp}/cni-ready"));
    let joins: Vec<_> = ids_named(g, "kubeadm-join").collect();
    assert!(!joins.is_empty(), "no joins");
    for &j in &joins {
        let t = g.task(j);
        // Every join reads the first control plane's join data: a data edge, and the inputs.
        assert!(
            g.dependencies(j)
                .any(|(d, k)| d == join_data && k == EdgeKind::Data),
            "{} has no data edge from {cp}/join-data",
            t.id
        );
        for key in ["token", "ca_cert_hash", "api_endpoint"] {
            let input = t
                .inputs
                .get(key)
                .unwrap_or_else(|| panic!("{} lacks {key}", t.id));
            assert_eq!(input.from, g.task(join_data).id);
            assert_eq!(input.key, key);
        }
    }
    // The pod network is applied after kubeadm init.
    assert!(g.reaches(init, cni_ready));
    // Windows joins wait for the CNI manifests.
    for w in windows {
        let j = node(g, &format!("{w}/kubeadm-join"));
        assert!(
            has_edge(
                g,
                &format!("{cp}/cni-ready"),
                &format!("{w}/kubeadm-join"),
                EdgeKind::After
            ),
            "{w} joins before the CNI is ready"
        );
        assert!(g.reaches(cni_ready, j));
        // Windows taints its node.
        let taints = &g.task(j).params["taints"];
        assert!(
            taints
                .as_array()
                .is_some_and(|a| a.iter().any(|t| t == "os=windows:NoSchedule")),
            "{taints}"
        );
    }
    if !windows.is_empty() {
        assert!(g.reaches(init, node(g, &format!("{cp}/runtime-classes"))));
    } else {
        assert!(ids_named(g, "runtime-classes").next().is_none());
    }
    // The node-ready wait comes last: after every join, and nothing follows it.
    let ready = node(g, &format!("{cp}/nodes-ready"));
    for &j in &joins {
        assert!(
            g.reaches(j, ready),
            "{} before {}",
            g.task(ready).id,
            g.task(j).id
        );
    }
    // Then kubeadm's kube-proxy rolled out (it moves to a new version's image on upgrade),
    // and nothing follows that.
    let proxy = node(g, &format!("{cp}/kube-proxy-rollout"));
    assert_eq!(
        g.graph.neighbors(ready).collect::<Vec<_>>(),
        [proxy],
        "only the kube-proxy rollout follows the node-ready wait"
    );
    assert_eq!(
        g.graph.neighbors(proxy).count(),
        0,
        "something follows the kube-proxy rollout"
    );
    // Every runtime service comes after its configuration file and restarts when it changes.
    for n in ids_named(g, "containerd-config").chain(ids_named(g, "docker-config")) {
        let config = g.task(n);
        let service = if config.id.name == "containerd-config" {
            "containerd"
        } else {
            "docker"
        };
        let svc = node(g, &format!("{}/{service}", config.id.host));
        assert!(g.reaches(n, svc), "{} before its config", g.task(svc).id);
        let path = &config.params["path"];
        let restart_on = g.task(svc).params["restart_on"]
            .as_array()
            .unwrap_or_else(|| panic!("{} has no restart_on", g.task(svc).id));
        assert!(
            restart_on.contains(path),
            "{}: {restart_on:?}",
            g.task(svc).id
        );
    }
    // The topological order puts every dependency first.
    let order = g.topo_order();
    assert_eq!(order.len(), g.len());
    let pos: std::collections::HashMap<_, _> =
        order.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    for e in g.graph.edge_indices() {
        let (a, b) = g.graph.edge_endpoints(e).expect("edge");
        assert!(pos[&a] < pos[&b]);
    }
}

#[test]
fn flannel_structure() {
    let g = build("examples/flannel.toml");
    check_cluster_structure(&g, "cp1", &["ww1", "ww2"]);
    assert!(g
        .node(&kwin_engine::task::TaskId::new("cp1", "flannel-windows"))
        .is_some());
    let flannel = g.task(node(&g, "cp1/flannel"));
    let net_conf = flannel.params["patches"][0]["merge"]["data"]["net-conf.json"]
        .as_str()
        .expect("net-conf.json");
    for s in [
        "\"Network\": \"10.244.0.0/16\"",
        "\"VNI\": 4096",
        "\"Port\": 4789",
    ] {
        assert!(net_conf.contains(s), "{net_conf}");
    }
    let cni_conf = flannel.params["patches"][0]["merge"]["data"]["cni-conf.json"]
        .as_str()
        .expect("cni-conf.json");
    assert!(cni_conf.contains("\"name\": \"vxlan0\""), "{cni_conf}");
    assert_eq!(
        flannel.params["patches"][1]["merge"]["spec"]["template"]["spec"]["nodeSelector"]
            ["kubernetes.io/os"],
        "linux"
    );
}

/// Every program a Windows DaemonSet's pod template names (a versioned path under `C:\\k`,
/// in the container's env) is put there by a step on every Windows node, and the apply of
/// the DaemonSet waits for each of those steps: a new version never rolls pods onto a node
/// that does not have its binary yet. The DaemonSets still exist before any Windows node
/// joins (the join waits for their applies), so a fresh build has no cycle, and the Linux pod
/// network (`cni-ready`) waits for no Windows node; and kube-proxy follows
/// every control plane's `kubeadm upgrade` (kube-proxy must not be newer than
/// kube-apiserver, as kubeadm upgrades its own kube-proxy add-on only once every control
/// plane is upgraded).
fn check_windows_daemonsets_wait_for_their_binaries(g: &TaskGraph, cp: &str, daemonsets: &[&str]) {
    let windows: Vec<String> = ids_named(g, "kubeadm-join")
        .map(|j| g.task(j).id.host.clone())
        .filter(|h| h.starts_with("ww"))
        .collect();
    assert!(!windows.is_empty());
    for ds in daemonsets {
        let apply = node(g, &format!("{cp}/{ds}"));
        let manifest = g.task(apply).params["manifest"]
            .as_str()
            .unwrap_or_else(|| panic!("{cp}/{ds}: no manifest"))
            .to_string();
        let paths: Vec<String> = manifest
            .lines()
            .filter_map(|l| l.trim().strip_prefix("value: "))
            .filter_map(|v| serde_json::from_str::<String>(v).ok())
            .filter(|v| v.starts_with("C:\\k\\"))
            .collect();
        assert!(!paths.is_empty(), "{ds}: no program path in its env");
        for w in &windows {
            for path in &paths {
                let placed: Vec<_> = g
                    .graph
                    .node_indices()
                    .filter(|&n| {
                        let t = g.task(n);
                        t.id.host == *w
                            && t.params["dest"].as_str().is_some_and(|d| {
                                path == d || path.rsplit_once('\\').is_some_and(|(dir, _)| dir == d)
                            })
                    })
                    .collect();
                assert!(!placed.is_empty(), "{w}: nothing puts {path} in place");
                for p in placed {
                    assert!(
                        g.reaches(p, apply),
                        "{cp}/{ds} does not wait for {} ({path})",
                        g.task(p).id
                    );
                }
            }
            assert!(
                g.reaches(apply, node(g, &format!("{w}/kubeadm-join"))),
                "{w} joins before {ds} exists"
            );
        }
    }
    // The pod network itself never waits for a Windows node: one that fails leaves the Linux
    // nodes' network applied and ready.
    let cni_ready = node(g, &format!("{cp}/cni-ready"));
    for n in g.graph.node_indices() {
        let t = g.task(n);
        if windows.contains(&t.id.host) {
            assert!(
                !g.reaches(n, cni_ready),
                "{cp}/cni-ready waits for {}",
                t.id
            );
        }
    }
    let kube_proxy = node(g, &format!("{cp}/kube-proxy-windows"));
    for u in ids_named(g, "cp-kubeadm-upgrade") {
        assert!(
            g.reaches(u, kube_proxy),
            "kube-proxy-windows before {}",
            g.task(u).id
        );
    }
}

#[test]
fn flannel_windows_daemonsets_wait_for_their_binaries() {
    let g = build("examples/flannel.toml");
    check_windows_daemonsets_wait_for_their_binaries(
        &g,
        "cp1",
        &["kube-proxy-windows", "flannel-windows"],
    );
}

#[test]
fn calico_windows_daemonsets_wait_for_their_binaries() {
    let g = build("examples/calico.toml");
    check_windows_daemonsets_wait_for_their_binaries(&g, "cp1", &["kube-proxy-windows"]);
}

/// `cluster.windows_pending_reboot = "drain"`: each Windows worker's drain reads the
/// install path's `reboot` output (a data edge), its restart comes after the drain and reads
/// the same output, the uncordon after the restart; one node at a time, after every upgrade
/// wave, before the cluster's last readiness wait. Without it (the default) none of these
/// tasks exist.
#[test]
fn a_pending_reboot_is_drained_restarted_and_uncordoned_one_node_at_a_time() {
    let text = std::fs::read_to_string(root().join("examples/flannel.toml"))
        .expect("example")
        .replacen(
            "windows_runtime_classes = true",
            "windows_runtime_classes = true\nwindows_pending_reboot = \"drain\"",
            1,
        );
    let plan = kwin_engine::plan::load_str(&root().join("examples/flannel.toml"), &text)
        .unwrap_or_else(|d| panic!("{d}"));
    let g = expand(&plan).unwrap_or_else(|d| panic!("{d}"));
    for w in ["ww1", "ww2"] {
        let drain = format!("cp1/reboot-drain@{w}");
        let restart = format!("{w}/reboot-drained");
        let uncordon = format!("cp1/reboot-uncordon@{w}");
        for consumer in [&drain, &restart] {
            assert!(
                has_edge(&g, &format!("{w}/reboot"), consumer, EdgeKind::Data),
                "{consumer} does not read {w}/reboot"
            );
            let t = g.task(node(&g, consumer));
            assert_eq!(t.params["only_if"], "reboot_pending", "{consumer}");
            assert_eq!(t.inputs["reboot_pending"].key, "pending", "{consumer}");
        }
        assert_eq!(
            g.task(node(&g, &format!("{w}/reboot"))).params["on_joined"],
            "drain"
        );
        assert!(g.reaches(node(&g, &drain), node(&g, &restart)));
        assert!(g.reaches(node(&g, &restart), node(&g, &uncordon)));
        for up in ["ww1", "ww2", "lw1"] {
            assert!(
                g.reaches(
                    node(&g, &format!("cp1/upgrade-uncordon@{up}")),
                    node(&g, &drain)
                ),
                "{drain} before {up}'s upgrade wave ended"
            );
        }
        assert!(g.reaches(node(&g, &uncordon), node(&g, "cp1/nodes-ready")));
    }
    assert!(
        g.reaches(
            node(&g, "cp1/reboot-uncordon@ww1"),
            node(&g, "cp1/reboot-drain@ww2")
        ),
        "two Windows nodes drained for a reboot at once"
    );
    let default = build("examples/flannel.toml");
    assert!(ids_named(&default, "reboot-drain").next().is_none());
    assert_eq!(
        default.task(node(&default, "ww1/reboot")).params["on_joined"],
        "report"
    );
}

#[test]
fn calico_structure() {
    let g = build("examples/calico.toml");
    check_cluster_structure(&g, "cp1", &["ww1", "ww2"]);
    // IPAM and Felix: one command, in whichever API group the operator installed.
    let settings = g.task(node(&g, "cp1/calico-ipam-felix"));
    assert_eq!(settings.module, "command");
    let run = settings.params["run"].as_str().expect("run");
    for want in [
        "strictAffinity: true",
        "api=crd.projectcalico.org/v1",
        "api=projectcalico.org/v3",
    ] {
        assert!(run.contains(want), "{want} not in {run}");
    }
    assert!(settings.params["onlyif"]
        .as_str()
        .is_some_and(|c| c.ends_with("kw_differs\n")));
    let crds = g.task(node(&g, "cp1/calico-crds"));
    assert_eq!(
        crds.params["names"],
        serde_json::json!(["installations.operator.tigera.io"])
    );
    let inst = g.task(node(&g, "cp1/calico-installation"));
    let m = inst.params["manifest"].as_str().expect("manifest");
    for s in [
        "encapsulation: VXLAN",
        "bgp: Disabled",
        "cidr: \"192.168.0.0/16\"",
        "windowsDataplane: HNS",
    ] {
        assert!(m.contains(s), "{m}");
    }
    assert!(ids_named(&g, "flannel").next().is_none());
}

#[test]
fn docker_structure() {
    let g = build("tests/plans/docker.toml");
    check_cluster_structure(&g, "cp1", &[]);
    assert!(ids_named(&g, "containerd").next().is_none());
    let join = g.task(node(&g, "lw2/kubeadm-join"));
    assert_eq!(join.params["node_ip"], "10.2.0.12");
    assert_eq!(join.params["cri_socket"], "unix:///run/cri-dockerd.sock");
    // cri-dockerd restarts when its binary or unit changes.
    let restart_on = &g.task(node(&g, "lw1/cri-dockerd")).params["restart_on"];
    assert!(
        restart_on
            .as_array()
            .is_some_and(|a| a.iter().any(|p| p == "/usr/local/bin/cri-dockerd")),
        "{restart_on}"
    );
}

#[test]
fn dot_has_a_cluster_per_host_and_dashed_data_edges() {
    let out = kwin_at_root(&["graph", "examples/flannel.toml"]);
    assert!((out.code == 0), "{}", out.stderr.clone());
    let dot = out.stdout.clone();
    assert!(dot.starts_with("digraph kwin {"), "{dot}");
    assert_eq!(dot.matches("subgraph cluster_").count(), 4);
    assert!(
        dot.contains("\"cp1/join-data\" -> \"lw1/kubeadm-join\" [style=dashed, label=\"data\"];"),
        "{dot}"
    );
}

fn write_plan(dir: &tempfile::TempDir, body: &str) -> String {
    let p = dir.path().join("plan.toml");
    std::fs::write(&p, body).expect("write plan");
    p.display().to_string()
}

const TWO_HOSTS: &str = r#"
[[hosts]]
name = "a"
address = "10.0.0.1"
os = "linux"

[[hosts]]
name = "b"
address = "10.0.0.2"
os = "linux"
"#;

#[test]
fn cycle_through_user_tasks_names_every_task() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = write_plan(
        &dir,
        &format!(
            "{TWO_HOSTS}
[[tasks]]
name = \"one\"
module = \"command\"
on = {{ hosts = [\"a\"] }}
after = [\"b:three\"]
params = {{ run = \"true\", creates = \"/tmp/done\" }}

[[tasks]]
name = \"two\"
module = \"command\"
on = {{ hosts = [\"a\"] }}
after = [\"one\"]
params = {{ run = \"true\", creates = \"/tmp/done\" }}

[[tasks]]
name = \"three\"
module = \"command\"
on = {{ hosts = [\"b\"] }}
after = [\"a:two\"]
params = {{ run = \"true\", creates = \"/tmp/done\" }}
"
        ),
    );
    let out = kwin_at_root(&["graph", &plan, "--format", "text"]);
    assert_eq!(Some(out.code), Some(1));
    assert!(out.stdout.is_empty());
    let err = out.stderr.clone();
    assert!(
        err.contains("tasks form a cycle: a/one -> a/two -> b/three -> a/one"),
        "{err}"
    );
    assert!(err.contains("plan.toml:"), "no plan location: {err}");
}

#[test]
fn unknown_after_points_at_the_plan_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = write_plan(
        &dir,
        &format!(
            "{TWO_HOSTS}
[[tasks]]
name = \"motd\"
module = \"file\"
params = {{ path = \"/etc/motd\", content = \"hi\" }}

[[tasks]]
name = \"restart\"
module = \"command\"
after = [\"mtod\"]
params = {{ run = \"true\", creates = \"/tmp/done\" }}

[[tasks]]
name = \"elsewhere\"
module = \"command\"
after = [\"zz:motd\"]
params = {{ run = \"true\", creates = \"/tmp/done\" }}
"
        ),
    );
    let out = kwin_at_root(&["graph", &plan]);
    assert_eq!(Some(out.code), Some(1));
    let err = out.stderr.clone();
    // tasks[1].after[0] is on line 20 of the plan; tasks[2].after[0] on line 26. (Validation
    // may report them before expansion does, in its own words.)
    let line = |n: &str| {
        err.lines()
            .find(|l| l.contains(n))
            .unwrap_or_else(|| panic!("no diagnostic at {n}: {err}"))
            .to_string()
    };
    let l = line("plan.toml:20:10:");
    assert!(l.contains("task `restart`") && l.contains("`mtod`"), "{l}");
    assert!(err.contains("did you mean `motd`?"), "{err}");
    let l = line("plan.toml:26:10:");
    assert!(l.contains("task `elsewhere`") && l.contains("`zz"), "{l}");
}

const CLUSTER: &str = r#"
[cluster]
name = "t"
kubernetes_version = "1.31.4"

[cni]
plugin = "flannel"

[[hosts]]
name = "cp1"
address = "10.0.0.10"
os = "linux"
role = "control-plane"

[[hosts]]
name = "w1"
address = "10.0.0.11"
os = "linux"
role = "worker"
"#;

#[test]
fn user_tasks_join_the_cluster_graph() {
    let plan = load_str(&format!(
        "{CLUSTER}
[[tasks]]
name = \"audit-policy\"
module = \"file\"
on = {{ roles = [\"control-plane\"] }}
after = [\"kubelet\"]
params = {{ path = \"/etc/kubernetes/audit.yaml\", content = \"# {{{{ cluster.name }}}}\" }}

[[tasks]]
name = \"after-init\"
module = \"command\"
on = {{ roles = [\"worker\"] }}
after = [\"@first_control_plane:kubeadm-init\"]
params = {{ run = \"true\", creates = \"/tmp/done\" }}
"
    ));
    let g = expand(&plan).unwrap_or_else(|d| panic!("{d}"));
    let audit = node(&g, "cp1/audit-policy");
    assert_eq!(g.task(audit).params["content"], "# t");
    assert!(has_edge(
        &g,
        "cp1/kubelet",
        "cp1/audit-policy",
        EdgeKind::After
    ));
    // The first control plane's step, on the worker.
    let deps: Vec<String> = g
        .dependencies(node(&g, "w1/after-init"))
        .map(|(d, _)| g.task(d).id.to_string())
        .collect();
    assert_eq!(deps, ["cp1/kubeadm-init"]);
    // `kubeadm-init` does not run on w1: a same-host reference to it is refused, never
    // dropped (the task would start on w1 before anything it waits for).
    let plan = load_str(&format!(
        "{CLUSTER}
[[tasks]]
name = \"after-init\"
module = \"command\"
after = [\"kubeadm-init\"]
params = {{ run = \"true\", creates = \"/tmp/done\" }}
"
    ));
    let d = expand(&plan).map(|_| ()).expect_err("refused");
    assert!(
        d.0.iter()
            .any(|d| d.code == "task-after"
                && d.summary.contains("@first_control_plane:kubeadm-init")),
        "{d}"
    );
}

#[test]
fn user_task_inputs_are_data_edges() {
    let plan = load_str(&format!(
        "{CLUSTER}
[[tasks]]
name = \"custom-join\"
module = \"command\"
on = {{ hosts = [\"w1\"] }}
inputs = {{ token = \"@first_control_plane:join-data.token\", endpoint = \"cp1:join-data.api_endpoint\" }}
params = {{ run = \"true\", creates = \"/tmp/done\" }}
"
    ));
    let g = expand(&plan).unwrap_or_else(|d| panic!("{d}"));
    let t = g.task(node(&g, "w1/custom-join"));
    let inputs: Vec<(String, String, String)> = t
        .inputs
        .iter()
        .map(|(k, r)| (k.clone(), r.from.to_string(), r.key.clone()))
        .collect();
    assert_eq!(
        inputs,
        [
            ("endpoint", "cp1/join-data", "api_endpoint"),
            ("token", "cp1/join-data", "token")
        ]
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    );
    assert!(has_edge(
        &g,
        "cp1/join-data",
        "w1/custom-join",
        EdgeKind::Data
    ));

    // Without `.output` the output named like the input is read; the task must run there.
    let bad = load_str(&format!(
        "{CLUSTER}
[[tasks]]
name = \"custom-join\"
module = \"command\"
on = {{ hosts = [\"w1\"] }}
inputs = {{ token = \"cp1:join-data\", other = \"cp1:no-such-task.token\" }}
params = {{ run = \"true\", creates = \"/tmp/done\" }}
"
    ));
    let err = expand(&bad)
        .map(|_| ())
        .expect_err("bad inputs")
        .to_string();
    assert!(
        err.contains("input `other`")
            && err.contains("`no-such-task`, which is not a task or recipe step"),
        "{err}"
    );
    assert!(!err.contains("input `token`"), "{err}");
}

#[test]
fn user_task_may_not_take_a_recipe_step_name() {
    let plan = load_str(&format!(
        "{CLUSTER}
[[tasks]]
name = \"kubelet\"
module = \"command\"
on = {{ hosts = [\"w1\"] }}
params = {{ run = \"true\", creates = \"/tmp/done\" }}
"
    ));
    let err = expand(&plan).expect_err("clash").to_string();
    assert!(
        err.contains("task `w1/kubelet` is defined twice: by step `kubelet` of recipe `kube-packages` and by the plan's tasks[0]"),
        "{err}"
    );
    assert!(err.contains("plan.toml:"), "{err}");
}

#[test]
fn user_task_template_errors_point_at_the_param() {
    let plan = load_str(&format!(
        "{TWO_HOSTS}
[[tasks]]
name = \"motd\"
module = \"file\"
params = {{ path = \"/etc/motd\", content = \"{{{{ cluster.name }}}}\" }}
"
    ));
    let err = expand(&plan).expect_err("no cluster").to_string();
    assert!(
        err.contains("plan.toml:15:42: error[template]: task `motd`: params.content: undefined value `cluster`; templates can see: first_control_plane, host, hosts, var\n"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "reported once: {err}");
}

#[test]
fn recipe_template_error_names_recipe_step_and_line() {
    let bad = r#"recipe = "bad"
applies = { roles = ["worker"] }

[[steps]]
name = "fine"
module = "command"
params = { run = "true" }

[[steps]]
name = "config"
module = "file"
[steps.params]
path = "/etc/x"
content = '''
name: {{ cluster.name }}
pods: {{ cluster.pod_cdir }}
'''
"#;
    let plan = load_str(CLUSTER);
    let err = kwin_engine::expand::expand(&plan, &[("plans/bad.toml", bad)])
        .expect_err("strict undefined")
        .to_string();
    assert!(
        err.contains(
            "plans/bad.toml:16:1: error[template]: recipe `bad` step `config`: params.content: \
             undefined value `cluster.pod_cdir`"
        ),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "reported once: {err}");
}

#[test]
fn recipe_libraries_are_inserted_as_they_are() {
    let recipe = r#"recipe = "uses-lib"
applies = { roles = ["worker"] }

[[steps]]
name = "script"
module = "file"
[steps.params]
path = "/etc/x"
content = '''
{{ lib.shared }}
echo {{ cluster.name | sh }}
'''
"#;
    // A library is text, never a template: `{{` in it stays as it is.
    let lib = "# shared\nf() { echo '{{ x }}'; }\n";
    let plan = load_str(CLUSTER);
    let tasks = kwin_engine::expand::expand(
        &plan,
        &[
            ("plans/lib/shared.sh", lib),
            ("plans/uses-lib.toml", recipe),
        ],
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let t = tasks
        .iter()
        .find(|t| t.id.name == "script")
        .expect("the step expanded");
    assert_eq!(
        t.params["content"].as_str(),
        Some(format!("{lib}\necho t\n").as_str())
    );
    // An unknown library is an undefined value; a badly named one is refused.
    let err = kwin_engine::expand::expand(&plan, &[("plans/uses-lib.toml", recipe)])
        .expect_err("no such library")
        .to_string();
    assert!(
        err.contains("step `script`: params.content: undefined value `lib"),
        "{err}"
    );
    let err = kwin_engine::expand::expand(
        &plan,
        &[
            ("plans/lib/Shared-Lib.sh", lib),
            ("plans/uses-lib.toml", recipe),
        ],
    )
    .expect_err("bad library name")
    .to_string();
    assert!(err.contains("error[recipe-library]"), "{err}");
}

#[test]
fn recipe_asserts_point_at_the_host() {
    let plan = load_str(
        r#"
[cluster]
name = "t"
kubernetes_version = "1.31.4"
[cni]
plugin = "flannel"
[runtime]
windows = "docker"
[defaults.windows]
password_env = "PW"
[[hosts]]
name = "cp1"
address = "10.0.0.10"
os = "linux"
role = "control-plane"
[[hosts]]
name = "ww1"
address = "10.0.0.21"
os = "windows"
role = "worker"
"#,
    );
    let err = expand(&plan).expect_err("docker on windows").to_string();
    assert!(err.contains("plan.toml:17:"), "{err}");
    assert!(
        err.contains("host `ww1`: Windows workers run containerd"),
        "{err}"
    );
}

#[test]
fn additional_control_planes_join_with_the_certificate_key() {
    let plan = load_str(
        r#"
[cluster]
name = "ha"
kubernetes_version = "1.31.4"
control_plane_endpoint = "api.lab:6443"
[cni]
plugin = "calico"
[[hosts]]
name = "cp1"
address = "10.0.0.10"
os = "linux"
role = "control-plane"
[[hosts]]
name = "cp2"
address = "10.0.0.11"
os = "linux"
role = "control-plane"
"#,
    );
    let g = expand(&plan).unwrap_or_else(|d| panic!("{d}"));
    let join = g.task(node(&g, "cp2/kubeadm-join"));
    assert_eq!(join.params["control_plane"], true);
    assert_eq!(join.inputs["certificate_key"].key, "certificate_key");
    assert!(g
        .node(&kwin_engine::task::TaskId::new("cp2", "kubeadm-init"))
        .is_none());
    assert_eq!(
        g.task(node(&g, "cp1/kubeadm-init")).params["upload_certs"],
        true
    );
    assert!(g.reaches(node(&g, "cp2/kubeadm-join"), node(&g, "cp1/nodes-ready")));
}

/// A plan of `n` hosts: one control plane, then Linux and Windows workers alternating.
pub fn big_plan_pub(n: usize) -> String {
    big_plan(n)
}
fn big_plan(n: usize) -> String {
    let mut s = String::from(
        "[cluster]\nname = \"big\"\nkubernetes_version = \"1.31.4\"\npod_cidr = \"10.128.0.0/9\"\n\
         [cni]\nplugin = \"flannel\"\n[defaults.windows]\npassword_env = \"PW\"\n\
         [[hosts]]\nname = \"cp1\"\naddress = \"10.0.0.1\"\nos = \"linux\"\nrole = \"control-plane\"\n",
    );
    for i in 1..n {
        let os = if i % 2 == 0 { "windows" } else { "linux" };
        s.push_str(&format!(
            "[[hosts]]\nname = \"n{i}\"\naddress = \"10.{}.{}.{}\"\nos = \"{os}\"\nrole = \"worker\"\n",
            i / 65536,
            (i / 256) % 256,
            i % 256
        ));
    }
    s
}

#[test]
fn thousand_hosts_build() {
    let plan = load_str(&big_plan(1000));
    let g = expand(&plan).unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(ids_named(&g, "kubeadm-join").count(), 999);
    let ready = node(&g, "cp1/nodes-ready");
    let after = |name: &str| {
        g.dependencies(ready)
            .filter(|(d, k)| *k == EdgeKind::After && g.task(*d).id.name.starts_with(name))
            .count()
    };
    assert_eq!(after("kubeadm-join"), 999);
    // Every node's upgrade, Linux and Windows, ends with its uncordon (delegated to cp1)
    // before it.
    assert_eq!(
        after("cp-upgrade-uncordon@") + after("upgrade-uncordon@"),
        plan.hosts.len()
    );
    assert_eq!(g.topo_order().len(), g.len());
    assert!(g.len() > 15_000, "{} tasks", g.len());
    // Host-independent params are shared, host-specific ones are not.
    assert_eq!(
        g.task(node(&g, "n999/kubeadm-join")).params["node_name"],
        "n999"
    );
}

/// Recipe steps whose params an implemented module does not accept yet, with the reason. A step
/// listed here that builds fine is an error too: remove it from the list.
const PARAM_GAPS: &[(&str, &str, &str)] = &[];

/// Every recipe task whose module is implemented for its host's shell builds from its params:
/// the recipes speak the modules' language.
fn check_params_against_modules(plan_text: &str) -> usize {
    use kwin_engine::module::Registry;
    let registry = kwin_modules::Builtin;
    let names = registry.names();
    let plan = load_str(plan_text);
    let tasks = kwin_engine::expand::expand(&plan, kwin_modules::recipes::RECIPES)
        .unwrap_or_else(|d| panic!("{d}"));
    let mut checked = 0;
    for t in &tasks {
        let Origin::Recipe { recipe, step } = &t.origin else {
            continue;
        };
        if !names.contains(&t.module.as_str()) {
            continue; // not implemented yet
        }
        let shell = plan.host(&t.id.host).expect("host").conn.shell();
        let gap = PARAM_GAPS.iter().find(|(r, s, _)| r == recipe && s == step);
        match (registry.build(&t.module, shell, &t.params), gap) {
            (Err(e), _) if e.message.contains("is not available on") => continue,
            (Ok(_), None) => checked += 1,
            (Err(_), Some(_)) => {}
            (Err(e), None) => panic!(
                "{}: recipe `{recipe}` step `{step}`: module `{}` rejects its params: {e}\n{}",
                t.id, t.module, t.params
            ),
            (Ok(_), Some((_, _, why))) => {
                panic!("{}: builds now; remove it from PARAM_GAPS ({why})", t.id)
            }
        }
    }
    checked
}

/// `[artifacts.sha256]` pins for every artifact the recipes download (test values).
const PINS: &str = r#"
[artifacts.sha256]
"containerd-1.7.24-linux-amd64.tar.gz" = "1111111111111111111111111111111111111111111111111111111111111111"
"containerd-1.7.24-windows-amd64.tar.gz" = "2222222222222222222222222222222222222222222222222222222222222222"
"cni-plugins-windows-amd64-v1.6.1.tgz" = "3333333333333333333333333333333333333333333333333333333333333333"
"kubelet.exe" = "4444444444444444444444444444444444444444444444444444444444444444"
"kubeadm.exe" = "5555555555555555555555555555555555555555555555555555555555555555"
"runc.amd64" = "6666666666666666666666666666666666666666666666666666666666666666"
"containerd.service" = "7777777777777777777777777777777777777777777777777777777777777777"
"cri-dockerd-0.3.17.amd64.tgz" = "8888888888888888888888888888888888888888888888888888888888888888"
"kube-log-runner.exe" = "9999999999999999999999999999999999999999999999999999999999999999"
"crictl-v1.31.0-windows-amd64.tar.gz" = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
"kube-proxy.exe" = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
"flannel-v0.26.2-windows-amd64.tar.gz" = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
"cni-plugin-flannel-windows-amd64-v1.9.1-flannel3.tgz" = "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
"windows-container-networking-cni-amd64-v0.3.1.zip" = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
"containerd-2.3.7-linux-amd64.tar.gz" = "1111111111111111111111111111111111111111111111111111111111111112"
"containerd-2.3.7-windows-amd64.tar.gz" = "2222222222222222222222222222222222222222222222222222222222222223"
"cni-plugins-windows-amd64-v1.10.0.tgz" = "3333333333333333333333333333333333333333333333333333333333333334"
"crictl-v1.37.0-windows-amd64.tar.gz" = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"
"flannel-v0.28.10-windows-amd64.tar.gz" = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccd"
"cri-dockerd-0.4.3.amd64.tgz" = "8888888888888888888888888888888888888888888888888888888888888889"
"tigera-operator.yaml" = "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
"#;

/// `text` without its `[artifacts.sha256]` table (up to the next blank line): PINS replaces it.
fn without_pins(text: &str) -> String {
    let mut out = String::new();
    let mut skipping = false;
    for line in text.lines() {
        if line.trim() == "[artifacts.sha256]" {
            skipping = true;
        } else if skipping && line.trim().is_empty() {
            skipping = false;
        }
        if !skipping {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[test]
fn recipe_params_fit_the_implemented_modules() {
    let mut checked = 0;
    for example in [
        "examples/flannel.toml",
        "examples/calico.toml",
        "tests/plans/docker.toml",
    ] {
        let text = without_pins(&std::fs::read_to_string(root().join(example)).expect("read plan"));
        let release = text.replace(
            "windows = \"containerd\"",
            "windows = \"containerd\"\ncontainerd_source = \"release\"",
        );
        checked += check_params_against_modules(&format!("{text}\n{PINS}"));
        checked += check_params_against_modules(&format!("{release}\n{PINS}"));
    }
    assert!(checked > 0, "no implemented module was checked");
}

/// A recipe's template that would loop for hours runs out of fuel: the error names the
/// recipe, the step, and the template's line in the recipe file.
#[test]
fn a_recipe_template_out_of_fuel_names_the_recipe_step_and_line() {
    let plan = load_str(
        r#"[cluster]
name = "lab"
kubernetes_version = "1.31.4"

[cni]
plugin = "flannel"

[[hosts]]
name = "cp1"
address = "10.0.0.1"
os = "linux"
role = "control-plane"
"#,
    );
    let recipe = r#"recipe = "loops"
applies = { first_control_plane = true }

[[steps]]
name = "spin"
module = "command"
[steps.params]
run = "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}"
"#;
    let t0 = std::time::Instant::now();
    let err = match kwin_engine::expand::expand(&plan, &[("loops.toml", recipe)]) {
        Ok(_) => panic!("the loops rendered"),
        Err(d) => d.to_string(),
    };
    assert!(t0.elapsed() < std::time::Duration::from_secs(30));
    assert!(
        err.contains("recipe `loops` step `spin`") && err.contains("ran out of fuel"),
        "{err}"
    );
    assert!(err.contains("loops.toml:8:"), "the recipe line: {err}");
}

/// A host runs its tasks in the graph's order restricted to the host, and a task waiting for
/// another host holds back every later task of its host (`exec/worker`). That costs nothing
/// only while no later task of the host is independent of the waiting one: in the example
/// clusters, everything a host does after a cross-host wait (a join after the control plane's
/// join data, a drain after the node's join, the cluster-ready wait after every join) depends
/// on that wait, so no step is held back that could have run.
#[test]
fn no_task_is_held_back_behind_a_wait_for_another_host() {
    use petgraph::Direction;
    use std::collections::HashSet;
    for plan in ["examples/flannel.toml", "examples/calico.toml"] {
        let g = build(plan);
        let ancestors = |n| {
            let mut seen = HashSet::new();
            let mut todo = vec![n];
            while let Some(x) = todo.pop() {
                for p in g.graph.neighbors_directed(x, Direction::Incoming) {
                    if seen.insert(p) {
                        todo.push(p);
                    }
                }
            }
            seen
        };
        let order = g.topo_order();
        let hosts: HashSet<&str> = order.iter().map(|&n| g.task(n).id.host.as_str()).collect();
        for host in hosts {
            let tasks: Vec<_> = order
                .iter()
                .copied()
                .filter(|&n| g.task(n).id.host == host)
                .collect();
            for (i, &t) in tasks.iter().enumerate() {
                let waits = g
                    .graph
                    .neighbors_directed(t, Direction::Incoming)
                    .any(|p| g.task(p).id.host != host);
                if !waits {
                    continue;
                }
                let held: Vec<String> = tasks[i + 1..]
                    .iter()
                    .filter(|&&u| !ancestors(u).contains(&t))
                    .map(|&u| g.task(u).id.to_string())
                    .collect();
                assert!(
                    held.is_empty(),
                    "{plan}: {} waits for another host and holds back {held:?}, which do not depend on it",
                    g.task(t).id
                );
            }
        }
    }
}
