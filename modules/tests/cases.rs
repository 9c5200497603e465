//! The data-driven module cases of every family, through the one runner
//! (`kwin_testkit::cases`: the format is documented there), and the rules that keep the
//! family tables and the cases together.

use kwin_engine::module::Registry;
use kwin_engine::transport::Shell;
use kwin_modules::table::Family;
use kwin_modules::Builtin;
use kwin_testkit::cases::{case_files, read_case, run_case, Case, Produced, Suite};
use std::collections::BTreeSet;
use std::path::Path;

#[test]
fn linux_cases() {
    Suite::linux().check(&Builtin);
}

#[test]
fn windows_cases() {
    Suite::windows().check(&Builtin);
}

#[test]
fn kube_cases() {
    Suite::kube().check(&Builtin);
}

/// The suite a family's cases live in.
fn suite_of(f: Family) -> Suite {
    match f {
        Family::Linux => Suite::linux(),
        Family::Windows => Suite::windows(),
        Family::Kube => Suite::kube(),
    }
}

/// Every row of every table has cases (at least 5 for a Linux module), and every case
/// directory is a module of its family.
#[test]
fn every_module_has_cases() {
    let mut missing = Vec::new();
    for (family, row) in kwin_modules::rows() {
        let n = case_files(&suite_of(family).dir)
            .iter()
            .filter(|c| c.module == row.name)
            .count();
        let least = if family == Family::Linux { 5 } else { 1 };
        if n < least {
            missing.push(format!(
                "{family:?} module `{}` has {n} cases (at least {least})",
                row.name
            ));
        }
    }
    for family in [Family::Linux, Family::Windows, Family::Kube] {
        let names: BTreeSet<&str> = kwin_modules::rows()
            .filter(|(f, _)| *f == family)
            .map(|(_, r)| r.name)
            .collect();
        for c in case_files(&suite_of(family).dir) {
            if !names.contains(c.module.as_str()) {
                missing.push(format!(
                    "{}: cases for `{}`, which is no {family:?} module",
                    c.path.display(),
                    c.module
                ));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// Every fact a case answers is of a kind some module's row samples, so the parser garbage
/// tests and the fuzz target reach every parser the cases reach.
#[test]
fn cases_read_only_sampled_facts() {
    let kinds: BTreeSet<String> = kwin_modules::fact_samples()
        .into_iter()
        .map(|s| s.kind)
        .collect();
    let mut unsampled = BTreeSet::new();
    for suite in Suite::all() {
        for f in case_files(&suite.dir) {
            let case = read_case(&f.path).unwrap_or_else(|e| panic!("{e}"));
            for key in case.facts.keys() {
                let kind = key.split(':').next().unwrap_or_default();
                if !kinds.contains(kind) {
                    unsampled.insert(format!("{kind} ({})", f.path.display()));
                }
            }
        }
    }
    assert!(
        unsampled.is_empty(),
        "fact kinds no row samples (add them to the module's fact_samples):\n{}",
        unsampled.into_iter().collect::<Vec<_>>().join("\n")
    );
}

fn run(module: &str, case: serde_json::Value) -> Result<(), String> {
    let case: Case = serde_json::from_value(case).map_err(|e| e.to_string())?;
    run_case(
        &Builtin,
        module,
        Shell::Posix,
        &case,
        Path::new("inline"),
        &mut Produced::default(),
    )
}

/// The runner itself rejects a case whose facts the module did not ask for, a missing fact,
/// a wrong action, a no-op that has a warning, and an unknown key.
#[test]
fn harness_rejects_what_it_must() {
    let facts = serde_json::json!({
        "file.content-unless": { "stdout": "type=absent\n" },
        "route": { "stdout": "type=route\nreached=L2V0Yw==\n" }
    });
    let ok = serde_json::json!({
        "params": { "path": "/etc/motd", "content": "hi\n" },
        "facts": facts,
        "expect": { "change": { "action": "create" } }
    });
    run("file", ok.clone()).expect("the base case passes");
    let mut extra = ok.clone();
    extra["facts"]["file.meta:/etc/other"] = serde_json::json!({ "stdout": "type=absent\n" });
    let e = run("file", extra).expect_err("an unrequested fact");
    assert!(e.contains("fact keys differ"), "{e}");
    let mut lacking = ok.clone();
    lacking["facts"] = serde_json::json!({});
    let e = run("file", lacking).expect_err("a missing fact");
    assert!(e.contains("fact keys differ"), "{e}");
    let mut wrong = ok.clone();
    wrong["expect"]["change"]["action"] = "update".into();
    assert!(run("file", wrong).is_err(), "a wrong action must fail");
    let mut unknown = ok.clone();
    unknown["expect"]["change"]["steps_contains"] = serde_json::json!(["x"]);
    assert!(run("file", unknown).is_err(), "an unknown key must fail");
    let mut noop = ok;
    noop["expect"] = serde_json::json!({ "noop": "" });
    assert!(run("file", noop).is_err(), "a change is no no-op");
}

/// Every Linux module documents an example task (a ```toml block in its `//!` header), and
/// the example builds: the docs cannot drift from the params.
#[test]
fn documented_examples_build() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/linux");
    for row in kwin_modules::registry::LINUX {
        let name = row.name;
        let path = dir.join(format!("{name}.rs"));
        let src = std::fs::read_to_string(&path).expect("module source");
        let doc: Vec<&str> = src
            .lines()
            .filter_map(|l| l.strip_prefix("//!"))
            .map(|l| l.strip_prefix(' ').unwrap_or(l))
            .collect();
        let start = doc
            .iter()
            .position(|l| *l == "```toml")
            .unwrap_or_else(|| panic!("{name}: no ```toml example in the module docs"));
        let len = doc[start + 1..]
            .iter()
            .position(|l| *l == "```")
            .unwrap_or_else(|| panic!("{name}: unterminated example"));
        let text = doc[start + 1..start + 1 + len].join("\n");
        let plan: toml::Value = toml::from_str(&text)
            .unwrap_or_else(|e| panic!("{name}: example is not TOML: {e}\n{text}"));
        let tasks = plan
            .get("tasks")
            .and_then(|t| t.as_array())
            .unwrap_or_else(|| panic!("{name}: example has no [[tasks]]"));
        for task in tasks {
            assert_eq!(
                task.get("module").and_then(|m| m.as_str()),
                Some(name),
                "{name}: example uses another module"
            );
            let params = serde_json::to_value(
                task.get("params")
                    .cloned()
                    .unwrap_or(toml::Value::Table(Default::default())),
            )
            .expect("params as JSON");
            if let Err(e) = Builtin.build(name, Shell::Posix, &params) {
                panic!("{name}: the documented example does not build: {e}");
            }
        }
        assert!(
            src.contains("//! | name | type | default | meaning |"),
            "{name}: no parameter table in the module docs"
        );
    }
}
