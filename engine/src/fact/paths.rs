//! Path questions answered together: the probe's path readers.
//!
//! A [`PathQuery`] asks what is at one path of a POSIX host (kind, mode, owner, size, and on
//! request the sha256 and the content). A probe answers all of its path queries with a fixed
//! number of processes, however many paths it asks about: the kind of each path is found
//! with shell builtins (`[ -L ]`, `[ -d ]`, ...), ONE `stat` reads every existing path, ONE
//! `sha256sum` hashes every regular file asked for a hash, and ONE `head -v` reads the files
//! whose content is needed: always for [`PathRead::Content`], and for
//! [`PathRead::ContentUnless`] only when the file's hash differs from the one given (the
//! controller knows the hash of the content it wants, so a file that already matches is
//! never sent back). `head -v` puts `==> NAME <==` before each file (and a newline between
//! them, GNU and busybox alike); content may hold such a line too, so each piece is the one
//! that ends where the next file's header starts AND holds the file's hash as `sha256sum`
//! gave it (a file larger than the limit: exactly the limit + 1 bytes). A piece that fits no
//! header (the file changed between the two reads) is an error of that file. Should `head`
//! fail, each file is read again on its own (`c:<j>`). Only symbolic links cost a
//! `readlink` each. No subshell per path.
//!
//! Output (stdout, between `@@kwin:<nonce>:paths` and `@@kwin:<nonce>:paths:end`): records,
//! each starting with `\n@@kwin:<nonce>:` and a tag, in this order:
//!
//! ```text
//! l:<j>           the resolved target of query j's symbolic link (readlink -f output)
//! t:<j>:<kind>    dir | file | other | dangling | absent
//! S               one `stat` line per existing path, in query order
//!   or s:<rc>     the same one path at a time (when the one call failed for some path)
//! H               one `sha256sum` line per file asked for a hash, in query order
//!   or h:<rc>     one file at a time
//! C:<j> <j>...    `head -v` of those queries' files, each at most CONTENT_LIMIT + 1 bytes
//!   or, after F   (`head` failed) for each of them:
//! c:<j>           query j's content (at most CONTENT_LIMIT + 1 bytes), then r:<rc>
//! ```
//!
//! [`answers`] turns that into one [`FactOutput`] per query, in the `key=value` format a
//! standalone file fact prints (`link=`, `type=`, `stat=`, `sha256=`, `content=`, base64 for
//! bytes), so parsers do not care how the answer was gathered. Bodies are framed by markers
//! carrying the run's random nonce, so file content cannot forge them.

use super::output::{find, FactError, FactOutput};
use crate::quote::sh_quote;
use base64::Engine;

/// Files up to this size are sent back whole; larger ones only hashed.
pub const CONTENT_LIMIT: u64 = 256 * 1024;

/// `stat` format of a path's attributes: `mode:uid:user:gid:group:size`.
pub const STAT_FORMAT: &str = "%a:%u:%U:%g:%G:%s";

/// What to read about one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathRead {
    /// Kind, mode, owner, size.
    Meta,
    /// Meta + the sha256 of a regular file.
    Hash,
    /// Hash + the content of a regular file up to [`CONTENT_LIMIT`].
    Content,
    /// Hash + the content, only when the sha256 (lowercase hex) is not this one.
    ContentUnless(String),
    /// The way to the directory at the path, walked one name at a time from `/` (see
    /// [`route_walk`]): the directory it reaches, what is missing of it, the links on the way
    /// and every directory on the way that the scripts' account does not own, with its owner.
    Route,
}

/// A question about one path of a POSIX host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathQuery {
    pub path: String,
    pub read: PathRead,
}

impl PathQuery {
    fn hashed(&self) -> bool {
        !matches!(self.read, PathRead::Meta | PathRead::Route)
    }
    fn route(&self) -> bool {
        self.read == PathRead::Route
    }
}

/// Most symbolic links a route walk follows (the kernel's own limit, `MAXSYMLINKS`).
pub const MAX_LINKS: usize = 40;

/// The shell code that walks the way to the directory `dir` (absolute), one name at a time
/// from `/`, with builtins only: `cd -P` into each directory (so what it finds is what the
/// kernel would, `..` included), `[ -L ]` for each name, `[ -O .]` for each directory looked
/// in. A symbolic link is read (`readlink`, the walk's only process) and its target walked
/// on in its place, so the directories on the way to the target count too. For each
/// directory looked in (and the one reached) that the scripts' account does not own, `dir`
/// is called with its physical path; for each link followed, `link` with its path and
/// whether the scripts' account owns the directory holding it (`o` or `x`); a name that
/// does not exist ends the walk with `missing` (the rest of the way); anything else on
/// the way (a file, a loop of links) with `error`. Then `reached` with the physical path
/// of where the walk stands. The caller saves and restores the working directory.
/// Variables: `__kw_w*`.
pub fn route_walk(dir: &str, call: &dyn Fn(RouteEvent) -> String) -> String {
    format!(
        "__kw_wr={}; __kw_wn=0; __kw_we=; __kw_wm=\n\
         if cd / ; then while :; do\n\
         case $__kw_wr in /*) __kw_wr=${{__kw_wr#/}}; continue ;; esac\n\
         [ -n \"$__kw_wr\" ] || break\n\
         __kw_wc=${{__kw_wr%%/*}}\n\
         case $__kw_wr in */*) __kw_wr=${{__kw_wr#*/}} ;; *) __kw_wr= ;; esac\n\
         case $__kw_wc in ''|.) continue ;; esac\n\
         [ -O . ] || {{ {dir}; }}\n\
         if [ -L \"./$__kw_wc\" ]; then\n\
         if [ -O . ]; then {link_o}; else {link_x}; fi\n\
         __kw_wn=$((__kw_wn + 1))\n\
         [ \"$__kw_wn\" -le {MAX_LINKS} ] || {{ __kw_we='too many levels of symbolic links'; break; }}\n\
         __kw_wt=$(readlink -- \"./$__kw_wc\" </dev/null) || {{ __kw_we=\"cannot read the link $PWD/$__kw_wc\"; break; }}\n\
         case $__kw_wt in /*) cd / || break ;; esac\n\
         __kw_wr=$__kw_wt${{__kw_wr:+/$__kw_wr}}\n\
         elif [ -d \"./$__kw_wc\" ]; then\n\
         cd -P -- \"./$__kw_wc\" || {{ __kw_we=\"cannot enter $PWD/$__kw_wc\"; break; }}\n\
         elif [ -e \"./$__kw_wc\" ]; then __kw_we=\"$PWD/$__kw_wc is not a directory\"; break\n\
         else __kw_wm=$__kw_wc${{__kw_wr:+/$__kw_wr}}; break\n\
         fi\n\
         done\n\
         else __kw_we='cannot enter /'; fi\n\
         if [ -n \"$__kw_we\" ]; then {error}\n\
         elif [ -n \"$__kw_wm\" ]; then {missing}\n\
         else [ -O . ] || {{ {dir}; }}; fi\n\
         {reached}\n",
        sh_quote(dir),
        dir = call(RouteEvent::Dir),
        link_o = call(RouteEvent::Link { owned: true }),
        link_x = call(RouteEvent::Link { owned: false }),
        error = call(RouteEvent::Error),
        missing = call(RouteEvent::Missing),
        reached = call(RouteEvent::Reached),
    )
}

/// What a [`route_walk`] tells its caller; the command given for each reads the shell
/// variables named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteEvent {
    /// A directory on the way that the scripts' account does not own: `$PWD`.
    Dir,
    /// A link followed: `$PWD/$__kw_wc`, in a directory the scripts' account owns or not.
    Link { owned: bool },
    /// The walk ended at a name that does not exist: the rest of the way, `$__kw_wm`.
    Missing,
    /// Something on the way is not a directory, or links loop: `$__kw_we`.
    Error,
    /// Where the walk stands (`$PWD`).
    Reached,
}

fn marker(nonce: &str, tag: &str) -> String {
    format!("\\n@@kwin:{nonce}:{tag}")
}

/// The script part that answers `qs` (all POSIX path queries, deduplicated by the caller).
pub(crate) fn script(qs: &[&PathQuery], nonce: &str) -> String {
    let mut s = format!("printf '{}\\n'\nset --\n", marker(nonce, "paths"));
    for (j, q) in qs.iter().enumerate() {
        if q.route() {
            continue;
        }
        let p = sh_quote(&q.path);
        s.push_str(&format!(
            "__kw_p={p}\n\
             if [ -L \"$__kw_p\" ]; then printf '{l}\\n'; readlink -f -- \"$__kw_p\" </dev/null; fi\n\
             if [ -d \"$__kw_p\" ]; then __kw_k=dir; elif [ -f \"$__kw_p\" ]; then __kw_k=file; elif [ -e \"$__kw_p\" ]; then __kw_k=other; elif [ -L \"$__kw_p\" ]; then __kw_k=dangling; else __kw_k=absent; fi\n\
             __kw_t{j}=$__kw_k\nprintf '{t}:%s' \"$__kw_k\"\n\
             case $__kw_k in absent|dangling) ;; *) set -- \"$@\" \"$__kw_p\" ;; esac\n",
            l = marker(nonce, &format!("l:{j}")),
            t = marker(nonce, &format!("t:{j}")),
        ));
    }
    // The route walks, after the paths' own kinds: each directory on a way that the scripts'
    // account does not own joins the one `stat`, after the paths.
    if qs.iter().any(|q| q.route()) {
        s.push_str("__kw_wd=$PWD\n");
        for (j, q) in qs.iter().enumerate().filter(|(_, q)| q.route()) {
            let tag = |t: &str| marker(nonce, &format!("{t}:{j}"));
            s.push_str(&route_walk(&q.path, &|ev| match ev {
                RouteEvent::Dir => format!(
                    "printf '{}\\n%s' \"$PWD\"; set -- \"$@\" \"$PWD\"",
                    tag("D")
                ),
                RouteEvent::Link { owned } => format!(
                    "printf '{}:{}\\n%s' \"$PWD/$__kw_wc\"",
                    tag("L"),
                    if owned { "o" } else { "x" }
                ),
                RouteEvent::Missing => format!("printf '{}\\n%s' \"$__kw_wm\"", tag("M")),
                RouteEvent::Error => format!("printf '{}\\n%s' \"$__kw_we\"", tag("E")),
                RouteEvent::Reached => format!("printf '{}\\n%s' \"$PWD\"", tag("R")),
            }));
        }
        s.push_str("cd -- \"$__kw_wd\" 2>/dev/null || cd /\n");
    }
    // One stat for every existing path; one at a time only if that failed for some.
    s.push_str(&format!(
        "if [ $# -gt 0 ]; then\n\
         if __kw_o=$(stat -L -c '{STAT_FORMAT}' -- \"$@\" 2>/dev/null </dev/null); then printf '{big}\\n%s' \"$__kw_o\"\n\
         else for __kw_p in \"$@\"; do __kw_o=$(stat -L -c '{STAT_FORMAT}' -- \"$__kw_p\" 2>&1 </dev/null); printf '{one}:%d\\n%s' $? \"$__kw_o\"; done; fi\n\
         fi\nset --\n",
        big = marker(nonce, "S"),
        one = marker(nonce, "s"),
    ));
    for (j, q) in qs.iter().enumerate() {
        if q.hashed() {
            s.push_str(&format!(
                "[ \"$__kw_t{j}\" = file ] && set -- \"$@\" {}\n",
                sh_quote(&q.path)
            ));
        }
    }
    s.push_str(&format!(
        "__kw_h=\nif [ $# -gt 0 ]; then\n\
         if __kw_h=$(sha256sum -- \"$@\" 2>/dev/null </dev/null); then printf '{big}\\n%s' \"$__kw_h\"\n\
         else __kw_h=; for __kw_p in \"$@\"; do __kw_o=$(sha256sum -- \"$__kw_p\" 2>&1 </dev/null); printf '{one}:%d\\n%s' $? \"$__kw_o\"; done; fi\n\
         fi\n",
        big = marker(nonce, "H"),
        one = marker(nonce, "h"),
    ));
    // Content: ONE `head -v` for every file whose content is needed (each behind its header
    // `==> NAME <==`; the parser splits them by the headers and checks each piece against the
    // file's hash), the files' numbers in the record's tag. Should `head` fail (a file it
    // cannot read), each of them is read again on its own, with its exit code.
    let wants = |j: usize, q: &PathQuery, then: &str| -> Option<String> {
        let p = sh_quote(&q.path);
        match &q.read {
            PathRead::Content => Some(format!("if [ \"$__kw_t{j}\" = file ]; then {then}; fi\n")),
            // Unless the line `sha256sum` printed for this path has this hash.
            PathRead::ContentUnless(want) => Some(format!(
                "if [ \"$__kw_t{j}\" = file ]; then case \"\n$__kw_h\n\" in *\"\n{} \"{p}\"\n\"*) ;; *) {then} ;; esac; fi\n",
                sh_quote_free_hex(want),
            )),
            PathRead::Meta | PathRead::Hash | PathRead::Route => None,
        }
    };
    s.push_str("set --\n__kw_cl=\n");
    let mut one_by_one = String::new();
    for (j, q) in qs.iter().enumerate() {
        let p = sh_quote(&q.path);
        if let Some(add) = wants(
            j,
            q,
            &format!("set -- \"$@\" {p}; __kw_cl=\"$__kw_cl {j}\""),
        ) {
            s.push_str(&add);
        }
        let read = format!(
            "printf '{c}\\n'; head -c {} -- {p} 2>&1 </dev/null; printf '{r}:%d' $?",
            CONTENT_LIMIT + 1,
            c = marker(nonce, &format!("c:{j}")),
            r = marker(nonce, "r"),
        );
        if let Some(block) = wants(j, q, &read) {
            one_by_one.push_str(&block);
        }
    }
    s.push_str(&format!(
        "if [ $# -gt 0 ]; then\nprintf '{c}:%s\\n' \"$__kw_cl\"\n\
         if head -c {} -v -- \"$@\" 2>/dev/null </dev/null; then :; else\nprintf '{f}\\n'\n{one_by_one}fi\nfi\n",
        CONTENT_LIMIT + 1,
        c = marker(nonce, "C"),
        f = marker(nonce, "F"),
    ));
    let vars: String = (0..qs.len())
        .filter(|&j| !qs[j].route())
        .map(|j| format!(" __kw_t{j}"))
        .collect();
    s.push_str(&format!(
        "printf '{}\\n'\nunset __kw_p __kw_k __kw_o __kw_h __kw_cl __kw_wd __kw_wr __kw_wn __kw_we __kw_wm __kw_wc __kw_wt{vars}\nset --\n",
        marker(nonce, "paths:end")
    ));
    s
}

/// `want` if it is plain hex (a sha256), else a string no `sha256sum` line contains.
fn sh_quote_free_hex(want: &str) -> String {
    if !want.is_empty() && want.bytes().all(|b| b.is_ascii_hexdigit()) {
        format!("{} ", want.to_ascii_lowercase())
    } else {
        "not-a-hash ".into()
    }
}

/// One record of the group's output: its tag and body.
struct Record<'a> {
    tag: &'a str,
    body: &'a [u8],
}

fn records<'a>(group: &'a [u8], prefix: &[u8]) -> Result<Vec<Record<'a>>, FactError> {
    let mut out = Vec::new();
    let mut rest = group;
    // Whatever precedes the first record is not ours (there is none when all went well).
    match find(rest, prefix) {
        Some(i) => rest = &rest[i + prefix.len()..],
        None => return Ok(out),
    }
    loop {
        let (chunk, next) = match find(rest, prefix) {
            Some(i) => (&rest[..i], Some(&rest[i + prefix.len()..])),
            None => (rest, None),
        };
        let tag_end = chunk
            .iter()
            .position(|&b| b == b'\n')
            .unwrap_or(chunk.len());
        let tag = std::str::from_utf8(&chunk[..tag_end])
            .map_err(|_| FactError::Parse("path probe: a record tag is not UTF-8".into()))?;
        let body = chunk.get(tag_end + 1..).unwrap_or(&[]);
        out.push(Record { tag, body });
        match next {
            Some(n) => rest = n,
            None => return Ok(out),
        }
    }
}

/// The answer to one query while it is being put together.
#[derive(Default)]
struct Answer {
    link: Option<Vec<u8>>,
    kind: Option<String>,
    stat: Option<Result<String, String>>,
    hash: Option<Result<String, String>>,
    content: Option<Result<Vec<u8>, String>>,
    route: Option<RouteAnswer>,
}

/// One `stat` answer: its line, or the error.
type StatLine = Result<String, String>;

/// What a route walk told.
#[derive(Default)]
struct RouteAnswer {
    reached: Option<Vec<u8>>,
    missing: Option<Vec<u8>>,
    error: Option<Vec<u8>>,
    /// Directories on the way not the scripts' account's, with their `stat` line.
    dirs: Vec<(Vec<u8>, Option<StatLine>)>,
    /// Links followed: whether the scripts' account owns the directory holding it, the path.
    links: Vec<(bool, Vec<u8>)>,
}

fn lines(body: &[u8]) -> Vec<&[u8]> {
    if body.is_empty() {
        return Vec::new();
    }
    body.split(|&b| b == b'\n').collect()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).trim().to_string()
}

/// The sha256 at the start of a `sha256sum` line (`\` first when the name was escaped).
fn hash_of(line: &[u8]) -> Result<String, String> {
    let l = line.strip_prefix(b"\\").unwrap_or(line);
    match l.get(..64) {
        Some(h) if h.iter().all(u8::is_ascii_hexdigit) && l.get(64) == Some(&b' ') => {
            Ok(String::from_utf8_lossy(h).to_ascii_lowercase())
        }
        _ => Err(format!("unexpected sha256sum output `{}`", text(line))),
    }
}

/// The hashes of one `sha256sum` call's output for `paths`, in order. A line is `HASH  NAME`;
/// GNU escapes a name holding a newline or backslash (and starts the line with `\`), busybox
/// prints it raw, so a raw name is skipped by its known length, not up to the next newline.
fn hash_lines<'a>(
    body: &[u8],
    paths: impl Iterator<Item = &'a str>,
) -> Result<Vec<Result<String, String>>, FactError> {
    let mut rest = body;
    let mut out = Vec::new();
    for p in paths {
        if rest.is_empty() {
            break;
        }
        let escaped = rest.first() == Some(&b'\\');
        let h = hash_of(rest.get(..66 + usize::from(escaped)).unwrap_or(rest));
        let after = 66 + usize::from(escaped);
        let name_end = if escaped {
            rest.get(after..)
                .and_then(|r| r.iter().position(|&b| b == b'\n'))
                .map(|i| after + i)
                .unwrap_or(rest.len())
        } else if rest.get(after..after + p.len()) == Some(p.as_bytes()) {
            after + p.len()
        } else {
            return Err(FactError::Parse(format!(
                "path probe: unexpected sha256sum output for `{p}`"
            )));
        };
        out.push(h);
        rest = rest.get(name_end + 1..).unwrap_or(&[]);
    }
    if !rest.is_empty() {
        out.push(Err("more sha256sum output than files".into()));
    }
    Ok(out)
}

/// Split the group's output (`group`: the bytes between its begin and end markers) into one
/// answer per query. Malformed output is an error, never a panic.
pub(crate) fn answers(
    qs: &[&PathQuery],
    group: &[u8],
    nonce: &str,
) -> Result<Vec<FactOutput>, FactError> {
    let ans = parse(qs, group, nonce)?;
    qs.iter().zip(ans).map(|(q, a)| render(q, a)).collect()
}

/// The answers of the group, before they are rendered.
fn parse(qs: &[&PathQuery], group: &[u8], nonce: &str) -> Result<Vec<Answer>, FactError> {
    let bad = |what: &str| FactError::Parse(format!("path probe: {what}"));
    let prefix = format!("\n@@kwin:{nonce}:");
    let mut ans: Vec<Answer> = qs.iter().map(|_| Answer::default()).collect();
    let recs = records(group, prefix.as_bytes())?;
    let mut stat_rr: Vec<Result<String, String>> = Vec::new();
    let mut hash_rr: Vec<Result<String, String>> = Vec::new();
    let mut big_stat: Option<&[u8]> = None;
    let mut big_hash: Option<&[u8]> = None;
    let mut open_content: Option<(usize, &[u8])> = None;
    let mut grouped: Option<(Vec<usize>, &[u8])> = None;
    let mut head_failed = false;
    // The directories of route walks that joined the one `stat`, in order: (query, which).
    let mut extra: Vec<(usize, usize)> = Vec::new();
    let idx = |s: &str| -> Result<usize, FactError> {
        s.parse::<usize>()
            .ok()
            .filter(|&j| j < qs.len())
            .ok_or_else(|| bad(&format!("bad query index `{s}`")))
    };
    let rc = |s: &str| -> Result<i32, FactError> {
        s.parse::<i32>()
            .map_err(|_| bad(&format!("bad exit code `{s}`")))
    };
    for r in recs {
        let mut parts = r.tag.splitn(3, ':');
        let head = parts.next().unwrap_or("");
        match head {
            "l" => {
                let j = idx(parts.next().unwrap_or(""))?;
                let b = r.body.strip_suffix(b"\n").unwrap_or(r.body);
                ans[j].link = (!b.is_empty()).then(|| b.to_vec());
            }
            "t" => {
                let j = idx(parts.next().unwrap_or(""))?;
                let kind = parts.next().unwrap_or("");
                if !matches!(kind, "dir" | "file" | "other" | "dangling" | "absent") {
                    return Err(bad(&format!("unknown kind `{kind}`")));
                }
                ans[j].kind = Some(kind.to_string());
            }
            "S" => big_stat = Some(r.body),
            "s" => {
                let code = rc(parts.next().unwrap_or(""))?;
                let b = text(r.body);
                stat_rr.push(if code == 0 { Ok(b) } else { Err(b) });
            }
            "H" => big_hash = Some(r.body),
            "h" => {
                let code = rc(parts.next().unwrap_or(""))?;
                hash_rr.push(if code == 0 {
                    hash_of(r.body.trim_ascii())
                } else {
                    Err(text(r.body))
                });
            }
            "c" => open_content = Some((idx(parts.next().unwrap_or(""))?, r.body)),
            "C" => {
                let js = r.tag["C:".len().min(r.tag.len())..]
                    .split_whitespace()
                    .map(idx)
                    .collect::<Result<Vec<_>, _>>()?;
                grouped = Some((js, r.body));
            }
            "D" | "L" | "M" | "E" | "R" => {
                let j = idx(parts.next().unwrap_or(""))?;
                if !qs[j].route() {
                    return Err(bad(&format!(
                        "a route record for query {j}, which asked none"
                    )));
                }
                let body = r.body.to_vec();
                let r = ans[j].route.get_or_insert_with(RouteAnswer::default);
                match head {
                    "D" => {
                        r.dirs.push((body, None));
                        extra.push((j, r.dirs.len() - 1));
                    }
                    "L" => r.links.push((parts.next() == Some("o"), body)),
                    "M" => r.missing = Some(body),
                    "E" => r.error = Some(body),
                    _ => r.reached = Some(body),
                }
            }
            "F" => head_failed = true,
            "r" => {
                let code = rc(parts.next().unwrap_or(""))?;
                let (j, body) = open_content
                    .take()
                    .ok_or_else(|| bad("an exit code without content"))?;
                ans[j].content = Some(if code == 0 {
                    Ok(body.to_vec())
                } else {
                    Err(text(body))
                });
            }
            "paths" => {}
            other => return Err(bad(&format!("unknown record `{other}`"))),
        }
    }
    // Which queries went to stat and to sha256sum, in order.
    let stated: Vec<usize> = (0..qs.len())
        .filter(|&j| matches!(ans[j].kind.as_deref(), Some("dir" | "file" | "other")))
        .collect();
    if let Some(body) = big_stat {
        stat_rr = lines(body).into_iter().map(|l| Ok(text(l))).collect();
    }
    if stat_rr.len() != stated.len() + extra.len() {
        return Err(bad(&format!(
            "{} stat answers for {} paths",
            stat_rr.len(),
            stated.len() + extra.len()
        )));
    }
    let mut stat_rr = stat_rr.into_iter();
    for (&j, st) in stated.iter().zip(stat_rr.by_ref()) {
        ans[j].stat = Some(st);
    }
    for (&(j, k), st) in extra.iter().zip(stat_rr) {
        if let Some(d) = ans[j].route.as_mut().and_then(|r| r.dirs.get_mut(k)) {
            d.1 = Some(st);
        }
    }
    let hashed: Vec<usize> = (0..qs.len())
        .filter(|&j| qs[j].hashed() && ans[j].kind.as_deref() == Some("file"))
        .collect();
    if let Some(body) = big_hash {
        hash_rr = hash_lines(body, hashed.iter().map(|&j| qs[j].path.as_str()))?;
    }
    if hash_rr.len() != hashed.len() {
        return Err(bad(&format!(
            "{} hashes for {} files",
            hash_rr.len(),
            hashed.len()
        )));
    }
    for (&j, h) in hashed.iter().zip(hash_rr) {
        ans[j].hash = Some(h);
    }
    if let (Some((js, body)), false) = (grouped, head_failed) {
        for (j, piece) in split_heads(qs, &ans, &js, body) {
            ans[j].content = Some(match piece {
                Some((from, to)) => Ok(body[from..to].to_vec()),
                None => Err("changed while it was read; run again".to_string()),
            });
        }
    }
    Ok(ans)
}

/// The pieces of `head -c LIMIT+1 -v` output for the files of queries `js`, in order: each
/// after its `==> NAME <==` header (a newline before every header but the first), ending
/// where the next file's header starts — at the first such place where the piece is the
/// file's content by its hash (or, for a file `stat` found larger than the limit, by its
/// length), since content may hold a header line too.
fn split_heads(
    qs: &[&PathQuery],
    ans: &[Answer],
    js: &[usize],
    body: &[u8],
) -> Vec<(usize, Option<(usize, usize)>)> {
    use sha2::Digest;
    let header = |j: usize, first: bool| {
        let mut h = if first { Vec::new() } else { b"\n".to_vec() };
        h.extend_from_slice(b"==> ");
        h.extend_from_slice(qs[j].path.as_bytes());
        h.extend_from_slice(b" <==\n");
        h
    };
    let fits = |j: usize, piece: &[u8]| -> bool {
        let size = match &ans[j].stat {
            Some(Ok(s)) => s.rsplit(':').next().and_then(|z| z.parse::<u64>().ok()),
            _ => None,
        };
        if size.is_some_and(|z| z > CONTENT_LIMIT) {
            return piece.len() as u64 == CONTENT_LIMIT + 1;
        }
        match &ans[j].hash {
            Some(Ok(h)) => hex::encode(sha2::Sha256::digest(piece)) == *h,
            _ => true,
        }
    };
    let mut out = Vec::new();
    let mut at = 0;
    for (k, &j) in js.iter().enumerate() {
        let h = header(j, k == 0);
        if body.get(at..at + h.len()) != Some(h.as_slice()) {
            // Out of step (nothing here is this file's): every file from here is unknown.
            out.extend(js[k..].iter().map(|&j| (j, None)));
            return out;
        }
        let start = at + h.len();
        let ends: Vec<usize> = match js.get(k + 1) {
            None => vec![body.len()],
            Some(&next) => {
                let nh = header(next, false);
                memchr::memmem::find_iter(&body[start..], &nh)
                    .map(|i| start + i)
                    .collect()
            }
        };
        // A file `stat` gives no size (a /proc value) whose piece fits no hash changed while
        // it was read (a counter): its first piece is its content then.
        let pseudo = matches!(&ans[j].stat, Some(Ok(st)) if st.ends_with(":0"));
        let found = ends
            .iter()
            .find(|&&e| fits(j, &body[start..e]))
            .or(ends.first().filter(|_| pseudo));
        match found {
            Some(&e) => {
                out.push((j, Some((start, e))));
                at = e;
            }
            None => {
                out.push((j, None));
                match ends.first() {
                    Some(&e) => at = e,
                    None => {
                        out.extend(js[k + 1..].iter().map(|&j| (j, None)));
                        return out;
                    }
                }
            }
        }
    }
    out
}

/// Whether a `stat` line's mode gives group and others no read access.
fn private_stat(stat: &str) -> bool {
    stat.split(':')
        .next()
        .and_then(|m| u32::from_str_radix(m, 8).ok())
        .is_some_and(|m| m & 0o044 == 0)
}

/// A piece of content as the host log shows it.
fn hidden_piece(piece: &[u8]) -> String {
    format!(
        "({} bytes of content, {}, not logged)",
        piece.len(),
        crate::secret::sensitive_hash(piece)
    )
}

/// The group's output as the host log shows it: the content of every file whose mode gives
/// group and others no read access, and of the queries `sensitive` names (by index), replaced
/// by its size and [`crate::secret::sensitive_hash`]. When the group cannot be parsed, every
/// content is replaced.
pub(crate) fn redact_group(
    qs: &[&PathQuery],
    group: &[u8],
    nonce: &str,
    sensitive: &dyn Fn(usize) -> bool,
) -> Vec<u8> {
    let parsed = parse(qs, group, nonce).ok();
    let private: Vec<bool> = match &parsed {
        Some(a) => a
            .iter()
            .map(|a| match &a.stat {
                Some(Ok(s)) => private_stat(s),
                _ => true,
            })
            .collect(),
        None => vec![true; qs.len()],
    };
    let hide = |j: usize| private.get(j).copied().unwrap_or(true) || sensitive(j);
    let prefix = format!("\n@@kwin:{nonce}:");
    let p = prefix.as_bytes();
    let mut out = Vec::with_capacity(group.len());
    let mut rest = group;
    match find(rest, p) {
        Some(i) => {
            out.extend_from_slice(&rest[..i]);
            rest = &rest[i..];
        }
        None => return group.to_vec(),
    }
    // `rest` starts with the prefix of a record.
    while !rest.is_empty() {
        let after = &rest[p.len()..];
        let (chunk, next) = match find(after, p) {
            Some(i) => (&after[..i], &after[i..]),
            None => (after, &[][..]),
        };
        let tag_end = chunk
            .iter()
            .position(|&b| b == b'\n')
            .unwrap_or(chunk.len());
        let tag = &chunk[..tag_end];
        let j = tag
            .strip_prefix(b"c:")
            .and_then(|j| std::str::from_utf8(j).ok())
            .and_then(|j| j.parse::<usize>().ok());
        // The one `head` of several files: each hidden piece replaced, the rest as it is;
        // all of it when the pieces cannot be told apart.
        let grouped: Option<Vec<usize>> = tag
            .strip_prefix(b"C:")
            .and_then(|js| std::str::from_utf8(js).ok())
            .map(|js| {
                js.split_whitespace()
                    .map(|j| j.parse::<usize>().unwrap_or(usize::MAX))
                    .collect()
            });
        out.extend_from_slice(p);
        match (j, grouped) {
            (_, Some(js)) if tag_end < chunk.len() => {
                let body = &chunk[tag_end + 1..];
                out.extend_from_slice(tag);
                out.push(b'\n');
                let pieces = match &parsed {
                    Some(ans) if js.iter().all(|&j| j < qs.len()) => {
                        split_heads(qs, ans, &js, body)
                    }
                    _ => js.iter().map(|&j| (j, None)).collect(),
                };
                let mut at = 0;
                for (j, piece) in pieces {
                    match piece {
                        Some((from, to)) if hide(j) => {
                            out.extend_from_slice(&body[at..from]);
                            out.extend_from_slice(hidden_piece(&body[from..to]).as_bytes());
                            at = to;
                        }
                        Some(_) => {}
                        None if hide(j) => {
                            // Not told apart: nothing more of the record is shown.
                            out.extend_from_slice(hidden_piece(&body[at..]).as_bytes());
                            at = body.len();
                            break;
                        }
                        None => {}
                    }
                }
                out.extend_from_slice(&body[at..]);
            }
            (Some(j), None) if hide(j) && tag_end < chunk.len() => {
                let body = &chunk[tag_end + 1..];
                out.extend_from_slice(tag);
                out.extend_from_slice(
                    format!(
                        "\n({} bytes of content, {}, not logged)",
                        body.len(),
                        crate::secret::sensitive_hash(body)
                    )
                    .as_bytes(),
                );
            }
            _ => out.extend_from_slice(chunk),
        }
        rest = next;
    }
    out
}

/// One answer in the standalone file fact's `key=value` format.
fn render(q: &PathQuery, a: Answer) -> Result<FactOutput, FactError> {
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    if q.route() {
        let r = a.route.ok_or_else(|| {
            FactError::Parse(format!("path probe: no route answer for `{}`", q.path))
        })?;
        let reached = r.reached.ok_or_else(|| {
            FactError::Parse(format!(
                "path probe: the route walk of `{}` did not end",
                q.path
            ))
        })?;
        let mut out = format!("type=route\nreached={}\n", b64(&reached));
        if let Some(m) = &r.missing {
            out.push_str(&format!("missing={}\n", b64(m)));
        }
        if let Some(e) = &r.error {
            out.push_str(&format!("error={}\n", b64(e)));
        }
        for (owned, l) in &r.links {
            out.push_str(&format!(
                "link={}:{}\n",
                if *owned { "o" } else { "x" },
                b64(l)
            ));
        }
        for (d, st) in &r.dirs {
            match st {
                Some(Ok(st)) => out.push_str(&format!("dir={}:{st}\n", b64(d))),
                Some(Err(e)) => {
                    return Ok(FactOutput {
                        stdout: out.into_bytes(),
                        stderr: e.clone().into_bytes(),
                        exit: 1,
                    })
                }
                None => {
                    return Err(FactError::Parse(format!(
                        "path probe: no stat answer for a directory on the way to `{}`",
                        q.path
                    )))
                }
            }
        }
        return Ok(FactOutput {
            stdout: out.into_bytes(),
            ..FactOutput::default()
        });
    }
    let kind = a
        .kind
        .ok_or_else(|| FactError::Parse(format!("path probe: no answer for `{}`", q.path)))?;
    let mut out = String::new();
    if let Some(l) = &a.link {
        out.push_str(&format!("link={}\n", b64(l)));
    }
    out.push_str(&format!("type={kind}\n"));
    let failed = |out: String, stderr: String| FactOutput {
        stdout: out.into_bytes(),
        stderr: stderr.into_bytes(),
        exit: 1,
    };
    if matches!(kind.as_str(), "absent" | "dangling") {
        return Ok(FactOutput {
            stdout: out.into_bytes(),
            ..FactOutput::default()
        });
    }
    match a.stat {
        Some(Ok(s)) => out.push_str(&format!("stat={s}\n")),
        Some(Err(e)) => return Ok(failed(out, e)),
        None => {}
    }
    if kind == "file" && q.hashed() {
        match a.hash {
            Some(Ok(h)) => out.push_str(&format!("sha256={h}\n")),
            Some(Err(e)) => return Ok(failed(out, e)),
            None => {}
        }
        match a.content {
            Some(Ok(c)) if c.len() as u64 <= CONTENT_LIMIT => {
                out.push_str(&format!("content={}\n", b64(&c)));
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Ok(failed(out, e)),
            None if q.read == PathRead::Content => {
                return Err(FactError::Parse(format!(
                    "path probe: no content for `{}`",
                    q.path
                )))
            }
            None => {}
        }
    }
    Ok(FactOutput {
        stdout: out.into_bytes(),
        ..FactOutput::default()
    })
}

#[cfg(test)]
mod tests {
    use super::super::{batch_script, parse_batch, FactQuery};
    use super::*;
    use crate::transport::{Output, Shell};

    fn q(path: &str, read: PathRead) -> FactQuery {
        FactQuery {
            key: format!("{read:?}:{path}"),
            command: "exit 99".into(),
            path: Some(PathQuery {
                path: path.into(),
                read,
            }),
        }
    }

    fn base64_of(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s.as_bytes())
    }

    fn sha(b: &[u8]) -> String {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(b))
    }

    fn answer(out: &FactOutput) -> String {
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    #[test]
    fn every_kind_of_path_in_one_group() {
        let d = tempfile::tempdir().expect("tmp");
        let p = |n: &str| d.path().join(n).display().to_string();
        std::fs::write(p("same"), b"wanted\n").expect("w");
        std::fs::write(p("differs"), b"old\n").expect("w");
        std::fs::write(p("whole"), b"x\0y").expect("w");
        std::fs::write(p("new\nline"), b"nl").expect("w");
        std::fs::write(p("crlf\r"), b"a\r\nb\r\n").expect("w");
        std::fs::write(p("big"), vec![b'a'; CONTENT_LIMIT as usize + 1]).expect("w");
        std::fs::create_dir(p("dir")).expect("d");
        std::os::unix::fs::symlink(p("same"), p("link")).expect("l");
        std::os::unix::fs::symlink(p("nowhere"), p("dangling")).expect("l");
        let want = sha(b"wanted\n");
        let qs = vec![
            q(&p("same"), PathRead::ContentUnless(want.clone())),
            q(&p("differs"), PathRead::ContentUnless(want.clone())),
            q(&p("whole"), PathRead::Content),
            q(&p("new\nline"), PathRead::ContentUnless(want.clone())),
            q(&p("big"), PathRead::Content),
            q(&p("dir"), PathRead::Meta),
            q(&p("link"), PathRead::Hash),
            q(&p("dangling"), PathRead::Meta),
            q(&p("absent"), PathRead::Content),
            q("/it's \"odd\" $(x)", PathRead::Meta),
            q(&p("crlf\r"), PathRead::ContentUnless(want.clone())),
        ];
        let shells: Vec<&str> = ["/bin/sh", "/bin/dash", "/usr/bin/busybox"]
            .into_iter()
            .filter(|s| std::path::Path::new(s).exists())
            .collect();
        for shell in shells {
            let nonce = super::super::new_nonce();
            let script = batch_script(Shell::Posix, &qs, &nonce);
            let out = if shell.ends_with("busybox") {
                let mut o = std::process::Command::new(shell);
                o.arg("sh").arg("-c").arg(&script);
                let o = o.output().expect("busybox");
                Output {
                    stdout: o.stdout,
                    stderr: o.stderr,
                    exit: o.status.code().unwrap_or(-1),
                }
            } else {
                crate::testing::run_in(shell, &script)
            };
            assert!(!script.contains("exit 99"), "path queries run no command");
            let f = parse_batch(&qs, &out, &nonce).expect("parse");
            let a = |i: usize| answer(f.raw(&qs[i].key).expect("answer"));
            assert!(a(0).starts_with("type=file\nstat="), "{shell}: {}", a(0));
            assert!(
                a(0).contains(&format!("sha256={want}\n")),
                "{shell}: {}",
                a(0)
            );
            assert!(
                !a(0).contains("content="),
                "{shell}: matching content is not sent"
            );
            assert!(a(1).contains("content=b2xkCg==\n"), "{shell}: {}", a(1));
            assert!(a(2).contains("content=eAB5\n"), "{shell}: {}", a(2));
            assert!(
                a(3).contains(&format!("sha256={}\n", sha(b"nl"))),
                "{shell}: {}",
                a(3)
            );
            assert!(
                a(4).contains("sha256=") && !a(4).contains("content="),
                "{shell}"
            );
            assert!(a(5).starts_with("type=dir\nstat="), "{shell}: {}", a(5));
            assert!(a(6).starts_with("link="), "{shell}: {}", a(6));
            assert!(
                a(6).contains(&format!("sha256={want}\n")),
                "{shell}: {}",
                a(6)
            );
            assert!(a(7).ends_with("type=dangling\n"), "{shell}: {}", a(7));
            assert_eq!(a(8), "type=absent\n", "{shell}");
            assert_eq!(a(9), "type=absent\n", "{shell}");
            // Bytes as they are: `\r\n` in content (and `\r` in a name) is not normalized.
            assert!(
                a(10).contains(&format!("sha256={}\n", sha(b"a\r\nb\r\n"))),
                "{shell}"
            );
            assert!(a(10).contains("content=YQ0KYg0K\n"), "{shell}: {}", a(10));
        }
    }

    fn kv(out: &FactOutput) -> Vec<(String, String)> {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, v)| (k.into(), v.into())))
            .collect()
    }

    fn unb64(v: &str) -> String {
        let b = base64::engine::general_purpose::STANDARD
            .decode(v)
            .expect("base64");
        String::from_utf8(b).expect("utf-8")
    }

    /// A route walk finds what the kernel would, one name at a time: links (relative,
    /// absolute, `..`) followed and told, what is missing, a file or a loop on the way, and
    /// every directory on the way that the scripts' account does not own, with its owner.
    #[test]
    fn route_walks_name_links_missing_parts_and_foreign_directories() {
        use std::os::unix::fs::{symlink, MetadataExt};
        let d = tempfile::tempdir().expect("tmp");
        let base = std::fs::canonicalize(d.path()).expect("canonical");
        let p = |n: &str| base.join(n).display().to_string();
        std::fs::create_dir_all(p("real/sub")).expect("mkdir");
        std::fs::create_dir_all(p("other")).expect("mkdir");
        symlink("real", p("rel")).expect("link");
        symlink(p("real"), p("abs")).expect("link");
        symlink("../real/sub", p("other/up")).expect("link");
        symlink("loop", p("loop")).expect("link");
        std::fs::write(p("file"), b"x").expect("w");
        let me = std::fs::metadata("/proc/self").expect("proc").uid();
        let foreign = me == 0;
        if foreign {
            std::os::unix::fs::chown(p("real"), Some(65534), Some(65534)).expect("chown");
        }
        let qs = [
            q(
                &format!("{}/rel/sub/missing/more", base.display()),
                PathRead::Route,
            ),
            q(&p("other/up"), PathRead::Route),
            q(&p("abs"), PathRead::Route),
            q(&p("file/x"), PathRead::Route),
            q(&p("loop/x"), PathRead::Route),
            q(&p("real"), PathRead::Meta),
        ];
        let nonce = super::super::new_nonce();
        let script = batch_script(Shell::Posix, &qs, &nonce);
        for shell in ["/bin/sh", "/bin/dash"] {
            if !std::path::Path::new(shell).exists() {
                continue;
            }
            let out = crate::testing::run_in(shell, &format!("cd /proc\n{script}pwd\n"));
            assert!(
                String::from_utf8_lossy(&out.stdout).ends_with("\n/proc\n"),
                "{shell}: the walk restores the working directory"
            );
            let f = parse_batch(&qs, &out, &nonce).expect("parse");
            let a = |i: usize| kv(f.raw(&qs[i].key).expect("answer"));
            let get = |i: usize, k: &str| -> Vec<String> {
                a(i).into_iter()
                    .filter(|(x, _)| x == k)
                    .map(|(_, v)| v)
                    .collect()
            };
            assert_eq!(get(0, "reached"), vec![base64_of(&p("real/sub"))]);
            assert_eq!(unb64(&get(0, "missing")[0]), "missing/more", "{shell}");
            assert_eq!(get(0, "link").len(), 1, "{shell}: {:?}", a(0));
            assert!(unb64(&get(0, "link")[0][2..]).ends_with("/rel"));
            assert_eq!(
                unb64(&get(1, "reached")[0]),
                p("real/sub"),
                "{shell}: `..` in a link"
            );
            assert_eq!(unb64(&get(2, "reached")[0]), p("real"), "{shell}");
            assert!(unb64(&get(3, "error")[0]).ends_with("/file is not a directory"));
            assert_eq!(
                unb64(&get(4, "error")[0]),
                "too many levels of symbolic links"
            );
            let dirs = get(0, "dir");
            if foreign {
                // real is nobody's: told with its owner, and the walk went on through it.
                let real = dirs
                    .iter()
                    .find(|d| unb64(d.split(':').next().unwrap_or_default()) == p("real"))
                    .unwrap_or_else(|| panic!("{shell}: {dirs:?}"));
                assert!(real.contains(":65534:"), "{real}");
                assert_eq!(dirs.len(), 1, "{shell}: only real is not root's: {dirs:?}");
            }
            assert!(a(5).iter().any(|(k, _)| k == "stat"), "{shell}: {:?}", a(5));
        }
    }

    /// `head -v` output whose content holds a line that looks like the next file's header:
    /// the hash tells the real boundary. A file that changed after `sha256sum` is an error of
    /// its own; `F` (head failed) falls back to the files read one by one.
    #[test]
    fn one_head_for_several_files_split_by_headers_and_hashes() {
        let qs = [
            q("/a", PathRead::Content),
            q("/b", PathRead::Content),
            q("/c", PathRead::Content),
        ];
        let pq: Vec<&PathQuery> = qs.iter().map(|q| q.path.as_ref().expect("path")).collect();
        let a = b"first\n\n==> /b <==\nforged\n".to_vec();
        let b = b"second, no newline".to_vec();
        let c = b"third\n".to_vec();
        let kinds = "\n@@kwin:n:t:0:file\n@@kwin:n:t:1:file\n@@kwin:n:t:2:file";
        let stats = format!(
            "\n@@kwin:n:S\n644:0:root:0:root:{}\n644:0:root:0:root:{}\n644:0:root:0:root:{}",
            a.len(),
            b.len(),
            c.len()
        );
        let hashes = |hc: &str| format!("\n@@kwin:n:H\n{}  /a\n{}  /b\n{hc}  /c", sha(&a), sha(&b));
        let mut body = b"==> /a <==\n".to_vec();
        body.extend_from_slice(&a);
        body.extend_from_slice(b"\n==> /b <==\n");
        body.extend_from_slice(&b);
        body.extend_from_slice(b"\n==> /c <==\n");
        body.extend_from_slice(&c);
        let group = |hc: &str, tail: &[u8]| {
            let mut g = format!("{kinds}{stats}{}\n@@kwin:n:C: 0 1 2\n", hashes(hc)).into_bytes();
            g.extend_from_slice(&body);
            g.extend_from_slice(tail);
            g
        };
        let content = |out: &FactOutput| {
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .find_map(|l| l.strip_prefix("content=").map(str::to_string))
        };
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let ans = answers(&pq, &group(&sha(&c), b""), "n").expect("parse");
        assert_eq!(content(&ans[0]), Some(b64(&a)), "{:?}", answer(&ans[0]));
        assert_eq!(content(&ans[1]), Some(b64(&b)));
        assert_eq!(content(&ans[2]), Some(b64(&c)));
        // /c changed between sha256sum and head: its answer fails, the others stand.
        let ans = answers(&pq, &group(&"0".repeat(64), b""), "n").expect("parse");
        assert_eq!(content(&ans[0]), Some(b64(&a)));
        assert_eq!(ans[2].exit, 1);
        assert!(String::from_utf8_lossy(&ans[2].stderr).contains("changed while it was read"));
        // head failed: the files read one by one.
        let tail = format!(
            "\n@@kwin:n:F\n@@kwin:n:c:0\n{}\n@@kwin:n:r:0\n@@kwin:n:c:1\nhead: denied\n@@kwin:n:r:1\n@@kwin:n:c:2\nthird\n\n@@kwin:n:r:0",
            String::from_utf8_lossy(&a)
        );
        let ans = answers(&pq, &group(&sha(&c), tail.as_bytes()), "n").expect("parse");
        assert_eq!(content(&ans[0]), Some(b64(&a)));
        assert_eq!(ans[1].exit, 1);
        assert_eq!(content(&ans[2]), Some(b64(&c)));
        // The log form hides one piece and keeps the others, and still parses.
        let shown = redact_group(&pq, &group(&sha(&c), b""), "n", &|j| j == 1);
        let text = String::from_utf8_lossy(&shown);
        assert!(
            !text.contains("second, no newline") && text.contains("forged"),
            "{text}"
        );
        let again = answers(&pq, &shown, "n").expect("parse the log form");
        assert_eq!(content(&again[0]), Some(b64(&a)));
        assert_eq!(content(&again[2]), Some(b64(&c)));
    }

    #[test]
    fn one_at_a_time_records_and_failures() {
        let qs = [
            q("/a", PathRead::Hash),
            q("/b", PathRead::Content),
            q("/c", PathRead::Meta),
        ];
        let pq: Vec<&PathQuery> = qs.iter().map(|q| q.path.as_ref().expect("path")).collect();
        let n = "n";
        let h = "a".repeat(64);
        let group = format!(
            "\n@@kwin:n:t:0:file\n@@kwin:n:t:1:file\n@@kwin:n:t:2:dir\
             \n@@kwin:n:s:0\n644:0:root:0:root:3\n@@kwin:n:s:1\nstat: cannot statx '/b': Permission denied\
             \n@@kwin:n:s:0\n755:0:root:0:root:4096\n@@kwin:n:H\n{h}  /a\n{h}  /b\
             \n@@kwin:n:c:1\nxyz\n@@kwin:n:r:0"
        );
        let ans = answers(&pq, group.as_bytes(), n).expect("parse");
        assert_eq!(
            answer(&ans[0]),
            format!("type=file\nstat=644:0:root:0:root:3\nsha256={h}\n")
        );
        assert_eq!(ans[1].exit, 1);
        assert!(String::from_utf8_lossy(&ans[1].stderr).contains("Permission denied"));
        assert_eq!(answer(&ans[2]), "type=dir\nstat=755:0:root:0:root:4096\n");
        // Garbage is an error, never a panic.
        for bad in [
            "\n@@kwin:n:t:0:fifo",
            "\n@@kwin:n:t:9:file",
            "\n@@kwin:n:t:0:file\n@@kwin:n:t:1:absent\n@@kwin:n:t:2:absent\n@@kwin:n:S\n1\n2",
            "\n@@kwin:n:r:0",
            "\n@@kwin:n:zz",
            "\n@@kwin:n:t:0:file\n@@kwin:n:t:1:absent\n@@kwin:n:t:2:absent\n@@kwin:n:S\nx\n@@kwin:n:H\nshort",
        ] {
            assert!(answers(&pq, bad.as_bytes(), n).is_err(), "{bad:?}");
        }
        assert!(answers(&pq, b"", n).is_err(), "no kinds");
    }
}
