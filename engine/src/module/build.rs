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
//!
//! A task with a guard (`Task::guard`: a recipe step's `if_exists` / `unless_exists`) gets
//! its module wrapped in [`super::guard::Guarded`] here, so every later phase (probe, plan,
//! apply) sees one module that asks the guard's path with its own facts.

use super::guard::Guarded;
use super::{Module, ParamError, Registry};
use crate::diag::{did_you_mean, Diagnostic, Diagnostics, Location};
use crate::graph::TaskGraph;
use crate::plan::spans::PlanPath;
use crate::plan::structure::{self, Anchor};
use crate::plan::LoadedPlan;
use crate::shell::Shell;
use crate::task::{Origin, Task};
use petgraph::graph::NodeIndex;
use std::collections::{BTreeSet, HashMap};
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
                built.push(guarded(task, Arc::from(m)));
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
/// written in, its rendered params checked first against the module's params schema
/// (`plan::structure`, the walker that checks plan files: every unknown key, wrong type and
/// bad value, each at its key or value, with did-you-mean from the schema). Tasks sharing
/// their params (one user task or recipe step on many hosts) are checked and built once, and
/// share the module. `Err`: a `task-params` diagnostic per problem (one per task of the plan
/// or recipe step, however many hosts run it), at the parameter's plan line for a task of
/// the plan's `[[tasks]]`, at the recipe step for a recipe's task; all of them at once.
pub fn build_all(
    plan: &LoadedPlan,
    graph: &TaskGraph,
    registry: &dyn Registry,
) -> Result<Modules, Diagnostics> {
    let (built, out) = build_some(plan, graph, registry, &|_| true);
    if !out.0.is_empty() {
        return Err(out.sorted());
    }
    Ok(built.into_iter().flatten().collect::<Vec<_>>().into())
}

/// The checks of [`build_all`] for the tasks `final_params` accepts, and what can be
/// checked of the others' relations, with no module kept: for `kwin validate` (and every
/// command that does not fetch) while a download's checksum is not known offline — the
/// params that render it are not final, every other task's are, and are checked in every
/// plan. Every problem found.
pub fn check_params(
    plan: &LoadedPlan,
    graph: &TaskGraph,
    registry: &dyn Registry,
    final_params: &dyn Fn(&Task) -> bool,
) -> Diagnostics {
    build_some(plan, graph, registry, final_params).1.sorted()
}

/// The module of every task `wanted` accepts (`None` for the others and for those that
/// could not be built), and every problem: params, `inputs` naming an output the producer
/// does not give, two tasks managing one path.
fn build_some(
    plan: &LoadedPlan,
    graph: &TaskGraph,
    registry: &dyn Registry,
    wanted: &dyn Fn(&Task) -> bool,
) -> (Vec<Option<Arc<dyn Module>>>, Diagnostics) {
    let shell_of = |t: &Task| {
        plan.host(&t.id.host)
            .map_or(Shell::Posix, |h| h.conn.script_shell())
    };
    let names = registry.names();
    let empty = serde_json::Value::Object(Default::default());
    type Key<'g> = (usize, &'g str, Shell, bool, Option<&'g crate::task::Guard>);
    let mut memo: HashMap<Key<'_>, Option<Arc<dyn Module>>> = HashMap::new();
    let mut built: Vec<Option<Arc<dyn Module>>> = Vec::with_capacity(graph.len());
    let mut out = Diagnostics::default();
    let mut reported = BTreeSet::new();
    let mut report = |task: &Task, key: String, d: Diagnostic, out: &mut Diagnostics| {
        // One diagnostic per task of the plan (or recipe step) and problem.
        if reported.insert((format!("{:?}", task.origin), key)) {
            out.push(d);
        }
    };
    for n in graph.graph.node_indices() {
        let task = graph.task(n);
        if !wanted(task) {
            built.push(None);
            continue;
        }
        let shell = shell_of(task);
        let key = (
            Arc::as_ptr(&task.params) as *const () as usize,
            task.module.as_str(),
            shell,
            task.sensitive,
            task.guard.as_ref(),
        );
        if let Some(m) = memo.get(&key) {
            built.push(m.clone());
            continue;
        }
        let params = if task.params.is_null() {
            &empty
        } else {
            task.params.as_ref()
        };
        let at = Where::of(plan, task);
        let module = match checked(registry, &names, task, shell, params, &at) {
            Ok(m) => {
                let mut m = m;
                if task.sensitive {
                    m.mark_sensitive();
                }
                Some(guarded(task, Arc::from(m)))
            }
            Err(problems) => {
                for (k, d) in problems {
                    report(task, k, d, &mut out);
                }
                None
            }
        };
        built.push(module.clone());
        memo.insert(key, module);
    }
    for (k, d) in inputs_problems(plan, graph, &built, &shell_of) {
        if reported.insert((String::new(), k)) {
            out.push(d);
        }
    }
    out.extend(conflicts(plan, graph, &built, &shell_of));
    (built, out)
}

/// Every `inputs` entry naming an output key its producer's module does not declare
/// ([`Module::output_keys`]): (dedup key, diagnostic).
fn inputs_problems(
    plan: &LoadedPlan,
    graph: &TaskGraph,
    built: &[Option<Arc<dyn Module>>],
    shell_of: &dyn Fn(&Task) -> Shell,
) -> Vec<(String, Diagnostic)> {
    let mut out = Vec::new();
    for n in graph.graph.node_indices() {
        let task = graph.task(n);
        for (name, input) in &task.inputs {
            let Some(p) = graph.node(&input.from) else {
                continue;
            };
            let Some(Some(producer)) = built.get(p.index()) else {
                continue;
            };
            let from = graph.task(p);
            let Some(keys) = producer.output_keys(shell_of(from)) else {
                continue;
            };
            if keys.contains(&input.key.as_str()) {
                continue;
            }
            let at = Where::of(plan, task);
            let written = match &at {
                Where::User { .. } => format!("`{}`", input_written(plan, task, name)),
                Where::Recipe { .. } => format!("`{}.{}`", from.id.name, input.key),
            };
            let given = if keys.is_empty() {
                format!(
                    "`{}` (module `{}`) gives no outputs",
                    from.id.name, from.module
                )
            } else {
                format!("`{}` gives no output `{}`", from.id.name, input.key)
            };
            let mut d = Diagnostic::error(
                "task-inputs",
                format!("{}: input `{name}` ({written}): {given}", at.what()),
            );
            if !keys.is_empty() {
                d = d.with_hint(match did_you_mean(&input.key, keys.iter().copied()) {
                    Some(k) => format!("did you mean `{}.{k}`?", from.id.name),
                    None => format!("its outputs: {}", keys.join(", ")),
                });
            }
            let path = match &at {
                Where::User { index, .. } => PlanPath::root()
                    .key("tasks")
                    .index(*index)
                    .key("inputs")
                    .key(name),
                Where::Recipe { .. } => PlanPath::root(),
            };
            let loc = match &at {
                Where::User { plan, .. } => plan.loc(&path.to_string()),
                Where::Recipe { at, .. } => at.clone(),
            };
            out.push((format!("{:?} {name}", task.origin), d.at(loc)));
        }
    }
    out
}

/// The reference a plan task wrote for its input `name`, as written.
fn input_written(plan: &LoadedPlan, task: &Task, name: &str) -> String {
    match &task.origin {
        Origin::User { index } => plan
            .file
            .tasks
            .get(*index)
            .and_then(|t| t.inputs.get(name))
            .cloned()
            .unwrap_or_default(),
        Origin::Recipe { .. } => String::new(),
    }
}

/// Two tasks of one host managing the same path, at least one of them a task of the plan and
/// one of them managing it whole ([`Module::manages`]): each apply would undo the other's
/// change. One diagnostic per pair of plan tasks (or plan task and recipe step) and path,
/// naming every host. Recipe steps among themselves are kwin's (twins for fresh and joined
/// nodes manage the same path behind opposite guards).
fn conflicts(
    plan: &LoadedPlan,
    graph: &TaskGraph,
    built: &[Option<Arc<dyn Module>>],
    shell_of: &dyn Fn(&Task) -> Shell,
) -> Diagnostics {
    use std::collections::BTreeMap;
    // (host, path) → every (task, whole).
    let mut by_path: BTreeMap<(String, String), Vec<(NodeIndex, bool)>> = BTreeMap::new();
    for n in graph.graph.node_indices() {
        let Some(Some(m)) = built.get(n.index()) else {
            continue;
        };
        let task = graph.task(n);
        let shell = shell_of(task);
        for managed in m.manages() {
            let path = normal_path(managed.path(), shell);
            by_path
                .entry((task.id.host.clone(), path))
                .or_default()
                .push((n, managed.is_whole()));
        }
    }
    // (first origin, second origin, path) → (hosts, the two tasks on the first host).
    type Pair = (Vec<String>, NodeIndex, NodeIndex);
    let mut pairs: BTreeMap<(String, String, String), Pair> = BTreeMap::new();
    for ((host, path), tasks) in &by_path {
        for (i, (a, a_whole)) in tasks.iter().enumerate() {
            for (b, b_whole) in &tasks[i + 1..] {
                let (ta, tb) = (graph.task(*a), graph.task(*b));
                let user = |t: &Task| matches!(t.origin, Origin::User { .. });
                if !(*a_whole || *b_whole) || !(user(ta) || user(tb)) || ta.origin == tb.origin {
                    continue;
                }
                let key = (
                    format!("{:?}", ta.origin),
                    format!("{:?}", tb.origin),
                    path.clone(),
                );
                let e = pairs.entry(key).or_insert_with(|| (Vec::new(), *a, *b));
                e.0.push(host.clone());
            }
        }
    }
    let mut out = Diagnostics::default();
    for ((_, _, path), (hosts, a, b)) in pairs {
        let (ta, tb) = (graph.task(a), graph.task(b));
        let (wa, wb) = (Where::of(plan, ta), Where::of(plan, tb));
        // At the plan task (the later one when both are).
        let here = match (&tb.origin, &ta.origin) {
            (Origin::User { index }, _) | (_, Origin::User { index }) => *index,
            _ => continue,
        };
        let d = Diagnostic::error(
            "task-conflict",
            format!(
                "{} and {} both manage `{path}` on {}: each apply would undo the other's change",
                wa.what(),
                wb.what(),
                hosts.join(", ")
            ),
        )
        .with_hint(
            "manage each path with one task (merge them), or give the tasks hosts that do not overlap (`on`)",
        )
        .at(plan.loc(&format!("tasks[{here}].name")));
        out.push(d);
    }
    out
}

/// A path as a host's file system compares it: without trailing separators; on Windows
/// with `\` and case-insensitive.
fn normal_path(p: &str, shell: Shell) -> String {
    let trimmed = p.trim_end_matches(['/', '\\']);
    let p = if trimmed.is_empty() { p } else { trimmed };
    match shell {
        Shell::Posix => p.to_string(),
        Shell::PowerShell => p.replace('/', "\\").to_lowercase(),
    }
}

/// `m`, wrapped in its task's guard if it has one.
fn guarded(task: &Task, m: Arc<dyn Module>) -> Arc<dyn Module> {
    match &task.guard {
        Some(g) => Arc::new(Guarded::new(m, g.clone())),
        None => m,
    }
}

/// Where a task's params are, for its diagnostics.
enum Where<'p> {
    /// The plan's `tasks[i]`, and the task's name.
    User {
        plan: &'p LoadedPlan,
        index: usize,
        name: &'p str,
    },
    /// A recipe step: its location and how it is named.
    Recipe { at: Option<Location>, what: String },
}

impl<'p> Where<'p> {
    fn of(plan: &'p LoadedPlan, task: &'p Task) -> Where<'p> {
        match &task.origin {
            Origin::User { index } => Where::User {
                plan,
                index: *index,
                name: plan
                    .file
                    .tasks
                    .get(*index)
                    .map_or(task.id.name.as_str(), |t| t.name.as_str()),
            },
            Origin::Recipe { recipe, step } => Where::Recipe {
                at: task.location.clone(),
                what: format!("recipe `{recipe}` step `{step}`"),
            },
        }
    }

    /// The path of the task's params in the document (a recipe step's: `params`).
    fn params(&self) -> PlanPath {
        match self {
            Where::User { index, .. } => PlanPath::root().key("tasks").index(*index).key("params"),
            Where::Recipe { .. } => PlanPath::root().key("params"),
        }
    }

    /// "task `motd`" / "recipe `r` step `s`".
    fn what(&self) -> String {
        match self {
            Where::User { name, .. } => format!("task `{name}`"),
            Where::Recipe { what, .. } => what.clone(),
        }
    }

    /// The location of `path` (its key, with `key`), or of the closest thing the document
    /// has: the task's params, its `module`, the recipe step.
    fn loc(&self, path: &PlanPath, key: bool) -> Option<Location> {
        match self {
            Where::User { plan, index, .. } => {
                let p = path.to_string();
                let module = format!("tasks[{index}].module");
                let within = p.starts_with(&format!("tasks[{index}].params"));
                if within && plan.spans.has(&format!("tasks[{index}].params")) {
                    if key {
                        plan.key_loc(&p)
                    } else {
                        plan.loc(&p)
                    }
                } else {
                    plan.loc(&module)
                }
            }
            Where::Recipe { at, .. } => at.clone(),
        }
    }
}

/// The module of `task`, or every problem with its params: (dedup key, diagnostic).
fn checked(
    registry: &dyn Registry,
    names: &[&str],
    task: &Task,
    shell: Shell,
    params: &serde_json::Value,
    at: &Where<'_>,
) -> Result<Box<dyn Module>, Vec<(String, Diagnostic)>> {
    let module = task.module.as_str();
    let head = format!("{} (module `{module}`)", at.what());
    let module_path = match at {
        Where::User { index, .. } => PlanPath::root().key("tasks").index(*index).key("module"),
        Where::Recipe { .. } => PlanPath::root(),
    };
    if !names.contains(&module) {
        let mut d = Diagnostic::error(
            "unknown-module",
            format!("{}: unknown module `{module}`", at.what()),
        );
        if let Some(s) = did_you_mean(module, names.iter().copied()) {
            d = d.with_hint(format!("did you mean `{s}`?"));
        }
        return Err(vec![("unknown".into(), d.at(at.loc(&module_path, false)))]);
    }
    let schema = registry.params_schema(module, shell);
    let elsewhere = [Shell::Posix, Shell::PowerShell]
        .into_iter()
        .find(|s| *s != shell && registry.params_schema(module, *s).is_some());
    if let (None, Some(other)) = (&schema, elsewhere) {
        let d = Diagnostic::error(
            "task-params",
            format!(
                "{head} on {} hosts: module `{module}` is not available on {} hosts",
                shell_name(shell),
                shell_name(shell)
            ),
        )
        .with_hint(format!(
            "run it only where it exists: on = {{ os = \"{}\" }}",
            shell_name(other).to_ascii_lowercase()
        ));
        return Err(vec![(
            format!("not on {shell:?}"),
            d.at(at.loc(&module_path, false)),
        )]);
    }
    let base = at.params();
    if let Some(schema) = &schema {
        let findings = structure::check_value(params, schema, &base);
        if !findings.is_empty() {
            return Err(findings
                .into_iter()
                .map(|f| {
                    let mut d =
                        Diagnostic::error("task-params", format!("{head}: {}", f.diag.summary));
                    if let Some(h) = &f.diag.hint {
                        d = d.with_hint(h.clone());
                    }
                    let key = format!("{} {}", f.path, f.diag.summary);
                    (key, d.at(at.loc(&f.path, f.anchor == Anchor::Key)))
                })
                .collect());
        }
    }
    registry.build(module, shell, params).map_err(|e| {
        let on = shell_name(shell);
        let (summary, path) = match &e.path {
            Some(p) => (
                format!("{head} on {on} hosts: params.{p}: {}", e.message),
                param_path(&base, p),
            ),
            None if e.shape && schema.is_some() => (
                format!(
                    "{head} on {on} hosts: {} (the params passed the module's schema: this is a bug in kwin)",
                    e.message
                ),
                base.clone(),
            ),
            None => (format!("{head} on {on} hosts: {}", e.message), base.clone()),
        };
        let mut d = Diagnostic::error("task-params", summary);
        if e.path.is_none() {
            d = d.with_hint("see the module's documentation for its parameters");
        }
        vec![(
            format!("{:?} {}", e.path, e.message),
            d.at(at.loc(&path, false)),
        )]
    })
}

fn shell_name(s: Shell) -> &'static str {
    match s {
        Shell::Posix => "Linux",
        Shell::PowerShell => "Windows",
    }
}

/// `rules.0.port` (a [`ParamError`] path) under `base` → `base.rules[0].port`.
fn param_path(base: &PlanPath, p: &str) -> PlanPath {
    let mut path = base.clone();
    for seg in p.split('.').filter(|s| !s.is_empty()) {
        path = match seg.parse::<usize>() {
            Ok(n) => path.index(n),
            Err(_) => path.key(seg),
        };
    }
    path
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
        fn params_schema(&self, name: &str, shell: Shell) -> Option<serde_json::Value> {
            match (name, shell) {
                ("file", _) => Some(serde_json::json!({
                    "type": "object",
                    "properties": { "path": { "type": "string" } },
                    "required": ["path"],
                    "additionalProperties": false
                })),
                ("apt", Shell::Posix) => Some(serde_json::json!({ "type": "object" })),
                _ => None,
            }
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
                "task `motd` (module `file`): `tasks[0].params.path`: expected a string, found an integer"
            ),
            "{d}"
        );
        assert!(d.0[1].summary.contains("on Windows hosts"), "{d}");
        assert_eq!(
            d.0[1].hint.as_deref(),
            Some("run it only where it exists: on = { os = \"linux\" }")
        );
    }

    /// A misspelt key is found by the schema walk, at its key, with did-you-mean from the
    /// schema (no message text of the deserializer is read).
    #[test]
    fn a_misspelt_param_is_reported_at_its_key_with_the_right_name() {
        let text = format!(
            "{HOSTS}\n[[tasks]]\nname = \"motd\"\nmodule = \"file\"\nparams = {{ pth = \"/etc/motd\" }}\n"
        );
        let d = build(&text).map(|_| ()).expect_err("refused");
        let line = text
            .lines()
            .position(|l| l.contains("pth ="))
            .map_or(0, |n| n + 1);
        let shown: Vec<String> = d.0.iter().map(|d| format!("{d:?}")).collect();
        assert!(
            d.0.iter().any(
                |d| d.summary.contains("unknown key `pth` in `tasks[0].params`")
                    && d.hint.as_deref() == Some("did you mean `path`?")
                    && d.location
                        .as_ref()
                        .is_some_and(|l| (l.line, l.col) == (line, 12))
            ),
            "{shown:?}"
        );
    }

    /// A recipe step's rendered params are checked too, and reported at the step.
    #[test]
    fn a_recipe_step_s_params_are_checked_at_the_step() {
        use crate::task::TaskId;
        let plan = crate::plan::load_str(Path::new("t.toml"), HOSTS).expect("loads");
        let at = Location {
            file: "plans/r.toml".into(),
            line: 7,
            col: 1,
        };
        let mut task = Task::new(
            TaskId::new("cp1", "s"),
            "file",
            serde_json::json!({ "path": 2, "extra": true }),
        );
        task.origin = Origin::Recipe {
            recipe: "r".into(),
            step: "s".into(),
        };
        task.location = Some(at.clone());
        let graph = TaskGraph::build(vec![task]).expect("graph");
        let d = build_all(&plan, &graph, &TwoModules)
            .map(|_| ())
            .expect_err("refused");
        assert_eq!(d.0.len(), 2, "{d}");
        for d in &d.0 {
            assert_eq!(d.code, "task-params");
            assert!(
                d.summary
                    .starts_with("recipe `r` step `s` (module `file`): "),
                "{d}"
            );
            assert_eq!(d.location.as_ref(), Some(&at), "{d}");
        }
        assert!(
            d.0.iter()
                .any(|d| d.summary.contains("unknown key `extra` in `params`")),
            "{d}"
        );
        assert!(
            d.0.iter().any(|d| d
                .summary
                .contains("`params.path`: expected a string, found an integer")),
            "{d}"
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
