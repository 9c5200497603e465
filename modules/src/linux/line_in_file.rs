//! `line_in_file`: one line present in (or absent from) a text file.
//!
//! Parameters:
//!
//! | name | type | default | meaning |
//! |---|---|---|---|
//! | `path` | string | required | absolute path of a text file (at most 256 KiB) |
//! | `line` | string | required for `present` | the whole line, without newline |
//! | `regexp` | string | none | lines matching this (Rust `regex` syntax, unanchored) are the ones to replace or remove |
//! | `state` | `"present"` / `"absent"` | `"present"` | |
//! | `create` | bool | `true` | create a missing file (mode 0644) when `present` |
//! | `follow` | bool | `false` | follow a symbolic link at `path` and edit its target |
//!
//! `present` with `regexp`: every matching line is replaced by `line`; when nothing matches
//! and `line` is not in the file, it is appended. Without `regexp`: `line` is appended unless
//! present. `absent`: every line matching `regexp` (or equal to `line`) is removed.
//!
//! No-op when the file already reads as it would after the change.
//!
//! Changes: the new content is computed here (the plan shows the exact diff) and the file is
//! rewritten atomically, keeping its mode and owner; the write refuses to run if the file
//! changed since it was probed. A link at `path` is refused unless `follow = true`, and the
//! way to the file is checked and pinned as for `file` (`route.rs`).
//!
//! Sensitive (diffs show `sha256:… (sensitive)` for the old and new content, the engine keeps
//! the probed content and the steps out of the logs): the task says `sensitive = true`, or the
//! file's mode gives group and others no read access.
//!
//! ```toml
//! [[tasks]]
//! name = "disable selinux"
//! module = "line_in_file"
//! params = { path = "/etc/selinux/config", regexp = "^SELINUX=", line = "SELINUX=permissive" }
//! ```

use super::common::{trim_path, Attrs, State};
use super::diff::{private_mode, sensitive_content_diff, text_diff};
use super::facts::file::{FileFact, IdentityFact, PathState, RouteFact};
use super::route::{self, name_of};
use super::script::{write_file, Expect, Place, WriteFile};
use crate::paths::posix_abs;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Touches};
use kwin_engine::transport::Shell;
use regex::Regex;
use serde::Deserialize;

/// Params of `line_in_file`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LineInFileParams {
    /// Absolute path of the file.
    pub path: String,
    /// The whole line, without a newline.
    pub line: Option<String>,
    /// Lines matching this regular expression are replaced (present) or removed (absent).
    pub regexp: Option<String>,
    /// `present` (default) or `absent`.
    #[serde(default)]
    pub state: State,
    /// Create a missing file when `present` (default `true`).
    #[serde(default = "crate::shared::yes")]
    pub create: bool,
    /// Follow a symbolic link at `path` and edit its target (default `false`: a link there is
    /// refused).
    #[serde(default)]
    pub follow: bool,
}

#[derive(Debug, Clone)]
pub struct LineInFile {
    path: String,
    line: Option<String>,
    regexp: Option<Regex>,
    state: State,
    create: bool,
    follow: bool,
    /// The task says `sensitive = true`.
    sensitive: bool,
}

impl Described for LineInFile {
    const NAME: &'static str = "line_in_file";
    const DOC: &'static str =
        "one line of a file present (replacing what a regex matches) or absent";
    type Params = LineInFileParams;

    fn from_params(p: LineInFileParams, _shell: Shell) -> Result<Self, ParamError> {
        posix_abs("path", &p.path)?;
        if let Some(l) = &p.line {
            if l.contains('\n') || l.contains('\r') {
                return Err(ParamError::at("line", "`line` must be a single line"));
            }
        }
        let regexp = p
            .regexp
            .as_deref()
            .map(|r| {
                Regex::new(r)
                    .map_err(|e| ParamError::at("regexp", format!("bad regular expression: {e}")))
            })
            .transpose()?;
        match (p.state, &p.line, &regexp) {
            (State::Present, None, _) => {
                return Err(ParamError::at(
                    "line",
                    "`line` is required with state = \"present\"",
                ))
            }
            (State::Absent, None, None) => {
                return Err(ParamError::new(
                    "state = \"absent\" needs `line` or `regexp` to know what to remove",
                ))
            }
            _ => {}
        }
        Ok(LineInFile {
            path: trim_path(&p.path),
            line: p.line,
            regexp,
            state: p.state,
            create: p.create,
            follow: p.follow,
            sensitive: false,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        super::facts::file::samples()
    }
}

/// Lines of `text` (without their `\n`) and whether the text ends with a newline.
fn split_lines(text: &str) -> (Vec<&str>, bool) {
    if text.is_empty() {
        return (Vec::new(), false);
    }
    let ends = text.ends_with('\n');
    let body = text.strip_suffix('\n').unwrap_or(text);
    (body.split('\n').collect(), ends)
}

fn join_lines(lines: &[&str], trailing_newline: bool) -> String {
    let mut s = lines.join("\n");
    if trailing_newline && !lines.is_empty() {
        s.push('\n');
    }
    s
}

impl LineInFile {
    fn fact(&self) -> FileFact {
        FileFact::content(&self.path)
    }

    /// The checked way to the file's directory, for the file's current owner.
    fn way(&self, facts: &Facts, uid: Option<u32>) -> Result<route::Way, ModuleError> {
        let uid = uid.map(|u| u.to_string());
        route::check(
            &self.path,
            &super::common::parent_dir(&self.path),
            &facts.get(&RouteFact::parent_of(&self.path))?,
            uid.as_deref(),
        )
    }

    fn matches(&self, l: &str) -> bool {
        match (&self.regexp, &self.line) {
            (Some(r), _) => r.is_match(l),
            (None, Some(line)) => l == line,
            (None, None) => false,
        }
    }

    /// The content after the change (`None`: unchanged) and a reason.
    pub fn edit(&self, text: &str) -> Option<(String, &'static str)> {
        let (lines, trailing) = split_lines(text);
        match self.state {
            State::Absent => {
                let kept: Vec<&str> = lines.iter().copied().filter(|l| !self.matches(l)).collect();
                (kept.len() != lines.len()).then(|| (join_lines(&kept, trailing), "line present"))
            }
            State::Present => {
                let line = self.line.as_deref()?;
                if self.regexp.is_some() && lines.iter().any(|l| self.matches(l)) {
                    if lines.iter().filter(|l| self.matches(l)).all(|l| *l == line) {
                        return None;
                    }
                    let new: Vec<&str> = lines
                        .iter()
                        .map(|l| if self.matches(l) { line } else { l })
                        .collect();
                    return Some((join_lines(&new, trailing), "matching line differs"));
                }
                if lines.contains(&line) {
                    return None;
                }
                let mut s = text.to_string();
                if !s.is_empty() && !s.ends_with('\n') {
                    s.push('\n');
                }
                s.push_str(line);
                s.push('\n');
                Some((s, "line missing"))
            }
        }
    }
}

impl Module for LineInFile {
    fn manages(&self) -> Vec<kwin_engine::module::Managed> {
        vec![kwin_engine::module::Managed::Part(self.path.clone())]
    }

    /// The file, and who the scripts run as: a file of that account is rewritten without a
    /// `chown` (its owner and group are kept).
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![
            FactQuery::of(&self.fact(), shell),
            FactQuery::of(&RouteFact::parent_of(&self.path), shell),
            FactQuery::of(&IdentityFact, shell),
        ]
    }

    fn reads(&self) -> Vec<String> {
        vec![self.path.clone()]
    }

    fn mark_sensitive(&mut self) {
        self.sensitive = true;
    }

    fn sensitive(&self, facts: &Facts) -> bool {
        self.sensitive
            || matches!(facts.get(&self.fact()), Ok(PathState::File(info)) if private_mode(info.meta.mode))
    }

    fn plan(&self, facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let touches = Touches::Resources(vec![self.path.clone()]);
        let sensitive = Module::sensitive(self, facts);
        let info = match facts.get(&self.fact())? {
            PathState::File(f) => f,
            PathState::Absent if self.state == State::Absent => {
                return Ok(Plan::noop("file absent"))
            }
            PathState::Absent if !self.create => {
                return Err(ModuleError::Precondition(format!(
                    "`{}` does not exist (create = false)",
                    self.path
                )))
            }
            PathState::Absent => {
                let line = self.line.clone().unwrap_or_default();
                let content = format!("{line}\n");
                let way = self.way(facts, None)?;
                return Ok(Plan::Change(Change {
                    action: Action::Create,
                    reason: "file missing".into(),
                    diff: Some(format!(
                        "{}{}",
                        way.note(name_of(&self.path)),
                        if sensitive {
                            sensitive_content_diff(&self.path, None, content.as_bytes())
                        } else {
                            text_diff(&self.path, "", &content)
                        }
                    )),
                    steps: write_file(&WriteFile {
                        path: &self.path,
                        at: Place::In(&way),
                        content: content.as_bytes(),
                        attrs: Attrs {
                            mode: Some(0o644),
                            ..Attrs::default()
                        },
                        expect: Expect::Any,
                        make_parents: false,
                        nonce: ctx.nonce,
                        me: None,
                    }),
                    touches,
                }));
            }
            other => {
                if matches!(
                    &other,
                    PathState::Dir {
                        link_target: Some(_),
                        ..
                    }
                ) || other.kind().contains("symbolic link") && !self.follow
                {
                    return Err(ModuleError::Precondition(format!(
                        "`{}` is a symbolic link; kwin does not follow a link at a managed path unless the task says `follow = true`",
                        self.path
                    )));
                }
                return Err(ModuleError::Precondition(format!(
                    "`{}` is not a regular file ({})",
                    self.path,
                    other.kind()
                )));
            }
        };
        let followed = match (&info.link_target, self.follow) {
            (None, _) => None,
            (Some(t), true) => Some(t.clone()),
            (Some(t), false) => return Err(super::file::refuse_link(&self.path, t)),
        };
        let way = self.way(facts, Some(info.meta.uid))?;
        let text = match (&info.content, info.text()) {
            (None, _) => {
                return Err(ModuleError::Precondition(format!(
                    "`{}` is larger than 256 KiB; line_in_file edits small text files",
                    self.path
                )))
            }
            (Some(_), None) => {
                return Err(ModuleError::Precondition(format!(
                    "`{}` is not a text file",
                    self.path
                )))
            }
            (Some(_), Some(t)) => t,
        };
        let Some((new, reason)) = self.edit(text) else {
            return Ok(Plan::noop(match self.state {
                State::Present => "line present",
                State::Absent => "line absent",
            }));
        };
        let target = followed.clone().unwrap_or(self.path.clone());
        let note = match &followed {
            Some(t) => format!("→ {} is a link to {t} (follow = true)\n", self.path),
            None => way.note(name_of(&self.path)),
        };
        let steps = write_file(&WriteFile {
            path: &target,
            at: match followed {
                Some(_) => Place::Followed,
                None => Place::In(&way),
            },
            content: new.as_bytes(),
            attrs: Attrs {
                mode: Some(info.meta.mode),
                owner: Some(info.meta.uid.to_string()),
                group: Some(info.meta.gid.to_string()),
            },
            expect: Expect::probed(&info, sensitive),
            make_parents: false,
            nonce: ctx.nonce,
            me: facts.get(&IdentityFact)?.as_ref(),
        });
        let mut touched = vec![self.path.clone()];
        touched.extend(info.link_target.clone());
        Ok(Plan::Change(Change {
            action: Action::Update,
            reason: reason.into(),
            diff: Some(format!(
                "{note}{}",
                if sensitive {
                    sensitive_content_diff(&self.path, Some(&info), new.as_bytes())
                } else {
                    text_diff(&self.path, text, &new)
                }
            )),
            steps,
            touches: Touches::Resources(touched),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(params: serde_json::Value) -> LineInFile {
        LineInFile::from_json(&params, Shell::Posix).expect("params")
    }

    #[test]
    fn edits() {
        let add = m(serde_json::json!({"path": "/f", "line": "b"}));
        assert_eq!(add.edit("a\n"), Some(("a\nb\n".into(), "line missing")));
        assert_eq!(add.edit("a"), Some(("a\nb\n".into(), "line missing")));
        assert_eq!(add.edit(""), Some(("b\n".into(), "line missing")));
        assert_eq!(add.edit("a\nb\nc"), None);

        let rep = m(serde_json::json!({"path": "/f", "line": "X=1", "regexp": "^X="}));
        assert_eq!(
            rep.edit("a\nX=0\nb\nX=2"),
            Some(("a\nX=1\nb\nX=1".into(), "matching line differs"))
        );
        assert_eq!(rep.edit("X=1\n"), None);
        assert_eq!(rep.edit("a\n"), Some(("a\nX=1\n".into(), "line missing")));

        let del = m(serde_json::json!({"path": "/f", "regexp": "^#", "state": "absent"}));
        assert_eq!(
            del.edit("#a\nb\n#c\n"),
            Some(("b\n".into(), "line present"))
        );
        assert_eq!(del.edit("b\n"), None);
        assert_eq!(del.edit("#only\n"), Some((String::new(), "line present")));
    }
}
