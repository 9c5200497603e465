//! The JSON Schema of the plan file (`kwin schema`), generated from the model.

/// Pretty-printed JSON Schema of [`super::PlanFile`].
pub fn schema_json() -> String {
    let schema = schemars::schema_for!(super::PlanFile);
    serde_json::to_string_pretty(&schema).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}
