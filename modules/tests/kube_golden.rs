//! Goldens of what the recipes render for a cluster: every Kubernetes manifest and patch set,
//! every configuration file (kubeadm, containerd, Docker, kubelet start script), and the
//! scripts of the kubeadm, join-data, wait and (Linux) command steps, for flannel VXLAN, flannel host-gw,
//! Calico (containerd) and Docker.
//!
//! Rendered through the real expansion (examples/*.toml and variants) and the real modules;
//! files in tests/golden/manifests/ named `<variant>--<host>--<task>.<ext>`.
//! `KWIN_BLESS=1 cargo test -p kwin-modules --test kube_golden` rewrites them (and removes
//! goldens nothing renders any more).

mod kube_common;

use kube_common::{expand, plan_text, root};
use kwin_engine::module::Registry;
use kwin_engine::task::Task;
use kwin_engine::transport::Shell;
use kwin_modules::kube::kubeadm_join::{JoinInputs, KubeadmJoin};
use kwin_modules::table::Described;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Lab values standing in for the join inputs (never a real cluster's).
fn lab_inputs() -> JoinInputs {
    JoinInputs {
        token: "abcdef.0123456789abcdef".into(),
        ca_cert_hash: format!("sha256:{}", "0".repeat(64)),
        api_endpoint: "192.168.56.10:6443".into(),
        certificate_key: None,
    }
}

fn golden_dir() -> PathBuf {
    root().join("tests/golden/manifests")
}

fn ext_of(path: &str) -> &str {
    let file = path.rsplit(['/', '\\']).next().unwrap_or(path);
    match file.rsplit_once('.') {
        Some((_, e)) if !e.is_empty() => e,
        _ => "txt",
    }
}

/// A variant: its name, the plan file, and `(find, replace)` edits of the plan's text.
type Variant = (
    &'static str,
    &'static str,
    Vec<(&'static str, &'static str)>,
);

/// The variants.
fn variants() -> Vec<Variant> {
    vec![
        ("flannel-vxlan", "examples/flannel.toml", vec![]),
        // host-gw is Linux-only (validation refuses it with Windows nodes).
        (
            "flannel-host-gw",
            "tests/plans/good/flannel-host-gw-linux.toml",
            vec![],
        ),
        ("calico", "examples/calico.toml", vec![]),
        ("docker", "tests/plans/docker.toml", vec![]),
    ]
}

/// The rendered files of one variant: name → content.
fn render(variant: &str, tasks: &[Task]) -> BTreeMap<String, String> {
    // One host of each kind: the first control plane, the first Linux worker, the first
    // Windows worker (the others render the same with their own names).
    let mut hosts: Vec<&str> = Vec::new();
    for prefix in ["cp", "lw", "ww"] {
        if let Some(t) = tasks.iter().find(|t| t.id.host.starts_with(prefix)) {
            hosts.push(t.id.host.as_str());
        }
    }
    let mut out = BTreeMap::new();
    for t in tasks.iter().filter(|t| hosts.contains(&t.id.host.as_str())) {
        let name = |ext: &str| format!("{variant}--{}--{}.{ext}", t.id.host, t.id.name);
        let windows = t.id.host.starts_with("ww");
        let shell = if windows {
            Shell::PowerShell
        } else {
            Shell::Posix
        };
        let p = &t.params;
        match t.module.as_str() {
            "file" => {
                if let (Some(path), Some(content)) = (p["path"].as_str(), p["content"].as_str()) {
                    out.insert(name(ext_of(path)), content.to_string());
                }
            }
            "kube_apply" => {
                if let Some(m) = p["manifest"].as_str() {
                    out.insert(name("yaml"), m.to_string());
                }
                let m = kwin_modules::kube::apply::KubeApply::from_json(p, shell)
                    .unwrap_or_else(|e| panic!("{}: {e}", t.id));
                if let Some(k) = m.kustomization_text() {
                    out.insert(name("kustomization.txt"), k);
                }
            }
            // A Windows service: the image path the SCM stores (what New-Service registers and
            // the stored ImagePath is compared with).
            "service" if windows => {
                let m = kwin_modules::windows::service::Service::from_json(p, shell)
                    .unwrap_or_else(|e| panic!("{}: {e}", t.id));
                out.insert(name("cmdline"), format!("{}\n", m.command_line()));
            }
            // A POSIX command: its guards and its command, each under a `# <param>` line.
            "command" if !windows => {
                let mut text = String::new();
                for key in ["creates", "removes", "unless", "onlyif", "run"] {
                    if let Some(v) = p[key].as_str() {
                        text.push_str(&format!("# {key}\n{}", v.trim_start_matches('\n')));
                        if !v.ends_with('\n') {
                            text.push('\n');
                        }
                    }
                }
                out.insert(name("sh"), text);
            }
            "kube_wait" => {
                let m = kwin_modules::kube::wait::KubeWait::from_json(p, shell)
                    .unwrap_or_else(|e| panic!("{}: {e}", t.id));
                out.insert(name("sh"), m.wait_script());
            }
            "kubeadm_init" => {
                let m = kwin_modules::kube::kubeadm_init::KubeadmInit::from_json(p, shell)
                    .unwrap_or_else(|e| panic!("{}: {e}", t.id));
                out.insert(name("sh"), m.init_script());
            }
            "kube_join_data" => {
                let m = kwin_modules::Builtin
                    .build("kube_join_data", shell, p)
                    .unwrap_or_else(|e| panic!("{}: {e}", t.id));
                out.insert(name("sh"), m.output(shell).unwrap_or_default());
            }
            "kubeadm_join" => {
                let m =
                    KubeadmJoin::from_json(p, shell).unwrap_or_else(|e| panic!("{}: {e}", t.id));
                let mut inputs = lab_inputs();
                if p["control_plane"] == serde_json::json!(true) {
                    inputs.certificate_key = Some("1".repeat(64));
                }
                out.insert(
                    name(if windows { "ps1" } else { "sh" }),
                    m.join_script(&inputs),
                );
            }
            _ => {}
        }
    }
    out
}

fn all_rendered() -> BTreeMap<String, String> {
    let mut all = BTreeMap::new();
    for (variant, plan, edits) in variants() {
        let text = plan_text(plan, &edits);
        let tasks = expand(plan, &text);
        all.extend(render(variant, &tasks));
    }
    all
}

#[test]
fn rendered_manifests_match_goldens() {
    let all = all_rendered();
    let dir = golden_dir();
    let bless = std::env::var_os("KWIN_BLESS").is_some_and(|v| v == "1");
    let existing: Vec<String> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    if bless {
        std::fs::create_dir_all(&dir).expect("mkdir goldens");
        for stale in existing.iter().filter(|f| !all.contains_key(*f)) {
            std::fs::remove_file(dir.join(stale)).expect("remove stale golden");
        }
        for (name, content) in &all {
            std::fs::write(dir.join(name), content).expect("write golden");
        }
        return;
    }
    let mut problems = Vec::new();
    for stale in existing.iter().filter(|f| !all.contains_key(*f)) {
        problems.push(format!("{stale}: nothing renders it any more"));
    }
    for (name, content) in &all {
        match std::fs::read_to_string(dir.join(name)) {
            Err(_) => problems.push(format!("{name}: no golden")),
            Ok(g) if &g != content => {
                let line = g
                    .lines()
                    .zip(content.lines())
                    .position(|(a, b)| a != b)
                    .unwrap_or_else(|| g.lines().count().min(content.lines().count()));
                problems.push(format!(
                    "{name} differs at line {}:\n  golden: {:?}\n  actual: {:?}",
                    line + 1,
                    g.lines().nth(line),
                    content.lines().nth(line)
                ));
            }
            Ok(_) => {}
        }
    }
    assert!(
        problems.is_empty(),
        "{} golden(s) out of date (KWIN_BLESS=1 cargo test -p kwin-modules --test kube_golden rewrites them):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// What the seed documents require, checked on the rendered text (the API tier test checks
/// the same objects on a real API server).
#[test]
fn rendered_manifests_say_what_windows_needs() {
    let all = all_rendered();
    let get = |n: &str| {
        all.get(n)
            .unwrap_or_else(|| panic!("{n} not rendered"))
            .as_str()
    };
    let flannel = get("flannel-vxlan--cp1--flannel.kustomization.txt");
    let file = |text: &str, name: &str| -> serde_json::Value {
        let body = text
            .split(&format!("# {name}\n"))
            .nth(1)
            .unwrap_or_else(|| panic!("no {name} in {text}"));
        let body = body.split("\n# ").next().unwrap_or(body);
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let k = file(flannel, "kustomization.yaml");
    assert_eq!(k["patches"][0]["path"], "patch-0.json");
    let cm_patch = file(flannel, "patch-0.json");
    let net: serde_json::Value = serde_json::from_str(
        cm_patch["data"]["net-conf.json"]
            .as_str()
            .expect("net-conf"),
    )
    .expect("net-conf json");
    assert_eq!(
        net,
        serde_json::json!({"Network": "10.244.0.0/16", "Backend": {"Type": "vxlan", "VNI": 4096, "Port": 4789}})
    );
    let cni: serde_json::Value = serde_json::from_str(
        cm_patch["data"]["cni-conf.json"]
            .as_str()
            .expect("cni-conf"),
    )
    .expect("cni-conf json");
    assert_eq!(cni["name"], "vxlan0");
    let ds_patch = file(flannel, "patch-1.json");
    assert_eq!(
        ds_patch["spec"]["template"]["spec"]["nodeSelector"],
        serde_json::json!({"kubernetes.io/os": "linux"})
    );
    let hostgw = file(
        get("flannel-host-gw--cp1--flannel.kustomization.txt"),
        "patch-0.json",
    );
    let net: serde_json::Value =
        serde_json::from_str(hostgw["data"]["net-conf.json"].as_str().expect("net-conf"))
            .expect("net-conf json");
    assert_eq!(
        net,
        serde_json::json!({"Network": "10.244.0.0/16", "Backend": {"Type": "host-gw"}})
    );

    let rc = get("flannel-vxlan--cp1--runtime-classes.yaml");
    for want in [
        "name: windows-2019",
        "handler: runhcs-wcow-process",
        "kubernetes.io/os: windows",
        "node.kubernetes.io/windows-build: \"10.0.17763\"",
        "key: os",
        "value: windows",
        "effect: NoSchedule",
    ] {
        assert!(rc.contains(want), "RuntimeClass lacks `{want}`:\n{rc}");
    }
    let inst = get("calico--cp1--calico-installation.yaml");
    for want in [
        "bgp: Disabled",
        "windowsDataplane: HNS",
        "encapsulation: VXLAN",
        "serviceCIDRs:",
    ] {
        assert!(inst.contains(want), "Installation lacks `{want}`:\n{inst}");
    }
    // The IP pool is the Installation's (encapsulation VXLAN: the operator renders
    // `vxlanMode: Always`, `ipipMode: Never`): kwin applies none of its own, which the operator
    // would adopt only if it equalled its defaulted pool field for field (tigera/operator
    // pkg/controller/ippool/pool_controller.go) and would otherwise refuse to manage.
    assert!(inst.contains("- name: default-ipv4-ippool") && inst.contains("blockSize: 26"));
    for (name, text) in all.iter().filter(|(n, _)| n.starts_with("calico--")) {
        assert!(
            !text.lines().any(|l| l.trim() == "kind: IPPool"),
            "{name} applies an IP pool of kwin's own:\n{text}"
        );
    }
    // IPAM and Felix in whichever group the operator installed: one script, both groups.
    let settings = get("calico--cp1--calico-ipam-felix.sh");
    for want in [
        "ipipEnabled: false",
        "vxlanEnabled: true",
        "vxlanVNI: $vxlanVNI",
        "vxlanVNI=4096\n",
        "strictAffinity: true",
        "autoAllocateBlocks: true",
        "apiVersion: $api",
        "api=crd.projectcalico.org/v1 ipam_kind=IPAMConfig",
        "api=projectcalico.org/v3 ipam_kind=IPAMConfiguration",
        "--server-side --field-manager=kwin --force-conflicts",
    ] {
        assert!(
            settings.contains(want),
            "calico-ipam-felix lacks `{want}`:\n{settings}"
        );
    }
    let join = get("flannel-vxlan--ww1--kubeadm-join.ps1");
    assert!(join.contains("\"key\": \"os\"") && join.contains("\"value\": \"windows\""));
    assert!(join.contains("npipe:////./pipe/containerd-containerd"));
}
