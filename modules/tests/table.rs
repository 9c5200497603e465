//! The family tables: modules that exist for both shells have one params type, and each
//! shell's module refuses, at that parameter, what only the other shell's module reads.

use kwin_engine::module::Registry;
use kwin_engine::transport::Shell;
use kwin_modules::Builtin;
use serde_json::Value;
use std::collections::BTreeMap;

/// A name in two rows has one params schema: `kwin schema` can describe a task's params
/// without knowing the shell of its hosts.
#[test]
fn both_shell_modules_share_params() {
    let mut by_name: BTreeMap<&str, Vec<(&[Shell], Value)>> = BTreeMap::new();
    for (_, r) in kwin_modules::rows() {
        by_name
            .entry(r.name)
            .or_default()
            .push((r.shells, (r.params)().to_value()));
    }
    let mut both = Vec::new();
    for (name, rows) in &by_name {
        let shells: Vec<Shell> = rows.iter().flat_map(|(s, _)| s.iter().copied()).collect();
        if shells.contains(&Shell::Posix) && shells.contains(&Shell::PowerShell) {
            both.push(*name);
        }
        for (_, schema) in &rows[1..] {
            assert_eq!(
                schema, &rows[0].1,
                "`{name}` has a different params schema per shell"
            );
        }
    }
    assert_eq!(
        both,
        [
            "archive",
            "command",
            "directory",
            "download",
            "file",
            "kubeadm_join",
            "kubeadm_upgrade",
            "reboot",
            "registry_mirrors",
            "service"
        ]
    );
}

/// A value that deserializes as the parameter's type (for refusing it by name, any will do).
fn sample_value(schema: &Value, defs: &Value) -> Value {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or("");
        return sample_value(&defs[name], defs);
    }
    if let Some(b) = schema.get("anyOf").or_else(|| schema.get("oneOf")) {
        let first = b
            .as_array()
            .and_then(|a| a.iter().find(|s| s.get("type") != Some(&"null".into())))
            .cloned()
            .unwrap_or(Value::Null);
        return sample_value(&first, defs);
    }
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array) {
        return e.first().cloned().unwrap_or(Value::Null);
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    match types.iter().find(|t| **t != "null").copied() {
        Some("string") => "x".into(),
        Some("boolean") => true.into(),
        Some("integer" | "number") => 1.into(),
        Some("array") => Value::Array(vec![]),
        Some("object") => Value::Object(Default::default()),
        _ => Value::Null,
    }
}

/// Every parameter marked for one shell (`x-kwin-shell`) is refused by the other shell's
/// module at that parameter, whatever else the params say.
#[test]
fn a_parameter_of_the_other_shell_is_refused_by_name() {
    let mut checked = 0;
    for name in Builtin.names() {
        for (shell, mine) in [(Shell::Posix, "linux"), (Shell::PowerShell, "windows")] {
            let Some(schema) = Builtin.params_schema(name, shell) else {
                continue;
            };
            let defs = schema.get("$defs").cloned().unwrap_or(Value::Null);
            let props = schema["properties"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            for (key, p) in props {
                let Some(only) = p.get("x-kwin-shell").and_then(Value::as_str) else {
                    continue;
                };
                assert!(
                    matches!(only, "linux" | "windows"),
                    "{name}.{key}: x-kwin-shell = {only}"
                );
                let doc = p["description"].as_str().unwrap_or("").replace('\n', " ");
                let tag = if only == "linux" {
                    "Linux only"
                } else {
                    "Windows only"
                };
                assert!(
                    doc.contains(tag),
                    "{name}.{key}: the description lacks `{tag}`: {doc}"
                );
                if only == mine {
                    continue;
                }
                // The required parameters (any value of their type) and this one.
                let mut params = serde_json::Map::new();
                for r in schema["required"].as_array().into_iter().flatten() {
                    let r = r.as_str().unwrap_or_default();
                    params.insert(r.to_string(), sample_value(&schema["properties"][r], &defs));
                }
                params.insert(key.clone(), sample_value(&p, &defs));
                let e = Builtin
                    .build(name, shell, &Value::Object(params))
                    .expect_err("refused");
                assert_eq!(
                    e.path.as_deref(),
                    Some(key.as_str()),
                    "{name} ({shell:?}) `{key}`: {e}"
                );
                assert!(e.message.contains("only parameter of"), "{e}");
                checked += 1;
            }
        }
    }
    assert!(checked >= 20, "only {checked} parameters checked");
}

/// The build phase walks a task's rendered params against its module's schema before the
/// module deserializes them (`module::build`): on every case's params, the walk finds a
/// problem exactly when deserializing fails, so no refusal goes unlocated and no params
/// pass the walk only to fail as "a bug in kwin".
#[test]
fn schema_and_serde_agree_on_every_case() {
    use kwin_engine::plan::spans::PlanPath;
    use kwin_engine::plan::structure::check_value;
    use kwin_testkit::cases::{case_files, case_shell, read_case, Suite};
    let mut disagree = Vec::new();
    let mut checked = 0;
    for suite in Suite::all() {
        for f in case_files(&suite.dir) {
            let case = read_case(&f.path).unwrap_or_else(|e| panic!("{e}"));
            let shell = case_shell(&case, suite.shell);
            let Some(schema) = Builtin.params_schema(&f.module, shell) else {
                continue;
            };
            let params = if case.params.is_null() {
                serde_json::json!({})
            } else {
                case.params.clone()
            };
            let findings = check_value(&params, &schema, &PlanPath::root());
            let serde_ok = match Builtin.build(&f.module, shell, &params) {
                Ok(_) => true,
                Err(e) => !e.shape,
            };
            checked += 1;
            if findings.is_empty() != serde_ok {
                let found: Vec<String> = findings
                    .iter()
                    .map(|x| format!("{}: {}", x.path, x.diag.summary))
                    .collect();
                disagree.push(format!(
                    "{}: walk {found:?}, deserializes: {serde_ok}",
                    f.path.display()
                ));
            }
        }
    }
    assert!(checked > 400, "{checked} cases");
    assert!(disagree.is_empty(), "{}", disagree.join("\n"));
}

/// The check above can fail: params the walk refuses and serde takes, or the reverse, are
/// told apart.
#[test]
fn the_agreement_check_sees_both_ways() {
    use kwin_engine::plan::spans::PlanPath;
    use kwin_engine::plan::structure::check_value;
    let schema = Builtin.params_schema("file", Shell::Posix).expect("file");
    let bad = serde_json::json!({ "path": "/x", "contents": "y" });
    assert!(!check_value(&bad, &schema, &PlanPath::root()).is_empty());
    let e = Builtin
        .build("file", Shell::Posix, &bad)
        .expect_err("refused");
    assert!(e.shape, "{e:?}");
    let good = serde_json::json!({ "path": "/x", "content": "y", "mode": 644 });
    assert!(check_value(&good, &schema, &PlanPath::root()).is_empty());
    let semantic = serde_json::json!({ "path": "x" });
    assert!(
        !Builtin
            .build("file", Shell::Posix, &semantic)
            .expect_err("relative")
            .shape
    );
}
