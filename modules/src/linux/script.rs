//! Building blocks of step scripts.
//!
//! Every script is POSIX sh that composes: it never ends the shell early on success (the
//! engine may run several tasks' scripts in one shell, each in a subshell), and it does not
//! rely on `set -e` (which a caller's `|| ...` silently disables). Each command that can fail
//! is followed by `|| { echo 'kwin: ...' >&2; exit 1; }`. User text enters only through
//! [`sh_quote`].

use super::common::{mode_str, parent_dir, Attrs};
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
        "{{ {cleanup}{sep}printf '%s\\n' {} >&2; exit 1; }}",
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
    /// The plan's [`Ctx::nonce`](kwin_engine::module::Ctx::nonce): the temporary file's name
    /// is derived from it.
    pub nonce: &'a str,
}

/// The temporary file a write of `path` goes through: in the same directory (so the final
/// `mv` is a rename), named by [`crate::temp_name`]. Nobody on the host can guess it before the
/// step runs, and it stays the same for the steps of one plan (the upload and the move of a
/// large file are two round trips).
pub fn temp_path(path: &str, nonce: &str) -> String {
    format!(
        "{}/{}",
        parent_dir(path).trim_end_matches('/'),
        crate::temp_name(nonce, path)
    )
}

/// The open temporary file, as a path any command can be given: `chmod`, `chown` and
/// `sha256sum` reach through it exactly the file the shell holds open as fd 9, whatever has
/// happened to its name since.
pub const FD9: &str = "/proc/self/fd/9";

/// Steps that replace `w.path` atomically: a temporary file in the same directory, mode and
/// owner set, then `mv` over the path.
///
/// The temporary name is unguessable ([`temp_path`]) and the file is created exclusively:
/// under `set -C` the shell opens a name that does not exist with `O_CREAT|O_EXCL`, refuses an
/// existing regular file, and opens anything else (a FIFO, a device, a link to one) as it is,
/// so the step then refuses everything but a regular file on fd 9 before a byte is written
/// (`[ -f /proc/self/fd/9 ]`). Content goes to fd 9, `chmod`/`chown` go through [`FD9`], and
/// the name is checked to still be that file (`-ef`, not a link) right before the `mv`. All
/// of it is builtins: a write costs the `mv` (plus `chown`/`chmod` when the umask cannot make
/// the mode or an owner is asked), as before.
pub fn write_file(w: &WriteFile<'_>) -> Vec<Step> {
    let p = sh_quote(w.path);
    let dir = parent_dir(w.path);
    let tmp = temp_path(w.path, w.nonce);
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
    // Mode and owner through the open file, a last check of the name, and the move.
    let finish = |s: &mut String, attrs: &Attrs| {
        let rm = "rm -f -- \"$t\";";
        s.push_str(&apply_attrs_cleanup(attrs, FD9, w.path, rm));
        s.push_str(&format!(
            "[ ! -L \"$t\" ] && [ \"$t\" -ef {FD9} ] || {}\n",
            die(&format!(
                "the temporary file for {} was replaced before it was moved into place; refusing",
                w.path
            ))
        ));
        s.push_str(&format!(
            "mv -f -- \"$t\" \"$p\" || {}\n",
            die_after(rm, &format!("cannot replace {}", w.path))
        ));
    };
    if w.content.len() <= EMBED_LIMIT {
        // The temporary file, without a `mktemp` process, created private (umask 077) and
        // exclusively (`set -C`). The step runs in its own subshell, so neither setting
        // outlives it.
        // A mode without execute or special bits, whose group gets nothing the others do not
        // (the file is the connecting user's until `chown`), is made by the umask: no `chmod`.
        let direct = w
            .attrs
            .mode
            .filter(|m| m & 0o7111 == 0 && ((m >> 3) & 0o7) & !(m & 0o7) == 0);
        let umask = direct.map_or(0o077, |m| 0o777 & !m);
        s.push_str(&format!(
            "t={}\numask {umask:03o}; set -C\n{{ [ -f {FD9} ] || {}\n",
            sh_quote(&tmp),
            die(&format!(
                "the temporary file for {} is not a regular file kwin just created (something was planted at its name, or /proc is not mounted); refusing to write",
                w.path
            )),
        ));
        if w.content.len() <= PRINTF_LIMIT && !w.content.contains(&0) {
            s.push_str(&format!("printf {} >&9", printf_format(w.content)));
        } else {
            s.push_str(&decode_to(w.content, "&9"));
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
        s.push_str(&format!(
            "}} 9>\"$t\" || {}\n",
            die(&format!("cannot create a temporary file beside {}", w.path))
        ));
        vec![Step::Run(s)]
    } else {
        // Too large for a script: uploaded to the temporary name first (the transport writes
        // it atomically), then checked to be a regular file of this user holding exactly the
        // content, and finished like an embedded write.
        let mut pre = String::new();
        if w.make_parents {
            pre.push_str(&format!(
                "mkdir -p -- {} || {}\n",
                sh_quote(&dir),
                die(&format!("cannot create directory {dir}"))
            ));
        }
        let not_ours = die(&format!(
            "the uploaded file for {} is not a regular file of this user; refusing",
            w.path
        ));
        let rm = "rm -f -- \"$t\";";
        s.push_str(&format!(
            "t={}\n[ -f \"$t\" ] && [ ! -L \"$t\" ] || {not_ours}\n\
             {{ [ -f {FD9} ] && [ -O {FD9} ] || {not_ours}\n\
             h=$(sha256sum <&9) || {}\n\
             [ \"${{h%% *}}\" = {} ] || {}\n",
            sh_quote(&tmp),
            die_after(rm, &format!("cannot read the uploaded file for {}", w.path)),
            sha256_hex(w.content),
            die_after(
                rm,
                &format!(
                    "the uploaded file for {} does not hold what was sent",
                    w.path
                )
            ),
        ));
        finish(&mut s, &w.attrs);
        s.push_str(&format!(
            "}} 9<\"$t\" || {}\n",
            die(&format!("cannot open the uploaded file for {}", w.path))
        ));
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
    fetch_into(
        fetcher,
        url,
        &format!("\"${var}\""),
        sha256,
        &format!("rm -f -- \"${var}\";"),
    )
}

/// Commands that download `url` into the file named by the shell word `out` and check its
/// sha256 if given; `cleanup` (commands ending in `;`) runs first on failure.
pub fn fetch_into(
    fetcher: Fetcher,
    url: &str,
    out: &str,
    sha256: Option<&str>,
    cleanup: &str,
) -> String {
    let u = sh_quote(url);
    let get = match fetcher {
        Fetcher::Curl => format!("curl -fsSL --retry 3 --connect-timeout 30 -o {out} {u}"),
        Fetcher::Wget => format!("wget -q -O {out} {u}"),
    };
    format!(
        "{get} || {}\n{}",
        die_after(cleanup, &format!("download of {url} failed")),
        sha256
            .map(|h| verify_sha256_of(out, h, url, cleanup))
            .unwrap_or_default()
    )
}

/// Commands failing the script unless the file named by shell variable `var` has sha256
/// `want`; `what` names it in the message, `cleanup` runs first on failure.
pub fn verify_sha256(var: &str, want: &str, what: &str, cleanup: &str) -> String {
    verify_sha256_of(&format!("\"${var}\""), want, what, cleanup)
}

/// [`verify_sha256`] of the file named by the shell word `file`.
pub fn verify_sha256_of(file: &str, want: &str, what: &str, cleanup: &str) -> String {
    let want = sh_quote(want);
    format!(
        "h=$(sha256sum < {file}) || {}\n\
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

/// Commands setting every given attribute of `attrs` on `target` (a shell word: quoted path or
/// `"$t"`), each failing the script with a message naming `shown`.
pub fn apply_attrs(attrs: &Attrs, target: &str, shown: &str) -> String {
    apply_attrs_cleanup(attrs, target, shown, "")
}

/// [`apply_attrs`], running `cleanup` (commands ending in `;`) before failing.
pub fn apply_attrs_cleanup(attrs: &Attrs, target: &str, shown: &str, cleanup: &str) -> String {
    let die = |m: &str| die_after(cleanup, m);
    let mut s = String::new();
    match (&attrs.owner, &attrs.group) {
        (Some(o), Some(g)) => s.push_str(&format!(
            "chown {} {target} || {}\n",
            sh_quote(&format!("{o}:{g}")),
            die(&format!("cannot change the owner of {shown}"))
        )),
        (Some(o), None) => s.push_str(&format!(
            "chown {} {target} || {}\n",
            sh_quote(o),
            die(&format!("cannot change the owner of {shown}"))
        )),
        (None, Some(g)) => s.push_str(&format!(
            "chgrp {} {target} || {}\n",
            sh_quote(g),
            die(&format!("cannot change the group of {shown}"))
        )),
        (None, None) => {}
    }
    // After chown, which clears setuid/setgid bits.
    if let Some(m) = attrs.mode {
        s.push_str(&format!(
            "chmod {} {target} || {}\n",
            mode_str(m),
            die(&format!("cannot change the mode of {shown}"))
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn die_quotes_user_text() {
        assert_eq!(
            die("cannot write /tmp/it's"),
            "{ printf '%s\\n' 'kwin: cannot write /tmp/it'\\''s' >&2; exit 1; }"
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
            nonce: "n",
        });
        assert_eq!(small.len(), 1);
        let Step::Run(s) = &small[0] else {
            panic!("not a run step")
        };
        assert!(s.contains("printf 'hi\\012' >&9"), "{s}");
        // The temporary file is created exclusively, without a `mktemp` process, with its
        // mode (0644) from the umask: no `chmod`. Its name comes from the plan's nonce.
        assert!(
            s.contains(&format!("t={}\n", temp_path("/etc/a b", "n"))),
            "{s}"
        );
        assert!(temp_path("/etc/a b", "n").starts_with("/etc/.kwin-"));
        assert_ne!(temp_path("/etc/a b", "n"), temp_path("/etc/a b", "m"));
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
            nonce: "n",
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
            nonce: "n",
        });
        assert_eq!(steps.len(), 3);
        let tmp = temp_path("/etc/big", "n");
        assert!(matches!(&steps[1], Step::Put { path, mode: Some(0o644), .. } if *path == tmp));
    }
}
