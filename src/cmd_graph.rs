//! `kwin graph`: load, validate, expand and print the task graph.

use crate::cmd_validate::print_diagnostics;
use crate::{GraphFormat, OutputFormat};
use kwin_engine::diag::Diagnostics;
use kwin_engine::graph::TaskGraph;
use std::path::Path;
use std::process::ExitCode;

/// Print the graph of `path` as DOT or sorted text. Diagnostics go to stderr; any error exits 1.
pub fn graph(path: &Path, format: GraphFormat) -> anyhow::Result<ExitCode> {
    let fail = |d: Diagnostics| {
        print_diagnostics(&d.sorted(), OutputFormat::Human);
        Ok(ExitCode::from(1))
    };
    let plan = match kwin_engine::plan::load(path) {
        Ok(p) => p,
        Err(d) => return fail(d),
    };
    let diags = kwin_engine::plan::validate::validate(&plan, &kwin_modules::Builtin);
    if diags.has_errors() {
        return fail(diags);
    }
    print_diagnostics(&diags.sorted(), OutputFormat::Human);
    let tasks = match kwin_engine::expand::expand(&plan, kwin_modules::recipes::RECIPES) {
        Ok(t) => t,
        Err(d) => return fail(d),
    };
    let graph = match TaskGraph::build(tasks) {
        Ok(g) => g,
        Err(d) => return fail(d),
    };
    match format {
        GraphFormat::Dot => print!("{}", graph.to_dot()),
        GraphFormat::Text => print!("{}", graph.to_text()),
    }
    Ok(ExitCode::SUCCESS)
}
