//! `command`: a shell command, run only when its guard says so — idempotent by its guards.
//!
//! Parameters:
//!
//! | name | type | default | meaning |
//! |---|---|---|---|
//! | `run` | string | required | the command, run by `/bin/sh` with stdin closed |
//! | `creates` | string | none | absolute path; skip when it exists (and the command must create it) |
//! | `removes` | string | none | absolute path; skip when it does not exist |
//! | `unless` | string | none | sh condition; skip when it exits 0 |
//! | `onlyif` | string | none | sh condition; skip unless it exits 0 |
//! | `changes` | list of strings | none | absolute paths the command changes (default: the `creates` path, else anything) |
//!
//! At least one guard (`creates`, `removes`, `unless`, `onlyif`) is required: after a run
//! the guard must say "done", or kwin reports that the task did not converge. `unless` and
//! `onlyif` run at every probe, so they must be quick and read-only.
//!
//! No-op when a guard says so ("`/etc/kubernetes/admin.conf` exists", "`unless` succeeded").
//!
//! Changes: runs `run`; a non-zero exit fails the task with that exit code. With `creates`,
//! the step also fails if the path still does not exist afterwards. The `creates`/`removes`
//! guards are checked again on the host right before the command runs (inside the batch),
//! so a command whose path appeared since the probe does not run twice. What the command
//! changes: the paths in `changes` (and its `creates`/`removes` paths); without `changes`,
//! its `creates` path when it has one (the command's job is to create it), else anything —
//! later tasks on the host then read their facts again.
//!
//! The text of `run`, `unless` and `onlyif` reaches `/bin/sh` on a private descriptor (a
//! here-document on fd 7, `crate::private_text`), never on its command line, where every
//! local user could read it.
//!
//! ```toml
//! [[tasks]]
//! name = "kubeadm init"
//! module = "command"
//! params = { run = "kubeadm init --pod-network-cidr 10.244.0.0/16", creates = "/etc/kubernetes/admin.conf" }
//! ```

use super::common::trim_path;
use super::diff::value_diff;
use super::facts::file::{FileFact, PathState};
use super::facts::probe::GuardFact;
use super::script::{fail, Ends};
use crate::paths::posix_abs;
use crate::shared::command::CommandParams;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;

#[derive(Debug, Clone)]
pub struct Command {
    run: String,
    creates: Option<String>,
    removes: Option<String>,
    unless: Option<String>,
    onlyif: Option<String>,
    changes: Option<Vec<String>>,
}

impl Described for Command {
    const NAME: &'static str = "command";
    const DOC: &'static str =
        "a command run only when its guard says so (creates, removes, unless, onlyif)";
    type Params = CommandParams;

    fn from_params(p: CommandParams, _shell: Shell) -> Result<Self, ParamError> {
        p.check(posix_abs)?;
        for (name, v) in [
            ("run", Some(&p.run)),
            ("unless", p.unless.as_ref()),
            ("onlyif", p.onlyif.as_ref()),
        ] {
            if v.is_some_and(|t| t.contains('\0')) {
                return Err(ParamError::at(
                    name,
                    "a shell script cannot hold a NUL byte",
                ));
            }
        }
        Ok(Command {
            run: p.run,
            creates: p.creates.as_deref().map(trim_path),
            removes: p.removes.as_deref().map(trim_path),
            unless: p.unless,
            onlyif: p.onlyif,
            changes: p.changes.map(|c| c.iter().map(|p| trim_path(p)).collect()),
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![
            FactSample::linux(FileFact::meta("/etc/kubernetes/kubelet.conf")),
            FactSample::linux(GuardFact {
                code: "test -e /run/done".into(),
            }),
        ]
    }
}

impl Module for Command {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        let mut v = Vec::new();
        for p in [&self.creates, &self.removes].into_iter().flatten() {
            v.push(FactQuery::of(&FileFact::meta(p), shell));
        }
        for c in [&self.unless, &self.onlyif].into_iter().flatten() {
            v.push(FactQuery::of(&GuardFact { code: c.clone() }, shell));
        }
        v
    }

    fn reads(&self) -> Vec<String> {
        if self.unless.is_some() || self.onlyif.is_some() {
            // A condition may look at anything.
            return vec!["*".into()];
        }
        [&self.creates, &self.removes]
            .into_iter()
            .flatten()
            .cloned()
            .collect()
    }

    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let mut reasons = Vec::new();
        if let Some(c) = &self.creates {
            if facts.get(&FileFact::meta(c))? != PathState::Absent {
                return Ok(Plan::noop(format!("`{c}` exists")));
            }
            reasons.push(format!("`{c}` does not exist"));
        }
        if let Some(r) = &self.removes {
            if facts.get(&FileFact::meta(r))? == PathState::Absent {
                return Ok(Plan::noop(format!("`{r}` does not exist")));
            }
            reasons.push(format!("`{r}` exists"));
        }
        if let Some(u) = &self.unless {
            if facts.get(&GuardFact { code: u.clone() })? {
                return Ok(Plan::noop("`unless` succeeded"));
            }
            reasons.push("`unless` failed".into());
        }
        if let Some(o) = &self.onlyif {
            if !facts.get(&GuardFact { code: o.clone() })? {
                return Ok(Plan::noop("`onlyif` failed"));
            }
            reasons.push("`onlyif` succeeded".into());
        }
        // The guards again, on the host: a path that appeared (or went) since the facts were
        // read means the command's work is done.
        let mut skip = Vec::new();
        if let Some(c) = &self.creates {
            skip.push(format!("[ -e {q} ] || [ -L {q} ]", q = sh_quote(c)));
        }
        if let Some(r) = &self.removes {
            skip.push(format!(
                "! {{ [ -e {q} ] || [ -L {q} ]; }}",
                q = sh_quote(r)
            ));
        }
        // An inline step (no subshell): the command itself runs in a shell of its own, so
        // nothing it does (`cd`, `exit`, variables, traps) reaches the batch's shell; around
        // it only builtins, and failures `return`.
        let run = crate::private_text::sh_code(
            &self.run,
            "|| { __kw_c=$?; echo \"kwin: command exited with code $__kw_c\" >&2; return \"$__kw_c\"; }",
        );
        let mut script = if skip.is_empty() {
            run
        } else {
            format!("if {}; then :; else\n{run}fi\n", skip.join(" || "))
        };
        if let Some(c) = &self.creates {
            script.push_str(&format!(
                "[ -e {} ] || [ -L {} ] || {}\n",
                sh_quote(c),
                sh_quote(c),
                fail(
                    Ends::Return,
                    "",
                    &format!("the command succeeded but did not create {c}")
                )
            ));
        }
        let touches = match (&self.changes, &self.creates) {
            (None, Some(c)) => {
                let mut r = vec![c.clone()];
                r.extend(self.removes.clone());
                Touches::Resources(r)
            }
            (None, None) => Touches::Anything,
            (Some(ch), _) => {
                let mut r = ch.clone();
                r.extend(self.creates.clone());
                r.extend(self.removes.clone());
                Touches::Resources(r)
            }
        };
        Ok(Plan::Change(Change {
            action: Action::Run,
            reason: reasons.join("; "),
            diff: Some(value_diff(None, Some(&format!("run: {}", self.run)))),
            steps: vec![Step::Inline(script)],
            touches,
        }))
    }
}
