//! Secret scans: where a secret, in any form kwin's quoting gives it, shows up in what a run
//! left behind (its events, its logs and journal under `.kwin/`).

use std::path::Path;

/// `secret` and the forms it takes when quoted for sh, PowerShell and JSON.
pub fn forms(secret: &str) -> Vec<String> {
    let mut v = vec![secret.to_string()];
    let sh = kwin_engine::quote::sh_quote(secret);
    v.push(sh.trim_matches('\'').to_string());
    let ps = kwin_engine::quote::ps_quote(secret);
    v.push(
        ps.get(1..ps.len().saturating_sub(1))
            .unwrap_or("")
            .to_string(),
    );
    let js = serde_json::to_string(secret).unwrap_or_default();
    v.push(
        js.get(1..js.len().saturating_sub(1))
            .unwrap_or("")
            .to_string(),
    );
    v.retain(|f| !f.is_empty());
    v.sort();
    v.dedup();
    v
}

/// Every file under `dir` (e.g. a plan's `.kwin/`) as (path, text).
pub fn files(dir: &Path) -> Vec<(String, String)> {
    crate::kwin::walk(dir)
        .into_iter()
        .map(|f| {
            let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap_or_default()).into_owned();
            (f.display().to_string(), text)
        })
        .collect()
}

/// Where each of `secrets` (what, secret), in each of its [`forms`], shows up in `texts`
/// (name, text): "what (form) in name: …context…".
pub fn leaks(secrets: &[(&str, String)], texts: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (what, s) in secrets {
        for f in forms(s) {
            for (name, text) in texts {
                if let Some(at) = text.find(f.as_str()) {
                    let mut start = at.saturating_sub(60);
                    while !text.is_char_boundary(start) {
                        start -= 1;
                    }
                    let ctx: String = text[start..].chars().take(140).collect();
                    found.push(format!("{what} ({f:?}) in {name}: …{ctx}…"));
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_forms_are_found() {
        let s = "it's \"x\"".to_string();
        let texts = vec![
            ("log".to_string(), "echo 'it'\\''s \"x\"'".to_string()),
            ("json".to_string(), "{\"v\":\"it's \\\"x\\\"\"}".to_string()),
            ("clean".to_string(), "nothing".to_string()),
        ];
        let l = leaks(&[("s", s)], &texts);
        assert!(l.iter().any(|x| x.contains("in log")), "{l:?}");
        assert!(l.iter().any(|x| x.contains("in json")), "{l:?}");
        assert!(!l.iter().any(|x| x.contains("in clean")), "{l:?}");
    }
}
