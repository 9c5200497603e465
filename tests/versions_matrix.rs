//! The support matrix (`engine/src/plan/versions.toml` `[matrix]`, rules in
//! `engine/src/plan/support.rs`) is the one owner of kwin's version rules:
//!
//! - docs/versions.md is generated from it (`KWIN_BLESS=1 cargo test --test versions_matrix`
//!   rewrites it);
//! - a changed row changes both what validation's rules answer and the docs page;
//! - validation refuses, for every minor, the patch after its newest, naming the newest;
//! - kwin's default pins and the examples sit inside it;
//! - the newest minor has everything a minor needs (adding 1.38 is a data change: raise
//!   `[kubernetes] newest` and this test lists what is still missing). The flags the recipes
//!   render for it are checked by rendering every starter plan at the newest release
//!   (`tests/init.rs`), and the downloads' digests by `tests/checksums.rs`.

use kwin_engine::plan::support::{self, Fit, Support};
use kwin_engine::plan::validate::{load_and_validate_str, Names};
use kwin_engine::plan::versions::{self, Version};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn v(s: &str) -> Version {
    Version::parse(s).expect("version")
}

#[test]
fn the_docs_page_is_generated_from_the_matrix() {
    let path = root().join("docs/versions.md");
    let want = support::markdown();
    if std::env::var_os("KWIN_BLESS").is_some() {
        std::fs::write(&path, &want).expect("write docs/versions.md");
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/versions.md is not the matrix's page: run KWIN_BLESS=1 cargo test --test versions_matrix"
    );
}

/// The version table with one line of its text replaced.
fn table_with(from: &str, to: &str) -> versions::Table {
    assert!(versions::TABLE.contains(from), "{from}");
    toml::from_str(&versions::TABLE.replacen(from, to, 1)).expect("changed table parses")
}

#[test]
fn a_changed_row_changes_the_rules_and_the_page() {
    let builtin = Support::builtin();
    // A newer patch of 1.37 appears in the row.
    let t = table_with("latest_patch = \"1.37.2\"", "latest_patch = \"1.37.3\"");
    let changed = Support(&t);
    assert_eq!(
        builtin.patch_released(&v("1.37.3")),
        Err("1.37.2".to_string())
    );
    assert_eq!(changed.patch_released(&v("1.37.3")), Ok(()));
    assert_eq!(changed.newest_release(), "1.37.3");
    assert!(!builtin.markdown().contains("1.37.0 to 1.37.3"));
    assert!(changed.markdown().contains("1.37.0 to 1.37.3"));
    // containerd's table drops 2.3 for 1.37.
    let t = table_with(
        "containerd = [\"2.4.0\", \"2.3.0\"]",
        "containerd = [\"2.4.0\"]",
    );
    let changed = Support(&t);
    assert_eq!(builtin.containerd_fits(&v("1.37"), &v("2.3.7")), Fit::Ok);
    assert!(matches!(
        changed.containerd_fits(&v("1.37"), &v("2.3.7")),
        Fit::Outside { allowed, .. } if allowed == "2.4.0+"
    ));
    assert!(changed.markdown().contains("| 2.4.0+ |"));
    assert!(
        !changed.missing_for_minor("1.37").is_empty(),
        "the pin no longer fits"
    );
}

const PLAN: &str = r#"
[cluster]
name = "lab"
kubernetes_version = "VERSION"

[cni]
plugin = "flannel"

[defaults.windows]
password_env = "KWIN_WINDOWS_PASSWORD"

[[hosts]]
name = "cp1"
address = "192.168.56.10"
os = "linux"
role = "control-plane"

[[hosts]]
name = "ww1"
address = "192.168.56.21"
os = "windows"
role = "worker"
"#;

#[test]
fn validation_refuses_the_patch_after_each_minors_newest() {
    for row in &versions::table().matrix.minors {
        let latest = v(&row.latest_patch);
        let next = format!("{}.{}.{}", latest.0[0], latest.0[1], latest.0[2] + 1);
        let text = PLAN.replace("VERSION", &next);
        let d = load_and_validate_str(Path::new("plan.toml"), &text, Names::default()).diags;
        let refused = d.0.iter().find(|d| d.code == "k8s-version-unreleased");
        let refused = refused.unwrap_or_else(|| panic!("{next}: {d}"));
        assert!(refused.summary.contains(&row.latest_patch), "{refused:?}");
        let text = PLAN.replace("VERSION", &row.latest_patch);
        let d = load_and_validate_str(Path::new("plan.toml"), &text, Names::default()).diags;
        assert!(
            !d.0.iter().any(|d| d.code == "k8s-version-unreleased"),
            "{}: {d}",
            row.latest_patch
        );
    }
}

#[test]
fn the_newest_minor_has_everything_a_minor_needs() {
    let newest = versions::newest().to_string();
    let missing = support::missing_for_minor(&newest);
    assert!(
        missing.is_empty(),
        "Kubernetes {newest} still needs:\n  {}",
        missing.join("\n  ")
    );
    // What the list asks of a minor kwin does not know yet.
    let next = format!(
        "{}.{}",
        versions::newest().0[0],
        versions::newest().0[1] + 1
    );
    let todo = support::missing_for_minor(&next);
    assert!(
        todo.iter().any(|m| m.contains("[[matrix.minors]]"))
            && todo.iter().any(|m| m.contains("[pause.minors]"))
            && todo.iter().any(|m| m.contains("[kubernetes] newest")),
        "{todo:?}"
    );
}

#[test]
fn defaults_and_examples_sit_inside_the_matrix() {
    let newest = versions::newest();
    let pins = support::pins();
    assert_eq!(
        support::containerd_fits(&newest, &v(&pins.containerd)),
        Fit::Ok
    );
    for (k, pin) in [
        ("calico", &pins.calico),
        ("flannel", &pins.flannel),
        ("cni_plugins", &pins.cni_plugins),
        ("runc", &pins.runc),
    ] {
        assert_eq!(support::component_fits(k, &newest, &v(pin)), Fit::Ok, "{k}");
    }
    // Every example (except the lab's, which follow the lab) names the newest release, and
    // its [versions] fit it.
    let mut seen = 0;
    for dir in ["examples", "examples/ci"] {
        for e in std::fs::read_dir(root().join(dir))
            .expect("examples")
            .flatten()
        {
            let p = e.path();
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            if p.extension().is_none_or(|x| x != "toml")
                || name.is_some_and(|n| n.starts_with("lab"))
            {
                continue;
            }
            let doc: toml::Table =
                toml::from_str(&std::fs::read_to_string(&p).expect("read")).expect("TOML");
            let Some(cluster) = doc.get("cluster") else {
                continue;
            };
            seen += 1;
            assert_eq!(
                cluster["kubernetes_version"].as_str(),
                Some(support::newest_release().as_str()),
                "{}",
                p.display()
            );
            if let Some(vs) = doc.get("versions").and_then(|v| v.as_table()) {
                if let Some(c) = vs.get("containerd").and_then(|c| c.as_str()) {
                    assert_eq!(
                        support::containerd_fits(&newest, &v(c)),
                        Fit::Ok,
                        "{}",
                        p.display()
                    );
                }
                for (k, val) in vs {
                    if k == "containerd" {
                        continue;
                    }
                    let val = val.as_str().expect("version string");
                    assert_eq!(
                        support::component_fits(k, &newest, &v(val)),
                        Fit::Ok,
                        "{}: {k}",
                        p.display()
                    );
                }
            }
        }
    }
    assert!(seen >= 3, "examples checked: {seen}");
}

/// The `node_check` step's params on cp1 for `text`.
fn node_check_params(text: &str) -> serde_json::Value {
    let plan =
        kwin_engine::plan::load_str(Path::new("plan.toml"), text).unwrap_or_else(|d| panic!("{d}"));
    let tasks = kwin_engine::expand::expand(&plan, kwin_modules::recipes::RECIPES)
        .unwrap_or_else(|d| panic!("{d}"));
    tasks
        .iter()
        .find(|t| t.id.to_string() == "cp1/node-check")
        .map(|t| (*t.params).clone())
        .expect("cp1/node-check")
}

#[test]
fn nodes_are_checked_against_the_matrix_and_cgroup_v1_follows_the_kubelet() {
    let newest = support::newest_release();
    let p = node_check_params(&PLAN.replace("VERSION", &newest));
    let reason = p["refuse_cgroup_v1"].as_str().unwrap_or_default();
    assert!(
        reason.contains("failCgroupV1") && reason.contains("cluster.allow_cgroup_v1"),
        "{p}"
    );
    let distros = p["distributions"].as_array().expect("distributions");
    assert_eq!(distros.len(), versions::table().matrix.linux.len(), "{p}");
    // Allowed by the plan: the kubelet is told so, and the node is not refused.
    let allowed = PLAN
        .replace("VERSION", &newest)
        .replace("[cni]", "allow_cgroup_v1 = true\n\n[cni]");
    assert!(node_check_params(&allowed)["refuse_cgroup_v1"].is_null());
    // Before 1.35 the kubelet runs on cgroup v1 by default.
    let old = PLAN.replace("VERSION", "1.34.12");
    assert!(node_check_params(&old)["refuse_cgroup_v1"].is_null());
}

/// Every task of `text` by id.
fn params_of(text: &str, id: &str) -> serde_json::Value {
    let plan =
        kwin_engine::plan::load_str(Path::new("plan.toml"), text).unwrap_or_else(|d| panic!("{d}"));
    let tasks = kwin_engine::expand::expand(&plan, kwin_modules::recipes::RECIPES)
        .unwrap_or_else(|d| panic!("{d}"));
    tasks
        .iter()
        .find(|t| t.id.to_string() == id)
        .map(|t| (*t.params).clone())
        .unwrap_or_else(|| panic!("no task {id}"))
}

#[test]
fn allowing_cgroup_v1_tells_the_kubelet_and_kubeadm_and_the_driver_reaches_both() {
    let newest = support::newest_release();
    let with_worker = PLAN.replace("VERSION", &newest).replace(
        "[[hosts]]\nname = \"ww1\"",
        "[[hosts]]\nname = \"lw1\"\naddress = \"192.168.56.11\"\nos = \"linux\"\nrole = \"worker\"\n\n[[hosts]]\nname = \"ww1\"",
    );
    let allowed = with_worker
        .replace("[cni]", "allow_cgroup_v1 = true\n\n[cni]")
        .replace(
            "[defaults.windows]",
            "[runtime]\ncgroup_driver = \"cgroupfs\"\n\n[defaults.windows]",
        );
    let config = params_of(&allowed, "cp1/kubeadm-config")["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(config.contains("\nfailCgroupV1: false\n"), "{config}");
    assert!(config.contains("cgroupDriver: \"cgroupfs\""), "{config}");
    for id in ["cp1/kubeadm-init", "lw1/kubeadm-join"] {
        assert_eq!(
            params_of(&allowed, id)["ignore_preflight_errors"],
            serde_json::json!(["SystemVerification"]),
            "{id}"
        );
    }
    let containerd = params_of(&allowed, "cp1/containerd-config")["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(containerd.contains("SystemdCgroup = false"), "{containerd}");
    // Not allowed (the default): the kubelet keeps its default and kubeadm checks.
    let config = params_of(&with_worker, "cp1/kubeadm-config")["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!config.contains("failCgroupV1"), "{config}");
    assert!(config.contains("cgroupDriver: \"systemd\""), "{config}");
    assert_eq!(
        params_of(&with_worker, "lw1/kubeadm-join")["ignore_preflight_errors"],
        serde_json::json!([])
    );
}
