//! `download`: a file fetched from a URL, verified by sha256.
//!
//! Parameters:
//!
//! | name | type | default | meaning |
//! |---|---|---|---|
//! | `url` | string | required | `http://`, `https://`, `ftp://` or `file://` URL |
//! | `dest` | string | required | absolute path of the file |
//! | `sha256` | string | required | expected sha256 (64 hex digits) |
//! | `mode` | `"0755"` or `755` | `0644` for new files, else unchanged | permission bits |
//! | `owner` | string | unchanged | user name or uid |
//! | `group` | string | unchanged | group name or gid |
//! | `follow` | bool | `false` | follow a symbolic link at `dest` and replace its target |
//!
//! No-op when `dest` exists with that sha256 (and the given attributes): nothing is fetched.
//!
//! Changes: fetches with curl (or wget, whichever the host has; `file://` needs curl) into a
//! temporary file next to `dest`, checks the sha256, sets mode and owner, and renames it over
//! `dest`. A failed or mismatching download leaves `dest` untouched and fails the task with
//! both hashes. Missing parent directories are created. A link at `dest` is refused unless
//! `follow = true`; the way to `dest`'s directory is checked and pinned as for `file`
//! (`route.rs`).
//!
//! ```toml
//! [[tasks]]
//! name = "crictl"
//! module = "download"
//! params = { url = "https://example.org/crictl-v1.30.0-linux-amd64.tar.gz", dest = "/opt/kwin/crictl.tar.gz", sha256 = "3dd03954565808eaeb3a7ffc0e8cb7886a64a9aa94b2bfdfbdc6e2ed94842e49" }
//! ```

use super::common::{attr_diff, attr_reason, parent_dir, trim_path, Attrs};
use super::diff::value_diff;
use super::facts::file::{FileFact, PathState, RouteFact};
use super::facts::probe::CommandsFact;
use super::route::{self, name_of};
use super::script::{
    apply_attrs, apply_attrs_cleanup, attrs_in_place, die, die_after, fetch_into, temp_path, Ends,
    Fetcher, FD9,
};
use crate::paths::posix_abs;
use crate::shared::download::DownloadParams;
use crate::shared::windows_only;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;

#[derive(Debug, Clone)]
pub struct Download {
    url: String,
    dest: String,
    sha256: String,
    attrs: Attrs,
    follow: bool,
}

/// Check a URL: a known scheme, no whitespace or control characters.
pub fn check_url(url: &str, param: &str) -> Result<(), ParamError> {
    let scheme_ok = ["http://", "https://", "ftp://", "file://"]
        .iter()
        .any(|s| url.len() > s.len() && url.starts_with(s));
    if !scheme_ok || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ParamError::at(
            param,
            format!("`{url}` is not an http, https, ftp or file URL"),
        ));
    }
    Ok(())
}

/// Check and lowercase a sha256.
pub fn check_sha256(s: &str, param: &str) -> Result<String, ParamError> {
    if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(s.to_ascii_lowercase())
    } else {
        Err(ParamError::at(param, "expected 64 hex digits"))
    }
}

impl Described for Download {
    const NAME: &'static str = "download";
    const DOC: &'static str = "a file fetched from a URL, verified by SHA-256";
    type Params = DownloadParams;

    fn from_params(p: DownloadParams, _shell: Shell) -> Result<Self, ParamError> {
        windows_only("download", &p.windows_fields())?;
        check_url(&p.url, "url")?;
        posix_abs("dest", &p.dest)?;
        let sha256 = check_sha256(&p.sha256, "sha256")?;
        let attrs = Attrs::from_params(p.mode.as_ref(), p.owner.as_ref(), p.group.as_ref())?;
        Ok(Download {
            url: p.url,
            dest: trim_path(&p.dest),
            sha256,
            attrs,
            follow: p.follow.unwrap_or(false),
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        let mut v = super::facts::file::samples();
        v.push(FactSample::linux(fetchers()));
        v
    }
}

/// The fact naming the fetchers a host has.
pub fn fetchers() -> CommandsFact {
    CommandsFact {
        names: vec!["curl".into(), "wget".into()],
    }
}

/// Pick a fetcher able to fetch `url`, or explain why none is.
pub fn pick_fetcher(found: &[String], url: &str) -> Result<Fetcher, ModuleError> {
    let f = Fetcher::pick(found).ok_or_else(|| {
        ModuleError::Precondition("neither curl nor wget is installed on this host".into())
    })?;
    if url.starts_with("file://") && f != Fetcher::Curl {
        return Err(ModuleError::Precondition(
            "file:// URLs need curl, which is not installed on this host".into(),
        ));
    }
    Ok(f)
}

impl Download {
    fn fact(&self) -> FileFact {
        FileFact::hash(&self.dest)
    }
}

impl Module for Download {
    fn manages(&self) -> Vec<kwin_engine::module::Managed> {
        vec![kwin_engine::module::Managed::Whole(self.dest.clone())]
    }

    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![
            FactQuery::of(&self.fact(), shell),
            FactQuery::of(&RouteFact::parent_of(&self.dest), shell),
            FactQuery::of(&fetchers(), shell),
        ]
    }

    fn reads(&self) -> Vec<String> {
        vec![self.dest.clone()]
    }

    fn plan(&self, facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let st = facts.get(&self.fact())?;
        let current = match &st {
            PathState::Absent => None,
            PathState::File(info) => Some(info),
            PathState::Other { kind } if kind.contains("symbolic link") && !self.follow => {
                return Err(super::file::refuse_link(&self.dest, "nothing"))
            }
            other => {
                return Err(ModuleError::Precondition(format!(
                    "`{}` exists and is not a regular file ({})",
                    self.dest,
                    other.kind()
                )))
            }
        };
        let followed = match (current.and_then(|i| i.link_target.clone()), self.follow) {
            (None, _) => None,
            (Some(t), true) => Some(t),
            (Some(t), false) => return Err(super::file::refuse_link(&self.dest, &t)),
        };
        let uid = current.map(|i| i.meta.uid.to_string());
        let way = route::check(
            &self.dest,
            &parent_dir(&self.dest),
            &facts.get(&RouteFact::parent_of(&self.dest))?,
            self.attrs.owner.as_deref().or(uid.as_deref()),
        )?;
        let note = match &followed {
            Some(t) => format!("→ {} is a link to {t} (follow = true)\n", self.dest),
            None => way.note(name_of(&self.dest)),
        };
        let target = followed.clone().unwrap_or(self.dest.clone());
        let mut touched = vec![self.dest.clone()];
        if target != self.dest {
            touched.push(target.clone());
        }
        if let Some(info) = current {
            if info.sha256.as_deref() == Some(self.sha256.as_str()) {
                let diffs = self.attrs.differences(&info.meta);
                if diffs.is_empty() {
                    return Ok(Plan::noop("sha256 matches"));
                }
                let wanted = self.attrs.only_differing(&info.meta);
                let fix = match &followed {
                    Some(t) => apply_attrs(&wanted, &sh_quote(t), &self.dest),
                    None => attrs_in_place(
                        Ends::Exit,
                        &way.enter(false, &|m| die(m)),
                        name_of(&self.dest),
                        "-f",
                        &wanted,
                        &self.dest,
                    ),
                };
                return Ok(Plan::Change(Change {
                    action: Action::Update,
                    reason: attr_reason(&diffs),
                    diff: Some(format!("{note}{}", attr_diff(&diffs))),
                    steps: vec![Step::Run(fix)],
                    touches: Touches::Resources(touched),
                }));
            }
        }
        let fetcher = pick_fetcher(&facts.get(&fetchers())?, &self.url)?;
        let attrs = match current {
            None => Attrs {
                mode: self.attrs.mode.or(Some(0o644)),
                ..self.attrs.clone()
            },
            Some(info) => Attrs {
                mode: self.attrs.mode.or(Some(info.meta.mode)),
                owner: self.attrs.owner.clone().or(Some(info.meta.uid.to_string())),
                group: self.attrs.group.clone().or(Some(info.meta.gid.to_string())),
            },
        };
        // The same protections as a file write (`script::write_file`): the directory entered
        // by its checked way (or, following a link, the target's by its path), an
        // unguessable name, created exclusively, refused unless it is a regular file; the
        // download, the hash, mode and owner all go through the open file (fd 9), and the
        // name is checked to still be that file, and the destination no link, before the `mv`.
        let rm = "rm -f -- \"$t\";";
        let tmp = temp_path(&target, ctx.nonce);
        let mut s = match &followed {
            None => format!(
                "{}p={}\nt={}\n",
                way.enter(true, &|m| die(m)),
                sh_quote(name_of(&self.dest)),
                sh_quote(name_of(&tmp)),
            ),
            Some(t) => {
                let dir = parent_dir(t);
                format!(
                    "p={}\n[ -d {d} ] || mkdir -p -- {d} || {}\nt={}\n",
                    sh_quote(t),
                    die(&format!("cannot create directory {dir}")),
                    sh_quote(&tmp),
                    d = sh_quote(&dir),
                )
            }
        };
        s.push_str(&format!(
            "umask 077; set -C\n{{ [ -f {FD9} ] || {}\n",
            die(&format!(
                "the temporary file for {} is not a regular file kwin just created (something was planted at its name, or /proc is not mounted); refusing to download",
                self.dest
            )),
        ));
        s.push_str(&fetch_into(fetcher, &self.url, FD9, Some(&self.sha256), rm));
        s.push_str(&apply_attrs_cleanup(&attrs, FD9, &self.dest, rm));
        s.push_str(&format!(
            "[ ! -L \"$t\" ] && [ \"$t\" -ef {FD9} ] || {}\n",
            die(&format!(
                "the temporary file for {} was replaced before it was moved into place; refusing",
                self.dest
            ))
        ));
        if followed.is_none() {
            s.push_str(&format!(
                "[ -L \"$p\" ] || [ -d \"$p\" ] && {}\n",
                die_after(
                    rm,
                    &format!(
                        "{} became a symbolic link or a directory since it was probed; refusing to follow it",
                        self.dest
                    )
                )
            ));
        }
        s.push_str(&format!(
            "mv -f -- \"$t\" \"$p\" || {}\n}} 9>\"$t\" || {}\n",
            die_after(rm, &format!("cannot replace {}", self.dest)),
            die(&format!(
                "cannot create a temporary file beside {}",
                self.dest
            )),
        ));
        let (action, reason, old) = match current {
            None => (Action::Create, "missing".to_string(), None),
            Some(info) => (
                Action::Update,
                "sha256 differs".to_string(),
                Some(format!(
                    "sha256 {}",
                    info.sha256.as_deref().unwrap_or("unknown")
                )),
            ),
        };
        Ok(Plan::Change(Change {
            action,
            reason,
            diff: Some(format!(
                "{note}{}",
                value_diff(
                    old.as_deref(),
                    Some(&format!("sha256 {} from {}", self.sha256, self.url)),
                )
            )),
            steps: vec![Step::Run(s)],
            touches: Touches::Resources(touched),
        }))
    }
}
