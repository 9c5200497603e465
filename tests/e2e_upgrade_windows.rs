//! End to end: a Windows worker's `kubeadm upgrade node` runs after the control plane's
//! `kubeadm upgrade apply`, never before, when the version is raised.
//!
//! The pieces: a lab control plane (h1 of lab 13, `lab/up.sh` + `lab/cluster-stand-in`: real
//! sshd, apt/dpkg from the lab's signed per-minor repositories, kube-apiserver + etcd,
//! kubectl; the kubeadm and kubelet stand-ins), built at 1.31.4 by kwin's recipes
//! (`examples/lab-cluster.toml` with h1 alone), and the WinRM stand-in host
//! (`lab/winrm-stand-in`, as in `tests/e2e_winjoin.rs`) joined to it as ww1 by `kubeadm_join`
//! with the control plane's real join data.
//!
//! The upgrade runs from a second plan without `[cluster]`: with `[cluster]` every host is a
//! node and gets the Windows recipes, which the stand-in (it runs scripts with /bin/sh, so
//! kwin talks to it in the POSIX dialect, `KWIN_WINRM_STAND_IN=1`) cannot run. Its tasks are
//! the recipes' steps: on h1 the kubeadm package of the new minor and `kubeadm_upgrade` `mode
//! = "apply"` (recipe upgrade-control-plane); on ww1 what windows-worker's `kubeadm-download`
//! does (the stand-in's kubeadm.exe version, `/var/lib/kwin-standin/kubeadm.version`) and
//! `kubeadm_upgrade` `mode = "node"` after `h1:kubeadm-upgrade-apply` — the edge recipe
//! upgrade-worker gives every worker through `@all:cp-upgrade-uncordon`. The PowerShell a
//! real Windows node gets is checked as data only (modules/tests: the cases, the PS 5.1
//! profile, the twin of the kubelet service step).
//!
//! The oracle is the stand-ins' own call logs: h1's `/var/log/kubeadm-stand-in.log` (`upgrade
//! apply` ok to v1.32.5) and the Windows host's `/var/lib/kwin-standin/kubeadm-calls.log`
//! (`upgrade node` ok to v1.32.5, later than h1's apply; the stand-in refuses an `upgrade node`
//! whose kubeadm is newer than the cluster's kubeadm-config). The test first puts the Windows
//! upgrade first on purpose (no edge, `--limit ww1`): the stand-in refuses it and kwin fails
//! the task — the oracle can fail (and without the edge the ordered apply fails the same
//! way). A second apply after the upgrade changes nothing and calls no kubeadm on ww1.
//!
//! What the stand-in cannot express, so this test does not claim it: ww1 registers no Node
//! (the API tier has no controller-manager to sign a kubelet certificate, and no kubelet runs
//! on the stand-in), so there is nothing to drain or uncordon for it; it has no service
//! control manager, so the kubelet and containerd services' stop → replace → start is not run
//! here; and the recipes' Windows steps themselves (their order in upgrade-worker's chain) are
//! checked by the graph goldens (tests/golden/*.txt), not run.
//!
//! A containerd change on a joined node whose pods' shims still run from
//! `containerd-shim-runhcs-v1.exe` (the pods a drain leaves: kube-proxy, the CNI's DaemonSet
//! pods) is therefore checked as data, by the tier-1 test
//! `a_containerd_change_with_running_shims_waits_only_for_containerd_itself` below: the
//! PowerShell of the real recipe step (upgrade-worker's `upgrade-containerd-service`, as kwin
//! expands examples/flannel.toml for ww1, planned against a running containerd whose three
//! binaries all differ from the staged release), parsed by the Windows PowerShell grammar. The
//! stand-in could hold a process open on a file, but it runs `/bin/sh`, not that PowerShell,
//! and Linux lets a running binary be replaced where Windows does not: a process held there
//! would prove nothing about the step Windows runs.
//!
//! Lab 13 of its own (`lab/cluster-stand-in/up.sh` takes lab ids up to 19, as lab/lib.sh). A
//! lab test (root, the API tier's binaries from `lab/apiserver/build.sh`, the stand-in's
//! Python environment): ignored by `cargo test`, failing when run without them. About a
//! minute (control plane ~40 s, the upgrade ~8 s).
#![allow(clippy::print_stderr)]

use kwin_testkit::cluster::Cluster;
use kwin_testkit::kwin;
use kwin_testkit::winrm::{start_stand_in, Options, StandInHost};
use serde_json::Value;
use std::path::Path;
use std::time::Instant;

const LAB_ID: &str = "13";
const FROM: &str = "1.31.4";
const TO: &str = "1.32.5";
const PASSWORD: &str = "Upgrade-Stand-in-Passw0rd!";

/// `examples/lab-cluster.toml` for lab 13 with h1 only, at 1.31.4: the control plane, built by
/// kwin's recipes.
fn cluster_plan(c: &Cluster) -> String {
    let mut text = c.example("lab-cluster.toml");
    assert!(text.contains(&format!("kubernetes_version = \"{FROM}\"")));
    // h1 alone: the workers of the example are not part of this lab.
    let at = text
        .find("[[hosts]]\nname = \"h2\"")
        .expect("h2 in the example");
    text.truncate(at);
    text
}

/// The upgrade's plan (no `[cluster]`: the stand-in host speaks the POSIX dialect, so the
/// Windows recipes cannot run on it, and with `[cluster]` every host is a node that gets
/// them): on h1 the join data, the kubeadm package of `version` from the lab's repository of
/// its minor and `kubeadm_upgrade` `mode = "apply"` (as recipe upgrade-control-plane has
/// them); on ww1 the Containers feature, its kubeadm.exe at `version` (what windows-worker's
/// `kubeadm-download` does), the join, and `kubeadm_upgrade` `mode = "node"`. `ordered`:
/// ww1's upgrade waits for h1's (the edge recipe upgrade-worker gives every worker).
fn upgrade_plan(c: &Cluster, win: &StandInHost, version: &str, ordered: bool) -> String {
    let mirror = format!("http://10.{}.255.1:8080/pkgs.k8s.io", c.net());
    let endpoint = format!("10.{}.255.1:6443", c.net());
    let minor = version.rsplit_once('.').map_or(version, |(m, _)| m);
    let after = if ordered {
        r#"after = ["kubeadm-join", "h1:kubeadm-upgrade-apply"]"#
    } else {
        r#"after = ["kubeadm-join"]"#
    };
    let text = format!(
        r#"inventory = "-"

[settings]
step_timeout = 150
retries = 1
retry_delay = 1

[defaults.linux]
connect_timeout = 10

[[hosts]]
name = "h1"
os = "linux"

[[hosts]]
name = "ww1"
address = "127.0.0.1"
os = "windows"
transport = "winrm"
https = false
port = {port}
user = "Administrator"
password_env = "KWIN_E2E_WINRM_PASSWORD"

[[tasks]]
name = "join-data"
module = "kube_join_data"
on = {{ hosts = ["h1"] }}
params = {{ api_endpoint = "{endpoint}", ttl = "1h" }}

[[tasks]]
name = "kubeadm-package"
module = "package"
on = {{ hosts = ["h1"] }}
params = {{ name = ["kubeadm"], version = "{version}-*", hold = true, repository = {{ name = "kubernetes", url = "{mirror}/core:/stable:/v{minor}/deb/", key_url = "{mirror}/core:/stable:/v{minor}/deb/Release.key", key_fingerprint = "299785BE2B90584DA503D5ED005A7D5F6EF0F348", suite = "/" }} }}

[[tasks]]
name = "kubeadm-upgrade-apply"
module = "kubeadm_upgrade"
on = {{ hosts = ["h1"] }}
after = ["kubeadm-package"]
params = {{ mode = "apply", version = "{version}", node = "h1" }}

[[tasks]]
name = "containers-feature"
module = "command"
on = {{ hosts = ["ww1"] }}
params = {{ run = "windows-feature-stand-in install Containers >/dev/null && windows-feature-stand-in boot", unless = "windows-feature-stand-in state Containers | grep -qx Installed" }}

[[tasks]]
name = "kubeadm-exe"
module = "command"
on = {{ hosts = ["ww1"] }}
params = {{ run = "mkdir -p /var/lib/kwin-standin && echo v{version} > /var/lib/kwin-standin/kubeadm.version", unless = "grep -qx v{version} /var/lib/kwin-standin/kubeadm.version" }}

[[tasks]]
name = "kubeadm-join"
module = "kubeadm_join"
on = {{ hosts = ["ww1"] }}
after = ["containers-feature", "kubeadm-exe"]
inputs = {{ token = "h1:join-data.token", ca_cert_hash = "h1:join-data.ca_cert_hash", api_endpoint = "h1:join-data.api_endpoint" }}
params = {{ node_name = "ww1" }}

[[tasks]]
name = "kubeadm-upgrade"
module = "kubeadm_upgrade"
on = {{ hosts = ["ww1"] }}
{after}
params = {{ mode = "node", version = "{version}", node = "ww1" }}
"#,
        port = win.port,
    );
    c.with_inventory(&text)
}

fn apply(dir: &Path, extra: &[&str]) -> (kwin_testkit::kwin::Run, f64) {
    let t = Instant::now();
    let mut args = vec!["apply", "plan.toml", "--output", "json"];
    args.extend_from_slice(extra);
    let r = kwin!(dir)
        .args(&args)
        .env("KWIN_WINRM_STAND_IN", "1")
        .env("KWIN_E2E_WINRM_PASSWORD", PASSWORD)
        .run();
    (r, t.elapsed().as_secs_f64())
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The Windows host's `upgrade node` calls to `to`: (epoch, result).
fn windows_upgrades(win: &StandInHost, to: &str) -> Vec<(f64, String)> {
    json_lines(
        &win.host_file("/var/lib/kwin-standin/kubeadm-calls.log")
            .unwrap_or_default(),
    )
    .into_iter()
    .filter(|l| l["verb"] == "upgrade node" && l["to"] == format!("v{to}"))
    .map(|l| {
        (
            l["epoch"].as_f64().unwrap_or(0.0),
            l["result"].as_str().unwrap_or("?").to_string(),
        )
    })
    .collect()
}

kwin_testkit::lab_test! {
#[test]
fn a_windows_worker_runs_kubeadm_upgrade_node_after_the_control_planes_upgrade_apply() {
    let c = Cluster::up(LAB_ID, 1);
    let win = start_stand_in(&Options {
        password_env: "KWIN_E2E_WINRM_PASSWORD",
        password: PASSWORD,
        down_secs: 1,
        kubeadm: None,
    });
    let plan = c.lab.plan_dir("");
    let dir = plan.path();

    // The control plane at 1.31.4, built by kwin's recipes.
    std::fs::write(dir.join("cluster.toml"), cluster_plan(&c)).expect("plan");
    let t = Instant::now();
    let built = kwin!(dir, &["apply", "cluster.toml", "--output", "json"]);
    assert_eq!(built.code, 0, "cluster apply:\n{built}");
    eprintln!("control plane built in {:.1}s", t.elapsed().as_secs_f64());
    let write = |version: &str, ordered: bool| {
        std::fs::write(dir.join("plan.toml"), upgrade_plan(&c, &win, version, ordered))
            .expect("plan");
    };

    // ww1 joined at 1.31.4 (the control plane's tasks are no-ops at its version).
    write(FROM, true);
    let (cold, cold_s) = apply(dir, &[]);
    assert_eq!(cold.code, 0, "join apply:\n{cold}");
    assert_eq!(cold.task("ww1", "kubeadm-join")["status"], "changed", "{cold}");
    assert_eq!(cold.task("h1", "kubeadm-upgrade-apply")["status"], "ok", "{cold}");
    assert!(
        win.host_file("/etc/kubernetes/kubelet.conf").is_some(),
        "ww1 did not join:\n{cold}"
    );
    eprintln!("join apply {cold_s:.1}s");

    // Deliberately first: ww1's upgrade without the control plane's (`--limit ww1`: h1 is
    // not changed). The stand-in refuses it, and kwin fails the task.
    write(TO, false);
    let (first, _) = apply(dir, &["--limit", "ww1"]);
    assert_ne!(first.code, 0, "an upgrade node before the control plane passed:\n{first}");
    assert_eq!(first.task("ww1", "kubeadm-upgrade")["status"], "failed", "{first}");
    let refused = windows_upgrades(&win, TO);
    assert!(
        !refused.is_empty() && refused.iter().all(|(_, r)| r == "refused"),
        "the stand-in did not refuse the early upgrade node: {refused:?}"
    );

    // In order: h1's upgrade apply, then ww1's upgrade node.
    write(TO, true);
    let (up, up_s) = apply(dir, &[]);
    assert_eq!(up.code, 0, "upgrade apply:\n{up}");
    eprintln!("upgrade apply {up_s:.1}s");
    assert_eq!(up.task("h1", "kubeadm-upgrade-apply")["status"], "changed", "{up}");
    assert_eq!(up.task("ww1", "kubeadm-upgrade")["status"], "changed", "{up}");
    let applied: Vec<f64> = json_lines(&c.lab.ssh("h1", "cat /var/log/kubeadm-stand-in.log"))
        .into_iter()
        .filter(|l| l["verb"] == "upgrade apply" && l["result"] == "ok" && l["to"] == format!("v{TO}"))
        .filter_map(|l| l["epoch"].as_f64())
        .collect();
    assert_eq!(applied.len(), 1, "h1's upgrade apply to v{TO}: {applied:?}");
    let oks: Vec<f64> = windows_upgrades(&win, TO)
        .into_iter()
        .filter(|(_, r)| r == "ok")
        .map(|(t, _)| t)
        .collect();
    assert_eq!(oks.len(), 1, "ww1's upgrade node to v{TO}: {oks:?}");
    assert!(
        oks[0] > applied[0],
        "ww1's upgrade node ({}) before h1's upgrade apply ({})",
        oks[0],
        applied[0]
    );
    assert_eq!(
        win.host_file("/var/lib/kubelet/kwin-upgraded-node").as_deref(),
        Some(format!("v{TO}\n").as_str()),
        "kubeadm_upgrade's record"
    );

    // Converged: a second apply changes nothing, and runs no kubeadm on ww1.
    let calls = win
        .host_file("/var/lib/kwin-standin/kubeadm-calls.log")
        .unwrap_or_default();
    let (again, again_s) = apply(dir, &[]);
    assert_eq!(again.code, 0, "{again}");
    assert_eq!(again.summary()["changed"], 0, "second apply changed something:\n{again}");
    assert_eq!(
        win.host_file("/var/lib/kwin-standin/kubeadm-calls.log")
            .unwrap_or_default(),
        calls,
        "the second apply called kubeadm on ww1"
    );
    eprintln!("second apply {again_s:.1}s");
}
}

/// The tree-sitter nodes of `script` (PowerShell grammar) of the given kinds, as text.
fn ps_nodes(script: &str, kinds: &[&str]) -> Vec<String> {
    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&tree_sitter_powershell::LANGUAGE.into())
        .expect("the PowerShell grammar");
    let tree = parser.parse(script, None).expect("parsed");
    let mut out = Vec::new();
    let mut stack = vec![tree.root_node()];
    while let Some(n) = stack.pop() {
        if kinds.contains(&n.kind()) {
            out.push(script[n.byte_range()].to_string());
        }
        let mut cursor = n.walk();
        stack.extend(n.children(&mut cursor));
    }
    out
}

/// The PowerShell a joined, drained Windows node gets when `versions.containerd` changes while
/// its remaining pods' shims run from `containerd-shim-runhcs-v1.exe`: the recipe step as kwin
/// expands it, planned against a running containerd whose binaries all differ from the staged
/// release. It must stop containerd, wait for containerd's own process only (never for a
/// process running from a replaced file: the shims outlive containerd, which reconnects to
/// them), rename each running image aside before moving the new file in, and start containerd
/// and the kubelet again. Before, the step waited up to 120 s for every process running from
/// the replaced files, shims included, and threw with containerd and the kubelet stopped.
#[test]
fn a_containerd_change_with_running_shims_waits_only_for_containerd_itself() {
    use kwin_engine::module::Registry;
    use kwin_engine::transport::Shell;
    let rel = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/flannel.toml");
    let text = std::fs::read_to_string(&rel).expect("examples/flannel.toml");
    let plan = kwin_engine::plan::load_str(&rel, &text).expect("the example loads");
    let tasks = kwin_engine::expand::expand(&plan, kwin_modules::recipes::RECIPES)
        .expect("the example expands");
    let step = tasks
        .iter()
        .find(|t| t.id.host == "ww1" && t.id.name == "upgrade-containerd-service")
        .expect("upgrade-worker's containerd step on ww1");
    let params: Value = (*step.params).clone();
    let m = kwin_modules::Builtin
        .build(&step.module, Shell::PowerShell, &params)
        .expect("builds");
    let dests: Vec<String> = params["binaries"]
        .as_array()
        .expect("binaries")
        .iter()
        .map(|b| b["dest"].as_str().expect("dest").to_ascii_lowercase())
        .collect();
    assert!(
        dests
            .iter()
            .any(|d| d.ends_with("\\containerd-shim-runhcs-v1.exe")),
        "the step replaces the shim: {dests:?}"
    );
    let args: Vec<String> = params["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("arg").to_string())
        .collect();
    let image_path = kwin_modules::windows::service::image_path(
        params["binary"].as_str().expect("binary"),
        &args,
    );
    // A joined node: containerd registered as kwin registers it and running, each installed
    // binary (the old release) differing from its staged copy.
    let mut facts = serde_json::Map::new();
    for q in m.facts(Shell::PowerShell) {
        let answer = if q.key.starts_with("win.service:") {
            serde_json::json!({
                "state": "Running", "depends_on": [], "image_path": image_path, "exists": true,
                "start": 2, "display_name": params["display_name"],
            })
        } else if q.key.starts_with("win.path:") {
            let installed = dests.iter().any(|d| q.key.ends_with(d.as_str()));
            let hash = if installed { "a" } else { "b" }.repeat(64);
            serde_json::json!({"size": 1000, "exists": true, "dir": false, "content_b64": null, "sha256": hash})
        } else {
            panic!("a fact this test does not answer: {}", q.key)
        };
        facts.insert(q.key, serde_json::json!({ "stdout": answer.to_string() }));
    }
    let case: kwin_testkit::cases::Case = serde_json::from_value(serde_json::json!({
        "params": params,
        "facts": facts,
        "expect": { "change": {
            "action": "update",
            "steps_in_order": [
                "$kwinPid = [int](Get-CimInstance -ClassName Win32_Service -Filter 'Name=''containerd''').ProcessId",
                "Stop-Service -Name 'containerd' -Force",
                "$kwinProcess.WaitForExit(120000)",
                "containerd-shim-runhcs-v1.exe'",
                "Move-Item -LiteralPath $dst -Destination ($dst + '.kwin-old-'",
                "Move-Item -LiteralPath ($dst + '.kwin-new') -Destination $dst",
                "Start-Service -Name 'containerd'",
                "foreach ($d in $kwinDependents) { Start-Service -Name $d }",
            ],
            "steps_lack": ["Stop-Process", "taskkill"],
        }},
    }))
    .expect("case");
    let mut produced = kwin_testkit::cases::Produced::default();
    kwin_testkit::cases::run_case(
        &kwin_modules::Builtin,
        &step.module,
        Shell::PowerShell,
        &case,
        &rel,
        &mut produced,
    )
    .unwrap_or_else(|e| panic!("upgrade-containerd-service: {e}"));
    let steps: Vec<&String> = produced
        .scripts
        .iter()
        .filter(|(from, _)| from.ends_with(": step"))
        .map(|(_, s)| s)
        .collect();
    assert!(!steps.is_empty(), "no step planned");
    for script in steps {
        // No loop reads processes: nothing waits for the shims.
        for l in ps_nodes(
            script,
            &[
                "while_statement",
                "do_statement",
                "for_statement",
                "foreach_statement",
            ],
        ) {
            assert!(
                !l.contains("Get-Process") && !l.contains(".Path"),
                "a loop reads processes:\n{l}"
            );
        }
        // The one process the step looks up is containerd's, by the id the SCM gave it.
        for c in ps_nodes(script, &["command"]) {
            if c.trim_start()
                .to_ascii_lowercase()
                .starts_with("get-process")
            {
                assert!(
                    c.contains("-Id $kwinPid"),
                    "a process looked up by something else than the service's id: {c}"
                );
            }
        }
    }
}
