//! The example plans for every Kubernetes minor kwin accepts, rendered with the built-in
//! recipes: what the recipes give each component depends on the minor (flags a kubelet
//! refuses, kubeadm's pause image), and the plan keys for Windows scheduling reach the
//! recipes.

mod ps_corpus;

use kwin_engine::task::Task;
use ps_corpus::{example_plan, expand_with_sums, EXAMPLES};

const MINORS: std::ops::RangeInclusive<u32> = 29..=37;

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
    for minor in MINORS {
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
    for &(minor, pause) in KUBEADM_PAUSE {
        let want = format!("sandbox_image = \"registry.k8s.io/pause:{pause}\"");
        for example in EXAMPLES {
            let t = tasks(example, &format!("1.{minor}.2"));
            for id in ["cp1/containerd-config", "ww1/containerd-config"] {
                let content = task(&t, id).params["content"].as_str().expect("content");
                assert!(
                    content.contains(&want),
                    "{example} 1.{minor}: {id} lacks `{want}`:\n{content}"
                );
            }
        }
    }
}

#[test]
fn rendered_arguments_carry_no_control_characters() {
    for minor in MINORS {
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
