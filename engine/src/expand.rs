//! Expansion: recipes and the user's `[[tasks]]` → task instances per host.
//!
//! Recipes (TOML + minijinja, from `plans/`) apply to hosts by role and OS; user tasks apply
//! to the hosts their `on` selector names. `after` names resolve to tasks on the same host, or
//! `host:task` for another host.

use crate::diag::{Diagnostic, Diagnostics};
use crate::plan::{LoadedPlan, ResolvedHost, Selector};
use crate::task::{Origin, Task, TaskId};

/// Every task of `plan`. `recipes` are (file name, text) pairs.
pub fn expand(plan: &LoadedPlan, recipes: &[(&str, &str)]) -> Result<Vec<Task>, Diagnostics> {
    let _ = recipes;
    let mut diags = Diagnostics::default();
    let mut tasks = Vec::new();
    for (i, ut) in plan.file.tasks.iter().enumerate() {
        let params = match serde_json::to_value(&ut.params) {
            Ok(v) => v,
            Err(e) => {
                diags.push(
                    Diagnostic::error("task-params", format!("task `{}`: {e}", ut.name))
                        .at(plan.loc(&format!("tasks[{i}].params"))),
                );
                continue;
            }
        };
        for h in plan.hosts.iter().filter(|h| selects(&ut.on, h)) {
            let after = ut
                .after
                .iter()
                .map(|a| match a.split_once(':') {
                    Some((host, name)) => TaskId::new(host, name),
                    None => TaskId::new(&h.name, a),
                })
                .collect();
            tasks.push(Task {
                id: TaskId::new(&h.name, &ut.name),
                module: ut.module.clone(),
                params: params.clone(),
                origin: Origin::User { index: i },
                after,
                inputs: Default::default(),
            });
        }
    }
    if diags.has_errors() {
        Err(diags)
    } else {
        Ok(tasks)
    }
}

/// Whether `sel` picks host `h` (an empty selector picks every host).
pub fn selects(sel: &Selector, h: &ResolvedHost) -> bool {
    (sel.hosts.is_empty() || sel.hosts.iter().any(|n| n == &h.name))
        && (sel.roles.is_empty() || h.role.is_some_and(|r| sel.roles.contains(&r)))
        && sel.os.is_none_or(|os| os == h.os)
}
