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
//! Changes: `mkdir -p` (missing parents too), then `chown`/`chmod` of what differs;
//! `state = "absent"` removes the directory and everything in it (`rm -rf`). A regular file
//! or anything else at the path is an error, never replaced.
//!
//! ```toml
//! [[tasks]]
//! name = "kubelet config dir"
//! module = "directory"
//! params = { path = "/var/lib/kubelet", mode = "0700", owner = "root" }
//! ```

use super::common::{attr_diff, attr_reason, trim_path, Attrs, State};
use super::facts::file::{FileFact, PathState};
use super::script::{apply_attrs, die};
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
        vec![FactSample::linux(FileFact::meta("/etc"))]
    }
}

impl Directory {
    fn fact(&self) -> FileFact {
        FileFact::meta(&self.path)
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
            steps: vec![Step::Run(script)],
            touches,
        })
    }
}

impl Module for Directory {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&self.fact(), shell)]
    }

    fn reads(&self) -> Vec<String> {
        vec![self.path.clone()]
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
                    die(&format!("cannot remove {}", self.path))
                ),
            )),
            (State::Present, PathState::Absent) => {
                let mut script = format!(
                    "mkdir -p -- {q} || {}\n",
                    die(&format!("cannot create directory {}", self.path))
                );
                script.push_str(&apply_attrs(&self.attrs, &q, &self.path));
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
                let script = apply_attrs(&self.attrs.only_differing(meta), &q, &self.path);
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
