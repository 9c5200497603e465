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

use kwin_testkit::{host::workspace, kwin, lab::Lab};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const LAB_ID: &str = "17";
const FROM: &str = "1.7.24";
const TO: &str = "1.7.27";

fn missing_prerequisite() -> Option<String> {
    if !kwin_testkit::host::is_root() {
        return Some("not running as root".into());
    }
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
    if swaps.lines().skip(1).any(|l| !l.trim().is_empty()) {
        return Some("this machine has swap on, which the lab cluster refuses to touch".into());
    }
    let cache = std::env::var("KWIN_APISERVER_CACHE")
        .unwrap_or_else(|_| "/var/cache/kwin-lab/apiserver".into());
    for bin in ["kube-apiserver", "kubeadm"] {
        let p = Path::new(&cache).join("bin").join(bin);
        if !p.exists() {
            return Some(format!(
                "{} is missing (run lab/apiserver/build.sh)",
                p.display()
            ));
        }
    }
    None
}

/// Two lab hosts and the stand-ins around them; torn down on drop (stand-ins first).
struct Cluster {
    env: BTreeMap<String, String>,
    lab: Lab,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(workspace().join("lab/cluster-stand-in/down.sh"))
            .env("KWIN_LAB_ID", LAB_ID)
            .output();
    }
}

impl Cluster {
    fn up() -> Cluster {
        if let Some(why) = missing_prerequisite() {
            panic!("the lab cluster cannot run here: {why}");
        }
        let lab = Lab::up(LAB_ID, 2);
        let out = Command::new(workspace().join("lab/cluster-stand-in/up.sh"))
            .env("KWIN_LAB_ID", LAB_ID)
            .env("KWIN_LAB_K8S_VERSIONS", "1.31.4")
            .env("KWIN_LAB_CONTAINERD_VERSIONS", format!("{FROM} {TO}"))
            .output()
            .expect("run lab/cluster-stand-in/up.sh");
        let mut c = Cluster {
            env: BTreeMap::new(),
            lab,
        };
        assert!(
            out.status.success(),
            "lab/cluster-stand-in/up.sh failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(c.dir().join("env")).expect("cluster env file");
        c.env = text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.trim_matches('\'').to_string()))
            .collect();
        c
    }

    /// `target/lab-17/cluster`.
    fn dir(&self) -> PathBuf {
        self.lab.inventory.with_file_name("cluster")
    }

    fn kubectl(&self, args: &[&str]) -> String {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.env["KUBECONFIG"])
            .args(args)
            .output()
            .expect("kubectl");
        assert!(
            out.status.success(),
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `name runtime unschedulable mark` of each Node.
    fn nodes(&self) -> String {
        self.kubectl(&[
            "get",
            "nodes",
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.name} {.status.nodeInfo.containerRuntimeVersion} {.spec.unschedulable} {.metadata.annotations.kwin\.dev/cordoned}{"\n"}{end}"#,
        ])
    }

    /// SHA-256 of a file the lab mirror serves.
    fn served(&self, rel: &str) -> String {
        let p = self.dir().join("www").join(rel);
        let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        hex::encode(Sha256::digest(bytes))
    }
}

/// examples/lab-cluster.toml for lab 17: h1 and h2 only, containerd from its release at
/// `containerd`, every release download pinned (the lab mirror is plain HTTP).
fn write_plan(c: &Cluster, dir: &Path, containerd: &str) {
    let text =
        std::fs::read_to_string(workspace().join("examples/lab-cluster.toml")).expect("example");
    let second = 213 + LAB_ID.parse::<u32>().expect("lab id");
    let (h3, _) = text
        .split_once("[[hosts]]\nname = \"h3\"")
        .expect("the example's h3");
    let mut pins = vec![
        format!(
            "\"runc.amd64\" = \"{}\"",
            c.served("github.com/opencontainers/runc/releases/download/v1.3.3/runc.amd64")
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
        .replace("10.213.", &format!("10.{second}."))
        .replace(
            "\"../modules/",
            &format!("\"{}/modules/", workspace().display()),
        )
        .replace("step_timeout = 300", "step_timeout = 150")
        .replace(
            "linux = \"containerd\"",
            &format!(
                "linux = \"containerd\"\ncontainerd_source = \"release\"\n\n[versions]\ncontainerd = \"{containerd}\""
            ),
        )
        .replace(
            "openpgp = {",
            &format!("sha256 = {{ {} }}\nopenpgp = {{", pins.join(", ")),
        );
    let text: String = text
        .lines()
        .map(|l| {
            if l.starts_with("inventory = ") {
                format!("inventory = {:?}", c.lab.inventory.display().to_string())
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        text.contains(&format!("containerd = \"{containerd}\"")),
        "{text}"
    );
    assert!(
        text.contains(&c.env["CONTROL_PLANE_ENDPOINT"]),
        "not lab 17's endpoint"
    );
    std::fs::write(dir.join("plan.toml"), text + "\n").expect("write plan");
}

fn apply(dir: &Path) -> kwin_testkit::kwin::Run {
    kwin!(dir, &["apply", "plan.toml", "--output", "json"])
}

kwin_testkit::lab_test! {
#[test]
fn a_containerd_release_change_drains_each_node_first() {
    let c = Cluster::up();
    let plan = c.lab.plan_dir("");
    let dir = plan.path();

    write_plan(&c, dir, FROM);
    let cold = apply(dir);
    assert_eq!(cold.code, 0, "cold apply:\n{cold}");
    assert_eq!(
        c.nodes(),
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
    let section = shown
        .events()
        .into_iter()
        .find(|e| e["event"] == "upgrade")
        .unwrap_or_else(|| panic!("no upgrade section:\n{shown}"));
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

    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    let up = apply(dir);
    assert_eq!(up.code, 0, "apply of containerd {TO}:\n{up}");
    // The oracle first: containerd never changed under a schedulable or undrained node.
    for h in ["h1", "h2"] {
        let violations = c.lab.ssh(h, "cat /var/lib/kubelet-stand-in/violations.log 2>/dev/null || true");
        assert_eq!(violations, "", "{h}: containerd changed under a schedulable or undrained node");
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
        c.nodes(),
        format!("h1 containerd://{TO}  \nh2 containerd://{TO}  \n"),
        "a node not at containerd {TO}, left cordoned or marked"
    );
    let evicted = c.kubectl(&["-n", "default", "get", "pods", "-o", "name"]);
    assert_eq!(evicted.trim(), "", "the drain did not evict web-0");
    // One node unschedulable at a time, none left.
    let timeline = std::fs::read_to_string(c.dir().join("timeline.log")).expect("timeline");
    let rows: Vec<Value> = timeline
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| {
            r["epoch"].as_f64().is_some_and(|t| t >= since) && r.get("unschedulable").is_some()
        })
        .collect();
    let mut cordoned = std::collections::BTreeSet::new();
    let mut most = 0;
    for r in &rows {
        let node = r["node"].as_str().unwrap_or("?").to_string();
        if r["unschedulable"] == true {
            cordoned.insert(node);
        } else {
            cordoned.remove(&node);
        }
        most = most.max(cordoned.len());
    }
    assert_eq!(most, 1, "not one node unschedulable at a time: {rows:?}");
    assert!(cordoned.is_empty(), "left unschedulable: {cordoned:?}");

    let again = apply(dir);
    assert_eq!(again.code, 0, "{again}");
    assert_eq!(again.summary()["changed"], 0, "the apply after the change changed something:\n{again}");
}
}
