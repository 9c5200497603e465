//! The pod network on Windows nodes, as the recipes render it for the example plans:
//!
//! - one CNI bin and config directory for containerd's config, the CNI plugins, the CNI
//!   DaemonSets, Calico's Installation and reset, and it is the one the upstreams use;
//! - every program a Windows DaemonSet runs is a release binary the node recipe installed at a
//!   versioned path with a SHA-256 check (no image the upstream stopped building);
//! - reset runs `kubeadm reset` through containerd's pipe while containerd still runs, then
//!   removes services, HNS networks and every directory the pod network leaves, each step
//!   guarded.

mod kube_common;

use kube_common::{expand, plan_text, root, task};
use kwin_engine::task::Task;
use serde::Deserialize;
use serde_json::Value;

/// The CNI directories every Windows CNI uses: tigera/operator pkg/render/windows.go
/// `DefaultWindowsCNIDirectories` at 40788b9b ("/opt/cni/bin", "/etc/cni/net.d" on the system
/// drive, the defaults "to match vanilla Kubernetes"), and sig-windows-tools
/// hostprocess/flannel/flanneld/flannel-overlay.yml at 03f99247 (CNI_BIN_PATH
/// `C:\\opt\\cni\\bin`, CNI_CONFIG_PATH `C:\\etc\\cni\\net.d`); projectcalico/calico#6122 is
/// what another pair of directories gives ("cni plugin not initialized").
const CNI_BIN_DIR: &str = r"C:\opt\cni\bin";
const CNI_CONF_DIR: &str = r"C:\etc\cni\net.d";

/// Pins for the artifacts whose upstream publishes no SHA-256 file, as a plan would give them.
const PINS: &str = r#"
[artifacts.sha256]
"flannel-v0.26.2-windows-amd64.tar.gz" = "1111111111111111111111111111111111111111111111111111111111111111"
"windows-container-networking-cni-amd64-v0.3.1.zip" = "2222222222222222222222222222222222222222222222222222222222222222"
"kube-proxy.exe" = "3333333333333333333333333333333333333333333333333333333333333333"
"cni-plugin-flannel-windows-amd64-v1.9.1-flannel3.tgz" = "4444444444444444444444444444444444444444444444444444444444444444"
"kubelet.exe" = "5555555555555555555555555555555555555555555555555555555555555555"
"kubeadm.exe" = "6666666666666666666666666666666666666666666666666666666666666666"
"containerd-1.7.24-windows-amd64.tar.gz" = "7777777777777777777777777777777777777777777777777777777777777777"
"cni-plugins-windows-amd64-v1.6.1.tgz" = "8888888888888888888888888888888888888888888888888888888888888888"
"containerd-1.7.24-linux-amd64.tar.gz" = "9999999999999999999999999999999999999999999999999999999999999999"
"flannel-v0.28.10-windows-amd64.tar.gz" = "1111111111111111111111111111111111111111111111111111111111111112"
"containerd-2.3.7-windows-amd64.tar.gz" = "7777777777777777777777777777777777777777777777777777777777777778"
"cni-plugins-windows-amd64-v1.10.0.tgz" = "8888888888888888888888888888888888888888888888888888888888888889"
"containerd-2.3.7-linux-amd64.tar.gz" = "9999999999999999999999999999999999999999999999999999999999999990"
"runc.amd64" = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
"crictl-v1.37.0-windows-amd64.tar.gz" = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
"#;

/// `text` with its own `[artifacts.sha256]` table (up to the next blank line) replaced by PINS.
fn with_pins(text: &str) -> String {
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
    out + PINS
}

fn tasks_of(rel: &str, edits: &[(&str, &str)]) -> Vec<Task> {
    let text = with_pins(&plan_text(rel, edits));
    expand(rel, &text)
}

/// Every object of the `kube_apply` manifests of `tasks`.
fn objects(tasks: &[Task]) -> Vec<Value> {
    let mut out = Vec::new();
    for t in tasks.iter().filter(|t| t.module == "kube_apply") {
        let Some(m) = t.params["manifest"].as_str() else {
            continue;
        };
        for doc in serde_yaml_ng::Deserializer::from_str(m) {
            let v = Value::deserialize(doc).unwrap_or_else(|e| panic!("{}: {e}", t.id));
            if !v.is_null() {
                out.push(v);
            }
        }
    }
    out
}

fn windows_daemonsets(objs: &[Value]) -> Vec<&Value> {
    objs.iter()
        .filter(|o| {
            o["kind"] == "DaemonSet"
                && o["spec"]["template"]["spec"]["nodeSelector"]["kubernetes.io/os"] == "windows"
        })
        .collect()
}

fn configmap<'a>(objs: &'a [Value], ns: &str, name: &str) -> &'a Value {
    objs.iter()
        .find(|o| {
            o["kind"] == "ConfigMap"
                && o["metadata"]["name"] == name
                && o["metadata"]["namespace"] == ns
        })
        .unwrap_or_else(|| panic!("no ConfigMap {ns}/{name}"))
}

fn ci(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// `path` is `dir` or inside it (Windows paths, case-insensitive).
fn within(path: &str, dir: &str) -> bool {
    let (p, d) = (path.to_ascii_lowercase(), dir.to_ascii_lowercase());
    let d = d.trim_end_matches('\\');
    p == d || p.starts_with(&format!("{d}\\"))
}

#[test]
fn one_cni_directory_pair_everywhere() {
    for rel in ["examples/flannel.toml", "examples/calico.toml"] {
        let tasks = tasks_of(rel, &[]);
        // containerd reads its CNI plugins and configuration from there.
        let cfg = task(&tasks, "ww1", "containerd-config").params["content"]
            .as_str()
            .expect("containerd config")
            .to_string();
        let cfg: toml::Value = toml::from_str(&cfg).expect("containerd config is TOML");
        // containerd 2.x's configuration version 3 (engine/src/plan/containerd.rs).
        let cni = &cfg["plugins"]["io.containerd.cri.v1.runtime"]["cni"];
        assert_eq!(
            cni["bin_dirs"][0].as_str(),
            Some(CNI_BIN_DIR),
            "{rel}: containerd bin_dirs"
        );
        assert_eq!(
            cni["conf_dir"].as_str(),
            Some(CNI_CONF_DIR),
            "{rel}: containerd conf_dir"
        );
        // The directories exist and the CNI plugins are unpacked into the bin directory.
        assert_eq!(
            task(&tasks, "ww1", "cni-bin-dir").params["path"],
            CNI_BIN_DIR,
            "{rel}"
        );
        assert_eq!(
            task(&tasks, "ww1", "cni-conf-dir").params["path"],
            CNI_CONF_DIR,
            "{rel}"
        );
        assert_eq!(
            task(&tasks, "ww1", "cni-plugins-unpack").params["dest"],
            CNI_BIN_DIR,
            "{rel}"
        );
        // The CNI on the node writes there.
        let objs = objects(&tasks);
        if rel.contains("calico") {
            let inst = objs
                .iter()
                .find(|o| o["kind"] == "Installation")
                .expect("Installation");
            // The operator's form of the same directories (drive-less, forward slashes).
            assert_eq!(
                inst["spec"]["windowsNodes"]["cniBinDir"], "/opt/cni/bin",
                "{rel}"
            );
            assert_eq!(
                inst["spec"]["windowsNodes"]["cniConfigDir"], "/etc/cni/net.d",
                "{rel}"
            );
        } else {
            let script = configmap(&objs, "kube-flannel", "kube-flannel-windows")["data"]
                ["flanneld.ps1"]
                .as_str()
                .expect("flanneld.ps1")
                .to_string();
            for dir in [CNI_BIN_DIR, CNI_CONF_DIR] {
                assert!(
                    script.contains(&format!("'{dir}'")),
                    "{rel}: flanneld.ps1 lacks {dir}"
                );
            }
        }
        let proxy = configmap(&objs, "kube-system", "kube-proxy-windows")["data"]["kube-proxy.ps1"]
            .as_str()
            .expect("kube-proxy.ps1");
        if rel.contains("flannel") {
            assert!(
                proxy.contains(&format!("'{CNI_BIN_DIR}'")),
                "{rel}: kube-proxy.ps1 host-local"
            );
        }
        // Reset removes both.
        let mut plan =
            kwin_engine::plan::load_str(&root().join(rel), &with_pins(&plan_text(rel, &[])))
                .unwrap_or_else(|d| panic!("{d}"));
        plan.file.tasks.clear();
        let reset = kwin_engine::expand::expand(&plan, kwin_modules::recipes::RESET_RECIPES)
            .unwrap_or_else(|d| panic!("{d}"));
        for dir in [CNI_BIN_DIR, CNI_CONF_DIR] {
            assert!(
                reset.iter().any(|t| t.id.host == "ww1"
                    && t.module == "directory"
                    && t.params["state"] == "absent"
                    && t.params["path"].as_str().is_some_and(|p| within(dir, p))),
                "{rel}: reset leaves {dir}"
            );
        }
    }
}

/// Every host program a Windows DaemonSet names (`KWIN_*` paths in its env) is placed on the
/// node by a `download` or `archive` step with a SHA-256, at a path that names its version.
#[test]
fn windows_daemonsets_run_release_binaries_kwin_installed() {
    for minor in [29, 31, 33, 35, 37] {
        let version = format!("1.{minor}.3");
        let edit = format!("kubernetes_version = \"{version}\"");
        for rel in ["examples/flannel.toml", "examples/calico.toml"] {
            let tasks = tasks_of(rel, &[("kubernetes_version = \"1.37.2\"", &edit)]);
            let objs = objects(&tasks);
            let node: Vec<&Task> = tasks.iter().filter(|t| t.id.host == "ww1").collect();
            let installed = |path: &str| -> Option<String> {
                node.iter().find_map(|t| {
                    let p = &t.params;
                    let ok = match t.module.as_str() {
                        "download" => p["dest"].as_str().is_some_and(|d| ci(d, path)),
                        "archive" => p["dest"].as_str().is_some_and(|d| within(path, d)),
                        _ => false,
                    };
                    let sha = p["sha256"].as_str().unwrap_or("");
                    (ok && sha.len() == 64).then(|| t.id.to_string())
                })
            };
            let mut programs = Vec::new();
            for ds in windows_daemonsets(&objs) {
                for c in ds["spec"]["template"]["spec"]["containers"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    for e in c["env"].as_array().into_iter().flatten() {
                        let (Some(n), Some(v)) = (e["name"].as_str(), e["value"].as_str()) else {
                            continue;
                        };
                        if n.starts_with("KWIN_") && within(v, r"C:\k") {
                            let by = installed(v).unwrap_or_else(|| {
                                panic!("{rel} {version}: {} runs {v} ({n}), which no verified download or archive on ww1 places", ds["metadata"]["name"])
                            });
                            programs.push((n.to_string(), v.to_string(), by));
                        }
                    }
                }
            }
            let has = |n: &str| {
                programs
                    .iter()
                    .find(|(name, _, _)| name == n)
                    .map(|(_, v, _)| v.clone())
            };
            let kp = has("KWIN_KUBE_PROXY").unwrap_or_else(|| {
                panic!("{rel} {version}: kube-proxy runs no installed kube-proxy.exe: {programs:?}")
            });
            assert!(
                kp.contains(&format!("v{version}")) && kp.ends_with("kube-proxy.exe"),
                "{kp}"
            );
            let url = task(&tasks, "ww1", "kube-proxy-download").params["url"]
                .as_str()
                .expect("url")
                .to_string();
            assert_eq!(
                url,
                format!("https://dl.k8s.io/v{version}/bin/windows/amd64/kube-proxy.exe")
            );
            if rel.contains("flannel") {
                let fd = has("KWIN_FLANNELD").unwrap_or_else(|| {
                    panic!("{rel} {version}: flanneld is not an installed binary: {programs:?}")
                });
                assert!(
                    within(&fd, r"C:\k\flannel\v0.28.10") && fd.ends_with("flanneld.exe"),
                    "{fd}"
                );
                assert!(
                    has("KWIN_FLANNEL_CNI").is_some() && has("KWIN_SDN_CNI").is_some(),
                    "{programs:?}"
                );
            }
        }
    }
}

/// The flannel Windows artifacts without a published SHA-256 file are asked for with their own
/// URL (kwin fetches and hashes them on the controller), the windows-container-networking zip
/// with its SHA-512 file; those with a SHA-256 file are fetched from it. The example plan needs
/// no pin.
#[test]
fn flannel_artifacts_without_published_checksums_are_fetched_by_url() {
    let rel = "examples/flannel.toml";
    let plan = kwin_engine::plan::load_str(&root().join(rel), &plan_text(rel, &[]))
        .unwrap_or_else(|d| panic!("{d}"));
    assert!(
        plan.file.artifacts.sha256.is_empty(),
        "{rel} pins {:?}: it needs no pin",
        plan.file.artifacts.sha256
    );
    let sums = kwin_engine::checksums::Checksums::for_plan(&plan.file, Default::default(), known());
    kwin_engine::expand::expand_with(&plan, kwin_modules::recipes::RECIPES, &sums)
        .unwrap_or_else(|d| panic!("{d}"));
    let wanted = sums.wanted();
    let from_artifact: Vec<(&str, Option<&str>, Option<&str>)> = wanted
        .iter()
        .filter(|w| w.sums_url.is_none())
        .map(|w| (w.file.as_str(), w.url.as_deref(), w.sha512_url.as_deref()))
        .collect();
    let gh = "https://github.com";
    assert_eq!(
        from_artifact,
        [
            (
                "flannel-v0.28.10-windows-amd64.tar.gz",
                Some(format!("{gh}/flannel-io/flannel/releases/download/v0.28.10/flannel-v0.28.10-windows-amd64.tar.gz").as_str()),
                None
            ),
            (
                "windows-container-networking-cni-amd64-v0.3.1.zip",
                Some(format!("{gh}/microsoft/windows-container-networking/releases/download/v0.3.1/windows-container-networking-cni-amd64-v0.3.1.zip").as_str()),
                Some(format!("{gh}/microsoft/windows-container-networking/releases/download/v0.3.1/windows-container-networking-cni-amd64-v0.3.1.zip.sha512").as_str())
            ),
        ],
        "{wanted:?}"
    );
    assert!(wanted
        .iter()
        .all(|w| w.from_artifact() || w.sums_url.is_some()));
    let with_url = |file: &str| {
        wanted
            .iter()
            .find(|w| w.file == file)
            .and_then(|w| w.sums_url.clone())
            .unwrap_or_else(|| panic!("{file} not asked for with a checksum URL: {wanted:?}"))
    };
    assert_eq!(
        with_url("kube-proxy.exe"),
        "https://dl.k8s.io/v1.37.2/bin/windows/amd64/kube-proxy.exe.sha256"
    );
    assert_eq!(
        with_url("cni-plugin-flannel-windows-amd64-v1.9.1-flannel3.tgz"),
        "https://github.com/flannel-io/cni-plugin/releases/download/v1.9.1-flannel3/cni-plugin-flannel-windows-amd64-v1.9.1-flannel3.tgz.sha256"
    );
}

/// kwin's own digests (plans/digests.toml), as `kwin plan` loads them.
fn known() -> std::sync::Arc<kwin_engine::checksums::Known> {
    std::sync::Arc::new(
        kwin_engine::checksums::Known::parse(kwin_modules::recipes::DIGESTS)
            .unwrap_or_else(|e| panic!("plans/digests.toml: {e}")),
    )
}

fn reset_graph(rel: &str) -> kwin_engine::graph::TaskGraph {
    let mut plan = kwin_engine::plan::load_str(&root().join(rel), &with_pins(&plan_text(rel, &[])))
        .unwrap_or_else(|d| panic!("{d}"));
    plan.file.tasks.clear();
    let tasks = kwin_engine::expand::expand(&plan, kwin_modules::recipes::RESET_RECIPES)
        .unwrap_or_else(|d| panic!("{d}"));
    kwin_engine::graph::TaskGraph::build(tasks).unwrap_or_else(|d| panic!("{d}"))
}

#[test]
fn reset_runs_kubeadm_with_containerd_up_then_removes_everything() {
    for rel in ["examples/flannel.toml", "examples/calico.toml"] {
        let g = reset_graph(rel);
        let text = g.to_text();
        let ww1: Vec<_> = g
            .graph
            .node_indices()
            .filter(|n| g.task(*n).id.host == "ww1")
            .collect();
        let find = |pred: &dyn Fn(&Task) -> bool, what: &str| {
            *ww1.iter()
                .find(|n| pred(g.task(**n)))
                .unwrap_or_else(|| panic!("{rel}: no ww1 task {what}\n{text}"))
        };
        let kubeadm = find(
            &|t| {
                t.module == "command"
                    && t.params["run"].as_str().is_some_and(|r| {
                        r.contains("reset -f")
                            && r.contains("kubeadm.exe")
                            && r.contains("--cri-socket")
                            && r.contains("npipe:////./pipe/containerd-containerd")
                    })
            },
            "running kubeadm.exe reset -f --cri-socket npipe:////./pipe/containerd-containerd",
        );
        let services = find(&|t| t.id.name == "windows-services", "windows-services");
        let run = g.task(services).params["run"]
            .as_str()
            .unwrap_or("")
            .to_string();
        assert!(run.contains("containerd"), "{rel}: services step: {run}");
        // kubeadm talks to containerd: it runs before containerd's service goes.
        assert!(
            g.reaches(kubeadm, services),
            "{rel}: kubeadm reset after the services\n{text}"
        );
        for n in ["flannel.4096", "Calico", "External"] {
            let removes = find(
                &|t| {
                    t.module == "command"
                        && t.params["run"].as_str().is_some_and(|r| {
                            r.contains("Remove-KwinHnsNetwork") && r.contains(&format!("'{n}'"))
                        })
                },
                &format!("removing the HNS network {n}"),
            );
            assert!(
                g.reaches(kubeadm, removes),
                "{rel}: {n} removed before kubeadm reset\n{text}"
            );
        }
        for dir in [
            r"C:\sourcevip",
            r"C:\var\lib\cni",
            r"C:\etc\cni",
            r"C:\opt\cni",
            r"C:\etc\kube-flannel",
            r"C:\run\flannel",
            r"C:\k",
            r"C:\etc\kubernetes",
            r"C:\var\lib\kubelet",
        ] {
            let d = find(
                &|t| {
                    t.module == "directory"
                        && t.params["state"] == "absent"
                        && t.params["path"].as_str().is_some_and(|p| ci(p, dir))
                },
                &format!("removing {dir}"),
            );
            assert!(
                g.reaches(kubeadm, d),
                "{rel}: {dir} removed before kubeadm reset\n{text}"
            );
        }
        // Every command is guarded, so a second reset changes nothing.
        for n in &ww1 {
            let t = g.task(*n);
            if t.module == "command" {
                let p = &t.params;
                assert!(
                    ["onlyif", "unless", "creates", "removes"]
                        .iter()
                        .any(|k| p[*k].as_str().is_some_and(|s| !s.trim().is_empty())),
                    "{rel}: {} is not guarded",
                    t.id
                );
            }
        }
    }
}

/// The shared HNS snippet (plans/lib/hns.ps1), as the recipes embed it.
fn hns_snippet() -> String {
    let path = root().join("plans/lib/hns.ps1");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Reset's HNS steps cannot report success without having talked to HNS: a `command` runs
/// when its `unless` fails, and a failing `onlyif` makes it a no-op (modules/src/windows/
/// command.rs), so each HNS step is guarded by `unless` (what is left to remove; HNS not
/// answering is "not known to be clean", and `run` then fails loudly), reaches HNS only
/// through the shared snippet (vmcompute.dll's HNSCall, whose failures throw), and swallows no
/// error on the way. A Windows Server 2019 or 2022 node without the HostNetworkingService
/// module (documented for 2025 only) removes its networks the same way.
#[test]
fn reset_hns_steps_fail_loudly_instead_of_skipping() {
    let snippet = hns_snippet();
    // The snippet throws on an HRESULT failure and on an HNS answer without success.
    for needle in [
        "[DllImport(\"vmcompute.dll\")]",
        "HNSCall(",
        "if ($hr -lt 0) { throw",
        "if (-not $result.Success) { throw",
    ] {
        assert!(snippet.contains(needle), "the snippet lacks `{needle}`");
    }
    for rel in ["examples/flannel.toml", "examples/calico.toml"] {
        let g = reset_graph(rel);
        let hns: Vec<&Task> = g
            .graph
            .node_indices()
            .map(|n| g.task(n))
            .filter(|t| t.id.host == "ww1" && t.module == "command")
            .filter(|t| {
                ["run", "onlyif", "unless"].iter().any(|k| {
                    t.params[*k]
                        .as_str()
                        .is_some_and(|s| s.to_ascii_lowercase().contains("hns"))
                })
            })
            .collect();
        let names: Vec<String> = hns.iter().map(|t| t.id.name.clone()).collect();
        assert!(
            names.contains(&"hns-networks".to_string())
                && names.contains(&"hns-external-network".to_string()),
            "{rel}: HNS steps {names:?}"
        );
        for t in hns {
            let p = &t.params;
            assert!(
                p["onlyif"].is_null(),
                "{rel}: {} is guarded by `onlyif`: when HNS cannot be asked, the guard fails and the step does nothing",
                t.id
            );
            for key in ["unless", "run"] {
                let text = p[key].as_str().unwrap_or("");
                assert!(
                    text.contains(snippet.trim()),
                    "{rel}: {} `{key}` does not reach HNS through plans/lib/hns.ps1:\n{text}",
                    t.id
                );
                let own = text.replace(snippet.trim(), "");
                for bad in ["SilentlyContinue", "Ignore", "Get-Command", "Import-Module"] {
                    assert!(
                        !own.contains(bad),
                        "{rel}: {} `{key}` uses `{bad}`: an HNS failure must fail the step:\n{own}",
                        t.id
                    );
                }
            }
            // What is removed is checked again: a network HNS keeps is an error.
            let run = p["run"].as_str().unwrap_or("");
            assert!(
                run.contains("Remove-KwinHnsNetwork") && run.contains("throw"),
                "{rel}: {}: {run}",
                t.id
            );
        }
    }
}

/// The RuntimeClasses name the runtime handler the Windows containerd configuration defines
/// (`runhcs-wcow-process`), and carry no version of their own: a version change leaves them
/// as they are, while the configuration that defines the handler follows the cluster's
/// sandbox image.
#[test]
fn runtime_classes_name_the_handler_windows_containerd_defines() {
    for minor in [29, 31, 35] {
        let edit = format!("kubernetes_version = \"1.{minor}.3\"");
        let tasks = tasks_of(
            "examples/flannel.toml",
            &[("kubernetes_version = \"1.37.2\"", &edit)],
        );
        let config = task(&tasks, "ww1", "containerd-config").params["content"]
            .as_str()
            .expect("containerd config")
            .to_string();
        let objs = objects(&tasks);
        let classes: Vec<&Value> = objs
            .iter()
            .filter(|o| o["kind"] == "RuntimeClass")
            .collect();
        assert_eq!(classes.len(), 3, "1.{minor}");
        for rc in classes {
            let handler = rc["handler"].as_str().expect("handler");
            assert!(
                (config.contains(&format!(
                    "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.{handler}]"
                )) || config.contains(&format!(
                    "[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.{handler}]"
                ))) && config.contains(&format!("default_runtime_name = \"{handler}\"")),
                "1.{minor}: {} names handler {handler}, which containerd's config does not define:\n{config}",
                rc["metadata"]["name"]
            );
            assert!(!rc.to_string().contains(&format!("1.{minor}")), "{rc}");
        }
    }
}

/// What a Windows node holds after an apply that kwin made, or that the programs kwin runs
/// made, and that no task of windows-worker names: Calico's host paths (the operator's
/// calico-node-windows DaemonSet: /var/lib/calico, /var/run/calico, /var/run/nodeagent and
/// /var/log/calico as DirectoryOrCreate, /run/xtables.lock as FileOrCreate; tigera/operator
/// pkg/render/windows.go at v1.36.0 and v1.42.0), the kubelet's pod logs (podLogsDir's default
/// /var/log/pods, DefaultContainerLogsDir /var/log/containers: kubernetes pkg/kubelet), the
/// start scripts' directories (cni-flannel/flanneld.ps1.j2, kube-proxy-windows/kube-proxy.ps1.j2)
/// and containerd's root and state (its configuration's `root` and `state`).
const MADE_BY_WHAT_KWIN_RUNS: &[&str] = &[
    r"C:\var\lib\calico",
    r"C:\var\run\calico",
    r"C:\var\run\nodeagent",
    r"C:\var\log\calico",
    r"C:\run\xtables.lock",
    r"C:\var\log\pods",
    r"C:\var\log\containers",
    r"C:\etc\kube-flannel",
    r"C:\run\flannel",
    r"C:\sourcevip",
    r"C:\var\lib\cni",
    r"C:\ProgramData\containerd",
];

/// Reset leaves nothing kwin made on a Windows node: for each example (with a proxy, so the
/// machine variables are set), every directory, file, download and service binary
/// windows-worker places is under a directory reset removes (or a file reset removes), every
/// firewall rule, machine variable, PATH entry and scheduled task it adds is removed by name,
/// and so is every
/// path in [`MADE_BY_WHAT_KWIN_RUNS`]; with flannel the metadata route its start script adds
/// is removed too. Only the Containers feature stays (a Windows component).
#[test]
fn reset_leaves_nothing_windows_worker_made() {
    let proxy = "\n[proxy]\nhttp = \"http://proxy.lab:3128\"\nhttps = \"http://proxy.lab:3128\"\n";
    for rel in ["examples/flannel.toml", "examples/calico.toml"] {
        let text = with_pins(&plan_text(rel, &[])) + proxy;
        let apply: Vec<Task> = expand(rel, &text)
            .into_iter()
            .filter(|t| t.id.host == "ww1")
            .collect();
        let mut plan =
            kwin_engine::plan::load_str(&root().join(rel), &text).unwrap_or_else(|d| panic!("{d}"));
        plan.file.tasks.clear();
        let reset: Vec<Task> =
            kwin_engine::expand::expand(&plan, kwin_modules::recipes::RESET_RECIPES)
                .unwrap_or_else(|d| panic!("{d}"))
                .into_iter()
                .filter(|t| t.id.host == "ww1")
                .collect();
        let absent = |module: &str, key: &str| -> Vec<String> {
            reset
                .iter()
                .filter(|t| t.module == module && t.params["state"] == "absent")
                .filter_map(|t| t.params[key].as_str().map(str::to_string))
                .collect()
        };
        let removed_dirs = absent("directory", "path");
        let removed_files = absent("file", "path");
        let removed = |path: &str| {
            removed_dirs.iter().any(|d| within(path, d))
                || removed_files.iter().any(|f| ci(f, path))
        };
        let mut left = Vec::new();
        let mut check = |what: String, ok: bool| {
            if !ok {
                left.push(what);
            }
        };
        for t in &apply {
            let p = &t.params;
            let s = |k: &str| p[k].as_str().map(str::to_string);
            match t.module.as_str() {
                "directory" | "file" | "download" => {
                    let key = if t.module == "download" {
                        "dest"
                    } else {
                        "path"
                    };
                    if let Some(path) = s(key) {
                        check(format!("{}: {path}", t.id), removed(&path));
                    }
                }
                "archive" => {
                    if let Some(path) = s("dest") {
                        check(format!("{}: {path}", t.id), removed(&path));
                    }
                }
                "service" => {
                    for b in p["binaries"].as_array().into_iter().flatten() {
                        for k in ["src", "dest"] {
                            if let Some(path) = b[k].as_str() {
                                check(format!("{}: {path}", t.id), removed(path));
                            }
                        }
                    }
                    let name = s("name").unwrap_or_default();
                    let services = reset
                        .iter()
                        .find(|t| t.id.name == "windows-services")
                        .and_then(|t| t.params["run"].as_str())
                        .unwrap_or("");
                    check(
                        format!("{}: the service {name}", t.id),
                        services.contains(&format!("'{name}'")),
                    );
                }
                "firewall_rule" => {
                    let name = s("name").unwrap_or_default();
                    check(
                        format!("{}: the firewall rule {name}", t.id),
                        absent("firewall_rule", "name").contains(&name),
                    );
                }
                "env_var" => {
                    let name = s("name").unwrap_or_default();
                    check(
                        format!("{}: the machine variable {name}", t.id),
                        absent("env_var", "name").contains(&name),
                    );
                }
                "command" => {
                    // A scheduled task the step registers is unregistered by reset.
                    let run = s("run").unwrap_or_default();
                    for part in run.split("Register-ScheduledTask -TaskName '").skip(1) {
                        let name = part.split('\'').next().unwrap_or("");
                        check(
                            format!("{}: the scheduled task {name}", t.id),
                            reset.iter().any(|r| {
                                r.params["run"].as_str().is_some_and(|x| {
                                    x.contains(&format!(
                                        "Unregister-ScheduledTask -TaskName '{name}'"
                                    ))
                                })
                            }),
                        );
                    }
                }
                "path_entry" => {
                    let path = s("path").unwrap_or_default();
                    check(
                        format!("{}: the PATH entry {path}", t.id),
                        absent("path_entry", "path").iter().any(|x| ci(x, &path)),
                    );
                }
                _ => {}
            }
        }
        for path in MADE_BY_WHAT_KWIN_RUNS {
            check(path.to_string(), removed(path));
        }
        if rel.contains("flannel") {
            let route = reset.iter().any(|t| {
                t.module == "command"
                    && t.params["run"].as_str().is_some_and(|r| {
                        r.contains("Remove-NetRoute") && r.contains("'169.254.169.254/32'")
                    })
            });
            check("the persistent 169.254.169.254 route".into(), route);
        }
        assert!(
            left.is_empty(),
            "{rel}: reset leaves what kwin made:\n{}",
            left.join("\n")
        );
    }
}
