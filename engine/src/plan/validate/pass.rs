//! One validation pass: the plan being checked, what loading cut out, and the diagnostics
//! found so far, with the helpers every rule reports through.

use crate::diag::{Diagnostic, Diagnostics};
use crate::plan::load::Pruned;
use crate::plan::loaded::LoadedPlan;

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
