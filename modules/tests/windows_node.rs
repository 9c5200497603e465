//! The windows-worker recipe's node steps as they render for every Kubernetes minor: the
//! kubelet and containerd services (image paths, logs, binaries installed from the staged
//! downloads), crictl, and the reboot policy. The modules' own behaviour is in windows.rs;
//! this checks what the recipe hands them.

mod kube_common;

use kube_common::{expand, plan_text, task};
use kwin_engine::module::Registry;
use kwin_engine::task::Task;
use kwin_engine::transport::Shell;

/// The minors kwin renders Windows workers for in this test (1.29 to 1.37, across the 1.34
/// switch of kube-log-runner).
const MINORS: [u32; 9] = [29, 30, 31, 32, 33, 34, 35, 36, 37];

fn tasks_for(minor: u32, extra: &[(&str, &str)]) -> Vec<Task> {
    let version = format!("kubernetes_version = \"1.{minor}.2\"");
    let mut edits = vec![("kubernetes_version = \"1.37.2\"", version.as_str())];
    edits.extend_from_slice(extra);
    let text = plan_text("examples/flannel.toml", &edits);
    assert!(
        text.contains(&version),
        "the example's version line changed"
    );
    expand("examples/flannel.toml", &text)
}

fn s<'a>(t: &'a Task, key: &str) -> &'a str {
    t.params[key]
        .as_str()
        .unwrap_or_else(|| panic!("{}: no string param {key}", t.id))
}

fn strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

#[test]
fn every_windows_step_builds_and_no_param_holds_a_control_character() {
    for minor in MINORS {
        for t in tasks_for(minor, &[]).iter().filter(|t| t.id.host == "ww1") {
            // Checksums are looked up only by `plan`/`apply`; stand one in.
            let mut params: serde_json::Value = (*t.params).clone();
            if params.get("sha256").is_some_and(|v| v.is_null()) {
                params["sha256"] = serde_json::json!("0".repeat(64));
            }
            kwin_modules::Builtin
                .build(&t.module, Shell::PowerShell, &params)
                .unwrap_or_else(|e| panic!("1.{minor}: {}: {e}", t.id));
            let mut all = Vec::new();
            strings(&t.params, &mut all);
            for v in all {
                // A `\b` in a recipe's minijinja string literal renders a backspace.
                assert!(
                    !v.chars().any(|c| c.is_control() && c != '\n'),
                    "1.{minor}: {}: control character in {v:?}",
                    t.id
                );
            }
        }
    }
}

#[test]
fn kubelet_runs_under_kube_log_runner_with_rotation_for_every_minor() {
    for minor in MINORS {
        let tasks = tasks_for(minor, &[]);
        let runner_version = if minor >= 34 {
            format!("v1.{minor}.2")
        } else {
            "v1.34.0".to_string()
        };
        let dl = task(&tasks, "ww1", "kube-log-runner-download");
        assert!(
            s(dl, "url").ends_with(&format!(
                "/{runner_version}/bin/windows/amd64/kube-log-runner.exe"
            )),
            "1.{minor}: {}",
            s(dl, "url")
        );
        let kubelet_dl = task(&tasks, "ww1", "kubelet-download");
        assert!(
            s(kubelet_dl, "url").contains(&format!("/v1.{minor}.2/bin/windows/amd64/kubelet.exe"))
        );
        let svc = task(&tasks, "ww1", "kubelet");
        let m =
            <kwin_modules::windows::service::Service as kwin_modules::table::Described>::from_json(
                &svc.params,
                kwin_engine::transport::Shell::PowerShell,
            )
            .expect("kubelet");
        assert!(
            m.command_line().starts_with(
                "\"C:\\k\\kube-log-runner.exe\" -log-file=C:\\var\\log\\kubelet\\kubelet.log -log-file-size=10Mi -log-file-age=168h C:\\k\\kubelet.exe --windows-service "
            ),
            "1.{minor}: {}",
            m.command_line()
        );
        // The binaries the service installs are exactly what the download steps staged.
        let bins = svc.params["binaries"].as_array().expect("binaries");
        let pairs: Vec<(&str, &str)> = bins
            .iter()
            .map(|b| {
                (
                    b["src"].as_str().unwrap_or(""),
                    b["dest"].as_str().unwrap_or(""),
                )
            })
            .collect();
        assert_eq!(
            pairs,
            [
                (s(kubelet_dl, "dest"), "C:\\k\\kubelet.exe"),
                (s(dl, "dest"), "C:\\k\\kube-log-runner.exe"),
            ],
            "1.{minor}"
        );
        // Its log directory exists before it is registered.
        let order: Vec<&str> = tasks
            .iter()
            .filter(|t| t.id.host == "ww1")
            .map(|t| t.id.name.as_str())
            .collect();
        let at = |n: &str| order.iter().position(|x| *x == n).unwrap_or(usize::MAX);
        assert!(at("log-dir-kubelet") < at("kubelet"), "{order:?}");
        assert!(at("log-dir-containerd") < at("containerd"), "{order:?}");
    }
}

#[test]
fn containerd_logs_to_a_file_and_installs_its_binaries_from_the_staged_release() {
    let tasks = tasks_for(31, &[]);
    let unpack = task(&tasks, "ww1", "containerd-unpack");
    let staged = s(unpack, "dest");
    assert!(
        staged.starts_with("C:\\ProgramData\\kwin\\cache\\containerd-"),
        "{staged}"
    );
    let svc = task(&tasks, "ww1", "containerd");
    let m = <kwin_modules::windows::service::Service as kwin_modules::table::Described>::from_json(
        &svc.params,
        kwin_engine::transport::Shell::PowerShell,
    )
    .expect("containerd");
    assert!(
        m.command_line()
            .ends_with(" --log-file=C:\\var\\log\\containerd\\containerd.log"),
        "{}",
        m.command_line()
    );
    let bins = svc.params["binaries"].as_array().expect("binaries");
    let names: Vec<String> = bins
        .iter()
        .map(|b| {
            let src = b["src"].as_str().unwrap_or("");
            let dest = b["dest"].as_str().unwrap_or("");
            assert!(src.starts_with(&format!("{staged}\\bin\\")), "{src}");
            let file = src.rsplit('\\').next().unwrap_or("");
            assert_eq!(dest, format!("C:\\Program Files\\containerd\\bin\\{file}"));
            file.to_string()
        })
        .collect();
    assert_eq!(
        names,
        ["containerd.exe", "containerd-shim-runhcs-v1.exe", "ctr.exe"]
    );
    assert_eq!(
        s(svc, "binary"),
        "C:\\Program Files\\containerd\\bin\\containerd.exe"
    );
}

#[test]
fn crictl_follows_the_cluster_minor_unless_pinned_and_talks_to_containerd() {
    for minor in MINORS {
        let tasks = tasks_for(minor, &[]);
        let v = format!("v1.{minor}.0");
        let dl = task(&tasks, "ww1", "crictl-download");
        assert_eq!(
            s(dl, "url"),
            format!("https://github.com/kubernetes-sigs/cri-tools/releases/download/{v}/crictl-{v}-windows-amd64.tar.gz")
        );
        let unpack = task(&tasks, "ww1", "crictl-unpack");
        assert_eq!(s(unpack, "src"), s(dl, "dest"));
        assert_eq!(s(unpack, "dest"), "C:\\k");
        let conf = task(&tasks, "ww1", "crictl-config");
        assert_eq!(s(conf, "path"), "C:\\k\\crictl.yaml");
        assert!(s(conf, "content")
            .contains("runtime-endpoint: npipe:////./pipe/containerd-containerd\n"));
    }
    let tasks = tasks_for(31, &[("[versions]", "[versions]\ncrictl = \"v1.31.1\"")]);
    assert!(s(task(&tasks, "ww1", "crictl-download"), "url").contains("/v1.31.1/crictl-v1.31.1-"));
}

#[test]
fn reboot_is_for_the_containers_feature_before_the_join_only() {
    let tasks = tasks_for(31, &[]);
    let r = task(&tasks, "ww1", "reboot");
    assert_eq!(s(r, "feature"), "Containers");
    assert_eq!(s(r, "on_joined"), "report");
    // "Joined" is what kubeadm join leaves: the join step's guard.
    assert_eq!(
        s(r, "joined"),
        s(task(&tasks, "ww1", "kubeadm-join"), "creates")
    );
}

/// windows-worker's `kubelet` step (a fresh node) and upgrade-worker's
/// `upgrade-kubelet-service` (a joined node, drained) are twins, written once as the shared
/// step `windows-kubelet-service` (plans/lib/steps.toml): the same service, binaries and
/// flags for every minor, so an upgraded node ends where a fresh join at the version starts.
/// Only their guards differ (`unless_exists` / `if_exists` the kubelet's kubeconfig).
#[test]
fn the_upgrade_kubelet_service_is_the_install_steps_twin() {
    let labels = [(
        "name = \"ww1\"",
        "name = \"ww1\"\nlabels = { \"example.com/tier\" = \"edge\" }\ntaints = [\"dedicated=edge:NoSchedule\"]",
    )];
    for minor in MINORS {
        for extra in [&[][..], &labels[..]] {
            let tasks = tasks_for(minor, extra);
            let install = task(&tasks, "ww1", "kubelet");
            let upgrade = task(&tasks, "ww1", "upgrade-kubelet-service");
            assert_eq!(install.module, upgrade.module, "1.{minor}");
            assert_eq!(
                install.params, upgrade.params,
                "1.{minor}: the twins drifted"
            );
            let conf = "C:\\etc\\kubernetes\\kubelet.conf";
            let guard = |t: &Task| t.guard.as_ref().map(|g| (g.path.clone(), g.exists));
            assert_eq!(guard(install), Some((conf.to_string(), false)), "1.{minor}");
            assert_eq!(guard(upgrade), Some((conf.to_string(), true)), "1.{minor}");
            // kubeadm.exe of the version is in place before the upgrade needs it: the install
            // path downloads it unguarded, to where kubeadm_upgrade runs it.
            let dl = task(&tasks, "ww1", "kubeadm-download");
            assert!(dl.guard.is_none(), "1.{minor}");
            assert_eq!(s(dl, "dest"), "C:\\k\\kubeadm.exe");
            assert!(
                s(dl, "url").contains(&format!("/v1.{minor}.2/bin/windows/amd64/kubeadm.exe")),
                "1.{minor}: {}",
                s(dl, "url")
            );
            let up = task(&tasks, "ww1", "kubeadm-upgrade-node-windows");
            assert_eq!(up.params["version"], format!("1.{minor}.2"), "1.{minor}");
            assert_eq!(up.params["mode"], "node");
        }
    }
}

/// containerd's log is rotated on the node: containerd writes its `--log-file` and rotates
/// nothing (cmd/containerd/command/service_windows.go at v2.3.7: `os.OpenFile(logFileFlag,
/// os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0644)`), so a scheduled task runs a script that
/// empties exactly that file once it reaches the kubelet's rotation size and removes rotated
/// copies after the kubelet's age (kube-log-runner's `-log-file-size=10Mi`,
/// `-log-file-age=168h`), every hour, on every node the recipe makes or keeps (no guard: a node
/// joined before the task existed gets it on the next apply). Reset unregisters the task.
#[test]
fn containerd_log_is_rotated_by_a_scheduled_task() {
    let tasks = tasks_for(31, &[]);
    let svc = task(&tasks, "ww1", "containerd");
    let log = svc.params["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str()?.strip_prefix("--log-file="))
        .next()
        .expect("containerd's --log-file")
        .to_string();
    let script_step = task(&tasks, "ww1", "containerd-log-script");
    let script_path = s(script_step, "path");
    let script = s(script_step, "content");
    assert!(
        script.contains(&format!("$log = '{log}'")),
        "the script rotates another file than {log}:\n{script}"
    );
    assert!(script.contains("-ge 10485760") && script.contains("AddDays(-7)"));
    assert!(
        script.contains("[IO.FileShare]::ReadWrite") && script.contains("SetLength(0)"),
        "containerd holds the file open without FILE_SHARE_DELETE: it is copied and emptied, never renamed"
    );
    let reg = task(&tasks, "ww1", "containerd-log-rotation");
    let run = s(reg, "run");
    assert!(
        run.contains("Register-ScheduledTask -TaskName 'kwin-containerd-log'")
            && run.contains(&format!("-File {script_path}'"))
            && run.contains("-RepetitionInterval (New-TimeSpan -Hours 1)")
            && run.contains("-UserId 'SYSTEM'"),
        "{run}"
    );
    assert!(reg.guard.is_none(), "the task is for joined nodes too");
    let unless = s(reg, "unless");
    assert!(
        unless.contains(&format!("-File {script_path}'")),
        "{unless}"
    );
    // The script is written before the task that runs it is registered.
    let order: Vec<&str> = tasks
        .iter()
        .filter(|t| t.id.host == "ww1")
        .map(|t| t.id.name.as_str())
        .collect();
    let at = |n: &str| order.iter().position(|x| *x == n).unwrap_or(usize::MAX);
    assert!(
        at("containerd-log-script") < at("containerd-log-rotation"),
        "{order:?}"
    );
}

/// `artifacts.registry_mirrors` reaches the Windows nodes: their containerd configuration
/// names the registry hosts directory (containerd gives Windows no default `config_path`),
/// for every configuration version, and windows-worker's `registry-mirrors` step writes each
/// registry's `hosts.toml` into that very directory, a `host:port` registry's under
/// `host_port_` (containerd docs/hosts.md, its Windows lookup).
#[test]
fn registry_mirrors_reach_windows_containerd() {
    let mirrors = "[artifacts.registry_mirrors]\n\"registry.k8s.io\" = \"https://mirror.lab\"\n\"registry.lab:5000\" = [\"http://10.0.0.5:5000\"]\n\n[[hosts]]";
    for minor in MINORS {
        let tasks = tasks_for(
            minor,
            &[(
                "[[hosts]]\nname = \"cp1\"",
                &format!("{mirrors}\nname = \"cp1\""),
            )],
        );
        let config = s(task(&tasks, "ww1", "containerd-config"), "content").to_string();
        let doc: toml::Table = toml::from_str(&config).expect("containerd config is TOML");
        let plugin = if doc["version"].as_integer() >= Some(3) {
            "io.containerd.cri.v1.images"
        } else {
            "io.containerd.grpc.v1.cri"
        };
        let dir = doc["plugins"][plugin]["registry"]["config_path"]
            .as_str()
            .unwrap_or_else(|| panic!("1.{minor}: no config_path:\n{config}"))
            .to_string();
        let t = task(&tasks, "ww1", "registry-mirrors");
        assert_eq!(t.module, "registry_mirrors");
        assert_eq!(
            t.params["mirrors"]["registry.lab:5000"],
            serde_json::json!(["http://10.0.0.5:5000"])
        );
        let m = kwin_modules::Builtin
            .build(&t.module, Shell::PowerShell, &t.params)
            .expect("registry_mirrors builds for Windows");
        let mut facts = kwin_engine::fact::Facts::new();
        for q in m.facts(Shell::PowerShell) {
            facts.insert(
                q.key.clone(),
                kwin_engine::fact::FactOutput {
                    stdout: b"{\"exists\":false}".to_vec(),
                    ..Default::default()
                },
            );
        }
        let inputs = kwin_engine::module::Inputs::new();
        let plan = m
            .plan(
                &facts,
                &kwin_engine::module::Ctx {
                    shell: Shell::PowerShell,
                    host: "ww1",
                    inputs: &inputs,
                    nonce: "0123456789abcdef0123456789abcdef",
                },
            )
            .expect("plan");
        let kwin_engine::module::Plan::Change(c) = plan else {
            panic!("nothing written on a fresh node")
        };
        let scripts: Vec<&str> = c.steps.iter().filter_map(|s| s.script()).collect();
        for file in [
            format!("{dir}\\registry.k8s.io\\hosts.toml"),
            format!("{dir}\\registry.lab_5000_\\hosts.toml"),
        ] {
            let quoted = kwin_engine::quote::ps_quote(&file);
            assert!(
                scripts
                    .iter()
                    .any(|s| s.contains(&format!("$p = {quoted}"))),
                "1.{minor}: {file} is not written:\n{}",
                scripts.join("\n---\n")
            );
        }
    }
    // Linux keeps its own directory and module.
    let tasks = tasks_for(
        37,
        &[(
            "[[hosts]]\nname = \"cp1\"",
            &format!("{mirrors}\nname = \"cp1\""),
        )],
    );
    let lw1 = task(&tasks, "lw1", "registry-mirrors");
    assert!(lw1.params.get("dir").is_none());
    assert!(s(task(&tasks, "lw1", "containerd-config"), "content")
        .contains("config_path = \"/etc/containerd/certs.d\""));
}
