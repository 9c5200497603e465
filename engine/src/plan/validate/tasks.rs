//! Rules about the user's `[[tasks]]`: names, selectors, module names, and references
//! (`after`, `inputs`) through the one reference grammar, `plan::refs`, with the same
//! checks expansion makes. A task's params are checked by the build phase
//! (`module::build`), after expansion rendered them.

use super::pass::V;
use crate::diag::{did_you_mean, Diagnostic};
use crate::plan::model::UserTask;
use crate::plan::refs::{self, Use};
use std::collections::HashMap;

/// `modules`: the module names a task may use. `recipe_steps`: the step names a reference
/// may name besides the plan's tasks (used only with `[cluster]`, as expansion does).
pub(super) fn check(v: &mut V<'_>, modules: &[&str], recipe_steps: &[String]) {
    let plan = v.plan;
    let tasks = &plan.file.tasks;
    let steps: Vec<&str> = if plan.file.cluster.is_some() {
        recipe_steps.iter().map(String::as_str).collect()
    } else {
        Vec::new()
    };
    let mut first: HashMap<&str, usize> = HashMap::new();
    for (i, t) in tasks.iter().enumerate() {
        if !refs::valid_name(&t.name) {
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
        selector(v, i, t);
        module(v, modules, i, t);
        references(v, i, t, &steps);
    }
}

/// Check the selector: the hosts it names exist, and it picks at least one.
fn selector(v: &mut V<'_>, i: usize, t: &UserTask) {
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
    let matched = plan.hosts.iter().any(|h| t.on.matches(h));
    if !matched && (unknown == 0 || unknown < t.on.hosts.len()) {
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
}

/// The task's module exists. Whether it exists for the task's hosts' OS, and takes the
/// params, is the build phase's to say (`module::build`).
fn module(v: &mut V<'_>, names: &[&str], i: usize, t: &UserTask) {
    if names.contains(&t.module.as_str()) {
        return;
    }
    let hint = match did_you_mean(&t.module, names.iter().copied()) {
        Some(s) => format!("did you mean `{s}`?"),
        None if names.is_empty() => "this kwin has no modules".to_string(),
        None => format!("modules: {}", names.join(", ")),
    };
    v.at(
        &format!("tasks[{i}].module"),
        Diagnostic::error(
            "unknown-module",
            format!("task `{}`: unknown module `{}`", t.name, t.module),
        )
        .with_hint(hint),
    );
}

/// `after` and `inputs`: parsed by the one grammar, checked as expansion checks them.
fn references(v: &mut V<'_>, i: usize, t: &UserTask, steps: &[&str]) {
    let plan = v.plan;
    let mut check = |path: String, written: &str, usage: Use<'_>| {
        let problem = refs::parse(written, matches!(usage, Use::Input(_)))
            .map_err(|msg| refs::Problem {
                message: format!("task `{}`: {msg}", t.name),
                hint: None,
            })
            .and_then(|r| refs::check_user_ref(plan, i, written, &r, usage, steps));
        if let Err(p) = problem {
            let mut d = match usage {
                Use::After => Diagnostic::error("task-after", p.message),
                Use::Input(_) => Diagnostic::error("task-inputs", p.message),
            };
            if let Some(h) = p.hint {
                d = d.with_hint(h);
            }
            v.at(&path, d);
        }
    };
    for (j, a) in t.after.iter().enumerate() {
        check(format!("tasks[{i}].after[{j}]"), a, Use::After);
    }
    for (name, a) in &t.inputs {
        check(format!("tasks[{i}].inputs.{name}"), a, Use::Input(name));
    }
}
