//! `kwin graph`: the task graph of a prepared plan, as DOT or sorted text.

use crate::args::{request, GraphFormat, Recipes, VarArgs};
use crate::output::Output;
use kwin_engine::event::Outcome;
use kwin_engine::pipeline::ChecksumMode;
use std::path::Path;

/// Diagnostics go to stderr; any error exits 1.
pub fn graph(
    path: &Path,
    format: GraphFormat,
    vars: &VarArgs,
    out: &Output,
) -> anyhow::Result<Outcome> {
    let req = request(path, Recipes::Build, ChecksumMode::Known, false).with_vars(vars.map());
    match crate::drive::prepare(&req)? {
        Ok(p) => {
            out.diagnostics(&p.warnings);
            out.text(&match format {
                GraphFormat::Dot => p.graph.to_dot(),
                GraphFormat::Text => p.graph.to_text(),
            });
            Ok(Outcome::Success)
        }
        Err(d) => {
            out.diagnostics(&d);
            Ok(Outcome::Failed)
        }
    }
}
