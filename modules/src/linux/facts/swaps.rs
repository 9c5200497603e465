//! Active swap areas, from `/proc/swaps`.

use super::ok_stdout;
use kwin_engine::fact::{Fact, FactError, FactOutput};
use kwin_engine::transport::Shell;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwapsFact;

/// One active swap area.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Swap {
    /// Device or file, with the kernel's octal escapes (`\040`) decoded.
    pub filename: String,
    /// `partition` or `file`.
    pub kind: String,
}

impl Fact for SwapsFact {
    type Output = Vec<Swap>;

    fn key(&self) -> String {
        "linux.proc_swaps".into()
    }

    fn command(&self, _shell: Shell) -> String {
        // A kernel built without swap support has no /proc/swaps: nothing is active.
        "if [ -r /proc/swaps ]; then cat /proc/swaps; fi".into()
    }

    fn parse(&self, out: &FactOutput) -> Result<Vec<Swap>, FactError> {
        parse_proc_swaps(ok_stdout(out)?)
    }
}

/// Parse `/proc/swaps` (a header line, then `Filename Type Size Used Priority` rows).
pub fn parse_proc_swaps(text: &str) -> Result<Vec<Swap>, FactError> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    match lines.next() {
        None => return Ok(Vec::new()),
        Some(h) if h.starts_with("Filename") => {}
        Some(h) => {
            return Err(FactError::Parse(format!(
                "unexpected /proc/swaps header `{h}`"
            )))
        }
    }
    lines
        .map(|l| {
            let mut f = l.split_whitespace();
            match (f.next(), f.next()) {
                (Some(name), Some(kind)) => Ok(Swap {
                    filename: unescape_octal(name),
                    kind: kind.to_string(),
                }),
                _ => Err(FactError::Parse(format!("bad /proc/swaps line `{l}`"))),
            }
        })
        .collect()
}

/// Decode the kernel's `\ooo` escapes (space, tab, newline, backslash) in mount-like tables.
pub fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            let oct = &b[i + 1..i + 4];
            if oct
                .iter()
                .all(|c| (b'0'..=b'3').contains(&oct[0]) && (b'0'..=b'7').contains(c))
            {
                out.push((oct[0] - b'0') * 64 + (oct[1] - b'0') * 8 + (oct[2] - b'0'));
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::super::out;
    use super::*;

    // /proc/swaps layout (the kernel pads with tabs and spaces) with a swap file and an LVM
    // swap volume.
    const UBUNTU: &str = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/swap.img                               file\t\t2097148\t\t0\t\t-2\n/dev/dm-1                               partition\t8388604\t\t1024\t\t-3\n";

    #[test]
    fn two_swaps() {
        let s = SwapsFact.parse(&out(UBUNTU, 0)).expect("parse");
        assert_eq!(
            s,
            vec![
                Swap {
                    filename: "/swap.img".into(),
                    kind: "file".into()
                },
                Swap {
                    filename: "/dev/dm-1".into(),
                    kind: "partition".into()
                }
            ]
        );
    }

    #[test]
    fn header_only_and_missing_file() {
        // Captured on a Debian 12 VM without swap.
        let s =
            parse_proc_swaps("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n").expect("parse");
        assert!(s.is_empty());
        assert_eq!(parse_proc_swaps(""), Ok(vec![]));
        assert!(parse_proc_swaps("nonsense\n").is_err());
    }

    #[test]
    fn escaped_names() {
        let s = parse_proc_swaps(
            "Filename\tType\tSize\tUsed\tPriority\n/swap\\040file\\134x file 1024 0 -2\n",
        )
        .expect("parse");
        assert_eq!(s[0].filename, "/swap file\\x");
        assert_eq!(unescape_octal("a\\04"), "a\\04");
        assert_eq!(unescape_octal("\\011end"), "\tend");
    }
}
