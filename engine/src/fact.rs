//! Facts: read-only questions a module asks a host, answered by a command and a pure parser.
//!
//! A [`Fact`] has a key (equal keys are the same question, asked once), a command per shell,
//! and `parse`, a pure function from the command's [`FactOutput`] to a typed value. The probe
//! batches every fact query of a host into ONE script ([`batch_script`]); the answers come back
//! as delimited sections ([`parse_batch`]). Parsers never do IO, so they are unit-tested on
//! captured output.
//!
//! Questions about paths of POSIX hosts ([`PathQuery`], set by [`Fact::path_query`]) are
//! answered together, by kind, with a fixed number of processes per probe (see [`paths`]);
//! every other query runs its own command in a subshell (a fork, no exec), so a failing or
//! exiting query does not stop the others.
//!
//! [`HostFact`] (`host.rs`) is what `kwin facts` shows of a host: its OS, kernel, CPUs,
//! memory, cgroup version, Windows build and addresses, asked in the same probe.

mod exists;
pub mod host;
mod output;
pub mod paths;

pub use exists::PathExists;
pub use host::HostFact;
use output::find;
pub use output::{clip, FactError, FactOutput};
pub use paths::{
    route_walk, PathQuery, PathRead, RouteEvent, CONTENT_LIMIT, MAX_LINKS, STAT_FORMAT,
};

use crate::shell::{Output, Shell};
use std::collections::BTreeMap;
use std::fmt;

/// A typed, read-only question about a host.
pub trait Fact {
    type Output;
    /// Identity of the question: two facts with the same key are asked once per probe.
    fn key(&self) -> String;
    /// The command that answers it, for the host's shell. It must not change the host.
    fn command(&self, shell: Shell) -> String;
    /// Pure parse of the command's output.
    fn parse(&self, out: &FactOutput) -> Result<Self::Output, FactError>;
    /// For a question about one path of a POSIX host: the path query that answers it together
    /// with the probe's other path queries. Its answer has the format [`paths`] documents,
    /// which `command` must print too. Default: none (the command runs on its own).
    fn path_query(&self) -> Option<PathQuery> {
        None
    }
}

/// One query in a probe: key + command text (+ the path query, for path facts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactQuery {
    pub key: String,
    pub command: String,
    /// Set: on a POSIX host the probe answers this with its path readers, not `command`.
    pub path: Option<PathQuery>,
}

impl FactQuery {
    pub fn of<F: Fact>(fact: &F, shell: Shell) -> Self {
        FactQuery {
            key: fact.key(),
            command: fact.command(shell),
            path: match shell {
                Shell::Posix => fact.path_query(),
                Shell::PowerShell => None,
            },
        }
    }

    /// A query answered by running `command`.
    pub fn command(key: impl Into<String>, command: impl Into<String>) -> Self {
        FactQuery {
            key: key.into(),
            command: command.into(),
            path: None,
        }
    }
}

/// The queries of a batch asked once each (first of equal keys), split into path queries
/// (POSIX only) and the rest, each with its index in `queries`.
type Split<'a> = (
    Vec<(&'a FactQuery, &'a PathQuery)>,
    Vec<(usize, &'a FactQuery)>,
);

/// The path questions of a split.
fn only_paths<'a>(qs: &[(&'a FactQuery, &'a PathQuery)]) -> Vec<&'a PathQuery> {
    qs.iter().map(|(_, p)| *p).collect()
}

fn split(shell: Shell, queries: &[FactQuery]) -> Split<'_> {
    let mut seen = std::collections::HashSet::new();
    let (mut paths, mut rest) = (Vec::new(), Vec::new());
    for (i, q) in queries.iter().enumerate() {
        if !seen.insert(q.key.as_str()) {
            continue;
        }
        match (&q.path, shell) {
            (Some(p), Shell::Posix) => paths.push((q, p)),
            _ => rest.push((i, q)),
        }
    }
    (paths, rest)
}

/// Answers of one probe, by fact key.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Facts {
    answers: BTreeMap<String, FactOutput>,
}

impl fmt::Debug for Facts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.answers.keys()).finish()
    }
}

impl Facts {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn insert(&mut self, key: impl Into<String>, out: FactOutput) {
        self.answers.insert(key.into(), out);
    }
    pub fn raw(&self, key: &str) -> Option<&FactOutput> {
        self.answers.get(key)
    }
    /// The typed answer to `fact`.
    pub fn get<F: Fact>(&self, fact: &F) -> Result<F::Output, FactError> {
        let key = fact.key();
        let out = self.answers.get(&key).ok_or(FactError::Missing(key))?;
        fact.parse(out)
    }
    /// The answers to `keys` (those there are).
    pub fn subset<'a>(&self, keys: impl IntoIterator<Item = &'a str>) -> Facts {
        let mut f = Facts::new();
        for k in keys {
            if let Some(o) = self.answers.get(k) {
                f.answers.insert(k.to_string(), o.clone());
            }
        }
        f
    }
    pub fn merge(&mut self, other: Facts) {
        self.answers.extend(other.answers);
    }
    pub fn remove(&mut self, key: &str) {
        self.answers.remove(key);
    }
    pub fn len(&self) -> usize {
        self.answers.len()
    }
    pub fn is_empty(&self) -> bool {
        self.answers.is_empty()
    }
}

/// Random marker that delimits sections of a batched script's output.
pub use crate::fs::new_nonce;

/// One script that answers every query, each answer delimited by markers carrying `nonce`.
/// Duplicate keys are asked once. Path queries (POSIX) are answered together by kind (see
/// [`paths`]); every other query runs in its own subshell / script block so one failing query
/// does not stop the others.
pub fn batch_script(shell: Shell, queries: &[FactQuery], nonce: &str) -> String {
    let (path_qs, rest) = split(shell, queries);
    let mut s = String::new();
    match shell {
        Shell::Posix => {
            // Not `exec </dev/null`: the script itself arrives on stdin (`sh -s`), and the
            // shell would stop reading it at its input buffer's end. Each command gets its own.
            s.push_str("export LC_ALL=C\n");
            if !path_qs.is_empty() {
                s.push_str(&paths::script(&only_paths(&path_qs), nonce));
            }
            for (i, q) in rest {
                s.push_str(&format!(
                    "printf '\\n@@kwin:{nonce}:begin:{i}\\n'; printf '\\n@@kwin:{nonce}:begin:{i}\\n' >&2\n(\n{}\n) </dev/null\n__kw_rc=$?\nprintf '\\n@@kwin:{nonce}:end:{i}:%d\\n' \"$__kw_rc\"; printf '\\n@@kwin:{nonce}:end:{i}\\n' >&2\n",
                    q.command
                ));
            }
        }
        Shell::PowerShell => {
            s.push_str("$ProgressPreference = 'SilentlyContinue'\n$ErrorActionPreference = 'Stop'\n[Console]::OutputEncoding = [System.Text.Encoding]::UTF8\n");
            for (i, q) in rest {
                s.push_str(&format!(
                    "[Console]::Out.Write(\"`n@@kwin:{nonce}:begin:{i}`n\"); [Console]::Error.Write(\"`n@@kwin:{nonce}:begin:{i}`n\")\n$__kw_rc = 0\ntry {{ $global:LASTEXITCODE = 0\n& {{\n{}\n}} | Out-String -Stream | ForEach-Object {{ [Console]::Out.Write($_ + \"`n\") }}\nif ($global:LASTEXITCODE) {{ $__kw_rc = $global:LASTEXITCODE }} }} catch {{ [Console]::Error.Write($_.ToString()); $__kw_rc = 1 }}\n[Console]::Out.Write(\"`n@@kwin:{nonce}:end:{i}:$__kw_rc`n\"); [Console]::Error.Write(\"`n@@kwin:{nonce}:end:{i}`n\")\n",
                    q.command
                ));
            }
        }
    }
    s
}

/// Split a batched script's output into answers by key. A section that never ended (the
/// script died) is an error naming the query. Sections are looked for in order, each after
/// the previous one (so the split is linear in the output's size), and anywhere if not there.
pub fn parse_batch(queries: &[FactQuery], out: &Output, nonce: &str) -> Result<Facts, FactError> {
    parse_batch_for(Shell::Posix, queries, out, nonce)
}

/// [`parse_batch`] for a script built by [`batch_script`] for `shell`.
pub fn parse_batch_for(
    shell: Shell,
    queries: &[FactQuery],
    out: &Output,
    nonce: &str,
) -> Result<Facts, FactError> {
    let stdout = normalize_newlines(&out.stdout);
    let stderr = normalize_newlines(&out.stderr);
    if !queries.is_empty() {
        if let Some(e) = not_run(out, nonce) {
            return Err(e);
        }
    }
    let mut facts = Facts::new();
    let (path_qs, rest) = split(shell, queries);
    let (mut out_from, mut err_from) = (0usize, 0usize);
    if !path_qs.is_empty() {
        // Raw bytes: file content and names are answered as they are (a `\r\n` in a file is
        // content, not a line ending to normalize).
        let begin = format!("\n@@kwin:{nonce}:paths\n");
        let end = format!("\n@@kwin:{nonce}:paths:end\n");
        let (group, _) =
            section(&out.stdout, begin.as_bytes(), end.as_bytes()).ok_or_else(|| {
                FactError::Parse(format!(
                    "probe output ended before the answer to `{}` (exit code {}): {}",
                    path_qs[0].0.key,
                    out.exit,
                    last_words(&out.stderr, 400)
                ))
            })?;
        // The other answers follow the group (in the normalized copy too).
        if let Some(e) = find(&stdout, end.as_bytes()) {
            out_from = e + end.len();
        }
        for ((q, _), answer) in
            path_qs
                .iter()
                .zip(paths::answers(&only_paths(&path_qs), group, nonce)?)
        {
            facts.insert(q.key.clone(), answer);
        }
    }
    for (i, q) in rest {
        let begin = format!("\n@@kwin:{nonce}:begin:{i}\n");
        let end_prefix = format!("\n@@kwin:{nonce}:end:{i}:");
        let (body, rest) =
            section_after(&stdout, out_from, begin.as_bytes(), end_prefix.as_bytes()).ok_or_else(
                || {
                    FactError::Parse(format!(
                        "probe output ended before the answer to `{}` (exit code {}): {}",
                        q.key,
                        out.exit,
                        last_words(&out.stderr, 400)
                    ))
                },
            )?;
        out_from = stdout.len() - rest.len();
        let code_end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        let exit = std::str::from_utf8(&rest[..code_end])
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
            .ok_or_else(|| FactError::Parse(format!("bad exit code marker for `{}`", q.key)))?;
        let err_end = format!("\n@@kwin:{nonce}:end:{i}\n");
        let err_body = match section_after(&stderr, err_from, begin.as_bytes(), err_end.as_bytes())
        {
            Some((b, rest)) => {
                err_from = stderr.len() - rest.len();
                b.to_vec()
            }
            None => Vec::new(),
        };
        facts.insert(
            q.key.clone(),
            FactOutput {
                stdout: body.to_vec(),
                stderr: err_body,
                exit,
            },
        );
    }
    Ok(facts)
}

/// A batched script's output (from [`batch_script`]) as the host log may show it: the
/// content of files whose mode gives group and others no read access, and the whole answer
/// of every query whose key `sensitive` names, replaced by its size and hash
/// ([`crate::secret::sensitive_hash`]). Everything else stays byte for byte. `None` when
/// nothing can need hiding (no file content read, no sensitive query): log `out` as it is.
/// Whether [`redact_for_log`] may hide anything of the answers to `queries`, known before
/// they are asked: a file's content is read, or an answer `sensitive` names. When not, the
/// answers are logged (and shown with `-v`, as they arrive) as received.
pub fn may_redact(shell: Shell, queries: &[FactQuery], sensitive: &dyn Fn(&str) -> bool) -> bool {
    let (path_qs, rest) = split(shell, queries);
    path_qs
        .iter()
        .any(|(_, p)| matches!(p.read, PathRead::Content | PathRead::ContentUnless(_)))
        || rest.iter().any(|(_, q)| sensitive(&q.key))
}

pub fn redact_for_log(
    shell: Shell,
    queries: &[FactQuery],
    out: &Output,
    nonce: &str,
    sensitive: &dyn Fn(&str) -> bool,
) -> Option<Output> {
    if !may_redact(shell, queries, sensitive) {
        return None;
    }
    let (path_qs, rest) = split(shell, queries);
    let mut stdout = out.stdout.clone();
    let mut stderr = out.stderr.clone();
    if !path_qs.is_empty() {
        let begin = format!("\n@@kwin:{nonce}:paths\n");
        let end = format!("\n@@kwin:{nonce}:paths:end\n");
        let keys: Vec<&str> = path_qs.iter().map(|(q, _)| q.key.as_str()).collect();
        stdout = replace_section(&stdout, begin.as_bytes(), end.as_bytes(), |group| {
            paths::redact_group(&only_paths(&path_qs), group, nonce, &|j| {
                keys.get(j).is_some_and(|k| sensitive(k))
            })
        });
    }
    for (i, q) in rest {
        if !sensitive(&q.key) {
            continue;
        }
        let begin = format!("\n@@kwin:{nonce}:begin:{i}\n");
        let hidden = |b: &[u8]| {
            format!(
                "({} bytes of a sensitive answer, {}, not logged)",
                b.len(),
                crate::secret::sensitive_hash(b)
            )
            .into_bytes()
        };
        stdout = replace_section(
            &stdout,
            begin.as_bytes(),
            format!("\n@@kwin:{nonce}:end:{i}:").as_bytes(),
            hidden,
        );
        stderr = replace_section(
            &stderr,
            begin.as_bytes(),
            format!("\n@@kwin:{nonce}:end:{i}\n").as_bytes(),
            hidden,
        );
    }
    Some(Output {
        stdout,
        stderr,
        exit: out.exit,
    })
}

/// `hay` with the body of the first `begin` … `end` section replaced by `f(body)`; `hay`
/// itself when there is no such section. An unterminated section is replaced up to the end.
pub(crate) fn replace_section(
    hay: &[u8],
    begin: &[u8],
    end: &[u8],
    f: impl FnOnce(&[u8]) -> Vec<u8>,
) -> Vec<u8> {
    let Some(b) = find(hay, begin).map(|b| b + begin.len()) else {
        return hay.to_vec();
    };
    let e = find(&hay[b..], end).map_or(hay.len(), |e| b + e);
    let mut v = Vec::with_capacity(hay.len());
    v.extend_from_slice(&hay[..b]);
    v.extend_from_slice(&f(&hay[b..e]));
    v.extend_from_slice(&hay[e..]);
    v
}

/// The last whole words of `b` within `n` bytes (lossy UTF-8, trimmed).
/// [`FactError::NotRun`] when `out` holds no marker of the batch at all: the host never ran
/// the script (every batch prints a marker before its first query).
pub fn not_run(out: &Output, nonce: &str) -> Option<FactError> {
    let marker = format!("@@kwin:{nonce}:");
    if find(&out.stdout, marker.as_bytes()).is_some()
        || find(&out.stderr, marker.as_bytes()).is_some()
    {
        return None;
    }
    let first_line = |b: &[u8]| {
        String::from_utf8_lossy(b)
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_string)
    };
    Some(FactError::NotRun {
        exit: out.exit,
        said: first_line(&out.stdout).or_else(|| first_line(&out.stderr)),
    })
}

fn last_words(b: &[u8], n: usize) -> String {
    let t = String::from_utf8_lossy(tail(b, n)).into_owned();
    if b.len() <= n {
        return t.trim().to_string();
    }
    match t.find(char::is_whitespace) {
        Some(i) => t[i..].trim().to_string(),
        None => String::new(),
    }
}

/// [`section`] in `hay[from..]`, else in all of `hay`.
fn section_after<'a>(
    hay: &'a [u8],
    from: usize,
    begin: &[u8],
    end: &[u8],
) -> Option<(&'a [u8], &'a [u8])> {
    hay.get(from..)
        .and_then(|h| section(h, begin, end))
        .or_else(|| {
            if from == 0 {
                None
            } else {
                section(hay, begin, end)
            }
        })
}

fn tail(b: &[u8], n: usize) -> &[u8] {
    &b[b.len().saturating_sub(n)..]
}

fn normalize_newlines(b: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if find(b, b"\r\n").is_some() {
        let mut v = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'\r' && b.get(i + 1) == Some(&b'\n') {
                i += 1;
                continue;
            }
            v.push(b[i]);
            i += 1;
        }
        std::borrow::Cow::Owned(v)
    } else {
        std::borrow::Cow::Borrowed(b)
    }
}

/// Bytes between `begin` and the next `end`, plus what follows `end`.
fn section<'a>(hay: &'a [u8], begin: &[u8], end: &[u8]) -> Option<(&'a [u8], &'a [u8])> {
    let b = find(hay, begin)? + begin.len();
    let e = find(&hay[b..], end)? + b;
    Some((&hay[b..e], &hay[e + end.len()..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::run_sh;

    /// A batch the host never ran (a `nologin` shell answered) is named as such, with the
    /// first line the host printed; a batch that ran and died is still a parse error.
    #[test]
    fn a_batch_the_host_never_ran_is_not_a_parse_error() {
        let q = [FactQuery {
            key: "k".into(),
            command: "echo hi".into(),
            path: None,
        }];
        let out = |stdout: &str, stderr: &str| Output {
            stdout: stdout.as_bytes().to_vec(),
            stderr: stderr.as_bytes().to_vec(),
            exit: 1,
        };
        let e = parse_batch(
            &q,
            &out("\nThis account is currently not available.\n", ""),
            "n1",
        )
        .expect_err("never ran");
        assert_eq!(
            e.to_string(),
            "did not run kwin's script (exit code 1); it printed \"This account is currently not available.\""
        );
        let e = parse_batch(&q, &out("", "  \n"), "n1").expect_err("silent");
        assert!(e.to_string().ends_with("it printed nothing"), "{e}");
        let e = parse_batch(&q, &out("\n@@kwin:n1:begin:0\n", "killed"), "n1").expect_err("died");
        assert!(matches!(e, FactError::Parse(_)), "{e}");
    }

    #[test]
    fn the_log_form_of_a_probe_hides_private_files_and_sensitive_answers() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().expect("tmp");
        let file = |name: &str, text: &str, mode: u32| {
            let p = d.path().join(name);
            std::fs::write(&p, text).expect("write");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
            p.display().to_string()
        };
        let private = file("private", "password=Hunter2private\n", 0o600);
        // Group members may read it: not private by mode.
        let group = file("group", "shared=GroupCanRead\n", 0o640);
        let public = file("public", "motd: hello world\n", 0o644);
        let marked = file("marked", "token=Hunter2marked\n", 0o644);
        let q = |p: &str| FactQuery {
            key: format!("content:{p}"),
            command: "exit 99".into(),
            path: Some(PathQuery {
                path: p.to_string(),
                read: PathRead::Content,
            }),
        };
        let queries = vec![
            q(&private),
            q(&group),
            q(&public),
            q(&marked),
            FactQuery::command(
                "registry",
                "echo value=Hunter2registry; echo oops Hunter2err >&2",
            ),
            FactQuery::command("other", "echo value=plain"),
        ];
        let nonce = new_nonce();
        let out = run_sh(&batch_script(Shell::Posix, &queries, &nonce));
        let facts = parse_batch(&queries, &out, &nonce).expect("parse");
        assert_eq!(facts.len(), 6);
        let sensitive = |k: &str| k == format!("content:{marked}") || k == "registry";
        let shown = redact_for_log(Shell::Posix, &queries, &out, &nonce, &sensitive)
            .expect("content is read");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&shown.stdout),
            String::from_utf8_lossy(&shown.stderr)
        );
        assert!(!text.contains("Hunter2"), "{text}");
        assert!(
            text.contains("motd: hello world")
                && text.contains("value=plain")
                && text.contains("shared=GroupCanRead"),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "({} bytes of content, {}, not logged)",
                "password=Hunter2private\n".len(),
                crate::secret::sensitive_hash(b"password=Hunter2private\n")
            )),
            "{text}"
        );
        // The log form still parses as the same facts, but for what it hides.
        let again = parse_batch(&queries, &shown, &nonce).expect("parse the log form");
        assert_eq!(again.raw("other"), facts.raw("other"));
        assert_eq!(
            again.raw(&format!("content:{public}")),
            facts.raw(&format!("content:{public}"))
        );
    }

    #[test]
    fn batch_round_trip_through_real_sh() {
        let qs = vec![
            FactQuery {
                key: "a".into(),
                command: "printf 'x\\ny'".into(),
                path: None,
            },
            FactQuery {
                key: "b".into(),
                command: "echo oops >&2; exit 3".into(),
                path: None,
            },
            FactQuery {
                key: "a".into(),
                command: "echo dup".into(),
                path: None,
            },
            FactQuery {
                key: "c".into(),
                command: "printf ''".into(),
                path: None,
            },
            FactQuery {
                key: "d".into(),
                command: "printf 'ends with newline\\n'".into(),
                path: None,
            },
        ];
        let nonce = new_nonce();
        let out = run_sh(&batch_script(Shell::Posix, &qs, &nonce));
        let facts = parse_batch(&qs, &out, &nonce).expect("parse");
        assert_eq!(facts.len(), 4);
        assert_eq!(
            facts.raw("a").map(|f| f.stdout.as_slice()),
            Some(&b"x\ny"[..])
        );
        let b = facts.raw("b").expect("b");
        assert_eq!((b.exit, b.stderr.as_slice()), (3, &b"oops\n"[..]));
        assert_eq!(facts.raw("c").map(|f| f.stdout.len()), Some(0));
        assert_eq!(
            facts.raw("d").map(|f| f.stdout.as_slice()),
            Some(&b"ends with newline\n"[..])
        );
    }

    /// The probe script reaches the shell on stdin (`sh -s`), as transports send it: a long
    /// batch must be read whole, and a query reading stdin must not eat the script.
    #[test]
    fn a_long_batch_on_stdin_is_read_whole_and_no_query_eats_it() {
        let mut qs: Vec<FactQuery> = (0..400)
            .map(|i| FactQuery {
                key: format!("k{i}"),
                command: format!("printf '%s' 'answer {i} {}'", "x".repeat(100)),
                path: None,
            })
            .collect();
        qs.insert(
            1,
            FactQuery {
                key: "reads-stdin".into(),
                command: "cat".into(),
                path: None,
            },
        );
        let nonce = new_nonce();
        let script = batch_script(Shell::Posix, &qs, &nonce);
        assert!(script.len() > 64 * 1024);
        let out = run_sh(&script);
        let facts = parse_batch(&qs, &out, &nonce).expect("every answer arrives");
        assert_eq!(facts.len(), 401);
        assert_eq!(facts.raw("reads-stdin").map(|f| f.stdout.len()), Some(0));
        let last = facts.raw("k399").expect("last answer");
        assert!(last.stdout.starts_with(b"answer 399 "));
    }

    #[test]
    fn clip_quotes_whole_words_at_both_ends() {
        assert_eq!(clip("short text"), "short text");
        let long = format!(
            "{} {} {}",
            "head ".repeat(200),
            "x".repeat(100_000),
            "tail ".repeat(200)
        );
        let c = clip(&long);
        assert!(c.len() < 1200, "{}", c.len());
        assert!(
            c.starts_with("head head") && c.ends_with("tail tail"),
            "{c}"
        );
        assert!(!c.contains('x') && c.contains("bytes left out"), "{c}");
        // One huge word: nothing of it is quoted (it could be a secret cut in half).
        let word = "s".repeat(10_000);
        assert_eq!(clip(&word), "[... 10000 bytes left out ...]");
        // Multibyte text is cut on character boundaries.
        let wide = "한국어 ".repeat(1000);
        assert!(clip(&wide).contains("한국어"));
    }

    #[test]
    fn find_matches_windows_search() {
        let hay = b"aab\naab\n@@kw\n@@kwin:x\n";
        for needle in [
            &b"\n@@kwin:"[..],
            b"aab",
            b"\n",
            b"zz",
            b"",
            b"x\n",
            b"aab\naab\n@@kw\n@@kwin:x\n!",
        ] {
            let want = if needle.is_empty() || hay.len() < needle.len() {
                None
            } else {
                hay.windows(needle.len()).position(|w| w == needle)
            };
            assert_eq!(find(hay, needle), want, "{needle:?}");
        }
    }

    #[test]
    fn truncated_output_names_the_query() {
        let qs = vec![FactQuery {
            key: "k".into(),
            command: "true".into(),
            path: None,
        }];
        let out = Output {
            stdout: b"\n@@kwin:n:begin:0\npartial".to_vec(),
            stderr: vec![],
            exit: 255,
        };
        let err = parse_batch(&qs, &out, "n").expect_err("must fail");
        assert!(err.to_string().contains("`k`"), "{err}");
    }
}
