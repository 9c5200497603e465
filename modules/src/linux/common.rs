//! Parameter types and checks shared by the Linux modules: file modes, ownership, `state`,
//! absolute paths, and the attribute comparison behind `mode`/`owner`/`group`.

use super::facts::file::Meta;
use super::script::die_after;
use kwin_engine::module::ParamError;
use kwin_engine::quote::sh_quote;
use serde::Deserialize;

/// `present` (default) or `absent`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum State {
    #[default]
    Present,
    Absent,
}

/// A file mode as written in a plan: a string of octal digits (`"0644"`, recommended) or an
/// integer whose decimal digits are read as octal (`644`). TOML's `0o644` is the integer 420
/// and would mean `0420`, so strings are safer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum RawMode {
    Text(String),
    Number(u64),
}

impl RawMode {
    /// The permission bits, or a param error at `path`.
    pub fn bits(&self, path: &str) -> Result<u32, ParamError> {
        let digits = match self {
            RawMode::Text(s) => s.trim().to_string(),
            RawMode::Number(n) => n.to_string(),
        };
        let ok = !digits.is_empty()
            && digits.len() <= 4
            && digits.bytes().all(|b| (b'0'..=b'7').contains(&b));
        let bits = if ok {
            u32::from_str_radix(&digits, 8).ok()
        } else {
            None
        };
        bits.filter(|b| *b <= 0o7777).ok_or_else(|| {
            ParamError::at(
                path,
                format!("bad mode `{digits}`: expected up to 4 octal digits, like \"0644\""),
            )
        })
    }
}

/// `0644`-style text of permission bits.
pub fn mode_str(bits: u32) -> String {
    format!("{bits:04o}")
}

/// Reject paths that are not absolute or hold a NUL byte (which no file name can).
pub fn check_abs_path(value: &str, param: &str) -> Result<(), ParamError> {
    if !value.starts_with('/') {
        return Err(ParamError::at(
            param,
            format!("`{value}` is not an absolute path"),
        ));
    }
    if value.contains('\0') {
        return Err(ParamError::at(param, "path contains a NUL byte"));
    }
    Ok(())
}

/// `path` without trailing slashes (but `/` stays `/`).
pub fn trim_path(path: &str) -> String {
    let t = path.trim_end_matches('/');
    if t.is_empty() {
        "/".into()
    } else {
        t.to_string()
    }
}

/// The directory holding `path` (absolute, trimmed).
pub fn parent_dir(path: &str) -> String {
    match path.rfind('/') {
        Some(0) | None => "/".into(),
        Some(i) => path[..i].to_string(),
    }
}

/// A user or group name (or numeric id) for chown/chgrp.
pub fn check_account(value: &str, param: &str) -> Result<(), ParamError> {
    let bad = value.is_empty()
        || value.starts_with('-')
        || value
            .chars()
            .any(|c| c == ':' || c.is_whitespace() || c.is_control() || c == '/');
    if bad {
        return Err(ParamError::at(
            param,
            format!("`{value}` is not a user or group name"),
        ));
    }
    Ok(())
}

/// Desired mode and ownership of a path; `None` means "leave as it is".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attrs {
    pub mode: Option<u32>,
    pub owner: Option<String>,
    pub group: Option<String>,
}

impl Attrs {
    /// Build from raw params, checking each.
    pub fn from_params(
        mode: Option<&RawMode>,
        owner: Option<&String>,
        group: Option<&String>,
    ) -> Result<Attrs, ParamError> {
        if let Some(o) = owner {
            check_account(o, "owner")?;
        }
        if let Some(g) = group {
            check_account(g, "group")?;
        }
        Ok(Attrs {
            mode: mode.map(|m| m.bits("mode")).transpose()?,
            owner: owner.cloned(),
            group: group.cloned(),
        })
    }

    /// What differs from `meta`: (what, current, desired) for each attribute.
    pub fn differences(&self, meta: &Meta) -> Vec<(&'static str, String, String)> {
        let mut d = Vec::new();
        if let Some(m) = self.mode {
            if meta.mode != m {
                d.push(("mode", mode_str(meta.mode), mode_str(m)));
            }
        }
        if let Some(o) = &self.owner {
            if !meta.owner_is(o) {
                d.push(("owner", meta.user.clone(), o.clone()));
            }
        }
        if let Some(g) = &self.group {
            if !meta.group_is(g) {
                d.push(("group", meta.group.clone(), g.clone()));
            }
        }
        d
    }

    /// Commands setting every given attribute on `target` (a shell word: quoted path or
    /// `"$t"`), each failing the script with a message naming `shown`.
    pub fn apply_commands(&self, target: &str, shown: &str) -> String {
        self.apply_commands_cleanup(target, shown, "")
    }

    /// [`Attrs::apply_commands`], running `cleanup` (commands ending in `;`) before failing.
    pub fn apply_commands_cleanup(&self, target: &str, shown: &str, cleanup: &str) -> String {
        let die = |m: &str| die_after(cleanup, m);
        let mut s = String::new();
        match (&self.owner, &self.group) {
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
        if let Some(m) = self.mode {
            s.push_str(&format!(
                "chmod {} {target} || {}\n",
                mode_str(m),
                die(&format!("cannot change the mode of {shown}"))
            ));
        }
        s
    }

    /// Only the attributes that differ from `meta`.
    pub fn only_differing(&self, meta: &Meta) -> Attrs {
        let diffs = self.differences(meta);
        let has = |w: &str| diffs.iter().any(|(k, _, _)| *k == w);
        Attrs {
            mode: self.mode.filter(|_| has("mode")),
            owner: self.owner.clone().filter(|_| has("owner")),
            group: self.group.clone().filter(|_| has("group")),
        }
    }
}

/// `- what old` / `+ what new` lines for attribute differences.
pub fn attr_diff(diffs: &[(&str, String, String)]) -> String {
    let mut s = String::new();
    for (what, old, new) in diffs {
        s.push_str(&format!("- {what} {old}\n+ {what} {new}\n"));
    }
    s
}

/// "mode, owner differ" for a reason line.
pub fn attr_reason(diffs: &[(&str, String, String)]) -> String {
    let names: Vec<&str> = diffs.iter().map(|(w, _, _)| *w).collect();
    match names.len() {
        1 => format!("{} differs", names[0]),
        _ => format!("{} differ", names.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes() {
        assert_eq!(RawMode::Text("0644".into()).bits("mode"), Ok(0o644));
        assert_eq!(RawMode::Text("755".into()).bits("mode"), Ok(0o755));
        assert_eq!(RawMode::Text("4755".into()).bits("mode"), Ok(0o4755));
        assert_eq!(RawMode::Number(644).bits("mode"), Ok(0o644));
        for bad in ["", "0899", "u+x", "12345", "-644"] {
            let e = RawMode::Text(bad.into()).bits("mode").expect_err(bad);
            assert_eq!(e.path.as_deref(), Some("mode"));
        }
        assert!(RawMode::Number(9).bits("mode").is_err());
        assert_eq!(mode_str(0o644), "0644");
    }

    #[test]
    fn paths_and_accounts() {
        assert!(check_abs_path("/etc/x", "path").is_ok());
        assert!(check_abs_path("etc/x", "path").is_err());
        assert_eq!(trim_path("/a/b/"), "/a/b");
        assert_eq!(trim_path("///"), "/");
        assert_eq!(parent_dir("/a/b"), "/a");
        assert_eq!(parent_dir("/a"), "/");
        assert!(check_account("www-data", "owner").is_ok());
        assert!(check_account("1000", "owner").is_ok());
        assert!(check_account("root:root", "owner").is_err());
        assert!(check_account("-r", "owner").is_err());
    }
}
