//! Every `Step::Inline` a module plans keeps the rules of an inline step
//! (`kwin_engine::module::Step::Inline`): the batch runs it as a function of its own shell,
//! without a subshell, so nothing it does may outlive it but what the engine restores.
//!
//! The steps are those the Linux module cases plan (`tests/cases`, through the one case
//! runner), each checked twice:
//!
//! - by its text, with every single-quoted word (user text: paths, contents, messages)
//!   taken out: no `exit`, `cd` but `cd -P`, `pushd`, `trap`, `exec`, `.`/`source`, `eval`,
//!   `set` but `set -C`, `shopt`, `alias`, `local`, `readonly`, `export`, `unset`, no
//!   function definition, no `IFS=` (but before `read`, where it lasts for that command only); every variable it assigns is named `__kw_<name>` and is
//!   none of the batch's own (`__kw_rc`, `__kw_stop`, `__kw_umask`, `__kw_cwd`,
//!   `__kw_step`), and every variable it reads is one it assigns, or `$PWD`;
//! - by running it, as root, as the batch does (`__kw_step() { ... }; __kw_step </dev/null`,
//!   then `set +C; umask "$__kw_umask"; cd -- "$__kw_cwd"`), with `/bin/sh` (dash here) and busybox `sh`, in a
//!   throwaway overlay of this machine's root (`unshare --mount`, `chroot`): the shell must
//!   come back from it (no `exit`), with the same variables but `__kw_*` ones, the same
//!   options, traps, working directory and umask as before. Whether the step succeeds
//!   against this machine's files does not matter (a case's facts are not this machine's):
//!   success and failure paths must both return.

use kwin_modules::Builtin;
use kwin_testkit::cases::Suite;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::{Command, Stdio};

/// Variables of the batch itself, which a step must never set.
const RESERVED: [&str; 5] = [
    "__kw_rc",
    "__kw_stop",
    "__kw_umask",
    "__kw_cwd",
    "__kw_step",
];

/// The shell's reserved words: the end of a `read`'s operands where the split of [`words`]
/// leaves no separator (`read -r __kw_l; do`).
const RESERVED_WORDS: [&str; 8] = ["do", "done", "then", "else", "elif", "fi", "esac", "in"];

fn inline_steps() -> Vec<(String, String)> {
    let (failures, _, produced) = Suite::linux().run(&Builtin);
    assert!(failures.is_empty(), "the cases fail: {failures:?}");
    let steps = produced.inline_steps;
    assert!(!steps.is_empty(), "no module case plans an inline step");
    steps
}

/// `script` without its single-quoted words (`'...'`, which the shell never reads as code).
fn code_of(script: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let mut chars = script.chars();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (false, '\'') => quoted = true,
            (true, '\'') => {
                quoted = false;
                out.push_str("''");
            }
            (true, _) => {}
            // An escaped character outside quotes (`'\''` ends a quote, adds a `'`, opens
            // another) is not code either.
            (false, '\\') => {
                chars.next();
                out.push_str("\\_");
            }
            (false, c) => out.push(c),
        }
    }
    out
}

/// The words of `code`, split on what separates shell words and commands.
fn words(code: &str) -> Vec<&str> {
    code.split(|c: char| c.is_whitespace() || ";&|(){}`".contains(c))
        .filter(|w| !w.is_empty())
        .collect()
}

fn text_problems(script: &str) -> Vec<String> {
    let code = code_of(script);
    let mut problems = Vec::new();
    let ws = words(&code);
    for (i, w) in ws.iter().enumerate() {
        let banned = [
            "exit", "pushd", "popd", "trap", "exec", ".", "source", "eval", "shopt", "alias",
            "local", "readonly", "export", "unset", "typeset", "declare", "function",
        ];
        // `cd -P` into a write's directory: the engine restores the working directory.
        if *w == "cd" && ws.get(i + 1) != Some(&"-P") {
            problems.push(format!("uses `cd {}`", ws.get(i + 1).unwrap_or(&"")));
        }
        // A command word: the first word, or one after a separator (approximated by the
        // split above: any word equal to a banned builtin counts).
        // `.` as a test's operand (`[ -O . ]`, the directory a write is pinned to) is no
        // `source`.
        let operand = *w == "." && i > 0 && ws[i - 1].starts_with('-');
        if banned.contains(w) && !operand {
            problems.push(format!("uses `{w}`"));
        }
        if *w == "set" && ws.get(i + 1) != Some(&"-C") {
            problems.push(format!("uses `set {}`", ws.get(i + 1).unwrap_or(&"")));
        }
    }
    if code.contains("() {") || code.contains("(){") {
        problems.push("defines a function".into());
    }
    // Assignments (`name=` at the start of a word) and reads (`$name`, `${name...}`).
    // `IFS= read -r NAME`: an assignment before a regular built-in lasts for that command only
    // (POSIX, Shell Command Language 2.9.1: "If the command name is not a special built-in
    // utility or function, the variable assignments shall be exported for the execution
    // environment of the command and shall not affect the current execution environment");
    // `read`'s operands are variables it assigns.
    let mut assigned = BTreeSet::new();
    let is_name =
        |n: &str| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    for (i, w) in ws.iter().enumerate() {
        if *w == "IFS=" && code.matches("IFS=").count() == code.matches("IFS= read ").count() {
            continue;
        }
        if *w == "read" {
            for op in ws[i + 1..]
                .iter()
                .skip_while(|o| o.starts_with('-'))
                .take_while(|o| is_name(o) && !RESERVED_WORDS.contains(o))
            {
                if !op.starts_with("__kw_") || RESERVED.contains(op) {
                    problems.push(format!("assigns `{op}`"));
                }
                assigned.insert(op.to_string());
            }
        }
        if let Some((name, _)) = w.split_once('=') {
            if is_name(name) {
                if !name.starts_with("__kw_") || RESERVED.contains(&name) {
                    problems.push(format!("assigns `{name}`"));
                }
                assigned.insert(name.to_string());
            }
        }
    }
    for (i, _) in code.match_indices('$') {
        let rest = &code[i + 1..];
        let rest = rest.strip_prefix('{').unwrap_or(rest);
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() || name.chars().all(|c| c.is_ascii_digit()) {
            continue; // `$?`, `$$`, `$1`, `$(`
        }
        if !assigned.contains(&name) && name != "PWD" {
            problems.push(format!("reads `${name}`, which it does not set"));
        }
    }
    problems
}

#[test]
fn inline_steps_follow_the_rules_by_their_text() {
    let mut problems = Vec::new();
    let steps = inline_steps();
    for (from, script) in &steps {
        for p in text_problems(script) {
            problems.push(format!("{from}: {p}\n{script}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    // The check itself finds what it must.
    for (bad, what) in [
        ("exit 1", "`exit`"),
        ("cd /tmp", "`cd /tmp`"),
        ("set -e", "`set -e`"),
        ("p=/etc/motd", "assigns `p`"),
        ("__kw_rc=1", "assigns `__kw_rc`"),
        ("echo \"$HOME\"", "reads `$HOME`"),
        (". /etc/profile", "uses `.`"),
        ("f() { :; }", "defines a function"),
        ("IFS=:", "assigns `IFS`"),
        ("IFS= ; read -r __kw_l", "assigns `IFS`"),
        ("IFS= read -r line", "assigns `line`"),
    ] {
        let found = text_problems(bad);
        assert!(found.iter().any(|p| p.contains(what)), "`{bad}`: {found:?}");
    }
    assert!(
        text_problems("printf 'exit 1; cd /; $HOME' >&9 || { echo x >&2; return 1; }").is_empty()
    );
    assert!(text_problems("while IFS= read -r __kw_l; do :; done <f; echo \"$__kw_l\"").is_empty());
}

/// The state of the shell, as the batch's shell sees it: its variables (name → value line),
/// options, traps, working directory and umask, written to fd 3.
const SNAPSHOT: &str =
    "{ set; echo \"@@opts $-\"; trap; echo \"@@pwd $(pwd)\"; echo \"@@umask $(umask)\"; } >&3";

/// Run `script` as the batch runs an inline step, in a throwaway overlay of `/` as root, with
/// `shell`; (snapshot before, snapshot after, whether the shell came back).
fn run_inline(shell: &[&str], script: &str) -> (String, String, bool) {
    let body = format!(
        "umask 022\ncd /root 2>/dev/null || cd /\n__kw_umask=$(umask)\n__kw_cwd=$PWD\n{SNAPSHOT}\necho @@split >&3\n\
         __kw_step() {{\n{script}\n}}\n__kw_step </dev/null\n__kw_rc=$?\nset +C; umask \"$__kw_umask\"; [ \"$PWD\" = \"$__kw_cwd\" ] || cd -- \"$__kw_cwd\" 2>/dev/null || cd /\n\
         unset __kw_rc\n{SNAPSHOT}\necho @@returned >&3\n"
    );
    let sh = shell.join(" ");
    let setup = format!(
        "set -e\nt=$(mktemp -d)\nmount -t tmpfs kwin-inline \"$t\"\nmkdir \"$t/u\" \"$t/w\" \"$t/m\"\n\
         mount -t overlay kwin-inline -o \"lowerdir=/,upperdir=$t/u,workdir=$t/w\" \"$t/m\"\n\
         mount -t proc proc \"$t/m/proc\"\nmount --rbind /dev \"$t/m/dev\"\n\
         exec chroot \"$t/m\" {sh} -s 3>&1 >/dev/null 2>&1\n"
    );
    let mut child = Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "/bin/sh",
            "-c",
            &setup,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unshare");
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(body.as_bytes()).expect("script");
    }
    let out = child.wait_with_output().expect("wait");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("@@split"),
        "the sandbox did not start: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (before, after) = text.split_once("@@split\n").unwrap_or((&text, ""));
    let returned = after.contains("@@returned");
    (
        before.to_string(),
        after.replace("@@returned\n", ""),
        returned,
    )
}

/// Variable lines by name (`name=value` as `set` prints them; a value may span lines, which
/// then belong to the variable before them), and the other snapshot lines.
fn parse(snapshot: &str) -> (BTreeMap<String, String>, Vec<String>) {
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    let mut other = Vec::new();
    let mut last: Option<String> = None;
    for line in snapshot.lines() {
        if line.starts_with("@@") || line.starts_with("trap ") {
            other.push(line.to_string());
            last = None;
            continue;
        }
        let name = line
            .split_once('=')
            .map(|(n, _)| n)
            .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        match (name, &last) {
            (Some(n), _) => {
                vars.insert(n.to_string(), line.to_string());
                last = Some(n.to_string());
            }
            (None, Some(n)) => {
                if let Some(v) = vars.get_mut(n) {
                    v.push('\n');
                    v.push_str(line);
                }
            }
            (None, None) => other.push(line.to_string()),
        }
    }
    (vars, other)
}

fn shells() -> Vec<Vec<&'static str>> {
    let mut v = vec![vec!["/bin/sh"]];
    for bb in ["/bin/busybox", "/usr/bin/busybox"] {
        if std::path::Path::new(bb).exists() {
            v.push(vec![bb, "sh"]);
            break;
        }
    }
    v
}

kwin_testkit::lab_test! {
#[test]
fn inline_steps_leave_the_batch_shell_as_they_found_it() {
    let steps = inline_steps();
    let mut problems = Vec::new();
    for shell in shells() {
        for (from, script) in &steps {
            let (before, after, returned) = run_inline(&shell, script);
            let what = format!("{from} under {}", shell.join(" "));
            if !returned {
                problems.push(format!("{what}: the shell did not come back (exit?)\n{script}"));
                continue;
            }
            let (vb, ob) = parse(&before);
            let (va, oa) = parse(&after);
            if ob != oa {
                problems.push(format!("{what}: options, traps, directory or umask changed: {ob:?} -> {oa:?}"));
            }
            for (name, line) in &va {
                let allowed = name.starts_with("__kw_") && !RESERVED.contains(&name.as_str());
                // OLDPWD: the shell's record of the `cd` back to the batch's directory.
                let shells_own = ["LINENO", "_", "OLDPWD"].contains(&name.as_str());
                if vb.get(name) != Some(line) && !allowed && !shells_own {
                    problems.push(format!("{what}: sets `{name}` ({line})"));
                }
            }
            for name in vb.keys() {
                if !va.contains_key(name) && name != "__kw_rc" {
                    problems.push(format!("{what}: unsets `{name}`"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// The run check finds a step that breaks the rules (so the test above can fail).
#[test]
fn the_run_check_sees_exit_and_leaked_state() {
    let sh = ["/bin/sh"];
    let (_, _, returned) = run_inline(&sh, "echo x; exit 0");
    assert!(!returned, "an exit went unseen");
    let (b, a, returned) = run_inline(&sh, "cd /tmp; p=1; set -f; trap 'echo' USR1");
    assert!(returned);
    let ((vb, ob), (va, oa)) = (parse(&b), parse(&a));
    assert_ne!(ob, oa, "set -f and trap went unseen");
    assert!(va.contains_key("p") && !vb.contains_key("p"), "{va:?}");
    // What the engine restores is not a change.
    let (b, a, _) = run_inline(&sh, "umask 077; set -C; __kw_x=1");
    assert_eq!(parse(&b).1, parse(&a).1);
}
}
