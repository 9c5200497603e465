//! Validation: every rule the domain imposes on a loaded plan, all reported at once.
//!
//! Rules live by area: `validate/hosts.rs` (names, addresses, connections, labels, taints),
//! `validate/cluster.rs` (roles, address plan, pod network, runtime, versions, settings),
//! `validate/matrix.rs` (component versions and Windows builds against the support matrix),
//! `validate/tasks.rs` (the user's `[[tasks]]`: names, selectors, module names, `after` and
//! `inputs`), `validate/files.rs` (the files the plan names on this machine exist and can be
//! opened). A plan without hosts is an error (`empty-plan`). A task's params are the build phase's (`module::build`): they are checked
//! once expansion rendered them, so validation builds no module.
//! Each rule reports at the plan line of the value it is about; the diagnostic codes are
//! listed in docs/diagnostics.md.
//!
//! Windows limits (seed 003) are warned about only where the plan itself says something
//! that runs into them (e.g. a Windows Server 2022 build label on an overlay network), so
//! the example plans validate clean; the general notes belong to `kwin plan`.

mod cluster;
mod files;
mod hosts;
mod matrix;
mod pass;
mod tasks;

use super::load::{self, Pruned};
use super::loaded::LoadedPlan;
use crate::diag::{Diagnostic, Diagnostics};
use pass::V;
use std::path::Path;

/// What validation checks names against: the modules a task may use and the recipe step
/// names a reference may name besides the plan's tasks. Plain data, so validation needs no
/// module registry.
#[derive(Debug, Clone, Copy, Default)]
pub struct Names<'a> {
    pub modules: &'a [&'a str],
    pub recipe_steps: &'a [String],
}

/// Check `plan`; errors and warnings, each pointing at the plan line.
pub fn validate(plan: &LoadedPlan, known: Names<'_>) -> Diagnostics {
    validate_with(plan, known, &Pruned::default())
}

/// [`validate`], knowing which parts of the plan were cut out while loading (their absence
/// is not reported again).
pub fn validate_with(plan: &LoadedPlan, known: Names<'_>, pruned: &Pruned) -> Diagnostics {
    let mut v = V {
        plan,
        pruned,
        out: Diagnostics::default(),
    };
    empty(&mut v);
    hosts::check(&mut v);
    files::check(&mut v);
    cluster::check(&mut v);
    matrix::check(&mut v);
    tasks::check(&mut v, known.modules, known.recipe_steps);
    v.out
}

/// A plan without hosts has nothing to act on: neither a cluster nor a task can run. (With
/// `[cluster]` the missing control plane says so already.)
fn empty(v: &mut V<'_>) {
    let f = &v.plan.file;
    if f.hosts.is_empty() && f.cluster.is_none() && !v.pruned.contains("hosts") {
        let d = Diagnostic::error("empty-plan", "the plan has no hosts: there is nothing to do")
            .with_hint(
                "add a [[hosts]] entry (name, address, os) and a [cluster] or [[tasks]] for it; `kwin schema` lists every key",
            );
        let at = v.plan.source.location(0);
        v.out.push(d.at(Some(at)));
    }
}

/// A plan file read once, loaded as far as it goes, and validated.
#[derive(Debug)]
pub struct Checked {
    /// The plan, when it loaded (with errors too: then it is only partly there).
    pub plan: Option<LoadedPlan>,
    /// Every diagnostic of loading and validation, errors and warnings, sorted by position.
    pub diags: Diagnostics,
}

impl Checked {
    /// The plan, if it loaded without errors; else every diagnostic.
    pub fn into_result(self) -> Result<(LoadedPlan, Diagnostics), Diagnostics> {
        match self.plan {
            Some(plan) if !self.diags.has_errors() => Ok((plan, self.diags)),
            _ => Err(self.diags),
        }
    }
}

/// Read the plan at `path` once, load it and validate what loaded: every diagnostic at once.
pub fn load_and_validate(path: &Path, known: Names<'_>) -> Checked {
    match load::read(path) {
        Ok(text) => load_and_validate_str(path, &text, known),
        Err(diags) => Checked { plan: None, diags },
    }
}

/// [`load_and_validate`] with the values of the plan's variables from `vars` (the CLI's
/// `--var name=value`) before the environment's `KWIN_VAR_<name>` and the defaults.
pub fn load_and_validate_with_vars(
    path: &Path,
    known: Names<'_>,
    vars: std::collections::BTreeMap<String, String>,
) -> Checked {
    match load::read(path) {
        Ok(text) => check_partial(
            load::load_partial_with(path, &text, &super::vars::VarInput::with_env(vars)),
            known,
        ),
        Err(diags) => Checked { plan: None, diags },
    }
}

/// [`load_and_validate`] on `text`, as if read from `path`.
pub fn load_and_validate_str(path: &Path, text: &str, known: Names<'_>) -> Checked {
    check_partial(load::load_partial(path, text), known)
}

fn check_partial(partial: load::Partial, known: Names<'_>) -> Checked {
    let mut diags = partial.diags;
    if let Some(plan) = &partial.plan {
        diags.extend(validate_with(plan, known, &partial.pruned));
    }
    // A value a variable could not be substituted in is reported by the variable's rule.
    diags.0.retain(|d| {
        d.code.starts_with("variable-")
            || !d
                .location
                .as_ref()
                .is_some_and(|l| partial.masked.contains(l))
    });
    super::vars::scrub_diagnostics(&mut diags, &partial.secrets);
    Checked {
        plan: partial.plan,
        diags: diags.dedup().sorted(),
    }
}

#[cfg(test)]
mod tests;
