//! `user`: a local account with the given uid, groups, home and shell — or no account.
//!
//! Parameters:
//!
//! | name | type | default | meaning |
//! |---|---|---|---|
//! | `name` | string | required | account name: a lowercase letter or `_`, then up to 31 of `a-z`, `0-9`, `_`, `-` |
//! | `state` | `"present"` / `"absent"` | `"present"` | whether the account exists |
//! | `uid` | integer | unchanged (new: the next free one) | user id |
//! | `group` | string | unchanged (new: per `/etc/login.defs`) | primary group, name or gid; it must exist |
//! | `groups` | list of strings | unchanged | the supplementary groups, exactly (`[]`: none); they must exist |
//! | `home` | string | unchanged (new: none created) | absolute path of the home directory, created with the account |
//! | `shell` | string | unchanged (new: per `/etc/default/useradd`) | absolute path of the login shell |
//! | `system` | bool | `false` | a system account (`useradd -r`), when the account is created |
//!
//! What the host has comes from NSS (`getent passwd`, `id`), so accounts of a directory
//! service are seen too, but only local ones can be changed.
//!
//! No-op when the account exists with every given attribute, or does not exist when
//! `state = "absent"`.
//!
//! Changes: `useradd` (with `-m` when `home` is given), `usermod` with only what differs
//! (`-d` without `-m`: a changed home is not moved), `userdel` for `state = "absent"` (the home
//! directory and the account's files stay).
//!
//! ```toml
//! [[tasks]]
//! name = "deploy user"
//! module = "user"
//! params = { name = "deploy", groups = ["adm"], home = "/srv/deploy", shell = "/bin/bash" }
//! ```

use super::common::{attr_diff, attr_reason, State};
use super::facts::user::{UserFact, UserState};
use super::script::die;
use crate::paths::posix_abs_line;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;

/// Params of `user`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UserParams {
    /// Account name.
    pub name: String,
    /// `present` (default) or `absent` (the account is deleted; its home stays).
    #[serde(default)]
    pub state: State,
    /// User id.
    pub uid: Option<u32>,
    /// Primary group (name or gid).
    pub group: Option<String>,
    /// Supplementary groups, exactly (`[]`: none).
    pub groups: Option<Vec<String>>,
    /// Home directory (absolute), created with the account.
    pub home: Option<String>,
    /// Login shell (absolute).
    pub shell: Option<String>,
    /// A system account (`useradd -r`), when the account is created.
    #[serde(default)]
    pub system: bool,
}

#[derive(Debug, Clone)]
pub struct User {
    name: String,
    state: State,
    uid: Option<u32>,
    group: Option<String>,
    groups: Option<Vec<String>>,
    home: Option<String>,
    shell: Option<String>,
    system: bool,
}

/// An account or group name as `useradd` takes it (Debian's default `NAME_REGEX`).
fn valid_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some('a'..='z' | '_'))
        && s.len() <= 32
        && c.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_' | '-'))
}

fn check_group(field: &str, g: &str) -> Result<(), ParamError> {
    if valid_name(g) || (!g.is_empty() && g.len() <= 10 && g.bytes().all(|b| b.is_ascii_digit())) {
        Ok(())
    } else {
        Err(ParamError::at(
            field,
            format!("`{g}` is not a group name or gid"),
        ))
    }
}

/// A path that goes into a passwd field: absolute, one line, no `:`.
fn check_passwd_path(field: &str, p: &str) -> Result<(), ParamError> {
    posix_abs_line(field, p)?;
    if p.contains(':') {
        return Err(ParamError::at(
            field,
            format!("`{p}` contains `:`, which separates the fields of /etc/passwd"),
        ));
    }
    Ok(())
}

impl Described for User {
    const NAME: &'static str = "user";
    const DOC: &'static str =
        "a local account with the given uid, groups, home and shell, or no account";
    type Params = UserParams;

    fn from_params(p: UserParams, _shell: Shell) -> Result<Self, ParamError> {
        if !valid_name(&p.name) {
            return Err(ParamError::at(
                "name",
                format!(
                    "`{}` is not an account name: a lowercase letter or `_`, then up to 31 of a-z, 0-9, `_`, `-`",
                    p.name
                ),
            ));
        }
        if let Some(g) = &p.group {
            check_group("group", g)?;
        }
        for (i, g) in p.groups.iter().flatten().enumerate() {
            check_group(&format!("groups.{i}"), g)?;
        }
        for (field, v) in [("home", &p.home), ("shell", &p.shell)] {
            if let Some(v) = v {
                check_passwd_path(field, v)?;
            }
        }
        let attrs = p.uid.is_some()
            || p.group.is_some()
            || p.groups.is_some()
            || p.home.is_some()
            || p.shell.is_some()
            || p.system;
        if p.state == State::Absent && attrs {
            return Err(ParamError::at(
                "state",
                "`uid`, `group`, `groups`, `home`, `shell` and `system` make no sense with state = \"absent\"",
            ));
        }
        let groups = p.groups.map(|mut g| {
            g.sort();
            g.dedup();
            g
        });
        Ok(User {
            name: p.name,
            state: p.state,
            uid: p.uid,
            group: p.group,
            groups,
            home: p.home,
            shell: p.shell,
            system: p.system,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![FactSample::linux(UserFact {
            name: "nobody".into(),
        })]
    }
}

impl User {
    fn fact(&self) -> UserFact {
        UserFact {
            name: self.name.clone(),
        }
    }

    fn change(&self, action: Action, reason: String, diff: String, script: String) -> Plan {
        let mut touched = vec![
            format!("user:{}", self.name),
            "/etc/passwd".to_string(),
            "/etc/shadow".to_string(),
            "/etc/group".to_string(),
            "/etc/gshadow".to_string(),
        ];
        touched.extend(self.home.clone());
        Plan::Change(Change {
            action,
            reason,
            diff: Some(diff),
            steps: vec![Step::Run(script)],
            touches: Touches::Resources(touched),
        })
    }
}

impl Module for User {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&self.fact(), shell)]
    }

    fn reads(&self) -> Vec<String> {
        vec![
            format!("user:{}", self.name),
            "/etc/passwd".to_string(),
            "/etc/group".to_string(),
        ]
    }

    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let q = sh_quote(&self.name);
        match (self.state, facts.get(&self.fact())?) {
            (State::Absent, UserState::Absent) => Ok(Plan::noop("absent")),
            (State::Absent, UserState::Present(_)) => Ok(self.change(
                Action::Delete,
                "exists".into(),
                format!("- user {}\n", self.name),
                format!(
                    "userdel {q} </dev/null || {}\n",
                    die(&format!("cannot delete user {}", self.name))
                ),
            )),
            (State::Present, UserState::Absent) => {
                let mut args = Vec::new();
                let mut diff = format!("+ user {}\n", self.name);
                if self.system {
                    args.push("-r".to_string());
                }
                if let Some(u) = self.uid {
                    args.push(format!("-u {u}"));
                    diff.push_str(&format!("+ uid {u}\n"));
                }
                if let Some(g) = &self.group {
                    args.push(format!("-g {}", sh_quote(g)));
                    diff.push_str(&format!("+ group {g}\n"));
                }
                if let Some(gs) = &self.groups {
                    if !gs.is_empty() {
                        args.push(format!("-G {}", sh_quote(&gs.join(","))));
                        diff.push_str(&format!("+ groups {}\n", gs.join(",")));
                    }
                }
                if let Some(h) = &self.home {
                    args.push(format!("-d {} -m", sh_quote(h)));
                    diff.push_str(&format!("+ home {h}\n"));
                }
                if let Some(s) = &self.shell {
                    args.push(format!("-s {}", sh_quote(s)));
                    diff.push_str(&format!("+ shell {s}\n"));
                }
                args.push(q.clone());
                Ok(self.change(
                    Action::Create,
                    "missing".into(),
                    diff,
                    format!(
                        "useradd {} </dev/null || {}\n",
                        args.join(" "),
                        die(&format!("cannot create user {}", self.name))
                    ),
                ))
            }
            (State::Present, UserState::Present(a)) => {
                let mut diffs: Vec<(&str, String, String)> = Vec::new();
                let mut args = Vec::new();
                if let Some(u) = self.uid.filter(|u| *u != a.uid) {
                    diffs.push(("uid", a.uid.to_string(), u.to_string()));
                    args.push(format!("-u {u}"));
                }
                if let Some(g) = &self.group {
                    let same = match g.parse::<u32>() {
                        Ok(gid) => gid == a.gid,
                        Err(_) => *g == a.primary,
                    };
                    if !same {
                        diffs.push(("group", a.primary.clone(), g.clone()));
                        args.push(format!("-g {}", sh_quote(g)));
                    }
                }
                if let Some(gs) = self.groups.as_ref().filter(|gs| **gs != a.groups) {
                    diffs.push(("groups", a.groups.join(","), gs.join(",")));
                    args.push(format!("-G {}", sh_quote(&gs.join(","))));
                }
                if let Some(h) = self.home.as_ref().filter(|h| **h != a.home) {
                    diffs.push(("home", a.home.clone(), h.clone()));
                    args.push(format!("-d {}", sh_quote(h)));
                }
                if let Some(s) = self.shell.as_ref().filter(|s| **s != a.shell) {
                    diffs.push(("shell", a.shell.clone(), s.clone()));
                    args.push(format!("-s {}", sh_quote(s)));
                }
                if diffs.is_empty() {
                    let given = self.uid.is_some()
                        || self.group.is_some()
                        || self.groups.is_some()
                        || self.home.is_some()
                        || self.shell.is_some();
                    return Ok(Plan::noop(if given {
                        "exists with matching attributes"
                    } else {
                        "exists"
                    }));
                }
                args.push(q);
                Ok(self.change(
                    Action::Update,
                    attr_reason(&diffs),
                    attr_diff(&diffs),
                    format!(
                        "usermod {} </dev/null || {}\n",
                        args.join(" "),
                        die(&format!("cannot change user {}", self.name))
                    ),
                ))
            }
        }
    }
}
