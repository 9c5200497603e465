//! References from one task to another: `after` and `inputs` entries.
//!
//! Syntax (the same in recipes and in the plan's `[[tasks]]`):
//!
//! | written                       | means                                                   |
//! |-------------------------------|---------------------------------------------------------|
//! | `step`                        | the task named `step` on the same host                  |
//! | `host:step`                   | the task named `step` on host `host` (plan tasks only)  |
//! | `@first_control_plane:step`   | the task named `step` on the first control plane        |
//! | `@all:step`                   | the task named `step` on every host that has one (`after` only) |
//!
//! An input adds the producer's output key: `@first_control_plane:join-data.token`. Without a
//! key the input's own name is the key. Step and task names never contain `.`, `:` or `/`.

use std::fmt;

/// Which host a reference points to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    SameHost,
    Host(String),
    FirstControlPlane,
    All,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ref {
    pub scope: Scope,
    pub name: String,
    /// Output key (inputs only).
    pub key: Option<String>,
}

impl fmt::Display for Ref {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.scope {
            Scope::SameHost => {}
            Scope::Host(h) => write!(f, "{h}:")?,
            Scope::FirstControlPlane => f.write_str("@first_control_plane:")?,
            Scope::All => f.write_str("@all:")?,
        }
        f.write_str(&self.name)?;
        if let Some(k) = &self.key {
            write!(f, ".{k}")?;
        }
        Ok(())
    }
}

/// Whether `s` may name a step or task: non-empty, no whitespace, none of `. : / @`.
pub fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && !s
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '.' | ':' | '/' | '@'))
}

/// Parse a reference; `with_key` allows (and splits off) a `.key` suffix.
pub fn parse(s: &str, with_key: bool) -> Result<Ref, String> {
    let (scope, rest) = match s.split_once(':') {
        None => (Scope::SameHost, s),
        Some(("@first_control_plane", rest)) => (Scope::FirstControlPlane, rest),
        Some(("@all", rest)) => (Scope::All, rest),
        Some((h, _)) if h.starts_with('@') => {
            return Err(format!(
                "unknown host group `{h}` (expected `@first_control_plane` or `@all`)"
            ))
        }
        Some(("", _)) => return Err(format!("`{s}` names no host before `:`")),
        Some((h, rest)) => (Scope::Host(h.to_string()), rest),
    };
    let (name, key) = match rest.split_once('.') {
        Some((n, k)) if with_key => (n, Some(k.to_string())),
        _ => (rest, None),
    };
    if !valid_name(name) {
        return Err(format!("`{s}` does not name a task"));
    }
    if let Some(k) = &key {
        if k.is_empty() || k.contains(char::is_whitespace) {
            return Err(format!("`{s}` names an empty output key"));
        }
    }
    Ok(Ref {
        scope,
        name: name.to_string(),
        key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        let r = parse("kubelet", false).expect("same host");
        assert_eq!((r.scope, r.name.as_str()), (Scope::SameHost, "kubelet"));
        let r = parse("cp1:kubeadm-init", false).expect("host");
        assert_eq!(r.scope, Scope::Host("cp1".into()));
        let r = parse("@first_control_plane:join-data.token", true).expect("input");
        assert_eq!(r.scope, Scope::FirstControlPlane);
        assert_eq!(
            (r.name.as_str(), r.key.as_deref()),
            ("join-data", Some("token"))
        );
        assert_eq!(r.to_string(), "@first_control_plane:join-data.token");
        let r = parse("@all:kubeadm-join", false).expect("all");
        assert_eq!(r.scope, Scope::All);
    }

    #[test]
    fn errors() {
        assert!(parse("@workers:x", false).is_err());
        assert!(parse(":x", false).is_err());
        assert!(parse("a b", false).is_err());
        assert!(parse("step.key", false).is_err());
        assert!(parse("cp1:", false).is_err());
        assert!(parse("x.", true).is_err());
    }
}
