//! Parameter types and checks shared by the Linux modules: file modes, ownership, `state`,
//! and the attribute comparison behind `mode`/`owner`/`group` (the commands that set them are
//! in `script.rs`; absolute paths in `crate::paths`).

use super::facts::file::Meta;
use kwin_engine::module::ParamError;

pub use crate::shared::{RawMode, State};

/// `0644`-style text of permission bits.
pub fn mode_str(bits: u32) -> String {
    format!("{bits:04o}")
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

pub use crate::paths::parent_dir;

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

    /// `+ what value` lines for a path about to be created with these attributes (a plan
    /// shows the mode a new file gets, not only its content).
    pub fn created_diff(&self) -> String {
        let mut s = String::new();
        if let Some(m) = self.mode {
            s.push_str(&format!("+ mode {}\n", mode_str(m)));
        }
        for (what, v) in [("owner", &self.owner), ("group", &self.group)] {
            if let Some(v) = v {
                s.push_str(&format!("+ {what} {v}\n"));
            }
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
