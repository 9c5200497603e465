//! A lab cluster: lab hosts (`lab/up.sh`) with `lab/cluster-stand-in/up.sh` around them (the
//! API tier, the signed apt repositories, the systemctl/kubeadm/kubelet stand-ins, the status
//! stand-in), torn down on drop (stand-ins first, then the hosts); the example plans
//! rewritten for the lab; and what the stand-ins record, read back as the tests' oracle
//! (the kubelet stand-in's violations, the kubeadm stand-in's calls, the status stand-in's
//! node timeline). The cluster itself is built by the test, with `kwin apply`.
//!
//! Every lab cluster test has a lab id of its own (`KWIN_LAB_ID`, addresses `10.<213+ID>.…`,
//! state in `target/lab-ID/cluster`); the id is passed to every script, never read from or
//! written to this process's environment, so tests of one binary on different labs can run
//! at once.

use crate::host::workspace;
use crate::lab::Lab;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Why a lab cluster cannot run here, if it cannot: root, no swap (lab hosts share this
/// kernel: the recipes' `swap_off` would turn the machine's swap off), the API tier's programs
/// (`lab/apiserver/build.sh`), and the programs `lab/cluster-stand-in/up.sh` runs.
pub fn missing_prerequisite() -> Option<String> {
    if !crate::host::is_root() {
        return Some("not running as root".into());
    }
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
    if swaps.lines().skip(1).any(|l| !l.trim().is_empty()) {
        return Some("this machine has swap on, which the lab cluster refuses to touch".into());
    }
    let kubectl = match crate::api::bins() {
        Ok(b) => b.kubectl.display().to_string(),
        Err(e) => return Some(e),
    };
    for (cmd, args) in [
        (kubectl.as_str(), &["version", "--client"][..]),
        ("gpg", &["--version"][..]),
        ("dpkg-scanpackages", &["--version"][..]),
        ("curl", &["--version"][..]),
        ("python3", &["-c", "import yaml"][..]),
    ] {
        match Command::new(cmd)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
        {
            Ok(s) if s.success() => {}
            _ => return Some(format!("`{cmd} {}` does not work", args.join(" "))),
        }
    }
    None
}

/// The lab hosts plus the stand-ins around them; both torn down on drop (stand-ins first).
pub struct Cluster {
    /// `target/lab-ID/cluster/env`: `SERVICE_ADDRESS`, `CONTROL_PLANE_ENDPOINT`, `MIRROR`,
    /// `KUBECONFIG` (the API tier's own admin kubeconfig), `TIER_DIR`.
    pub env: BTreeMap<String, String>,
    pub lab: Lab,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(workspace().join("lab/cluster-stand-in/down.sh"))
            .env("KWIN_LAB_ID", &self.lab.id)
            .output();
    }
}

impl Cluster {
    /// `hosts` lab hosts of lab `id` (h1 … hN) and the stand-ins around them; a missing
    /// prerequisite or a failing script fails the test.
    pub fn up(id: &str, hosts: usize) -> Cluster {
        Cluster::up_with(id, hosts, &[])
    }

    /// [`Cluster::up`] with `env` for `lab/cluster-stand-in/up.sh` (`KWIN_LAB_K8S_VERSIONS`,
    /// `KWIN_LAB_CONTAINERD_VERSIONS`: what the lab mirror serves).
    #[allow(clippy::print_stderr)]
    pub fn up_with(id: &str, hosts: usize, env: &[(&str, &str)]) -> Cluster {
        if let Some(why) = missing_prerequisite() {
            panic!("the lab cluster cannot run here: {why}");
        }
        let lab = Lab::up(id, hosts);
        let t = std::time::Instant::now();
        let out = Command::new(workspace().join("lab/cluster-stand-in/up.sh"))
            .env("KWIN_LAB_ID", id)
            .envs(env.iter().copied())
            .output()
            .expect("run lab/cluster-stand-in/up.sh");
        // From here on, drop takes the stand-ins down too.
        let mut c = Cluster {
            env: BTreeMap::new(),
            lab,
        };
        assert!(
            out.status.success(),
            "lab/cluster-stand-in/up.sh (lab {id}) failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!(
            "lab {id}: cluster stand-ins up in {:.1}s",
            t.elapsed().as_secs_f64()
        );
        let text = std::fs::read_to_string(c.dir().join("env")).expect("cluster env file");
        c.env = text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.trim_matches('\'').to_string()))
            .collect();
        c
    }

    /// `target/lab-ID/cluster`: the env file, the tier, the repositories, `timeline.log`.
    pub fn dir(&self) -> PathBuf {
        self.lab.inventory.with_file_name("cluster")
    }

    /// SHA-256 (hex) of a file the lab mirror serves, by its path under the mirror
    /// (`github.com/…`), for a plan's `[artifacts.sha256]` pins (the mirror is plain HTTP).
    pub fn served(&self, rel: &str) -> String {
        use sha2::{Digest, Sha256};
        let p = self.dir().join("www").join(rel);
        let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        hex::encode(Sha256::digest(bytes))
    }

    /// The lab's second address octet: `10.<213+ID>.…` (lab/lib.sh).
    pub fn net(&self) -> u32 {
        213 + self.lab.id.parse::<u32>().expect("a numeric lab id")
    }

    /// `examples/<name>` for this lab: its addresses, its inventory, absolute paths into the
    /// checkout, and a step timeout of 150 s (the example's 300 is for real VMs).
    pub fn example(&self, name: &str) -> String {
        let text = std::fs::read_to_string(workspace().join("examples").join(name))
            .unwrap_or_else(|e| panic!("examples/{name}: {e}"));
        let text = text
            .replace("10.213.", &format!("10.{}.", self.net()))
            .replace(
                "\"../modules/",
                &format!("\"{}/modules/", workspace().display()),
            )
            .replace("step_timeout = 300", "step_timeout = 150");
        let text = self.with_inventory(&text);
        assert!(
            text.contains(&self.env["CONTROL_PLANE_ENDPOINT"]),
            "examples/{name} does not use the lab's control-plane endpoint {}",
            self.env["CONTROL_PLANE_ENDPOINT"]
        );
        assert!(
            text.contains(&self.env["MIRROR"]),
            "examples/{name}: no lab mirror"
        );
        text
    }

    /// `text` with its `inventory = ` line pointing at this lab's inventory.
    pub fn with_inventory(&self, text: &str) -> String {
        let mut out: String = text
            .lines()
            .map(|l| {
                if l.starts_with("inventory = ") {
                    format!("inventory = {:?}", self.lab.inventory.display().to_string())
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        out.push('\n');
        out
    }

    /// kubectl with the API tier's own admin kubeconfig (independent of kwin); its stdout,
    /// a failure fails the test.
    pub fn kubectl(&self, args: &[&str]) -> String {
        self.kubectl_in(args, None)
    }

    /// [`Cluster::kubectl`] with `stdin` (`apply -f -`).
    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> String {
        self.kubectl_in(args, Some(stdin))
    }

    fn kubectl_in(&self, args: &[&str], stdin: Option<&str>) -> String {
        use std::io::Write;
        let mut child = Command::new(crate::api::kubectl())
            .arg("--kubeconfig")
            .arg(&self.env["KUBECONFIG"])
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl");
        if let (Some(text), Some(mut w)) = (stdin, child.stdin.take()) {
            w.write_all(text.as_bytes()).expect("kubectl stdin");
        }
        let out = child.wait_with_output().expect("kubectl");
        assert!(
            out.status.success(),
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The JSON lines of a file on a lab host (none if it does not exist).
    pub fn json_lines(&self, host: &str, path: &str) -> Vec<Value> {
        self.lab
            .ssh(host, &format!("cat {path} 2>/dev/null || true"))
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Every Node as the API server has it: `(name, kubelet version, unschedulable, kwin's
    /// cordon mark)`, by name.
    pub fn nodes(&self) -> Vec<NodeRow> {
        let rows = self.kubectl(&[
            "get",
            "nodes",
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.name}{"\t"}{.status.nodeInfo.kubeletVersion}{"\t"}{.spec.unschedulable}{"\t"}{.metadata.annotations.kwin\.dev/cordoned}{"\n"}{end}"#,
        ]);
        rows.lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                let [name, kubelet, unschedulable, mark] = f[..] else {
                    return None;
                };
                Some(NodeRow {
                    name: name.to_string(),
                    kubelet: kubelet.to_string(),
                    cordoned: unschedulable == "true",
                    mark: (!mark.is_empty()).then(|| mark.to_string()),
                })
            })
            .collect()
    }

    /// kubeadm-config's `kubernetesVersion` (`v1.32.5`): what `kubeadm upgrade apply` (or
    /// `kubeadm init`) last finished.
    pub fn cluster_version(&self) -> String {
        let config = self.kubectl(&[
            "-n",
            "kube-system",
            "get",
            "cm",
            "kubeadm-config",
            "-o",
            "jsonpath={.data.ClusterConfiguration}",
        ]);
        config
            .lines()
            .find_map(|l| l.strip_prefix("kubernetesVersion: "))
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    /// What the kubelet stand-in of `host` logged as a skew or an undrained upgrade
    /// (`/var/lib/kubelet-stand-in/violations.log`; empty: none).
    pub fn violations(&self, host: &str) -> String {
        self.lab.ssh(
            host,
            "cat /var/lib/kubelet-stand-in/violations.log 2>/dev/null || true",
        )
    }

    /// The kubeadm stand-in's calls on `hosts` at or after `since` (epoch seconds), in time
    /// order: each a JSON object with `epoch`, `node`, `verb`, `to`, `result`.
    pub fn kubeadm_calls(&self, hosts: &[&str], since: f64) -> Vec<Value> {
        let mut calls: Vec<Value> = hosts
            .iter()
            .flat_map(|h| self.json_lines(h, "/var/log/kubeadm-stand-in.log"))
            .filter(|e| e["epoch"].as_f64().is_some_and(|t| t >= since))
            .collect();
        calls.sort_by(|a, b| {
            let t = |v: &Value| v["epoch"].as_f64().unwrap_or(0.0);
            t(a).total_cmp(&t(b))
        });
        calls
    }

    /// The status stand-in's timeline rows at or after `since` that record a Node's
    /// schedulability (each with `epoch`, `node`, `unschedulable`, `ready`, `kubelet`).
    ///
    /// The stand-in samples the Nodes about once a second, so the rows can trail the API
    /// server: this first waits (up to 30 s) until every Node's last row agrees with what
    /// the API server reports now, so a change made just before the read (the last
    /// uncordon of an apply) is in the rows.
    pub fn timeline(&self, since: f64) -> Vec<Value> {
        let read = || -> Vec<Value> {
            let text = std::fs::read_to_string(self.dir().join("timeline.log")).expect("timeline");
            text.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|r| r.get("unschedulable").is_some())
                .collect()
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let rows = loop {
            let rows = read();
            let now = self.nodes();
            let lagging: Vec<&str> = now
                .iter()
                .filter(|n| {
                    let last = rows.iter().rev().find(|r| r["node"] == n.name.as_str());
                    !last.is_some_and(|r| {
                        r["unschedulable"] == n.cordoned && r["kubelet"] == n.kubelet.as_str()
                    })
                })
                .map(|n| n.name.as_str())
                .collect();
            if lagging.is_empty() {
                break rows;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the timeline still trails the API server for {lagging:?} after 30 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(300));
        };
        rows.into_iter()
            .filter(|r| r["epoch"].as_f64().is_some_and(|t| t >= since))
            .collect()
    }
}

/// Pods for drains to meet. No controller-manager or scheduler runs in the lab: a pod is
/// created bound to its node (`nodeName`), the kubelet stand-in reports it Running and
/// Ready, and no controller recreates what a drain evicts.
impl Cluster {
    /// A ReplicaSet `web` in namespace `app` and one pod it owns (`web-<node>`, its
    /// controller, so `kubectl drain` evicts it without `--force`) bound to each of `nodes`;
    /// returns once the kubelets report them Running.
    pub fn workload(&self, nodes: &[&str]) {
        self.replica_set("web", nodes.len());
        for n in nodes {
            self.owned_pod(&format!("web-{n}"), n, "web");
        }
    }

    /// A pod `guarded` (of ReplicaSet `guarded`) on `node`, and a PodDisruptionBudget
    /// `guarded` (`minAvailable: 1`) over it, which the status stand-in computes as the
    /// disruption controller would; returns once the budget allows no disruption, so every
    /// eviction of the pod is refused.
    pub fn guarded_pod(&self, node: &str) {
        self.replica_set("guarded", 1);
        self.owned_pod("guarded", node, "guarded");
        let _ = self.kubectl_stdin(
            &["apply", "-f", "-"],
            "apiVersion: policy/v1\nkind: PodDisruptionBudget\n\
             metadata: {name: guarded, namespace: app}\n\
             spec:\n  minAvailable: 1\n  selector: {matchLabels: {app: guarded}}\n",
        );
        self.eventually(
            "the budget of app/guarded allows no disruption",
            "1 0",
            || {
                self.kubectl(&[
                    "-n",
                    "app",
                    "get",
                    "pdb",
                    "guarded",
                    "-o",
                    "jsonpath={.status.currentHealthy} {.status.disruptionsAllowed}",
                ])
            },
        );
    }

    /// ReplicaSet `app` in namespace `app` (created with the namespace if need be).
    fn replica_set(&self, app: &str, replicas: usize) {
        let _ = self.kubectl_stdin(
            &["apply", "-f", "-"],
            &format!(
                "apiVersion: v1\nkind: Namespace\nmetadata: {{name: app}}\n---\n\
                 apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {{name: {app}, namespace: app}}\n\
                 spec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: {app}}}}}\n  \
                 template:\n    metadata: {{labels: {{app: {app}}}}}\n    \
                 spec: {{containers: [{{name: c, image: registry.k8s.io/pause:3.10}}]}}\n"
            ),
        );
    }

    /// Pod `name` of ReplicaSet `app` (its controller owner reference), bound to `node`.
    fn owned_pod(&self, name: &str, node: &str, app: &str) {
        let uid = self.kubectl(&[
            "-n",
            "app",
            "get",
            "rs",
            app,
            "-o",
            "jsonpath={.metadata.uid}",
        ]);
        let _ = self.kubectl_stdin(
            &["apply", "-f", "-"],
            &format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: app\n  \
                 labels: {{app: {app}}}\n  ownerReferences: [{{apiVersion: apps/v1, kind: \
                 ReplicaSet, name: {app}, uid: {uid}, controller: true}}]\nspec:\n  \
                 nodeName: {node}\n  \
                 containers: [{{name: c, image: registry.k8s.io/pause:3.10}}]\n"
            ),
        );
        self.eventually(&format!("app/{name} Running on {node}"), "Running", || {
            self.kubectl(&[
                "-n",
                "app",
                "get",
                "pod",
                name,
                "-o",
                "jsonpath={.status.phase}",
            ])
        });
    }

    /// The pods in namespace `app`, by name.
    pub fn app_pods(&self) -> String {
        self.kubectl(&[
            "-n",
            "app",
            "get",
            "pods",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ])
    }

    /// Wait (up to 30 s) until `read` gives `want`.
    fn eventually(&self, what: &str, want: &str, read: impl Fn() -> String) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let got = read();
            if got == want {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: still `{got}` after 30 s, not `{want}`"
            );
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
    }
}

/// What an upgrade must leave, read from the cluster and the stand-ins (never from kwin's
/// report).
impl Cluster {
    /// Every one of `hosts` converged at `version` (`1.32.5`): its Node reports kubelet
    /// `v<version>`, is schedulable and carries no kwin mark; kubeadm, kubelet and kubectl
    /// are installed at `<version>-1.1` and held; the kubelet stand-in saw no skew and no
    /// undrained upgrade.
    pub fn assert_upgraded(&self, hosts: &[&str], version: &str) {
        let nodes = self.nodes();
        for h in hosts {
            let n = nodes
                .iter()
                .find(|n| n.name == *h)
                .unwrap_or_else(|| panic!("no Node {h}: {nodes:?}"));
            assert_eq!(
                (n.kubelet.as_str(), n.cordoned, n.mark.as_deref()),
                (format!("v{version}").as_str(), false, None),
                "{h}: not at v{version}, left cordoned or marked: {nodes:?}"
            );
            let v = self.lab.ssh(
                h,
                "dpkg-query -W -f '${Package}=${Version} ' kubeadm kubelet kubectl; apt-mark showhold | tr '\\n' ' '",
            );
            for want in [
                format!("kubeadm={version}-1.1"),
                format!("kubelet={version}-1.1"),
                format!("kubectl={version}-1.1"),
                "kubeadm kubectl kubelet".into(),
            ] {
                assert!(v.contains(&want), "{h}: `{want}` not in `{v}`");
            }
            assert_eq!(
                self.violations(h),
                "",
                "{h}: the kubelet stand-in saw a skew or an undrained upgrade"
            );
        }
    }

    /// kubeadm's calls on `hosts` since `since`: none refused, and every `upgrade node` to
    /// `v<version>` after `first`'s `upgrade apply` to it (kubeadm's order). The calls.
    pub fn assert_kubeadm_in_order(
        &self,
        hosts: &[&str],
        first: &str,
        version: &str,
        since: f64,
    ) -> Vec<Value> {
        let calls = self.kubeadm_calls(hosts, since);
        let refused: Vec<&Value> = calls.iter().filter(|e| e["result"] != "ok").collect();
        assert!(refused.is_empty(), "kubeadm refused: {refused:?}");
        let to = format!("v{version}");
        let applied = calls
            .iter()
            .find(|e| e["node"] == first && e["verb"] == "upgrade apply" && e["to"] == to)
            .and_then(|e| e["epoch"].as_f64())
            .unwrap_or_else(|| panic!("no `kubeadm upgrade apply {to}` on {first}: {calls:?}"));
        for h in hosts.iter().filter(|h| **h != first) {
            let node = calls
                .iter()
                .find(|e| e["node"] == *h && e["verb"] == "upgrade node")
                .and_then(|e| e["epoch"].as_f64())
                .unwrap_or_else(|| panic!("no `kubeadm upgrade node` on {h}: {calls:?}"));
            assert!(
                node > applied,
                "{h} ran `upgrade node` before {first}'s `upgrade apply`"
            );
        }
        calls
    }

    /// The node timeline since `since`: at most `most` Nodes unschedulable at once (and that
    /// many at some point: they were drained), none left unschedulable, and the Nodes first reported at kubelet `v<version>` in the
    /// order `order`.
    pub fn assert_rolled(&self, since: f64, most: usize, version: &str, order: &[&str]) {
        let rows = self.assert_drained_in_turn(since, most);
        let v = format!("v{version}");
        let mut first_new: Vec<&str> = Vec::new();
        for r in &rows {
            let node = r["node"].as_str().unwrap_or("?");
            if r["kubelet"] == v && !first_new.contains(&node) {
                first_new.push(node);
            }
        }
        assert_eq!(first_new, order, "upgrade order: {rows:?}");
    }

    /// The node timeline since `since`: at most `most` Nodes unschedulable at once (and that
    /// many at some point: they were drained), none left unschedulable. The rows.
    pub fn assert_drained_in_turn(&self, since: f64, most: usize) -> Vec<Value> {
        let rows = self.timeline(since);
        let mut cordoned = std::collections::BTreeSet::new();
        let mut seen_most = 0;
        for r in &rows {
            let node = r["node"].as_str().unwrap_or("?").to_string();
            if r["unschedulable"] == true {
                cordoned.insert(node);
            } else {
                cordoned.remove(&node);
            }
            seen_most = seen_most.max(cordoned.len());
        }
        assert_eq!(
            seen_most, most,
            "nodes unschedulable at once at the most: {rows:?}"
        );
        assert!(cordoned.is_empty(), "left unschedulable: {cordoned:?}");
        rows
    }
}

/// One Node, as [`Cluster::nodes`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRow {
    pub name: String,
    /// `v1.32.5`.
    pub kubelet: String,
    /// `spec.unschedulable`.
    pub cordoned: bool,
    /// `kwin.dev/cordoned`, when kwin cordoned the node.
    pub mark: Option<String>,
}

/// `text` with its `kubernetes_version = ` line set to `version`.
pub fn with_version(text: &str, version: &str) -> String {
    let mut found = false;
    let mut out: String = text
        .lines()
        .map(|l| {
            if l.starts_with("kubernetes_version = ") {
                found = true;
                format!("kubernetes_version = \"{version}\"")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    out.push('\n');
    assert!(found, "no `kubernetes_version = ` line in:\n{text}");
    out
}

/// Now, in epoch seconds (what the stand-ins' logs carry).
pub fn epoch() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64()
}

/// Write `text` as `dir/plan.toml`.
pub fn write_plan(dir: &Path, text: &str) {
    std::fs::write(dir.join("plan.toml"), text).expect("write plan.toml");
}
