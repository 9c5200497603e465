//! `env_var`: a machine-scope environment variable (e.g. `HTTP_PROXY`, `HTTPS_PROXY`,
//! `NO_PROXY` for hosts behind a proxy, as the Windows node guide shows).
//!
//! Parameters: `name`, `value`, `state` = "present" (default) | "absent".
//! No-op when the machine value already equals `value` (or is unset for absent). Changes:
//! `[Environment]::SetEnvironmentVariable(name, value, 'Machine')`. Services started later see
//! the new value; running ones keep theirs until restarted.
//!
//! ```toml
//! [[tasks]]
//! name = "proxy"
//! module = "env_var"
//! on = { os = "windows" }
//! params = { name = "HTTPS_PROXY", value = "http://proxy.example.com:443/" }
//! ```

use super::facts::{EnvVarFact, EnvVarState};
use super::{step, State};
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Touches};
use kwin_engine::quote::ps_quote;
use kwin_engine::transport::Shell;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvVarParams {
    /// The variable's name (e.g. `HTTPS_PROXY`), machine scope.
    name: String,
    /// Its value; required (non-empty) when `state` is `present`. Services started later
    /// see it; running ones keep theirs until restarted.
    value: Option<String>,
    /// `present` (default) or `absent`.
    #[serde(default)]
    state: State,
}

#[derive(Debug, Clone)]
pub struct EnvVar {
    name: String,
    value: Option<String>,
    state: State,
}

impl Described for EnvVar {
    const NAME: &'static str = "env_var";
    const DOC: &'static str = "a machine environment variable set to a value, or absent";
    type Params = EnvVarParams;

    fn from_params(p: EnvVarParams, _shell: Shell) -> Result<Self, ParamError> {
        if p.name.is_empty() || p.name.contains(['=', '\0', '\n']) {
            return Err(ParamError::at(
                "name",
                format!("`{}` is not a valid variable name", p.name),
            ));
        }
        if p.state == State::Present && p.value.as_deref().is_none_or(str::is_empty) {
            return Err(ParamError::at(
                "value",
                "`value` is required (non-empty) when state is present",
            ));
        }
        Ok(EnvVar {
            name: p.name,
            value: p.value,
            state: p.state,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![FactSample::windows(EnvVarFact { name: "X".into() })]
    }
}

impl EnvVar {
    fn fact(&self) -> EnvVarFact {
        EnvVarFact {
            name: self.name.clone(),
        }
    }
}

impl Module for EnvVar {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&self.fact(), shell)]
    }
    fn reads(&self) -> Vec<String> {
        vec![format!("env:{}", self.name.to_ascii_uppercase())]
    }
    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let st: EnvVarState = facts.get(&self.fact())?;
        let touches = Touches::Resources(vec![format!("env:{}", self.name.to_ascii_uppercase())]);
        let n = ps_quote(&self.name);
        let old = st.value.clone().unwrap_or_default();
        match (self.state, &self.value) {
            (State::Present, Some(v)) if st.value.as_deref() == Some(v.as_str()) => {
                Ok(Plan::noop("value matches"))
            }
            (State::Present, Some(v)) => Ok(Plan::Change(Change {
                action: if st.value.is_some() {
                    Action::Update
                } else {
                    Action::Create
                },
                reason: if st.value.is_some() {
                    "value differs".into()
                } else {
                    "not set".into()
                },
                diff: Some(format!("- {}={old}\n+ {}={v}", self.name, self.name)),
                steps: vec![step(format!(
                    "[Environment]::SetEnvironmentVariable({n}, {}, 'Machine')",
                    ps_quote(v)
                ))],
                touches,
            })),
            (State::Absent, _) if st.value.is_none() => Ok(Plan::noop("not set")),
            (State::Absent, _) => Ok(Plan::Change(Change {
                action: Action::Delete,
                reason: "set".into(),
                diff: Some(format!("- {}={old}", self.name)),
                steps: vec![step(format!(
                    "[Environment]::SetEnvironmentVariable({n}, $null, 'Machine')"
                ))],
                touches,
            })),
            (State::Present, None) => Err(ModuleError::Unsupported("env_var: no value".into())),
        }
    }
}
