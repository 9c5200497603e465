//! Files whose whole content a module owns (`/etc/sysctl.d/99-kwin-*.conf`,
//! `/etc/modules-load.d/*.conf`, apt sources, markers): compare with the probed content and,
//! if different, plan the atomic write.

use super::common::Attrs;
use super::diff::{content_diff, private_mode, sensitive_content_diff};
use super::facts::file::{PathState, RouteFact};
use super::route::{self, name_of};
use super::script::{write_file, Expect, Place, WriteFile};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{ModuleError, Step};
use kwin_engine::transport::Shell;

/// The fact [`ensure_content`] needs besides the file's own: the way to its directory.
pub fn route_query(path: &str, shell: Shell) -> FactQuery {
    FactQuery::of(&RouteFact::parent_of(path), shell)
}

/// A planned rewrite of a managed file.
#[derive(Debug, Clone)]
pub struct Rewrite {
    /// "file missing" or "file differs".
    pub reason: &'static str,
    pub diff: String,
    pub steps: Vec<Step>,
}

/// Plan writing `want` to `path` given its probed state (from a [`Detail::Content`] fact) and
/// the way to its directory ([`route_query`], in `facts`).
/// Keeps an existing file's mode and owner; new files get `new_mode` and missing parents.
/// A file readable by its owner only shows as hashes in the diff.
/// `nonce`: the plan's [`Ctx::nonce`](kwin_engine::module::Ctx::nonce).
///
/// [`Detail::Content`]: super::facts::file::Detail::Content
pub fn ensure_content(
    path: &str,
    st: &PathState,
    facts: &Facts,
    want: &[u8],
    new_mode: u32,
    nonce: &str,
) -> Result<Option<Rewrite>, ModuleError> {
    let (current, expect, attrs, target) = match st {
        PathState::Absent => (
            None,
            Expect::Any,
            Attrs {
                mode: Some(new_mode),
                ..Attrs::default()
            },
            path.to_string(),
        ),
        PathState::File(info) => {
            let same = match (&info.content, &info.sha256) {
                (Some(c), _) => c.as_slice() == want,
                (None, Some(h)) => *h == super::script::sha256_hex(want),
                (None, None) => false,
            };
            if same {
                return Ok(None);
            }
            (
                Some(info),
                Expect::probed(info, private_mode(info.meta.mode)),
                Attrs {
                    mode: Some(info.meta.mode),
                    owner: Some(info.meta.uid.to_string()),
                    group: Some(info.meta.gid.to_string()),
                },
                match &info.link_target {
                    None => path.to_string(),
                    Some(t) => return Err(super::file::refuse_link(path, t)),
                },
            )
        }
        PathState::Other { kind } if kind.contains("symbolic link") => {
            return Err(ModuleError::Precondition(format!(
                "`{path}` is {kind}; kwin does not follow a link at a file it manages"
            )))
        }
        other => {
            return Err(ModuleError::Precondition(format!(
                "`{path}` is not a regular file ({})",
                other.kind()
            )))
        }
    };
    let uid = current.map(|i| i.meta.uid.to_string());
    let route = facts.get(&RouteFact::parent_of(path))?;
    let way = route::check(
        path,
        &super::common::parent_dir(path),
        &route,
        uid.as_deref(),
    )?;
    Ok(Some(Rewrite {
        reason: if current.is_none() {
            "file missing"
        } else {
            "file differs"
        },
        diff: format!(
            "{}{}",
            way.note(name_of(path)),
            if attrs.mode.is_some_and(private_mode) {
                sensitive_content_diff(path, current, want)
            } else {
                content_diff(path, current, want)
            }
        ),
        steps: write_file(&WriteFile {
            path: &target,
            at: Place::In(&way),
            content: want,
            attrs,
            expect,
            make_parents: true,
            nonce,
            me: None,
        }),
    }))
}
