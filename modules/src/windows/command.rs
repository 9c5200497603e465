//! `command` (Windows): a PowerShell command, run only when its guard says so — idempotent by
//! its guards, like the Linux `command`.
//!
//! Parameters: `run` (PowerShell), and at least one guard: `creates` (path; skip when it
//! exists), `removes` (path; skip when it does not exist), `unless` (PowerShell condition; skip
//! when it succeeds), `onlyif` (skip unless it succeeds); `changes` (paths the command changes;
//! default: anything, so later tasks re-probe). A condition succeeds when it finishes without
//! an error, its last native exit code is 0, and it does not output `$false`. Conditions run at
//! every probe: keep them quick and read-only.
//!
//! ```toml
//! [[tasks]]
//! name = "hns-module"
//! module = "command"
//! on = { os = "windows" }
//! params = { run = "Install-Module -Name HNS -Force", unless = "Get-Module -ListAvailable -Name HNS" }
//! ```

use super::facts::{parse_json, PathFact, PathState};
use super::step;
use crate::paths::windows_abs;
use crate::paths::windows_resource;
use crate::shared::command::CommandParams;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{Fact, FactError, FactOutput, FactQuery, Facts};
use kwin_engine::module::{Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Touches};
use kwin_engine::transport::Shell;
use sha2::{Digest, Sha256};

/// Whether a PowerShell condition succeeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionFact {
    pub script: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
pub struct Condition {
    pub ok: bool,
}

impl Fact for ConditionFact {
    type Output = Condition;
    fn key(&self) -> String {
        format!(
            "win.condition:{}",
            hex::encode(&Sha256::digest(self.script.as_bytes())[..12])
        )
    }
    fn command(&self, shell: Shell) -> String {
        if shell == Shell::Posix {
            return "echo 'windows fact on a posix host' >&2; exit 2".into();
        }
        format!(
            "$global:LASTEXITCODE = 0\n\
             $ok = $true\n\
             try {{\n\
             \x20 $r = & {{\n{}\n}}\n\
             \x20 if (-not $? -or $global:LASTEXITCODE -ne 0) {{ $ok = $false }}\n\
             \x20 if ($r -is [bool] -and -not $r) {{ $ok = $false }}\n\
             }} catch {{ $ok = $false }}\n\
             $global:LASTEXITCODE = 0\n\
             ConvertTo-Json -Compress -InputObject @{{ ok = $ok }}",
            self.script
        )
    }
    fn parse(&self, out: &FactOutput) -> Result<Condition, FactError> {
        parse_json(out)
    }
}

#[derive(Debug, Clone)]
pub struct Command {
    run: String,
    creates: Option<String>,
    removes: Option<String>,
    unless: Option<String>,
    onlyif: Option<String>,
    changes: Option<Vec<String>>,
}

impl Described for Command {
    const NAME: &'static str = "command";
    const DOC: &'static str =
        "a command run only when its guard says so (creates, removes, unless, onlyif)";
    type Params = CommandParams;

    fn from_params(p: CommandParams, _shell: Shell) -> Result<Self, ParamError> {
        p.check(windows_abs)?;
        Ok(Command {
            run: p.run,
            creates: p.creates,
            removes: p.removes,
            unless: p.unless,
            onlyif: p.onlyif,
            changes: p.changes,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![
            FactSample::windows(Command::path_fact("C:\\k\\done")),
            FactSample::windows(ConditionFact {
                script: "Get-Service -Name 'x'".into(),
            }),
        ]
    }
}

impl Command {
    fn path_fact(p: &str) -> PathFact {
        PathFact {
            path: p.to_string(),
            content_limit: 0,
        }
    }
}

impl Module for Command {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        let mut v = Vec::new();
        for p in [&self.creates, &self.removes].into_iter().flatten() {
            v.push(FactQuery::of(&Self::path_fact(p), shell));
        }
        for c in [&self.unless, &self.onlyif].into_iter().flatten() {
            v.push(FactQuery::of(&ConditionFact { script: c.clone() }, shell));
        }
        v
    }

    fn reads(&self) -> Vec<String> {
        if self.unless.is_some() || self.onlyif.is_some() {
            return vec!["*".into()];
        }
        [&self.creates, &self.removes]
            .into_iter()
            .flatten()
            .map(|p| windows_resource(p))
            .collect()
    }

    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        if let Some(p) = &self.creates {
            let st: PathState = facts.get(&Self::path_fact(p))?;
            if st.exists {
                return Ok(Plan::noop(format!("{p} exists")));
            }
        }
        if let Some(p) = &self.removes {
            let st: PathState = facts.get(&Self::path_fact(p))?;
            if !st.exists {
                return Ok(Plan::noop(format!("{p} does not exist")));
            }
        }
        if let Some(c) = &self.unless {
            if facts.get(&ConditionFact { script: c.clone() })?.ok {
                return Ok(Plan::noop("`unless` succeeded"));
            }
        }
        if let Some(c) = &self.onlyif {
            if !facts.get(&ConditionFact { script: c.clone() })?.ok {
                return Ok(Plan::noop("`onlyif` did not succeed"));
            }
        }
        let reason = match (&self.creates, &self.removes, &self.unless) {
            (Some(p), _, _) => format!("{p} does not exist"),
            (_, Some(p), _) => format!("{p} exists"),
            (_, _, Some(_)) => "`unless` did not succeed".to_string(),
            _ => "`onlyif` succeeded".to_string(),
        };
        let touches = match &self.changes {
            Some(c) => Touches::Resources(c.iter().map(|p| windows_resource(p)).collect()),
            None => Touches::Anything,
        };
        Ok(Plan::Change(Change {
            action: Action::Run,
            reason,
            diff: Some(format!("+ run: {}", self.run.lines().next().unwrap_or(""))),
            steps: vec![step(format!(
                "$global:LASTEXITCODE = 0\n& {{\n{}\n}}\nif ($global:LASTEXITCODE -ne 0) {{ throw \"command exited with code $global:LASTEXITCODE\" }}",
                self.run
            ))],
            touches,
        }))
    }
}
