//! Diffs shown by `kwin plan`: unified diffs for text files, `- old` / `+ new` lines for
//! values and for content that cannot be shown (binary or too large).

use super::facts::file::FileInfo;
use super::script::sha256_hex;

/// Unified diff of two texts, with 3 lines of context.
pub fn text_diff(path: &str, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("{path} (current)"), &format!("{path} (desired)"))
        .to_string()
}

/// `- old` / `+ new` lines; `None` is left out (creation or removal).
pub fn value_diff(old: Option<&str>, new: Option<&str>) -> String {
    let mut s = String::new();
    if let Some(o) = old {
        s.push_str(&format!("- {o}\n"));
    }
    if let Some(n) = new {
        s.push_str(&format!("+ {n}\n"));
    }
    s
}

fn describe(bytes_len: u64, sha: &str) -> String {
    format!("{bytes_len} bytes, sha256 {sha}")
}

fn as_text(b: &[u8]) -> Option<&str> {
    if b.contains(&0) {
        return None;
    }
    std::str::from_utf8(b).ok()
}

/// Diff from a file's current content (`None`: the file does not exist) to `new`.
pub fn content_diff(path: &str, current: Option<&FileInfo>, new: &[u8]) -> String {
    let new_text = as_text(new);
    match current {
        None => match new_text {
            Some(t) => text_diff(path, "", t),
            None => value_diff(None, Some(&describe(new.len() as u64, &sha256_hex(new)))),
        },
        Some(f) => match (f.text(), new_text) {
            (Some(o), Some(n)) => text_diff(path, o, n),
            _ => value_diff(
                Some(&describe(
                    f.meta.size,
                    f.sha256.as_deref().unwrap_or("unknown"),
                )),
                Some(&describe(new.len() as u64, &sha256_hex(new))),
            ),
        },
    }
}

/// Whether `mode` gives group and others no read access: content of such a file is
/// sensitive by default (hashes only in diffs, events and logs).
pub fn private_mode(mode: u32) -> bool {
    mode & 0o044 == 0
}

/// [`content_diff`] of sensitive content: each side as its hash, never the content.
pub fn sensitive_content_diff(path: &str, current: Option<&FileInfo>, new: &[u8]) -> String {
    let old = current.map(|f| match (&f.sha256, &f.content) {
        (Some(h), _) => kwin_engine::module::sensitive_digest(h),
        (None, Some(c)) => kwin_engine::module::sensitive_hash(c),
        (None, None) => format!("{} bytes", f.meta.size),
    });
    format!(
        "--- {path} (current)\n+++ {path} (desired)\n{}",
        value_diff(
            old.as_deref(),
            Some(&kwin_engine::module::sensitive_hash(new))
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unified_text_diff() {
        let d = text_diff("/etc/motd", "a\nb\n", "a\nc\n");
        assert!(d.contains("--- /etc/motd (current)"), "{d}");
        assert!(d.contains("-b\n+c\n"), "{d}");
    }

    #[test]
    fn values() {
        assert_eq!(value_diff(Some("0"), Some("1")), "- 0\n+ 1\n");
        assert_eq!(value_diff(None, Some("1")), "+ 1\n");
    }

    #[test]
    fn binary_is_described() {
        let d = content_diff("/bin/x", None, &[0, 1, 2]);
        assert!(d.starts_with("+ 3 bytes, sha256 "), "{d}");
    }
}
