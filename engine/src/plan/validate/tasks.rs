//! Rules about the user's `[[tasks]]`: names, selectors, `after`, and module params (each
//! task's module is built with the registry for every shell its hosts speak, so a bad
//! parameter is reported at its plan line before anything connects).

use super::V;
use crate::diag::{did_you_mean, Diagnostic};
use crate::expand::selects;
use crate::module::Registry;
use crate::plan::model::{Os, UserTask};
use crate::plan::spans::PlanPath;
use crate::plan::ResolvedHost;
use crate::transport::Shell;
use std::collections::{BTreeSet, HashMap};

pub(super) fn check(v: &mut V<'_>, registry: &dyn Registry, recipe_steps: &[String]) {
    let plan = v.plan;
    let tasks = &plan.file.tasks;
    let mut first: HashMap<&str, usize> = HashMap::new();
    for (i, t) in tasks.iter().enumerate() {
        if !crate::expand::refs::valid_name(&t.name) {
            v.at(
                &format!("tasks[{i}].name"),
                Diagnostic::error(
                    "task-name",
                    format!(
                        "task name \"{}\" is not valid: it must be non-empty, without spaces, `/`, `:`, `.` or `@`",
                        t.name
                    ),
                )
                .with_hint("use names like `motd` or `lab-config`: `:` separates host and task in `after`, `/` host and task in task ids, `.` a task and its output"),
            );
        }
        if let Some(f) = first.get(t.name.as_str()) {
            v.at(
                &format!("tasks[{i}].name"),
                Diagnostic::error(
                    "task-duplicate",
                    format!("task name `{}` is used twice", t.name),
                )
                .with_hint(format!("the first is tasks[{f}]")),
            );
        } else {
            first.insert(&t.name, i);
        }
    }
    for (i, t) in tasks.iter().enumerate() {
        let matched = selector(v, i, t);
        module(v, registry, i, t, &matched);
        after(v, i, t, &matched, recipe_steps);
    }
}

/// Check the selector; the hosts it picks.
fn selector<'p>(v: &mut V<'p>, i: usize, t: &UserTask) -> Vec<&'p ResolvedHost> {
    let plan = v.plan;
    let names: Vec<&str> = plan.hosts.iter().map(|h| h.name.as_str()).collect();
    let mut unknown = 0;
    for (j, n) in t.on.hosts.iter().enumerate() {
        if !names.contains(&n.as_str()) {
            unknown += 1;
            let mut d = Diagnostic::error(
                "selector-host",
                format!(
                    "task `{}` names host `{n}`, which the plan does not have",
                    t.name
                ),
            );
            if let Some(s) = did_you_mean(n, names.iter().copied()) {
                d = d.with_hint(format!("did you mean `{s}`?"));
            }
            v.at(&format!("tasks[{i}].on.hosts[{j}]"), d);
        }
    }
    let matched: Vec<&ResolvedHost> = plan.hosts.iter().filter(|h| selects(&t.on, h)).collect();
    if matched.is_empty() && (unknown == 0 || unknown < t.on.hosts.len()) {
        let path = if v.has(&format!("tasks[{i}].on")) {
            format!("tasks[{i}].on")
        } else {
            format!("tasks[{i}].name")
        };
        v.at(
            &path,
            Diagnostic::warning(
                "selector-empty",
                format!("task `{}` matches no host, so it never runs", t.name),
            )
            .with_hint("check `on.hosts`, `on.roles` and `on.os` against the hosts"),
        );
    }
    matched
}

fn shell_name(s: Shell) -> &'static str {
    match s {
        Shell::Posix => "Linux",
        Shell::PowerShell => "Windows",
    }
}

fn module(v: &mut V<'_>, registry: &dyn Registry, i: usize, t: &UserTask, hosts: &[&ResolvedHost]) {
    let names = registry.names();
    let module_path = format!("tasks[{i}].module");
    if !names.contains(&t.module.as_str()) {
        let hint = match did_you_mean(&t.module, names.iter().copied()) {
            Some(s) => format!("did you mean `{s}`?"),
            None if names.is_empty() => "this kwin has no modules".to_string(),
            None => format!("modules: {}", names.join(", ")),
        };
        v.at(
            &module_path,
            Diagnostic::error(
                "unknown-module",
                format!("task `{}`: unknown module `{}`", t.name, t.module),
            )
            .with_hint(hint),
        );
        return;
    }
    let mut shells: Vec<Shell> = Vec::new();
    for s in hosts.iter().map(|h| h.conn.shell()) {
        if !shells.contains(&s) {
            shells.push(s);
        }
    }
    if hosts.is_empty() {
        match t.on.os {
            Some(Os::Linux) => shells.push(Shell::Posix),
            Some(Os::Windows) => shells.push(Shell::PowerShell),
            None => {}
        }
    }
    let params = match serde_json::to_value(&t.params) {
        Ok(p) => p,
        Err(e) => {
            v.at(
                &format!("tasks[{i}].params"),
                Diagnostic::error("task-params", format!("task `{}`: {e}", t.name)),
            );
            return;
        }
    };
    let mut reported = BTreeSet::new();
    for shell in shells {
        let Err(e) = registry.build(&t.module, shell, &params) else {
            continue;
        };
        if !reported.insert((e.path.clone(), e.message.clone())) {
            continue;
        }
        let on = shell_name(shell);
        match &e.path {
            Some(p) => {
                let path = param_path(i, p);
                v.at(
                    &path,
                    Diagnostic::error(
                        "task-params",
                        format!(
                            "task `{}` (module `{}`) on {on} hosts: params.{p}: {}",
                            t.name, t.module, e.message
                        ),
                    ),
                );
            }
            None => {
                let (at, hint, on_key) = unlocated_param_error(v, i, shell, &e.message);
                let d = Diagnostic::error(
                    "task-params",
                    format!(
                        "task `{}` (module `{}`) on {on} hosts: {}",
                        t.name, t.module, e.message
                    ),
                )
                .with_hint(hint);
                if on_key {
                    v.at_key(&at, d);
                } else {
                    v.at(&at, d);
                }
            }
        }
    }
}

/// Where to report a param error without a path, and the hint: an unknown field (serde's
/// "unknown field `x`, expected ...") at that field's key, a module missing for the OS at
/// `module`. Returns (path, hint, whether the path is a key).
fn unlocated_param_error(
    v: &V<'_>,
    i: usize,
    shell: Shell,
    message: &str,
) -> (String, String, bool) {
    if let Some(rest) = message.strip_prefix("unknown field `") {
        if let Some((field, expected)) = rest.split_once('`') {
            let path = PlanPath::root()
                .key("tasks")
                .index(i)
                .key("params")
                .key(field)
                .to_string();
            let candidates: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
            let hint = match did_you_mean(field, candidates.iter().copied()) {
                Some(s) => format!("did you mean `{s}`?"),
                None => "see the module's documentation for its parameters".to_string(),
            };
            if v.has(&path) {
                return (path, hint, true);
            }
        }
    }
    let module_path = format!("tasks[{i}].module");
    if message.contains("not available on") {
        let other = match shell {
            Shell::Posix => "windows",
            Shell::PowerShell => "linux",
        };
        let hint = format!("run it only where it exists: on = {{ os = \"{other}\" }}");
        return (module_path, hint, false);
    }
    let at = if v.has(&format!("tasks[{i}].params")) {
        format!("tasks[{i}].params")
    } else {
        module_path
    };
    (
        at,
        "see the module's documentation for its parameters".to_string(),
        false,
    )
}

/// `rules.0.port` under task `i` → `tasks[i].params.rules[0].port`.
fn param_path(i: usize, p: &str) -> String {
    let mut path = PlanPath::root().key("tasks").index(i).key("params");
    for seg in p.split('.').filter(|s| !s.is_empty()) {
        path = match seg.parse::<usize>() {
            Ok(n) => path.index(n),
            Err(_) => path.key(seg),
        };
    }
    path.to_string()
}

fn after(v: &mut V<'_>, i: usize, t: &UserTask, hosts: &[&ResolvedHost], recipe_steps: &[String]) {
    let plan = v.plan;
    let tasks = &plan.file.tasks;
    let task_names: Vec<&str> = tasks.iter().map(|x| x.name.as_str()).collect();
    let known = |n: &str| task_names.contains(&n) || recipe_steps.iter().any(|s| s == n);
    for (j, a) in t.after.iter().enumerate() {
        let path = format!("tasks[{i}].after[{j}]");
        let (host, name) = match a.split_once(':') {
            Some((h, n)) => (Some(h), n),
            None => (None, a.as_str()),
        };
        if host.is_none() && name == t.name {
            v.at(
                &path,
                Diagnostic::error(
                    "task-after",
                    format!("task `{}` cannot run after itself", t.name),
                ),
            );
            continue;
        }
        if let Some(h) = host {
            if plan.host(h).is_none() {
                let mut d = Diagnostic::error(
                    "task-after",
                    format!(
                        "task `{}` runs after `{a}`, but the plan has no host `{h}`",
                        t.name
                    ),
                );
                if let Some(s) = did_you_mean(h, plan.hosts.iter().map(|x| x.name.as_str())) {
                    d = d.with_hint(format!("did you mean `{s}:{name}`?"));
                }
                v.at(&path, d);
                continue;
            }
        }
        if !known(name) {
            let candidates = task_names
                .iter()
                .copied()
                .chain(recipe_steps.iter().map(String::as_str));
            let mut d = Diagnostic::error(
                "task-after",
                format!(
                    "task `{}` runs after `{name}`, which is not a task or recipe step",
                    t.name
                ),
            );
            if let Some(s) = did_you_mean(name, candidates) {
                d = d.with_hint(format!("did you mean `{s}`?"));
            }
            v.at(&path, d);
            continue;
        }
        // A user task must run on the host the dependency refers to.
        let Some(dep) = tasks.iter().find(|x| x.name == name) else {
            continue;
        };
        let dep_hosts: std::collections::HashSet<&str> = plan
            .hosts
            .iter()
            .filter(|h| selects(&dep.on, h))
            .map(|h| h.name.as_str())
            .collect();
        let wanted: Vec<&str> = match host {
            Some(h) => vec![h],
            None => hosts.iter().map(|h| h.name.as_str()).collect(),
        };
        if let Some(missing) = wanted.iter().find(|h| !dep_hosts.contains(**h)) {
            v.at(
                &path,
                Diagnostic::error(
                    "task-after",
                    format!("task `{}` runs after `{name}` on `{missing}`, but `{name}` does not run on `{missing}`", t.name),
                )
                .with_hint("`after = [\"task\"]` waits for the task on the same host; write \"host:task\" to wait for another host"),
            );
        }
    }
}
