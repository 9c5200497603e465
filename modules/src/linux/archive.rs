//! `archive`: a tarball extracted into a directory, once per archive content.
//!
//! Parameters:
//!
//! | name | type | default | meaning |
//! |---|---|---|---|
//! | `src` | string | — | absolute path of a tarball on the host (give `src` or `url`) |
//! | `url` | string | — | URL of a tarball, fetched to a temporary file (needs `sha256`) |
//! | `sha256` | string | required with `url` | expected sha256 of the tarball; checked before extracting |
//! | `dest` | string | required | absolute path of the directory to extract into (created) |
//! | `strip_components` | integer | `0` | leading path components to drop (`tar --strip-components`) |
//! | `creates` | string | marker | absolute path whose existence means "already extracted" |
//! | `follow` | bool | `false` | follow a symbolic link at `dest` and extract into its target |
//!
//! Without `creates`, kwin keeps a marker `<dest>/.kwin-archive-<id>` (id: a hash of `src` or
//! `url`) holding the sha256 of the extracted tarball: no-op when it matches the tarball's
//! sha256 (the `sha256` param, or the probed hash of `src`), so a changed tarball is extracted
//! again. With `creates`: no-op when that path exists.
//!
//! Changes: (fetches and) verifies the tarball, runs `tar -x` (gzip, bzip2, xz or zstd, told
//! to tar by the file's magic bytes) into `dest`, then writes the marker. Files are extracted over existing ones; nothing is
//! deleted.
//!
//! Links (see `route.rs`): a symbolic link at `dest` is refused unless `follow = true`; the
//! way to `dest` must hold no directory of an account other than root (nor `dest` itself
//! be one), and no link in a directory root does not own; the step extracts in the very
//! directory the probe reached, and writes the marker through a new file renamed over it.
//!
//! ```toml
//! [[tasks]]
//! name = "cni plugins"
//! module = "archive"
//! params = { src = "/opt/kwin/cni-plugins.tgz", dest = "/opt/cni/bin" }
//! ```

use super::common::trim_path;
use super::diff::value_diff;
use super::download::{check_sha256, check_url, fetchers, pick_fetcher};
use super::facts::file::{FileFact, PathState, RouteFact};
use super::route::{self, name_of};
use super::script::{die, die_after, fetch_verified, sha256_hex, verify_sha256};
use crate::paths::posix_abs;
use crate::shared::archive::ArchiveParams;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    Path(String),
    Url(String),
}

#[derive(Debug, Clone)]
pub struct Archive {
    source: Source,
    sha256: Option<String>,
    dest: String,
    strip: u32,
    creates: Option<String>,
    marker: String,
    follow: bool,
}

impl Described for Archive {
    const NAME: &'static str = "archive";
    const DOC: &'static str = "an archive extracted into a directory, once per archive content";
    type Params = ArchiveParams;

    fn from_params(p: ArchiveParams, _shell: Shell) -> Result<Self, ParamError> {
        posix_abs("dest", &p.dest)?;
        let sha256 = p
            .sha256
            .as_deref()
            .map(|s| check_sha256(s, "sha256"))
            .transpose()?;
        let source = match (p.src, p.url) {
            (Some(s), None) => {
                posix_abs("src", &s)?;
                Source::Path(trim_path(&s))
            }
            (None, Some(u)) => {
                check_url(&u, "url")?;
                if sha256.is_none() {
                    return Err(ParamError::at("sha256", "`sha256` is required with `url`"));
                }
                Source::Url(u)
            }
            _ => return Err(ParamError::new("give exactly one of `src` and `url`")),
        };
        if let Some(c) = &p.creates {
            posix_abs("creates", c)?;
        }
        let dest = trim_path(&p.dest);
        let id = match &source {
            Source::Path(s) => sha256_hex(s.as_bytes()),
            Source::Url(u) => sha256_hex(u.as_bytes()),
        };
        let marker = format!("{}/.kwin-archive-{}", dest.trim_end_matches('/'), &id[..16]);
        Ok(Archive {
            source,
            sha256,
            dest,
            strip: p.strip_components.unwrap_or(0),
            creates: p.creates.as_deref().map(trim_path),
            marker,
            follow: p.follow.unwrap_or(false),
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        let mut v = super::facts::file::samples();
        v.push(FactSample::linux(fetchers()));
        v
    }
}

impl Archive {
    fn src_fact(&self) -> Option<FileFact> {
        match (&self.source, &self.creates) {
            (Source::Path(s), None) => Some(FileFact::hash(s)),
            _ => None,
        }
    }

    /// The way to `dest` itself: everything on it, `dest` included, must be root's.
    fn route(&self) -> RouteFact {
        RouteFact {
            dir: self.dest.clone(),
        }
    }

    fn shown_source(&self) -> &str {
        match &self.source {
            Source::Path(s) | Source::Url(s) => s,
        }
    }
}

impl Module for Archive {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        let mut v = vec![
            FactQuery::of(&FileFact::meta(&self.dest), shell),
            FactQuery::of(&self.route(), shell),
        ];
        match &self.creates {
            Some(c) => v.push(FactQuery::of(&FileFact::meta(c), shell)),
            None => v.push(FactQuery::of(&FileFact::content(&self.marker), shell)),
        }
        if let Some(f) = self.src_fact() {
            v.push(FactQuery::of(&f, shell));
        }
        if matches!(self.source, Source::Url(_)) {
            v.push(FactQuery::of(&fetchers(), shell));
        }
        v
    }

    fn reads(&self) -> Vec<String> {
        let mut r = vec![self.dest.clone()];
        if let Source::Path(s) = &self.source {
            r.push(s.clone());
        }
        r.extend(self.creates.clone());
        r
    }

    fn plan(&self, facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let followed = match facts.get(&FileFact::meta(&self.dest))? {
            PathState::Dir {
                link_target: Some(t),
                ..
            } => Some(t),
            PathState::Other { kind } if kind.contains("symbolic link") => Some(kind),
            _ => None,
        };
        if let (Some(t), false) = (&followed, self.follow) {
            return Err(super::file::refuse_link(&self.dest, t));
        }
        let way = route::check(&self.dest, &self.dest, &facts.get(&self.route())?, None)?;
        let reason = if let Some(c) = &self.creates {
            if facts.get(&FileFact::meta(c))? != PathState::Absent {
                return Ok(Plan::noop(format!("`{c}` exists")));
            }
            format!("`{c}` does not exist")
        } else {
            // The sha256 the marker must hold.
            let want = match (&self.sha256, self.src_fact()) {
                (Some(s), _) => Some(s.clone()),
                (None, Some(f)) => match facts.get(&f)? {
                    PathState::File(info) => info.sha256,
                    _ => None,
                },
                (None, None) => None,
            };
            let marker = match facts.get(&FileFact::content(&self.marker))? {
                PathState::File(info) => info.text().map(|t| t.trim().to_string()),
                _ => None,
            };
            match (&want, &marker) {
                (Some(w), Some(m)) if w == m => return Ok(Plan::noop("already extracted")),
                (None, _) => format!("`{}` does not exist yet", self.shown_source()),
                (Some(_), Some(_)) => "archive changed since it was extracted".to_string(),
                (Some(_), None) => "not extracted".to_string(),
            }
        };

        // In `dest`, entered by its checked way (created first when missing): `tar -C .`.
        let mut s = way.enter(true, &|m| die(m));
        let mut cleanup = "";
        match &self.source {
            Source::Url(u) => {
                let fetcher = pick_fetcher(&facts.get(&fetchers())?, u)?;
                s.push_str(&format!(
                    "t=$(mktemp) || {}\n",
                    die("cannot create a temporary file")
                ));
                s.push_str(&fetch_verified(
                    fetcher,
                    u,
                    "t",
                    self.sha256.as_deref().unwrap_or_default(),
                ));
                s.push_str("a=\"$t\"\n");
                cleanup = "rm -f -- \"$t\";";
            }
            Source::Path(p) => {
                s.push_str(&format!(
                    "a={}\n[ -f \"$a\" ] || {}\n",
                    sh_quote(p),
                    die(&format!("archive {p} does not exist"))
                ));
                if let Some(sha) = &self.sha256 {
                    s.push_str(&verify_sha256("a", sha, p, ""));
                } else {
                    s.push_str(&format!(
                        "h=$(sha256sum < \"$a\") || {}\n",
                        die(&format!("cannot read {p}"))
                    ));
                }
            }
        }
        let strip = if self.strip > 0 {
            format!(" --strip-components={}", self.strip)
        } else {
            String::new()
        };
        // Name the compression: not every tar (busybox) detects it on extraction.
        s.push_str(
            "case $(od -An -tx1 -N6 \"$a\" | tr -d ' \\n') in\n\
             1f8b*) z=-z ;;\n\
             425a68*) z=-j ;;\n\
             fd377a585a00*) z=-J ;;\n\
             28b52ffd*) z=--zstd ;;\n\
             *) z= ;;\n\
             esac\n",
        );
        s.push_str(&format!(
            "tar -x $z -f \"$a\" -C .{strip} || {}\n",
            die_after(
                cleanup,
                &format!("cannot extract {} into {}", self.shown_source(), self.dest)
            )
        ));
        if !cleanup.is_empty() {
            s.push_str(cleanup);
            s.push('\n');
        }
        match &self.creates {
            Some(c) => s.push_str(&format!(
                "[ -e {} ] || {}\n",
                sh_quote(c),
                die(&format!("extracted, but {c} still does not exist"))
            )),
            // The marker: a new file (`set -C`, an unguessable name) renamed over it, never a
            // write through whatever is at its name.
            None => {
                let m = sh_quote(name_of(&self.marker));
                let t = sh_quote(&crate::temp_name(ctx.nonce, &self.marker));
                let cannot = die_after(
                    &format!("rm -f -- {t};"),
                    &format!("cannot write {}", self.marker),
                );
                s.push_str(&format!(
                    "set -C; umask 022\n\
                     {{ [ -f /proc/self/fd/9 ] && printf '%s\\n' \"${{h%% *}}\" >&9; }} 9>{t} || {cannot}\n\
                     [ ! -L {t} ] && [ -f {t} ] || {cannot}\n\
                     [ -L {m} ] || [ -d {m} ] && {cannot}\n\
                     mv -f -- {t} {m} || {cannot}\n"
                ))
            }
        }
        let mut touched = vec![self.dest.clone()];
        touched.extend(self.creates.clone());
        Ok(Plan::Change(Change {
            action: Action::Create,
            reason,
            diff: Some(format!(
                "{}{}",
                match &followed {
                    Some(t) => format!("→ {} is a link to {t} (follow = true)\n", self.dest),
                    None if way.through_links() => format!(
                        "→ {} is {} (links on the way, in directories of root)\n",
                        self.dest, way.physical
                    ),
                    None => String::new(),
                },
                value_diff(
                    None,
                    Some(&format!(
                        "extract {} into {}",
                        self.shown_source(),
                        self.dest
                    )),
                )
            )),
            steps: vec![Step::Run(s)],
            touches: Touches::Resources(touched),
        }))
    }
}
