//! Quoting: the only way user-written text enters a shell script.
//!
//! `sh_quote` produces a single POSIX shell word that expands to exactly the input; `ps_quote`
//! produces a PowerShell single-quoted string literal that evaluates to exactly the input;
//! `printf_format` a single-quoted `printf` format that prints exactly the given bytes (the
//! Linux file writer's form of small contents).
//! Template filters `sh` and `ps` are built on these two functions; nothing else in kwin may
//! paste plan-provided text into a script.
//!
//! NUL: a POSIX shell word cannot hold a NUL byte (arguments and variables are C strings,
//! and shells drop NUL bytes from scripts: dash silently, so `'a<NUL>b'` would become `ab`).
//! Rather than pass a different value, `sh_quote` turns each NUL into the expansion
//! `${999999999:?...}` of a positional parameter that is never set: a non-interactive shell
//! stops there with `kwin: a NUL byte cannot be passed to a shell` and a non-zero status, and
//! nothing after it in that (sub)shell runs. Modules refuse NUL in parameters that become
//! paths or commands, so this is the last line of defence. PowerShell strings are counted
//! .NET strings and its tokenizer takes a NUL inside a single-quoted string literally, so
//! `ps_quote` keeps it.

/// Expansion that stops a non-interactive POSIX shell with an error (see the module docs).
const SH_NUL: &str = "'${999999999:?kwin: a NUL byte cannot be passed to a shell}'";

/// Quote `s` as one POSIX shell word. Safe characters pass through unquoted so scripts stay
/// readable; everything else is wrapped in single quotes with `'` written as `'\''`. A NUL
/// makes the word fail when the shell expands it (see the module docs).
pub fn sh_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"@%+=:,./-_".contains(&b))
    {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else if c == '\0' {
            out.push_str(SH_NUL);
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// Quote `s` as a PowerShell single-quoted string. Inside single quotes PowerShell expands
/// nothing (no `$`, no backtick escapes); the only special characters are the single-quote
/// family (`'`, U+2018, U+2019, U+201A, U+201B), each of which is doubled.
pub fn ps_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if matches!(c, '\'' | '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}') {
            out.push(c);
        }
        out.push(c);
    }
    out.push('\'');
    out
}

/// Text for an XML element or attribute value (`&`, `<`, `>`, `"`, `'` as entities): what the
/// WinRM transport sends, and so what the scrubber must also recognise.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// `bytes` as a single-quoted `printf` format that prints exactly them: letters, digits and a
/// few punctuation characters as they are, every other byte (and a leading `-`) as a `\ooo`
/// escape, so no user text reaches the shell or `printf` as anything but data.
pub fn printf_format(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() + 2);
    s.push('\'');
    for (i, &b) in bytes.iter().enumerate() {
        // A leading `-` would read as an option of `printf`.
        if b.is_ascii_alphanumeric() || (b" ,.:=_/-+@".contains(&b) && !(i == 0 && b == b'-')) {
            s.push(char::from(b));
        } else {
            s.push_str(&format!("\\{b:03o}"));
        }
    }
    s.push('\'');
    s
}

/// Quote `s` as one double-quoted word of a systemd unit file setting such as
/// `Environment=` (`Environment={systemd_quote("HTTP_PROXY=...")}`): `\` and `"` are
/// backslash-escaped (the C escapes of systemd.syntax(7) "Quoting"), and `%` is doubled, since
/// specifiers are expanded even inside quotes (systemd.unit(5) "Specifiers": `%%` is a single
/// `%`). systemd rejects non-printable characters in variable values (systemd.exec(5),
/// `Environment=`), and a line break would end the setting: control characters are an error.
/// Source: systemd 252 (Debian 12) man pages systemd.exec(5), systemd.unit(5); the behaviour
/// is checked against `systemd-analyze verify` in tests/security_proxy.rs.
pub fn systemd_quote(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            c if c.is_control() => {
                return Err(format!(
                    "a control character (U+{:04X}) cannot be written into a systemd unit",
                    u32::from(c)
                ))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    Ok(out)
}

/// Text for a terminal (the operator's, or a host log read with `cat`): control characters a
/// host may send show as escapes, so they cannot act on the terminal (see `src/output/`).
///
/// `text` with every C0 control character but newline and tab, DEL and every C1 control
/// character shown as an escape: `\x1b`, `\r`, `\x7f`, `\u{9b}`. A `\r` right before a
/// newline is dropped (a Windows line break). Borrowed when there is nothing to escape.
pub fn terminal_text(text: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(bad) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => {}
            '\r' => out.push_str("\\r"),
            c if bad(c) && (c as u32) < 0x80 => {
                let _ = std::fmt::Write::write_fmt(&mut out, format_args!("\\x{:02x}", c as u32));
            }
            c if bad(c) => {
                let _ = std::fmt::Write::write_fmt(&mut out, format_args!("\\u{{{:x}}}", c as u32));
            }
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sh_plain_words_stay_plain() {
        assert_eq!(sh_quote("/etc/motd"), "/etc/motd");
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote(""), "''");
        assert_eq!(sh_quote("it's"), "'it'\\''s'");
        assert_eq!(sh_quote("$(rm -rf /)"), "'$(rm -rf /)'");
    }

    #[test]
    fn systemd_escapes_backslash_quote_and_percent() {
        assert_eq!(
            systemd_quote("A=http://p:3128/a\\b\"c%hd").as_deref(),
            Ok("\"A=http://p:3128/a\\\\b\\\"c%%hd\"")
        );
        assert!(systemd_quote("A=x\nExecStartPre=/bin/true").is_err());
        assert!(systemd_quote("A=x\u{7f}").is_err());
    }

    #[test]
    fn ps_doubles_quotes() {
        assert_eq!(ps_quote("C:\\k"), "'C:\\k'");
        assert_eq!(ps_quote("it's"), "'it''s'");
        assert_eq!(ps_quote("$env:PATH `n"), "'$env:PATH `n'");
        assert_eq!(ps_quote("\u{2019}"), "'\u{2019}\u{2019}'");
    }

    #[test]
    fn sh_quote_round_trips_through_real_sh() {
        let samples = [
            "plain",
            "with space",
            "quote ' inside",
            "$(echo pwned)",
            "`echo pwned`",
            "line1\nline2",
            "semi; colon && amp",
            "back\\slash",
            "*glob?[x]",
            "~tilde",
            "unicode ✓ 한국어",
            "-n",
            "",
        ];
        for s in samples {
            let out = std::process::Command::new("/bin/sh")
                .arg("-c")
                .arg(format!("printf '%s' {}", sh_quote(s)))
                .output()
                .expect("run /bin/sh");
            assert_eq!(String::from_utf8_lossy(&out.stdout), s, "sample {s:?}");
        }
    }

    #[test]
    fn controls_show_as_escapes_and_lines_stay() {
        let hostile = "a\u{1b}]52;c;aGk=\u{7}b\u{1b}[2K\rok\u{9b}31m\u{7f}\u{0}";
        assert_eq!(
            terminal_text(hostile),
            "a\\x1b]52;c;aGk=\\x07b\\x1b[2K\\rok\\u{9b}31m\\x7f\\x00"
        );
        assert_eq!(terminal_text("one\r\ntwo\tthree\n"), "one\ntwo\tthree\n");
        assert!(matches!(
            terminal_text("plain ✓ 한\n"),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
