//! `directory` (Windows): a directory exists (with parents), or does not.
//!
//! Parameters: `path`, `state` = "present" (default) | "absent" (removes recursively),
//! `access` = "private" | "readable" | "inherited" (who may use it: [`Access`]). No-op when the
//! directory already is (or is not) there, with the access asked for.
//!
//! With `access`, the directory and every directory above it must be owned by SYSTEM,
//! Administrators or TrustedInstaller and be no link: on Windows Server any user may create
//! `C:\etc` or `C:\k` before kwin does, and an owner can always rewrite its own ACL. Before kwin
//! first protects a directory, what inside it another account owns is refused too. A missing
//! directory is created with its descriptor (`Directory.CreateDirectory(path, security)`), so
//! it never exists unprotected; its missing parents are created as before, inheriting.
//!
//! ```toml
//! [[tasks]]
//! name = "k-dir"
//! module = "directory"
//! on = { os = "windows" }
//! params = { path = 'C:\k' }
//! ```

use super::facts::{AclFact, AclState, PathFact, PathState, TRUSTED_INSTALLER};
use super::{step, State};
use crate::paths::{windows_abs, windows_resource};
use crate::shared::directory::{Access, DirectoryParams};
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
    access: Option<Access>,
}

impl Described for Directory {
    const NAME: &'static str = "directory";
    const DOC: &'static str = "a directory (with its parents), or no directory";
    type Params = DirectoryParams;

    fn from_params(p: DirectoryParams, _shell: Shell) -> Result<Self, ParamError> {
        linux_only("directory", &p.linux_fields())?;
        windows_abs("path", &p.path)?;
        if p.state == State::Absent && p.access.is_some() {
            return Err(ParamError::at(
                "state",
                "`access` makes no sense with state = \"absent\"",
            ));
        }
        Ok(Directory {
            path: p.path,
            state: p.state,
            access: p.access,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![
            FactSample::windows(PathFact {
                path: "C:\\k".into(),
                content_limit: 0,
            }),
            FactSample::windows(AclFact {
                path: "C:\\k".into(),
            }),
        ]
    }
}

impl Directory {
    fn fact(&self) -> PathFact {
        PathFact {
            path: self.path.clone(),
            content_limit: 0,
        }
    }

    /// Create the missing directory, inheriting what its parent gives.
    fn create(&self, touches: Touches) -> Plan {
        Plan::Change(Change {
            action: Action::Create,
            reason: "missing".into(),
            diff: Some(format!("+ directory {}", self.path)),
            steps: vec![step(format!(
                "New-Item -ItemType Directory -Force -Path {} | Out-Null",
                ps_quote(&self.path)
            ))],
            touches,
        })
    }

    fn acl_fact(&self) -> AclFact {
        AclFact {
            path: self.path.clone(),
        }
    }

    /// With `access`: refuse what another account owns (the directory, a directory above it,
    /// something inside it before kwin first protects it) and links; else the steps that give
    /// the directory its descriptor, if it lacks it (`exists`: the directory is there).
    fn access_steps(
        &self,
        access: Access,
        acl: &AclState,
    ) -> Result<Option<(String, Vec<kwin_engine::module::Step>)>, ModuleError> {
        let trusted = |sid: &str| ["S-1-5-18", "S-1-5-32-544", TRUSTED_INSTALLER].contains(&sid);
        let refuse = |what: String| {
            Err(ModuleError::Precondition(format!(
                "{what}: kwin does not take over a directory another account could have prepared (remove it, or give it to Administrators, then apply again)"
            )))
        };
        for up in &acl.parents {
            if up.link {
                return refuse(format!("{} (above {}) is a link", up.path, self.path));
            }
            if !trusted(&up.owner) {
                return refuse(format!(
                    "{} (above {}) is owned by {}",
                    up.path, self.path, up.owner
                ));
            }
        }
        if acl.exists {
            if acl.link {
                return refuse(format!("{} is a link", self.path));
            }
            if !trusted(&acl.owner) {
                return refuse(format!("{} is owned by {}", self.path, acl.owner));
            }
            if let Some(first) = acl.foreign.first() {
                let (path, owner) = first.split_once('|').unwrap_or((first.as_str(), "?"));
                return refuse(format!(
                    "{path} (in {}) is owned by {owner}{}",
                    self.path,
                    match acl.foreign.len() {
                        1 => String::new(),
                        n => format!(", and {} more", n - 1),
                    }
                ));
            }
        }
        let Some(sddl) = access.sddl() else {
            return Ok(None);
        };
        let mut rules = acl.rules.clone();
        rules.sort_unstable();
        if acl.exists && acl.owner == "S-1-5-32-544" && acl.protected && rules == access.rules() {
            return Ok(None);
        }
        let p = ps_quote(&self.path);
        let security = format!(
            "$w = New-Object System.Security.AccessControl.DirectorySecurity\n\
             $w.SetSecurityDescriptorSddlForm({}, [System.Security.AccessControl.AccessControlSections]'Owner, Access')\n",
            ps_quote(sddl)
        );
        let body = if acl.exists {
            format!("{security}(Get-Item -LiteralPath {p} -Force).SetAccessControl($w)")
        } else {
            format!(
                "{security}$parent = [System.IO.Path]::GetDirectoryName({p})\n\
                 [System.IO.Directory]::CreateDirectory($parent) | Out-Null\n\
                 [System.IO.Directory]::CreateDirectory({p}, $w) | Out-Null"
            )
        };
        let say = match access {
            Access::Private => "SYSTEM and Administrators only",
            Access::Readable => "SYSTEM and Administrators; Users read and run",
            Access::Inherited => "inherited",
        };
        Ok(Some((say.to_string(), vec![step(body)])))
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
        match (self.state, self.access) {
            (State::Present, Some(_)) => vec![FactQuery::of(&self.acl_fact(), shell)],
            _ => vec![FactQuery::of(&self.fact(), shell)],
        }
    }
    fn reads(&self) -> Vec<String> {
        vec![windows_resource(&self.path)]
    }
    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let touches = Touches::Resources(vec![windows_resource(&self.path)]);
        let p = ps_quote(&self.path);
        if let (State::Present, Some(access)) = (self.state, self.access) {
            let acl: AclState = facts.get(&self.acl_fact())?;
            if acl.exists && !acl.dir {
                return Err(ModuleError::Precondition(format!(
                    "{} is a file, not a directory",
                    self.path
                )));
            }
            return Ok(match self.access_steps(access, &acl)? {
                None if acl.exists => Plan::noop("exists"),
                None => self.create(touches),
                Some((say, steps)) if acl.exists => Plan::Change(Change {
                    action: Action::Update,
                    reason: "access".into(),
                    diff: Some(format!("~ directory {} access: {say}", self.path)),
                    steps,
                    touches,
                }),
                Some((say, steps)) => Plan::Change(Change {
                    action: Action::Create,
                    reason: "missing".into(),
                    diff: Some(format!("+ directory {} (access: {say})", self.path)),
                    steps,
                    touches,
                }),
            });
        }
        let st: PathState = facts.get(&self.fact())?;
        match self.state {
            State::Present if st.exists && st.dir => Ok(Plan::noop("exists")),
            State::Present if st.exists => Err(ModuleError::Precondition(format!(
                "{} is a file, not a directory",
                self.path
            ))),
            State::Present => Ok(self.create(touches)),
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
