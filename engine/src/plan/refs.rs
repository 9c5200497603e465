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
//! | `cp1:step@lw1`                | the delegated step `step` of host `lw1`, run on `cp1`  |
//!
//! An input adds the producer's output key: `@first_control_plane:join-data.token`. Without a
//! key the input's own name is the key. Step and task names never contain `.`, `:`, `/` or
//! `@`: `step@host` is only the name of a delegated recipe step (`delegate =
//! "first_control_plane"`): the task runs on the first control plane, its id is
//! `cp1/step@lw1`, and it belongs to `lw1` (so `lw1`'s own steps refer to it as `step`).
//!
//! This is the one grammar: validation (`validate/tasks.rs`), recipe checks
//! (`expand/recipe.rs`) and expansion (`expand/mod.rs`) all [`parse`] here, and a reference
//! of the plan's own `[[tasks]]` is checked against the plan by [`check_user_ref`] in both
//! validation and expansion, so the two accept exactly the same references. Expansion
//! alone can tell whether a recipe step runs on a host (its `applies` and `when`); that is
//! all it adds.

use super::loaded::{LoadedPlan, ResolvedHost};
use crate::diag::did_you_mean;
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

impl Ref {
    /// The step or task name without a delegated step's `@host`.
    pub fn step(&self) -> &str {
        self.name.split_once('@').map_or(&self.name, |(s, _)| s)
    }

    /// The host a delegated step belongs to (`step@host`), if the reference names one.
    pub fn owner(&self) -> Option<&str> {
        self.name.split_once('@').map(|(_, h)| h)
    }
}

/// The name of the task a step delegated for host `owner` gets: `step@owner`.
pub fn delegated_name(step: &str, owner: &str) -> String {
    format!("{step}@{owner}")
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
    let plain = match name.split_once('@') {
        Some((step, owner)) => valid_name(step) && valid_name(owner),
        None => valid_name(name),
    };
    if !plain {
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

/// How a task uses a reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use<'a> {
    /// An `after` entry.
    After,
    /// The input of that name.
    Input(&'a str),
}

/// Why a reference of the plan's `[[tasks]]` cannot be: what the diagnostic says, and a
/// suggestion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub message: String,
    pub hint: Option<String>,
}

impl Problem {
    fn new(message: String) -> Self {
        Problem {
            message,
            hint: None,
        }
    }
    fn hint(mut self, hint: Option<String>) -> Self {
        self.hint = hint;
        self
    }
}

/// Check reference `r` (written `written`) of the plan's task `tasks[task]` against what the
/// plan alone decides: the host it names exists, the plan has a control plane for
/// `@first_control_plane`, `@all` only in `after`, the name is a task of the plan or one of
/// the recipe `steps` (recipes expand only with `[cluster]`: pass none without it), a task
/// never waits for itself, and a task of the plan that is waited for runs on every host that
/// waits for it. Whether a recipe step runs on a host is known only after expansion.
pub fn check_user_ref(
    plan: &LoadedPlan,
    task: usize,
    written: &str,
    r: &Ref,
    usage: Use<'_>,
    steps: &[&str],
) -> Result<(), Problem> {
    let tasks = &plan.file.tasks;
    let Some(me) = tasks.get(task) else {
        return Ok(());
    };
    let name = r.step();
    if let Some(owner) = r.owner() {
        if plan.host(owner).is_none() {
            let hint = did_you_mean(owner, plan.hosts.iter().map(|x| x.name.as_str()))
                .map(|s| format!("did you mean `{name}@{s}`?"));
            return Err(Problem::new(format!(
                "task `{}` refers to `{written}`, the step `{name}` delegated for host `{owner}`, but the plan has no host `{owner}`",
                me.name
            ))
            .hint(hint));
        }
        if !steps.contains(&name) {
            let hint = did_you_mean(name, steps.iter().copied())
                .map(|s| format!("did you mean `{s}@{owner}`?"));
            return Err(Problem::new(format!(
                "task `{}` refers to `{written}`, but no recipe step is named `{name}` (only delegated recipe steps are named `step@host`)",
                me.name
            ))
            .hint(hint));
        }
    }
    // "runs after `x`" / "takes input `i` from `x`", written as given or by name only.
    let what = |s: &str| match usage {
        Use::After => format!("runs after `{s}`"),
        Use::Input(input) => format!("takes input `{input}` from `{s}`"),
    };
    let is_step = steps.contains(&name);
    let dep = tasks.iter().find(|t| t.name == name);
    // The hosts that must run the task waited for.
    let wanted: Vec<&ResolvedHost> = match &r.scope {
        Scope::SameHost if name == me.name => {
            return Err(Problem::new(match usage {
                Use::After => format!("task `{}` cannot run after itself", me.name),
                Use::Input(_) => format!("task `{}` cannot take inputs from itself", me.name),
            }))
        }
        Scope::SameHost => plan.hosts.iter().filter(|h| me.on.matches(h)).collect(),
        Scope::Host(h) => match plan.host(h) {
            Some(host) => vec![host],
            None => {
                let hint = did_you_mean(h, plan.hosts.iter().map(|x| x.name.as_str()))
                    .map(|s| format!("did you mean `{s}:{name}`?"));
                return Err(Problem::new(format!(
                    "task `{}` {}, but the plan has no host `{h}`",
                    me.name,
                    what(written)
                ))
                .hint(hint));
            }
        },
        Scope::FirstControlPlane => match plan.first_control_plane() {
            Some(host) => vec![host],
            None => {
                return Err(Problem::new(format!(
                    "task `{}` {}, but the plan has no control plane",
                    me.name,
                    what(written)
                )))
            }
        },
        Scope::All if matches!(usage, Use::Input(_)) => {
            return Err(Problem::new(format!(
                "task `{}` {}: `@all` is allowed only in `after`, not in `inputs`",
                me.name,
                what(written)
            )))
        }
        Scope::All => Vec::new(),
    };
    if dep.is_none() && !is_step {
        let names = tasks
            .iter()
            .map(|t| t.name.as_str())
            .chain(steps.iter().copied());
        return Err(Problem::new(format!(
            "task `{}` {}, which is not a task or recipe step",
            me.name,
            what(name)
        ))
        .hint(did_you_mean(name, names).map(|s| format!("did you mean `{s}`?"))));
    }
    // A task of the plan (and not also a recipe step, which may run there) runs where its
    // selector says: every host waiting for it must be one of them.
    if let (Some(dep), false) = (dep, is_step) {
        if let Some(missing) = wanted.iter().find(|h| !dep.on.matches(h)) {
            let m = &missing.name;
            return Err(Problem::new(format!(
                "task `{}` {} on `{m}`, but `{name}` does not run on `{m}`",
                me.name,
                what(name)
            ))
            .hint(Some(
                "`after = [\"task\"]` waits for the task on the same host; write \"host:task\" to wait for another host".into(),
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reference_form_parses_to_its_scope() {
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
        let r = parse("cp1:upgrade-drain@lw1", false).expect("delegated");
        assert_eq!(r.scope, Scope::Host("cp1".into()));
        assert_eq!((r.step(), r.owner()), ("upgrade-drain", Some("lw1")));
        assert_eq!(r.to_string(), "cp1:upgrade-drain@lw1");
        let r = parse("@first_control_plane:upgrade-drain@lw1", false).expect("delegated");
        assert_eq!((r.step(), r.owner()), ("upgrade-drain", Some("lw1")));
        assert_eq!(
            parse("kubelet", false).map(|r| r.owner().is_none()),
            Ok(true)
        );
    }

    #[test]
    fn malformed_references_are_refused() {
        assert!(parse("@workers:x", false).is_err());
        assert!(parse(":x", false).is_err());
        assert!(parse("a b", false).is_err());
        assert!(parse("step.key", false).is_err());
        assert!(parse("cp1:", false).is_err());
        assert!(parse("x.", true).is_err());
        assert!(parse("cp1:drain@", false).is_err());
        assert!(parse("cp1:@lw1", false).is_err());
        assert!(parse("cp1:a@b@c", false).is_err());
    }
}
