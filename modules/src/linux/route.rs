//! Where a write may land: the way to the directory of a managed path, checked before a step
//! is planned and pinned when it runs.
//!
//! kwin writes as root next to accounts it does not trust. A name is only as safe as the
//! directories that hold it and every directory on the way to them: whoever may rename
//! entries in one of them can swap what is there for a link, and root's write, `chown` or
//! `chmod` lands wherever that link points. So, for every file, line, directory, download and
//! archive a step changes:
//!
//! - **The probe walks the way** ([`RouteFact`]: one name at a time from `/`, links read and
//!   walked on, with builtins but one `readlink` per link), telling every directory on it that
//!   the scripts' account does not own and every link it went through.
//! - **[`check`] refuses** a way with a directory owned by an account other than root or the
//!   account the file will belong to (the plan's `owner`, else the file's current owner, else
//!   the scripts' account), and a way through a link that sits in a directory root does not
//!   own (whoever owns that directory decides where the link points — the file's own account
//!   included, who could otherwise have root create a file of theirs in `/etc`). A link at the
//!   managed name itself is the module's to refuse, unless the plan says `follow = true`.
//! - **The step pins the directory** ([`Way::enter`]): `cd -P` to it and a check, with the
//!   shell's own `$PWD`, that it is the physical directory the probe reached (and, when the
//!   scripts' account owned it or creates it, `[ -O . ]`), then every name is used relative
//!   to it: a link swapped in on the way after the probe makes the step refuse, and one
//!   swapped in after the step entered the directory changes nothing for it. The engine
//!   restores the batch's working directory after an inline step.
//!
//! What remains: an account may still replace what kwin wrote in a directory it owns, after
//! kwin wrote it (kwin cannot prevent that, and reports it as drift on the next run), and a
//! FIFO or device swapped in at the very moment a step opens a managed name to fix its mode
//! or owner (after checking it is a regular file) may stall that step until its timeout.

use super::facts::file::{Meta, Route, RouteFact};
use kwin_engine::fact::Facts;
use kwin_engine::module::ModuleError;
use kwin_engine::quote::sh_quote;

/// A checked way to a directory, for a step to enter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Way {
    /// The directory as the plan names it.
    pub dir: String,
    /// Its physical path, as the probe reached it (and the missing part, to be created).
    pub physical: String,
    /// Whether the scripts' account owns it (or creates it): the step checks `[ -O . ]`.
    pub own: bool,
    /// Part of it does not exist yet: the step creates it first (`mkdir -p`).
    pub create: bool,
}

impl Way {
    /// Whether the way goes through links (the physical directory is another path).
    pub fn through_links(&self) -> bool {
        self.physical != self.dir
    }

    /// Shell that enters the directory (creating what is missing of it when `make`), or
    /// gives up with `fail` (a failure branch, `{ ...; return 1; }` or `exit 1`): the way
    /// must lead where the probe found it led. Uses `$__kw_p`'s neighbours only by name
    /// afterwards.
    pub fn enter(&self, make: bool, fail: &dyn Fn(&str) -> String) -> String {
        let d = sh_quote(&self.dir);
        let mut s = String::new();
        if make && self.create {
            s.push_str(&format!(
                "[ -d {d} ] || mkdir -p -- {d} || {}\n",
                fail(&format!("cannot create directory {}", self.dir))
            ));
        }
        let own = if self.own { " && [ -O . ]" } else { "" };
        s.push_str(&format!(
            "cd -P -- {d} && [ \"$PWD\" = {} ]{own} || {}\n",
            sh_quote(&self.physical),
            fail(&format!(
                "{} is not the directory kwin probed (something on the way to it was replaced since, or another account made it); refusing",
                self.dir
            ))
        ));
        s
    }

    /// A diff line saying where a name in this directory really is, when links lead there.
    pub fn note(&self, name: &str) -> String {
        if self.through_links() {
            format!(
                "→ {}/{name} is {}/{name} (links on the way, in directories of root)\n",
                self.dir.trim_end_matches('/'),
                self.physical.trim_end_matches('/')
            )
        } else {
            String::new()
        }
    }
}

/// The account a managed path belongs to, for [`check`]: the plan's owner (name or uid), the
/// current owner's uid, or none (a new file of the scripts' account).
pub type Account<'a> = Option<&'a str>;

/// The checked way to the parent directory of `path`, a managed file or directory, for the
/// account it belongs to: `owner` from the plan, else the current owner's uid (`current`),
/// else root's rules. Its route fact is [`RouteFact::parent_of`] `path`.
pub fn way_to_parent(
    path: &str,
    owner: Option<&str>,
    current: Option<&Meta>,
    facts: &Facts,
) -> Result<Way, ModuleError> {
    let uid = current.map(|m| m.uid.to_string());
    let account = owner.or(uid.as_deref());
    check(
        path,
        &super::common::parent_dir(path),
        &facts.get(&RouteFact::parent_of(path))?,
        account,
    )
}

/// The way to `dir` (the directory of `path`) as the probe found it, if kwin may write
/// there for `account`.
pub fn check(
    path: &str,
    dir: &str,
    route: &Route,
    account: Account<'_>,
) -> Result<Way, ModuleError> {
    let refuse = |m: String| Err(ModuleError::Precondition(m));
    if let Some(e) = &route.error {
        return refuse(format!("cannot reach the directory of `{path}`: {e}"));
    }
    let trusted = |meta: &super::facts::file::Meta| {
        meta.uid == 0 || account.is_some_and(|a| meta.owner_is(a))
    };
    for l in route.links.iter().filter(|l| !l.in_own_dir) {
        let holder = super::common::parent_dir(&l.path);
        let owner = route.foreign.iter().find(|d| d.path == holder);
        if owner.is_some_and(|d| d.meta.uid == 0) {
            continue;
        }
        let who = owner.map_or("another account".to_string(), |d| {
            format!("{} (uid {})", d.meta.user, d.meta.uid)
        });
        return refuse(format!(
            "`{path}` is reached through the symbolic link `{}`, in `{holder}`, which {who} owns: that account decides where the link points, so kwin refuses to write through it (name the path without the link, or let root own `{holder}`)",
            l.path
        ));
    }
    for d in &route.foreign {
        if !trusted(&d.meta) {
            return refuse(format!(
                "`{}`, on the way to `{path}`, belongs to {} (uid {}), neither root nor the owner `{path}` is to have: that account could swap what kwin writes there for a link to any file, so kwin refuses; set `owner = \"{}\"` if the file is theirs, or manage a path outside their directories",
                d.path, d.meta.user, d.meta.uid, d.meta.user
            ));
        }
    }
    if let Some(m) = &route.missing {
        if m.split('/').any(|c| c == ".." || c == ".") {
            return refuse(format!(
                "cannot create the directory of `{path}`: its missing part `{m}` holds `.` or `..`"
            ));
        }
    }
    Ok(Way {
        dir: dir.to_string(),
        physical: route.physical(),
        own: route.own_dir(),
        create: route.missing.is_some(),
    })
}

/// The last name of `path` (a trimmed absolute path that is not `/`).
pub fn name_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::super::facts::file::{ForeignDir, Meta, RouteLink};
    use super::*;

    fn meta(uid: u32, user: &str) -> Meta {
        Meta {
            mode: 0o755,
            uid,
            user: user.into(),
            gid: uid,
            group: user.into(),
            size: 0,
        }
    }

    fn route(foreign: Vec<(&str, u32, &str)>, links: Vec<(&str, bool)>) -> Route {
        Route {
            reached: "/srv/app/conf".into(),
            missing: None,
            error: None,
            links: links
                .into_iter()
                .map(|(p, own)| RouteLink {
                    path: p.into(),
                    in_own_dir: own,
                })
                .collect(),
            foreign: foreign
                .into_iter()
                .map(|(p, uid, u)| ForeignDir {
                    path: p.into(),
                    meta: meta(uid, u),
                })
                .collect(),
        }
    }

    #[test]
    fn directories_of_other_accounts_are_refused_unless_the_file_is_theirs() {
        let r = route(vec![("/srv/app", 1001, "app")], vec![]);
        let e = check("/srv/app/conf/x", "/srv/app/conf", &r, None).expect_err("refused");
        assert!(
            e.to_string().contains("`/srv/app`") && e.to_string().contains("app (uid 1001)"),
            "{e}"
        );
        let w = check("/srv/app/conf/x", "/srv/app/conf", &r, Some("app")).expect("theirs");
        assert_eq!((w.physical.as_str(), w.own), ("/srv/app/conf", true));
        assert!(check("/srv/app/conf/x", "/srv/app/conf", &r, Some("1001")).is_ok());
        // Root's directories are always fine.
        let r = route(vec![("/srv/app/conf", 0, "root")], vec![]);
        let w = check("/srv/app/conf/x", "/srv/app/conf", &r, None).expect("root's");
        assert!(!w.own, "not the scripts' own: no [ -O . ] at the step");
    }

    #[test]
    fn links_count_only_in_directories_of_root() {
        // In the scripts' own directory, or one of root's: followed, and told in the diff.
        let mut r = route(vec![], vec![("/var/run", true)]);
        r.reached = "/run/x".into();
        let w = check("/var/run/x/f", "/var/run/x", &r, None).expect("root's link");
        assert!(
            w.note("f").contains("/var/run/x/f is /run/x/f"),
            "{}",
            w.note("f")
        );
        let r = route(vec![("/srv", 0, "root")], vec![("/srv/data", false)]);
        assert!(check("/srv/data/f", "/srv/data", &r, None).is_ok());
        // In the file's own account's directory: refused all the same.
        let r = route(
            vec![("/home/app", 1001, "app")],
            vec![("/home/app/bin", false)],
        );
        let e = check("/home/app/bin/f", "/home/app/bin", &r, Some("app")).expect_err("refused");
        assert!(
            e.to_string().contains("symbolic link `/home/app/bin`"),
            "{e}"
        );
    }

    #[test]
    fn errors_and_missing_parts() {
        let mut r = route(vec![], vec![]);
        r.error = Some("/srv/file is not a directory".into());
        assert!(check("/srv/file/x", "/srv/file", &r, None).is_err());
        let mut r = route(vec![], vec![]);
        r.reached = "/srv".into();
        r.missing = Some("a/b".into());
        let w = check("/srv/a/b/f", "/srv/a/b", &r, None).expect("missing");
        assert_eq!(
            (w.physical.as_str(), w.own, w.create),
            ("/srv/a/b", true, true)
        );
        r.missing = Some("a/../b".into());
        assert!(check("/srv/a/../b/f", "/srv/a/../b", &r, None).is_err());
    }
}
