//! The JSON Schema of the plan file (`kwin schema`), generated from the model.
//!
//! The same schema drives the structural pass of loading (`structure.rs`), so what editors
//! are told and what `kwin validate` checks cannot drift apart.

use serde_json::Value;
use std::sync::OnceLock;

/// The JSON Schema of [`super::PlanFile`] as a value, with the `default`s of table-valued
/// keys stripped of unset (`null`) entries.
pub fn schema_value() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let schema = schemars::schema_for!(super::PlanFile);
        let mut v = serde_json::to_value(&schema).unwrap_or(Value::Null);
        tidy_defaults(&mut v);
        // `#[serde(flatten)]` of the connection keys into Host replaces Host's description.
        if let Some(host) = v.pointer_mut("/$defs/Host/description") {
            *host = Value::String(
                "`[[hosts]]`: one machine, with connection overrides (the keys of `[defaults.<os>]`)."
                    .into(),
            );
        }
        v
    })
}

/// Pretty-printed JSON Schema of [`super::PlanFile`].
pub fn schema_json() -> String {
    serde_json::to_string_pretty(schema_value())
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// Serializing a default struct gives every unset option as `null`, which is noise for
/// editors (and `null` is not a TOML value): drop those entries.
fn tidy_defaults(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if let Some(d) = map.get_mut("default") {
                strip_nulls(d);
            }
            for (_, child) in map.iter_mut() {
                tidy_defaults(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(tidy_defaults),
        _ => {}
    }
}

fn strip_nulls(v: &mut Value) {
    if let Value::Object(map) = v {
        map.retain(|_, x| !x.is_null());
        map.values_mut().for_each(strip_nulls);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_is_a_json_object_with_definitions() {
        let text = schema_json();
        let v: Value = serde_json::from_str(&text).expect("schema is JSON");
        assert_eq!(v["type"], "object");
        assert_eq!(v["additionalProperties"], false);
        assert!(v["$defs"]["Host"]["properties"]["address"].is_object());
        // The refused `password` key is not offered to editors.
        assert!(v["$defs"]["Connection"]["properties"]
            .get("password")
            .is_none());
        assert!(!text.contains("null,"), "defaults keep no null entries");
    }
}
