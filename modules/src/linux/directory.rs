//! `directory`: a directory with the given mode and ownership — or no directory.
//!
//! Parameters:
//!
//! | name | type | default | meaning |
//! |---|---|---|---|
//! | `path` | string | required | absolute path (not `/`) |
//! | `mode` | `"0755"` or `755` | unchanged (new: per umask) | permission bits of the directory itself |
//! | `owner` | string | unchanged | user name or uid |
//! | `group` | string | unchanged | group name or gid |
//! | `state` | `"present"` / `"absent"` | `"present"` | whether the directory exists |
//!
//! Attributes apply to the directory itself, never recursively.
//!
//! No-op when the directory exists with the given attributes, or is absent when
//! `state = "absent"`.
//!
//! Changes: `mkdir -p` (missing parents too; `-m` with the mode, unless it has special bits),
//! then `chown`/`chmod` of what differs; an owner and group that are those of the account
//! the scripts run as are only checked (`[ -O ]`, `[ -G ]`: a new directory is already
//! theirs, unless a setgid parent gives its group). `state = "absent"` removes the directory
//! and everything in it (`rm -rf`). A regular file or anything else at the path is an error,
//! never replaced. Every step is inline (`Step::Inline`: no subshell).
//!
//! ```toml
//! [[tasks]]
//! name = "kubelet config dir"
//! module = "directory"
//! params = { path = "/var/lib/kubelet", mode = "0700", owner = "root" }
//! ```

use super::common::mode_str;
use super::common::{attr_diff, attr_reason, trim_path, Attrs, State};
use super::facts::file::{FileFact, IdentityFact, Meta, PathState};
use super::script::{attrs_script, fail, Ends};
use crate::paths::posix_abs;
use crate::shared::directory::DirectoryParams;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;

#[derive(Debug, Clone)]
pub struct Directory {
    path: String,
    attrs: Attrs,
    state: State,
}

impl Described for Directory {
    const NAME: &'static str = "directory";
    const DOC: &'static str = "a directory with the given mode and ownership, or no directory";
    type Params = DirectoryParams;

    fn from_params(p: DirectoryParams, _shell: Shell) -> Result<Self, ParamError> {
        posix_abs("path", &p.path)?;
        let path = trim_path(&p.path);
        if path == "/" {
            return Err(ParamError::at("path", "refusing to manage `/`"));
        }
        let attrs = Attrs::from_params(p.mode.as_ref(), p.owner.as_ref(), p.group.as_ref())?;
        if p.state == State::Absent && attrs != Attrs::default() {
            return Err(ParamError::at(
                "state",
                "`mode`, `owner` and `group` make no sense with state = \"absent\"",
            ));
        }
        Ok(Directory {
            path,
            attrs,
            state: p.state,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![
            FactSample::linux(FileFact::meta("/etc")),
            FactSample::linux(IdentityFact),
        ]
    }
}

impl Directory {
    fn fact(&self) -> FileFact {
        FileFact::meta(&self.path)
    }

    /// Whether the plan asks who the scripts run as: an owner or group is given, which a new
    /// directory of that account already has (no `chown`).
    fn asks_identity(&self) -> bool {
        self.state == State::Present && (self.attrs.owner.is_some() || self.attrs.group.is_some())
    }

    /// Create the missing directory with its attributes: `mkdir -m` makes a mode without
    /// special bits (a directory there since the probe gets a `chmod`), the owner and group
    /// follow (`chown` does not clear a directory's setgid bit); a mode with special bits is
    /// set by `chmod` after `chown`, as for existing directories.
    fn create_script(&self, me: Option<&Meta>) -> String {
        let q = sh_quote(&self.path);
        let die = |m: &str| fail(Ends::Return, "", m);
        let cannot = die(&format!("cannot create directory {}", self.path));
        let mut attrs = self.attrs.clone();
        let mut s = match self.attrs.mode.filter(|m| m & 0o7000 == 0) {
            Some(m) => {
                attrs.mode = None;
                let m = mode_str(m);
                format!(
                    "if [ -d {q} ]; then chmod {m} {q} || {}; else mkdir -m {m} -p -- {q} || {cannot}; fi\n",
                    die(&format!("cannot change the mode of {}", self.path)),
                )
            }
            None => format!("mkdir -p -- {q} || {cannot}\n"),
        };
        s.push_str(&attrs_script(Ends::Return, &attrs, &q, &self.path, "", me));
        s
    }

    /// Removing the directory touches everything under it; creating it (`mkdir -p`) or
    /// fixing its mode or owner touches only the path itself and its parents.
    fn change(&self, action: Action, reason: String, diff: String, script: String) -> Plan {
        let touches = match action {
            Action::Delete => Touches::Resources(vec![self.path.clone()]),
            _ => Touches::Paths(vec![self.path.clone()]),
        };
        Plan::Change(Change {
            action,
            reason,
            diff: Some(diff),
            steps: vec![Step::Inline(script)],
            touches,
        })
    }
}

impl Module for Directory {
    /// The directory itself when it sets mode, owner or group or removes it; one that only
    /// has to exist is part of what others may manage.
    fn manages(&self) -> Vec<kwin_engine::module::Managed> {
        use kwin_engine::module::Managed;
        let whole = self.attrs != Attrs::default() || self.state == State::Absent;
        vec![if whole {
            Managed::Whole(self.path.clone())
        } else {
            Managed::Part(self.path.clone())
        }]
    }

    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        let mut v = vec![FactQuery::of(&self.fact(), shell)];
        if self.asks_identity() {
            v.push(FactQuery::of(&IdentityFact, shell));
        }
        v
    }

    fn reads(&self) -> Vec<String> {
        vec![self.path.clone()]
    }

    /// Kind, mode and owner of the path itself: once this task made the directory, what
    /// later tasks write below it leaves its check as it was.
    fn reads_paths_only(&self) -> bool {
        true
    }

    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let st = facts.get(&self.fact())?;
        let q = sh_quote(&self.path);
        match (self.state, &st) {
            (State::Absent, PathState::Absent) => Ok(Plan::noop("absent")),
            (State::Absent, PathState::Dir { .. }) => Ok(self.change(
                Action::Delete,
                "exists".into(),
                format!("- {}/\n", self.path),
                format!(
                    "rm -rf -- {q} || {}\n",
                    fail(Ends::Return, "", &format!("cannot remove {}", self.path))
                ),
            )),
            (State::Present, PathState::Absent) => {
                let me: Option<Meta> = if self.asks_identity() {
                    facts.get(&IdentityFact)?
                } else {
                    None
                };
                let script = self.create_script(me.as_ref());
                let mut diff = format!("+ {}/\n", self.path);
                if let Some(m) = self.attrs.mode {
                    diff.push_str(&format!("+ mode {}\n", super::common::mode_str(m)));
                }
                Ok(self.change(Action::Create, "missing".into(), diff, script))
            }
            (State::Present, PathState::Dir { meta, .. }) => {
                let diffs = self.attrs.differences(meta);
                if diffs.is_empty() {
                    return Ok(Plan::noop(if self.attrs == Attrs::default() {
                        "exists"
                    } else {
                        "exists with matching attributes"
                    }));
                }
                let script = attrs_script(
                    Ends::Return,
                    &self.attrs.only_differing(meta),
                    &q,
                    &self.path,
                    "",
                    None,
                );
                Ok(self.change(
                    Action::Update,
                    attr_reason(&diffs),
                    attr_diff(&diffs),
                    script,
                ))
            }
            (_, other) => Err(ModuleError::Precondition(format!(
                "`{}` exists and is not a directory ({})",
                self.path,
                other.kind()
            ))),
        }
    }
}
