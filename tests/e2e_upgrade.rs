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
//! Lab 9 (`KWIN_LAB_ID=9`) of its own. Lab tests (root, the API tier's binaries from
//! `lab/apiserver/build.sh`): ignored by `cargo test`, failing when run without what they
//! need. One cluster build for the whole test.

use kwin_testkit::{host::workspace, kwin, lab::Lab};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

const LAB_ID: &str = "9";
const FROM: &str = "1.31.4";
const TO: &str = "1.32.5";

/// Why the lab cluster cannot run here, if it cannot.
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

/// The lab hosts plus the stand-ins around them; both torn down on drop (stand-ins first).
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
        std::env::set_var("KWIN_LAB_ID", LAB_ID);
        let lab = Lab::up(LAB_ID, 3);
        let out = Command::new(workspace().join("lab/cluster-stand-in/up.sh"))
            .env("KWIN_LAB_ID", LAB_ID)
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

    /// `target/lab-9/cluster`.
    fn dir(&self) -> std::path::PathBuf {
        self.lab.inventory.with_file_name("cluster")
    }

    /// kubectl with the API tier's own admin kubeconfig (independent of kwin).
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

    /// The JSON lines of a file on a lab host (none if it does not exist).
    fn json_lines(&self, host: &str, path: &str) -> Vec<Value> {
        self.lab
            .ssh(host, &format!("cat {path} 2>/dev/null || true"))
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

/// `examples/lab-cluster.toml` for lab 9 at `version`.
fn write_plan(c: &Cluster, dir: &Path, version: &str) {
    let text =
        std::fs::read_to_string(workspace().join("examples/lab-cluster.toml")).expect("example");
    let second = 213 + LAB_ID.parse::<u32>().expect("lab id");
    let text = text
        .replace("10.213.", &format!("10.{second}."))
        .replace(
            "\"../modules/",
            &format!("\"{}/modules/", workspace().display()),
        )
        .replace("step_timeout = 300", "step_timeout = 150")
        .replace(
            &format!("kubernetes_version = \"{FROM}\""),
            &format!("kubernetes_version = \"{version}\""),
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
    assert!(text.contains(&format!("kubernetes_version = \"{version}\"")));
    assert!(
        text.contains(&c.env["CONTROL_PLANE_ENDPOINT"]),
        "not lab 9's endpoint"
    );
    std::fs::write(dir.join("plan.toml"), text).expect("write plan");
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

fn apply(dir: &Path) -> (kwin_testkit::kwin::Run, f64) {
    let t = Instant::now();
    let r = kwin!(dir, &["apply", "plan.toml", "--output", "json"]);
    (r, t.elapsed().as_secs_f64())
}

kwin_testkit::lab_test! {
#[test]
#[allow(clippy::print_stderr)]
fn flannel_upgrade_one_minor() {
    let c = Cluster::up();
    let plan = c.lab.plan_dir("");
    let dir = plan.path();

    // A cold apply builds the cluster at 1.31.4; every upgrade step is a no-op there (fresh
    // nodes are built at the version), and nothing waits on them but cluster-ready.
    write_plan(&c, dir, FROM);
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
    write_plan(&c, dir, TO);
    let shown = kwin!(dir, &["plan", "plan.toml", "--output", "json"]);
    assert_eq!(shown.code, 0, "{shown}");
    let section = shown
        .events()
        .into_iter()
        .find(|e| e["event"] == "upgrade")
        .unwrap_or_else(|| panic!("no upgrade section:\n{shown}"));
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
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
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

    // Every node at the version, as the kubelets and kubeadm report it.
    let nodes = c.kubectl(&[
        "get",
        "nodes",
        "-o",
        r#"jsonpath={range .items[*]}{.metadata.name} {.status.nodeInfo.kubeletVersion} {.spec.unschedulable} {.metadata.annotations.kwin\.dev/cordoned}{"\n"}{end}"#,
    ]);
    assert_eq!(
        nodes,
        format!("h1 v{TO}  \nh2 v{TO}  \nh3 v{TO}  \n"),
        "a node not at v{TO}, left cordoned or marked"
    );
    let config = c.kubectl(&[
        "-n",
        "kube-system",
        "get",
        "cm",
        "kubeadm-config",
        "-o",
        "jsonpath={.data.ClusterConfiguration}",
    ]);
    assert!(config.contains(&format!("kubernetesVersion: v{TO}")), "{config}");
    let apiserver = c.kubectl(&[
        "-n",
        "kube-system",
        "get",
        "pod",
        "kube-apiserver-h1",
        "-o",
        "jsonpath={.spec.containers[0].image}",
    ]);
    assert!(apiserver.ends_with(&format!(":v{TO}")), "{apiserver}");
    for h in ["h1", "h2", "h3"] {
        let v = c.lab.ssh(
            h,
            "dpkg-query -W -f '${Package}=${Version} ' kubeadm kubelet kubectl; apt-mark showhold | tr '\\n' ' '",
        );
        for want in [
            format!("kubeadm={TO}-1.1"),
            format!("kubelet={TO}-1.1"),
            format!("kubectl={TO}-1.1"),
            "kubeadm kubectl kubelet".into(),
        ] {
            assert!(v.contains(&want), "{h}: `{want}` not in `{v}`");
        }
        let violations = c.lab.ssh(h, "cat /var/lib/kubelet-stand-in/violations.log 2>/dev/null || true");
        assert_eq!(violations, "", "{h}: the kubelet stand-in saw a skew or an undrained upgrade");
    }

    // kubeadm: `upgrade apply` on h1 before any `upgrade node`, nothing refused.
    let calls: Vec<Value> = ["h1", "h2", "h3"]
        .iter()
        .flat_map(|h| c.json_lines(h, "/var/log/kubeadm-stand-in.log"))
        .filter(|e| e["epoch"].as_f64().is_some_and(|t| t >= since))
        .collect();
    let refused: Vec<&Value> = calls.iter().filter(|e| e["result"] != "ok").collect();
    assert!(refused.is_empty(), "kubeadm refused: {refused:?}");
    let at = |node: &str, verb: &str| {
        calls
            .iter()
            .find(|e| e["node"] == node && e["verb"] == verb)
            .and_then(|e| e["epoch"].as_f64())
            .unwrap_or_else(|| panic!("no `kubeadm {verb}` on {node}: {calls:?}"))
    };
    let applied = at("h1", "upgrade apply");
    for w in ["h2", "h3"] {
        assert!(at(w, "upgrade node") > applied, "{w} ran `upgrade node` before h1's apply");
    }

    // The timeline: never more than max_unavailable (1) node unschedulable, none left, h1's
    // kubelet at the version first.
    let timeline = std::fs::read_to_string(c.dir().join("timeline.log")).expect("timeline");
    let rows: Vec<Value> = timeline
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["epoch"].as_f64().is_some_and(|t| t >= since) && r.get("unschedulable").is_some())
        .collect();
    let mut cordoned = std::collections::BTreeSet::new();
    let (mut most, mut first_new) = (0, Vec::new());
    for r in &rows {
        let node = r["node"].as_str().unwrap_or("?").to_string();
        if r["unschedulable"] == true {
            cordoned.insert(node.clone());
        } else {
            cordoned.remove(&node);
        }
        most = most.max(cordoned.len());
        if r["kubelet"] == format!("v{TO}") && !first_new.contains(&node) {
            first_new.push(node);
        }
    }
    assert_eq!(most, 1, "more than one node unschedulable at once: {rows:?}");
    assert!(cordoned.is_empty(), "left unschedulable: {cordoned:?}");
    assert_eq!(first_new, ["h1", "h2", "h3"], "upgrade order: {rows:?}");

    // Converged: the next apply changes nothing.
    let (again, again_s) = apply(dir);
    assert_eq!(again.code, 0, "{again}");
    assert_eq!(again.summary()["changed"], 0, "the apply after the upgrade changed something:\n{again}");
    eprintln!("apply after the upgrade {again_s:.1}s");
}
}
