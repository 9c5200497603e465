//! `reboot`: restart a Linux host when (and only when) it says it needs a restart.
//!
//! Parameters:
//!
//! | name | type | default | meaning |
//! |---|---|---|---|
//! | `pending_files` | list of strings | `["/var/run/reboot-required"]` | absolute paths; a restart is pending while any of them exists |
//! | `down_timeout` | integer | `600` | seconds to wait for the host to go away |
//! | `up_timeout` | integer | `1800` | seconds to wait for it to answer again |
//!
//! Debian and Ubuntu packages that need a restart (a new kernel, libc) create
//! `/var/run/reboot-required`; `/var/run` is a tmpfs, so the file is gone after the restart
//! and the module never loops. Files that survive a restart would make every apply restart
//! the host: name only files the boot removes.
//!
//! No-op when none of the files exists. Changes: the engine's reboot step (trigger, wait until
//! the host is down, wait until it answers with a new boot id, re-probe); the run needs
//! `settings.allow_reboot`.
//!
//! ```toml
//! [[tasks]]
//! name = "reboot-if-needed"
//! module = "reboot"
//! on = { os = "linux" }
//! after = ["packages"]
//! ```

use super::common::trim_path;
use super::facts::reboot::PendingFilesFact;
use crate::paths::posix_abs_line;
use crate::shared::reboot::RebootParams;
use crate::shared::windows_only;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, RebootSpec, Step, Touches,
};
use kwin_engine::transport::Shell;

#[derive(Debug, Clone)]
pub struct Reboot {
    fact: PendingFilesFact,
    spec: RebootSpec,
}

impl Described for Reboot {
    const NAME: &'static str = "reboot";
    const DOC: &'static str = "a restart of the host when (and only when) it says it needs one";
    type Params = RebootParams;

    fn from_params(p: RebootParams, _shell: Shell) -> Result<Self, ParamError> {
        windows_only("reboot", &p.windows_fields())?;
        let files = p
            .pending_files
            .clone()
            .unwrap_or_else(|| vec!["/var/run/reboot-required".into()]);
        if files.is_empty() {
            return Err(ParamError::at(
                "pending_files",
                "name at least one file whose presence means a restart is pending",
            ));
        }
        for (i, f) in files.iter().enumerate() {
            posix_abs_line(&format!("pending_files.{i}"), f)?;
        }
        Ok(Reboot {
            fact: PendingFilesFact {
                files: files.iter().map(|f| trim_path(f)).collect(),
            },
            spec: p.spec()?,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![FactSample::linux(PendingFilesFact {
            files: vec!["/var/run/reboot-required".into()],
        })]
    }
}

impl Module for Reboot {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&self.fact, shell)]
    }
    fn reads(&self) -> Vec<String> {
        self.fact.files.clone()
    }
    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let found: Vec<String> = facts.get(&self.fact)?;
        if found.is_empty() {
            return Ok(Plan::noop("no reboot pending"));
        }
        Ok(Plan::Change(Change {
            action: Action::Reboot,
            reason: format!("reboot pending ({})", found.join(", ")),
            diff: None,
            steps: vec![Step::Reboot(self.spec.clone())],
            touches: Touches::Anything,
        }))
    }
}
