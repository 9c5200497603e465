//! The front half of every command: load → validate → expand → graph, with every diagnostic
//! collected (warnings are returned alongside the result, errors stop before expansion).

use kwin_engine::diag::Diagnostics;
use kwin_engine::graph::TaskGraph;
use kwin_engine::plan::LoadedPlan;
use std::path::Path;

/// A plan ready to run, and the warnings met on the way.
pub struct Prepared {
    pub plan: LoadedPlan,
    pub graph: TaskGraph,
    pub warnings: Diagnostics,
}

/// Load, validate (knowing the recipes' step names), expand and build the graph of `path`.
/// Errors: every diagnostic found, warnings included, sorted.
pub fn prepare(path: &Path) -> Result<Prepared, Diagnostics> {
    let registry = kwin_modules::Builtin;
    let steps = kwin_modules::recipes::step_names();
    let diags = kwin_engine::plan::check(path, &registry, &steps);
    if diags.has_errors() {
        return Err(diags);
    }
    let plan = kwin_engine::plan::load(path)?;
    let tasks =
        kwin_engine::expand::expand(&plan, kwin_modules::recipes::RECIPES).map_err(|mut d| {
            d.extend(diags.clone());
            d.sorted()
        })?;
    let graph = TaskGraph::build(tasks).map_err(|mut d| {
        d.extend(diags.clone());
        d.sorted()
    })?;
    Ok(Prepared {
        plan,
        graph,
        warnings: diags,
    })
}
