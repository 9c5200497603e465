//! Every string parameter of every module, with hostile text in it.
//!
//! The modules and their parameters come from the modules themselves: [`Builtin`]'s names and,
//! for each name and shell, the JSON Schema of the module's own parameter type
//! (`Registry::params_schema`). Every string in that schema — fields, list items, map keys and
//! values, values of any type — is a parameter to attack; nothing here lists them by hand.
//!
//! Each parameter gets its benign values from the data-driven cases beside the modules
//! (`tests/{cases,windows_cases,kube_cases}/<module>/*.json`: params, inputs, captured fact
//! answers). A parameter no case sets fails the test: add a case. For every such value and
//! every hostile suffix (quotes, `$()`, backticks, newlines, `;`, `|`, `&&`, smart quotes,
//! `%`, `\`, NUL, each around the command name `kwin_canary`) the module is built again:
//!
//! - refused: the error must name the parameter (its path, or its name in the message);
//! - accepted: every script the module sends — each fact, the steps it plans against the
//!   case's fact answers, its output script — must
//!   - POSIX: parse (`sh -n`), and run through the real `/bin/sh` in a sandbox (a temporary
//!     directory whose `PATH` holds only recording stubs, as an unprivileged user when the
//!     test runs as root): `kwin_canary` never runs, and wherever the hostile text shows up
//!     (arguments of any command, stdout, stderr) it is whole — not split, expanded or
//!     unquoted. A NUL byte never reaches an argument: the script stops instead;
//!   - PowerShell: parse with tree-sitter-powershell, and hold `kwin_canary` only inside
//!     single-quoted (verbatim) string literals or verbatim here-strings, never as code
//!     (nothing here runs PowerShell: the rules are PowerShell's quoting rules as the grammar
//!     encodes them).

use kwin_engine::fact::{FactOutput, Facts};
use kwin_engine::module::{Ctx, Inputs, Module, ParamError, Plan, Registry};
use kwin_engine::secret::Secret;
use kwin_engine::transport::Shell;
use kwin_modules::Builtin;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The command an injection would run.
const CANARY: &str = "kwin_canary";

/// Hostile suffixes. Each holds [`CANARY`] where a broken quoting would run it (or expand,
/// split or reinterpret the text around it).
fn hostile() -> Vec<String> {
    [
        "'$(kwin_canary)'",
        "\"$(kwin_canary)\"",
        "`kwin_canary`",
        "$(kwin_canary)",
        ";kwin_canary;",
        "\nkwin_canary\n",
        "\r\nkwin_canary",
        "|kwin_canary",
        "&&kwin_canary",
        "${kwin_canary}$kwin_canary",
        "\u{201c}$(kwin_canary)\u{201d}",
        "\u{2018};kwin_canary;\u{2019}",
        "\u{201a}kwin_canary\u{201b}",
        "%kwin_canary%s%n%%",
        "\\kwin_canary\\n\\\\'\\",
        " -rf * kwin_canary",
        "a\0$(kwin_canary)",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

// ---------------------------------------------------------------- cases and schema paths

/// One data-driven case of a module.
struct Case {
    module: String,
    shell: Shell,
    file: PathBuf,
    params: Value,
    inputs: BTreeMap<String, String>,
    facts: BTreeMap<String, FactOutput>,
}

fn read_cases() -> Vec<Case> {
    use kwin_testkit::cases::{case_files, case_shell, read_case, Suite};
    let mut out = Vec::new();
    for suite in Suite::all() {
        for f in case_files(&suite.dir) {
            let c = read_case(&f.path).unwrap_or_else(|e| panic!("{e}"));
            out.push(Case {
                module: f.module,
                shell: case_shell(&c, suite.shell),
                file: f.path,
                params: c.params,
                inputs: c.inputs,
                facts: c
                    .facts
                    .iter()
                    .map(|(k, v)| (k.clone(), v.output()))
                    .collect(),
            });
        }
    }
    out
}

/// A step of a parameter path in the schema.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Pat {
    Key(String),
    /// Every item of a list.
    Items,
    /// Every value of a map.
    Values,
    /// Every key of a map (the last step of a path).
    Keys,
}

fn pat_text(p: &[Pat]) -> String {
    p.iter()
        .map(|s| match s {
            Pat::Key(k) => k.clone(),
            Pat::Items => "[]".into(),
            Pat::Values => "{value}".into(),
            Pat::Keys => "{key}".into(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// Every path of a string (or any-typed) value in `schema` that a module for `shell` reads.
/// Strings limited to fixed words (`enum`, `const`) are not free text and are left out, and
/// so are parameters of the other shell's module (`x-kwin-shell`), which this shell's refuses
/// whatever their value (`modules/tests/table.rs`).
fn string_paths(schema: &Value, shell: Shell) -> BTreeSet<Vec<Pat>> {
    fn walk(node: &Value, defs: &Value, path: &mut Vec<Pat>, out: &mut BTreeSet<Vec<Pat>>) {
        if path.len() > 8 {
            return;
        }
        match node {
            Value::Bool(true) => {
                out.insert(path.clone());
            }
            Value::Object(o) => {
                // Declared code by the module (`command`'s `run`, `unless`, `onlyif`): it runs
                // as written, by design.
                if o.get("x-kwin-code") == Some(&Value::Bool(true)) {
                    return;
                }
                if let Some(r) = o.get("$ref").and_then(Value::as_str) {
                    let name = r.rsplit('/').next().unwrap_or("");
                    if let Some(d) = defs.get(name) {
                        walk(d, defs, path, out);
                    }
                }
                for k in ["anyOf", "oneOf", "allOf"] {
                    for v in o.get(k).and_then(Value::as_array).into_iter().flatten() {
                        walk(v, defs, path, out);
                    }
                }
                if o.contains_key("enum") || o.contains_key("const") {
                    return;
                }
                let types: Vec<&str> = match o.get("type") {
                    Some(Value::String(t)) => vec![t.as_str()],
                    Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
                    _ => Vec::new(),
                };
                let any = !o.contains_key("type")
                    && !o.contains_key("$ref")
                    && !o.contains_key("anyOf")
                    && !o.contains_key("oneOf")
                    && !o.contains_key("properties");
                if types.contains(&"string") || any {
                    out.insert(path.clone());
                }
                if let Some(props) = o.get("properties").and_then(Value::as_object) {
                    for (k, v) in props {
                        path.push(Pat::Key(k.clone()));
                        walk(v, defs, path, out);
                        path.pop();
                    }
                }
                match o.get("additionalProperties") {
                    Some(Value::Bool(false)) | None => {}
                    Some(v) => {
                        path.push(Pat::Keys);
                        out.insert(path.clone());
                        path.pop();
                        path.push(Pat::Values);
                        walk(v, defs, path, out);
                        path.pop();
                    }
                }
                if let Some(items) = o.get("items") {
                    path.push(Pat::Items);
                    walk(items, defs, path, out);
                    path.pop();
                }
            }
            _ => {}
        }
    }
    let defs = schema.get("$defs").cloned().unwrap_or(Value::Null);
    let mut out = BTreeSet::new();
    // The top level is the params object itself, not a parameter.
    let mine = match shell {
        Shell::Posix => "linux",
        Shell::PowerShell => "windows",
    };
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            if v.get("x-kwin-shell")
                .and_then(Value::as_str)
                .is_some_and(|s| s != mine)
            {
                continue;
            }
            let mut path = vec![Pat::Key(k.clone())];
            walk(v, &defs, &mut path, &mut out);
        }
    }
    out
}

/// A concrete position in a params value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
    /// The key itself of a map entry.
    MapKey(String),
}

fn dotted(at: &[Seg]) -> String {
    at.iter()
        .map(|s| match s {
            Seg::Key(k) | Seg::MapKey(k) => k.clone(),
            Seg::Index(i) => i.to_string(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// Every position in `v` matching `pat` that holds a string (or, for `Keys`, a map key).
fn instances(v: &Value, pat: &[Pat]) -> Vec<(Vec<Seg>, String)> {
    fn go(v: &Value, pat: &[Pat], at: &mut Vec<Seg>, out: &mut Vec<(Vec<Seg>, String)>) {
        match pat.first() {
            None => {
                if let Value::String(s) = v {
                    out.push((at.clone(), s.clone()));
                }
            }
            Some(Pat::Key(k)) => {
                if let Some(x) = v.get(k) {
                    at.push(Seg::Key(k.clone()));
                    go(x, &pat[1..], at, out);
                    at.pop();
                }
            }
            Some(Pat::Items) => {
                if let Value::Array(a) = v {
                    for (i, x) in a.iter().enumerate() {
                        at.push(Seg::Index(i));
                        go(x, &pat[1..], at, out);
                        at.pop();
                    }
                }
            }
            Some(Pat::Values) => {
                if let Value::Object(o) = v {
                    for (k, x) in o {
                        at.push(Seg::Key(k.clone()));
                        go(x, &pat[1..], at, out);
                        at.pop();
                    }
                }
            }
            Some(Pat::Keys) => {
                if let Value::Object(o) = v {
                    for k in o.keys() {
                        at.push(Seg::MapKey(k.clone()));
                        out.push((at.clone(), k.clone()));
                        at.pop();
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    go(v, pat, &mut Vec::new(), &mut out);
    out
}

/// `v` with the string (or map key) at `at` replaced by `new`.
fn replaced(v: &Value, at: &[Seg], new: &str) -> Value {
    let mut v = v.clone();
    let mut cur = &mut v;
    for (i, s) in at.iter().enumerate() {
        let last = i + 1 == at.len();
        match s {
            Seg::Key(k) => {
                if last {
                    cur[k.as_str()] = Value::String(new.to_string());
                    return v;
                }
                cur = &mut cur[k.as_str()];
            }
            Seg::Index(n) => {
                if last {
                    cur[*n] = Value::String(new.to_string());
                    return v;
                }
                cur = &mut cur[*n];
            }
            Seg::MapKey(k) => {
                if let Some(o) = cur.as_object_mut() {
                    if let Some(x) = o.remove(k) {
                        o.insert(new.to_string(), x);
                    }
                }
                return v;
            }
        }
    }
    v
}

// ---------------------------------------------------------------- scripts of a module

/// Every script a module sends: its facts, the steps it plans against `answers` (by fact
/// index), and its output script.
fn scripts_of(
    m: &dyn Module,
    shell: Shell,
    answers: &[Option<FactOutput>],
    inputs: &Inputs,
) -> Vec<(String, String)> {
    let queries = m.facts(shell);
    let mut out: Vec<(String, String)> = queries
        .iter()
        .map(|q| (format!("fact `{}`", q.key), q.command.clone()))
        .collect();
    if queries.len() == answers.len() && answers.iter().all(Option::is_some) {
        let mut facts = Facts::new();
        for (q, a) in queries.iter().zip(answers) {
            if let Some(a) = a {
                facts.insert(q.key.clone(), a.clone());
            }
        }
        let ctx = Ctx {
            shell,
            host: "h1",
            inputs,
            nonce: "0123456789abcdef0123456789abcdef",
        };
        if let Ok(Plan::Change(c)) = m.plan(&facts, &ctx) {
            for (i, s) in c.steps.iter().enumerate() {
                if let Some(script) = s.standalone() {
                    out.push((format!("step {i}"), script));
                }
            }
        }
    }
    if let Some(o) = m.output(shell) {
        out.push(("output".into(), o));
    }
    out
}

/// The case's answer for each fact `m` asks, in order: by exact key, or by the key's prefix
/// before the first `:` (the kube cases' form).
fn answers_for(m: &dyn Module, shell: Shell, case: &Case) -> Vec<Option<FactOutput>> {
    m.facts(shell)
        .iter()
        .map(|q| {
            case.facts
                .get(&q.key)
                .or_else(|| case.facts.get(q.key.split(':').next().unwrap_or("")))
                .cloned()
        })
        .collect()
}

// ---------------------------------------------------------------- POSIX: the sandbox

/// A directory whose `bin/` holds a recording stub under the name of every program on this
/// machine's `PATH` (and `kwin_canary`): a stub writes its name and arguments to the log
/// and exits 0 without output; `mktemp` makes its file or directory inside the sandbox.
struct Sandbox {
    dir: tempfile::TempDir,
    as_nobody: bool,
}

const STUB: &str = r#"#!/bin/sh
{ printf '%s\037' "${0##*/}" "$@"; printf '\036'; } >> "$KWIN_STUB_LOG"
case ${0##*/} in
mktemp)
  case " $* " in
  *" -d "*) exec /usr/bin/mktemp -d -p "$KWIN_SANDBOX_TMP" ;;
  *) exec /usr/bin/mktemp -p "$KWIN_SANDBOX_TMP" ;;
  esac ;;
esac
exit 0
"#;

impl Sandbox {
    fn new() -> Sandbox {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("sandbox dir");
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).expect("bin");
        let stub = dir.path().join("stub");
        std::fs::write(&stub, STUB).expect("stub");
        std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let mut names: BTreeSet<String> = BTreeSet::new();
        for d in [
            "/usr/local/sbin",
            "/usr/local/bin",
            "/usr/sbin",
            "/usr/bin",
            "/sbin",
            "/bin",
        ] {
            for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
                if let Some(n) = e.file_name().to_str() {
                    names.insert(n.to_string());
                }
            }
        }
        names.insert(CANARY.to_string());
        for n in &names {
            if n.contains('/') || n == "." || n == ".." {
                continue;
            }
            let _ = std::os::unix::fs::symlink(&stub, bin.join(n));
        }
        let as_nobody = kwin_testkit::host::is_root()
            && Command::new("/usr/bin/setpriv")
                .arg("--help")
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
        for p in [dir.path(), bin.as_path()] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        Sandbox { dir, as_nobody }
    }

    /// Run `script` on `/bin/sh -s` in a fresh run directory: (stub calls, stdout, stderr).
    fn run(&self, script: &str) -> (Vec<Vec<String>>, String, String) {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        let run = tempfile::tempdir_in(self.dir.path()).expect("run dir");
        std::fs::set_permissions(run.path(), std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
        let log = run.path().join("calls");
        std::fs::write(&log, "").expect("log");
        std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        // Absolute paths: the child's PATH holds only stubs.
        let mut cmd = Command::new("/usr/bin/timeout");
        cmd.args(["-k", "1", "3"]);
        if self.as_nobody {
            cmd.args([
                "/usr/bin/setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--no-new-privs",
            ]);
        }
        cmd.args(["/bin/sh", "-s"])
            .env_clear()
            .env("PATH", self.dir.path().join("bin"))
            .env("HOME", run.path())
            .env("TMPDIR", run.path())
            .env("LC_ALL", "C")
            .env("KWIN_STUB_LOG", &log)
            .env("KWIN_SANDBOX_TMP", run.path())
            .current_dir(run.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("run /bin/sh");
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(script.as_bytes());
        }
        let out = child.wait_with_output().expect("wait");
        let calls = std::fs::read(&log).unwrap_or_default();
        let calls = calls
            .split(|b| *b == 0x1e)
            .filter(|c| !c.is_empty())
            .map(|c| {
                c.split(|b| *b == 0x1f)
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
            })
            .map(|mut v| {
                v.pop(); // after the last separator
                v
            })
            .collect();
        (
            calls,
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

fn sh_n(script: &str) -> Result<(), String> {
    use std::io::Write;
    let mut child = Command::new("/bin/sh")
        .arg("-n")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(script.as_bytes());
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Where `text` holds [`CANARY`] outside an intact copy of `hostile`.
fn broken_at(text: &str, hostile: &str) -> Option<usize> {
    let whole: Vec<std::ops::Range<usize>> = text
        .match_indices(hostile)
        .map(|(i, h)| i..i + h.len())
        .collect();
    text.match_indices(CANARY).map(|(i, _)| i).find(|i| {
        !whole
            .iter()
            .any(|r| r.start <= *i && *i + CANARY.len() <= r.end)
    })
}

/// Characters `sh_quote` leaves unquoted: a bare word of only these is literal.
fn sh_plain(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"@%+=:,./-_".contains(&b))
}

/// Where `script` holds [`CANARY`] other than as literal text, by the grammar
/// (tree-sitter-bash): literal is inside a single-quoted string, inside the body of a
/// here-document whose delimiter is quoted, or in a word of only the characters `sh_quote`
/// leaves bare that holds the whole `hostile` text. Anything else — a command name, an expansion, a
/// command substitution, double quotes (which expand `$` and eat backslashes), an unquoted
/// word with shell syntax in it — would run, expand or alter the value. Unlike a run, this
/// covers every branch of the script.
fn posix_code_at(script: &str, hostile: &str) -> Vec<String> {
    let mut parser = tree_sitter::Parser::new();
    if parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .is_err()
    {
        return vec!["cannot load the bash grammar".into()];
    }
    // A NUL ends tree-sitter's input: parse with a same-length stand-in.
    let masked = script.replace('\0', "N");
    let Some(tree) = parser.parse(&masked, None) else {
        return vec!["tree-sitter gave up".into()];
    };
    let mut out = Vec::new();
    for (at, _) in masked.match_indices(CANARY) {
        let Some(mut node) = tree
            .root_node()
            .descendant_for_byte_range(at, at + CANARY.len())
        else {
            continue;
        };
        let verdict = loop {
            match node.kind() {
                "raw_string" => break None,
                "heredoc_body" => {
                    let quoted = node
                        .parent()
                        .and_then(|r| {
                            (0..r.child_count())
                                .filter_map(|i| r.child(i as u32))
                                .find(|c| c.kind() == "heredoc_start")
                        })
                        .and_then(|st| st.utf8_text(masked.as_bytes()).ok())
                        .is_some_and(|t| t.starts_with(['\'', '"', '\\']));
                    break (!quoted).then_some("an unquoted here-document");
                }
                "word" => {
                    // A bare word is literal when it is plain and holds the whole hostile
                    // text: a command name then is the parameter itself, a program path.
                    // Part of it alone means the value was split.
                    let text = node.utf8_text(masked.as_bytes()).unwrap_or("");
                    if !sh_plain(text) {
                        break Some("an unquoted word with shell syntax");
                    }
                    if !text.contains(&hostile.replace('\0', "N")) {
                        break Some("a word split from the value");
                    }
                    break None;
                }
                "command_name" => break Some("a command name"),
                "command_substitution" => break Some("a command substitution"),
                "simple_expansion" | "expansion" => break Some("an expansion"),
                "arithmetic_expansion" => break Some("an arithmetic expansion"),
                "string" => break Some("a double-quoted string"),
                "ansi_c_string" => break Some("a $'...' string"),
                "comment" => break Some("a comment"),
                "ERROR" => break Some("a syntax error"),
                "program" => break Some("unquoted shell text"),
                _ => {}
            }
            match node.parent() {
                Some(p) => node = p,
                None => break Some("unquoted shell text"),
            }
        };
        if let Some(why) = verdict {
            let from = script[..at].rfind('\n').map_or(0, |i| i + 1);
            let to = script[at..].find('\n').map_or(script.len(), |i| at + i);
            out.push(format!(
                "the value is in {why} at byte {at}: `{}`",
                &script[from..to]
            ));
        }
    }
    out
}

/// The hostile suffixes whose scripts also run in the sandbox (every suffix gets the grammar
/// check, which covers every branch): one of each way a running script mangles a value —
/// closed quotes with a command substitution, backslash sequences (dash's `echo`), `%` formats
/// (`printf`), a NUL — to keep the run short.
fn runs_in_sandbox(hostile: &str) -> bool {
    hostile.starts_with('\'')
        || hostile.starts_with('\\')
        || hostile.starts_with('%')
        || hostile.contains('\0')
}

/// Problems of one POSIX script run with `hostile` in one parameter.
fn check_posix(sb: &Sandbox, script: &str, hostile: &str) -> Vec<String> {
    let mut problems = posix_code_at(script, hostile);
    if !runs_in_sandbox(hostile) {
        return problems;
    }
    if let Err(e) = sh_n(script) {
        problems.push(format!("sh -n rejects it: {e}"));
        return problems;
    }
    let (calls, stdout, stderr) = sb.run(script);
    for c in &calls {
        if c.first().map(String::as_str) == Some(CANARY) {
            problems.push(format!("`kwin_canary` ran: {c:?}"));
        }
    }
    if hostile.contains('\0') {
        // A NUL cannot be passed to a program: the script must stop, not drop it.
        for c in &calls {
            if c.iter().any(|a| a.contains(CANARY)) {
                problems.push(format!(
                    "the value reached a command without its NUL: {c:?}"
                ));
            }
        }
        return problems;
    }
    for c in &calls {
        for a in c {
            if let Some(at) = broken_at(a, hostile) {
                problems.push(format!(
                    "an argument of `{}` holds the value altered (at {at}): {a:?}",
                    c.first().map(String::as_str).unwrap_or("?")
                ));
            }
        }
    }
    for (name, text) in [("stdout", &stdout), ("stderr", &stderr)] {
        if let Some(at) = broken_at(text, hostile) {
            problems.push(format!(
                "{name} holds the value altered (at {at}): {text:?}"
            ));
        }
    }
    problems
}

// ---------------------------------------------------------------- PowerShell: the grammar

/// Byte ranges of every verbatim (single-quoted) string literal and verbatim here-string in
/// `script`, or its syntax errors.
fn ps_literal_ranges(script: &str) -> Result<Vec<std::ops::Range<usize>>, String> {
    let errors = kwin_testkit::scripts::ps_syntax_errors(script);
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&tree_sitter_powershell::LANGUAGE.into())
        .map_err(|e| e.to_string())?;
    let tree = parser.parse(script, None).ok_or("tree-sitter gave up")?;
    let mut lits = Vec::new();
    let mut cursor = tree.walk();
    let mut stack = vec![tree.root_node()];
    while let Some(n) = stack.pop() {
        if matches!(
            n.kind(),
            "verbatim_string_characters" | "verbatim_here_string_characters"
        ) {
            lits.push(n.byte_range());
            continue;
        }
        for c in n.children(&mut cursor) {
            stack.push(c);
        }
    }
    Ok(lits)
}

fn check_powershell(script: &str) -> Vec<String> {
    // PowerShell keeps a NUL inside a single-quoted literal as it is; tree-sitter's lexer takes
    // NUL for the end of input. Parse with a same-length stand-in, then require every NUL to
    // sit inside a literal too.
    let masked = script.replace('\0', "N");
    match ps_literal_ranges(&masked) {
        Err(e) => vec![format!("syntax errors: {e}")],
        Ok(lits) => script
            .match_indices(['\0'])
            .filter(|(at, _)| !lits.iter().any(|r| r.start <= *at && at < &r.end))
            .map(|(at, _)| format!("a NUL outside a literal at byte {at}"))
            .chain(
                script
                    .match_indices(CANARY)
                    .filter(|(at, _)| {
                        !lits
                            .iter()
                            .any(|r| r.start <= *at && at + CANARY.len() <= r.end)
                    })
                    .map(|(at, _)| {
                        let from = script[..at].rfind('\n').map_or(0, |i| i + 1);
                        let to = script[at..].find('\n').map_or(script.len(), |i| at + i);
                        format!(
                            "the value is code, not a literal, at byte {at}: `{}`",
                            &script[from..to]
                        )
                    }),
            )
            .collect(),
    }
}

// ---------------------------------------------------------------- the test

/// One script to check, with the hostile text its parameter holds.
struct Job {
    what: String,
    shell: Shell,
    script: String,
    hostile: String,
}

/// Check every job that holds [`CANARY`] as text (a script holding the value only encoded —
/// base64, octal escapes — cannot run it), each distinct script once, on two threads.
/// Returns how many were checked.
fn run_jobs(sb: &Sandbox, jobs: Vec<Job>, problems: &mut Vec<String>) -> usize {
    let mut seen = BTreeSet::new();
    let jobs: Vec<Job> = jobs
        .into_iter()
        .filter(|j| j.script.contains(CANARY))
        .filter(|j| seen.insert((j.script.clone(), j.hostile.clone())))
        .collect();
    let n = jobs.len();
    let found = std::sync::Mutex::new(Vec::new());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(j) = jobs.get(i) else { break };
                let p = match j.shell {
                    Shell::Posix => check_posix(sb, &j.script, &j.hostile),
                    Shell::PowerShell => check_powershell(&j.script),
                };
                if !p.is_empty() {
                    if let Ok(mut f) = found.lock() {
                        f.extend(p.into_iter().map(|p| format!("{}: {p}", j.what)));
                    }
                }
            });
        }
    });
    problems.extend(found.into_inner().unwrap_or_default());
    n
}

/// A top-level string parameter this shell refuses whatever its value (a Linux-only
/// parameter of a module of both shells, e.g. `kubeadm_upgrade`'s admin `kubeconfig` on
/// Windows): set to a Windows path, a POSIX path and a bare word in every case that builds,
/// each build fails naming it. Nothing of its value can reach a script.
fn refused_on_shell(name: &str, shell: Shell, cases: &[&Case], pat: &[Pat]) -> bool {
    let [Pat::Key(k)] = pat else {
        return false;
    };
    !cases.is_empty()
        && cases.iter().all(|c| {
            ["C:\\k\\x", "/etc/x", "x"].iter().all(|v| {
                let mut p = c.params.clone();
                p[k.as_str()] = Value::String((*v).to_string());
                Builtin
                    .build(name, shell, &p)
                    .err()
                    .is_some_and(|e| names_param(&e, &[Seg::Key(k.clone())]))
            })
        })
}

/// Whether a refusal names the parameter: its path, or the parameter's name in the message.
fn names_param(e: &ParamError, at: &[Seg]) -> bool {
    let path = dotted(at);
    let key = at
        .iter()
        .rev()
        .find_map(|s| match s {
            Seg::Key(k) => Some(k.as_str()),
            _ => None,
        })
        .unwrap_or("");
    e.path
        .as_deref()
        .is_some_and(|p| path.starts_with(p) || p.starts_with(&path))
        || (!key.is_empty() && e.message.contains(&format!("`{key}`")))
}

#[test]
#[allow(clippy::print_stderr)] // the summary line, shown with --nocapture
fn every_string_parameter_of_every_module_is_quoted_or_refused() {
    let cases = read_cases();
    let sb = Sandbox::new();
    let hostile = hostile();
    let mut problems: Vec<String> = Vec::new();
    let mut uncovered: Vec<String> = Vec::new();
    let (mut modules, mut params, mut refused) = (0, 0, 0);
    let mut jobs: Vec<Job> = Vec::new();

    for name in Builtin.names() {
        for shell in [Shell::Posix, Shell::PowerShell] {
            let Some(schema) = Builtin.params_schema(name, shell) else {
                let e = Builtin
                    .build(name, shell, &serde_json::json!({}))
                    .expect_err("a module without a schema does not build");
                assert!(
                    e.message.contains("not available"),
                    "`{name}` builds for {shell:?} but the registry gives no params schema: {e}"
                );
                continue;
            };
            modules += 1;
            let mine: Vec<&Case> = cases
                .iter()
                .filter(|c| c.module == name && c.shell == shell)
                .filter(|c| Builtin.build(name, shell, &c.params).is_ok())
                .collect();
            for pat in string_paths(&schema, shell) {
                let mut seen = false;
                for case in &mine {
                    let benign = Builtin
                        .build(name, shell, &case.params)
                        .expect("built above");
                    let answers = answers_for(benign.as_ref(), shell, case);
                    let mut inputs = Inputs::new();
                    for (k, v) in &case.inputs {
                        inputs.insert(k.clone(), Secret::new(v.clone()));
                    }
                    for (at, value) in instances(&case.params, &pat) {
                        seen = true;
                        params += 1;
                        for h in &hostile {
                            let bad = replaced(&case.params, &at, &format!("{value}{h}"));
                            let what = format!(
                                "{name} ({shell:?}) `{}` = {value:?} + {h:?} [{}]",
                                dotted(&at),
                                case.file.file_name().and_then(|n| n.to_str()).unwrap_or("")
                            );
                            let m = match Builtin.build(name, shell, &bad) {
                                Ok(m) => m,
                                Err(e) => {
                                    refused += 1;
                                    if !names_param(&e, &at) {
                                        problems.push(format!(
                                            "{what}: refused without naming the parameter: {e} (path {:?})",
                                            e.path
                                        ));
                                    }
                                    continue;
                                }
                            };
                            for (which, script) in scripts_of(m.as_ref(), shell, &answers, &inputs)
                            {
                                jobs.push(Job {
                                    what: format!("{what}, {which}"),
                                    shell,
                                    script,
                                    hostile: h.clone(),
                                });
                            }
                        }
                    }
                }
                if !seen && !refused_on_shell(name, shell, &mine, &pat) {
                    uncovered.push(format!("{name} ({shell:?}) `{}`", pat_text(&pat)));
                } else if !seen {
                    refused += 1;
                }
            }
        }
    }
    let total = jobs.len();
    let ran = run_jobs(&sb, jobs, &mut problems);

    eprintln!(
        "{modules} modules, {params} parameter values × {} hostile suffixes: {refused} refused, \
         {total} scripts, {ran} of them holding the value as text checked",
        hostile.len()
    );
    if !uncovered.is_empty() {
        problems.push(format!(
            "string parameters no case sets (add a case under tests/*cases/<module>/ that sets each):\n{}",
            uncovered.join("\n")
        ));
    }
    problems.sort();
    problems.dedup();
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems
            .iter()
            .take(200)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The checks themselves can fail: a script that runs the value, splits it, or leaves the
/// PowerShell literal is caught.
#[test]
fn the_checks_catch_injection() {
    let sb = Sandbox::new();
    let h = "'$(kwin_canary)'";
    // run as code
    let p = check_posix(&sb, "v=x$(kwin_canary)\necho done", h);
    assert!(p.iter().any(|p| p.contains("ran")), "{p:?}");
    // pasted into double quotes (the kube_apply bug)
    let p = check_posix(&sb, "echo \"url'$(kwin_canary)': bad\" >&2", h);
    assert!(p.iter().any(|p| p.contains("ran")), "{p:?}");
    // quoted, but altered on the way (quotes stripped)
    let p = check_posix(&sb, "printf '%s\\n' \"'\"'$(kwin_canary)'\"'\" | tr -d \"'\"\nls x$(printf %s '$(kwin_canary)')", h);
    assert!(p.iter().any(|p| p.contains("altered")), "{p:?}");
    // quoted whole: fine
    let p = check_posix(&sb, "ls -- 'x'\\''$(kwin_canary)'\\'''", h);
    assert!(p.is_empty(), "{p:?}");
    // NUL dropped
    let p = check_posix(&sb, "ls 'a$(kwin_canary)'", "a\0$(kwin_canary)");
    assert!(p.iter().any(|p| p.contains("NUL")), "{p:?}");
    // in a branch that never runs: the grammar still sees it
    let p = check_posix(&sb, "if false; then echo \"x$(kwin_canary)\"; fi", h);
    assert!(!p.is_empty(), "{p:?}");
    let p = check_posix(&sb, "if false; then ls x;kwin_canary; fi", ";kwin_canary;");
    assert!(p.iter().any(|p| p.contains("split")), "{p:?}");
    let p = check_posix(
        &sb,
        "if false; then echo \"a\\kwin_canary\"; fi",
        "\\kwin_canary",
    );
    assert!(p.iter().any(|p| p.contains("double-quoted")), "{p:?}");
    let p = check_posix(&sb, "cat <<EOF\n$(kwin_canary)\nEOF\n", h);
    assert!(!p.is_empty(), "{p:?}");
    let p = check_posix(&sb, "cat <<'EOF'\n$(kwin_canary)\nEOF\n", "$(kwin_canary)");
    assert!(p.is_empty(), "{p:?}");
    let p = check_posix(&sb, "ls /etc/x%kwin_canary%s", "%kwin_canary%s");
    assert!(p.is_empty(), "{p:?}");
    // PowerShell: code vs literal
    assert!(!check_powershell("Write-Output \"$(kwin_canary)\"").is_empty());
    assert!(!check_powershell("Write-Output x;kwin_canary").is_empty());
    assert!(check_powershell("Write-Output 'x$(kwin_canary)'").is_empty());
}
