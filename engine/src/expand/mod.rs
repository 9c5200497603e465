//! Expansion: recipes and the user's `[[tasks]]` → task instances per host.
//!
//! Flow of [`expand`]:
//!
//! 1. [`RecipeContext::from_plan`]: the template context, every default filled in once.
//! 2. Without `[cluster]` only the user's tasks expand. With it, [`RecipeSet::parse`] reads the
//!    recipes (format: `recipe.rs`) and every template is compiled once.
//! 3. Per host, in plan order: each recipe whose `applies` matches (roles, os,
//!    `first_control_plane`, `when`) contributes its steps whose `when` holds, params rendered
//!    with the host's context. Recipe order becomes `Task::order`. Templates that do not read
//!    `host` are rendered once and reused, so 1,000 hosts cost 1,000 cheap clones.
//! 4. User tasks expand onto the hosts their `on` selector picks; their params are templates too.
//! 5. References (`after`, `triggered_by`, `inputs`; syntax in `refs.rs`) resolve to task ids.
//!
//! Reference rules: a same-host or `@all` reference to a name that some recipe step or user task
//! has, but that does not run on this host, is dropped (e.g. a step skipped by `when`); a name
//! nobody has is an error. A reference to a named host or `@first_control_plane` must find the
//! task there. An input must always find its producer.
//!
//! Every problem is a diagnostic pointing at the plan line (`tasks[i].after[j]`) or the recipe
//! file, step and template line; all are reported at once.

pub mod context;
pub mod recipe;
pub mod refs;

pub use context::RecipeContext;
pub use recipe::RecipeSet;

use crate::diag::{did_you_mean, Diagnostic, Diagnostics, Location};
use crate::plan::{LoadedPlan, ResolvedHost, Selector};
use crate::task::{InputRef, Origin, Task, TaskId};
use crate::template::{self, TemplateError, Tree, TreeError, Value};
use recipe::{template_diag, CompiledRecipe, Recipe};
use refs::{Ref, Scope};
use std::collections::{HashMap, HashSet};

/// Every task of `plan`. `recipes` are (file name, text) pairs.
pub fn expand(plan: &LoadedPlan, recipes: &[(&str, &str)]) -> Result<Vec<Task>, Diagnostics> {
    let ctx = RecipeContext::from_plan(plan)?;
    let set = if ctx.has_cluster {
        RecipeSet::parse(recipes)?
    } else {
        RecipeSet::default()
    };
    let mut env = template::environment();
    let pins = plan.file.artifacts.sha256.clone();
    // `sha256_of('file-name')`: the plan's pinned checksum of an artifact, or none.
    env.add_function("sha256_of", move |file: &str| pins.get(file).cloned());
    let mut diags = Diagnostics::default();
    let compiled: Vec<CompiledRecipe> = set
        .recipes
        .iter()
        .map(|r| CompiledRecipe::compile(&env, r, &mut diags))
        .collect();
    let user: Vec<Tree> = plan
        .file
        .tasks
        .iter()
        .enumerate()
        .map(|(i, ut)| {
            let mut errors = Vec::new();
            let items = ut
                .params
                .iter()
                .map(|(k, v)| (k.clone(), Tree::compile(&env, v, k, &mut errors)))
                .collect();
            for e in errors {
                diags.push(user_template_diag(plan, i, &ut.name, &e, None));
            }
            Tree::Object(items)
        })
        .collect();
    if diags.has_errors() {
        return Err(diags);
    }

    let mut x = Expander::new(plan, &set);
    let contexts: Vec<Value> = (0..plan.hosts.len()).map(|i| ctx.for_host(i)).collect();
    let mut cache = RenderCache::new(&compiled);
    let by_name: HashMap<&str, usize> = set
        .recipes
        .iter()
        .enumerate()
        .map(|(i, r)| (r.name(), i))
        .collect();
    let requires: Vec<Vec<usize>> = set
        .recipes
        .iter()
        .map(|r| {
            r.def
                .requires
                .iter()
                .filter_map(|q| by_name.get(q.as_str()).copied())
                .collect()
        })
        .collect();
    for (hi, cx) in contexts.iter().enumerate() {
        x.recipes_on_host(
            hi,
            cx,
            &compiled,
            &requires,
            ctx.first_control_plane,
            &mut cache,
        );
    }
    for (i, tree) in user.iter().enumerate() {
        x.user_task(i, tree, &contexts);
    }
    x.resolve(ctx.first_control_plane)
}

/// Where a reference was written, for diagnostics.
#[derive(Debug, Clone)]
enum Site<'a> {
    Recipe {
        recipe: &'a Recipe,
        step: &'a str,
        path: String,
    },
    User {
        name: &'a str,
        path: String,
    },
}

impl Site<'_> {
    fn diag(&self, plan: &LoadedPlan, code: &'static str, msg: String) -> Diagnostic {
        match self {
            Site::Recipe { recipe, step, path } => Diagnostic::error(
                code,
                format!("recipe `{}` step `{step}`: {msg}", recipe.name()),
            )
            .at(recipe.loc(path)),
            Site::User { name, path, .. } => {
                Diagnostic::error(code, format!("task `{name}`: {msg}")).at(plan.loc(path))
            }
        }
    }

    fn is_user(&self) -> bool {
        matches!(self, Site::User { .. })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum RefKind {
    After,
    Trigger,
    Input(String),
}

#[derive(Debug)]
struct PendingRef<'a> {
    kind: RefKind,
    r: Ref,
    site: Site<'a>,
}

#[derive(Debug)]
struct Pending<'a> {
    task: Task,
    host: usize,
    refs: Vec<PendingRef<'a>>,
}

/// Renders of templates that do not read `host`, shared by every host.
struct RenderCache {
    recipe_when: Vec<Option<Result<bool, TemplateError>>>,
    step_when: Vec<Vec<Option<Result<bool, TemplateError>>>>,
    params: Vec<Vec<Option<Result<serde_json::Value, TreeError>>>>,
}

impl RenderCache {
    fn new(compiled: &[CompiledRecipe]) -> Self {
        RenderCache {
            recipe_when: vec![None; compiled.len()],
            step_when: compiled.iter().map(|c| vec![None; c.steps.len()]).collect(),
            params: compiled.iter().map(|c| vec![None; c.steps.len()]).collect(),
        }
    }
}

struct Expander<'a> {
    plan: &'a LoadedPlan,
    set: &'a RecipeSet,
    pending: Vec<Pending<'a>>,
    /// Per host: task name → index in `pending`.
    by_host: Vec<HashMap<String, usize>>,
    diags: Diagnostics,
    seen: HashSet<String>,
}

impl<'a> Expander<'a> {
    fn new(plan: &'a LoadedPlan, set: &'a RecipeSet) -> Self {
        Expander {
            plan,
            set,
            pending: Vec::new(),
            by_host: vec![HashMap::new(); plan.hosts.len()],
            diags: Diagnostics::default(),
            seen: HashSet::new(),
        }
    }

    /// Push `d` unless an identical diagnostic was already reported (the same template error
    /// on every host is reported once).
    fn report(&mut self, d: Diagnostic) {
        if self.seen.insert(d.to_string()) {
            self.diags.push(d);
        }
    }

    fn host(&self, i: usize) -> &'a ResolvedHost {
        &self.plan.hosts[i]
    }

    fn recipes_on_host(
        &mut self,
        hi: usize,
        cx: &Value,
        compiled: &'a [CompiledRecipe<'_, 'a>],
        requires: &[Vec<usize>],
        first_cp: Option<usize>,
        cache: &mut RenderCache,
    ) {
        let host = self.host(hi);
        // Per recipe: its last step on this host (or, if it does not run here, the tails of
        // what it requires), and every tail those already follow (to skip redundant edges).
        let mut tails: Vec<Vec<TaskId>> = vec![Vec::new(); compiled.len()];
        let mut covered: Vec<HashSet<TaskId>> = vec![HashSet::new(); compiled.len()];
        for (ri, cr) in compiled.iter().enumerate() {
            let r = cr.recipe;
            let mut preds: Vec<TaskId> = Vec::new();
            let mut below: HashSet<TaskId> = HashSet::new();
            for &q in &requires[ri] {
                below.extend(covered[q].iter().cloned());
                for t in &tails[q] {
                    if !preds.contains(t) {
                        preds.push(t.clone());
                    }
                }
            }
            preds.retain(|t| !below.contains(t));
            let a = &r.def.applies;
            let mut applies = (a.roles.is_empty()
                || host.role.is_some_and(|x| a.roles.contains(&x)))
                && a.os.is_none_or(|os| os == host.os)
                && (!a.first_control_plane || first_cp == Some(hi));
            if applies {
                if let Some(w) = &cr.when {
                    let res = cached(&mut cache.recipe_when[ri], w.reads("host"), || {
                        w.render_bool(cx)
                    });
                    applies = res.unwrap_or_else(|e| {
                        let d = template_diag(
                            r,
                            None,
                            "applies.when",
                            "applies.when",
                            &e,
                            Some(&host.name),
                        );
                        self.report(d);
                        false
                    });
                }
            }
            if !applies {
                tails[ri] = preds;
                covered[ri] = below;
                continue;
            }
            for (ai, (that, message)) in cr.asserts.iter().enumerate() {
                let path = format!("asserts[{ai}].that");
                match that.render_bool(cx) {
                    Ok(true) => {}
                    Ok(false) => self.report(
                        Diagnostic::error(
                            "recipe-assert",
                            format!("host `{}`: {message} (recipe `{}`)", host.name, r.name()),
                        )
                        .at(self.plan.loc(&format!("hosts[{}].name", host.index))),
                    ),
                    Err(e) => {
                        self.report(template_diag(r, None, &path, &path, &e, Some(&host.name)))
                    }
                }
            }
            let mut prev = preds.clone();
            for st in &cr.steps {
                if let Some(w) = &st.when {
                    let res = cached(&mut cache.step_when[ri][st.index], w.reads("host"), || {
                        w.render_bool(cx)
                    });
                    let on = res.unwrap_or_else(|e| {
                        let path = format!("steps[{}].when", st.index);
                        let d = template_diag(
                            r,
                            Some(&st.def.name),
                            &path,
                            "when",
                            &e,
                            Some(&host.name),
                        );
                        self.report(d);
                        false
                    });
                    if !on {
                        continue;
                    }
                }
                let params = match cached(
                    &mut cache.params[ri][st.index],
                    st.params.reads("host"),
                    || st.params.render(cx),
                ) {
                    Ok(p) => p,
                    Err(e) => {
                        self.report(template_diag(
                            r,
                            Some(&st.def.name),
                            &format!("steps[{}].params.{}", st.index, e.path),
                            &format!("params.{}", e.path),
                            &e.error,
                            Some(&host.name),
                        ));
                        continue;
                    }
                };
                let id = TaskId::new(&host.name, &st.def.name);
                let mut task =
                    Task::new(id.clone(), &st.def.module, params).with_origin(Origin::Recipe {
                        recipe: r.name().to_string(),
                        step: st.def.name.clone(),
                    });
                task.location = r.loc(&format!("steps[{}]", st.index));
                task.order = std::mem::replace(&mut prev, vec![id]);
                let site = |path: &str| Site::Recipe {
                    recipe: r,
                    step: &st.def.name,
                    path: path.to_string(),
                };
                let mut refs = Vec::new();
                for (rf, path) in &st.after {
                    refs.push(PendingRef {
                        kind: RefKind::After,
                        r: rf.clone(),
                        site: site(path),
                    });
                }
                for (rf, path) in &st.triggered_by {
                    refs.push(PendingRef {
                        kind: RefKind::Trigger,
                        r: rf.clone(),
                        site: site(path),
                    });
                }
                for (name, rf, path) in &st.inputs {
                    refs.push(PendingRef {
                        kind: RefKind::Input(name.clone()),
                        r: rf.clone(),
                        site: site(path),
                    });
                }
                self.add(hi, task, refs, None);
            }
            if prev != preds {
                below.extend(preds);
            }
            tails[ri] = prev;
            covered[ri] = below;
        }
    }

    fn user_task(&mut self, i: usize, tree: &Tree, contexts: &[Value]) {
        let plan = self.plan;
        let ut = &plan.file.tasks[i];
        let mut shared: Option<Result<serde_json::Value, TreeError>> = None;
        for (hi, h) in plan.hosts.iter().enumerate() {
            if !selects(&ut.on, h) {
                continue;
            }
            let params = match cached(&mut shared, tree.reads("host"), || {
                tree.render(&contexts[hi])
            }) {
                Ok(p) => p,
                Err(e) => {
                    let d = user_template_diag(plan, i, &ut.name, &e, Some(&h.name));
                    self.report(d);
                    continue;
                }
            };
            let mut task = Task::new(TaskId::new(&h.name, &ut.name), &ut.module, params)
                .with_origin(Origin::User { index: i });
            task.location = plan.loc(&format!("tasks[{i}]"));
            let mut refs = Vec::new();
            for (j, a) in ut.after.iter().enumerate() {
                let path = format!("tasks[{i}].after[{j}]");
                match refs::parse(a, false) {
                    Ok(r) => refs.push(PendingRef {
                        kind: RefKind::After,
                        r,
                        site: Site::User {
                            name: &ut.name,
                            path,
                        },
                    }),
                    Err(msg) => self.report(
                        Diagnostic::error("task-after", format!("task `{}`: {msg}", ut.name))
                            .at(plan.loc(&path)),
                    ),
                }
            }
            self.add(hi, task, refs, Some(i));
        }
    }

    fn add(&mut self, hi: usize, task: Task, refs: Vec<PendingRef<'a>>, user: Option<usize>) {
        let name = task.id.name.clone();
        if let Some(&other) = self.by_host[hi].get(&name) {
            let d = self.clash(&self.pending[other].task, &task, user);
            self.report(d);
            return;
        }
        self.by_host[hi].insert(name, self.pending.len());
        self.pending.push(Pending {
            task,
            host: hi,
            refs,
        });
    }

    fn clash(&self, first: &Task, second: &Task, user: Option<usize>) -> Diagnostic {
        let id = &second.id;
        let what = |t: &Task| match &t.origin {
            Origin::Recipe { recipe, step } => format!("step `{step}` of recipe `{recipe}`"),
            Origin::User { index } => format!("the plan's tasks[{index}]"),
        };
        let d = Diagnostic::error(
            "task-duplicate",
            format!(
                "task `{id}` is defined twice: by {} and by {}",
                what(first),
                what(second)
            ),
        );
        match user {
            Some(i) => d.at(self.plan.loc(&format!("tasks[{i}].name"))).with_hint(
                "rename the task; recipe step names are reserved on hosts that run them",
            ),
            None => d.at(second.location.clone()),
        }
    }

    /// Every name a reference may use: recipe steps and user tasks.
    fn known(&self, name: &str) -> bool {
        self.set.step_names.contains(name) || self.plan.file.tasks.iter().any(|t| t.name == name)
    }

    fn suggest(&self, name: &str) -> Option<String> {
        let users = self.plan.file.tasks.iter().map(|t| t.name.as_str());
        did_you_mean(
            name,
            self.set.step_names.iter().map(String::as_str).chain(users),
        )
        .map(|s| format!("did you mean `{s}`?"))
    }

    fn resolve(mut self, first_cp: Option<usize>) -> Result<Vec<Task>, Diagnostics> {
        let plan = self.plan;
        let host_index: HashMap<&str, usize> = plan
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| (h.name.as_str(), i))
            .collect();
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, p) in self.pending.iter().enumerate() {
            by_name.entry(p.task.id.name.as_str()).or_default().push(i);
        }
        let by_name: HashMap<String, Vec<usize>> = by_name
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let mut edges: Vec<Vec<(RefKind, usize, Option<String>)>> =
            Vec::with_capacity(self.pending.len());
        let mut errors: Vec<Diagnostic> = Vec::new();
        for (me, p) in self.pending.iter().enumerate() {
            let mut out = Vec::new();
            for pr in &p.refs {
                let r = &pr.r;
                let input = matches!(pr.kind, RefKind::Input(_));
                let on_host = |h: usize| self.by_host[h].get(&r.name).copied();
                let targets: Result<Vec<usize>, String> = match &r.scope {
                    Scope::SameHost => match on_host(p.host) {
                        Some(t) => Ok(vec![t]),
                        None if !self.known(&r.name) => Err(format!(
                            "`{r}` names `{}`, which no recipe step or task has",
                            r.name
                        )),
                        None if input => Err(format!(
                            "reads `{r}`, but `{}` does not run on host `{}`",
                            r.name,
                            self.host(p.host).name
                        )),
                        None => Ok(Vec::new()),
                    },
                    Scope::Host(h) => match host_index.get(h.as_str()) {
                        None => Err(format!(
                            "`{r}` names host `{h}`, which the plan does not have"
                        )),
                        Some(&hi) => on_host(hi).map(|t| vec![t]).ok_or_else(|| {
                            format!("`{r}`: `{}` does not run on host `{h}`", r.name)
                        }),
                    },
                    Scope::FirstControlPlane => match first_cp {
                        None => Err(format!("`{r}`: the plan has no control plane")),
                        Some(hi) => on_host(hi).map(|t| vec![t]).ok_or_else(|| {
                            format!(
                                "`{r}`: `{}` does not run on the first control plane `{}`",
                                r.name,
                                self.host(hi).name
                            )
                        }),
                    },
                    Scope::All => {
                        if self.known(&r.name) {
                            Ok(by_name
                                .get(&r.name)
                                .map(|v| v.iter().copied().filter(|&t| t != me).collect())
                                .unwrap_or_default())
                        } else {
                            Err(format!(
                                "`{r}` names `{}`, which no recipe step or task has",
                                r.name
                            ))
                        }
                    }
                };
                match targets {
                    Ok(ts) => {
                        out.extend(ts.into_iter().map(|t| (pr.kind.clone(), t, r.key.clone())))
                    }
                    Err(msg) => {
                        let code = if pr.site.is_user() {
                            "task-after"
                        } else {
                            "recipe-ref"
                        };
                        let mut d = pr.site.diag(plan, code, msg);
                        if !self.known(&r.name) {
                            if let Some(h) = self.suggest(&r.name) {
                                d = d.with_hint(h);
                            }
                        }
                        errors.push(d);
                    }
                }
            }
            edges.push(out);
        }
        for d in errors {
            self.report(d);
        }
        if self.diags.has_errors() {
            return Err(self.diags);
        }
        let ids: Vec<TaskId> = self.pending.iter().map(|p| p.task.id.clone()).collect();
        let tasks = self
            .pending
            .into_iter()
            .zip(edges)
            .map(|(p, out)| {
                let mut t = p.task;
                for (kind, target, key) in out {
                    let id = ids[target].clone();
                    match kind {
                        RefKind::After => push_unique(&mut t.after, id),
                        RefKind::Trigger => push_unique(&mut t.triggered_by, id),
                        RefKind::Input(name) => {
                            let key = key.unwrap_or_else(|| name.clone());
                            t.inputs.insert(name, InputRef { from: id, key });
                        }
                    }
                }
                t
            })
            .collect();
        Ok(tasks)
    }
}

fn push_unique(v: &mut Vec<TaskId>, id: TaskId) {
    if !v.contains(&id) {
        v.push(id);
    }
}

/// `slot`'s value if the template is host-independent and was rendered before; else render
/// (and remember, when host-independent).
fn cached<T: Clone>(slot: &mut Option<T>, per_host: bool, render: impl FnOnce() -> T) -> T {
    if per_host {
        return render();
    }
    if let Some(v) = slot {
        return v.clone();
    }
    let v = render();
    *slot = Some(v.clone());
    v
}

fn user_template_diag(
    plan: &LoadedPlan,
    i: usize,
    name: &str,
    e: &TreeError,
    host: Option<&str>,
) -> Diagnostic {
    let path = format!("tasks[{i}].params.{}", e.path);
    let mut loc: Option<Location> = plan.loc(&path);
    if let (Some(l), Some(line)) = (loc.as_mut(), e.error.line) {
        if line > 1 {
            // A multi-line string: its first line follows the opening `"""`.
            l.line += line;
            l.col = 1;
        }
    }
    let on = host.map(|h| format!(" (host `{h}`)")).unwrap_or_default();
    Diagnostic::error(
        "template",
        format!("task `{name}`: params.{}: {}{on}", e.path, e.error.message),
    )
    .at(loc)
}

/// Whether `sel` picks host `h` (an empty selector picks every host).
pub fn selects(sel: &Selector, h: &ResolvedHost) -> bool {
    (sel.hosts.is_empty() || sel.hosts.iter().any(|n| n == &h.name))
        && (sel.roles.is_empty() || h.role.is_some_and(|r| sel.roles.contains(&r)))
        && sel.os.is_none_or(|os| os == h.os)
}
