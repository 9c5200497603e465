//! Text a POSIX step hands to a program without putting it on a command line.
//!
//! A process's arguments are readable by every local user (`ps`, `/proc/<pid>/cmdline`), so a
//! command's text (`command`'s `run`, `unless`, `onlyif`) and a URL (which may carry a token in
//! its user part or query) never go there: they reach the program on a private descriptor, as
//! a here-document on fd 7 that the program opens as `/dev/fd/7` (a pipe, or a file only the
//! shell's account can read). What still is on a command line is listed in `docs/security.md`.
//!
//! The here-document's delimiter is derived from the text itself, so the text cannot end it
//! early; a NUL byte cannot be in a here-document (nor in any shell script), and the callers
//! refuse it.

use kwin_engine::quote::sh_quote;
use sha2::{Digest, Sha256};

/// The descriptor the text is on.
pub const FD: u8 = 7;

/// A here-document delimiter that is no line of `text`.
fn delimiter(text: &str) -> String {
    let mut n = 0u32;
    loop {
        let mut h = Sha256::new();
        h.update(n.to_le_bytes());
        h.update(text.as_bytes());
        let word = format!("KWIN_TEXT_{}", &hex::encode(h.finalize())[..24]);
        if !text.lines().any(|l| l == word) {
            return word;
        }
        n += 1;
    }
}

/// `{command} 7<<'DELIM' {rest}` then `text` as the here-document's body: `command` sees
/// `text` (plus a final newline) as `/dev/fd/7`. `rest` is what follows on the command's own
/// line (redirections, `|| { ... }`); the returned shell ends with a newline.
pub fn on_fd(command: &str, rest: &str, text: &str) -> String {
    let d = delimiter(text);
    let sep = if rest.is_empty() { "" } else { " " };
    format!("{command} {FD}<<'{d}'{sep}{rest}\n{text}\n{d}\n")
}

/// Shell that runs `code` with `/bin/sh`, the code on the private descriptor, stdin closed;
/// `rest` follows on the command's line.
pub fn sh_code(code: &str, rest: &str) -> String {
    on_fd(
        &format!("/bin/sh /dev/fd/{FD}"),
        format!("</dev/null {rest}").trim_end(),
        code,
    )
}

/// Whether `url` would give away anything on a command line: credentials in its user part,
/// or a query or fragment (where tokens and signatures go).
pub fn url_has_secrets(url: &str) -> bool {
    let after_scheme = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = after_scheme.split(['/', '?', '#']).next().unwrap_or("");
    authority.contains('@') || url.contains(['?', '#'])
}

/// curl's arguments that fetch `url` into the shell word `out`, the URL read from its
/// config on the private descriptor (`-K`, a `url = "..."` line): `(command, body)` for
/// [`on_fd`].
pub fn curl(options: &str, out: &str, url: &str) -> (String, String) {
    let quoted = url.replace('\\', "\\\\").replace('"', "\\\"");
    (
        format!("curl {options} -o {out} -K /dev/fd/{FD}"),
        format!("url = \"{quoted}\""),
    )
}

/// wget's arguments that fetch `url` into the shell word `out`: the URL read from the
/// private descriptor (`-i`, GNU wget) when it carries something secret; else on the command
/// line, which BusyBox's wget (no `-i`) needs. `(command, body)`: no body, no descriptor.
pub fn wget(out: &str, url: &str) -> (String, Option<String>) {
    if url_has_secrets(url) {
        (
            format!("wget -q -O {out} -i /dev/fd/{FD}"),
            Some(url.to_string()),
        )
    } else {
        (format!("wget -q -O {out} {}", sh_quote(url)), None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(script: &str) -> (String, String) {
        let o = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .output()
            .expect("sh");
        (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    /// The code runs as written, sees no argument of its own, reads `/dev/null` on stdin,
    /// and is on no command line: its shell's `cmdline` holds none of it.
    #[test]
    fn code_runs_from_the_descriptor_and_never_on_a_command_line() {
        let secret = "s3cr3t-'\"$(x)`y`";
        let code = format!(
            "x={}\nprintf '%s|' \"$x\"; tr '\\0' ' ' < /proc/$$/cmdline; echo; cat; echo end",
            sh_quote(secret)
        );
        let (out, err) = run(&sh_code(&code, "|| echo failed"));
        assert!(out.starts_with(&format!("{secret}|")), "{out}{err}");
        let cmdline = out.lines().next().unwrap_or_default();
        assert!(!cmdline[secret.len() + 1..].contains("s3cr3t"), "{out}");
        assert!(out.ends_with("\nend\n"), "stdin was closed: {out}");
        // A body line that looks like a delimiter does not end it.
        let tricky = format!("echo a\n{}\necho b", delimiter("echo a"));
        let (out, _) = run(&sh_code(&tricky, ""));
        assert!(out.ends_with("b\n"), "{out}");
    }

    #[test]
    fn urls_with_credentials_or_queries_are_secret() {
        assert!(url_has_secrets("https://user:tok@host/x"));
        assert!(url_has_secrets("https://host/x?X-Amz-Signature=abc"));
        assert!(!url_has_secrets(
            "https://dl.k8s.io/v1.30.2/bin/linux/amd64/kubectl"
        ));
        assert!(
            !url_has_secrets("https://host/a@b"),
            "an @ in the path is no user part"
        );
    }
}
