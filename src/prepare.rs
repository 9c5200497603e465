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
    prepare_with(
        path,
        kwin_modules::recipes::RECIPES,
        UserTasks::Include,
        false,
    )
}

/// Whether the plan's own `[[tasks]]` become tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserTasks {
    Include,
    /// `kwin reset`: only its recipes run.
    Leave,
}

/// [`prepare`] with another set of recipes (`kwin reset`'s), with or without the user's tasks,
/// and with `no_verify` (`apply --no-verify`) expanding as if `cluster.verify = false`. The
/// plan is validated exactly as for `apply`.
pub fn prepare_with(
    path: &Path,
    recipes: &[(&str, &str)],
    user_tasks: UserTasks,
    no_verify: bool,
) -> Result<Prepared, Diagnostics> {
    let registry = kwin_modules::Builtin;
    let steps = kwin_modules::recipes::step_names();
    let diags = kwin_engine::plan::check(path, &registry, &steps);
    if diags.has_errors() {
        return Err(diags);
    }
    let plan = kwin_engine::plan::load(path)?;
    let mut expanded = plan.clone();
    if user_tasks == UserTasks::Leave {
        expanded.file.tasks.clear();
    }
    if no_verify {
        if let Some(c) = expanded.file.cluster.as_mut() {
            c.verify = Some(false);
        }
    }
    let tasks = kwin_engine::expand::expand(&expanded, recipes).map_err(|mut d| {
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
