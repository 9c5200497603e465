//! Building blocks of step scripts.
//!
//! Every script is POSIX sh that composes: it never ends the shell early on success (the
//! engine may run several tasks' scripts in one shell), and it does not rely on `set -e`
//! (which a caller's `|| ...` silently disables). Each command that can fail is followed by
//! `|| { echo 'kwin: ...' >&2; exit 1; }` in a [`Step::Run`] script (its own subshell), or
//! `return 1` in a [`Step::Inline`] one (a function of the batch's shell, see [`Ends`]).
//! User text enters only through [`sh_quote`].

use super::common::{mode_str, parent_dir, Attrs};
use super::facts::file::Meta;
use super::route::{name_of, Way};
use base64::Engine;
use kwin_engine::module::Step;
use kwin_engine::quote::sh_quote;

/// Content up to this size is embedded in the script (base64); larger content is sent with
/// [`Step::Put`].
pub const EMBED_LIMIT: usize = 1024 * 1024;

/// How a step script gives up: a [`Step::Run`] script runs in a subshell of its own and
/// exits; a [`Step::Inline`] script is the body of a function in the batch's own shell and
/// returns (an `exit` there would end the whole batch).
///
/// A module marks a step inline only when the whole script keeps the rules of
/// [`Step::Inline`]: the scripts built here with [`Ends::Return`] do (their variables are
/// `__kw_*`, the only shell state they change is the umask and `set -C`, which the engine
/// restores), and `modules/tests/inline_steps.rs` checks every inline step of the cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ends {
    Exit,
    Return,
}

impl Ends {
    fn word(self) -> &'static str {
        match self {
            Ends::Exit => "exit",
            Ends::Return => "return",
        }
    }

    /// `script` as the step of this kind.
    pub fn step(self, script: String) -> Step {
        match self {
            Ends::Exit => Step::Run(script),
            Ends::Return => Step::Inline(script),
        }
    }
}

/// `{ echo 'kwin: <msg>' >&2; exit 1; }` — the failure branch of a command.
pub fn die(msg: &str) -> String {
    die_after("", msg)
}

/// Like [`die`], running `cleanup` (commands each ending in `;`) first.
pub fn die_after(cleanup: &str, msg: &str) -> String {
    fail(Ends::Exit, cleanup, msg)
}

/// The failure branch of a command in a step that ends as `ends` says, running `cleanup`
/// (commands each ending in `;`) first: `{ <cleanup> echo 'kwin: <msg>' >&2; exit 1; }` or
/// `... return 1; }`.
pub fn fail(ends: Ends, cleanup: &str, msg: &str) -> String {
    let sep = if cleanup.is_empty() { "" } else { " " };
    format!(
        "{{ {cleanup}{sep}printf '%s\\n' {} >&2; {} 1; }}",
        sh_quote(&format!("kwin: {msg}")),
        ends.word()
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
    /// The file's sha256 as probed (one `sha256sum` process when the step runs).
    Sha256(String),
    /// The file's whole content as probed: UTF-8 text without NUL bytes, at most
    /// [`COMPARE_LIMIT`] bytes, of a task that is not sensitive. The shell compares it itself
    /// (its `read` builtin, no process); see [`Expect::probed`].
    Content(String),
}

/// The largest probed content a step compares with the shell's own `read` instead of a
/// `sha256sum` process. dash's `read` takes one byte per system call: on the machine of
/// bench/results/2026-11-29-host-cpu.md a 1 KiB file costs it ~1 ms of CPU and the
/// `sha256sum` process (fork, exec, dynamic loading) ~2.6 ms; at 4 KiB the `read` loop costs
/// more than the process.
pub const COMPARE_LIMIT: usize = 1024;

impl Expect {
    /// What a file probed as `info` must still be when its write runs. `private`: the task is
    /// sensitive (or the file readable by its owner only): its old content never goes into a
    /// script, only its hash.
    pub fn probed(info: &super::facts::file::FileInfo, private: bool) -> Expect {
        match (info.text(), &info.sha256) {
            (Some(t), _) if !private && t.len() <= COMPARE_LIMIT => Expect::Content(t.to_string()),
            (_, Some(h)) => Expect::Sha256(h.clone()),
            _ => Expect::Any,
        }
    }
}

/// Where a write goes.
#[derive(Debug, Clone, Copy)]
pub enum Place<'a> {
    /// In the directory of a checked way ([`super::route::check`]), by name: the step enters
    /// the directory first ([`Way::enter`]) and uses only names in it.
    In(&'a Way),
    /// By absolute path: the target of a link at the managed path, which the plan chose to
    /// follow (`follow = true`).
    Followed,
}

/// A whole-file write.
#[derive(Debug, Clone)]
pub struct WriteFile<'a> {
    /// Where the bytes go (with [`Place::Followed`], the link's resolved target).
    pub path: &'a str,
    /// How the step reaches it.
    pub at: Place<'a>,
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
    /// The account the host's scripts run as, as probed
    /// ([`IdentityFact`](super::facts::file::IdentityFact)): an owner or group of `attrs`
    /// that names it is left as the new file has it when the host confirms it (`[ -O ]`,
    /// `[ -G ]`: no `chown`). `None`: unknown, every owner and group given is set.
    pub me: Option<&'a Meta>,
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
/// (`[ -f /proc/self/fd/9 ]`). Owner and mode are set through [`FD9`] while the file is still
/// empty, then the content goes to fd 9, and the name is checked to still be that file (`-ef`,
/// not a link) right before the `mv`.
///
/// Content up to [`EMBED_LIMIT`] is in the script, which is ONE [`Step::Inline`] (no
/// subshell) that costs the `mv` and nothing else when:
///
/// - the mode has no execute or special bits: the umask makes it as the file is created
///   (`umask 133` for 0644), so no `chmod`; the file is empty until owner and group are set,
///   so a group that may read it meanwhile reads nothing;
/// - the owner and group asked are those of the account the scripts run as (`w.me`), which
///   the host confirms on the new file (`[ -O ]`, `[ -G ]`: a setgid directory gives its own
///   group): no `chown`.
///
/// Larger content is uploaded ([`Step::Put`]) and finished by a [`Step::Run`] script.
pub fn write_file(w: &WriteFile<'_>) -> Vec<Step> {
    if w.content.len() <= EMBED_LIMIT {
        vec![Step::Inline(embedded_write(w))]
    } else {
        uploaded_write(w)
    }
}

/// Where a write's step stands: the shell that enters the directory (or creates the
/// parents of an absolute path), and the shell words naming the file and its temporary file.
fn placed(w: &WriteFile<'_>, ends: Ends) -> (String, String, String) {
    let tmp = temp_path(w.path, w.nonce);
    match w.at {
        Place::In(way) => (
            way.enter(w.make_parents, &|m| fail(ends, "", m)),
            sh_quote(name_of(w.path)),
            sh_quote(name_of(&tmp)),
        ),
        Place::Followed => {
            let dir = parent_dir(w.path);
            let make = if w.make_parents {
                // `[ -d ]` is a builtin: no process when the directory is there already.
                format!(
                    "[ -d {d} ] || mkdir -p -- {d} || {}\n",
                    fail(ends, "", &format!("cannot create directory {dir}")),
                    d = sh_quote(&dir),
                )
            } else {
                String::new()
            };
            (make, sh_quote(w.path), sh_quote(&tmp))
        }
    }
}

/// The script of an embedded write (an inline step: failures `return`).
fn embedded_write(w: &WriteFile<'_>) -> String {
    let ends = Ends::Return;
    let die = |m: &str| fail(ends, "", m);
    let rm = "rm -f -- \"$__kw_t\";";
    let (enter, name, tmp) = placed(w, ends);
    let mut s = enter;
    s.push_str(&format!("__kw_p={name}\n"));
    s.push_str(&expect_check(w, ends));
    // The temporary file, without a `mktemp` process, created exclusively (`set -C`) with the
    // mode the umask gives it: the wanted one when it has no execute or special bits, else
    // private until `chmod`. The engine restores umask and noclobber after the step.
    let direct = w.attrs.mode.filter(|m| m & 0o7111 == 0);
    let umask = direct.map_or(0o077, |m| 0o777 & !m);
    s.push_str(&format!(
        "__kw_t={tmp}\numask {umask:03o}; set -C\n{{ [ -f {FD9} ] || {}\n",
        die(&format!(
            "the temporary file for {} is not a regular file kwin just created (something was planted at its name, or /proc is not mounted); refusing to write",
            w.path
        )),
    ));
    // Owner, group and mode while the file is empty (chown before chmod: chown clears the
    // setuid and setgid bits).
    let mut attrs = w.attrs.clone();
    if direct.is_some() {
        attrs.mode = None;
    }
    s.push_str(&attrs_script(ends, &attrs, FD9, w.path, rm, w.me));
    if w.content.len() <= PRINTF_LIMIT && !w.content.contains(&0) {
        s.push_str(&format!("printf {} >&9", printf_format(w.content)));
    } else {
        s.push_str(&decode_to(w.content, "&9"));
    }
    s.push_str(&format!(
        " || {}\n",
        fail(ends, rm, &format!("cannot write {}", w.path))
    ));
    s.push_str(&move_into_place(ends, w.path, matches!(w.at, Place::In(_))));
    s.push_str(&format!(
        "}} 9>\"$__kw_t\" || {}\n",
        die(&format!("cannot create a temporary file beside {}", w.path))
    ));
    s
}

/// Too large for a script: uploaded to the temporary name first (the transport writes it
/// atomically), then checked to be a regular file of this user holding exactly the content,
/// and finished like an embedded write (in a subshell: failures `exit`).
fn uploaded_write(w: &WriteFile<'_>) -> Vec<Step> {
    let ends = Ends::Exit;
    let rm = "rm -f -- \"$__kw_t\";";
    let tmp = temp_path(w.path, w.nonce);
    let mut steps = Vec::new();
    if w.make_parents {
        let dir = parent_dir(w.path);
        steps.push(Step::Run(format!(
            "mkdir -p -- {} || {}\n",
            sh_quote(&dir),
            die(&format!("cannot create directory {dir}"))
        )));
    }
    steps.push(Step::Put {
        path: tmp.clone(),
        content: w.content.to_vec(),
        mode: w.attrs.mode,
    });
    let not_ours = die(&format!(
        "the uploaded file for {} is not a regular file of this user; refusing",
        w.path
    ));
    let (enter, name, tmp) = placed(w, ends);
    let mut s = enter;
    s.push_str(&format!("__kw_p={name}\n"));
    s.push_str(&expect_check(w, ends));
    s.push_str(&format!(
        "__kw_t={tmp}\n[ -f \"$__kw_t\" ] && [ ! -L \"$__kw_t\" ] || {not_ours}\n\
         {{ [ -f {FD9} ] && [ -O {FD9} ] || {not_ours}\n\
         __kw_h=$(sha256sum <&9) || {}\n\
         [ \"${{__kw_h%% *}}\" = {} ] || {}\n",
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
    s.push_str(&attrs_script(ends, &w.attrs, FD9, w.path, rm, None));
    s.push_str(&move_into_place(ends, w.path, matches!(w.at, Place::In(_))));
    s.push_str(&format!(
        "}} 9<\"$__kw_t\" || {}\n",
        die(&format!("cannot open the uploaded file for {}", w.path))
    ));
    steps.push(Step::Run(s));
    steps
}

/// The check that the file is still what it was planned against (`w.expect`): its hash
/// (`sha256sum`), or its content read by the shell itself, line by line with `read -r` (the
/// last `read` ends at the end of the file holding what follows the last newline, if anything),
/// compared with the probed text. `read` drops NUL bytes, so a change that only inserts NUL
/// bytes into a probed text file is the one change this comparison does not see.
fn expect_check(w: &WriteFile<'_>, ends: Ends) -> String {
    let changed = || {
        fail(
            ends,
            "",
            &format!("{} changed since it was probed; run again", w.path),
        )
    };
    let unreadable = || fail(ends, "", &format!("cannot read {}", w.path));
    match &w.expect {
        Expect::Any => String::new(),
        Expect::Sha256(h) => format!(
            "__kw_h=$(sha256sum < \"$__kw_p\") || {}\n[ \"${{__kw_h%% *}}\" = {h} ] || {}\n",
            unreadable(),
            changed(),
        ),
        Expect::Content(text) => format!(
            "__kw_c=; while IFS= read -r __kw_l; do __kw_c=\"$__kw_c$__kw_l\n\"; done <\"$__kw_p\" || {}\n\
             [ \"$__kw_c$__kw_l\" = {} ] || {}\n",
            unreadable(),
            sh_quote(text),
            changed(),
        ),
    }
}

/// A last check that `$__kw_t` is still the file on fd 9, and the move over `$__kw_p`. In a
/// pinned directory ([`Place::In`]) the name must not have become a link or a directory
/// since the probe (a rename onto a link to a directory would move the file into it).
fn move_into_place(ends: Ends, path: &str, pinned: bool) -> String {
    let rm = "rm -f -- \"$__kw_t\";";
    let name_check = if pinned {
        format!(
            "[ -L \"$__kw_p\" ] || [ -d \"$__kw_p\" ] && {}\n",
            fail(
                ends,
                rm,
                &format!(
                    "{path} became a symbolic link or a directory since it was probed; refusing to follow it"
                )
            )
        )
    } else {
        String::new()
    };
    format!(
        "[ ! -L \"$__kw_t\" ] && [ \"$__kw_t\" -ef {FD9} ] || {}\n\
         {name_check}mv -f -- \"$__kw_t\" \"$__kw_p\" || {}\n",
        fail(
            ends,
            "",
            &format!(
                "the temporary file for {path} was replaced before it was moved into place; refusing"
            )
        ),
        fail(ends, rm, &format!("cannot replace {path}")),
    )
}

/// Steps that set `attrs` on the existing `name` in a pinned directory (entered with
/// `enter`), through the open file: the name must be `kind` (`-f` or `-d`) and no link when
/// it is opened, and still that very file once open (`-ef`), so `chown` and `chmod` never
/// reach another file through a link swapped in.
pub fn attrs_in_place(
    ends: Ends,
    enter: &str,
    name: &str,
    kind: &str,
    attrs: &Attrs,
    shown: &str,
) -> String {
    let refuse = fail(
        ends,
        "",
        &format!("{shown} is not what kwin probed (a link, or replaced); refusing to change it"),
    );
    format!(
        "{enter}__kw_p={}\n[ {kind} \"$__kw_p\" ] && [ ! -L \"$__kw_p\" ] || {refuse}\n\
         {{ [ ! -L \"$__kw_p\" ] && [ \"$__kw_p\" -ef {FD9} ] && [ {kind} {FD9} ] || {refuse}\n{}}} 9<\"$__kw_p\" || {}\n",
        sh_quote(name),
        attrs_script(ends, attrs, FD9, shown, "", None),
        fail(ends, "", &format!("cannot open {shown}")),
    )
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
    // The URL never on a command line (`crate::private_text`).
    let failed = die_after(cleanup, &format!("download of {url} failed"));
    let get = match fetcher {
        Fetcher::Curl => {
            let (cmd, body) =
                crate::private_text::curl("-fsSL --retry 3 --connect-timeout 30", out, url);
            crate::private_text::on_fd(&cmd, &format!("|| {failed}"), &body)
        }
        Fetcher::Wget => match crate::private_text::wget(out, url) {
            (cmd, Some(body)) => crate::private_text::on_fd(&cmd, &format!("|| {failed}"), &body),
            (cmd, None) => format!("{cmd} || {failed}\n"),
        },
    };
    format!(
        "{get}{}",
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
    attrs_script(Ends::Exit, attrs, target, shown, cleanup, None)
}

/// Commands setting every given attribute of `attrs` on `target`, in a step that ends as
/// `ends` says, running `cleanup` before failing. An owner and group that name `me` (the
/// account the scripts run as) are only checked with the `[ -O ]` / `[ -G ]` builtins, and
/// set only when the check fails: what that account creates is already its own.
pub fn attrs_script(
    ends: Ends,
    attrs: &Attrs,
    target: &str,
    shown: &str,
    cleanup: &str,
    me: Option<&Meta>,
) -> String {
    let die = |m: &str| fail(ends, cleanup, m);
    let mine_owner = attrs
        .owner
        .as_deref()
        .is_some_and(|o| me.is_some_and(|m| m.owner_is(o)));
    let mine_group = attrs
        .group
        .as_deref()
        .is_some_and(|g| me.is_some_and(|m| m.group_is(g)));
    let mut s = String::new();
    match (&attrs.owner, &attrs.group) {
        (Some(o), Some(g)) => {
            let check = if mine_owner && mine_group {
                format!("[ -O {target} ] && [ -G {target} ] || ")
            } else {
                String::new()
            };
            s.push_str(&format!(
                "{check}chown {} {target} || {}\n",
                sh_quote(&format!("{o}:{g}")),
                die(&format!("cannot change the owner of {shown}"))
            ))
        }
        (Some(o), None) => s.push_str(&format!(
            "{}chown {} {target} || {}\n",
            if mine_owner {
                format!("[ -O {target} ] || ")
            } else {
                String::new()
            },
            sh_quote(o),
            die(&format!("cannot change the owner of {shown}"))
        )),
        (None, Some(g)) => s.push_str(&format!(
            "{}chgrp {} {target} || {}\n",
            if mine_group {
                format!("[ -G {target} ] || ")
            } else {
                String::new()
            },
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

    fn embedded(attrs: Attrs, me: Option<&Meta>) -> String {
        let steps = write_file(&WriteFile {
            path: "/etc/x",
            at: Place::Followed,
            content: b"x",
            attrs,
            expect: Expect::Any,
            make_parents: false,
            nonce: "n",
            me,
        });
        let [Step::Inline(s)] = steps.as_slice() else {
            panic!("not one inline step: {steps:?}")
        };
        s.clone()
    }

    #[test]
    fn a_small_probed_text_is_compared_by_the_shell_anything_else_by_its_hash() {
        let info = |content: &[u8]| super::super::facts::file::FileInfo {
            meta: root(),
            sha256: Some(sha256_hex(content)),
            content: Some(content.to_vec()),
            link_target: None,
        };
        let small = b"a = 1\nb = 'x'\n";
        assert_eq!(
            Expect::probed(&info(small), false),
            Expect::Content("a = 1\nb = 'x'\n".into())
        );
        // Sensitive: its old content never goes into a script.
        assert_eq!(
            Expect::probed(&info(small), true),
            Expect::Sha256(sha256_hex(small))
        );
        // Too large for a cheap `read` loop, a NUL byte (`read` drops it), not UTF-8.
        let big = vec![b'x'; COMPARE_LIMIT + 1];
        for c in [&big[..], b"a\0b\n", b"\xff\xfe\n"] {
            assert_eq!(
                Expect::probed(&info(c), false),
                Expect::Sha256(sha256_hex(c))
            );
        }
        // Hash only (the probe was not asked for the content).
        let mut hashed = info(small);
        hashed.content = None;
        assert_eq!(
            Expect::probed(&hashed, false),
            Expect::Sha256(sha256_hex(small))
        );
    }

    fn root() -> Meta {
        Meta {
            mode: 0o555,
            uid: 0,
            user: "root".into(),
            gid: 0,
            group: "root".into(),
            size: 0,
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
            at: Place::Followed,
            content: b"hi\n",
            attrs: attrs.clone(),
            expect: Expect::Any,
            make_parents: false,
            nonce: "n",
            me: None,
        });
        assert_eq!(small.len(), 1);
        let Step::Inline(s) = &small[0] else {
            panic!("not an inline step")
        };
        assert!(s.contains("printf 'hi\\012' >&9"), "{s}");
        // The temporary file is created exclusively, without a `mktemp` process, with its
        // mode (0644) from the umask: no `chmod`. Its name comes from the plan's nonce.
        assert!(
            s.contains(&format!("__kw_t={}\n", temp_path("/etc/a b", "n"))),
            "{s}"
        );
        assert!(temp_path("/etc/a b", "n").starts_with("/etc/.kwin-"));
        assert_ne!(temp_path("/etc/a b", "n"), temp_path("/etc/a b", "m"));
        assert!(s.contains("umask 133; set -C"), "{s}");
        assert!(!s.contains("mktemp") && !s.contains("chmod"), "{s}");
        // An inline step: it gives up with `return`, never `exit`.
        assert!(s.contains("return 1;") && !s.contains("exit"), "{s}");
        let big = vec![b'x'; EMBED_LIMIT + 1];
        let steps = write_file(&WriteFile {
            path: "/etc/big",
            at: Place::Followed,
            content: &big,
            attrs,
            expect: Expect::Any,
            make_parents: true,
            nonce: "n",
            me: None,
        });
        assert_eq!(steps.len(), 3);
        let tmp = temp_path("/etc/big", "n");
        assert!(matches!(&steps[1], Step::Put { path, mode: Some(0o644), .. } if *path == tmp));
        assert!(matches!(&steps[2], Step::Run(s) if s.contains("exit 1;")));
    }

    #[test]
    fn modes_without_execute_bits_come_from_the_umask_and_owners_are_set_while_empty() {
        // Group reads, others do not: still the umask (0640), no `chmod`; the owner is set
        // before the content is written, so the group the file starts with reads nothing.
        let s = embedded(
            Attrs {
                mode: Some(0o640),
                owner: Some("app".into()),
                group: Some("app".into()),
            },
            Some(&root()),
        );
        assert!(
            s.contains("umask 137; set -C") && !s.contains("chmod"),
            "{s}"
        );
        let chown = s.find("chown app:app /proc/self/fd/9").expect("chown");
        assert!(chown < s.find(">&9").expect("write"), "{s}");
        // Execute or special bits: private until `chmod`, after `chown`.
        let s = embedded(
            Attrs {
                mode: Some(0o4755),
                owner: Some("app".into()),
                group: None,
            },
            None,
        );
        assert!(s.contains("umask 077; set -C"), "{s}");
        assert!(
            s.find("chown app").expect("chown") < s.find("chmod 4755").expect("chmod"),
            "{s}"
        );
    }

    #[test]
    fn the_scripts_own_account_is_only_checked_not_set() {
        let wanted = |o: Option<&str>, g: Option<&str>| Attrs {
            mode: Some(0o644),
            owner: o.map(str::to_string),
            group: g.map(str::to_string),
        };
        // Root writes a root:root file: `[ -O ]` and `[ -G ]` decide, a setgid directory's
        // group still gets a `chown`.
        for (o, g) in [("root", "root"), ("0", "0"), ("root", "0")] {
            let s = embedded(wanted(Some(o), Some(g)), Some(&root()));
            assert!(
                s.contains(&format!(
                    "[ -O /proc/self/fd/9 ] && [ -G /proc/self/fd/9 ] || chown {} /proc/self/fd/9",
                    sh_quote(&format!("{o}:{g}"))
                )),
                "{s}"
            );
        }
        let s = embedded(wanted(Some("root"), None), Some(&root()));
        assert!(
            s.contains("[ -O /proc/self/fd/9 ] || chown root /proc/self/fd/9"),
            "{s}"
        );
        let s = embedded(wanted(None, Some("root")), Some(&root()));
        assert!(
            s.contains("[ -G /proc/self/fd/9 ] || chgrp root /proc/self/fd/9"),
            "{s}"
        );
        // Another account, only one of the two, or an unknown one: `chown` as asked.
        for (attrs, me) in [
            (wanted(Some("app"), Some("root")), Some(root())),
            (wanted(Some("root"), Some("app")), Some(root())),
            (wanted(Some("root"), Some("root")), None),
        ] {
            let s = embedded(attrs, me.as_ref());
            assert!(!s.contains("[ -O") && !s.contains("[ -G"), "{s}");
            assert!(s.contains("chown"), "{s}");
        }
    }
}
