//! The recipes' template files (`plans/<recipe>/<name>.<ext>.j2`), each read whole as its
//! format's own tools would: rendered on its own for representative plans (flannel and
//! Calico with Windows workers, Docker on Linux; the oldest and the newest Kubernetes minor
//! kwin accepts), every `.yaml.j2` must be YAML whose documents are Kubernetes objects, every
//! `.json.j2` JSON, every `.service.j2` a systemd unit. `.ps1.j2` files go to the Windows
//! PowerShell 5.1 profile (`ps51_profile.rs`, through `ps_corpus::template_file_scripts`),
//! `.sh.j2` files must parse as POSIX sh (`sh -n`).

mod ps_corpus;

use kwin_engine::checksums::Checksums;
use kwin_engine::expand::recipe::{source_kind, template_name, SourceKind};
use kwin_engine::plan::{LoadedPlan, Role};
use serde::Deserialize;

/// (plan, Kubernetes version or none for the plan's own).
const CONTEXTS: &[(&str, Option<&str>)] = &[
    ("examples/flannel.toml", None),
    ("examples/flannel.toml", Some("1.37.2")),
    ("examples/calico.toml", None),
    ("examples/calico.toml", Some("1.29.4")),
    ("tests/plans/docker.toml", None),
];

fn template_files() -> Vec<&'static str> {
    kwin_modules::recipes::RECIPES
        .iter()
        .filter(|(f, _)| source_kind(f) == SourceKind::Template)
        .map(|(f, _)| *f)
        .collect()
}

fn first_control_plane(plan: &LoadedPlan) -> usize {
    plan.hosts
        .iter()
        .position(|h| h.role == Some(Role::ControlPlane))
        .expect("a control plane")
}

/// Every template file rendered in every context: (file, context, text).
fn rendered() -> Vec<(&'static str, String, String)> {
    let mut out = Vec::new();
    for (rel, version) in CONTEXTS {
        let plan = ps_corpus::example_plan(rel, *version);
        let sums = Checksums::new(Default::default(), Default::default());
        for file in template_files() {
            let text = kwin_engine::expand::render_file(
                &plan,
                kwin_modules::recipes::RECIPES,
                &sums,
                template_name(file),
                first_control_plane(&plan),
            )
            .unwrap_or_else(|d| panic!("{file} ({rel} {version:?}): {d}"));
            out.push((file, format!("{rel} {version:?}"), text));
        }
    }
    out
}

#[test]
fn every_template_file_renders_to_what_its_extension_says() {
    let files = template_files();
    assert!(
        files.iter().filter(|f| f.ends_with(".yaml.j2")).count() >= 4,
        "{files:?}"
    );
    let mut checked = 0;
    for (file, context, text) in rendered() {
        let at = format!("{file} ({context})");
        if file.ends_with(".yaml.j2") {
            let mut objects = 0;
            for doc in serde_yaml_ng::Deserializer::from_str(&text) {
                let v = serde_json::Value::deserialize(doc)
                    .unwrap_or_else(|e| panic!("{at}: not YAML: {e}\n{text}"));
                if v.is_null() {
                    continue;
                }
                for key in ["apiVersion", "kind"] {
                    assert!(v[key].is_string(), "{at}: a document without {key}");
                }
                assert!(
                    v["metadata"]["name"].is_string(),
                    "{at}: an object without a name"
                );
                objects += 1;
            }
            assert!(objects > 0, "{at}: no object");
        } else if file.ends_with(".json.j2") {
            serde_json::from_str::<serde_json::Value>(&text)
                .unwrap_or_else(|e| panic!("{at}: not JSON: {e}\n{text}"));
        } else if file.ends_with(".service.j2") {
            let mut sections = 0;
            for line in text.lines().map(str::trim) {
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                if line.starts_with('[') && line.ends_with(']') {
                    sections += 1;
                } else {
                    assert!(
                        line.split_once('=').is_some_and(|(k, _)| !k.is_empty()),
                        "{at}: `{line}` is not Key=Value"
                    );
                }
            }
            assert!(sections >= 2, "{at}: fewer than two unit sections");
        } else if file.ends_with(".ps1.j2") {
            assert!(
                !text.contains("{{") && !text.contains("{%"),
                "{at}: unrendered"
            );
        } else if file.ends_with(".sh.j2") {
            // POSIX sh syntax, as the host's /bin/sh reads it (`sh -n`: parsed, not run).
            let out = std::process::Command::new("sh")
                .arg("-n")
                .arg("-c")
                .arg(&text)
                .output()
                .expect("run sh -n");
            assert!(
                out.status.success(),
                "{at}: not sh: {}\n{text}",
                String::from_utf8_lossy(&out.stderr)
            );
        } else {
            panic!("{at}: no check for this kind of file: name it .yaml.j2, .json.j2, .service.j2, .ps1.j2 or .sh.j2, or add its check here");
        }
        checked += 1;
    }
    assert_eq!(checked, template_files().len() * CONTEXTS.len());
}
