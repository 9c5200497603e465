//! Checksum files as upstreams publish them: one bare hash, or `sha256sum` / `sha512sum` /
//! `shasum` lines (`<hash>  <name>`, `<hash> *<name>`, the name possibly with a directory).
//! Pure parsers.

/// Whether `s` is 64 hex digits (either case).
pub(super) fn is_sha256(s: &str) -> bool {
    is_hex(s, 64)
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The SHA-256 of `file` in a checksum file: either one bare hash, or `sha256sum` lines
/// (`<hash>  <name>` / `<hash> *<name>`, the name possibly with a directory) of which the one
/// naming `file` is taken.
pub fn parse_sums(text: &str, file: &str) -> Result<String, String> {
    parse_hex_sums(text, file, 64, "SHA-256")
}

/// The SHA-512 of `file` in a SHA-512 file (`sha512sum` / `shasum -a 512` lines, or one bare
/// hash), as [`parse_sums`].
pub fn parse_sha512_sums(text: &str, file: &str) -> Result<String, String> {
    parse_hex_sums(text, file, 128, "SHA-512")
}

fn parse_hex_sums(text: &str, file: &str, len: usize, what: &str) -> Result<String, String> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let mut named = 0;
    for line in &lines {
        let mut words = line.split_whitespace();
        let (Some(hash), name) = (words.next(), words.next()) else {
            continue;
        };
        if !is_hex(hash, len) {
            continue;
        }
        match name {
            None if lines.len() == 1 => return Ok(hash.to_ascii_lowercase()),
            None => {}
            Some(n) => {
                named += 1;
                let n = n.trim_start_matches('*');
                let base = n.rsplit('/').next().unwrap_or(n);
                if base == file {
                    return Ok(hash.to_ascii_lowercase());
                }
            }
        }
    }
    if named > 0 {
        Err(format!("it lists {named} file(s), none named `{file}`"))
    } else {
        Err(format!("it holds no {what} ({len} hex digits)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "3dd03954565808eaeb3a7ffc0e8cb7886a64a9aa94b2bfdfbdc6e2ed94842e49";
    const B: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_file_of_one_bare_hash_gives_that_hash_in_lower_case() {
        assert_eq!(
            parse_sums(&format!("{A}\n"), "kubelet.exe").as_deref(),
            Ok(A)
        );
        assert_eq!(
            parse_sums(&A.to_ascii_uppercase(), "x").as_deref(),
            Ok(A),
            "upper-case hex is accepted and lowered"
        );
    }

    #[test]
    fn sha256sum_lines_pick_the_named_file() {
        let text = format!("{B}  runc.arm64\n{A}  runc.amd64\n");
        assert_eq!(parse_sums(&text, "runc.amd64").as_deref(), Ok(A));
        assert_eq!(parse_sums(&text, "runc.arm64").as_deref(), Ok(B));
        let err = parse_sums(&text, "runc.ppc64le").expect_err("no such file");
        assert!(err.contains("none named `runc.ppc64le`"), "{err}");
        // binary-mode marker and a directory in the name
        let text = format!("{A} *bin/containerd-1.7.24-linux-amd64.tar.gz\n");
        assert_eq!(
            parse_sums(&text, "containerd-1.7.24-linux-amd64.tar.gz").as_deref(),
            Ok(A)
        );
    }

    #[test]
    fn text_without_a_usable_hash_is_refused() {
        for text in ["", "<html>not found</html>", "abc  kubelet.exe", &A[..63]] {
            assert!(parse_sums(text, "kubelet.exe").is_err(), "{text:?}");
        }
        // two bare hashes: ambiguous
        assert!(parse_sums(&format!("{A}\n{B}\n"), "f").is_err());
    }

    #[test]
    fn a_sha512_file_as_shasum_writes_it_gives_the_named_file() {
        let h = "ab".repeat(64);
        let text = format!("{h}  ./release/windows-container-networking-cni-amd64-v0.3.1.zip\n");
        assert_eq!(
            parse_sha512_sums(&text, "windows-container-networking-cni-amd64-v0.3.1.zip")
                .as_deref(),
            Ok(h.as_str())
        );
        assert!(parse_sha512_sums(&text, "other.zip").is_err());
        // a SHA-256 is not a SHA-512
        let e = parse_sha512_sums(&format!("{A}\n"), "x").expect_err("not a SHA-512");
        assert!(e.contains("no SHA-512 (128 hex digits)"), "{e}");
    }
}
