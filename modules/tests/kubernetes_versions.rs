//! The example plans for every Kubernetes minor kwin accepts (`engine/src/plan/versions.toml`),
//! validated and rendered with the built-in recipes: what the recipes give each component
//! depends on the minor (flags a kubelet refuses, kubeadm's pause image), every flag of every
//! command line they render is one the flag table lists and the component's version takes,
//! and the plan keys for Windows scheduling reach the recipes.

mod ps_corpus;

use kwin_engine::plan::support;
use kwin_engine::plan::versions::{self, Support};
use kwin_engine::task::Task;
use ps_corpus::{example_plan, expand_with_sums, EXAMPLES};

/// The minors kwin accepts, as numbers (1.29 → 29).
fn minors() -> Vec<u32> {
    versions::known_minors()
        .iter()
        .map(|v| v.0[1] as u32)
        .collect()
}

fn tasks(example: &str, version: &str) -> Vec<Task> {
    let plan = example_plan(example, Some(version));
    expand_with_sums(&plan, kwin_modules::recipes::RECIPES)
        .unwrap_or_else(|d| panic!("{example} at {version}: {d}"))
}

fn task<'a>(tasks: &'a [Task], id: &str) -> &'a Task {
    tasks
        .iter()
        .find(|t| t.id.to_string() == id)
        .unwrap_or_else(|| panic!("no task {id}"))
}

fn kubelet_args(tasks: &[Task], host: &str) -> Vec<String> {
    task(tasks, &format!("{host}/kubelet")).params["args"]
        .as_array()
        .expect("kubelet args")
        .iter()
        .map(|a| a.as_str().expect("arg").to_string())
        .collect()
}

#[test]
fn kubelet_1_35_and_later_get_no_pod_infra_container_image() {
    for minor in minors() {
        let t = tasks("examples/flannel.toml", &format!("1.{minor}.0"));
        let args = kubelet_args(&t, "ww1");
        let has = args
            .iter()
            .any(|a| a.starts_with("--pod-infra-container-image"));
        // kubernetes/kubernetes CHANGELOG-1.35.md, Urgent Upgrade Notes: "Removed the
        // --pod-infra-container-image flag from kubelet's command line" (#133779).
        assert!(
            minor < 35 || !has,
            "kubelet 1.{minor} refuses --pod-infra-container-image, but gets {args:?}"
        );
    }
}

/// kubeadm's PauseVersion per minor, as `kubeadm config images list` of each release prints
/// it (kubernetes/minikube pkg/minikube/constants/constants_kubeadm_images.go, generated
/// from the release binaries).
const KUBEADM_PAUSE: &[(u32, &str)] = &[
    (29, "3.9"),
    (30, "3.9"),
    (31, "3.10"),
    (32, "3.10"),
    (33, "3.10"),
    (34, "3.10.1"),
    (35, "3.10.1"),
    (36, "3.10.2"),
    (37, "3.10.2"),
];

#[test]
fn the_default_sandbox_image_follows_kubeadm() {
    // Every minor kwin accepts has its expectation here, and the table agrees with it.
    assert_eq!(
        KUBEADM_PAUSE.iter().map(|(m, _)| *m).collect::<Vec<_>>(),
        minors(),
        "KUBEADM_PAUSE must list exactly the minors kwin accepts"
    );
    for &(minor, pause) in KUBEADM_PAUSE {
        // containerd 2.x's configuration version 3 pins it as `pinned_images.sandbox`, 1.x's
        // version 2 as `sandbox_image` (engine/src/plan/containerd.rs).
        let image = format!("\"registry.k8s.io/pause:{pause}\"");
        let want = [
            format!("sandbox = {image}"),
            format!("sandbox_image = {image}"),
        ];
        for example in EXAMPLES {
            let t = tasks(example, &format!("1.{minor}.2"));
            for id in ["cp1/containerd-config", "ww1/containerd-config"] {
                let content = task(&t, id).params["content"].as_str().expect("content");
                assert!(
                    want.iter().any(|w| content.contains(w.as_str())),
                    "{example} 1.{minor}: {id} lacks `{}`:\n{content}",
                    want[0]
                );
            }
        }
    }
}

#[test]
fn rendered_arguments_carry_no_control_characters() {
    for minor in minors() {
        for example in EXAMPLES {
            let t = tasks(example, &format!("1.{minor}.0"));
            for task in &t {
                let Some(args) = task.params.get("args").and_then(|a| a.as_array()) else {
                    continue;
                };
                for a in args {
                    let s = a.as_str().unwrap_or_default();
                    assert!(
                        !s.chars().any(char::is_control),
                        "{example} 1.{minor} {}: argument {s:?} holds a control character",
                        task.id
                    );
                }
            }
        }
    }
}

fn with_cluster_key(example: &str, key: &str, value: bool) -> Vec<Task> {
    let path = ps_corpus::workspace().join(example);
    let mut doc: toml::Table =
        toml::from_str(&std::fs::read_to_string(&path).expect("example")).expect("toml");
    doc["cluster"]
        .as_table_mut()
        .expect("[cluster]")
        .insert(key.into(), toml::Value::Boolean(value));
    let plan = kwin_engine::plan::load_str(&path, &toml::to_string(&doc).expect("toml"))
        .unwrap_or_else(|d| panic!("{d}"));
    expand_with_sums(&plan, kwin_modules::recipes::RECIPES).unwrap_or_else(|d| panic!("{d}"))
}

fn without_cluster_key(example: &str, key: &str) -> Vec<Task> {
    let path = ps_corpus::workspace().join(example);
    let mut doc: toml::Table =
        toml::from_str(&std::fs::read_to_string(&path).expect("example")).expect("toml");
    doc["cluster"]
        .as_table_mut()
        .expect("[cluster]")
        .remove(key);
    let plan = kwin_engine::plan::load_str(&path, &toml::to_string(&doc).expect("toml"))
        .unwrap_or_else(|d| panic!("{d}"));
    expand_with_sums(&plan, kwin_modules::recipes::RECIPES).unwrap_or_else(|d| panic!("{d}"))
}

const WINDOWS_TAINT: &str = "os=windows:NoSchedule";

fn join_taints(tasks: &[Task], host: &str) -> Vec<String> {
    task(tasks, &format!("{host}/kubeadm-join")).params["taints"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| t.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn windows_taint_reaches_the_kubelet_and_the_join() {
    for example in EXAMPLES {
        for (tasks, want) in [
            (without_cluster_key(example, "windows_taint"), true),
            (with_cluster_key(example, "windows_taint", true), true),
            (with_cluster_key(example, "windows_taint", false), false),
        ] {
            for host in ["ww1", "ww2"] {
                let args = kubelet_args(&tasks, host);
                let in_kubelet = args
                    .iter()
                    .any(|a| a.starts_with("--register-with-taints=") && a.contains(WINDOWS_TAINT));
                let in_join = join_taints(&tasks, host).iter().any(|t| t == WINDOWS_TAINT);
                assert_eq!(
                    (in_kubelet, in_join),
                    (want, want),
                    "{example} {host}: windows taint expected {want}; kubelet {args:?}, join {:?}",
                    join_taints(&tasks, host)
                );
            }
        }
    }
}

#[test]
fn windows_runtime_classes_decides_the_runtime_class_step() {
    for example in EXAMPLES {
        let has = |tasks: &[Task]| tasks.iter().any(|t| t.id.name == "runtime-classes");
        assert!(
            !has(&without_cluster_key(example, "windows_runtime_classes")),
            "{example}: runtime classes are created though windows_runtime_classes defaults to false"
        );
        assert!(!has(&with_cluster_key(
            example,
            "windows_runtime_classes",
            false
        )));
        let on = with_cluster_key(example, "windows_runtime_classes", true);
        assert!(
            has(&on),
            "{example}: windows_runtime_classes = true creates none"
        );
    }
}

#[test]
fn the_examples_validate_and_render_for_every_minor_kwin_accepts() {
    let steps = kwin_modules::recipes::step_names();
    for minor in minors() {
        let version = format!("1.{minor}.0");
        for example in EXAMPLES {
            let path = ps_corpus::workspace().join(example);
            let mut doc: toml::Table =
                toml::from_str(&std::fs::read_to_string(&path).expect("example")).expect("toml");
            doc["cluster"].as_table_mut().expect("[cluster]").insert(
                "kubernetes_version".into(),
                toml::Value::String(version.clone()),
            );
            // The example's containerd where the support matrix allows it with this minor,
            // else the lowest release the minor's row names (containerd 1.7 for 1.29).
            let row = support::minor_row(&versions::Version(vec![1, u64::from(minor)]))
                .expect("a matrix row per minor");
            let containerd = doc["versions"]["containerd"].as_str().map(str::to_string);
            if let Some(c) = containerd {
                let fits = support::containerd_fits(
                    &versions::Version(vec![1, u64::from(minor)]),
                    &versions::Version::parse(&c).expect("version"),
                );
                if fits != support::Fit::Ok {
                    doc["versions"].as_table_mut().expect("[versions]").insert(
                        "containerd".into(),
                        toml::Value::String(row.containerd[0].clone()),
                    );
                }
            }
            let text = toml::to_string(&doc).expect("toml");
            let diags = check_str(&path, &text, &steps);
            // Only what the matrix says of old minors and old containerd branches: warnings.
            let unexpected: Vec<String> = diags
                .0
                .iter()
                .filter(|d| !matches!(d.code, "k8s-end-of-life" | "containerd-end-of-life"))
                .map(|d| format!("{d:?}"))
                .collect();
            assert!(
                unexpected.is_empty(),
                "{example} at {version} does not validate clean:\n{diags}"
            );
            let plan = kwin_engine::plan::load_str(&path, &text).expect("loads");
            for recipes in [
                kwin_modules::recipes::RECIPES,
                kwin_modules::recipes::RESET_RECIPES,
            ] {
                let tasks = expand_with_sums(&plan, recipes)
                    .unwrap_or_else(|d| panic!("{example} at {version}: {d}"));
                kwin_engine::graph::TaskGraph::build(tasks)
                    .unwrap_or_else(|d| panic!("{example} at {version}: {d}"));
            }
        }
    }
    // Outside the range: refused, naming the range.
    for version in ["1.28.15", "1.38.0"] {
        let (example, path) = (EXAMPLES[0], ps_corpus::workspace().join(EXAMPLES[0]));
        let text = std::fs::read_to_string(&path).expect("example").replace(
            "kubernetes_version = \"1.37.2\"",
            &format!("kubernetes_version = \"{version}\""),
        );
        let diags = check_str(&path, &text, &steps);
        assert!(
            diags.0.iter().any(|d| d.code.starts_with("k8s-version")),
            "{example} at {version} validates:\n{diags}"
        );
    }
}

// ------------------------------------------------------------------------ command-line flags

const COMPONENTS: &[&str] = &["kubelet", "kube-proxy", "kubeadm", "flanneld", "containerd"];

/// The component a command word runs (`C:\k\kubelet.exe`, `"kube-proxy"`, `kubeadm`).
fn component_of(token: &str) -> Option<&'static str> {
    let t = token.trim_matches(|c: char| "\"'`,[](){}&$".contains(c));
    let base = t.rsplit(['\\', '/']).next()?;
    let base = base.strip_suffix(".exe").unwrap_or(base);
    COMPONENTS
        .iter()
        .copied()
        .find(|c| base.eq_ignore_ascii_case(c))
}

/// `--name` of a flag token (`--name=value`, `"--name",`), if the token is a flag.
fn flag_of(token: &str) -> Option<String> {
    let t = token.trim_matches(|c: char| "\"'`,[]".contains(c));
    let t = t.strip_prefix("- ").unwrap_or(t);
    if !t.starts_with("--") || t.len() < 3 {
        return None;
    }
    Some(t.split('=').next().unwrap_or(t).to_string())
}

fn is_separator(token: &str) -> bool {
    matches!(
        token,
        "|" | ";" | "&&" | "||" | ")" | "}" | "2>&1" | ">" | "2>" | "<"
    )
}

/// Flags given to components in free text: one command per line (`kubeadm reset -f
/// --cri-socket x`), YAML block lists (`- kube-proxy.exe` then `- --v=4` items) and kubeadm's
/// `kubeletExtraArgs` (v1beta3 maps and v1beta4 `- name:` lists): (component, flag) pairs.
fn flags_in_text(text: &str) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        // kubeletExtraArgs as JSON (the join module's configuration): `"name": "node-ip"`
        // items of a list, or the keys of a map.
        if trimmed.starts_with("\"kubeletExtraArgs\"") {
            let map = trimmed.trim_end().ends_with('{');
            let mut depth = 1i32;
            let mut j = i + 1;
            while j < lines.len() && depth > 0 {
                let t = lines[j].trim();
                if let Some(rest) = t.strip_prefix("\"name\":") {
                    let k = rest.trim().trim_end_matches(',').trim_matches('"');
                    out.push(("kubelet", format!("--{k}")));
                } else if map && depth == 1 && t.starts_with('"') && t.contains("\":") {
                    let k = t[1..].split('"').next().unwrap_or("");
                    out.push(("kubelet", format!("--{k}")));
                }
                depth +=
                    t.matches(['{', '[']).count() as i32 - t.matches(['}', ']']).count() as i32;
                j += 1;
            }
            i = j;
            continue;
        }
        // kubeletExtraArgs: kubelet flags without their dashes.
        if trimmed.starts_with("kubeletExtraArgs:") {
            let mut j = i + 1;
            while j < lines.len() {
                let l = lines[j];
                let t = l.trim_start();
                if t.is_empty() || l.len() - t.len() <= indent {
                    break;
                }
                let key = t.strip_prefix("- name:").map(str::trim).or_else(|| {
                    (!t.starts_with("value:") && t.contains(':'))
                        .then(|| t.split(':').next().unwrap_or("").trim())
                });
                if let Some(k) = key {
                    let k = k.trim_matches(|c| c == '"' || c == '\'');
                    if !k.is_empty() {
                        out.push(("kubelet", format!("--{k}")));
                    }
                }
                j += 1;
            }
            i = j;
            continue;
        }
        // A YAML list item that names a component: its flags are the following items.
        if let Some(item) = trimmed.strip_prefix("- ") {
            if let Some(c) = component_of(item.trim()) {
                let mut j = i + 1;
                while j < lines.len() {
                    let t = lines[j].trim_start();
                    let Some(next) = t.strip_prefix("- ") else {
                        break;
                    };
                    if let Some(f) = flag_of(next.trim()) {
                        out.push((c, f));
                    } else if component_of(next.trim()).is_some() {
                        break;
                    }
                    j += 1;
                }
            }
        }
        // A command on one line.
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let mut current: Option<&'static str> = None;
        for t in tokens {
            if is_separator(t) {
                current = None;
                continue;
            }
            if let Some(c) = component_of(t) {
                current = Some(c);
                continue;
            }
            if let (Some(c), Some(f)) = (current, flag_of(t)) {
                out.push((c, f));
            }
        }
        i += 1;
    }
    out
}

/// Every (component, flag) a task gives a component: a `service` task's binary and args,
/// and command lines in every string of its params.
fn task_flags(t: &Task) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if t.module == "service" {
        // The binary, or a program a wrapper (kube-log-runner) starts among the arguments.
        let mut current = t.params["binary"].as_str().and_then(component_of);
        for a in t.params["args"].as_array().into_iter().flatten() {
            let Some(a) = a.as_str() else { continue };
            if let Some(c) = component_of(a) {
                current = Some(c);
            } else if let (Some(c), Some(f)) = (current, flag_of(a)) {
                out.push((c, f));
            }
        }
    }
    fn strings(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s) => out.push(s.clone()),
            serde_json::Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
            serde_json::Value::Object(m) => m.values().for_each(|x| strings(x, out)),
            _ => {}
        }
    }
    let mut texts = Vec::new();
    if t.module != "service" {
        strings(&t.params, &mut texts);
    }
    for text in texts {
        out.extend(flags_in_text(&text));
    }
    out
}

#[test]
fn every_rendered_command_line_flag_is_in_the_table_and_taken_by_its_version() {
    let mut failures = Vec::new();
    let mut seen: std::collections::BTreeMap<&str, usize> = Default::default();
    for minor in minors() {
        let version = format!("1.{minor}.0");
        for example in EXAMPLES {
            let plan = example_plan(example, Some(&version));
            let cv = kwin_engine::expand::RecipeContext::from_plan(&plan)
                .expect("context")
                .component_versions;
            for recipes in [
                kwin_modules::recipes::RECIPES,
                kwin_modules::recipes::RESET_RECIPES,
            ] {
                let tasks = expand_with_sums(&plan, recipes).expect("expands");
                for t in &tasks {
                    for (c, f) in task_flags(t) {
                        *seen.entry(c).or_default() += 1;
                        let ver = cv.of(c).expect("component version");
                        match versions::flag_support(c, &f, &ver) {
                            Ok(Support::Accepted { .. }) => {}
                            Ok(other) => failures.push(format!(
                                "{example} at {version}, {}: {c} {ver} does not take {f}: {other:?}",
                                t.id
                            )),
                            Err(e) => failures.push(format!("{example} at {version}, {}: {e}", t.id)),
                        }
                    }
                }
            }
        }
    }
    failures.sort();
    failures.dedup();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The scan found the command lines it is for.
    for c in ["kubelet", "containerd", "kubeadm"] {
        assert!(
            seen.get(c).copied().unwrap_or(0) > 0,
            "no {c} flag found: {seen:?}"
        );
    }
}

/// kubeadm command lines the kube modules build (their scripts from every case, both shells)
/// and the kubelet flags of their kubeletExtraArgs, for every minor kwin accepts.
#[test]
fn kube_module_scripts_give_kubeadm_and_the_kubelet_only_flags_they_take() {
    let mut failures = Vec::new();
    let mut found = 0;
    for s in ps_corpus::kube_case_scripts_all_shells() {
        for (c, f) in flags_in_text(&s.text) {
            if c != "kubeadm" && c != "kubelet" {
                continue;
            }
            found += 1;
            for minor in minors() {
                match versions::flag_support(c, &f, &format!("1.{minor}.0")) {
                    Ok(Support::Accepted { .. }) => {}
                    other => failures.push(format!("{}: {c} 1.{minor} {f}: {other:?}", s.origin)),
                }
            }
        }
    }
    failures.sort();
    failures.dedup();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        found > 10,
        "only {found} kubeadm/kubelet flags found in the kube modules' scripts"
    );
}

#[test]
fn the_flag_scan_finds_flags_where_kwin_writes_them() {
    let f = |t: &str| flags_in_text(t);
    assert_eq!(
        f("kubeadm reset -f --cri-socket 'unix:///x' 2>&1 | tee"),
        [("kubeadm", "--cri-socket".to_string())]
    );
    assert_eq!(
        f("command:\n  - C:\\k\\kube-proxy.exe\n  - --v=4\n  - --hostname-override=$(NODE_NAME)\n"),
        [("kube-proxy", "--v".to_string()), ("kube-proxy", "--hostname-override".to_string())]
    );
    assert_eq!(
        f("  kubeletExtraArgs:\n    - name: \"node-ip\"\n      value: \"10.0.0.1\"\nnext: 1"),
        [("kubelet", "--node-ip".to_string())]
    );
    assert_eq!(
        f("  kubeletExtraArgs:\n    \"node-labels\": \"a=b\"\n"),
        [("kubelet", "--node-labels".to_string())]
    );
    assert_eq!(
        f("& 'C:\\opt\\flanneld.exe' --kube-subnet-mgr --iface=10.0.0.2"),
        [
            ("flanneld", "--kube-subnet-mgr".to_string()),
            ("flanneld", "--iface".to_string())
        ]
    );
    assert_eq!(
        f("  \"kubeletExtraArgs\": [\n    {\n      \"name\": \"node-ip\",\n      \"value\": \"x\"\n    }\n  ],\n  \"name\": \"ww1\""),
        [("kubelet", "--node-ip".to_string())]
    );
    assert_eq!(
        f("  \"kubeletExtraArgs\": {\n    \"node-labels\": \"a=b\"\n  },\n  \"name\": \"ww1\""),
        [("kubelet", "--node-labels".to_string())]
    );
    assert_eq!(
        f("& $kubeadm join --config $cfg 2>&1"),
        [("kubeadm", "--config".to_string())]
    );
    // A path that merely contains a component's name is not a command.
    assert!(f("path = 'C:\\Program Files\\containerd\\config.toml' --x").is_empty());
}

/// Load and validate `text` (what `kwin validate` does before expansion): every diagnostic.
fn check_str(
    path: &std::path::Path,
    text: &str,
    steps: &[String],
) -> kwin_engine::diag::Diagnostics {
    use kwin_engine::module::Registry;
    let modules = kwin_modules::Builtin.names();
    let known = kwin_engine::plan::validate::Names {
        modules: &modules,
        recipe_steps: steps,
    };
    let mut diags = kwin_engine::plan::validate::load_and_validate_str(path, text, known).diags;
    // The examples name the user's own key files (`~/.ssh/id_ed25519`, ...), which this
    // machine need not have: what is checked here is the version-dependent part.
    diags.0.retain(|d| d.code != "local-file");
    diags
}
