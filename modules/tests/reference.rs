//! The module reference (`kwin modules`, `kwin doc`, docs/modules.md): complete, its examples
//! valid plan tasks, and the generated docs/modules.md and docs/plan.md's module list in step
//! with the tables (`KWIN_BLESS=1` regenerates both).

use kwin_engine::module::Registry;
use kwin_modules::reference::{self, Os};
use kwin_modules::table::Family;
use kwin_modules::Builtin;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_path_buf()
}

/// docs/modules.md is what the reference renders now. Regenerate with
/// `KWIN_BLESS=1 cargo test -p kwin-modules --test reference`.
#[test]
fn docs_modules_md_is_up_to_date() {
    let path = workspace().join("docs/modules.md");
    let want = reference::markdown() + "\n";
    if std::env::var_os("KWIN_BLESS").is_some() {
        std::fs::create_dir_all(workspace().join("docs")).expect("docs/");
        std::fs::write(&path, &want).expect("write docs/modules.md");
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    if have != want {
        let first = have
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| have.lines().count().min(want.lines().count()));
        panic!(
            "docs/modules.md is out of date (first difference at line {}); regenerate it: \
             KWIN_BLESS=1 cargo test -p kwin-modules --test reference",
            first + 1
        );
    }
}

/// Every module of the tables is in the reference, with its OSes, a line, a description for
/// every parameter (the field's doc comment) and an example for every OS it runs on.
#[test]
fn every_module_is_described_with_an_example_per_os() {
    let all = reference::reference();
    let names: BTreeSet<&str> = all.iter().map(|m| m.name).collect();
    assert_eq!(names, Builtin.names().into_iter().collect::<BTreeSet<_>>());
    let mut missing = Vec::new();
    for m in &all {
        for (os, line) in &m.lines {
            if line.trim().is_empty() {
                missing.push(format!("{} on {}: no one-line doc", m.name, os.name()));
            }
        }
        for p in &m.params {
            if p.description.is_empty() {
                missing.push(format!(
                    "{}.{}: no description (a doc comment on the field)",
                    m.name, p.name
                ));
            }
            if p.ty == "any" {
                missing.push(format!("{}.{}: type not shown", m.name, p.name));
            }
        }
        // An example per OS the module runs on, unless it is a Kubernetes module of one
        // control plane (its one example says which host).
        let example_oses: BTreeSet<&str> = m
            .examples
            .iter()
            .filter_map(|e| {
                if e.contains("os = \"windows\"") {
                    Some("Windows")
                } else if e.contains("os = \"linux\"") {
                    Some("Linux")
                } else {
                    None
                }
            })
            .collect();
        if m.examples.is_empty() {
            missing.push(format!(
                "{}: no example in modules/src/examples.toml",
                m.name
            ));
        } else if m.family != Family::Kube {
            for os in m.oses() {
                if !example_oses.contains(os.name()) {
                    missing.push(format!(
                        "{}: no example with `on = {{ os = \"{}\" }}`",
                        m.name,
                        os.name().to_lowercase()
                    ));
                }
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// Every entry of examples.toml names a module, and together they are one plan's tasks that
/// validate, expand, graph and build (each module from its params, for the shell of every
/// host the entry selects) without a diagnostic.
#[test]
fn every_example_validates_as_a_plan_task() {
    let examples = reference::examples();
    assert!(examples.len() >= Builtin.names().len());
    for (module, text) in &examples {
        assert!(!module.is_empty(), "an example without `module`:\n{text}");
    }
    // The examples first, so a diagnostic's line is its line in examples.toml.
    let plan_text = format!(
        r#"{}

[[hosts]]
name = "cp1"
address = "192.168.56.10"
os = "linux"
role = "control-plane"
user = "root"
password_env = "KWIN_EXAMPLE_PASSWORD"

[[hosts]]
name = "lw1"
address = "192.168.56.11"
os = "linux"
role = "worker"
user = "root"
password_env = "KWIN_EXAMPLE_PASSWORD"

[[hosts]]
name = "ww1"
address = "192.168.56.21"
os = "windows"
role = "worker"
user = "Administrator"
password_env = "KWIN_EXAMPLE_PASSWORD"
"#,
        reference::EXAMPLES
    );
    let path = workspace().join("modules/src/examples.toml");
    let modules = Builtin.names();
    let steps = kwin_modules::recipes::step_names();
    let known = kwin_engine::plan::validate::Names {
        modules: &modules,
        recipe_steps: &steps,
    };
    let (plan, warnings) =
        kwin_engine::plan::validate::load_and_validate_str(&path, &plan_text, known)
            .into_result()
            .unwrap_or_else(|d| panic!("the examples do not validate:\n{d}"));
    assert!(warnings.0.is_empty(), "warnings:\n{warnings}");
    let sums = kwin_engine::checksums::Checksums::new(Default::default(), Default::default());
    let tasks = kwin_engine::expand::expand_with(&plan, kwin_modules::recipes::RECIPES, &sums)
        .unwrap_or_else(|d| panic!("the examples do not expand:\n{d}"));
    // Every example became a task on some host.
    let task_names: BTreeSet<String> = tasks.iter().map(|t| t.id.name.clone()).collect();
    for (module, text) in &examples {
        let name = text
            .lines()
            .find_map(|l| l.strip_prefix("name = "))
            .map(|n| n.trim_matches('"').to_string())
            .unwrap_or_default();
        assert!(
            task_names.contains(&name),
            "example `{name}` ({module}) runs on no host"
        );
    }
    let graph = kwin_engine::graph::TaskGraph::build(tasks)
        .unwrap_or_else(|d| panic!("the examples do not form a graph:\n{d}"));
    kwin_engine::module::build::build_all(&plan, &graph, &Builtin)
        .unwrap_or_else(|d| panic!("a module refuses its example's params:\n{d}"));
}

/// A broken example is caught: the check above is not vacuous.
#[test]
fn a_refused_example_fails_the_build() {
    let row = kwin_modules::row_for("file", kwin_engine::transport::Shell::Posix).expect("file");
    let bad = serde_json::json!({ "path": "relative/motd" });
    assert!((row.build)(&bad, kwin_engine::transport::Shell::Posix).is_err());
}

/// `kwin doc` finds modules by name and suggests the closest for a typo.
#[test]
fn unknown_module_gets_did_you_mean() {
    assert_eq!(
        reference::find("line_in_file").map(|m| m.name),
        Ok("line_in_file")
    );
    let err = reference::find("line_infile").expect_err("unknown");
    assert!(err.contains("did you mean `line_in_file`"), "{err}");
    let err = reference::find("zzzzzz").expect_err("unknown");
    assert!(!err.contains("did you mean"), "{err}");
}

/// `kwin modules` lists, per OS, exactly the modules the tables build for that OS.
#[test]
fn list_is_per_os_from_the_tables() {
    let text = reference::list_text();
    for (os, shell, header) in [
        (
            Os::Linux,
            kwin_engine::transport::Shell::Posix,
            "Linux hosts:",
        ),
        (
            Os::Windows,
            kwin_engine::transport::Shell::PowerShell,
            "Windows hosts:",
        ),
    ] {
        let section: BTreeSet<&str> = text
            .split(header)
            .nth(1)
            .expect(header)
            .split("\n\n")
            .next()
            .unwrap_or("")
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        let want: BTreeSet<&str> = kwin_modules::rows()
            .filter(|(_, r)| r.shells.contains(&shell))
            .map(|(_, r)| r.name)
            .collect();
        assert_eq!(section, want, "{}", os.name());
    }
}

/// The plan file's page (docs/plan.md, `[[tasks]]`) lists the modules of each table, as the
/// reference renders the list now; `KWIN_BLESS=1` rewrites it (with docs/modules.md).
#[test]
fn plan_page_module_list_is_up_to_date() {
    let path = workspace().join("docs/plan.md");
    let have = std::fs::read_to_string(&path).expect("docs/plan.md");
    let want = reference::plan_page_with_list(&have, kwin_modules::rows())
        .expect("docs/plan.md: <!-- modules:begin --> … <!-- modules:end -->");
    if std::env::var_os("KWIN_BLESS").is_some() {
        std::fs::write(&path, &want).expect("write docs/plan.md");
        return;
    }
    assert!(
        have == want,
        "docs/plan.md's module list is not the tables' (modules/src/registry.rs); regenerate it: \
         KWIN_BLESS=1 cargo test -p kwin-modules --test reference"
    );
}

/// The list is every table's modules, by family: a module of two families is in both.
#[test]
fn the_plan_page_list_names_each_familys_modules() {
    let list = reference::plan_list_of(kwin_modules::rows());
    for family in [Family::Linux, Family::Windows, Family::Kube] {
        let label = format!("{} ", reference::family_name(family));
        let part = list
            .split(';')
            .find_map(|p| p.trim().strip_prefix(label.as_str()))
            .unwrap_or_else(|| panic!("no `{label}` part in:\n{list}"));
        let named: BTreeSet<&str> = part.split('`').skip(1).step_by(2).collect();
        let want: BTreeSet<&str> = kwin_modules::rows()
            .filter(|(f, _)| *f == family)
            .map(|(_, r)| r.name)
            .collect();
        assert_eq!(named, want, "{label}modules");
    }
    assert!(list.lines().all(|l| l.len() <= 96), "{list}");
}
