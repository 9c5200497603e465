//! `reboot`: restart a Windows host when (and only when) Windows waits for a reboot.
//!
//! Parameters: `down_timeout` (seconds to wait for the host to go away, default 600),
//! `up_timeout` (seconds to wait for it to answer again, default 1800).
//! No-op when no reboot is pending (component servicing, Windows Update, or a feature
//! install/uninstall), so it never loops: after the restart the pending state is gone. The
//! restart itself is a first-class engine step: trigger, wait until the host is down, wait
//! until it answers with a NEW boot time, then re-probe.
//!
//! ```toml
//! [[tasks]]
//! name = "reboot-if-needed"
//! module = "reboot"
//! on = { os = "windows" }
//! after = ["containers-feature"]
//! ```

use super::facts::{RebootPending, RebootPendingFact};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    parse_params, Action, Change, Ctx, Module, ModuleError, ParamError, Plan, RebootSpec, Step,
    Touches,
};
use kwin_engine::transport::Shell;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Params {
    #[serde(default = "default_down")]
    down_timeout: u64,
    #[serde(default = "default_up")]
    up_timeout: u64,
}

/// The JSON Schema of the parameters (what the registry exposes for docs and tests).
pub fn params_schema() -> schemars::Schema {
    schemars::schema_for!(Params)
}

fn default_down() -> u64 {
    600
}
fn default_up() -> u64 {
    1800
}

#[derive(Debug, Clone)]
pub struct Reboot {
    spec: RebootSpec,
}

impl Reboot {
    pub fn new(params: &serde_json::Value) -> Result<Self, ParamError> {
        let empty = serde_json::json!({});
        let p: Params = parse_params(if params.is_null() { &empty } else { params })?;
        if p.down_timeout == 0 || p.up_timeout == 0 {
            return Err(ParamError::new("timeouts must be at least 1 second"));
        }
        Ok(Reboot {
            spec: RebootSpec {
                down_timeout_secs: p.down_timeout,
                up_timeout_secs: p.up_timeout,
            },
        })
    }
}

impl Module for Reboot {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&RebootPendingFact, shell)]
    }
    fn reads(&self) -> Vec<String> {
        vec!["reboot:pending".into()]
    }
    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let st: RebootPending = facts.get(&RebootPendingFact)?;
        if !st.pending {
            return Ok(Plan::noop("no reboot pending"));
        }
        Ok(Plan::Change(Change {
            action: Action::Reboot,
            reason: format!("reboot pending ({})", st.reasons.join(", ")),
            diff: None,
            steps: vec![Step::Reboot(self.spec.clone())],
            touches: Touches::Anything,
        }))
    }
}
