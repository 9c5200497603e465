//! `sh_quote` and `ps_quote` on arbitrary strings, read back by models of the shells' own
//! rules (the property tests in engine/tests/quote_props.rs check the real shells): the word
//! holds no NUL byte and reads back as the input; the PowerShell literal reads back as the
//! input under PowerShell's single-quote rules.
#![no_main]

use kwin_engine::quote::{ps_quote, sh_quote};
use libfuzzer_sys::fuzz_target;

const SH_NUL: &str = "${999999999:?kwin: a NUL byte cannot be passed to a shell}";

/// A POSIX word built only of unquoted safe characters, '...' runs, \' and the NUL stopper.
fn sh_unquote(w: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = w;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('\'') {
            let end = r.find('\'')?;
            out.push_str(&r[..end]);
            rest = &r[end + 1..];
        } else if let Some(r) = rest.strip_prefix("\\'") {
            out.push('\'');
            rest = r;
        } else if let Some(r) = rest.strip_prefix(SH_NUL) {
            out.push('\0');
            rest = r;
        } else {
            let c = rest.chars().next()?;
            if !(c.is_ascii_alphanumeric() || "@%+=:,./-_".contains(c)) {
                return None;
            }
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    Some(out)
}

fn is_ps_quote(c: char) -> bool {
    matches!(c, '\'' | '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}')
}

fn ps_unquote(lit: &str) -> Option<String> {
    let inner = lit.strip_prefix('\'')?.strip_suffix('\'')?;
    let mut out = String::new();
    let mut it = inner.chars();
    while let Some(c) = it.next() {
        if is_ps_quote(c) {
            let d = it.next()?;
            if !is_ps_quote(d) {
                return None;
            }
            out.push(d);
        } else {
            out.push(c);
        }
    }
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    let w = sh_quote(&s);
    assert!(!w.contains('\0'), "NUL in shell word {w:?}");
    assert!(!w.is_empty(), "empty shell word for {s:?}");
    assert_eq!(sh_unquote(&w).as_deref(), Some(&*s), "shell word {w:?}");
    let p = ps_quote(&s);
    assert_eq!(ps_unquote(&p).as_deref(), Some(&*s), "PowerShell literal {p:?}");
});
