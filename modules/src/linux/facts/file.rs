//! What is at a path: kind, mode, owner, size, and on request the sha256 and (small files)
//! the content.
//!
//! Symbolic links are followed (`stat -L`), as `chmod`/`chown` follow them; the resolved
//! target is reported so writers replace the target, not the link.
//!
//! In a probe these facts are answered together by the engine's path readers
//! ([`kwin_engine::fact::paths`]: one `stat` for every path, one `sha256sum` for every file,
//! content only where needed); [`Fact::command`] prints the same answer for one path alone.

use super::{b64_decode, kv_get, kv_lines, ok_stdout};
use kwin_engine::fact::{Fact, FactError, FactOutput, PathQuery, PathRead, STAT_FORMAT};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;

/// Files up to this size are read whole for diffs; larger ones only hashed.
pub const CONTENT_LIMIT: u64 = kwin_engine::fact::CONTENT_LIMIT;

/// How much to read about a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detail {
    /// Kind, mode, owner, size.
    Meta,
    /// Meta + sha256 of a regular file.
    Hash,
    /// Hash + the content of a regular file up to [`CONTENT_LIMIT`].
    Content,
    /// Hash + the content only when the file's sha256 is not this one (lowercase hex): a
    /// writer that knows what it wants gets the content for a diff only when it differs.
    ContentUnless(String),
}

/// The state of one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileFact {
    pub path: String,
    pub detail: Detail,
}

impl FileFact {
    pub fn meta(path: impl Into<String>) -> Self {
        FileFact {
            path: path.into(),
            detail: Detail::Meta,
        }
    }
    pub fn hash(path: impl Into<String>) -> Self {
        FileFact {
            path: path.into(),
            detail: Detail::Hash,
        }
    }
    pub fn content(path: impl Into<String>) -> Self {
        FileFact {
            path: path.into(),
            detail: Detail::Content,
        }
    }
    /// The content only if its sha256 is not `sha256` (the hash of the wanted content).
    pub fn content_unless(path: impl Into<String>, sha256: impl Into<String>) -> Self {
        FileFact {
            path: path.into(),
            detail: Detail::ContentUnless(sha256.into()),
        }
    }
    fn hashed(&self) -> bool {
        self.detail != Detail::Meta
    }
}

/// Ownership and permissions (of the link target for symbolic links).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// Permission bits including setuid/setgid/sticky (`stat -c %a`).
    pub mode: u32,
    pub uid: u32,
    /// User name, or `UNKNOWN` when the uid has none.
    pub user: String,
    pub gid: u32,
    pub group: String,
    pub size: u64,
}

impl Meta {
    /// Whether `want` (a name or a numeric id) names this owner.
    pub fn owner_is(&self, want: &str) -> bool {
        want == self.user || want.parse::<u32>().ok() == Some(self.uid)
    }
    /// Whether `want` (a name or a numeric id) names this group.
    pub fn group_is(&self, want: &str) -> bool {
        want == self.group || want.parse::<u32>().ok() == Some(self.gid)
    }
}

/// A regular file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    pub meta: Meta,
    /// Lowercase hex, when asked for ([`Detail::Hash`] or more).
    pub sha256: Option<String>,
    /// Whole content, when asked for and the file is at most [`CONTENT_LIMIT`] bytes.
    pub content: Option<Vec<u8>>,
    /// The resolved target when the path is a symbolic link.
    pub link_target: Option<String>,
}

impl FileInfo {
    /// The content as text, if it was read and is UTF-8 without NUL bytes.
    pub fn text(&self) -> Option<&str> {
        let c = self.content.as_deref()?;
        if c.contains(&0) {
            return None;
        }
        std::str::from_utf8(c).ok()
    }
}

/// What is at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathState {
    Absent,
    File(FileInfo),
    Dir {
        meta: Meta,
        link_target: Option<String>,
    },
    /// Something else: device, fifo, socket, or a symbolic link to nothing.
    Other {
        kind: String,
    },
}

impl PathState {
    /// A short noun for messages.
    pub fn kind(&self) -> &str {
        match self {
            PathState::Absent => "nothing",
            PathState::File(_) => "a regular file",
            PathState::Dir { .. } => "a directory",
            PathState::Other { kind } => kind,
        }
    }
}

impl Fact for FileFact {
    type Output = PathState;

    fn key(&self) -> String {
        match &self.detail {
            Detail::Meta => format!("file.meta:{}", self.path),
            Detail::Hash => format!("file.sha256:{}", self.path),
            Detail::Content => format!("file.content:{}", self.path),
            Detail::ContentUnless(h) => format!("file.content-unless:{h}:{}", self.path),
        }
    }

    fn path_query(&self) -> Option<PathQuery> {
        Some(PathQuery {
            path: self.path.clone(),
            read: match &self.detail {
                Detail::Meta => PathRead::Meta,
                Detail::Hash => PathRead::Hash,
                Detail::Content => PathRead::Content,
                Detail::ContentUnless(h) => PathRead::ContentUnless(h.clone()),
            },
        })
    }

    fn command(&self, _shell: Shell) -> String {
        let mut s = format!(
            "p={}\n\
             if [ -L \"$p\" ]; then printf 'link='; readlink -f -- \"$p\" | base64 | tr -d '\\n'; echo; fi\n\
             if [ -d \"$p\" ]; then t=dir\n\
             elif [ -f \"$p\" ]; then t=file\n\
             elif [ -e \"$p\" ]; then t=other\n\
             elif [ -L \"$p\" ]; then t=dangling\n\
             else t=absent\n\
             fi\n\
             echo \"type=$t\"\n\
             case $t in absent|dangling) ;; *) s=$(stat -L -c '{STAT_FORMAT}' -- \"$p\") || exit 1; echo \"stat=$s\" ;; esac\n",
            sh_quote(&self.path)
        );
        if self.hashed() {
            s.push_str(
                "if [ \"$t\" = file ]; then h=$(sha256sum < \"$p\") || exit 1; echo \"sha256=${h%% *}\"; fi\n",
            );
        }
        let unless = match &self.detail {
            Detail::ContentUnless(h) => format!(" && [ \"${{h%% *}}\" != {} ]", sh_quote(h)),
            _ => String::new(),
        };
        if matches!(self.detail, Detail::Content | Detail::ContentUnless(_)) {
            s.push_str(&format!(
                "if [ \"$t\" = file ] && [ \"${{s##*:}}\" -le {CONTENT_LIMIT} ]{unless}; then printf 'content='; base64 < \"$p\" | tr -d '\\n'; echo; fi\n"
            ));
        }
        s
    }

    fn parse(&self, out: &FactOutput) -> Result<PathState, FactError> {
        parse_path_state(ok_stdout(out)?)
    }
}

/// The account the host's scripts run as (after `become`): the owner, and the group unless
/// the directory says otherwise (setgid), of every file and directory they create. Asked
/// only by writers that may then skip a `chown` (a process) when the owner and group wanted
/// are this account's, which the step confirms on the host (`[ -O ]`, `[ -G ]`) before it
/// leaves them as they are.
///
/// Read as the owner of `/proc/self/.` (the process directory of the probe's one `stat`,
/// owned by its effective uid and gid) by the probe's path readers: no process of its own.
/// `None` when that is not a directory (no `/proc`): the account is unknown and writers set
/// every owner and group they are given, as without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdentityFact;

/// The path [`IdentityFact`] reads.
pub const SELF_DIR: &str = "/proc/self/.";

impl Fact for IdentityFact {
    type Output = Option<Meta>;

    fn key(&self) -> String {
        "identity".into()
    }

    fn path_query(&self) -> Option<PathQuery> {
        Some(PathQuery {
            path: SELF_DIR.into(),
            read: PathRead::Meta,
        })
    }

    fn command(&self, shell: Shell) -> String {
        FileFact::meta(SELF_DIR).command(shell)
    }

    fn parse(&self, out: &FactOutput) -> Result<Option<Meta>, FactError> {
        Ok(match parse_path_state(ok_stdout(out)?)? {
            PathState::Dir { meta, .. } => Some(meta),
            _ => None,
        })
    }
}

/// The way to a directory: walked one name at a time from `/` by the probe
/// ([`kwin_engine::fact::route_walk`]), links read and walked on, so every directory on the
/// way is one whose entries decide where a write below it lands. Writers check it
/// ([`super::super::route`]) and pin their step to the directory it reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteFact {
    /// Absolute path of the directory.
    pub dir: String,
}

impl RouteFact {
    /// The way to the directory that holds `path`.
    pub fn parent_of(path: &str) -> RouteFact {
        RouteFact {
            dir: crate::paths::parent_dir(path),
        }
    }
}

/// A directory on a [`Route`] that the scripts' account does not own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignDir {
    /// Its physical path.
    pub path: String,
    pub meta: Meta,
}

/// A symbolic link a [`Route`] went through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteLink {
    /// The link's own path (in the physical directory holding it).
    pub path: String,
    /// Whether the scripts' account owns the directory holding it (else that directory is
    /// among [`Route::foreign`]).
    pub in_own_dir: bool,
}

/// What the walk to a directory found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The physical path of where the walk stands: the directory itself, or, when part of it
    /// is missing, its deepest existing ancestor.
    pub reached: String,
    /// The rest of the way that does not exist yet (`a/b`), to be created.
    pub missing: Option<String>,
    /// Something on the way is not a directory, or the links loop.
    pub error: Option<String>,
    pub links: Vec<RouteLink>,
    /// Every directory on the way (the reached one included) that the scripts' account does
    /// not own, in the order walked.
    pub foreign: Vec<ForeignDir>,
}

impl Route {
    /// The physical path the directory has (once what is missing is created).
    pub fn physical(&self) -> String {
        match &self.missing {
            Some(m) => format!("{}/{m}", self.reached.trim_end_matches('/')),
            None => self.reached.clone(),
        }
    }
    /// Whether the scripts' account owns the directory itself (or will, having created it).
    pub fn own_dir(&self) -> bool {
        self.missing.is_some() || !self.foreign.iter().any(|d| d.path == self.reached)
    }
}

impl Fact for RouteFact {
    type Output = Route;

    fn key(&self) -> String {
        format!("route:{}", self.dir)
    }

    fn path_query(&self) -> Option<PathQuery> {
        Some(PathQuery {
            path: self.dir.clone(),
            read: PathRead::Route,
        })
    }

    /// The walk alone, each finding printed as the probe's path readers render it.
    fn command(&self, _shell: Shell) -> String {
        use kwin_engine::fact::RouteEvent;
        let b64 = |v: &str| format!("$(printf '%s' {v} | base64 | tr -d '\\n')");
        let walk = kwin_engine::fact::route_walk(&self.dir, &|ev| {
            match ev {
            RouteEvent::Dir => format!(
                "printf 'dir=%s:%s\\n' \"{}\" \"$(stat -L -c '{STAT_FORMAT}' -- \"$PWD\" </dev/null)\"",
                b64("\"$PWD\"")
            ),
            RouteEvent::Link { owned } => format!(
                "printf 'link={}:%s\\n' \"{}\"",
                if owned { "o" } else { "x" },
                b64("\"$PWD/$__kw_wc\"")
            ),
            RouteEvent::Missing => format!("printf 'missing=%s\\n' \"{}\"", b64("\"$__kw_wm\"")),
            RouteEvent::Error => format!("printf 'error=%s\\n' \"{}\"", b64("\"$__kw_we\"")),
            RouteEvent::Reached => format!("printf 'reached=%s\\n' \"{}\"", b64("\"$PWD\"")),
        }
        });
        format!("echo type=route\n{walk}")
    }

    fn parse(&self, out: &FactOutput) -> Result<Route, FactError> {
        parse_route(ok_stdout(out)?)
    }
}

/// Parse a [`RouteFact`] answer.
pub fn parse_route(text: &str) -> Result<Route, FactError> {
    let kv = kv_lines(text)?;
    if kv_get(&kv, "type") != Some("route") {
        return Err(FactError::Parse("not a route answer".into()));
    }
    let utf8 = |b: &str, what: &str| -> Result<String, FactError> {
        String::from_utf8(b64_decode(b)?)
            .map_err(|_| FactError::Parse(format!("the {what} on the way is not UTF-8")))
    };
    let reached = kv_get(&kv, "reached")
        .ok_or_else(|| FactError::Parse("no `reached=` line".into()))
        .and_then(|b| utf8(b, "directory reached"))?;
    let missing = kv_get(&kv, "missing")
        .map(|b| utf8(b, "missing part"))
        .transpose()?;
    let error = kv_get(&kv, "error").map(|b| utf8(b, "error")).transpose()?;
    let mut links = Vec::new();
    let mut foreign = Vec::new();
    for (k, v) in &kv {
        match *k {
            "link" => {
                let (own, path) = v
                    .split_once(':')
                    .ok_or_else(|| FactError::Parse(format!("bad link line `{v}`")))?;
                links.push(RouteLink {
                    path: utf8(path, "link")?,
                    in_own_dir: own == "o",
                });
            }
            "dir" => {
                let (path, st) = v
                    .split_once(':')
                    .ok_or_else(|| FactError::Parse(format!("bad dir line `{v}`")))?;
                foreign.push(ForeignDir {
                    path: utf8(path, "directory")?,
                    meta: parse_stat(st)?,
                });
            }
            _ => {}
        }
    }
    Ok(Route {
        reached,
        missing,
        error,
        links,
        foreign,
    })
}

/// Parse the output of [`FileFact`]'s command.
pub fn parse_path_state(text: &str) -> Result<PathState, FactError> {
    let kv = kv_lines(text)?;
    let kind = kv_get(&kv, "type").ok_or_else(|| FactError::Parse("no `type=` line".into()))?;
    let link_target = match kv_get(&kv, "link") {
        Some(b) if !b.is_empty() => {
            let raw = b64_decode(b)?;
            let s = String::from_utf8(raw)
                .map_err(|_| FactError::Parse("link target is not UTF-8".into()))?;
            Some(s.strip_suffix('\n').unwrap_or(&s).to_string())
        }
        _ => None,
    };
    let meta = || -> Result<Meta, FactError> {
        let s = kv_get(&kv, "stat").ok_or_else(|| FactError::Parse("no `stat=` line".into()))?;
        parse_stat(s)
    };
    match kind {
        "absent" => Ok(PathState::Absent),
        "dangling" => Ok(PathState::Other {
            kind: "a dangling symbolic link".into(),
        }),
        "other" => Ok(PathState::Other {
            kind: "a special file".into(),
        }),
        "dir" => Ok(PathState::Dir {
            meta: meta()?,
            link_target,
        }),
        "file" => {
            let sha256 = match kv_get(&kv, "sha256") {
                Some(h) if h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()) => {
                    Some(h.to_ascii_lowercase())
                }
                Some(h) => return Err(FactError::Parse(format!("bad sha256 `{h}`"))),
                None => None,
            };
            let content = kv_get(&kv, "content").map(b64_decode).transpose()?;
            Ok(PathState::File(FileInfo {
                meta: meta()?,
                sha256,
                content,
                link_target,
            }))
        }
        other => Err(FactError::Parse(format!("unknown type `{other}`"))),
    }
}

/// Parse `stat -c '%a:%u:%U:%g:%G:%s'` output.
pub fn parse_stat(s: &str) -> Result<Meta, FactError> {
    let bad = || FactError::Parse(format!("bad stat output `{s}`"));
    let f: Vec<&str> = s.trim().split(':').collect();
    let [mode, uid, user, gid, group, size] = f.as_slice() else {
        return Err(bad());
    };
    Ok(Meta {
        mode: u32::from_str_radix(mode, 8).map_err(|_| bad())?,
        uid: uid.parse().map_err(|_| bad())?,
        user: user.to_string(),
        gid: gid.parse().map_err(|_| bad())?,
        group: group.to_string(),
        size: size.parse().map_err(|_| bad())?,
    })
}

/// One sample of each kind of file fact (for the parser tests and the fuzz target).
pub fn samples() -> Vec<crate::table::FactSample> {
    use crate::table::FactSample;
    vec![
        FactSample::linux(FileFact::meta("/etc/motd")),
        FactSample::linux(FileFact::hash("/etc/motd")),
        FactSample::linux(FileFact::content("/etc/motd")),
        FactSample::linux(FileFact::content_unless("/etc/motd", "0".repeat(64))),
        FactSample::linux(IdentityFact),
        FactSample::linux(RouteFact::parent_of("/etc/motd")),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::out;
    use super::*;

    // Captured: the command under dash on Debian 12 (coreutils) for a file holding
    // "hello world\n".
    const HOSTNAME: &str = "type=file\nstat=644:0:root:0:root:12\nsha256=a948904f2f0f479b8f8197694b30184b0d2ed1c1cd2a1ec0fb85d299a192a447\ncontent=aGVsbG8gd29ybGQK\n";

    #[test]
    fn identity_is_the_owner_of_the_probe_process() {
        let me = IdentityFact
            .parse(&out("type=dir\nstat=555:1000:kwuser:1000:kwuser:0\n", 0))
            .expect("parse")
            .expect("known");
        assert_eq!((me.uid, me.user.as_str(), me.gid), (1000, "kwuser", 1000));
        assert!(me.owner_is("kwuser") && me.owner_is("1000") && me.group_is("kwuser"));
        // No /proc: unknown.
        assert_eq!(IdentityFact.parse(&out("type=absent\n", 0)), Ok(None));
        // The real thing: this test's own uid.
        let o = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(IdentityFact.command(Shell::Posix))
            .output()
            .expect("sh");
        let got = IdentityFact
            .parse(&out(&String::from_utf8_lossy(&o.stdout), 0))
            .expect("parse")
            .expect("known");
        let uid = std::process::Command::new("id")
            .arg("-u")
            .output()
            .expect("id");
        assert_eq!(
            got.uid.to_string(),
            String::from_utf8_lossy(&uid.stdout).trim()
        );
    }

    #[test]
    fn regular_file_with_content() {
        let st = FileFact::content("/etc/hostname")
            .parse(&out(HOSTNAME, 0))
            .expect("parse");
        let PathState::File(f) = st else {
            panic!("not a file: {st:?}")
        };
        assert_eq!(f.meta.mode, 0o644);
        assert!(f.meta.owner_is("root") && f.meta.owner_is("0") && !f.meta.owner_is("1"));
        assert!(f.meta.group_is("root"));
        assert_eq!(f.text(), Some("hello world\n"));
        assert_eq!(f.sha256.as_deref().map(str::len), Some(64));
        assert_eq!(f.link_target, None);
    }

    #[test]
    fn directory_symlink_and_setuid() {
        // Captured: `/bin` on Debian 12 (merged /usr) is a link to /usr/bin. Mode changed to
        // 4755 to cover special bits.
        let st = parse_path_state("link=L3Vzci9iaW4K\ntype=dir\nstat=4755:0:root:0:root:36864\n")
            .expect("parse");
        assert_eq!(
            st,
            PathState::Dir {
                meta: Meta {
                    mode: 0o4755,
                    uid: 0,
                    user: "root".into(),
                    gid: 0,
                    group: "root".into(),
                    size: 36864
                },
                link_target: Some("/usr/bin".into())
            }
        );
    }

    #[test]
    fn absent_dangling_special() {
        assert_eq!(parse_path_state("type=absent\n"), Ok(PathState::Absent));
        assert!(matches!(
            parse_path_state("link=\ntype=dangling\n"),
            Ok(PathState::Other { .. })
        ));
        assert!(matches!(
            parse_path_state("type=other\nstat=666:0:root:0:root:0\n"),
            Ok(PathState::Other { .. })
        ));
    }

    #[test]
    fn large_or_binary_file_has_no_text() {
        let st = parse_path_state("type=file\nstat=755:1000:UNKNOWN:1000:UNKNOWN:300000\nsha256=8F434346648F6B96DF89DDA901C5176B10A6D83961DD3C1AC88B59B2DC327AA4\n").expect("parse");
        let PathState::File(f) = st else {
            panic!("not a file")
        };
        assert_eq!(f.content, None);
        assert_eq!(f.text(), None);
        assert!(f.meta.owner_is("1000"));
        assert_eq!(
            f.sha256.as_deref(),
            Some("8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4")
        );
        let bin =
            parse_path_state("type=file\nstat=644:0:root:0:root:3\ncontent=AAEC\n").expect("parse");
        let PathState::File(f) = bin else {
            panic!("not a file")
        };
        assert_eq!(f.text(), None);
    }

    #[test]
    fn failures_and_garbage() {
        let mut o = out("type=file\n", 1);
        o.stderr = b"stat: cannot statx '/root/x': Permission denied\n".to_vec();
        let err = FileFact::meta("/root/x").parse(&o).expect_err("must fail");
        assert!(err.to_string().contains("Permission denied"), "{err}");
        assert!(parse_path_state("garbage").is_err());
        assert!(parse_path_state("type=file\n").is_err());
        assert!(parse_path_state("type=file\nstat=64x:0:root:0:root:1\n").is_err());
        assert!(parse_path_state("type=file\nstat=644:0:root:0:root:1\nsha256=zz\n").is_err());
        assert!(parse_path_state("type=fifo\n").is_err());
    }

    #[test]
    fn keys_name_detail_and_path() {
        assert_eq!(FileFact::meta("/a b").key(), "file.meta:/a b");
        assert_eq!(FileFact::hash("/a").key(), "file.sha256:/a");
        assert_eq!(FileFact::content("/a").key(), "file.content:/a");
    }
}
