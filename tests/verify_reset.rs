//! `kwin verify` and `kwin reset` end to end: the `kwin` binary against real sshd lab hosts
//! (lab 6 only: `KWIN_LAB_ID=6`) and the real API tier (lab/apiserver: kube-apiserver + etcd),
//! reached from the control-plane lab host through the lab's delay proxy (0 ms) with the
//! API tier's kubectl (the same Kubernetes version) on the host.
//!
//! What this can show: the workloads' manifests accepted and stored by the API server
//! (nodeSelector, tolerations, NodePort), the node checks on real Node objects, the pod wait
//! failing within its timeout naming the pods, the namespace deleted afterwards; `reset`
//! removing files laid out as kubeadm leaves them (the real kubeadm of the API tier runs
//! `reset -f` on one host; another has no kubeadm), draining and deleting Node objects, a
//! second reset changing nothing, hosts outside the plan untouched, and the confirmation.
//! No pod ever runs here (no scheduler, no kubelet), so the network checks only show as
//! skipped; their parsers are tested on real-format output in kwin-modules.
//!
//! The two end-to-end tests are lab tests (root, the cached API tier of
//! `lab/apiserver/build.sh`): ignored by `cargo test`, failing when run without them.

use kwin_testkit::{host::workspace, kwin, kwin::Run, lab::Lab};
use serde_json::Value;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The lab these tests use, and only this one.
const LAB_ID: &str = "6";
/// Root-namespace side of h1's veth in lab 6 (10.<213+6>.0.5): where h1 reaches this machine.
const H1_GATEWAY: &str = "10.219.0.5";

/// One lab 6 at a time.
static SERIAL: Mutex<()> = Mutex::new(());

// ---------------------------------------------------------------------------------- lab 6

/// Lab 6 (the kit's lab hosts).
fn lab_up(n: usize) -> Lab {
    Lab::up(LAB_ID, n)
}

/// Scripts on lab hosts, through the lab's ssh config.
trait LabSh {
    fn sh(&self, host: &str, script: &str) -> String;
    fn sh_raw(&self, host: &str, script: &str) -> std::process::Output;
    fn exists(&self, host: &str, path: &str) -> bool;
    fn links(&self, host: &str) -> String;
}

impl LabSh for Lab {
    /// Run `script` on `host` (sh -s); stdout. Fails the test on a non-zero exit.
    fn sh(&self, host: &str, script: &str) -> String {
        let out = self.sh_raw(host, script);
        assert!(
            out.status.success(),
            "on {host}: {script}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn sh_raw(&self, host: &str, script: &str) -> std::process::Output {
        use std::io::Write;
        let mut child = Command::new("ssh")
            .arg("-F")
            .arg(&self.ssh_config)
            .arg(host)
            .arg("sh -s")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("ssh");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(script.as_bytes())
            .expect("write script");
        child.wait_with_output().expect("ssh output")
    }

    fn exists(&self, host: &str, path: &str) -> bool {
        self.sh(host, &format!("[ -e '{path}' ] && echo yes || echo no"))
            .trim()
            == "yes"
    }

    fn links(&self, host: &str) -> String {
        self.sh(
            host,
            "ip -o link show | cut -d: -f2 | tr -d ' ' | tr '\\n' ' '",
        )
    }
}

// ------------------------------------------------------------------------------ API tier

/// The kit's API tier, with a proxy that makes it reachable from h1.
struct Tier {
    _tier: kwin_testkit::api::Tier,
    state: PathBuf,
    kubeconfig: PathBuf,
    port: u16,
    proxy: Option<Child>,
}

impl Tier {
    fn up() -> Tier {
        let tier = kwin_testkit::api::Tier::start();
        Tier {
            state: tier.state.clone(),
            kubeconfig: tier.kubeconfig(),
            port: tier.port(),
            _tier: tier,
            proxy: None,
        }
    }

    /// Make the API server reachable from h1 (lab 6) at `H1_GATEWAY:<port>`, and return the
    /// kubeconfig h1 uses (that address; the serving certificate's name `localhost`).
    fn expose_to_h1(&mut self) -> String {
        let port = TcpListener::bind((H1_GATEWAY, 0))
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port on the lab's address");
        let child = Command::new("bash")
            .arg(workspace().join("lab/delay-proxy/run.sh"))
            .args([
                "--delay-ms",
                "0",
                "--listen",
                &format!("{H1_GATEWAY}:{port}"),
                "--to",
                &format!("127.0.0.1:{}", self.port),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("delay proxy");
        self.proxy = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect((H1_GATEWAY, port)).is_err() {
            assert!(Instant::now() < deadline, "the proxy did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let copy = self.state.join("h1.conf");
        std::fs::copy(&self.kubeconfig, &copy).expect("copy kubeconfig");
        self.kubectl_with(
            &copy,
            &[
                "config",
                "set-cluster",
                "kwin-lab",
                &format!("--server=https://{H1_GATEWAY}:{port}"),
                "--tls-server-name=localhost",
            ],
        );
        std::fs::read_to_string(&copy).expect("read kubeconfig")
    }

    fn kubectl_with(&self, kubeconfig: &Path, args: &[&str]) -> String {
        let out = Command::new(kwin_testkit::api::kubectl())
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .output()
            .expect("kubectl");
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn kubectl(&self, args: &[&str]) -> String {
        self.kubectl_with(&self.kubeconfig, args)
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        serde_json::from_str(&self.kubectl(&a)).expect("kubectl JSON")
    }

    /// A Node with `labels` and `taints` (key=value:Effect), its Ready condition `ready`.
    fn node(&self, name: &str, labels: &[(&str, &str)], taints: &[(&str, &str)], ready: bool) {
        let labels: serde_json::Map<String, Value> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
            .collect();
        let taints: Vec<Value> = taints
            .iter()
            .map(|(kv, effect)| {
                let (k, v) = kv.split_once('=').expect("key=value");
                serde_json::json!({"key": k, "value": v, "effect": effect})
            })
            .collect();
        let node = serde_json::json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints}
        });
        let file = self.state.join(format!("node-{name}.json"));
        std::fs::write(&file, node.to_string()).expect("write node");
        self.kubectl(&["apply", "-f", &file.display().to_string()]);
        self.set_ready(name, ready);
    }

    /// The kube-apiserver mirror pod a kubelet posts for a kubeadm control plane's static
    /// pod, at `version`: what the upgrade gate reads the cluster's version from.
    fn mirror_apiserver(&self, node: &str, version: &str) {
        let pod = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("kube-apiserver-{node}"), "namespace": "kube-system",
                "labels": {"component": "kube-apiserver", "tier": "control-plane"}},
            "spec": {"nodeName": node, "containers": [{"name": "kube-apiserver",
                "image": format!("registry.k8s.io/kube-apiserver:v{version}")}]}
        });
        let file = self.state.join(format!("mirror-{node}.json"));
        std::fs::write(&file, pod.to_string()).expect("write pod");
        self.kubectl(&["apply", "-f", &file.display().to_string()]);
    }

    fn set_ready(&self, name: &str, ready: bool) {
        let cond = if ready {
            serde_json::json!({"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"})
        } else {
            serde_json::json!({"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                "message": "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"})
        };
        let patch = serde_json::json!({"status": {"conditions": [cond]}}).to_string();
        self.kubectl(&[
            "patch",
            "node",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch,
        ]);
    }
}

impl Drop for Tier {
    fn drop(&mut self) {
        if let Some(mut p) = self.proxy.take() {
            let _ = p.kill();
            let _ = p.wait();
        }
    }
}

// ---------------------------------------------------------------------------------- plans

/// A plan over lab hosts `linux` (first = control plane) and Windows workers `windows`
/// (never connected to by these tests).
fn plan(lab: &Lab, linux: &[&str], windows: &[&str]) -> tempfile::TempDir {
    let mut text = format!(
        "inventory = {:?}\n\n[cluster]\nname = \"lab6\"\nkubernetes_version = \"1.31.4\"\n\n[cni]\nplugin = \"flannel\"\n",
        lab.inventory.display().to_string()
    );
    for (i, h) in linux.iter().enumerate() {
        let role = if i == 0 { "control-plane" } else { "worker" };
        text.push_str(&format!(
            "\n[[hosts]]\nname = \"{h}\"\nos = \"linux\"\nrole = \"{role}\"\n"
        ));
    }
    for (i, h) in windows.iter().enumerate() {
        text.push_str(&format!(
            "\n[[hosts]]\nname = \"{h}\"\nos = \"windows\"\nrole = \"worker\"\naddress = \"10.219.200.{}\"\npassword_env = \"KWIN_TEST_WINDOWS_PASSWORD\"\n",
            i + 1
        ));
    }
    if !windows.is_empty() {
        // flannel's Windows artifacts publish no SHA-256 file: pinned so that no command
        // fetches them to hash them (placeholders: these hosts are never connected to).
        text.push_str(&format!(
            "\n[artifacts.sha256]\n\"flannel-{}-windows-amd64.tar.gz\" = \"{}\"\n\"windows-container-networking-cni-amd64-{}.zip\" = \"{}\"\n",
            kwin_engine::plan::support::pins().flannel,
            "1".repeat(64),
            kwin_engine::plan::effective::defaults::windows::SDN_CNI,
            "2".repeat(64)
        ));
    }
    text.push_str(
        "\n[[tasks]]\nname = \"user-motd\"\nmodule = \"file\"\non = { os = \"linux\" }\nparams = { path = \"/etc/motd-kwin-test\", content = \"x\\n\" }\n",
    );
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("plan.toml"), text).expect("write plan");
    dir
}

fn checks(k: &Run) -> Vec<Value> {
    k.events()
        .into_iter()
        .filter(|e| e["event"] == "check")
        .collect()
}

fn check<'a>(rows: &'a [Value], name: &str, to: &str) -> &'a Value {
    rows.iter()
        .find(|r| r["name"] == name && r["to"].as_str().is_some_and(|t| t.contains(to)))
        .unwrap_or_else(|| panic!("no check {name} → {to} in {rows:#?}"))
}

/// h1, the control plane: the admin kubeconfig, and the API tier's own kubectl (the version of
/// its API server) as `/usr/local/bin/kubectl`, first on PATH, as a package would install it.
fn install_admin_conf(lab: &Lab, kubeconfig: &str) {
    lab.sh(
        "h1",
        &format!(
            "mkdir -p /etc/kubernetes && cat > /etc/kubernetes/admin.conf <<'EOF'\n{kubeconfig}EOF\nchmod 600 /etc/kubernetes/admin.conf && cp {} /usr/local/bin/kubectl",
            kwin_testkit::api::kubectl().display()
        ),
    );
}

// ---------------------------------------------------------------------------------- verify

kwin_testkit::lab_test! {
#[test]
fn verify_against_the_api_tier() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let lab = lab_up(2);
    let mut tier = Tier::up();
    let conf = tier.expose_to_h1();
    install_admin_conf(&lab, &conf);
    tier.node("h1", &[("kubernetes.io/os", "linux")], &[], true);
    tier.node("h2", &[("kubernetes.io/os", "linux")], &[], false);
    tier.node(
        "ww1",
        &[
            ("kubernetes.io/os", "windows"),
            ("node.kubernetes.io/windows-build", "10.0.17763"),
        ],
        &[("os=windows", "NoSchedule")],
        true,
    );
    let dir = plan(&lab, &["h1", "h2"], &["ww1"]);
    let p = dir.path();

    // Pods never start here: the wait fails within its timeout, naming every pod.
    let t = Instant::now();
    let k = kwin!(
        p,
        &[
            "verify",
            "plan.toml",
            "--output",
            "json",
            "--timeout",
            "8s",
            "--namespace",
            "kv-keep",
            "--keep-workloads",
        ],
    );
    let took = t.elapsed();
    assert_eq!(k.code, 1, "{k}");
    assert!(took < Duration::from_secs(90), "took {took:?}");
    let rows = checks(&k);
    let h1 = check(&rows, "node", "h1");
    assert_eq!(h1["result"], "pass", "{h1}");
    assert!(h1["detail"].as_str().is_some_and(|d| d.contains("Ready")));
    let h2 = check(&rows, "node", "h2");
    assert_eq!(h2["result"], "fail", "{h2}");
    assert!(
        h2["detail"]
            .as_str()
            .is_some_and(|d| d.contains("NotReady") && d.contains("cni plugin not initialized")),
        "{h2}"
    );
    let ww1 = check(&rows, "node", "ww1");
    assert_eq!(ww1["result"], "pass", "{ww1}");
    assert!(ww1["detail"].as_str().is_some_and(
        |d| d.contains("taint os=windows:NoSchedule") && d.contains("windows-build=10.0.17763")
    ));
    let pods = check(&rows, "pods ready", "kv-keep");
    assert_eq!(pods["result"], "fail", "{pods}");
    let detail = pods["detail"].as_str().unwrap_or_default();
    assert!(detail.starts_with("timed out after 8s"), "{detail}");
    for pod in [
        "win-web (not scheduled: ",
        "linux-web (not scheduled: ",
        "client (not scheduled: ",
    ] {
        assert!(detail.contains(pod), "{pod} missing: {detail}");
    }
    for r in rows.iter().filter(|r| {
        ["pod → pod", "pod → service", "dns", "nodeport", "egress"]
            .contains(&r["name"].as_str().unwrap_or(""))
    }) {
        assert_eq!(r["result"], "skip", "{r}");
    }
    assert!(rows.iter().any(|r| r["name"] == "egress"));
    let finished = k
        .events()
        .into_iter()
        .find(|e| e["event"] == "verify_finished")
        .expect("verify_finished");
    assert_eq!(finished["failed"], 2, "{finished}");
    // The stream ends with the summary, with the checks' counts.
    let summary = k.events().last().cloned().expect("events");
    assert_eq!(summary["event"], "summary", "{k}");
    assert_eq!(summary["verify"]["failed"], 2, "{summary}");
    // Every command and its output is in the control plane's log.
    let logs = std::fs::read_dir(p.join(".kwin/logs"))
        .expect("logs")
        .filter_map(Result::ok)
        .map(|e| e.path().join("h1.log"))
        .find(|l| l.exists())
        .expect("h1.log");
    let log = std::fs::read_to_string(logs).expect("read log");
    assert!(
        log.contains("apply --server-side") && log.contains("get pods"),
        "{log}"
    );

    // `--limit ww1`: only the chosen node's row (h2, NotReady, is not checked).
    let k = kwin!(
        p,
        &[
            "verify", "plan.toml", "--limit", "ww1", "--output", "json", "--timeout", "5s",
            "--namespace", "kv-limit",
        ],
    );
    let nodes: Vec<Value> = checks(&k).into_iter().filter(|r| r["name"] == "node").collect();
    assert_eq!(nodes.len(), 1, "{k}");
    assert!(nodes[0]["to"].as_str().is_some_and(|t| t.contains("ww1")), "{k}");
    assert_eq!(nodes[0]["result"], "pass", "{k}");

    // The workloads as the API server stored them (kept with --keep-workloads).
    let win = tier.json(&["-n", "kv-keep", "get", "pod", "win-web"]);
    assert_eq!(win["spec"]["nodeSelector"]["kubernetes.io/os"], "windows");
    assert_eq!(
        win["spec"]["nodeSelector"]["node.kubernetes.io/windows-build"],
        "10.0.17763"
    );
    let tol = win["spec"]["tolerations"].as_array().expect("tolerations");
    assert!(tol.iter().any(|t| t["key"] == "os"
        && t["operator"] == "Equal"
        && t["value"] == "windows"
        && t["effect"] == "NoSchedule"));
    assert_eq!(
        win["spec"]["containers"][0]["image"],
        kwin_modules::kube::verify::AGNHOST_IMAGE
    );
    let lin = tier.json(&["-n", "kv-keep", "get", "pod", "linux-web"]);
    assert_eq!(lin["spec"]["nodeSelector"]["kubernetes.io/os"], "linux");
    // h2 is a Linux worker: the Linux pods do not tolerate the control plane.
    assert!(lin["spec"]["tolerations"].as_array().is_none_or(|t| !t
        .iter()
        .any(|t| t["key"] == "node-role.kubernetes.io/control-plane")));
    for svc in ["win-web", "linux-web"] {
        let s = tier.json(&["-n", "kv-keep", "get", "service", svc]);
        assert_eq!(s["spec"]["type"], "NodePort", "{s}");
        assert_eq!(s["spec"]["externalTrafficPolicy"], "Local", "{s}");
        let np = s["spec"]["ports"][0]["nodePort"]
            .as_u64()
            .expect("nodePort");
        assert!((30000..=32767).contains(&np), "{np}");
        assert_eq!(s["spec"]["selector"]["app"], svc);
    }

    // Wrong labels and a missing taint fail their rows; the namespace is deleted afterwards.
    tier.kubectl(&["taint", "node", "ww1", "os-"]);
    tier.kubectl(&[
        "label",
        "node",
        "h2",
        "kubernetes.io/os=windows",
        "--overwrite",
    ]);
    tier.set_ready("h2", true);
    let k = kwin!(
        p,
        &[
            "verify",
            "plan.toml",
            "--timeout",
            "5s",
            "--namespace",
            "kv-clean",
        ],
    );
    assert_eq!(k.code, 1, "{k}");
    let out = &k.stdout;
    assert!(
        out.lines()
            .any(|l| l.starts_with("check") && l.contains("from → to") && l.contains("detail")),
        "{k}"
    );
    let row = |needle: &str| {
        out.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no row with {needle}:\n{k}"))
            .to_string()
    };
    assert!(
        row("no taint os=windows:NoSchedule").contains("FAIL"),
        "{k}"
    );
    assert!(
        row("kubernetes.io/os=windows, expected linux").contains("FAIL"),
        "{k}"
    );
    assert!(row("namespace kv-clean").contains("pass"), "{k}");
    assert!(k.last_line().starts_with("verify: "), "{k}");
    let ns = Command::new(kwin_testkit::api::kubectl())
        .arg("--kubeconfig")
        .arg(&tier.kubeconfig)
        .args(["get", "namespace", "kv-clean", "-o", "json"])
        .output()
        .expect("kubectl");
    if ns.status.success() {
        // No namespace controller here: deleted means terminating.
        let v: Value = serde_json::from_slice(&ns.stdout).expect("json");
        assert!(v["metadata"]["deletionTimestamp"].is_string(), "{v}");
    }

    // A namespace left by an earlier run is removed first; here it never goes away (no
    // namespace controller), so verify gives up at its timeout and says why.
    let k = kwin!(
        p,
        &[
            "verify",
            "plan.toml",
            "--timeout",
            "4s",
            "--namespace",
            "kv-keep",
        ],
    );
    assert_eq!(k.code, 1, "{k}");
    assert!(
        k.stdout
            .contains("waiting for the namespace kv-keep of an earlier run to be deleted"),
        "{k}"
    );

    // Ctrl-C while waiting for the pods: the namespace is still deleted, exit 130.
    let live = kwin!(p)
        .args([
            "verify",
            "plan.toml",
            "--timeout",
            "120s",
            "--namespace",
            "kv-int",
        ])
        .spawn();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let pods = tier.kubectl(&["get", "pods", "-n", "kv-int", "-o", "name"]);
        if pods.contains("pod/client") {
            break;
        }
        assert!(Instant::now() < deadline, "the workloads never appeared");
        std::thread::sleep(Duration::from_millis(300));
    }
    let t = Instant::now();
    live.interrupt();
    let k = live.finish(Duration::from_secs(90));
    assert_eq!(k.code, 130, "{k}");
    assert!(t.elapsed() < Duration::from_secs(60), "{k}");
    assert!(
        k.stdout.lines().any(|l| l.starts_with("cleanup")
            && l.contains("namespace kv-int")
            && l.contains("pass")),
        "{k}"
    );
    let ns = tier.json(&["get", "namespace", "kv-int"]);
    assert!(ns["metadata"]["deletionTimestamp"].is_string(), "{ns}");

    // Without [cluster] there is nothing to verify.
    let text = format!(
        "inventory = {:?}\n\n[[hosts]]\nname = \"h1\"\nos = \"linux\"\n",
        lab.inventory.display().to_string()
    );
    std::fs::write(p.join("bare.toml"), text).expect("write");
    let k = kwin!(p, &["verify", "bare.toml"]);
    assert_eq!(k.code, 0, "{k}");
    assert!(k.stdout.contains("nothing to verify"), "{k}");
}
}

// ----------------------------------------------------------------------------------- reset

/// Files, directories and links as a node looks after kubeadm (or before `kubeadm reset`).
const KUBEADM_LEFTOVERS: &str = "
mkdir -p /etc/kubernetes/manifests /etc/kubernetes/pki /etc/cni/net.d /var/lib/cni/networks/cbr0 /run/flannel /var/lib/calico /run/calico
echo 'apiVersion: kubeadm.k8s.io/v1beta4' > /etc/kubernetes/kubeadm-config.yaml
echo '{\"name\":\"vxlan0\",\"cniVersion\":\"0.3.1\",\"plugins\":[{\"type\":\"flannel\"}]}' > /etc/cni/net.d/10-flannel.conflist
echo 10.244.1.2 > /var/lib/cni/networks/cbr0/10.244.1.2
printf 'FLANNEL_NETWORK=10.244.0.0/16\\nFLANNEL_SUBNET=10.244.1.1/24\\n' > /run/flannel/subnet.env
echo node > /var/lib/calico/nodename
ip link add cni0 type bridge
ip link add flannel.4096 type vxlan id 4096 dstport 4789 dev eth0
";

/// What a reset removes (of /etc/cni/net.d, what is in it: see [`assert_cni_dir_kept`]).
const PATHS: &[&str] = &[
    "/etc/kubernetes",
    "/etc/cni/net.d/10-flannel.conflist",
    "/var/lib/cni",
    "/run/flannel",
    "/var/lib/calico",
    "/run/calico",
];

/// /etc/cni/net.d is emptied, not removed: containerd 2.x stops its CRI service when the
/// directory it watches goes (plans/reset-linux.toml `cni-config`).
fn assert_cni_dir_kept(lab: &Lab, h: &str) {
    assert_eq!(
        lab.sh(
            h,
            "test -d /etc/cni/net.d && ls -A /etc/cni/net.d && echo kept"
        )
        .trim(),
        "kept",
        "{h}: /etc/cni/net.d is kept, empty"
    );
}

kwin_testkit::lab_test! {
#[test]
fn reset_on_lab_hosts() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let lab = lab_up(3);
    let mut tier = Tier::up();
    let conf = tier.expose_to_h1();
    for h in ["h1", "h2", "h3"] {
        lab.sh(h, KUBEADM_LEFTOVERS);
        tier.node(h, &[("kubernetes.io/os", "linux")], &[], true);
    }
    tier.mirror_apiserver("h1", "1.31.4");
    install_admin_conf(&lab, &conf);
    lab.sh(
        "h1",
        "mkdir -p /var/lib/etcd/member/snap /root/.kube && echo db > /var/lib/etcd/member/snap/db && cp /etc/kubernetes/admin.conf /root/.kube/config && touch /etc/kubernetes/kubelet.conf",
    );
    // h2 has the real kubeadm (the API tier's) and a joined node's files.
    lab.sh(
        "h2",
        &format!(
            "cp {} /usr/local/bin/kubeadm && mkdir -p /var/lib/kubelet && touch /etc/kubernetes/kubelet.conf /var/lib/kubelet/config.yaml",
            kwin_testkit::api::kubeadm().display()
        ),
    );
    let dir = plan(&lab, &["h1", "h2"], &[]);
    let p = dir.path();

    // Verification is not part of the task graph: `--no-verify` changes no task, and a check
    // run never verifies.
    let tasks = |args: &[&str]| {
        let k = kwin!(p, args);
        assert!(
            !k.events().iter().any(|e| e["event"] == "verify_finished"),
            "{k}"
        );
        k.events()
            .iter()
            .find(|e| e["event"] == "run_started")
            .and_then(|e| e["tasks"].as_u64())
            .unwrap_or_else(|| panic!("no run_started: {k}"))
    };
    let with = tasks(&["apply", "--check", "plan.toml", "--output", "json"]);
    let without = tasks(&[
        "apply",
        "--check",
        "--no-verify",
        "plan.toml",
        "--output",
        "json",
    ]);
    assert_eq!(with, without, "--no-verify changes the task graph");

    // No terminal and no --yes: refused, nothing touched.
    let k = kwin!(p, &["reset", "plan.toml"]);
    assert_eq!(k.code, 1, "{k}");
    assert!(
        k.stderr.contains("without confirmation") && k.stderr.contains("--yes"),
        "{k}"
    );
    assert!(lab.exists("h2", "/etc/kubernetes/kubelet.conf"));
    assert!(lab.exists("h1", "/etc/kubernetes/admin.conf"));
    // On a terminal (util-linux `script` gives it one), a wrong name cancels.
    let typed = on_terminal(p, "reset plan.toml", "lab-6\n");
    assert_eq!(typed.code, 1, "{typed}");
    assert!(
        typed.stdout.contains("Type the cluster name to confirm")
            && typed
                .stdout
                .contains("reset cancelled: `lab-6` is not `lab6`"),
        "{typed}"
    );
    assert!(lab.exists("h2", "/etc/kubernetes/kubelet.conf"));

    let k = kwin!(p, &["reset", "plan.toml", "--yes", "--output", "json"]);
    assert_eq!(k.code, 0, "{k}");
    assert_eq!(k.task("h1", "drain-nodes")["status"], "changed", "{k}");
    assert_eq!(
        k.task("h2", "kubeadm-reset-worker")["status"],
        "changed",
        "{k}"
    );
    // kubeadm is not installed on h1: its reset step converges as a no-op.
    assert_eq!(k.task("h1", "kubeadm-reset-first")["status"], "ok", "{k}");
    // Workers first, the first control plane last.
    let events = k.events();
    let at = |host: &str, task: &str| {
        events
            .iter()
            .position(|e| e["event"] == "task_finished" && e["host"] == host && e["task"] == task)
            .unwrap_or_else(|| panic!("no {host}/{task}"))
    };
    assert!(at("h1", "drain-nodes") < at("h2", "kubeadm-reset-worker"));
    assert!(at("h2", "kubeadm-reset-worker") < at("h1", "kubeadm-reset-first"));
    // The plan's own tasks are not part of a reset.
    assert!(!events.iter().any(|e| e["task"] == "user-motd"), "{k}");
    for h in ["h1", "h2"] {
        for path in PATHS {
            assert!(!lab.exists(h, path), "{h}:{path} is still there");
        }
        assert_cni_dir_kept(&lab, h);
        let links = lab.links(h);
        assert!(
            !links.contains("cni0") && !links.contains("flannel.4096"),
            "{h}: {links}"
        );
    }
    assert!(!lab.exists("h1", "/var/lib/etcd"));
    assert!(!lab.exists("h1", "/root/.kube/config"));
    // The API server: h2 drained and deleted, h1 (reset, not deleted) and h3 (not in the plan) kept.
    let nodes = tier.kubectl(&["get", "nodes", "-o", "name"]);
    assert!(!nodes.contains("node/h2"), "{nodes}");
    assert!(
        nodes.contains("node/h1") && nodes.contains("node/h3"),
        "{nodes}"
    );
    // h3 is not in the plan: untouched.
    for path in PATHS {
        assert!(lab.exists("h3", path), "h3:{path} was touched");
    }
    assert!(lab.links("h3").contains("cni0"));

    // A second reset changes nothing and says so.
    let k = kwin!(p, &["reset", "plan.toml", "--yes", "--output", "json"]);
    assert_eq!(k.code, 0, "{k}");
    assert_eq!(k.summary()["changed"], 0, "{k}");
    assert_eq!(k.summary()["failed"], 0, "{k}");
    // Confirmed by typing the cluster name on a terminal.
    let k = on_terminal(p, "reset plan.toml", "lab6\n");
    assert_eq!(k.code, 0, "{k}");
    // The summary line, then (stderr, on the same terminal) the host logs' folder.
    let lines: Vec<&str> = k
        .stdout
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.is_empty())
        .collect();
    let last = lines
        .iter()
        .rfind(|l| l.starts_with("reset: "))
        .copied()
        .unwrap_or_default();
    assert!(
        last.starts_with("reset: 2 hosts") && last.ends_with("(no changes)"),
        "{k}"
    );
    assert!(
        lines.last().is_some_and(|l| l.starts_with("logs: .kwin/logs/")),
        "{k}"
    );
}
}

kwin_testkit::lab_test! {
/// `kwin reset --limit h2`: h2 drained and deleted (the drain runs on h1, for h2 alone) and
/// reset; h1 (the first control plane) and h3 keep their node objects and files. Choosing
/// the first control plane while a node stays is refused before anything connects.
#[test]
fn reset_limit_resets_one_node() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let lab = lab_up(3);
    let mut tier = Tier::up();
    let conf = tier.expose_to_h1();
    let kubeadm = kwin_testkit::api::kubeadm();
    for h in ["h1", "h2", "h3"] {
        lab.sh(h, KUBEADM_LEFTOVERS);
        tier.node(h, &[("kubernetes.io/os", "linux")], &[], true);
    }
    install_admin_conf(&lab, &conf);
    lab.sh("h1", "mkdir -p /var/lib/etcd/member/snap && echo db > /var/lib/etcd/member/snap/db");
    // h2 and h3 have the real kubeadm (the API tier's) and a joined node's files.
    for h in ["h2", "h3"] {
        lab.sh(
            h,
            &format!(
                "cp {} /usr/local/bin/kubeadm && mkdir -p /var/lib/kubelet && touch /etc/kubernetes/kubelet.conf /var/lib/kubelet/config.yaml",
                kubeadm.display()
            ),
        );
    }
    let dir = plan(&lab, &["h1", "h2", "h3"], &[]);
    let p = dir.path();

    // The first control plane with a node staying: refused, nothing touched.
    let k = kwin!(p, &["reset", "plan.toml", "--limit", "h1,h2", "--yes"]);
    assert_eq!(k.code, 1, "{k}");
    assert!(
        k.stderr.contains("first control plane h1 while h3 stay")
            && k.stderr.contains("--limit h3"),
        "{k}"
    );
    assert!(lab.exists("h2", "/etc/kubernetes/kubelet.conf"));
    // The prompt names only the chosen node.
    let typed = on_terminal(p, "reset plan.toml --limit h2", "no\n");
    assert_eq!(typed.code, 1, "{typed}");
    assert!(
        typed.stdout.contains("This removes h2 from cluster `lab6`")
            && !typed.stdout.contains("h3"),
        "{typed}"
    );

    let k = kwin!(p, &["reset", "plan.toml", "--limit", "h2", "--yes", "--output", "json"]);
    assert_eq!(k.code, 0, "{k}");
    assert_eq!(k.task("h1", "drain-nodes")["status"], "changed", "{k}");
    assert_eq!(k.task("h2", "kubeadm-reset-worker")["status"], "changed", "{k}");
    let events = k.events();
    let ro: Vec<_> = events.iter().filter(|e| e["event"] == "host_read_only").collect();
    assert_eq!(ro.len(), 1, "{k}");
    assert_eq!(ro[0]["host"], "h1");
    assert_eq!(ro[0]["acting"], serde_json::json!(["drain-nodes"]), "{k}");
    // On h1 only the drain ran; h3 was not part of the run.
    let h1_tasks: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "task_finished" && e["host"] == "h1")
        .collect();
    assert_eq!(h1_tasks.len(), 1, "{k}");
    assert!(!events.iter().any(|e| e["host"] == "h3"), "{k}");
    // The API server: h2 gone, h1 and h3 there.
    let nodes = tier.kubectl(&["get", "nodes", "-o", "name"]);
    assert!(!nodes.contains("node/h2"), "{nodes}");
    assert!(nodes.contains("node/h1") && nodes.contains("node/h3"), "{nodes}");
    // h2 reset; h1 and h3 keep theirs.
    for path in PATHS {
        assert!(!lab.exists("h2", path), "h2:{path} is still there");
        assert!(lab.exists("h3", path), "h3:{path} was touched");
        assert!(lab.exists("h1", path), "h1:{path} was touched");
    }
    assert!(lab.exists("h1", "/etc/kubernetes/admin.conf"));
    assert!(lab.exists("h1", "/var/lib/etcd/member/snap/db"));
    assert!(lab.exists("h3", "/var/lib/kubelet/config.yaml"));
}
}

/// Run `kwin ARGS` on a terminal (`script` allocates a pty), typing `input`.
fn on_terminal(dir: &Path, args: &str, input: &str) -> Run {
    use std::io::Write;
    let cmd = format!("{} {args}", env!("CARGO_BIN_EXE_kwin"));
    let mut child = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script (util-linux)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("type");
    let out = child.wait_with_output().expect("script output");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

// ------------------------------------------------------------------------ the reset graph

#[test]
fn reset_graph_orders_workers_before_the_control_plane() {
    let path = workspace().join("examples/flannel.toml");
    let mut plan = kwin_engine::plan::load(&path).unwrap_or_else(|d| panic!("{d}"));
    plan.file.tasks.clear();
    let tasks = kwin_engine::expand::expand(&plan, kwin_modules::recipes::RESET_RECIPES)
        .unwrap_or_else(|d| panic!("{d}"));
    let g = kwin_engine::graph::TaskGraph::build(tasks).unwrap_or_else(|d| panic!("{d}"));
    let text = g.to_text();
    let node = |id: &str| {
        g.graph
            .node_indices()
            .find(|n| g.task(*n).id.to_string() == id)
            .unwrap_or_else(|| panic!("no task {id} in\n{text}"))
    };
    let drain = node("cp1/drain-nodes");
    let first = node("cp1/kubeadm-reset-first");
    for w in [
        "lw1/kubeadm-reset-worker",
        "ww1/windows-services",
        "ww2/windows-services",
    ] {
        assert!(g.reaches(drain, node(w)), "drain before {w}\n{text}");
        assert!(
            g.reaches(node(w), first),
            "{w} before the control plane\n{text}"
        );
    }
    for t in [
        "ww1/hns-networks",
        "ww1/windows-k-dir",
        "ww1/windows-kubernetes-dir",
    ] {
        node(t);
    }
    // Only the plan's hosts.
    let hosts: std::collections::BTreeSet<String> = g
        .graph
        .node_indices()
        .map(|n| g.task(n).id.host.clone())
        .collect();
    assert_eq!(
        hosts.into_iter().collect::<Vec<_>>(),
        ["cp1", "lw1", "ww1", "ww2"]
    );
}

// ------------------------------------------------------------------- without lab or tier

fn unreachable_plan() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(
        dir.path().join("plan.toml"),
        "[cluster]\nname = \"far\"\nkubernetes_version = \"1.35.8\"\n\n[cni]\nplugin = \"flannel\"\n\n\
         [settings]\nretries = 0\n\n\
         [[hosts]]\nname = \"cp1\"\naddress = \"127.0.0.1\"\nport = 1\nnode_ip = \"10.0.0.10\"\nos = \"linux\"\nrole = \"control-plane\"\nconnect_timeout = 2\n",
    )
    .expect("write plan");
    dir
}

#[test]
fn verify_says_when_the_control_plane_is_unreachable() {
    let dir = unreachable_plan();
    let k = kwin!(dir.path(), &["verify", "plan.toml", "--output", "json"]);
    assert_eq!(k.code, 1, "{k}");
    let rows = checks(&k);
    assert_eq!(rows.len(), 1, "{k}");
    assert_eq!(rows[0]["name"], "connect");
    assert_eq!(rows[0]["to"], "cp1");
    assert_eq!(rows[0]["result"], "fail");
    assert!(
        rows[0]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("cannot connect to 127.0.0.1:1")),
        "{k}"
    );
    assert_eq!(k.summary()["verify"]["failed"], 1, "{k}");
    assert!(
        k.events().iter().any(|e| e["event"] == "verify_finished"),
        "{k}"
    );
    // Flags are checked before anything runs: a usage error.
    let k = kwin!(
        dir.path(),
        &["verify", "plan.toml", "--namespace", "Bad;ns"],
    );
    assert_eq!(k.code, 64, "{k}");
    assert!(k.stderr.contains("is not a namespace name"), "{k}");
}

#[test]
fn reset_without_a_terminal_needs_yes() {
    let dir = unreachable_plan();
    let k = kwin!(dir.path(), &["reset", "plan.toml", "--output", "json"]);
    assert_eq!(k.code, 1, "{k}");
    assert_eq!(
        k.stderr.trim(),
        "error: refusing to reset cluster `far` without confirmation: there is no terminal to ask on; run `kwin reset` with --yes to confirm"
    );
    // The JSON stream is its summary alone, with the same error.
    assert_eq!(k.events().len(), 1, "{k}");
    assert_eq!(k.summary()["outcome"], "failed", "{k}");
    assert!(
        k.summary()["error"]
            .as_str()
            .is_some_and(|e| e.contains("without confirmation")),
        "{k}"
    );
    assert!(!dir.path().join(".kwin").exists(), "nothing was started");
}
