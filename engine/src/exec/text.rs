//! Pure text helpers of the executor: task outputs (`key=value` lines) and the last lines of
//! a command's output for messages.

use crate::secret::Secret;
use std::collections::BTreeMap;

/// `key=value` lines; other lines are ignored.
pub fn parse_outputs(stdout: &[u8]) -> BTreeMap<String, Secret> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| {
            let l = l.trim_end_matches('\r');
            let (k, v) = l.split_once('=')?;
            let k = k.trim();
            (!k.is_empty() && !k.contains(' ')).then(|| (k.to_string(), Secret::new(v)))
        })
        .collect()
}

/// The last `n` non-empty lines of `text`, joined by `; `.
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(n)..].join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_are_key_value_lines() {
        let o = parse_outputs(b"token=abc.def\r\nnoise\nhash=sha256:1=2\n=x\n");
        assert_eq!(o.len(), 2);
        assert_eq!(o["token"].expose(), "abc.def");
        assert_eq!(o["hash"].expose(), "sha256:1=2");
        assert_eq!(last_lines("a\n\nb\nc\n", 2), "b; c");
    }
}
