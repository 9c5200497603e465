//! End to end: `kwin apply examples/lab-cluster.toml` (flannel) and
//! `examples/lab-cluster-calico.toml` build a cluster of one control plane and two Linux
//! workers on three lab hosts (real sshd, real apt/dpkg from signed repositories, real
//! kube-apiserver + etcd, real kubectl), with the stand-ins of `lab/cluster-stand-in` for
//! what a lab host cannot run (kubeadm, kubelet, systemctl; controller status). Each test:
//! first apply converges, second apply changes nothing, `kwin kubeconfig` writes a 0600 file
//! the real kubectl lists the nodes with, and the join token is nowhere in kwin's output,
//! JSON events or `.kwin/` files.
//!
//! Lab 5 (`KWIN_LAB_ID=5`) of its own; the two tests take turns. Lab tests (root, the API
//! tier's binaries from `lab/apiserver/build.sh`): ignored by `cargo test`, failing when run
//! without what they need.

use kwin_testkit::cluster::Cluster;
use kwin_testkit::{kwin, kwin::Run};
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::Instant;

const LAB_ID: &str = "5";
/// One lab 5 at a time.
static LAB: Mutex<()> = Mutex::new(());

/// The example plan, for lab 5: its addresses, its inventory, absolute paths to the repo.
fn plan_from_example(c: &Cluster, example: &str) -> tempfile::TempDir {
    c.lab.plan_dir(&c.example(example))
}

/// Every bootstrap token in the cluster whose description is kwin's (`id.secret`).
fn kwin_tokens(c: &Cluster) -> Vec<String> {
    let rows = c.kubectl(&[
        "-n",
        "kube-system",
        "get",
        "secrets",
        "--field-selector",
        "type=bootstrap.kubernetes.io/token",
        "-o",
        r#"jsonpath={range .items[*]}{.data.token-id}{" "}{.data.token-secret}{" "}{.data.description}{"\n"}{end}"#,
    ]);
    let b64 = |s: &str| {
        use base64::Engine as _;
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(s)
                .expect("base64"),
        )
        .expect("utf-8")
    };
    rows.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && b64(f[2]) == "kwin join")
                .then(|| format!("{}.{}", b64(f[0]), b64(f[1])))
        })
        .collect()
}

/// All text kwin left in `dir/.kwin` (logs, journals).
fn state_text(dir: &Path) -> String {
    fn walk(p: &Path, out: &mut String) {
        if p.is_dir() {
            for e in std::fs::read_dir(p).expect("read_dir").flatten() {
                walk(&e.path(), out);
            }
        } else if let Ok(b) = std::fs::read(p) {
            out.push_str(&String::from_utf8_lossy(&b));
        }
    }
    let mut s = String::new();
    walk(&dir.join(".kwin"), &mut s);
    s
}

/// First apply converges, the second changes nothing; returns both runs' output.
#[allow(clippy::print_stderr)]
fn apply_twice(dir: &Path) -> (Run, Run) {
    let t = Instant::now();
    let first = kwin!(dir, &["apply", "plan.toml", "--output", "json"]);
    let t1 = t.elapsed();
    assert_eq!(first.code, 0, "first apply:\n{first}");
    let s = first.summary();
    assert_eq!(s["failed"], 0, "{first}");
    assert!(s["changed"].as_u64().unwrap_or(0) > 20, "{first}");
    let t = Instant::now();
    let second = kwin!(dir, &["apply", "plan.toml"]);
    let t2 = t.elapsed();
    assert_eq!(second.code, 0, "second apply:\n{second}");
    assert!(
        second.last_line().contains(" 0 changed, 0 failed")
            && second.last_line().ends_with("(no changes)"),
        "second apply changed something:\n{second}"
    );
    eprintln!(
        "first apply {:.1}s, second apply {:.1}s",
        t1.as_secs_f64(),
        t2.as_secs_f64()
    );
    (first, second)
}

fn assert_nodes_ready(c: &Cluster) {
    let rows = c.kubectl(&[
        "get",
        "nodes",
        "-o",
        r#"jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status} {.metadata.labels.kubernetes\.io/os}{"\n"}{end}"#,
    ]);
    assert_eq!(rows, "h1 True linux\nh2 True linux\nh3 True linux\n");
    let cp = c.kubectl(&[
        "get",
        "node",
        "h1",
        "-o",
        "jsonpath={.metadata.labels} {.spec.taints}",
    ]);
    assert!(
        cp.contains("node-role.kubernetes.io/control-plane") && cp.contains("NoSchedule"),
        "{cp}"
    );
}

/// Packages from the lab's signed repositories: pinned, held, the key installed by kwin.
fn assert_packages(c: &Cluster) {
    for h in ["h1", "h2", "h3"] {
        let v = c.lab.ssh(
            h,
            "dpkg-query -W -f '${Package}=${Version} ' kubeadm kubelet kubectl containerd; \
             apt-mark showhold | tr '\\n' ' '; \
             test -s /etc/apt/keyrings/kubernetes.gpg && echo key; \
             systemctl is-enabled kubelet containerd | tr '\\n' ' '",
        );
        for want in [
            "kubeadm=1.31.4-1.1",
            "kubelet=1.31.4-1.1",
            "kubectl=1.31.4-1.1",
            "containerd=1.6.",
            "kubeadm kubectl kubelet",
            "key",
            "enabled enabled",
        ] {
            assert!(v.contains(want), "{h}: `{want}` not in `{v}`");
        }
    }
}

/// The upgrade gate on the running 1.31.4 cluster: a version the skew policy forbids and a
/// downgrade are refused by `kwin plan` and `kwin apply` at `kubernetes_version`'s line,
/// before any host changes (the allowed upgrade: tests/e2e_upgrade.rs).
fn assert_gate_refuses(c: &Cluster, dir: &Path) {
    let plan = dir.join("plan.toml");
    let text = std::fs::read_to_string(&plan).expect("plan.toml");
    let line = text
        .lines()
        .position(|l| l.starts_with("kubernetes_version = \"1.31.4\""))
        .expect("kubernetes_version line")
        + 1;
    let at = format!("plan.toml:{line}:");
    for (version, code, hint, cmd) in [
        ("1.33.1", "upgrade-skip-minor", "1.32.<patch>", "plan"),
        ("1.31.3", "upgrade-downgrade", "\"1.31.4\"", "apply"),
    ] {
        let changed = text.replace(
            "kubernetes_version = \"1.31.4\"",
            &format!("kubernetes_version = \"{version}\""),
        );
        std::fs::write(&plan, changed).expect("write plan");
        let r = kwin!(dir, &[cmd, "plan.toml"]);
        assert_eq!(r.code, 1, "{version}: {r}");
        let err = r
            .stderr
            .lines()
            .find(|l| l.contains(code))
            .unwrap_or_default();
        assert!(err.contains(&at), "{version}: no `{code}` at {at}\n{r}");
        assert!(r.stderr.contains(hint), "{version}: hint lacks {hint}\n{r}");
    }
    std::fs::write(&plan, &text).expect("restore plan");
    // Nothing changed: the packages are still 1.31.4 and held.
    assert_packages(c);
}

/// No token, token secret or CA hash in anything kwin printed or wrote.
fn assert_no_secrets(c: &Cluster, dir: &Path, runs: &[&Run]) {
    let tokens = kwin_tokens(c);
    assert!(
        !tokens.is_empty(),
        "no bootstrap token with kwin's description in the cluster: join-data did not run"
    );
    let mut text = state_text(dir);
    for r in runs {
        text.push_str(&r.stdout);
        text.push_str(&r.stderr);
    }
    assert!(
        text.contains("kubeadm-join"),
        "the output names the join tasks"
    );
    for t in &tokens {
        let secret = t.split('.').nth(1).unwrap_or(t);
        assert!(
            !text.contains(t.as_str()),
            "a join token is in kwin's output or .kwin/"
        );
        assert!(
            !text.contains(secret),
            "a token secret is in kwin's output or .kwin/"
        );
    }
    let hash = c.lab.ssh(
        "h1",
        "openssl x509 -pubkey -noout -in /etc/kubernetes/pki/ca.crt | openssl pkey -pubin -outform der | sha256sum | cut -d' ' -f1",
    );
    let hash = hash.trim();
    assert_eq!(hash.len(), 64, "{hash}");
    assert!(
        !text.contains(hash),
        "the CA cert hash is in kwin's output or .kwin/"
    );
}

/// `kwin kubeconfig` (default path and `-o`): 0600, named after the cluster, and the real
/// kubectl lists the real API server's nodes with it.
fn assert_kubeconfig(c: &Cluster, dir: &Path, name: &str) {
    use std::os::unix::fs::PermissionsExt;
    let custom = dir.join("sub.kubeconfig");
    let custom_s = custom.display().to_string();
    for (args, path) in [
        (
            vec!["kubeconfig", "plan.toml"],
            dir.join(format!("{name}.kubeconfig")),
        ),
        (
            vec!["kubeconfig", "plan.toml", "-o", &custom_s],
            custom.clone(),
        ),
    ] {
        let r = kwin!(dir, &args);
        assert_eq!(r.code, 0, "{r}");
        assert!(
            r.stdout.contains(&path.display().to_string()) || args.len() == 2,
            "{r}"
        );
        let meta = std::fs::metadata(&path).expect("kubeconfig written");
        assert_eq!(
            meta.permissions().mode() & 0o777,
            0o600,
            "{}",
            path.display()
        );
        let text = std::fs::read_to_string(&path).expect("read kubeconfig");
        assert!(
            text.contains(&format!("https://{}", c.env["CONTROL_PLANE_ENDPOINT"])),
            "{text}"
        );
        let k = |a: &[&str]| {
            let o = Command::new(kwin_testkit::api::kubectl())
                .arg("--kubeconfig")
                .arg(&path)
                .args(a)
                .output()
                .expect("kubectl");
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        let ctx = k(&["config", "current-context"]);
        assert!(ctx.contains(name), "context `{ctx}`");
        let nodes = k(&["get", "nodes", "-o", "name"]);
        assert_eq!(nodes, "node/h1\nnode/h2\nnode/h3\n");
        // The key never reaches the terminal, nor the host log that records the read.
        assert!(!r.stdout.contains("client-key-data") && !r.stderr.contains("client-key"));
        let key = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("client-key-data:"))
            .map(|v| v.trim().trim_matches('"').to_string())
            .expect("the kubeconfig has client-key-data");
        let state = state_text(dir);
        assert!(
            state.contains("kubectl config view"),
            "the read is not in the host log"
        );
        assert!(!state.contains(&key), "the admin key is in .kwin/");
    }
}

kwin_testkit::lab_test! {
#[test]
fn flannel_lab_cluster_converges_then_changes_nothing() {
    let _turn = LAB.lock().unwrap_or_else(|e| e.into_inner());
    let c = Cluster::up(LAB_ID, 3);
    let dir = plan_from_example(&c, "lab-cluster.toml");
    // Before `kubeadm init`, there is no kubeconfig to fetch, and kwin says so.
    let early = kwin!(dir.path(), &["kubeconfig", "plan.toml"]);
    assert_eq!(early.code, 1, "{early}");
    assert!(
        early
            .stderr
            .contains("/etc/kubernetes/admin.conf does not exist"),
        "{early}"
    );
    assert!(!dir.path().join("lab-cluster.kubeconfig").exists());
    let (first, second) = apply_twice(dir.path());
    assert_nodes_ready(&c);
    let net = c.kubectl(&[
        "-n",
        "kube-flannel",
        "get",
        "configmap",
        "kube-flannel-cfg",
        "-o",
        r#"jsonpath={.data.net-conf\.json}"#,
    ]);
    let net: serde_json::Value = serde_json::from_str(&net).expect("net-conf.json");
    assert_eq!(net["Network"], "10.244.0.0/16");
    assert_eq!(net["Backend"]["VNI"], 4096);
    assert_eq!(net["Backend"]["Port"], 4789);
    let ds = c.kubectl(&[
        "-n",
        "kube-flannel",
        "get",
        "daemonset",
        "kube-flannel-ds",
        "-o",
        "jsonpath={.spec.template.spec.nodeSelector}",
    ]);
    assert!(ds.contains(r#""kubernetes.io/os":"linux""#), "{ds}");
    assert_packages(&c);
    assert_kubeconfig(&c, dir.path(), "lab-cluster");
    assert_gate_refuses(&c, dir.path());

    // A worker taken out with `kubeadm reset -f` joins again with a fresh token on the next
    // apply, and only its join changes.
    c.lab.ssh("h3", "kubeadm reset -f >/dev/null");
    assert_eq!(
        c.lab.ssh(
            "h3",
            "test -e /etc/kubernetes/kubelet.conf && echo joined || echo reset"
        ),
        "reset\n"
    );
    let tokens_before = kwin_tokens(&c).len();
    let third = kwin!(dir.path(), &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(third.code, 0, "{third}");
    assert_eq!(third.summary()["changed"], 1, "{third}");
    assert_eq!(
        third.task("h3", "kubeadm-join")["status"],
        "changed",
        "{third}"
    );
    assert_eq!(
        kwin_tokens(&c).len(),
        tokens_before + 1,
        "one new token for h3"
    );
    assert_nodes_ready(&c);

    // `kwin reset --yes` takes the cluster down on every host (the workers' Node objects are
    // drained and deleted, kubeadm's files are gone), a second reset changes nothing, and the
    // next apply builds the cluster again.
    let reset = kwin!(
        dir.path(),
        &["reset", "plan.toml", "--yes", "--output", "json"],
    );
    assert_eq!(reset.code, 0, "{reset}");
    assert!(
        reset.summary()["changed"].as_u64().unwrap_or(0) > 0,
        "{reset}"
    );
    for h in ["h1", "h2", "h3"] {
        assert_eq!(
            c.lab.ssh(
                h,
                "ls /etc/kubernetes/kubelet.conf /etc/kubernetes/admin.conf 2>/dev/null | wc -l"
            )
            .trim(),
            "0",
            "{h} still has kubeadm's files"
        );
    }
    let nodes = c.kubectl(&["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"]);
    assert!(
        !nodes.contains("h2") && !nodes.contains("h3"),
        "workers still registered: {nodes}"
    );
    let again = kwin!(
        dir.path(),
        &["reset", "plan.toml", "--yes", "--output", "json"],
    );
    assert_eq!(again.code, 0, "{again}");
    assert_eq!(again.summary()["changed"], 0, "{again}");
    let rebuilt = kwin!(dir.path(), &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(rebuilt.code, 0, "{rebuilt}");
    assert_nodes_ready(&c);
    assert_no_secrets(
        &c,
        dir.path(),
        &[&first, &second, &third, &reset, &again, &rebuilt],
    );
}
}

kwin_testkit::lab_test! {
#[test]
fn calico_lab_cluster_converges_then_changes_nothing() {
    let _turn = LAB.lock().unwrap_or_else(|e| e.into_inner());
    let c = Cluster::up(LAB_ID, 3);
    let dir = plan_from_example(&c, "lab-cluster-calico.toml");
    let (first, second) = apply_twice(dir.path());
    assert_nodes_ready(&c);
    // The IP pool is the Installation's (the operator makes it; kwin applies none).
    let pool = c.kubectl(&[
        "get",
        "installation",
        "default",
        "-o",
        "jsonpath={.spec.calicoNetwork.ipPools[0].cidr} {.spec.calicoNetwork.ipPools[0].encapsulation}",
    ]);
    assert_eq!(pool, "192.168.0.0/16 VXLAN");
    // IPAM and Felix in the group the operator installed: the stand-in's CRDs
    // (tigera-crds.yaml) are crd.projectcalico.org/v1, as on a cluster that has them already.
    let ipam = c.kubectl(&[
        "get",
        "ipamconfigs.crd.projectcalico.org",
        "default",
        "-o",
        "jsonpath={.spec.strictAffinity}",
    ]);
    assert_eq!(ipam, "true");
    let felix = c.kubectl(&[
        "get",
        "felixconfigurations.crd.projectcalico.org",
        "default",
        "-o",
        "jsonpath={.spec.ipipEnabled} {.spec.vxlanEnabled} {.spec.vxlanVNI}",
    ]);
    assert_eq!(felix, "false true 4096");
    let installation = c.kubectl(&[
        "get",
        "installations.operator.tigera.io",
        "default",
        "-o",
        "jsonpath={.spec.calicoNetwork.ipPools[0].encapsulation}",
    ]);
    assert_eq!(installation, "VXLAN");
    assert_no_secrets(&c, dir.path(), &[&first, &second]);
    assert_kubeconfig(&c, dir.path(), "lab-cluster-calico");
}
}
