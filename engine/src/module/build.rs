//! The build phase: every task's module instance, built once from its *rendered* params,
//! before any host is contacted. The executor receives these instances (`exec::Run`); it
//! never builds a module itself, and validation (which sees only unrendered params) builds
//! none either.
//!
//! [`instantiate`] needs no plan (engine tests give it a test registry and a shell per
//! host); [`build_all`] is the pipeline's: the shell of each host comes from its connection
//! spec ([`crate::transport::spec::ConnSpec::script_shell`], the same answer the transport
//! gives), and every refusal becomes a `task-params` diagnostic at the plan line of the
//! parameter (a task of the plan's `[[tasks]]`) or at the recipe step (a recipe's task), all
//! reported at once.

use super::{Module, ParamError, Registry};
use crate::diag::{did_you_mean, Diagnostic, Diagnostics};
use crate::graph::TaskGraph;
use crate::plan::spans::PlanPath;
use crate::plan::LoadedPlan;
use crate::shell::Shell;
use crate::task::{Origin, Task};
use petgraph::graph::NodeIndex;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The module of every task, by graph node index.
pub type Modules = Arc<[Arc<dyn Module>]>;

/// A task whose module could not be built.
#[derive(Debug)]
pub struct BuildError {
    pub node: NodeIndex,
    /// The shell it was built for.
    pub shell: Shell,
    pub error: ParamError,
}

/// Build the module of every task of `graph` with `registry`, for the shell `shell_of` gives
/// the task. A task that says `sensitive = true` gets a module marked sensitive. `Err`:
/// every task whose module could not be built.
pub fn instantiate(
    graph: &TaskGraph,
    shell_of: &dyn Fn(&Task) -> Shell,
    registry: &dyn Registry,
) -> Result<Modules, Vec<BuildError>> {
    let mut built = Vec::with_capacity(graph.len());
    let mut errors = Vec::new();
    for n in graph.graph.node_indices() {
        let task = graph.task(n);
        let shell = shell_of(task);
        match registry.build(&task.module, shell, &task.params) {
            Ok(mut m) => {
                if task.sensitive {
                    m.mark_sensitive();
                }
                built.push(Arc::from(m));
            }
            Err(error) => errors.push(BuildError {
                node: n,
                shell,
                error,
            }),
        }
    }
    if errors.is_empty() {
        Ok(built.into())
    } else {
        Err(errors)
    }
}

/// [`instantiate`] for the tasks of `plan`, each built for the shell its host's scripts are
/// written in. `Err`: a `task-params` diagnostic per refusal (one per task of the plan and
/// refusal, however many hosts run it), located as precisely as the refusal allows.
pub fn build_all(
    plan: &LoadedPlan,
    graph: &TaskGraph,
    registry: &dyn Registry,
) -> Result<Modules, Diagnostics> {
    let shell_of = |t: &Task| {
        plan.host(&t.id.host)
            .map_or(Shell::Posix, |h| h.conn.script_shell())
    };
    let errors = match instantiate(graph, &shell_of, registry) {
        Ok(m) => return Ok(m),
        Err(e) => e,
    };
    let mut reported = BTreeSet::new();
    let mut out = Diagnostics::default();
    for e in errors {
        let task = graph.task(e.node);
        // One diagnostic per task of the plan (or recipe step) and refusal, whichever hosts
        // and shells meet it.
        let key = (
            format!("{:?}", task.origin),
            e.error.path.clone(),
            e.error.message.clone(),
        );
        if !reported.insert(key) {
            continue;
        }
        out.push(match &task.origin {
            Origin::User { index } => user_task_error(plan, *index, task, e.shell, &e.error),
            Origin::Recipe { recipe, step } => {
                let what = match &e.error.path {
                    Some(p) => format!("params.{p}: {}", e.error.message),
                    None => e.error.message.clone(),
                };
                Diagnostic::error(
                    "task-params",
                    format!(
                        "recipe `{recipe}` step `{step}` (module `{}`) on {} hosts: {what}",
                        task.module,
                        shell_name(e.shell)
                    ),
                )
                .at(task.location.clone())
            }
        });
    }
    Err(out.sorted())
}

fn shell_name(s: Shell) -> &'static str {
    match s {
        Shell::Posix => "Linux",
        Shell::PowerShell => "Windows",
    }
}

/// A refusal of the module of the plan's `tasks[i]`, at the parameter's plan line.
fn user_task_error(
    plan: &LoadedPlan,
    i: usize,
    task: &Task,
    shell: Shell,
    e: &ParamError,
) -> Diagnostic {
    let name = plan
        .file
        .tasks
        .get(i)
        .map_or(task.id.name.as_str(), |t| t.name.as_str());
    let on = shell_name(shell);
    match &e.path {
        Some(p) => Diagnostic::error(
            "task-params",
            format!(
                "task `{name}` (module `{}`) on {on} hosts: params.{p}: {}",
                task.module, e.message
            ),
        )
        .at(plan.loc(&param_path(i, p))),
        None => {
            let (at, hint, on_key) = unlocated_param_error(plan, i, shell, &e.message);
            let d = Diagnostic::error(
                "task-params",
                format!(
                    "task `{name}` (module `{}`) on {on} hosts: {}",
                    task.module, e.message
                ),
            )
            .with_hint(hint);
            if on_key {
                d.at(plan.key_loc(&at))
            } else {
                d.at(plan.loc(&at))
            }
        }
    }
}

/// Where to report a param error without a path, and the hint: an unknown field (serde's
/// "unknown field `x`, expected ...") at that field's key, a module missing for the OS at
/// `module`. Returns (path, hint, whether the path is a key).
fn unlocated_param_error(
    plan: &LoadedPlan,
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
            if plan.spans.has(&path) {
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
    let at = if plan.spans.has(&format!("tasks[{i}].params")) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fact::{FactQuery, Facts};
    use crate::module::{Ctx, ModuleError, Plan};
    use std::path::Path;

    #[derive(Debug)]
    struct Nop;

    impl Module for Nop {
        fn facts(&self, _shell: Shell) -> Vec<FactQuery> {
            Vec::new()
        }
        fn plan(&self, _facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
            Ok(Plan::noop("test"))
        }
    }

    /// `file` (both shells; a string `path`), `apt` (POSIX only).
    struct TwoModules;

    impl Registry for TwoModules {
        fn names(&self) -> Vec<&'static str> {
            vec!["apt", "file"]
        }
        fn build(
            &self,
            name: &str,
            shell: Shell,
            params: &serde_json::Value,
        ) -> Result<Box<dyn Module>, ParamError> {
            match (name, shell, params.get("path")) {
                ("file", _, Some(serde_json::Value::String(_))) | ("apt", Shell::Posix, _) => {
                    Ok(Box::new(Nop))
                }
                ("file", _, Some(_)) => Err(ParamError::at("path", "expected a string")),
                ("file", _, None) => Err(ParamError::new("missing parameter `path`")),
                _ => Err(ParamError::new(format!(
                    "module `{name}` is not available on Windows hosts"
                ))),
            }
        }
    }

    const HOSTS: &str = "[[hosts]]\nname = \"cp1\"\naddress = \"192.168.56.10\"\nos = \"linux\"\n\n\
                         [[hosts]]\nname = \"ww1\"\naddress = \"192.168.56.21\"\nos = \"windows\"\npassword_env = \"PW\"\n";

    fn build(text: &str) -> Result<Modules, Diagnostics> {
        let plan = crate::plan::load_str(Path::new("t.toml"), text).expect("loads");
        let tasks = crate::expand::expand(&plan, &[]).expect("expands");
        let graph = TaskGraph::build(tasks).expect("graph");
        build_all(&plan, &graph, &TwoModules)
    }

    #[test]
    fn rendered_params_are_checked_once_per_task_at_their_plan_line() {
        let text = format!(
            "{HOSTS}\n[[tasks]]\nname = \"motd\"\nmodule = \"file\"\nparams = {{ path = 5 }}\n\n\
             [[tasks]]\nname = \"pkgs\"\nmodule = \"apt\"\n"
        );
        let d = build(&text).map(|_| ()).expect_err("refused");
        let got: Vec<(usize, usize, &str)> =
            d.0.iter()
                .map(|d| {
                    let l = d.location.as_ref().map_or((0, 0), |l| (l.line, l.col));
                    (l.0, l.1, d.code)
                })
                .collect();
        let line = |needle: &str| {
            text.lines()
                .position(|l| l.contains(needle))
                .map_or(0, |n| n + 1)
        };
        // `params.path` once, although both hosts (two shells) refuse it; `apt` at `module`.
        assert_eq!(
            got,
            [
                (line("path = 5"), 19, "task-params"),
                (line("\"apt\""), 10, "task-params")
            ],
            "{d}"
        );
        assert!(
            d.0[0].summary.contains(
                "task `motd` (module `file`) on Linux hosts: params.path: expected a string"
            ),
            "{d}"
        );
        assert!(d.0[1].summary.contains("on Windows hosts"), "{d}");
        assert_eq!(
            d.0[1].hint.as_deref(),
            Some("run it only where it exists: on = { os = \"linux\" }")
        );
    }

    #[test]
    fn every_task_gets_its_module_by_node() {
        let text = format!(
            "{HOSTS}\n[[tasks]]\nname = \"motd\"\nmodule = \"file\"\nparams = {{ path = \"/etc/motd\" }}\n"
        );
        let modules = build(&text).map_err(|d| d.to_string()).expect("builds");
        assert_eq!(modules.len(), 2);
    }
}
