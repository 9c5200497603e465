//! `path_entry`: a directory is (or is not) in the machine `Path`.
//!
//! Parameters: `path` (a directory), `state` = "present" (default) | "absent".
//! Comparison ignores case and a trailing backslash, as Windows does. No-op when already
//! present (absent). Changes: appends to (removes from) the machine `Path`, keeping every other
//! entry in order.
//!
//! ```toml
//! [[tasks]]
//! name = "k-on-path"
//! module = "path_entry"
//! on = { os = "windows" }
//! params = { path = 'C:\k' }
//! ```

use super::facts::MachinePathFact;
use super::{step, State};
use crate::paths::{windows_abs, windows_resource};
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Touches};
use kwin_engine::quote::ps_quote;
use kwin_engine::transport::Shell;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PathEntryParams {
    /// An absolute directory, without `;`. Compared ignoring case and a trailing backslash,
    /// as Windows does.
    path: String,
    /// `present` (default: appended to the machine `Path`) or `absent` (removed; every
    /// other entry keeps its order).
    #[serde(default)]
    state: State,
}

#[derive(Debug, Clone)]
pub struct PathEntry {
    path: String,
    state: State,
}

fn norm(p: &str) -> String {
    windows_resource(p.trim())
}

impl Described for PathEntry {
    const NAME: &'static str = "path_entry";
    const DOC: &'static str = "a directory in (or out of) the machine PATH";
    type Params = PathEntryParams;

    fn from_params(p: PathEntryParams, _shell: Shell) -> Result<Self, ParamError> {
        windows_abs("path", &p.path)?;
        if p.path.contains(';') {
            return Err(ParamError::at("path", "a Path entry cannot contain `;`"));
        }
        Ok(PathEntry {
            path: p.path,
            state: p.state,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![FactSample::windows(MachinePathFact)]
    }
}

impl Module for PathEntry {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&MachinePathFact, shell)]
    }
    fn reads(&self) -> Vec<String> {
        vec!["env:PATH".into()]
    }
    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let entries = facts.get(&MachinePathFact)?;
        let me = norm(&self.path);
        let present = entries.iter().any(|e| norm(e) == me);
        let touches = Touches::Resources(vec!["env:PATH".into()]);
        let q = ps_quote(&self.path);
        match self.state {
            State::Present if present => Ok(Plan::noop("in Path")),
            State::Present => Ok(Plan::Change(Change {
                action: Action::Update,
                reason: "not in Path".into(),
                diff: Some(format!("+ Path entry {}", self.path)),
                steps: vec![step(format!(
                    "$cur = [Environment]::GetEnvironmentVariable('Path', 'Machine')\n\
                     $parts = @($cur -split ';' | Where-Object {{ $_ -ne '' }})\n\
                     [Environment]::SetEnvironmentVariable('Path', (($parts + {q}) -join ';'), 'Machine')"
                ))],
                touches,
            })),
            State::Absent if !present => Ok(Plan::noop("not in Path")),
            State::Absent => Ok(Plan::Change(Change {
                action: Action::Update,
                reason: "in Path".into(),
                diff: Some(format!("- Path entry {}", self.path)),
                steps: vec![step(format!(
                    "$me = {q}.TrimEnd('\\')\n\
                     $cur = [Environment]::GetEnvironmentVariable('Path', 'Machine')\n\
                     $parts = @($cur -split ';' | Where-Object {{ $_ -ne '' -and $_.Trim().TrimEnd('\\') -ne $me }})\n\
                     [Environment]::SetEnvironmentVariable('Path', ($parts -join ';'), 'Machine')"
                ))],
                touches,
            })),
        }
    }
}
