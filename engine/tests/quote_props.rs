//! Property tests of `sh_quote` and `ps_quote` against real parsers.
//!
//! `sh_quote`: arbitrary strings go through every POSIX shell on the machine (`/bin/sh`,
//! `dash`, `bash`, `busybox sh`), the way kwin sends scripts (over stdin to `sh -s`), in three
//! positions (command argument, assignment, `set --`), and must come back byte for byte.
//! A string with a NUL byte cannot be a shell word: the quoted word must stop the shell with
//! an error and run nothing after it, never print a shortened value.
//!
//! `ps_quote`: the quoted text, parsed by tree-sitter-powershell, must be exactly one verbatim
//! string literal spanning all of it, whose value under PowerShell's rules (each of the five
//! single-quote characters doubled stands for one) is the input.

use kwin_engine::quote::{ps_quote, sh_quote};
use proptest::prelude::*;
use std::io::Write;
use std::process::{Command, Stdio};

/// The shells to check: (label, program, leading args). `/bin/sh` is checked even when it is
/// one of the others (it is what hosts run).
fn shells() -> Vec<(&'static str, &'static str, &'static [&'static str])> {
    let mut v: Vec<(&str, &str, &[&str])> = vec![("/bin/sh", "/bin/sh", &[])];
    for (label, prog, args) in [
        ("dash", "/bin/dash", &[][..]),
        ("bash", "/bin/bash", &[][..]),
        ("busybox sh", "/usr/bin/busybox", &["sh"][..]),
    ] {
        if std::path::Path::new(prog).exists() {
            v.push((label, prog, args));
        }
    }
    v
}

struct ShellRun {
    stdout: Vec<u8>,
    stderr: String,
    code: Option<i32>,
}

/// Run `script` the way kwin does: text on stdin of `SHELL -s`.
fn run_script(prog: &str, args: &[&str], script: &str) -> ShellRun {
    let mut child = Command::new(prog)
        .args(args)
        .arg("-s")
        .env("LC_ALL", "C.UTF-8")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {prog}: {e}"));
    let mut stdin = child.stdin.take().expect("stdin");
    let bytes = script.as_bytes().to_vec();
    let writer = std::thread::spawn(move || {
        // The shell may exit before reading everything (NUL cases): ignore EPIPE.
        let _ = stdin.write_all(&bytes);
    });
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("wait {prog}: {e}"));
    let _ = writer.join();
    ShellRun {
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code(),
    }
}

/// The word in three positions; each prints the value once.
fn round_trip_script(word: &str) -> String {
    format!(
        "printf '%s' {word}\nv={word}\nprintf '%s' \"$v\"\nset -- {word} tail\nprintf '%s' \"$1\"\n"
    )
}

fn check_sh_round_trip(s: &str) -> Result<(), TestCaseError> {
    let word = sh_quote(s);
    let script = round_trip_script(&word);
    let want = s.repeat(3);
    for (label, prog, args) in shells() {
        let r = run_script(prog, args, &script);
        prop_assert_eq!(
            r.code,
            Some(0),
            "{} failed on {:?} (word {:?}): {}",
            label,
            s,
            word,
            r.stderr
        );
        prop_assert!(
            r.stdout == want.as_bytes(),
            "{} changed {:?} (word {:?}) into {:?}",
            label,
            s,
            word,
            String::from_utf8_lossy(&r.stdout)
        );
    }
    Ok(())
}

/// Fragments that mean something to a shell (or to PowerShell).
const HOSTILE: &[&str] = &[
    "'",
    "\"",
    "\\",
    "$(",
    ")",
    "`",
    "${",
    "}",
    "$",
    ";",
    "&",
    "&&",
    "|",
    "||",
    "<",
    ">",
    ">>",
    "\n",
    "\r",
    "\t",
    " ",
    "*",
    "?",
    "[",
    "]",
    "~",
    "#",
    "!",
    "=",
    "%",
    "-",
    "--",
    "$HOME",
    "$(id)",
    "`id`",
    "$((1+1))",
    "'\\''",
    "\\'",
    "\\\"",
    "\u{2018}",
    "\u{2019}",
    "\u{201A}",
    "\u{201B}",
    "\u{201C}",
    "''",
    "@'",
    "'@",
    "@\"",
    "\"@",
    "`n",
    "`$",
    "$env:PATH",
    "$null",
    "é",
    "한",
    "\u{feff}",
    "\u{200b}",
    "\u{a0}",
    "\u{85}",
    "\u{2028}",
    "x",
    "0",
];

fn hostile_string() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(HOSTILE), 0..24).prop_map(|v| v.concat())
}

/// Any string without NUL: printable Unicode, arbitrary chars (control characters too), or
/// shell and PowerShell metacharacters.
fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,40}",
        prop::collection::vec(any::<char>(), 0..40).prop_map(|v| v.into_iter().collect()),
        prop::collection::vec(1u8..128, 0..40)
            .prop_map(|v| v.into_iter().map(char::from).collect()),
        hostile_string(),
    ]
    .prop_map(|s: String| s.replace('\0', ""))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn sh_quote_round_trips_through_real_shells(s in any_text()) {
        check_sh_round_trip(&s)?;
    }

    #[test]
    fn sh_quote_with_nul_stops_the_shell(
        before in any_text(),
        after in any_text(),
        nuls in 1usize..3,
    ) {
        let s = format!("{before}{}{after}", "\0".repeat(nuls));
        let word = sh_quote(&s);
        prop_assert!(!word.contains('\0'), "a NUL reached the script: {:?}", word);
        let script = format!("printf '%s' {word}\nprintf 'RAN-ON'\n");
        for (label, prog, args) in shells() {
            let r = run_script(prog, args, &script);
            prop_assert!(r.code.is_some_and(|c| c != 0), "{} accepted {:?}", label, s);
            prop_assert!(
                r.stdout.is_empty(),
                "{} printed {:?} for {:?}",
                label,
                String::from_utf8_lossy(&r.stdout),
                s
            );
            prop_assert!(
                r.stderr.contains("a NUL byte cannot be passed to a shell"),
                "{} said {:?}",
                label,
                r.stderr
            );
        }
    }

    #[test]
    fn ps_quote_is_one_verbatim_literal(s in any_text()) {
        let q = ps_quote(&s);
        match ps_literal_value(&q) {
            Ok(v) => prop_assert_eq!(v, s),
            Err(e) => prop_assert!(false, "{:?} quoted as {:?}: {}", s, q, e),
        }
    }

    #[test]
    fn ps_quote_is_one_argument_in_command_mode(s in any_text()) {
        // As an argument of a command (the way modules use it): still exactly one literal,
        // nothing else parsed out of the value.
        let q = ps_quote(&s);
        let script = format!("Write-Output {q}");
        let lits = ps_string_tokens(&script)?;
        prop_assert_eq!(lits.len(), 1, "{:?} in {:?}", lits, script);
        prop_assert_eq!(lits[0].0.as_str(), "verbatim_string_characters");
        prop_assert_eq!(&lits[0].1, &q);
    }
}

/// Every string-literal token tree-sitter finds in `script` (kind, text), or the syntax errors.
fn ps_string_tokens(script: &str) -> Result<Vec<(String, String)>, TestCaseError> {
    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&tree_sitter_powershell::LANGUAGE.into())
        .map_err(|e| TestCaseError::fail(format!("grammar: {e}")))?;
    let tree = parser
        .parse(script, None)
        .ok_or_else(|| TestCaseError::fail("tree-sitter gave up"))?;
    let mut found = Vec::new();
    let mut errors = Vec::new();
    let mut cursor = tree.walk();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        if node.is_error() || node.is_missing() {
            errors.push(format!("{} at {}", node.kind(), node.start_byte()));
        }
        let kind = node.kind();
        if matches!(
            kind,
            "verbatim_string_characters"
                | "expandable_string_literal"
                | "verbatim_here_string_characters"
                | "expandable_here_string_literal"
        ) {
            let text = script
                .get(node.byte_range())
                .ok_or_else(|| TestCaseError::fail("node range is not on a char boundary"))?;
            found.push((kind.to_string(), text.to_string()));
            continue;
        }
        for c in node.children(&mut cursor) {
            stack.push(c);
        }
    }
    if !errors.is_empty() {
        return Err(TestCaseError::fail(format!(
            "syntax errors in {script:?}: {}",
            errors.join(", ")
        )));
    }
    Ok(found)
}

fn is_ps_single_quote(c: char) -> bool {
    matches!(c, '\'' | '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}')
}

/// The value of the one verbatim string literal that `text` must consist of.
fn ps_literal_value(text: &str) -> Result<String, String> {
    let lits = ps_string_tokens(text).map_err(|e| e.to_string())?;
    match lits.as_slice() {
        [(kind, lit)] if kind == "verbatim_string_characters" && lit == text => {}
        other => {
            return Err(format!(
                "not one verbatim literal spanning the text: {other:?}"
            ))
        }
    }
    // PowerShell's tokenizer: inside '...', a single-quote character followed by another one
    // stands for that character; a lone one ends the string.
    let inner = text
        .strip_prefix('\'')
        .and_then(|t| t.strip_suffix('\''))
        .ok_or("not delimited by ASCII quotes")?;
    let mut out = String::new();
    let mut it = inner.chars().peekable();
    while let Some(c) = it.next() {
        if is_ps_single_quote(c) {
            match it.next() {
                Some(d) if is_ps_single_quote(d) => out.push(d),
                _ => return Err(format!("lone quote character {c:?} ends the string early")),
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

#[test]
fn sh_quote_samples_that_broke_quoting_elsewhere() {
    for s in [
        "",
        "'",
        "''",
        "'\\''",
        "\\",
        "a\\",
        "$(id)",
        "`id`",
        "${HOME}",
        "x;rm -rf /tmp/kwin-never",
        "line1\nline2\n",
        "\r\n",
        "-n",
        "-e \\n",
        "%s%s%n",
        "\u{feff}bom",
        "\u{85}nel",
        "tab\there",
        "*",
        "~",
        "a\u{7f}b\u{1b}[31m",
    ] {
        check_sh_round_trip(s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
    }
}

#[test]
fn sh_quote_long_value() {
    // 256 KiB, every ASCII byte but NUL, plus multibyte characters.
    let unit: String = (1u8..128)
        .map(char::from)
        .chain("ünï ✓ 한".chars())
        .collect();
    let s = unit.repeat(256 * 1024 / unit.len() + 1);
    check_sh_round_trip(&s).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn sh_quote_safe_words_stay_unquoted_and_others_do_not() {
    assert_eq!(
        sh_quote("/etc/kwin/a-b_c.d:1,2@x%y+z=w"),
        "/etc/kwin/a-b_c.d:1,2@x%y+z=w"
    );
    for s in ["", "a b", "a'b", "$x", "~", "*", "a\nb", "é"] {
        let q = sh_quote(s);
        assert!(q.starts_with('\'') && q.ends_with('\''), "{s:?} -> {q}");
    }
}

#[test]
fn ps_quote_handles_nul_and_every_quote_character() {
    // NUL stays in the literal: PowerShell takes it literally inside '...'. (tree-sitter's
    // lexer takes NUL for the end of input and reports a syntax error, so this case is
    // checked on the text only.)
    assert_eq!(ps_quote("a\0b"), "'a\0b'");
    for q in ['\'', '\u{2018}', '\u{2019}', '\u{201A}', '\u{201B}'] {
        let s = format!("x{q}y{q}{q}");
        let lit = ps_quote(&s);
        assert_eq!(
            ps_literal_value(&lit).unwrap_or_else(|e| panic!("{s:?}: {e}")),
            s
        );
    }
    // A double quote (U+201C) is not special inside single quotes.
    assert_eq!(ps_quote("\u{201C}$x\u{201D}"), "'\u{201C}$x\u{201D}'");
}
