//! `reboot` (Windows): restart a Windows host for the reboot kwin itself needs, and only while
//! that is safe; on a joined node, report a pending reboot or leave it to a drained restart.
//!
//! Parameters: `down_timeout` (seconds to wait for the host to go away, default 600),
//! `up_timeout` (seconds to wait for it to answer again, default 1800), `feature` (a Windows
//! feature, e.g. `Containers`: restart only when that feature's install waits for it), `joined`
//! (a path whose existence means the node has joined the cluster, e.g.
//! `C:\etc\kubernetes\kubelet.conf`: never restart it then), `on_joined` = "report" (default)
//! | "drain", `only_if` (the name of one of the task's inputs: restart only while it is `true`).
//!
//! Which reboot is pending, and why, comes from Microsoft's own sources:
//! - the feature: `Get-WindowsFeature` `InstallState` / `Get-WindowsOptionalFeature` `State`
//!   `InstallPending` / `EnablePending` ("the install process for the package or feature is
//!   pending", DismPackageFeatureState on learn.microsoft.com; docset/winserver2019-ps of
//!   MicrosoftDocs/windows-powershell-docs at f113d6bd, ServerManager and DISM);
//! - component servicing (`HKLM:\SOFTWARE\Microsoft\Windows\CurrentVersion\Component Based
//!   Servicing\RebootPending`) and Windows Update (`...\WindowsUpdate\Auto Update\
//!   RebootRequired`): the keys Microsoft's PendingReboot DSC resource reads
//!   (MSFT_xPendingReboot, xPendingReboot on the PowerShell Gallery; now ComputerManagementDsc).
//!
//! Decisions:
//! - joined (`joined` exists) and anything pending: no restart here. `on_joined = "report"`:
//!   the plan is a no-op with a warning naming the reasons (the apply ends with it and exits
//!   0): a restart would take the node's pods down without a drain. `on_joined = "drain"`: a
//!   no-op saying the node is drained, restarted and uncordoned by the steps that read this
//!   step's output `pending` (recipe windows-reboot);
//! - not joined, `feature` given: restart when that feature's install is pending; any other
//!   pending reboot (Windows Update, servicing) is reported, not acted on;
//! - no `feature` (a plan's own task, or the restart inside the drained window): restart when
//!   anything is pending, as asked — with `only_if`, only while that input is `true`.
//!
//! Output (read from the facts, no script): `pending` = `true` when, with `joined` given, the
//! node has joined and a reboot is pending that this step did not carry out, else `false`.
//!
//! The restart itself is a first-class engine step: trigger, wait until the host is down,
//! wait until it answers with a NEW boot time, then re-probe. After it the pending state is
//! gone, so it never loops.
//!
//! ```toml
//! [[tasks]]
//! name = "reboot-if-needed"
//! module = "reboot"
//! on = { os = "windows" }
//! after = ["containers-feature"]
//! params = { feature = "Containers", joined = 'C:\etc\kubernetes\kubelet.conf' }
//! ```

use super::facts::{
    FeatureFact, FeatureState, PathFact, PathState, RebootPending, RebootPendingFact,
};
use crate::paths::{windows_abs, windows_resource};
use crate::shared::linux_only;
use crate::shared::only_if::OnlyIf;
use crate::shared::reboot::{OnJoined, RebootParams};
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, RebootSpec, Step, Touches,
};
use kwin_engine::transport::Shell;

#[derive(Debug, Clone)]
pub struct Reboot {
    spec: RebootSpec,
    feature: Option<String>,
    joined: Option<String>,
    on_joined: OnJoined,
    only_if: Option<OnlyIf>,
}

impl Described for Reboot {
    const NAME: &'static str = "reboot";
    const DOC: &'static str = "a restart of the host when (and only when) it says it needs one";
    type Params = RebootParams;

    fn from_params(p: RebootParams, _shell: Shell) -> Result<Self, ParamError> {
        linux_only("reboot", &[("pending_files", p.pending_files.is_some())])?;
        let spec = p.spec()?;
        let only_if = OnlyIf::parse(p.only_if)?;
        if let Some(f) = &p.feature {
            if f.is_empty()
                || !f
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return Err(ParamError::at(
                    "feature",
                    format!("`{f}` is not a feature name"),
                ));
            }
        }
        if let Some(j) = &p.joined {
            windows_abs("joined", j)?;
        }
        Ok(Reboot {
            spec,
            feature: p.feature,
            joined: p.joined,
            on_joined: p.on_joined.unwrap_or_default(),
            only_if,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![
            FactSample::windows(RebootPendingFact),
            FactSample::windows(FeatureFact {
                name: "Containers".into(),
            }),
            FactSample::windows(PathFact {
                path: "C:\\etc\\kubernetes\\kubelet.conf".into(),
                content_limit: 0,
            }),
        ]
    }
}

impl Reboot {
    fn feature_fact(&self) -> Option<FeatureFact> {
        self.feature
            .as_ref()
            .map(|f| FeatureFact { name: f.clone() })
    }

    fn joined_fact(&self) -> Option<PathFact> {
        self.joined.as_ref().map(|p| PathFact {
            path: p.clone(),
            content_limit: 0,
        })
    }

    fn reboot(&self, reason: String) -> Plan {
        Plan::Change(Change {
            action: Action::Reboot,
            reason,
            diff: None,
            steps: vec![Step::Reboot(self.spec.clone())],
            touches: Touches::Anything,
        })
    }
}

impl Module for Reboot {
    /// `pending` (its [`Module::fact_outputs`]), for a step that names the joined node's
    /// kubelet.conf.
    fn output_keys(&self, _shell: Shell) -> Option<Vec<&'static str>> {
        Some(if self.joined.is_some() {
            vec!["pending"]
        } else {
            Vec::new()
        })
    }

    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        let mut v = vec![FactQuery::of(&RebootPendingFact, shell)];
        if let Some(f) = self.feature_fact() {
            v.push(FactQuery::of(&f, shell));
        }
        if let Some(j) = self.joined_fact() {
            v.push(FactQuery::of(&j, shell));
        }
        v
    }
    fn reads(&self) -> Vec<String> {
        let mut v = vec!["reboot:pending".to_string()];
        if let Some(f) = &self.feature {
            v.push(format!("feature:{}", f.to_ascii_lowercase()));
        }
        if let Some(j) = &self.joined {
            v.push(windows_resource(j));
        }
        v
    }
    fn plan(&self, facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        if let Some(only) = &self.only_if {
            if !only.asks(ctx)? {
                return Ok(Plan::noop(format!(
                    "input `{}` does not ask for a restart of {}",
                    only.name(),
                    ctx.host
                )));
            }
        }
        let s = self.state(facts)?;
        if !s.pending {
            return Ok(Plan::noop("no reboot pending"));
        }
        let why = s.reasons.join(", ");
        if s.joined {
            return Ok(match self.on_joined {
                OnJoined::Drain => Plan::noop(format!(
                    "{} waits for a reboot ({why}) and has joined the cluster: drained, restarted and uncordoned one node at a time (cluster.windows_pending_reboot = \"drain\")",
                    ctx.host
                )),
                OnJoined::Report => Plan::noop_warning(
                    "joined node: the pending reboot is left to you",
                    format!(
                        "{} waits for a reboot ({why}) and has joined the cluster: kwin does not restart it (cluster.windows_pending_reboot = \"report\"); drain it, restart it, uncordon it: kubectl drain {} --ignore-daemonsets; Restart-Computer; kubectl uncordon {}",
                        ctx.host, ctx.host, ctx.host
                    ),
                ),
            });
        }
        match &self.feature {
            None => Ok(self.reboot(format!("reboot pending ({why})"))),
            Some(f) if s.ours => Ok(self.reboot(format!(
                "the {f} feature waits for a restart to finish installing ({why})"
            ))),
            Some(f) => Ok(Plan::noop_warning(
                format!("no reboot pending for the {f} feature"),
                format!(
                    "{} waits for a reboot kwin did not cause ({why}): kwin restarts a node only for the {f} feature; restart it when it suits you",
                    ctx.host
                ),
            )),
        }
    }

    fn fact_outputs(&self, facts: &Facts) -> Option<std::collections::BTreeMap<String, String>> {
        self.joined.as_ref()?;
        let s = self.state(facts).ok()?;
        let pending = s.pending && s.joined;
        Some(
            [("pending".to_string(), pending.to_string())]
                .into_iter()
                .collect(),
        )
    }
}

/// What the facts say: whether a reboot is pending (and why), whether it is this step's
/// feature's, whether the node joined.
struct State {
    pending: bool,
    ours: bool,
    joined: bool,
    reasons: Vec<String>,
}

impl Reboot {
    fn state(&self, facts: &Facts) -> Result<State, ModuleError> {
        let st: RebootPending = facts.get(&RebootPendingFact)?;
        let feature: Option<FeatureState> = match self.feature_fact() {
            Some(f) => Some(facts.get(&f)?),
            None => None,
        };
        let ours = feature.as_ref().is_some_and(|f| f.install_pending());
        let mut reasons = st.reasons.clone();
        if let (true, Some(f)) = (ours, &self.feature) {
            reasons.retain(|r| r != "feature");
            reasons.insert(
                0,
                format!(
                    "the {f} feature install ({})",
                    feature.as_ref().map_or("", |s| s.state.as_str())
                ),
            );
        }
        let joined = match self.joined_fact() {
            Some(j) => facts.get::<PathFact>(&j).map(|s: PathState| s.exists)?,
            None => false,
        };
        Ok(State {
            pending: st.pending || ours,
            ours,
            joined,
            reasons,
        })
    }
}
