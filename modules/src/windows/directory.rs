//! `directory` (Windows): a directory exists (with parents), or does not.
//!
//! Parameters: `path`, `state` = "present" (default) | "absent" (removes recursively).
//! No-op when the directory already is (or is not) there.
//!
//! ```toml
//! [[tasks]]
//! name = "k-dir"
//! module = "directory"
//! on = { os = "windows" }
//! params = { path = 'C:\k' }
//! ```

use super::facts::{PathFact, PathState};
use super::{step, State};
use crate::paths::{windows_abs, windows_resource};
use crate::shared::directory::DirectoryParams;
use crate::shared::linux_only;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Touches};
use kwin_engine::quote::ps_quote;
use kwin_engine::transport::Shell;

#[derive(Debug, Clone)]
pub struct Directory {
    path: String,
    state: State,
}

impl Described for Directory {
    const NAME: &'static str = "directory";
    const DOC: &'static str = "a directory (with its parents), or no directory";
    type Params = DirectoryParams;

    fn from_params(p: DirectoryParams, _shell: Shell) -> Result<Self, ParamError> {
        linux_only("directory", &p.linux_fields())?;
        windows_abs("path", &p.path)?;
        Ok(Directory {
            path: p.path,
            state: p.state,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![FactSample::windows(PathFact {
            path: "C:\\k".into(),
            content_limit: 0,
        })]
    }
}

impl Directory {
    fn fact(&self) -> PathFact {
        PathFact {
            path: self.path.clone(),
            content_limit: 0,
        }
    }
}

impl Module for Directory {
    /// Removing the directory is its whole state; one that only has to exist is part.
    fn manages(&self) -> Vec<kwin_engine::module::Managed> {
        use kwin_engine::module::Managed;
        vec![if self.state == State::Absent {
            Managed::Whole(self.path.clone())
        } else {
            Managed::Part(self.path.clone())
        }]
    }

    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&self.fact(), shell)]
    }
    fn reads(&self) -> Vec<String> {
        vec![windows_resource(&self.path)]
    }
    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let st: PathState = facts.get(&self.fact())?;
        let touches = Touches::Resources(vec![windows_resource(&self.path)]);
        let p = ps_quote(&self.path);
        match self.state {
            State::Present if st.exists && st.dir => Ok(Plan::noop("exists")),
            State::Present if st.exists => Err(ModuleError::Precondition(format!(
                "{} is a file, not a directory",
                self.path
            ))),
            State::Present => Ok(Plan::Change(Change {
                action: Action::Create,
                reason: "missing".into(),
                diff: Some(format!("+ directory {}", self.path)),
                steps: vec![step(format!(
                    "New-Item -ItemType Directory -Force -Path {p} | Out-Null"
                ))],
                touches,
            })),
            State::Absent if !st.exists => Ok(Plan::noop("absent")),
            State::Absent => Ok(Plan::Change(Change {
                action: Action::Delete,
                reason: "present".into(),
                diff: Some(format!("- directory {}", self.path)),
                steps: vec![step(format!(
                    "Remove-Item -LiteralPath {p} -Recurse -Force"
                ))],
                touches,
            })),
        }
    }
}
