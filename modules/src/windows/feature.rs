//! `windows_feature`: a Windows feature installed (e.g. `Containers`), or removed.
//!
//! Parameters: `name`, `state` = "present" (default) | "absent".
//! No-op when installed — also when the install waits for a reboot ("InstallPending"): the
//! `reboot` module (which reads the same pending state) restarts the host once.
//! Changes: `Install-WindowsFeature` on Windows Server (else `Enable-WindowsOptionalFeature
//! -NoRestart`); never reboots by itself.
//!
//! ```toml
//! [[tasks]]
//! name = "containers-feature"
//! module = "windows_feature"
//! on = { os = "windows" }
//! params = { name = "Containers" }
//! ```

use super::facts::{FeatureFact, FeatureState};
use super::{step, State};
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Touches};
use kwin_engine::quote::ps_quote;
use kwin_engine::transport::Shell;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FeatureParams {
    /// The feature's name (`Containers`). Installed with `Install-WindowsFeature` on
    /// Windows Server, else `Enable-WindowsOptionalFeature`; never reboots by itself (see
    /// the `reboot` module).
    name: String,
    /// `present` (default) or `absent`.
    #[serde(default)]
    state: State,
}

#[derive(Debug, Clone)]
pub struct Feature {
    name: String,
    state: State,
}

impl Described for Feature {
    const NAME: &'static str = "windows_feature";
    const DOC: &'static str = "a Windows feature (Containers) installed or removed";
    type Params = FeatureParams;

    fn from_params(p: FeatureParams, _shell: Shell) -> Result<Self, ParamError> {
        if p.name.is_empty()
            || !p
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(ParamError::at(
                "name",
                format!("`{}` is not a feature name", p.name),
            ));
        }
        Ok(Feature {
            name: p.name,
            state: p.state,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![FactSample::windows(FeatureFact {
            name: "Containers".into(),
        })]
    }
}

impl Feature {
    fn fact(&self) -> FeatureFact {
        FeatureFact {
            name: self.name.clone(),
        }
    }
}

impl Module for Feature {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&self.fact(), shell)]
    }
    fn reads(&self) -> Vec<String> {
        vec![format!("feature:{}", self.name.to_ascii_lowercase())]
    }
    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let st: FeatureState = facts.get(&self.fact())?;
        if !st.found {
            return Err(ModuleError::Precondition(format!(
                "windows feature `{}` does not exist on this host",
                self.name
            )));
        }
        let touches = Touches::Resources(vec![
            format!("feature:{}", self.name.to_ascii_lowercase()),
            "reboot:pending".to_string(),
        ]);
        let n = ps_quote(&self.name);
        match self.state {
            State::Present if st.installed() => Ok(Plan::noop("installed")),
            State::Present if st.install_pending() => Ok(Plan::noop(
                "installed; takes effect after the pending reboot",
            )),
            State::Present => {
                let script = if st.kind == "server" {
                    format!("$r = Install-WindowsFeature -Name {n}\nif (-not $r.Success) {{ throw \"installing feature {}: $($r.ExitCode)\" }}", self.name)
                } else {
                    format!("Enable-WindowsOptionalFeature -Online -FeatureName {n} -All -NoRestart | Out-Null")
                };
                Ok(Plan::Change(Change {
                    action: Action::Create,
                    reason: format!("not installed ({})", st.state),
                    diff: Some(format!(
                        "- {}: {}\n+ {}: Installed",
                        self.name, st.state, self.name
                    )),
                    steps: vec![step(script)],
                    touches,
                }))
            }
            State::Absent if !st.installed() && !st.install_pending() => {
                Ok(Plan::noop(format!("not installed ({})", st.state)))
            }
            State::Absent => {
                let script = if st.kind == "server" {
                    format!("$r = Uninstall-WindowsFeature -Name {n}\nif (-not $r.Success) {{ throw \"removing feature {}: $($r.ExitCode)\" }}", self.name)
                } else {
                    format!("Disable-WindowsOptionalFeature -Online -FeatureName {n} -NoRestart | Out-Null")
                };
                Ok(Plan::Change(Change {
                    action: Action::Delete,
                    reason: format!("installed ({})", st.state),
                    diff: Some(format!(
                        "- {}: {}\n+ {}: Removed",
                        self.name, st.state, self.name
                    )),
                    steps: vec![step(script)],
                    touches,
                }))
            }
        }
    }
}
