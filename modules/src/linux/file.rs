//! `file`: a regular file with the given content, mode and ownership — or no file.
//!
//! Parameters:
//!
//! | name | type | default | meaning |
//! |---|---|---|---|
//! | `path` | string | required | absolute path |
//! | `content` | string | none | the whole content; without it only existence and attributes are managed |
//! | `mode` | `"0644"`, `644` or `0o644` | `0644` for new files, else unchanged | permission bits |
//! | `owner` | string | unchanged (new files: the connecting user) | user name or uid |
//! | `group` | string | unchanged | group name or gid |
//! | `state` | `"present"` / `"absent"` | `"present"` | whether the file exists |
//! | `make_parents` | bool | `true` | create missing parent directories |
//! | `follow` | bool | `false` | follow a symbolic link at `path` and manage its target |
//!
//! Sensitive (diffs show `sha256:… (sensitive)` instead of content, the probe never sends the
//! content back, the engine keeps the steps out of the logs): the task says
//! `sensitive = true`, or the file's mode — the given one, else the file's current one —
//! gives group and others no read access (`0600`, `0400`, `0700`).
//!
//! No-op when the file exists with that content (compared by sha256: the probe sends the
//! file's content back only when its hash differs, for the diff, and only up to 256 KiB) and
//! the given attributes, or is absent when `state = "absent"`.
//!
//! Changes: writes the content to a temporary file in the same directory, sets mode and owner
//! on it and renames it over the path (atomic); the write refuses to run if the file changed
//! since it was probed. Only mode/owner differences are fixed in place, through the open file.
//! `state = "absent"` removes the file (a directory at the path is an error).
//!
//! Output (read from the probe, also under a guard): `differs` = `true` when the file's
//! content is not the plan's (missing, another content, not a regular file), else `false`;
//! none without `content` or with `state = "absent"`.
//!
//! Links (see `route.rs`): a symbolic link at `path` is refused unless `follow = true`, which
//! manages the link's target instead (the diff names it); the way to the file's directory
//! must hold no directory of an account other than root or the file's owner, and no link in
//! a directory root does not own, and the step writes in the very directory the probe
//! reached (`cd -P`, checked), by name.
//!
//! ```toml
//! [[tasks]]
//! name = "containerd config"
//! module = "file"
//! params = { path = "/etc/containerd/config.toml", content = "version = 2\n", mode = "0644", owner = "root" }
//! ```

use super::common::{attr_diff, attr_reason, trim_path, Attrs, State};
use super::diff::{content_diff, private_mode, sensitive_content_diff};
use super::facts::file::{FileFact, FileInfo, IdentityFact, Meta, PathState, RouteFact};
use super::route::{self, name_of, Way};
use super::script::{
    attrs_in_place, attrs_script, fail, sha256_hex, write_file, Ends, Expect, Place, WriteFile,
};
use crate::paths::posix_abs;
use crate::shared::file::FileParams;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Touches};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;

#[derive(Debug, Clone)]
pub struct File {
    path: String,
    content: Option<Vec<u8>>,
    attrs: Attrs,
    state: State,
    make_parents: bool,
    /// Manage the target of a link at `path` (`follow = true`).
    follow: bool,
    /// The task says `sensitive = true`.
    sensitive: bool,
}

impl Described for File {
    const NAME: &'static str = "file";
    const DOC: &'static str = "a file with the given content, mode and ownership, or no file";
    type Params = FileParams;

    fn from_params(p: FileParams, _shell: Shell) -> Result<Self, ParamError> {
        posix_abs("path", &p.path)?;
        let attrs = Attrs::from_params(p.mode.as_ref(), p.owner.as_ref(), p.group.as_ref())?;
        if p.state == State::Absent && (p.content.is_some() || attrs != Attrs::default()) {
            return Err(ParamError::at(
                "state",
                "`content`, `mode`, `owner` and `group` make no sense with state = \"absent\"",
            ));
        }
        Ok(File {
            path: trim_path(&p.path),
            content: p.content.map(String::into_bytes),
            attrs,
            state: p.state,
            make_parents: p.make_parents.unwrap_or(true),
            follow: p.follow.unwrap_or(false),
            sensitive: false,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        super::facts::file::samples()
    }
}

impl File {
    /// Sensitive whatever the host has: marked, or a private mode given.
    fn sensitive_by_params(&self) -> bool {
        self.sensitive || self.attrs.mode.is_some_and(private_mode)
    }

    /// With content: the file's hash, and its content only when it differs from the wanted
    /// one (for the diff), so a file that already matches costs no transfer; a sensitive
    /// file's hash only (its diff shows hashes).
    fn fact(&self) -> FileFact {
        match &self.content {
            Some(_) if self.sensitive_by_params() => FileFact::hash(&self.path),
            Some(c) => FileFact::content_unless(&self.path, sha256_hex(c)),
            None => FileFact::meta(&self.path),
        }
    }

    fn route(&self) -> RouteFact {
        RouteFact::parent_of(&self.path)
    }

    /// The checked way to the file's directory, for the account the file belongs to (the
    /// plan's owner, else its current one).
    fn way(&self, facts: &Facts, current: Option<&Meta>) -> Result<Way, ModuleError> {
        route::way_to_parent(&self.path, self.attrs.owner.as_deref(), current, facts)
    }

    /// A link at the path: its target when the plan follows it, else the refusal.
    fn link(&self, target: Option<&String>) -> Result<Option<String>, ModuleError> {
        match (target, self.follow) {
            (None, _) => Ok(None),
            (Some(t), true) => Ok(Some(t.clone())),
            (Some(t), false) => Err(refuse_link(&self.path, t)),
        }
    }

    /// Whether the plan asks who the scripts run as: an owner or group is given, which a new
    /// file of that account already has (no `chown`).
    fn asks_identity(&self) -> bool {
        self.state == State::Present && (self.attrs.owner.is_some() || self.attrs.group.is_some())
    }

    /// Whether the file's content is not the plan's (never, without content in the plan).
    fn content_differs(&self, info: &FileInfo) -> bool {
        match &self.content {
            None => false,
            Some(want) => match (&info.content, &info.sha256) {
                (Some(have), _) => have != want,
                (None, Some(h)) => *h != sha256_hex(want),
                (None, None) => true,
            },
        }
    }

    fn diff(&self, sensitive: bool, current: Option<&FileInfo>, new: &[u8]) -> String {
        if sensitive {
            sensitive_content_diff(&self.path, current, new)
        } else {
            content_diff(&self.path, current, new)
        }
    }

    /// A change of inline steps (each a function of the batch's shell: `rm`, `chmod`,
    /// `chown` and the builtins around them, failing with `return`).
    fn change(&self, action: Action, reason: String, diff: String, steps: Vec<String>) -> Plan {
        self.change_steps(
            action,
            reason,
            diff,
            steps.into_iter().map(|s| Ends::Return.step(s)).collect(),
            Vec::new(),
        )
    }

    fn change_steps(
        &self,
        action: Action,
        reason: String,
        diff: String,
        steps: Vec<kwin_engine::module::Step>,
        extra_touched: Vec<String>,
    ) -> Plan {
        let mut touched = vec![self.path.clone()];
        touched.extend(extra_touched);
        Plan::Change(Change {
            action,
            reason,
            diff: (!diff.is_empty()).then_some(diff),
            steps,
            touches: Touches::Resources(touched),
        })
    }
}

impl Module for File {
    /// The whole file when it sets content, mode, owner or group or removes the file; a file
    /// that only has to exist is part of what others may manage.
    fn manages(&self) -> Vec<kwin_engine::module::Managed> {
        use kwin_engine::module::Managed;
        let whole =
            self.content.is_some() || self.attrs != Attrs::default() || self.state == State::Absent;
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

    fn mark_sensitive(&mut self) {
        self.sensitive = true;
    }

    /// `differs` ([`Module::fact_outputs`]) for a file with content to write.
    fn output_keys(&self, _shell: Shell) -> Option<Vec<&'static str>> {
        Some(if self.state == State::Present && self.content.is_some() {
            vec!["differs"]
        } else {
            Vec::new()
        })
    }

    /// `differs`: whether the file's content on the host is not the content this step writes
    /// (`true` when it is missing, another file, or not a regular file), read from the probe,
    /// as the Windows `file` gives it: what the upgrade recipes' `upgrade-drain-runtime` /
    /// `cp-upgrade-drain-runtime` ask of runtime-containerd's `containerd-config` (whose guard
    /// leaves joined nodes alone) before its twin rewrites containerd's configuration inside
    /// the drained window. Attributes do not count (a mode change restarts nothing). None
    /// without content or with `state = "absent"`.
    fn fact_outputs(&self, facts: &Facts) -> Option<std::collections::BTreeMap<String, String>> {
        if self.state != State::Present || self.content.is_none() {
            return None;
        }
        let differs = match facts.get(&self.fact()).ok()? {
            PathState::File(info) => self.content_differs(&info),
            PathState::Absent | PathState::Dir { .. } | PathState::Other { .. } => true,
        };
        Some(
            [("differs".to_string(), differs.to_string())]
                .into_iter()
                .collect(),
        )
    }

    fn sensitive(&self, facts: &Facts) -> bool {
        self.sensitive_by_params()
            || (self.attrs.mode.is_none()
                && matches!(facts.get(&self.fact()), Ok(PathState::File(info)) if private_mode(info.meta.mode)))
    }

    fn plan(&self, facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let st = facts.get(&self.fact())?;
        let sensitive = Module::sensitive(self, facts);
        let me: Option<Meta> = if self.asks_identity() {
            facts.get(&IdentityFact)?
        } else {
            None
        };
        let name = sh_quote(name_of(&self.path));
        match (self.state, st) {
            (State::Absent, PathState::Absent) => Ok(Plan::noop("absent")),
            (
                State::Absent,
                PathState::Dir {
                    link_target: None, ..
                },
            ) => Err(ModuleError::Precondition(format!(
                "`{}` is a directory; use the directory module to remove it",
                self.path
            ))),
            // A link (to anything) is removed itself, never its target.
            (State::Absent, other) => {
                let way = self.way(facts, None)?;
                Ok(self.change(
                    Action::Delete,
                    format!("exists ({})", other.kind()),
                    format!("{}- {}\n", way.note(name_of(&self.path)), self.path),
                    vec![format!(
                        "{}rm -f -- {name} || {}\n",
                        way.enter(false, &|m| fail(Ends::Return, "", m)),
                        fail(Ends::Return, "", &format!("cannot remove {}", self.path))
                    )],
                ))
            }
            (State::Present, PathState::Dir { link_target, .. }) => {
                self.link(link_target.as_ref())?;
                Err(ModuleError::Precondition(format!(
                    "`{}` exists and is not a regular file (a directory)",
                    self.path
                )))
            }
            (State::Present, PathState::Other { kind }) => {
                if kind.contains("symbolic link") && !self.follow {
                    return Err(ModuleError::Precondition(format!(
                        "`{}` is {kind}; kwin does not follow a link at a managed path unless the task says `follow = true`",
                        self.path
                    )));
                }
                Err(ModuleError::Precondition(format!(
                    "`{}` exists and is not a regular file ({kind})",
                    self.path
                )))
            }
            (State::Present, PathState::Absent) => {
                let way = self.way(facts, None)?;
                let content = self.content.as_deref().unwrap_or_default();
                let mut attrs = self.attrs.clone();
                attrs.mode = attrs.mode.or(Some(0o644));
                let created = attrs.created_diff();
                let steps = write_file(&WriteFile {
                    path: &self.path,
                    at: Place::In(&way),
                    content,
                    attrs,
                    expect: Expect::Any,
                    make_parents: self.make_parents,
                    nonce: ctx.nonce,
                    me: me.as_ref(),
                });
                let mut diff = format!(
                    "{}{}",
                    way.note(name_of(&self.path)),
                    self.diff(sensitive, None, content)
                );
                diff.push_str(&created);
                Ok(self.change_steps(Action::Create, "missing".into(), diff, steps, Vec::new()))
            }
            (State::Present, PathState::File(info)) => {
                let followed = self.link(info.link_target.as_ref())?;
                let way = self.way(facts, Some(&info.meta))?;
                let note = match &followed {
                    Some(t) => format!("→ {} is a link to {t} (follow = true)\n", self.path),
                    None => way.note(name_of(&self.path)),
                };
                let diffs = self.attrs.differences(&info.meta);
                let content_differs = self.content_differs(&info);
                let target = followed.clone().unwrap_or(self.path.clone());
                let at = match followed {
                    Some(_) => Place::Followed,
                    None => Place::In(&way),
                };
                if content_differs {
                    let want = self.content.as_deref().unwrap_or_default();
                    // Keep what the plan does not set: the new file starts as 0600 root.
                    let attrs = Attrs {
                        mode: self.attrs.mode.or(Some(info.meta.mode)),
                        owner: self
                            .attrs
                            .owner
                            .clone()
                            .or_else(|| Some(info.meta.uid.to_string())),
                        group: self
                            .attrs
                            .group
                            .clone()
                            .or_else(|| Some(info.meta.gid.to_string())),
                    };
                    let steps = write_file(&WriteFile {
                        path: &target,
                        at,
                        content: want,
                        attrs,
                        expect: Expect::probed(&info, sensitive),
                        make_parents: false,
                        nonce: ctx.nonce,
                        me: me.as_ref(),
                    });
                    let mut diff = note;
                    diff.push_str(&self.diff(sensitive, Some(&info), want));
                    diff.push_str(&attr_diff(&diffs));
                    let mut reason = "content differs".to_string();
                    if !diffs.is_empty() {
                        reason = format!("{reason}; {}", attr_reason(&diffs));
                    }
                    let extra = info.link_target.iter().cloned().collect();
                    return Ok(self.change_steps(Action::Update, reason, diff, steps, extra));
                }
                if diffs.is_empty() {
                    return Ok(Plan::noop(
                        match (&self.content, self.attrs == Attrs::default()) {
                            (Some(_), true) => "content matches",
                            (Some(_), false) => "content and attributes match",
                            (None, true) => "exists",
                            (None, false) => "exists with matching attributes",
                        },
                    ));
                }
                let wanted = self.attrs.only_differing(&info.meta);
                let fix = match at {
                    Place::Followed => attrs_script(
                        Ends::Return,
                        &wanted,
                        &sh_quote(&target),
                        &self.path,
                        "",
                        None,
                    ),
                    Place::In(way) => attrs_in_place(
                        Ends::Return,
                        &way.enter(false, &|m| fail(Ends::Return, "", m)),
                        name_of(&self.path),
                        "-f",
                        &wanted,
                        &self.path,
                    ),
                };
                Ok(self.change_steps(
                    Action::Update,
                    attr_reason(&diffs),
                    format!("{note}{}", attr_diff(&diffs)),
                    vec![Ends::Return.step(fix)],
                    info.link_target.iter().cloned().collect(),
                ))
            }
        }
    }
}

/// The refusal of a link at a managed path the plan does not follow.
pub(crate) fn refuse_link(path: &str, target: &str) -> ModuleError {
    ModuleError::Precondition(format!(
        "`{path}` is a symbolic link to `{target}`; kwin does not follow a link at a managed path (whoever made it would choose what root changes) unless the task says `follow = true`"
    ))
}
