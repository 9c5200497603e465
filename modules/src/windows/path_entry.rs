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
use super::{check_path, step, State};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    parse_params, Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Touches,
};
use kwin_engine::quote::ps_quote;
use kwin_engine::transport::Shell;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Params {
    path: String,
    #[serde(default)]
    state: State,
}

/// The JSON Schema of the parameters (what the registry exposes for docs and tests).
pub fn params_schema() -> schemars::Schema {
    schemars::schema_for!(Params)
}

#[derive(Debug, Clone)]
pub struct PathEntry {
    path: String,
    state: State,
}

fn norm(p: &str) -> String {
    super::path_resource(p.trim())
}

impl PathEntry {
    pub fn new(params: &serde_json::Value) -> Result<Self, ParamError> {
        let p: Params = parse_params(params)?;
        check_path("path", &p.path)?;
        if p.path.contains(';') {
            return Err(ParamError::at("path", "a Path entry cannot contain `;`"));
        }
        Ok(PathEntry {
            path: p.path,
            state: p.state,
        })
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
