//! Validation: every rule the domain imposes on a loaded plan, all reported at once.

use super::LoadedPlan;
use crate::diag::{Diagnostic, Diagnostics};
use crate::module::Registry;
use std::collections::HashSet;

/// Check `plan`; errors and warnings, each pointing at the plan line.
pub fn validate(plan: &LoadedPlan, _registry: &dyn Registry) -> Diagnostics {
    let mut d = Diagnostics::default();
    let mut names = HashSet::new();
    for h in &plan.hosts {
        if !names.insert(h.name.as_str()) {
            d.push(
                Diagnostic::error(
                    "host-duplicate",
                    format!("host name `{}` is used twice", h.name),
                )
                .at(plan.loc(&format!("hosts[{}].name", h.index))),
            );
        }
    }
    d
}
