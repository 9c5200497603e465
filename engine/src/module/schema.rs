//! The plan's JSON Schema as `kwin schema` prints it: the plan file's schema
//! (`plan::schema`, what loading checks) with `[[tasks]]` entries told apart by `module`, each
//! module's `params` described by its own params schema (from the registry), so an editor
//! completes a task's params and flags a misspelt one.
//!
//! `$defs.UserTask` becomes `{ "oneOf": [...] }`, one branch per module: the task's object
//! with `module` a `const` (described by the module's one-line doc) and `params` a `$ref` to
//! `$defs["params.<module>"]`. A module's own definitions are moved to `$defs["<module>.<Def>"]`
//! and its `$ref`s rewritten, so no two modules' names meet.

use super::Registry;
use serde_json::{json, Map, Value};

/// The plan schema with a branch per module of `registry` (the base schema when the
/// registry describes none).
pub fn plan_schema(registry: &dyn Registry) -> Value {
    let mut root = crate::plan::schema::schema_value().clone();
    let modules = registry.modules();
    let Some(defs) = root.get_mut("$defs").and_then(Value::as_object_mut) else {
        return root;
    };
    let Some(task) = defs.get("UserTask").cloned() else {
        return root;
    };
    if modules.is_empty() {
        return root;
    }
    let mut variants = Vec::new();
    for m in &modules {
        let mut params = m.params.clone();
        if let Some(o) = params.as_object_mut() {
            o.remove("$schema");
            if let Some(Value::Object(own)) = o.remove("$defs") {
                for (name, mut d) in own {
                    rewrite_refs(&mut d, m.name);
                    defs.insert(format!("{}.{name}", m.name), d);
                }
            }
        }
        rewrite_refs(&mut params, m.name);
        defs.insert(format!("params.{}", m.name), params);
        let mut v = task.clone();
        if let Some(props) = v.get_mut("properties").and_then(Value::as_object_mut) {
            props.insert(
                "module".into(),
                json!({ "const": m.name, "description": m.doc }),
            );
            let described = props
                .get("params")
                .and_then(|p| p.get("description"))
                .cloned()
                .unwrap_or(Value::Null);
            let mut p = Map::new();
            p.insert(
                "$ref".into(),
                Value::String(format!("#/$defs/params.{}", m.name)),
            );
            p.insert("default".into(), json!({}));
            if !described.is_null() {
                p.insert("description".into(), described);
            }
            props.insert("params".into(), Value::Object(p));
        }
        if let Some(o) = v.as_object_mut() {
            o.insert(
                "description".into(),
                Value::String(format!("`[[tasks]]` with module `{}`: {}", m.name, m.doc)),
            );
        }
        variants.push(v);
    }
    let mut user_task = Map::new();
    if let Some(d) = task.get("description") {
        user_task.insert("description".into(), d.clone());
    }
    user_task.insert("oneOf".into(), Value::Array(variants));
    defs.insert("UserTask".into(), Value::Object(user_task));
    root
}

/// [`plan_schema`], pretty-printed.
pub fn plan_schema_json(registry: &dyn Registry) -> String {
    serde_json::to_string_pretty(&plan_schema(registry))
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// `#/$defs/X` → `#/$defs/<module>.X` everywhere in `v`.
fn rewrite_refs(v: &mut Value, module: &str) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(r)) = o.get_mut("$ref") {
                if let Some(name) = r.strip_prefix("#/$defs/") {
                    *r = format!("#/$defs/{module}.{name}");
                }
            }
            o.values_mut().for_each(|x| rewrite_refs(x, module));
        }
        Value::Array(a) => a.iter_mut().for_each(|x| rewrite_refs(x, module)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::module::{Module, ModuleInfo, ParamError};
    use crate::shell::Shell;

    struct One;

    impl Registry for One {
        fn names(&self) -> Vec<&'static str> {
            vec!["file"]
        }
        fn modules(&self) -> Vec<ModuleInfo> {
            vec![ModuleInfo {
                name: "file",
                doc: "a file",
                shells: vec![Shell::Posix],
                params: json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "type": "object",
                    "properties": { "path": { "type": "string" }, "state": { "$ref": "#/$defs/State" } },
                    "required": ["path"],
                    "additionalProperties": false,
                    "$defs": { "State": { "enum": ["present", "absent"] } }
                }),
            }]
        }
        fn build(
            &self,
            _name: &str,
            _shell: Shell,
            _params: &serde_json::Value,
        ) -> Result<Box<dyn Module>, ParamError> {
            Err(ParamError::new("not here"))
        }
    }

    #[test]
    fn a_branch_per_module_with_its_own_definitions() {
        let s = plan_schema(&One);
        let branches = s["$defs"]["UserTask"]["oneOf"].as_array().expect("oneOf");
        assert_eq!(branches.len(), 1);
        assert_eq!(branches[0]["properties"]["module"]["const"], "file");
        assert_eq!(
            branches[0]["properties"]["params"]["$ref"],
            "#/$defs/params.file"
        );
        assert_eq!(
            s["$defs"]["params.file"]["properties"]["state"]["$ref"],
            "#/$defs/file.State"
        );
        assert!(s["$defs"]["file.State"].is_object());
        assert!(s["$defs"]["params.file"].get("$schema").is_none());
        // The loader's schema is untouched.
        assert!(crate::plan::schema::schema_value()["$defs"]["UserTask"]["properties"].is_object());
    }
}
