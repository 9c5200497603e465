//! Validation: every rule the domain imposes on a loaded plan, all reported at once.
//!
//! Rules live by area: `validate/hosts.rs` (names, addresses, connections, labels, taints),
//! `validate/cluster.rs` (roles, address plan, pod network, runtime, versions, settings),
//! `validate/tasks.rs` (the user's `[[tasks]]`: names, selectors, `after`, module params).
//! Each rule reports at the plan line of the value it is about; the diagnostic codes are
//! listed in the README ("The plan file").
//!
//! Windows limits (seed 003) are warned about only where the plan itself says something
//! that runs into them (e.g. a Windows Server 2022 build label on an overlay network), so
//! the example plans validate clean; the general notes belong to `kwin plan`.

mod cluster;
mod hosts;
mod tasks;

use super::load::Pruned;
use super::LoadedPlan;
use crate::diag::{Diagnostic, Diagnostics};
use crate::module::Registry;

/// Check `plan`; errors and warnings, each pointing at the plan line.
pub fn validate(plan: &LoadedPlan, registry: &dyn Registry) -> Diagnostics {
    validate_with(plan, registry, &[], &Pruned::default())
}

/// [`validate`], knowing the recipe step names `after` may refer to and which parts of the
/// plan were cut out while loading (their absence is not reported again).
pub fn validate_with(
    plan: &LoadedPlan,
    registry: &dyn Registry,
    recipe_steps: &[String],
    pruned: &Pruned,
) -> Diagnostics {
    let mut v = V {
        plan,
        pruned,
        out: Diagnostics::default(),
    };
    hosts::check(&mut v);
    cluster::check(&mut v);
    tasks::check(&mut v, registry, recipe_steps);
    v.out
}

/// The state of one validation run.
pub(crate) struct V<'a> {
    pub plan: &'a LoadedPlan,
    pub pruned: &'a Pruned,
    pub out: Diagnostics,
}

impl V<'_> {
    /// Report `d` at the value at `path`.
    pub fn at(&mut self, path: &str, d: Diagnostic) {
        let loc = self.plan.loc(path);
        self.out.push(d.at(loc));
    }

    /// Report `d` at the key at `path`.
    pub fn at_key(&mut self, path: &str, d: Diagnostic) {
        let loc = self.plan.key_loc(path);
        self.out.push(d.at(loc));
    }

    /// Whether the plan text has a value at exactly `path`.
    pub fn has(&self, path: &str) -> bool {
        self.plan.spans.has(path)
    }
}

#[cfg(test)]
mod tests;
