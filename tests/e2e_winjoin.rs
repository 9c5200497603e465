//! End to end: a Windows worker joins a real control plane over WinRM, with a reboot in the
//! middle of its plan.
//!
//! The pieces, all real where they run here:
//!
//! - control plane: this machine through kwin's `local` transport, in front of the lab's API
//!   tier (`lab/apiserver`: kube-apiserver + etcd); `kube_join_data` runs the real
//!   kubeadm (`token create`) and openssl there, so the token, CA hash and endpoint are
//!   real;
//! - Windows worker: the lab's WinRM stand-in host (`lab/winrm-stand-in`: real NTLM, message
//!   encryption and WS-Man shell operations), run by `isolated-stand-in.sh` in a mount
//!   namespace of its own: its /etc and /var/lib are overlays whose writes land in this
//!   test's temp dir, its /run is a tmpfs, so nothing reaches the machine's own files. The
//!   stand-in runs scripts with /bin/sh, so kwin talks to it with `KWIN_WINRM_STAND_IN=1`:
//!   the host's modules are the POSIX ones (`command`, `reboot`, the POSIX form of
//!   `kubeadm_join`), while its restart goes through kwin's Windows reboot path (boot-time
//!   query, `shutdown.exe /r`), which the stand-in simulates;
//! - `windows-feature-stand-in` (Install-WindowsFeature: the feature stays InstallPending
//!   and a restart is pending until the host boots) and `kubeadm-stand-in` (`kubeadm join`:
//!   checks the CA hash against cluster-info and the bootstrap token against the real API
//!   server, refuses to join while the Containers feature is not installed, writes
//!   kubelet.conf), both in `lab/winrm-stand-in`.
//!
//! The order checked: tasks before → Containers feature → reboot (trigger, down, up with a new
//! boot time, re-probe) → tasks after → join with the control plane's join data — the first
//! apply with `--limit ww1`, so the control plane is read only and its join data is read
//! from a host the run does not change (`cp1: read only (join-data for ww1)`); the second
//! apply changes nothing and does not restart the host. Secrets (token, WinRM password) never
//! appear in output or logs.
//!
//! What this does not cover: the PowerShell real Windows hosts get (the Windows modules
//! `windows_feature`, `reboot`, `service` and the PowerShell form of `kubeadm_join`) is checked
//! by modules/tests/windows.rs, modules/tests/kube.rs and the golden files (parsed with
//! tree-sitter-powershell, never run), and a real kubelet never starts: only Windows VMs
//! exercise those.
//!
//! A lab test (root for the mount namespaces, the cached API tier binaries, the stand-in's
//! Python environment): ignored by `cargo test`, failing when run without them.
#![allow(clippy::print_stderr)]

use kwin_testkit::api::Tier;
use kwin_testkit::kwin;
use kwin_testkit::kwin::{events, finished, summary, walk};
use kwin_testkit::winrm::{start_stand_in, Options};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

const PASSWORD: &str = "Join-Stand-in-Passw0rd!";

// ----------------------------------------------------------------- the Windows stand-in

// ------------------------------------------------------------------------------ kwin

fn kwin(dir: &Path, tier: &Tier, args: &[&str]) -> (i32, String, String) {
    // The control plane (local transport) finds the tier's real kubeadm first on PATH.
    let path = format!(
        "{}:{}",
        tier.kubeadm_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let r = kwin!(dir)
        .args(args)
        .env("KWIN_WINRM_STAND_IN", "1")
        .env("KWIN_E2E_WINRM_PASSWORD", PASSWORD)
        .env("PATH", path)
        .run();
    (r.code, r.stdout, r.stderr)
}

fn plan_text(winrm_port: &str, tier: &Tier) -> String {
    let endpoint = format!("127.0.0.1:{}", tier.var("APISERVER_PORT"));
    let kubeconfig = tier.var("KUBECONFIG");
    let pki = tier.state.join("pki");
    format!(
        r#"
[settings]
allow_reboot = true
step_timeout = 120

[[hosts]]
name = "cp1"
os = "linux"
transport = "local"

[[hosts]]
name = "ww1"
address = "127.0.0.1"
os = "windows"
transport = "winrm"
https = false
port = {winrm_port}
user = "Administrator"
password_env = "KWIN_E2E_WINRM_PASSWORD"

# The control plane's join data: a fresh bootstrap token from the real kubeadm, the CA hash.
[[tasks]]
name = "join-data"
module = "kube_join_data"
on = {{ hosts = ["cp1"] }}
params = {{ api_endpoint = "{endpoint}", kubeconfig = "{kubeconfig}", pki_dir = "{pki}", ttl = "1h" }}

[[tasks]]
name = "before-reboot"
module = "command"
on = {{ hosts = ["ww1"] }}
params = {{ run = "mkdir -p /var/lib/kwin-e2e && echo ran >> /var/lib/kwin-e2e/before-runs && cp /var/lib/kwin-e2e/before-runs /var/lib/kwin-e2e/before", unless = "test -e /var/lib/kwin-e2e/before" }}

[[tasks]]
name = "containers-feature"
module = "command"
on = {{ hosts = ["ww1"] }}
after = ["before-reboot"]
params = {{ run = "windows-feature-stand-in install Containers", unless = "windows-feature-stand-in state Containers | grep -Eqx 'Installed|InstallPending'" }}

[[tasks]]
name = "reboot"
module = "reboot"
on = {{ hosts = ["ww1"] }}
after = ["containers-feature"]
params = {{ down_timeout = 60, up_timeout = 120 }}

[[tasks]]
name = "after-reboot"
module = "command"
on = {{ hosts = ["ww1"] }}
after = ["reboot"]
params = {{ run = "windows-feature-stand-in state Containers > /var/lib/kwin-e2e/after", unless = "grep -qx Installed /var/lib/kwin-e2e/after" }}

[[tasks]]
name = "kubeadm-join"
module = "kubeadm_join"
on = {{ hosts = ["ww1"] }}
after = ["after-reboot"]
inputs = {{ token = "cp1:join-data.token", ca_cert_hash = "cp1:join-data.ca_cert_hash", api_endpoint = "cp1:join-data.api_endpoint" }}
params = {{ node_name = "ww1" }}
"#,
        pki = pki.display(),
    )
}

fn ca_hash(tier: &Tier) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg("openssl x509 -pubkey -noout -in \"$1\" | openssl pkey -pubin -outform der | sha256sum | cut -d' ' -f1")
        .arg("sh")
        .arg(tier.state.join("pki/ca.crt"))
        .output()
        .expect("openssl");
    format!("sha256:{}", String::from_utf8_lossy(&out.stdout).trim())
}

kwin_testkit::lab_test! {
#[test]
fn a_windows_worker_reboots_mid_plan_then_joins_with_real_join_data() {
    let tier = Tier::start();
    let kubeadm = tier.var("KUBEADM_BIN");
    let mut s = start_stand_in(&Options {
        password_env: "KWIN_E2E_WINRM_PASSWORD",
        password: PASSWORD,
        down_secs: 2,
        kubeadm: Some(&kubeadm),
    });
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("plan.toml"), plan_text(&s.port, &tier)).expect("plan");

    let (code, out, err) = kwin(dir.path(), &tier, &["validate", "plan.toml"]);
    assert_eq!(code, 0, "validate:\n{out}\n{err}");

    let boot_before = s.boot_time();
    // `--limit ww1`: the worker alone is chosen; the control plane is read, not changed —
    // its join data (a no-op task whose outputs the join reads) is what the worker needs.
    let (code, out1, err1) = kwin(
        dir.path(),
        &tier,
        &["apply", "plan.toml", "--limit", "ww1", "--output", "json"],
    );
    assert_eq!(code, 0, "first apply:\n{out1}\n{err1}");
    let read_only: Vec<Value> = events(&out1)
        .into_iter()
        .filter(|e| e["event"] == "host_read_only")
        .collect();
    assert_eq!(read_only.len(), 1, "{out1}");
    assert_eq!(read_only[0]["host"], "cp1", "{out1}");
    assert_eq!(read_only[0]["tasks"], serde_json::json!(["join-data"]), "{out1}");
    assert_eq!(read_only[0]["for_hosts"], serde_json::json!(["ww1"]), "{out1}");
    assert_eq!(finished(&out1, "cp1"), [("join-data".to_string(), "ok".to_string())], "{out1}");
    let sum = summary(&out1);
    assert_eq!(
        (sum["changed"].as_u64(), sum["failed"].as_u64()),
        (Some(5), Some(0)),
        "first apply:\n{out1}"
    );
    // The order on the Windows host, every task changed once.
    let order: Vec<String> = finished(&out1, "ww1")
        .into_iter()
        .map(|(t, st)| {
            assert_eq!(st, "changed", "{t}:\n{out1}");
            t
        })
        .collect();
    assert_eq!(
        order,
        [
            "before-reboot",
            "containers-feature",
            "reboot",
            "after-reboot",
            "kubeadm-join"
        ],
        "{out1}"
    );
    // The reboot: planned as one, the stand-in restarted exactly once, with a later boot time.
    let planned = events(&out1)
        .into_iter()
        .find(|e| e["event"] == "task_planned" && e["host"] == "ww1" && e["task"] == "reboot")
        .unwrap_or_else(|| panic!("no plan for the reboot:\n{out1}"));
    assert_eq!(planned["action"], "reboot", "{planned}");
    assert!(
        planned["reason"]
            .as_str()
            .is_some_and(|r| r.contains("/var/run/reboot-required")),
        "{planned}"
    );
    assert_eq!(s.reboots(), 1, "stand-in output: {:?}", s.server.seen);
    let boot_after = s.boot_time();
    assert!(
        boot_after > boot_before,
        "boot time {boot_after} after {boot_before}"
    );
    // Tasks before the reboot ran once; the task after it saw the finished install.
    assert_eq!(
        s.host_file("/var/lib/kwin-e2e/before-runs").as_deref(),
        Some("ran\n")
    );
    assert_eq!(
        s.host_file("/var/lib/kwin-e2e/after").as_deref(),
        Some("Installed\n")
    );
    // The journal records the reboot.
    let runs = walk(&dir.path().join(".kwin/runs"));
    assert_eq!(runs.len(), 1, "{runs:?}");
    let journal: Value =
        serde_json::from_str(&std::fs::read_to_string(&runs[0]).expect("journal")).expect("json");
    let jt = journal["hosts"]["ww1"]["tasks"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["task"] == "reboot"))
        .cloned()
        .unwrap_or_else(|| panic!("no reboot task in the journal: {journal}"));
    assert_eq!(
        (jt["planned"].as_str(), jt["status"].as_str()),
        (Some("reboot"), Some("changed")),
        "{jt}"
    );
    let log = walk(&dir.path().join(".kwin/logs"))
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n == "ww1.log"))
        .map(|p| std::fs::read_to_string(p).expect("log"))
        .unwrap_or_default();
    assert!(
        log.contains("reboot: host is down") && log.contains("reboot: back with a new boot id"),
        "the host log shows the reboot's phases:\n{log}"
    );

    // The join got the control plane's real join data, and the real API server accepted it.
    let joined: Value = serde_json::from_str(
        &s.host_file("/var/lib/kubelet/join.json")
            .unwrap_or_else(|| panic!("kubeadm join did not run:\n{out1}\n{err1}")),
    )
    .expect("join.json");
    assert_eq!(joined["node"], "ww1");
    assert_eq!(
        joined["api_endpoint"],
        format!("127.0.0.1:{}", tier.var("APISERVER_PORT"))
    );
    assert_eq!(joined["ca_cert_hash"], ca_hash(&tier).as_str());
    let token_id = joined["token_id"].as_str().expect("token id").to_string();
    let secret = tier.kubectl(&[
        "get",
        "secret",
        "-n",
        "kube-system",
        &format!("bootstrap-token-{token_id}"),
        "-o",
        "json",
    ]);
    let secret: Value = serde_json::from_str(&secret).expect("secret json");
    assert_eq!(secret["type"], "bootstrap.kubernetes.io/token");
    let kubelet_conf = s
        .host_file("/etc/kubernetes/kubelet.conf")
        .expect("kubelet.conf on the stand-in host");
    let token = kubelet_conf
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .expect("token in kubelet.conf")
        .to_string();
    assert!(token.starts_with(&format!("{token_id}.")), "{token_id}");
    // The very secret the cluster stores for that token (never printed).
    let stored = Command::new("sh")
        .arg("-c")
        .arg("\"$3\" --kubeconfig \"$1\" get secret -n kube-system \"bootstrap-token-$2\" -o 'jsonpath={.data.token-secret}' | base64 -d")
        .arg("sh")
        .arg(tier.var("KUBECONFIG"))
        .arg(&token_id)
        .arg(tier.kubectl_bin())
        .output()
        .expect("kubectl");
    assert!(
        stored.status.success()
            && token.split_once('.').map(|(_, s)| s.as_bytes()) == Some(&stored.stdout[..]),
        "the joined token is not the one the cluster stores"
    );
    assert!(
        std::fs::metadata("/etc/kubernetes/kubelet.conf").is_err()
            || !std::fs::read_to_string("/etc/kubernetes/kubelet.conf")
                .unwrap_or_default()
                .contains(&token),
        "the stand-in host wrote into the machine's /etc"
    );

    // Second apply: nothing changes, no restart.
    let (code, out2, err2) = kwin(
        dir.path(),
        &tier,
        &["apply", "plan.toml", "--output", "json"],
    );
    assert_eq!(code, 0, "second apply:\n{out2}\n{err2}");
    let sum = summary(&out2);
    assert_eq!(
        (
            sum["changed"].as_u64(),
            sum["failed"].as_u64(),
            sum["ok"].as_u64()
        ),
        (Some(0), Some(0), Some(6)),
        "second apply:\n{out2}"
    );
    assert_eq!(s.reboots(), 1, "the second apply restarted the host");
    assert_eq!(s.boot_time(), boot_after);

    // Secrets: neither the join token nor the WinRM password in output, logs or journals.
    let mut all = out1 + &err1 + &out2 + &err2;
    for f in walk(&dir.path().join(".kwin")) {
        all.push_str(&String::from_utf8_lossy(
            &std::fs::read(f).unwrap_or_default(),
        ));
    }
    assert!(!all.contains(&token), "the join token leaked");
    assert!(
        !all.contains(token.split_once('.').map(|(_, s)| s).unwrap_or("-")),
        "the token secret leaked"
    );
    assert!(!all.contains(PASSWORD), "the WinRM password leaked");

    // The stand-in's checks can fail: a wrong token and a wrong CA hash are refused by the
    // same kubeadm-stand-in, on a fresh stand-in host.
    check_refusals(&tier, &token);
}
}

/// kubeadm-stand-in, run directly in a fresh isolated host with the Containers feature
/// installed, refuses a token the API server does not know and a CA hash that is not the
/// cluster's.
fn check_refusals(tier: &Tier, token: &str) {
    let dir = tempfile::tempdir().expect("tmp");
    let endpoint = format!("127.0.0.1:{}", tier.var("APISERVER_PORT"));
    let good_hash = ca_hash(tier);
    let lab = kwin_testkit::host::workspace().join("lab/winrm-stand-in");
    let config = |token: &str, hash: &str| {
        serde_json::json!({
            "apiVersion": "kubeadm.k8s.io/v1beta2",
            "kind": "JoinConfiguration",
            "discovery": { "bootstrapToken": {
                "apiServerEndpoint": endpoint, "token": token, "caCertHashes": [hash] } },
            "nodeRegistration": { "name": "ww2" }
        })
        .to_string()
    };
    let wrong_token = "abcdef.0123456789abcdef";
    assert_ne!(token, wrong_token);
    let cases = [
        (
            config(wrong_token, &good_hash),
            "rejected the bootstrap token",
        ),
        (
            config(token, &format!("sha256:{}", "0".repeat(64))),
            "none of the public keys",
        ),
    ];
    for (i, (cfg, want)) in cases.iter().enumerate() {
        let f = dir.path().join(format!("join-{i}.json"));
        std::fs::write(&f, cfg).expect("config");
        let host = dir.path().join(format!("host-{i}"));
        std::fs::create_dir_all(&host).expect("mkdir");
        let out = Command::new(lab.join("isolated-stand-in.sh"))
            .arg(&host)
            .arg("sh")
            .arg("-c")
            .arg("\"$1\" install Containers >/dev/null && \"$1\" boot && exec \"$2\" join --config \"$3\"")
            .arg("sh")
            .arg(lab.join("windows-feature-stand-in"))
            .arg(lab.join("kubeadm-stand-in"))
            .arg(&f)
            .output()
            .expect("kubeadm-stand-in");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(want),
            "case {i}: expected a refusal with `{want}`: {stderr}"
        );
        assert!(
            !host.join("upper/etc/kubernetes/kubelet.conf").exists(),
            "case {i}: a refused join wrote kubelet.conf"
        );
    }
}
