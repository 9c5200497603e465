//! `directory`: a directory with the given mode and ownership — or no directory.
//!
//! Parameters:
//!
//! | name | type | default | meaning |
//! |---|---|---|---|
//! | `path` | string | required | absolute path (not `/`) |
//! | `mode` | `"0755"` or `755` | unchanged (new: per umask) | permission bits of the directory itself |
//! | `owner` | string | unchanged | user name or uid |
//! | `group` | string | unchanged | group name or gid |
//! | `state` | `"present"` / `"absent"` | `"present"` | whether the directory exists |
//! | `follow` | bool | `false` | follow a symbolic link at `path` and manage its target |
//!
//! Attributes apply to the directory itself, never recursively.
//!
//! No-op when the directory exists with the given attributes, or is absent when
//! `state = "absent"`.
//!
//! Changes: `mkdir -p` (missing parents too; `-m` with the mode, unless it has special bits),
//! then `chown`/`chmod` of what differs; an owner and group that are those of the account
//! the scripts run as are only checked (`[ -O ]`, `[ -G ]`: a new directory is already
//! theirs, unless a setgid parent gives its group). `state = "absent"` removes the directory
//! and everything in it (`rm -rf`). A regular file or anything else at the path is an error,
//! never replaced. Every step is inline (`Step::Inline`: no subshell).
//!
//! Links (see `route.rs`): a symbolic link at `path` is refused unless `follow = true` (then
//! the link's target is managed, and removing means removing the link); the way to the
//! directory's parent is checked and pinned as for `file`, and its mode and owner are set
//! through the open directory.
//!
//! ```toml
//! [[tasks]]
//! name = "kubelet config dir"
//! module = "directory"
//! params = { path = "/var/lib/kubelet", mode = "0700", owner = "root" }
//! ```

use super::common::mode_str;
use super::common::{attr_diff, attr_reason, trim_path, Attrs, State};
use super::facts::file::{FileFact, IdentityFact, Meta, PathState, RouteFact};
use super::route::{self, name_of, Way};
use super::script::{attrs_in_place, attrs_script, fail, Ends, FD9};
use crate::paths::posix_abs;
use crate::shared::directory::DirectoryParams;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;

#[derive(Debug, Clone)]
pub struct Directory {
    path: String,
    attrs: Attrs,
    state: State,
    follow: bool,
}

impl Described for Directory {
    const NAME: &'static str = "directory";
    const DOC: &'static str = "a directory with the given mode and ownership, or no directory";
    type Params = DirectoryParams;

    fn from_params(p: DirectoryParams, _shell: Shell) -> Result<Self, ParamError> {
        crate::shared::windows_only("directory", &p.windows_fields())?;
        posix_abs("path", &p.path)?;
        let path = trim_path(&p.path);
        if path == "/" {
            return Err(ParamError::at("path", "refusing to manage `/`"));
        }
        let attrs = Attrs::from_params(p.mode.as_ref(), p.owner.as_ref(), p.group.as_ref())?;
        if p.state == State::Absent && attrs != Attrs::default() {
            return Err(ParamError::at(
                "state",
                "`mode`, `owner` and `group` make no sense with state = \"absent\"",
            ));
        }
        Ok(Directory {
            path,
            attrs,
            state: p.state,
            follow: p.follow.unwrap_or(false),
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![
            FactSample::linux(FileFact::meta("/etc")),
            FactSample::linux(IdentityFact),
            FactSample::linux(RouteFact::parent_of("/etc")),
        ]
    }
}

impl Directory {
    fn fact(&self) -> FileFact {
        FileFact::meta(&self.path)
    }

    fn route(&self) -> RouteFact {
        RouteFact::parent_of(&self.path)
    }

    /// The checked way to the parent, for the directory's account (the plan's owner, else
    /// its current one).
    fn way(&self, facts: &Facts, current: Option<&Meta>) -> Result<Way, ModuleError> {
        route::way_to_parent(&self.path, self.attrs.owner.as_deref(), current, facts)
    }

    /// Whether the plan asks who the scripts run as: an owner or group is given, which a new
    /// directory of that account already has (no `chown`).
    fn asks_identity(&self) -> bool {
        self.state == State::Present && (self.attrs.owner.is_some() || self.attrs.group.is_some())
    }

    /// Create the missing directory with its attributes, by name in the pinned parent
    /// (`enter`): `mkdir -m` makes a mode without special bits (a directory there since the
    /// probe gets a `chmod`), the owner and group follow through the open directory (`chown`
    /// does not clear a directory's setgid bit); a mode with special bits is set by `chmod`
    /// after `chown`, as for existing directories. A link put at the name meanwhile is
    /// refused.
    fn create_script(&self, enter: &str, me: Option<&Meta>) -> String {
        let n = sh_quote(name_of(&self.path));
        let die = |m: &str| fail(Ends::Return, "", m);
        let cannot = die(&format!("cannot create directory {}", self.path));
        let not_ours = die(&format!(
            "{} is a symbolic link or not a directory; refusing",
            self.path
        ));
        let mut attrs = self.attrs.clone();
        let mut s = enter.to_string();
        s.push_str(&format!("[ -L {n} ] && {not_ours}\n"));
        match self.attrs.mode.filter(|m| m & 0o7000 == 0) {
            Some(m) => {
                attrs.mode = None;
                let m = mode_str(m);
                // `mkdir` never follows a link at the name (it fails on anything there); a
                // directory made since the probe gets the mode through the open directory.
                s.push_str(&format!(
                    "if [ -d {n} ]; then {{ [ ! -L {n} ] && [ {n} -ef {FD9} ] || {not_ours}\n\
                     chmod {m} {FD9} || {}\n}} 9<{n} || {not_ours}\n\
                     else mkdir -m {m} -- {n} || {cannot}; fi\n",
                    die(&format!("cannot change the mode of {}", self.path)),
                ));
            }
            None => s.push_str(&format!("[ -d {n} ] || mkdir -- {n} || {cannot}\n")),
        }
        if attrs != Attrs::default() {
            s.push_str(&format!(
                "{{ [ ! -L {n} ] && [ {n} -ef {FD9} ] && [ -d {FD9} ] || {not_ours}\n{}}} 9<{n} || {not_ours}\n",
                attrs_script(Ends::Return, &attrs, FD9, &self.path, "", me)
            ));
        }
        s
    }

    /// Removing the directory touches everything under it; creating it (`mkdir -p`) or
    /// fixing its mode or owner touches only the path itself and its parents.
    fn change(&self, action: Action, reason: String, diff: String, script: String) -> Plan {
        let touches = match action {
            Action::Delete => Touches::Resources(vec![self.path.clone()]),
            _ => Touches::Paths(vec![self.path.clone()]),
        };
        Plan::Change(Change {
            action,
            reason,
            diff: Some(diff),
            steps: vec![Step::Inline(script)],
            touches,
        })
    }
}

impl Module for Directory {
    /// The directory itself when it sets mode, owner or group or removes it; one that only
    /// has to exist is part of what others may manage.
    fn manages(&self) -> Vec<kwin_engine::module::Managed> {
        use kwin_engine::module::Managed;
        let whole = self.attrs != Attrs::default() || self.state == State::Absent;
        vec![if whole {
            Managed::Whole(self.path.clone())
        } else {
            Managed::Part(self.path.clone())
        }]
    }

    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        let mut v = vec![
            FactQuery::of(&self.fact(), shell),
            FactQuery::of(&self.route(), shell),
        ];
        if self.asks_identity() {
            v.push(FactQuery::of(&IdentityFact, shell));
        }
        v
    }

    fn reads(&self) -> Vec<String> {
        vec![self.path.clone()]
    }

    /// Kind, mode and owner of the path itself: once this task made the directory, what
    /// later tasks write below it leaves its check as it was.
    fn reads_paths_only(&self) -> bool {
        true
    }

    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let st = facts.get(&self.fact())?;
        let n = sh_quote(name_of(&self.path));
        let die = |m: &str| fail(Ends::Return, "", m);
        let link = |st: &PathState| match st {
            PathState::Dir { link_target, .. } => link_target.clone(),
            PathState::Other { kind } if kind.contains("symbolic link") => {
                Some("nothing".to_string())
            }
            _ => None,
        };
        if let (Some(t), false) = (link(&st), self.follow) {
            return Err(super::file::refuse_link(&self.path, &t));
        }
        match (self.state, &st) {
            (State::Absent, PathState::Absent) => Ok(Plan::noop("absent")),
            (State::Absent, PathState::Dir { link_target, meta }) => {
                let way = self.way(facts, Some(meta))?;
                // A followed link is removed itself (`rm -f`), never its target's content.
                let rm = match link_target {
                    Some(_) => format!(
                        "rm -f -- {n} || {}\n",
                        die(&format!("cannot remove {}", self.path))
                    ),
                    None => format!(
                        "[ -L {n} ] && {}\nrm -rf -- {n} || {}\n",
                        die(&format!(
                            "{} became a symbolic link since it was probed; refusing",
                            self.path
                        )),
                        die(&format!("cannot remove {}", self.path))
                    ),
                };
                Ok(self.change(
                    Action::Delete,
                    "exists".into(),
                    format!("{}- {}/\n", way.note(name_of(&self.path)), self.path),
                    format!("{}{rm}", way.enter(false, &die)),
                ))
            }
            (State::Present, PathState::Absent) => {
                let me: Option<Meta> = if self.asks_identity() {
                    facts.get(&IdentityFact)?
                } else {
                    None
                };
                let way = self.way(facts, None)?;
                let script = self.create_script(&way.enter(true, &die), me.as_ref());
                let mut diff = format!("{}+ {}/\n", way.note(name_of(&self.path)), self.path);
                if let Some(m) = self.attrs.mode {
                    diff.push_str(&format!("+ mode {}\n", super::common::mode_str(m)));
                }
                Ok(self.change(Action::Create, "missing".into(), diff, script))
            }
            (State::Present, PathState::Dir { meta, link_target }) => {
                let way = self.way(facts, Some(meta))?;
                let diffs = self.attrs.differences(meta);
                if diffs.is_empty() {
                    return Ok(Plan::noop(if self.attrs == Attrs::default() {
                        "exists"
                    } else {
                        "exists with matching attributes"
                    }));
                }
                let wanted = self.attrs.only_differing(meta);
                let (script, note) = match link_target {
                    Some(t) => (
                        attrs_script(Ends::Return, &wanted, &sh_quote(t), &self.path, "", None),
                        format!("→ {} is a link to {t} (follow = true)\n", self.path),
                    ),
                    None => (
                        attrs_in_place(
                            Ends::Return,
                            &way.enter(false, &die),
                            name_of(&self.path),
                            "-d",
                            &wanted,
                            &self.path,
                        ),
                        way.note(name_of(&self.path)),
                    ),
                };
                Ok(self.change(
                    Action::Update,
                    attr_reason(&diffs),
                    format!("{note}{}", attr_diff(&diffs)),
                    script,
                ))
            }
            (_, other) => Err(ModuleError::Precondition(format!(
                "`{}` exists and is not a directory ({})",
                self.path,
                other.kind()
            ))),
        }
    }
}
