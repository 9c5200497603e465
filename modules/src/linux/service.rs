//! `service`: a systemd unit enabled or not, running or stopped, and restarted once when a
//! file it depends on changed.
//!
//! Parameters:
//!
//! | name | type | default | meaning |
//! |---|---|---|---|
//! | `name` | string | required | unit name (`kubelet` means `kubelet.service`) |
//! | `enabled` | bool | unchanged | start at boot |
//! | `state` | `"running"` / `"stopped"` | unchanged | |
//! | `restart_on` | list of strings | none | absolute paths; restart when any of them changed |
//!
//! `restart_on`: kwin records the sha256 of each path at the last (re)start in
//! `/var/lib/kwin/service-<name>.hash`. When the files' hashes differ from that record, the
//! unit is restarted (if it should run) and the record rewritten — so a change made by an
//! earlier task, in this run or a failed earlier one, restarts the unit exactly once. On the
//! first run there is no record, so a running unit is restarted once.
//!
//! No-op when the unit is as asked, systemd does not need a `daemon-reload`, and the record
//! matches.
//!
//! Changes: `systemctl daemon-reload` (when unit files changed on disk), `enable`/`disable`,
//! `start`/`stop`/`restart`, then the record. A host not booted with systemd (containers, the
//! lab's namespaced hosts) is an error: kwin does not fake services.
//!
//! ```toml
//! [[tasks]]
//! name = "containerd running"
//! module = "service"
//! params = { name = "containerd", enabled = true, state = "running", restart_on = ["/etc/containerd/config.toml"] }
//! ```

use super::diff::value_diff;
use super::facts::file::{FileFact, PathState};
use super::facts::systemd::{Systemd, UnitFact};
use super::managed::ensure_content;
use super::script::die;
use crate::paths::posix_abs;
use crate::shared::service::{RunState, ServiceParams};
use crate::shared::windows_only;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;

/// Where restart records live.
pub const STATE_DIR: &str = "/var/lib/kwin";

/// Directories holding unit files: a change there may need a daemon-reload.
const UNIT_DIRS: &[&str] = &[
    "/etc/systemd/system",
    "/lib/systemd/system",
    "/usr/lib/systemd/system",
];

#[derive(Debug, Clone)]
pub struct Service {
    name: String,
    enabled: Option<bool>,
    state: Option<RunState>,
    restart_on: Vec<String>,
    record: String,
}

impl Described for Service {
    const NAME: &'static str = "service";
    const DOC: &'static str = "a service enabled or not, running or stopped, restarted once when a file it watches changed";
    type Params = ServiceParams;

    fn from_params(p: ServiceParams, _shell: Shell) -> Result<Self, ParamError> {
        windows_only("service", &p.windows_fields())?;
        let state = match p.state {
            Some(RunState::Unchanged) | None => None,
            Some(s) => Some(s),
        };
        let ok = !p.name.is_empty()
            && !p.name.starts_with(['-', '.'])
            && p.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "@._:-\\".contains(c));
        if !ok {
            return Err(ParamError::at(
                "name",
                format!("`{}` is not a systemd unit name", p.name),
            ));
        }
        for (i, r) in p.restart_on.iter().enumerate() {
            posix_abs(&format!("restart_on.{i}"), r)?;
        }
        if p.enabled.is_none() && state.is_none() && p.restart_on.is_empty() {
            return Err(ParamError::new(
                "give at least one of `enabled`, `state` and `restart_on`",
            ));
        }
        if state == Some(RunState::Stopped) && !p.restart_on.is_empty() {
            return Err(ParamError::at(
                "restart_on",
                "`restart_on` makes no sense with state = \"stopped\"",
            ));
        }
        let record = format!("{STATE_DIR}/service-{}.hash", p.name.replace('\\', "_"));
        Ok(Service {
            name: p.name,
            enabled: p.enabled,
            state,
            restart_on: p.restart_on,
            record,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        let mut v = super::facts::file::samples();
        v.push(FactSample::linux(UnitFact {
            name: "kubelet".into(),
        }));
        v
    }
}

impl Service {
    fn unit(&self) -> UnitFact {
        UnitFact {
            name: self.name.clone(),
        }
    }

    fn record_fact(&self) -> FileFact {
        FileFact::content(&self.record)
    }

    /// The record as it should read now: `<sha256 or "absent">  <path>` per watched path.
    fn record_now(&self, facts: &Facts) -> Result<String, ModuleError> {
        let mut s = String::new();
        for p in &self.restart_on {
            let h = match facts.get(&FileFact::hash(p))? {
                PathState::File(f) => f.sha256.unwrap_or_else(|| "unknown".into()),
                PathState::Absent => "absent".into(),
                PathState::Dir { .. } => {
                    return Err(ModuleError::Precondition(format!(
                        "restart_on: `{p}` is a directory; list the files to watch"
                    )))
                }
                PathState::Other { kind } => kind.replace(' ', "-"),
            };
            s.push_str(&format!("{h}  {p}\n"));
        }
        Ok(s)
    }
}

impl Module for Service {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        let mut v = vec![FactQuery::of(&self.unit(), shell)];
        if !self.restart_on.is_empty() {
            for p in &self.restart_on {
                v.push(FactQuery::of(&FileFact::hash(p), shell));
            }
            v.push(FactQuery::of(&self.record_fact(), shell));
            v.push(super::managed::route_query(&self.record, shell));
        }
        v
    }

    fn reads(&self) -> Vec<String> {
        let mut r = vec![format!("service:{}", self.name)];
        r.extend(UNIT_DIRS.iter().map(|d| d.to_string()));
        if !self.restart_on.is_empty() {
            r.extend(self.restart_on.iter().cloned());
            r.push(self.record.clone());
        }
        r
    }

    fn plan(&self, facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let u = match facts.get(&self.unit())? {
            Systemd::Absent => {
                return Err(ModuleError::Unsupported(format!(
                    "service `{}`: this host does not run systemd (/run/systemd/system is missing); kwin manages services only through systemd",
                    self.name
                )))
            }
            Systemd::Unit(u) => u,
        };
        let q = sh_quote(&self.name);
        let mut reasons: Vec<String> = Vec::new();
        let mut diff = String::new();
        let mut script = String::new();
        let mut extra_steps = Vec::new();
        let systemctl = |verb: &str| {
            format!(
                "systemctl {verb} -- {q} </dev/null || {}\n",
                die(&format!("systemctl {verb} {} failed", self.name))
            )
        };

        if !u.exists() {
            reasons.push("unit not found".into());
        }
        if u.need_daemon_reload {
            reasons.push("unit file changed on disk".into());
            diff.push_str("+ systemctl daemon-reload\n");
            script.push_str(&format!(
                "systemctl daemon-reload </dev/null || {}\n",
                die("systemctl daemon-reload failed")
            ));
        }
        match self.enabled {
            Some(true) if !u.is_enabled() => {
                reasons.push("not enabled".into());
                diff.push_str(&value_diff(
                    Some(&format!("enabled: {}", or_none(&u.unit_file))),
                    Some("enabled: enabled"),
                ));
                script.push_str(&systemctl("enable"));
            }
            Some(false) if !u.is_disabled() => {
                reasons.push("enabled".into());
                diff.push_str(&value_diff(
                    Some(&format!("enabled: {}", u.unit_file)),
                    Some("enabled: disabled"),
                ));
                script.push_str(&systemctl("disable"));
            }
            _ => {}
        }

        // Will it run after this change?
        let will_run = match self.state {
            Some(RunState::Running) => true,
            Some(RunState::Stopped) => false,
            Some(RunState::Unchanged) | None => u.is_running(),
        };
        let record_now = if self.restart_on.is_empty() {
            None
        } else {
            Some(self.record_now(facts)?)
        };
        let record_state = if self.restart_on.is_empty() {
            None
        } else {
            Some(facts.get(&self.record_fact())?)
        };
        let watched_changed = match (&record_now, &record_state) {
            (Some(now), Some(PathState::File(f))) => f.text() != Some(now.as_str()),
            (Some(_), Some(_)) => true,
            _ => false,
        };

        match (self.state, u.is_running()) {
            (Some(RunState::Running), false) => {
                reasons.push(format!("not running ({})", u.active));
                diff.push_str(&value_diff(
                    Some(&format!("state: {}", u.active)),
                    Some("state: running"),
                ));
                script.push_str(&systemctl("start"));
            }
            (Some(RunState::Stopped), true) => {
                reasons.push("running".into());
                diff.push_str(&value_diff(
                    Some(&format!("state: {}", u.active)),
                    Some("state: stopped"),
                ));
                script.push_str(&systemctl("stop"));
            }
            (_, running) if watched_changed && running && will_run => {
                let first = !matches!(record_state, Some(PathState::File(_)));
                reasons.push(if first {
                    "first run with restart_on".into()
                } else {
                    "watched file changed".into()
                });
                diff.push_str("+ systemctl restart\n");
                script.push_str(&systemctl("restart"));
            }
            _ => {}
        }
        if let (Some(now), Some(st)) = (&record_now, &record_state) {
            if let Some(w) =
                ensure_content(&self.record, st, facts, now.as_bytes(), 0o644, ctx.nonce)?
            {
                if reasons.is_empty() {
                    reasons.push("restart record out of date".into());
                }
                extra_steps = w.steps;
            }
        }

        if script.is_empty() && extra_steps.is_empty() {
            return Ok(Plan::noop(describe(&u.unit_file, &u.active)));
        }
        let mut steps = Vec::new();
        if !script.is_empty() {
            steps.push(Step::Run(script));
        }
        steps.extend(extra_steps);
        let mut touched = vec![
            format!("service:{}", self.name),
            "/etc/systemd/system".into(),
        ];
        if !self.restart_on.is_empty() {
            touched.push(self.record.clone());
        }
        Ok(Plan::Change(Change {
            action: Action::Update,
            reason: reasons.join("; "),
            diff: Some(diff),
            steps,
            touches: Touches::Resources(touched),
        }))
    }
}

fn or_none(s: &str) -> &str {
    if s.is_empty() {
        "none"
    } else {
        s
    }
}

fn describe(unit_file: &str, active: &str) -> String {
    format!("{}, {active}", or_none(unit_file))
}
