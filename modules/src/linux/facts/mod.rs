//! The typed facts of the Linux modules, whether one module reads them or several.
//!
//! Each fact is a POSIX sh command (dash and busybox compatible, no network, no package
//! manager lock) and a pure parser. Commands print machine-readable `key=value` lines (the
//! reboot markers: `pending <path>` lines after `kwin: checked`); text that could hold
//! newlines or arbitrary bytes (file content, link targets) travels base64 encoded so
//! parsing is exact. Keys are namespaced (`file.content:/etc/motd`), so two tasks asking the
//! same question share one answer.

pub mod file;
pub mod kmod;
pub mod node;
pub mod packages;
pub mod probe;
pub mod reboot;
pub mod swaps;
pub mod sysctl;
pub mod systemd;
pub mod user;

use kwin_engine::fact::{FactError, FactOutput};

/// The stdout of a fact command that must have succeeded; a failure carries its stderr.
pub(crate) fn ok_stdout(out: &FactOutput) -> Result<&str, FactError> {
    if out.exit != 0 {
        return Err(FactError::Command {
            exit: out.exit,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    out.stdout_str()
}

/// `key=value` lines, in order. Lines without `=` are an error: every fact here prints only
/// such lines, so anything else means the command did not run as written.
pub(crate) fn kv_lines(text: &str) -> Result<Vec<(&str, &str)>, FactError> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            l.split_once('=')
                .ok_or_else(|| FactError::Parse(format!("unexpected line `{l}`")))
        })
        .collect()
}

/// The value of `key` in `kv` (the first one), if any.
pub(crate) fn kv_get<'a>(kv: &[(&str, &'a str)], key: &str) -> Option<&'a str> {
    kv.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// Decode base64 text printed by `base64 | tr -d '\n'`.
pub(crate) fn b64_decode(s: &str) -> Result<Vec<u8>, FactError> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .map_err(|e| FactError::Parse(format!("bad base64: {e}")))
}

#[cfg(test)]
pub(crate) fn out(stdout: &str, exit: i32) -> FactOutput {
    FactOutput {
        stdout: stdout.as_bytes().to_vec(),
        stderr: Vec::new(),
        exit,
    }
}
