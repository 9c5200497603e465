//! Step guards: `if_exists` / `unless_exists` on a recipe step (`Task::guard`).
//!
//! The build phase wraps a guarded task's module in [`Guarded`]: its facts are the module's
//! plus ONE path question ([`PathExists`], answered with the probe's other path questions on a
//! POSIX host, by `Test-Path -LiteralPath` on Windows), so the guard costs no round trip; its
//! `plan` is a [`Plan::NoOp`] saying why when the guard says no, else the module's own plan.
//! `plan` and `apply` share the executor's one worker, so they cannot disagree; the path is
//! one of the task's `reads`, so a change on the host that may touch it (a join writing
//! `kubelet.conf`) makes the engine read it again before the task is planned.
//!
//! Why: the install path of a node (packages, the Windows kubelet service) must change
//! versions at once on a fresh node and never on a joined one, where only the upgrade recipes'
//! drained steps may; `unless_exists = "/etc/kubernetes/kubelet.conf"` says so as data.

use super::{Ctx, Module, ModuleError, Plan};
use crate::fact::{FactQuery, Facts, PathExists};
use crate::shell::Shell;
use crate::task::Guard;
use std::sync::Arc;

/// A module that does something only when its guard holds.
#[derive(Debug)]
pub struct Guarded {
    inner: Arc<dyn Module>,
    guard: Guard,
}

impl Guarded {
    pub fn new(inner: Arc<dyn Module>, guard: Guard) -> Self {
        Guarded { inner, guard }
    }

    fn fact(&self) -> PathExists {
        PathExists {
            path: self.guard.path.clone(),
        }
    }
}

impl Module for Guarded {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        let mut qs = vec![FactQuery::of(&self.fact(), shell)];
        qs.extend(self.inner.facts(shell));
        qs
    }

    fn reads(&self) -> Vec<String> {
        let mut r = self.inner.reads();
        r.push(self.guard.path.clone());
        r
    }

    /// The guard reads whether its path exists: the path itself, as the inner module's may.
    fn reads_paths_only(&self) -> bool {
        self.inner.reads_paths_only()
    }

    fn plan(&self, facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let exists = facts.get(&self.fact())?;
        match (self.guard.exists, exists) {
            (true, false) => Ok(Plan::noop(format!(
                "{} does not exist (if_exists)",
                self.guard.path
            ))),
            (false, true) => Ok(Plan::noop(format!(
                "{} exists (unless_exists)",
                self.guard.path
            ))),
            _ => self.inner.plan(facts, ctx),
        }
    }

    fn output(&self, shell: Shell) -> Option<String> {
        self.inner.output(shell)
    }

    fn fact_outputs(&self, facts: &Facts) -> Option<std::collections::BTreeMap<String, String>> {
        self.inner.fact_outputs(facts)
    }

    fn output_keys(&self, shell: Shell) -> Option<Vec<&'static str>> {
        self.inner.output_keys(shell)
    }

    fn manages(&self) -> Vec<super::Managed> {
        self.inner.manages()
    }

    fn mark_sensitive(&mut self) {
        // The inner module is shared (`Arc`); the build phase marks it before wrapping.
    }

    fn sensitive(&self, facts: &Facts) -> bool {
        self.inner.sensitive(facts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fact::{batch_script, parse_batch, Fact, FactOutput};
    use crate::module::{Action, Change, Inputs, Touches};
    use crate::testing::run_sh;

    /// Always a change, so a guard that lets it through shows.
    #[derive(Debug)]
    struct Always;

    impl Module for Always {
        fn facts(&self, _shell: Shell) -> Vec<FactQuery> {
            vec![FactQuery::command("always", "echo hi")]
        }
        fn reads(&self) -> Vec<String> {
            vec!["/etc/always".into()]
        }
        fn plan(&self, _facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
            Ok(Plan::Change(Change {
                action: Action::Run,
                reason: "always".into(),
                diff: None,
                steps: Vec::new(),
                touches: Touches::Anything,
            }))
        }
        fn fact_outputs(
            &self,
            _facts: &Facts,
        ) -> Option<std::collections::BTreeMap<String, String>> {
            Some(
                [("said".to_string(), "hi".to_string())]
                    .into_iter()
                    .collect(),
            )
        }
    }

    /// A guarded task gives what its module reads from its facts, as the module alone does.
    #[test]
    fn fact_outputs_pass_through_the_guard() {
        let g = Guarded::new(
            Arc::new(Always),
            Guard {
                path: "/nonexistent".into(),
                exists: true,
            },
        );
        let out = g.fact_outputs(&Facts::new()).expect("outputs");
        assert_eq!(out["said"], "hi");
    }

    fn plan_on(dir: &std::path::Path, guard: Guard) -> Plan {
        let g = Guarded::new(Arc::new(Always), guard);
        let qs = g.facts(Shell::Posix);
        let nonce = "guardtestnonce";
        let _ = dir;
        let out = run_sh(&batch_script(Shell::Posix, &qs, nonce));
        let facts = parse_batch(&qs, &out, nonce).expect("answers");
        let inputs = Inputs::new();
        let ctx = Ctx {
            shell: Shell::Posix,
            host: "h",
            inputs: &inputs,
            nonce: "n",
        };
        g.plan(&facts, &ctx).expect("plans")
    }

    #[test]
    fn guards_read_the_path_in_the_probe_and_decide() {
        let dir = tempfile::tempdir().expect("tmp");
        let conf = dir.path().join("kubelet.conf");
        let path = conf.display().to_string();
        let if_exists = Guard {
            path: path.clone(),
            exists: true,
        };
        let unless_exists = Guard {
            path: path.clone(),
            exists: false,
        };
        // Absent: `if_exists` says no, `unless_exists` lets the module plan.
        match plan_on(dir.path(), if_exists.clone()) {
            Plan::NoOp { why, .. } => assert_eq!(why, format!("{path} does not exist (if_exists)")),
            p => panic!("{p:?}"),
        }
        assert!(!plan_on(dir.path(), unless_exists.clone()).is_noop());
        std::fs::write(&conf, "x").expect("write");
        assert!(!plan_on(dir.path(), if_exists).is_noop());
        match plan_on(dir.path(), unless_exists) {
            Plan::NoOp { why, .. } => assert_eq!(why, format!("{path} exists (unless_exists)")),
            p => panic!("{p:?}"),
        }
        // A dangling link is nothing.
        let link = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).expect("link");
        let g = Guard {
            path: link.display().to_string(),
            exists: true,
        };
        assert!(plan_on(dir.path(), g).is_noop());
    }

    #[test]
    fn the_guard_is_one_more_path_question_and_read() {
        let g = Guarded::new(
            Arc::new(Always),
            Guard {
                path: "/etc/kubernetes/kubelet.conf".into(),
                exists: true,
            },
        );
        let qs = g.facts(Shell::Posix);
        assert_eq!(qs.len(), 2);
        assert_eq!(
            qs[0].path.as_ref().map(|p| p.path.as_str()),
            Some("/etc/kubernetes/kubelet.conf")
        );
        assert_eq!(g.reads(), ["/etc/always", "/etc/kubernetes/kubelet.conf"]);
        let ps = g.facts(Shell::PowerShell);
        assert!(ps[0].path.is_none());
        assert_eq!(
            ps[0].command,
            "if (Test-Path -LiteralPath '/etc/kubernetes/kubelet.conf') { 'type=present' } else { 'type=absent' }"
        );
        for (out, want) in [("type=present\r\n", true), ("type=absent\n", false)] {
            let o = FactOutput {
                stdout: out.into(),
                ..Default::default()
            };
            assert_eq!(PathExists { path: "p".into() }.parse(&o), Ok(want));
        }
    }
}
