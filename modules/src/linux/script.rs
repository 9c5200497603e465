//! Building blocks of step scripts.
//!
//! Every script is POSIX sh that composes: it never ends the shell early on success (the
//! engine may run several tasks' scripts in one shell, each in a subshell), and it does not
//! rely on `set -e` (which a caller's `|| ...` silently disables). Each command that can fail
//! is followed by `|| { echo 'kwin: ...' >&2; exit 1; }`. User text enters only through
//! [`sh_quote`].

use super::common::{parent_dir, Attrs};
use base64::Engine;
use kwin_engine::module::Step;
use kwin_engine::quote::sh_quote;

/// Content up to this size is embedded in the script (base64); larger content is sent with
/// [`Step::Put`].
pub const EMBED_LIMIT: usize = 1024 * 1024;

/// `{ echo 'kwin: <msg>' >&2; exit 1; }` — the failure branch of a command.
pub fn die(msg: &str) -> String {
    die_after("", msg)
}

/// Like [`die`], running `cleanup` (commands each ending in `;`) first.
pub fn die_after(cleanup: &str, msg: &str) -> String {
    let sep = if cleanup.is_empty() { "" } else { " " };
    format!(
        "{{ {cleanup}{sep}echo {} >&2; exit 1; }}",
        sh_quote(&format!("kwin: {msg}"))
    )
}

/// A here-document that decodes `bytes` (base64, 76 columns) into the file named by the
/// shell word `target`, as one compound command.
pub fn decode_to(bytes: &[u8], target: &str) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
    let mut s = format!("{{ base64 -d >{target} <<'KWIN_B64'\n");
    for chunk in b64.as_bytes().chunks(76) {
        s.push_str(&String::from_utf8_lossy(chunk));
        s.push('\n');
    }
    s.push_str("KWIN_B64\n}");
    s
}

/// Content up to this size (without NUL bytes) is written by the `printf` builtin; larger
/// content by `base64 -d`.
pub const PRINTF_LIMIT: usize = 64 * 1024;

/// `bytes` as a single-quoted `printf` format that prints exactly them (see
/// [`kwin_engine::quote::printf_format`]; the scrubber knows this form of every secret).
pub use kwin_engine::quote::printf_format;

/// What the file must still be when the step runs, so a change planned against one content
/// never overwrites another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// No check.
    Any,
    /// The file's sha256 as probed.
    Sha256(String),
}

/// A whole-file write.
#[derive(Debug, Clone)]
pub struct WriteFile<'a> {
    /// Where the bytes go (a link's resolved target, if the path is a link).
    pub path: &'a str,
    pub content: &'a [u8],
    /// Mode and ownership for the new file. The mode should always be set: temporary files
    /// start as 0600.
    pub attrs: Attrs,
    pub expect: Expect,
    /// Create missing parent directories.
    pub make_parents: bool,
}

/// Steps that replace `w.path` atomically: a temporary file in the same directory, mode and
/// owner set, then `mv` over the path.
pub fn write_file(w: &WriteFile<'_>) -> Vec<Step> {
    let p = sh_quote(w.path);
    let dir = parent_dir(w.path);
    let mut s = format!("p={p}\n");
    if w.make_parents {
        // `[ -d ]` is a builtin: no process when the directory is there already.
        s.push_str(&format!(
            "[ -d {d} ] || mkdir -p -- {d} || {}\n",
            die(&format!("cannot create directory {dir}")),
            d = sh_quote(&dir),
        ));
    }
    if let Expect::Sha256(h) = &w.expect {
        s.push_str(&format!(
            "h=$(sha256sum < \"$p\") || {}\n[ \"${{h%% *}}\" = {h} ] || {}\n",
            die(&format!("cannot read {}", w.path)),
            die(&format!(
                "{} changed since it was probed; run again",
                w.path
            )),
        ));
    }
    let finish = |s: &mut String, attrs: &Attrs| {
        let rm = "rm -f -- \"$t\";";
        s.push_str(&attrs.apply_commands_cleanup("\"$t\"", w.path, rm));
        s.push_str(&format!(
            "mv -f -- \"$t\" \"$p\" || {}\n",
            die_after(rm, &format!("cannot replace {}", w.path))
        ));
    };
    if w.content.len() <= EMBED_LIMIT {
        // The temporary file, without a `mktemp` process: a name unique to this shell (`$$`)
        // and this content, created private (umask 077) and exclusively (`set -C`: O_EXCL, so
        // an existing file or link of that name is never written through). The step runs in
        // its own subshell, so neither setting outlives it.
        let tag = {
            use sha2::Digest;
            let mut h = sha2::Sha256::new();
            h.update(w.path.as_bytes());
            h.update([0]);
            h.update(w.content);
            hex::encode(h.finalize())[..12].to_string()
        };
        // A mode without execute or special bits, whose group gets nothing the others do not
        // (the file is the connecting user's until `chown`), is made by the umask: no `chmod`.
        let direct = w
            .attrs
            .mode
            .filter(|m| m & 0o7111 == 0 && ((m >> 3) & 0o7) & !(m & 0o7) == 0);
        let umask = direct.map_or(0o077, |m| 0o777 & !m);
        s.push_str(&format!(
            "t={}$$-{tag}\numask {umask:03o}; set -C\n",
            sh_quote(&format!("{}/.kwin-", dir.trim_end_matches('/'))),
        ));
        if w.content.len() <= PRINTF_LIMIT && !w.content.contains(&0) {
            s.push_str(&format!("printf {} >\"$t\"", printf_format(w.content)));
        } else {
            s.push_str(&decode_to(w.content, "\"$t\""));
        }
        s.push_str(&format!(
            " || {}\n",
            die_after("rm -f -- \"$t\";", &format!("cannot write {}", w.path))
        ));
        let mut attrs = w.attrs.clone();
        if direct.is_some() {
            attrs.mode = None;
        }
        finish(&mut s, &attrs);
        vec![Step::Run(s)]
    } else {
        let base = w.path.rsplit('/').next().unwrap_or("file");
        let tmp = format!("{}/.{base}.kwin-put", dir.trim_end_matches('/'));
        let mut pre = String::new();
        if w.make_parents {
            pre.push_str(&format!(
                "mkdir -p -- {} || {}\n",
                sh_quote(&dir),
                die(&format!("cannot create directory {dir}"))
            ));
        }
        s.push_str(&format!("t={}\n", sh_quote(&tmp)));
        finish(&mut s, &w.attrs);
        let mut steps = Vec::new();
        if !pre.is_empty() {
            steps.push(Step::Run(pre));
        }
        steps.push(Step::Put {
            path: tmp,
            content: w.content.to_vec(),
            mode: w.attrs.mode,
        });
        steps.push(Step::Run(s));
        steps
    }
}

/// A program that fetches URLs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fetcher {
    Curl,
    Wget,
}

impl Fetcher {
    /// The first of curl or wget among the commands a host has.
    pub fn pick(found: &[String]) -> Option<Fetcher> {
        if found.iter().any(|c| c == "curl") {
            Some(Fetcher::Curl)
        } else if found.iter().any(|c| c == "wget") {
            Some(Fetcher::Wget)
        } else {
            None
        }
    }
}

/// Commands that download `url` into the file named by the shell variable `var` (which
/// must already hold a temporary path) and check its sha256, removing it on failure.
pub fn fetch_verified(fetcher: Fetcher, url: &str, var: &str, sha256: &str) -> String {
    fetch(fetcher, url, var, Some(sha256))
}

/// [`fetch_verified`], with the check optional.
pub fn fetch(fetcher: Fetcher, url: &str, var: &str, sha256: Option<&str>) -> String {
    let u = sh_quote(url);
    let get = match fetcher {
        Fetcher::Curl => format!("curl -fsSL --retry 3 --connect-timeout 30 -o \"${var}\" {u}"),
        Fetcher::Wget => format!("wget -q -O \"${var}\" {u}"),
    };
    let rm = format!("rm -f -- \"${var}\";");
    format!(
        "{get} || {}\n{}",
        die_after(&rm, &format!("download of {url} failed")),
        sha256
            .map(|h| verify_sha256(var, h, url, &rm))
            .unwrap_or_default()
    )
}

/// Commands failing the script unless the file named by shell variable `var` has sha256
/// `want`; `what` names it in the message, `cleanup` runs first on failure.
pub fn verify_sha256(var: &str, want: &str, what: &str, cleanup: &str) -> String {
    let want = sh_quote(want);
    format!(
        "h=$(sha256sum < \"${var}\") || {}\n\
         if [ \"${{h%% *}}\" != {want} ]; then {cleanup} printf 'kwin: sha256 of %s is %s, expected %s\\n' {} \"${{h%% *}}\" {want} >&2; exit 1; fi\n",
        die_after(cleanup, &format!("cannot hash {what}")),
        sh_quote(what),
    )
}

/// sha256 of bytes, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn die_quotes_user_text() {
        assert_eq!(
            die("cannot write /tmp/it's"),
            "{ echo 'kwin: cannot write /tmp/it'\\''s' >&2; exit 1; }"
        );
    }

    #[test]
    fn printf_format_prints_every_byte_exactly() {
        let all: Vec<u8> = b"-rf "
            .iter()
            .copied()
            .chain(1..=255u8)
            .chain(b"%s%%\\n'\"$(x)`y`".iter().copied())
            .collect();
        let f = printf_format(&all);
        assert!(
            !f.contains("$(") && !f.contains('`') && !f.contains('%'),
            "{f}"
        );
        for sh in ["/bin/sh", "/bin/dash", "/usr/bin/busybox"] {
            if !std::path::Path::new(sh).exists() {
                continue;
            }
            let mut cmd = std::process::Command::new(sh);
            if sh.ends_with("busybox") {
                cmd.arg("sh");
            }
            let out = cmd
                .arg("-c")
                .arg(format!("printf {f}"))
                .output()
                .expect("sh");
            assert_eq!(out.stdout, all, "{sh}");
        }
    }

    #[test]
    fn small_content_is_embedded_large_is_put() {
        let attrs = Attrs {
            mode: Some(0o644),
            ..Attrs::default()
        };
        let small = write_file(&WriteFile {
            path: "/etc/a b",
            content: b"hi\n",
            attrs: attrs.clone(),
            expect: Expect::Any,
            make_parents: false,
        });
        assert_eq!(small.len(), 1);
        let Step::Run(s) = &small[0] else {
            panic!("not a run step")
        };
        assert!(s.contains("printf 'hi\\012' >\"$t\""), "{s}");
        // The temporary file is created exclusively, without a `mktemp` process, with its
        // mode (0644) from the umask: no `chmod`.
        assert!(s.contains("t=/etc/.kwin-$$-"), "{s}");
        assert!(s.contains("umask 133; set -C"), "{s}");
        assert!(!s.contains("mktemp") && !s.contains("chmod"), "{s}");
        // A mode the umask cannot make (group reads, others do not; the file is the
        // connecting user's until `chown`) starts private and is set by `chmod`.
        let Step::Run(s) = &write_file(&WriteFile {
            path: "/etc/x",
            content: b"x",
            attrs: Attrs {
                mode: Some(0o640),
                ..Attrs::default()
            },
            expect: Expect::Any,
            make_parents: false,
        })[0] else {
            panic!("not a run step")
        };
        assert!(
            s.contains("umask 077; set -C") && s.contains("chmod 0640"),
            "{s}"
        );
        let big = vec![b'x'; EMBED_LIMIT + 1];
        let steps = write_file(&WriteFile {
            path: "/etc/big",
            content: &big,
            attrs,
            expect: Expect::Any,
            make_parents: true,
        });
        assert_eq!(steps.len(), 3);
        assert!(
            matches!(&steps[1], Step::Put { path, mode: Some(0o644), .. } if path == "/etc/.big.kwin-put")
        );
    }
}
