//! `kwin validate` and `kwin schema`.

use crate::args::{request, Recipes, VarArgs};
use crate::output::Output;
use kwin_engine::event::Outcome;
use kwin_engine::pipeline::ChecksumMode;
use std::path::Path;

/// The whole front half (validation, recipe expansion with its asserts and templates, the
/// graph); every diagnostic printed. Exit 1 on any error.
pub fn validate(path: &Path, vars: &VarArgs, out: &Output) -> anyhow::Result<Outcome> {
    let req = request(path, Recipes::Build, ChecksumMode::Known, false).with_vars(vars.map());
    let diags = match crate::drive::prepare(&req)? {
        Ok(p) => p.warnings,
        Err(d) => d,
    };
    out.diagnostics(&diags);
    let errors = diags.errors().count();
    out.validate_summary(path, errors, diags.warnings());
    Ok(if errors > 0 {
        Outcome::Failed
    } else {
        Outcome::Success
    })
}

/// The plan file's JSON Schema, or with `events` the schema of one line of `--output json`.
pub fn schema(events: bool, out: &Output) -> anyhow::Result<Outcome> {
    if events {
        out.text(&kwin_engine::event::schema_json());
    } else {
        out.text(&format!(
            "{}\n",
            kwin_engine::module::schema::plan_schema_json(&kwin_modules::Builtin)
        ));
    }
    Ok(Outcome::Success)
}
