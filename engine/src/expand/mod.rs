//! Expansion: recipes and the user's `[[tasks]]` → task instances per host.
//!
//! Flow of [`expand`]:
//!
//! 1. [`RecipeContext::new`]: the template context, [`Effective`] serialized (the pipeline
//!    decides the effective values once and hands them in: [`expand_effective`]).
//! 2. Without `[cluster]` only the user's tasks expand. With it, [`RecipeSet::parse`] reads the
//!    recipes (format: `recipe.rs`, plans/README.md) and every template is compiled once.
//!    Libraries among the sources (script files, [`recipe::libraries`]) are template globals:
//!    `{{ lib.hns }}` inserts `plans/lib/hns.ps1` as it is. Template files
//!    (`plans/<recipe>/<name>.<ext>.j2`) are templates of the environment, named by their path
//!    under `plans/`, for `{% include %}` and `{% import %}` ([`render_file`] renders one on
//!    its own, for tests that read it whole).
//! 3. Per host, in plan order: each recipe whose `applies` matches (roles, os,
//!    `first_control_plane`, `when`) contributes its steps whose `when` holds, params rendered
//!    with the host's context. Recipe order becomes `Task::order`. Templates that do not read
//!    `host` are rendered once and reused, so 1,000 hosts cost 1,000 cheap clones.
//! 4. User tasks expand onto the hosts their `on` selector picks; their params are templates too.
//! 5. References (`after`, `inputs`; syntax in `refs.rs`) resolve to task ids.
//! 6. `serial` recipes: the hosts each applies to, in plan order, are cut into batches
//!    ([`serial_batches`]); the first task of the recipe on each host of a batch gets the last
//!    tasks of the previous batch in `Task::serial` (the graph's `add-serial-edges`).
//!
//! A step with `delegate = "first_control_plane"` becomes the task `cp1/<step>@<host>`: it
//! runs on the first control plane, is rendered with `<host>`'s context and takes its place in
//! `<host>`'s step order (recipe order edges cross hosts there). `<host>`'s own references
//! name it as `<step>`, `@all:<step>` includes it, and any task may name it as
//! `cp1:<step>@<host>`. A step's guard (`if_exists` / `unless_exists`) is copied to
//! `Task::guard`.
//!
//! Reference rules: a recipe step's same-host reference, and any `@all` reference, to a name
//! that some recipe step or user task has, but that does not run on this host, is dropped
//! (e.g. a step skipped by `when`); a plan task's same-host reference to it is an error
//! (`task-after`, naming where it runs and the reference that waits for it there); a name
//! nobody has is an error. A reference to a named host or `@first_control_plane` must find the
//! task there. An input must always find its producer.
//!
//! Every problem is a diagnostic pointing at the plan line (`tasks[i].after[j]`) or the recipe
//! file, step and template line; all are reported at once. Work is linear in hosts × steps plus
//! references.

pub mod context;
pub mod recipe;
/// The reference grammar lives in the plan layer (`plan::refs`), shared with validation.
pub use crate::plan::refs;

pub use context::RecipeContext;
pub use recipe::RecipeSet;

use crate::checksums::Checksums;
use crate::diag::{did_you_mean, Diagnostic, Diagnostics, Location};
use crate::plan::effective::Effective;
use crate::plan::{kubeadm, LoadedPlan, ResolvedHost, Selector};
use crate::task::{Guard, InputRef, Origin, Task, TaskId};
use crate::template::{self, TemplateError, Tree, TreeError, Value};
use minijinja::value::ViaDeserialize;
use recipe::CompiledSerial;
use recipe::{template_diag, CompiledRecipe, Recipe, RefKind, StepRefs};
use refs::{Scope, Use};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Every task of `plan`. `recipes` are (file name, text) pairs.
pub fn expand(plan: &LoadedPlan, recipes: &[(&str, &str)]) -> Result<Vec<Task>, Diagnostics> {
    let sums = Checksums::new(plan.file.artifacts.sha256.clone(), Default::default());
    expand_with(plan, recipes, &sums)
}

/// [`expand`] with the checksums known so far (the plan's pins and the record of fetched ones);
/// what `sha256_of` asked for in vain is in [`Checksums::wanted`] afterwards.
pub fn expand_with(
    plan: &LoadedPlan,
    recipes: &[(&str, &str)],
    sums: &Checksums,
) -> Result<Vec<Task>, Diagnostics> {
    expand_effective(plan, &Effective::build(plan)?, recipes, sums)
}

/// [`expand_with`] on the plan's effective values as the pipeline decided them once
/// (`pipeline::prepare`, with the command line's say in them: `--no-verify`).
pub fn expand_effective(
    plan: &LoadedPlan,
    eff: &Effective,
    recipes: &[(&str, &str)],
    sums: &Checksums,
) -> Result<Vec<Task>, Diagnostics> {
    let _bytes = crate::template::budget::Expansion::begin();
    let ctx = RecipeContext::new(eff);
    let set = if ctx.has_cluster {
        RecipeSet::parse(recipes)?
    } else {
        RecipeSet::default()
    };
    let env = environment(recipes, sums, &ctx)?;
    let mut diags = Diagnostics::default();
    let compiled: Vec<CompiledRecipe> = set
        .recipes
        .iter()
        .map(|r| CompiledRecipe::compile(&env, r, &mut diags))
        .collect();
    let mut steps: Vec<&str> = set.step_names.iter().map(String::as_str).collect();
    steps.sort_unstable();
    let mut user = Vec::with_capacity(plan.file.tasks.len());
    for (i, ut) in plan.file.tasks.iter().enumerate() {
        let mut errors = Vec::new();
        let items = ut
            .params
            .iter()
            .map(|(k, v)| (k.clone(), Tree::compile(&env, v, k, &mut errors)))
            .collect();
        for e in errors {
            diags.push(user_template_diag(plan, i, &ut.name, &e, None));
        }
        let mut refs = StepRefs::default();
        // The same grammar and plan-level checks as validation (`plan::refs`).
        let checked = |written: &str, usage: Use<'_>| {
            refs::parse(written, matches!(usage, Use::Input(_)))
                .map_err(|msg| refs::Problem {
                    message: format!("task `{}`: {msg}", ut.name),
                    hint: None,
                })
                .and_then(|r| refs::check_user_ref(plan, i, written, &r, usage, &steps).map(|()| r))
        };
        let diag = |make: fn(String) -> Diagnostic, path: &str, p: refs::Problem| {
            let d = make(p.message).at(plan.loc(path));
            match p.hint {
                Some(h) => d.with_hint(h),
                None => d,
            }
        };
        for (j, a) in ut.after.iter().enumerate() {
            let path = format!("tasks[{i}].after[{j}]");
            match checked(a, Use::After) {
                Ok(r) => refs.after.push((r, path)),
                Err(p) => diags.push(diag(|m| Diagnostic::error("task-after", m), &path, p)),
            }
        }
        for (name, a) in &ut.inputs {
            let path = format!("tasks[{i}].inputs.{name}");
            match checked(a, Use::Input(name)) {
                Ok(r) => refs.inputs.push((name.clone(), r, path)),
                Err(p) => diags.push(diag(|m| Diagnostic::error("task-inputs", m), &path, p)),
            }
        }
        user.push((Tree::Object(items), refs));
    }
    if diags.has_errors() {
        return Err(diags);
    }

    let requires = requires_indices(&set);
    let mut x = Expander::new(plan, &set, sums);
    let mut cache = RenderCache::new(&compiled);
    let contexts: Vec<Value> = (0..plan.hosts.len()).map(|i| ctx.for_host(i)).collect();
    x.serial = compiled.iter().map(|_| SerialSpans::default()).collect();
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
    x.serial_edges();
    for (i, (tree, refs)) in user.iter().enumerate() {
        x.user_task(i, tree, refs, &contexts);
    }
    x.resolve(ctx.first_control_plane)
}

/// The template environment of `recipes` for a plan whose context is `ctx`: the libraries,
/// the template files, and the functions (`sha256_of`, `openpgp_of`, `sha256_pin`, `flag`,
/// `flag_supported`, `kubeadm_init_config`).
fn environment<'src>(
    recipes: &[(&'src str, &'src str)],
    sums: &Checksums,
    ctx: &RecipeContext,
) -> Result<minijinja::Environment<'src>, Diagnostics> {
    let mut env = template::environment();
    // `lib.<name>`: a library's text (`plans/lib/<name>.ps1`), inserted as it is.
    env.add_global("lib", Value::from_serialize(recipe::libraries(recipes)?));
    // Template files (`plans/<recipe>/<file>.j2`): what `{% include %}` and `{% import %}`
    // name, by their path under `plans/`.
    let mut file_diags = Diagnostics::default();
    for (file, text) in recipes
        .iter()
        .filter(|(f, _)| recipe::source_kind(f) == recipe::SourceKind::Template)
    {
        if let Err(e) = env.add_template(recipe::template_name(file), text) {
            file_diags.push(
                Diagnostic::error("template", format!("template file {file}: {e}")).at(Some(
                    Location {
                        file: file.into(),
                        line: e.line().unwrap_or(1),
                        col: 1,
                    },
                )),
            );
        }
    }
    if file_diags.has_errors() {
        return Err(file_diags);
    }
    // `sha256_of('file-name', 'checksum-file-url', url='artifact-url', sha512='sha512-url')`:
    // the artifact's checksum — the plan's pin, kwin's digest of that URL, one recorded from
    // the upstream's checksum file or computed from the artifact (checked against its SHA-512
    // file) — or none (see crate::checksums).
    // `openpgp_of('key-file-name', 'key-url')`: a signing key's fingerprint, the plan's or kwin's.
    // `sha256_pin('file-name')`: the plan's pin or none, for optional checksums.
    let s = sums.clone();
    env.add_function(
        "sha256_of",
        move |file: &str, sums_url: Option<&str>, kwargs: minijinja::value::Kwargs| {
            let url: Option<&str> = kwargs.get("url")?;
            let sha512: Option<&str> = kwargs.get("sha512")?;
            kwargs.assert_all_used()?;
            Ok::<_, minijinja::Error>(s.lookup(file, sums_url, url, sha512))
        },
    );
    let s = sums.clone();
    env.add_function("openpgp_of", move |file: &str, url: &str| {
        s.fingerprint(file, url)
    });
    let s = sums.clone();
    env.add_function("sha256_pin", move |file: &str| s.pin(file));
    // `flag(component, '--name', value)` / `flag_supported(component, '--name')`: flags
    // checked against the per-version flag table (plan/versions.toml).
    context::add_flag_functions(&mut env, ctx.component_versions.clone());
    // `kubeadm_init_config(host, cluster)`: kubeadm's init configuration, rendered by its one
    // owner (`plan::kubeadm`), which the `kubeadm_join` module uses too.
    env.add_function(
        "kubeadm_init_config",
        |host: ViaDeserialize<kubeadm::HostArg>, cluster: ViaDeserialize<kubeadm::ClusterArg>| {
            kubeadm::init_config_of(host.0, cluster.0)
                .map_err(|e| minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, e))
        },
    );
    Ok(env)
}

/// The template file `name` (`cni-flannel/windows.yaml.j2`) of `recipes`, rendered with the
/// context of the plan's host `host` (index in `plan.hosts`): for tests that read a file
/// whole (a YAML parser, the PowerShell 5.1 profile) in the context a recipe gives it.
pub fn render_file(
    plan: &LoadedPlan,
    recipes: &[(&str, &str)],
    sums: &Checksums,
    name: &str,
    host: usize,
) -> Result<String, Diagnostics> {
    let ctx = RecipeContext::from_plan(plan)?;
    let env = environment(recipes, sums, &ctx)?;
    let fail = |msg: String| {
        let mut d = Diagnostics::default();
        d.push(Diagnostic::error(
            "template",
            format!("template file {name}: {msg}"),
        ));
        d
    };
    let t = env.get_template(name).map_err(|e| fail(e.to_string()))?;
    t.render(ctx.for_host(host)).map_err(|e| {
        let mut msg = e.to_string();
        let mut src = std::error::Error::source(&e);
        while let Some(inner) = src {
            msg.push_str(&format!(": {inner}"));
            src = inner.source();
        }
        fail(msg)
    })
}

/// The hosts of a `serial` recipe, in plan order, cut into batches of `size` (at least one
/// host each; a size of 0 counts as 1). The recipe's first step on every host of batch n
/// follows its last step on every host of batch n − 1. Shared by expansion and by whatever
/// shows the order an upgrade will take, so the two cannot disagree.
pub fn serial_batches<T>(hosts: &[T], size: usize) -> Vec<&[T]> {
    hosts.chunks(size.max(1)).collect()
}

/// What expansion saw of one `serial` recipe: its batch size (rendered on the first host it
/// applies to) and, per host it applies to in plan order, the indices (in `pending`) of its
/// first and last task there (none: every step skipped by `when`).
#[derive(Debug, Default)]
struct SerialSpans {
    size: Option<usize>,
    hosts: Vec<Option<(usize, usize)>>,
}

/// For each recipe (in set order), the indices of the recipes it requires.
fn requires_indices(set: &RecipeSet) -> Vec<Vec<usize>> {
    let by_name: HashMap<&str, usize> = set
        .recipes
        .iter()
        .enumerate()
        .map(|(i, r)| (r.name(), i))
        .collect();
    set.recipes
        .iter()
        .map(|r| {
            r.def
                .requires
                .iter()
                .filter_map(|q| by_name.get(q.as_str()).copied())
                .collect()
        })
        .collect()
}

/// Who wrote a task's references, for diagnostics.
#[derive(Debug, Clone, Copy)]
enum Author<'a> {
    Recipe { recipe: &'a Recipe, step: &'a str },
    User { name: &'a str },
}

impl Author<'_> {
    fn diag(&self, plan: &LoadedPlan, path: &str, msg: String) -> Diagnostic {
        match self {
            Author::Recipe { recipe, step } => Diagnostic::error(
                "recipe-ref",
                format!("recipe `{}` step `{step}`: {msg}", recipe.name()),
            )
            .at(recipe.loc(path)),
            Author::User { name } => {
                Diagnostic::error("task-after", format!("task `{name}`: {msg}")).at(plan.loc(path))
            }
        }
    }
}

#[derive(Debug)]
struct Pending<'a> {
    task: Task,
    /// The host the task belongs to (for a delegated step, not the one it runs on).
    host: usize,
    /// Its name on that host: the step name, also for a delegated step.
    name: String,
    author: Author<'a>,
    refs: &'a StepRefs,
}

type Cached<T> = Option<Result<T, TemplateError>>;

/// Rendered params, shared by every host's task when the template does not read `host`.
type Rendered = Result<Arc<serde_json::Value>, TreeError>;

/// Renders of templates that do not read `host`, shared by every host.
struct RenderCache {
    recipe_when: Vec<Cached<bool>>,
    step_when: Vec<Vec<Cached<bool>>>,
    params: Vec<Vec<Option<Rendered>>>,
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

/// Indexes references resolve against.
struct Lookup<'n> {
    /// Task name → every task (index in `pending`) of that name.
    by_name: HashMap<&'n str, Vec<usize>>,
    host_index: HashMap<&'n str, usize>,
    first_cp: Option<usize>,
}

struct Expander<'a> {
    plan: &'a LoadedPlan,
    set: &'a RecipeSet,
    /// Told whose params are rendered, so a checksum nobody knows names who needs it.
    sums: &'a Checksums,
    pending: Vec<Pending<'a>>,
    /// Per host: task name → index in `pending`.
    by_host: Vec<HashMap<String, usize>>,
    diags: Diagnostics,
    seen: HashSet<String>,
    /// Per recipe (set order): what `serial` needs (empty for recipes without it).
    serial: Vec<SerialSpans>,
}

impl<'a> Expander<'a> {
    fn new(plan: &'a LoadedPlan, set: &'a RecipeSet, sums: &'a Checksums) -> Self {
        Expander {
            plan,
            set,
            sums,
            pending: Vec::new(),
            by_host: vec![HashMap::new(); plan.hosts.len()],
            diags: Diagnostics::default(),
            seen: HashSet::new(),
            serial: Vec::new(),
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

    /// A condition's value; a template error is reported (once) and counts as false.
    fn condition(
        &mut self,
        res: Result<bool, TemplateError>,
        diag: impl FnOnce(&TemplateError) -> Diagnostic,
    ) -> bool {
        res.unwrap_or_else(|e| {
            self.report(diag(&e));
            false
        })
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
        let on_host = |reads_host: bool| reads_host.then_some(host.name.as_str());
        // Per recipe: its last step on this host as (recipe, step) indices (or, if it does not
        // run here, the tails of what it requires), and every tail those already follow (so
        // no redundant edges are added).
        let mut tails: Vec<Vec<(usize, usize)>> = vec![Vec::new(); compiled.len()];
        // The id of each (recipe, step) that became a task here (a delegated step's runs
        // elsewhere).
        let mut ids: HashMap<(usize, usize), TaskId> = HashMap::new();
        let mut covered: Vec<HashSet<(usize, usize)>> = vec![HashSet::new(); compiled.len()];
        for (ri, cr) in compiled.iter().enumerate() {
            let r = cr.recipe;
            let mut preds: Vec<(usize, usize)> = Vec::new();
            let mut below: HashSet<(usize, usize)> = HashSet::new();
            for &q in &requires[ri] {
                below.extend(covered[q].iter().copied());
                for t in &tails[q] {
                    if !preds.contains(t) {
                        preds.push(*t);
                    }
                }
            }
            preds.retain(|t| !below.contains(t));

            let a = &r.def.applies;
            let mut applies = (a.roles.is_empty()
                || host.role.is_some_and(|x| a.roles.contains(&x)))
                && a.os.is_none_or(|os| os == host.os)
                && (!a.first_control_plane || first_cp == Some(hi));
            if let (true, Some(w)) = (applies, &cr.when) {
                let res = cached(&mut cache.recipe_when[ri], w.reads("host"), || {
                    w.render_bool(cx)
                });
                applies = self.condition(res, |e| {
                    template_diag(
                        r,
                        None,
                        "applies.when",
                        "applies.when",
                        e,
                        on_host(w.reads("host")),
                    )
                });
            }
            if !applies {
                tails[ri] = preds;
                covered[ri] = below;
                continue;
            }
            if let Some(serial) = &cr.serial {
                if self.serial[ri].size.is_none() {
                    let size = match serial {
                        CompiledSerial::Size(n) => Ok(*n),
                        CompiledSerial::Template(t) => self.serial_size(r, t, cx),
                    };
                    match size {
                        Ok(n) => self.serial[ri].size = Some(n),
                        Err(d) => {
                            self.serial[ri].size = Some(1);
                            self.report(d);
                        }
                    }
                }
            }
            let mut span: Option<(usize, usize)> = None;
            for (ai, (that, message)) in cr.asserts.iter().enumerate() {
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
                        let path = format!("asserts[{ai}].that");
                        let d =
                            template_diag(r, None, &path, &path, &e, on_host(that.reads("host")));
                        self.report(d);
                    }
                }
            }
            let mut prev = preds.clone();
            for st in &cr.steps {
                if let Some(w) = &st.when {
                    let res = cached(&mut cache.step_when[ri][st.index], w.reads("host"), || {
                        w.render_bool(cx)
                    });
                    let on = self.condition(res, |e| {
                        let path = format!("steps[{}].when", st.index);
                        template_diag(
                            r,
                            Some(&st.def.name),
                            &path,
                            "when",
                            e,
                            on_host(w.reads("host")),
                        )
                    });
                    if !on {
                        continue;
                    }
                }
                let reads_host = st.params.reads("host");
                let origin = Origin::Recipe {
                    recipe: r.name().to_string(),
                    step: st.def.name.clone(),
                };
                let sums = self.sums;
                let params = match cached(&mut cache.params[ri][st.index], reads_host, || {
                    sums.asking(Some(origin.clone()));
                    let p = st.params.render(cx).map(Arc::new);
                    sums.asking(None);
                    p
                }) {
                    Ok(p) => p,
                    Err(e) => {
                        self.report(template_diag(
                            r,
                            Some(&st.def.name),
                            &format!("steps[{}].params.{}", st.index, e.path),
                            &format!("params.{}", e.path),
                            &e.error,
                            on_host(reads_host),
                        ));
                        continue;
                    }
                };
                let (id, runs_on) = match (&st.def.delegate, first_cp) {
                    (None, _) => (TaskId::new(&host.name, &st.def.name), hi),
                    (Some(_), Some(cp)) => (
                        TaskId::new(
                            &self.host(cp).name,
                            refs::delegated_name(&st.def.name, &host.name),
                        ),
                        cp,
                    ),
                    (Some(_), None) => {
                        self.report(
                            Diagnostic::error(
                                "recipe-step",
                                format!(
                                    "recipe `{}` step `{}` is delegated to the first control plane, but the plan has none (host `{}`)",
                                    r.name(),
                                    st.def.name,
                                    host.name
                                ),
                            )
                            .at(st.location.clone()),
                        );
                        continue;
                    }
                };
                let mut task = Task::new(id.clone(), &st.def.module, params).with_origin(origin);
                task.location = st.location.clone();
                task.sensitive = st.def.sensitive;
                task.acts_for_chosen = st.def.acts_for_chosen;
                if st.def.delegate.is_some() {
                    task.on_behalf_of = Some(host.name.clone());
                }
                task.guard = match (&st.def.if_exists, &st.def.unless_exists) {
                    (Some(p), _) => Some(Guard {
                        path: p.clone(),
                        exists: true,
                    }),
                    (None, Some(p)) => Some(Guard {
                        path: p.clone(),
                        exists: false,
                    }),
                    (None, None) => None,
                };
                task.order = prev
                    .iter()
                    .map(|&(pr, ps)| {
                        ids.get(&(pr, ps)).cloned().unwrap_or_else(|| {
                            TaskId::new(&host.name, &compiled[pr].steps[ps].def.name)
                        })
                    })
                    .collect();
                ids.insert((ri, st.index), id);
                prev = vec![(ri, st.index)];
                let author = Author::Recipe {
                    recipe: r,
                    step: &st.def.name,
                };
                if let Some(at) = self.add(hi, runs_on, task, author, &st.refs, None) {
                    span = Some(span.map_or((at, at), |(first, _)| (first, at)));
                }
            }
            if cr.serial.is_some() {
                self.serial[ri].hosts.push(span);
            }
            if prev != preds {
                below.extend(preds);
            }
            tails[ri] = prev;
            covered[ri] = below;
        }
    }

    fn user_task(&mut self, i: usize, tree: &Tree, refs: &'a StepRefs, contexts: &[Value]) {
        let plan = self.plan;
        let ut = &plan.file.tasks[i];
        let reads_host = tree.reads("host");
        let mut shared: Option<Rendered> = None;
        let location = plan.loc(&format!("tasks[{i}]"));
        for (hi, h) in plan.hosts.iter().enumerate() {
            if !ut.on.matches(h) {
                continue;
            }
            let sums = self.sums;
            let params = match cached(&mut shared, reads_host, || {
                sums.asking(Some(Origin::User { index: i }));
                let p = tree.render(&contexts[hi]).map(Arc::new);
                sums.asking(None);
                p
            }) {
                Ok(p) => p,
                Err(e) => {
                    let on = reads_host.then_some(h.name.as_str());
                    let d = user_template_diag(plan, i, &ut.name, &e, on);
                    self.report(d);
                    continue;
                }
            };
            let mut task = Task::new(TaskId::new(&h.name, &ut.name), &ut.module, params)
                .with_origin(Origin::User { index: i });
            task.location = location.clone();
            task.sensitive = ut.sensitive;
            self.add(hi, hi, task, Author::User { name: &ut.name }, refs, Some(i));
        }
    }

    /// Add `task`, which belongs to host `hi` and runs on `runs_on` (another host for a
    /// delegated step). `Some(index in pending)`, or `None` when the name clashes.
    fn add(
        &mut self,
        hi: usize,
        runs_on: usize,
        task: Task,
        author: Author<'a>,
        refs: &'a StepRefs,
        user: Option<usize>,
    ) -> Option<usize> {
        let name = match &author {
            Author::Recipe { step, .. } => step.to_string(),
            Author::User { .. } => task.id.name.clone(),
        };
        if let Some(&other) = self.by_host[hi].get(&name) {
            let d = self.clash(&self.pending[other].task, &task, user);
            self.report(d);
            return None;
        }
        let at = self.pending.len();
        self.by_host[hi].insert(name.clone(), at);
        if task.id.name != name {
            // A delegated step: `cp1:<step>@<host>` finds it where it runs.
            self.by_host[runs_on].insert(task.id.name.clone(), at);
        }
        self.pending.push(Pending {
            task,
            host: hi,
            name,
            author,
            refs,
        });
        Some(at)
    }

    /// The batch size a `serial` template gives on a host (`cx`): a whole number ≥ 1.
    fn serial_size(
        &self,
        r: &Recipe,
        t: &template::Snippet<'_, '_>,
        cx: &Value,
    ) -> Result<usize, Diagnostic> {
        let bad = |what: String| {
            Diagnostic::error(
                "recipe-serial",
                format!("recipe `{}`: `serial` {what}: batches need a whole number of hosts, at least 1", r.name()),
            )
            .at(r.loc("serial"))
        };
        match t.render_json(cx) {
            Err(e) => Err(template_diag(r, None, "serial", "serial", &e, None)),
            Ok(v) => match v
                .as_u64()
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
            {
                Some(n) if n >= 1 => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
                _ => Err(bad(format!("is {v}"))),
            },
        }
    }

    /// `Task::serial` of every `serial` recipe's first task on each host of a batch: the last
    /// tasks of the nearest earlier batch that has any.
    fn serial_edges(&mut self) {
        let mut add: Vec<(usize, Vec<TaskId>)> = Vec::new();
        for spans in &self.serial {
            let Some(size) = spans.size else { continue };
            let mut before: Vec<TaskId> = Vec::new();
            for batch in serial_batches(&spans.hosts, size) {
                let mut last = Vec::new();
                for &(first, end) in batch.iter().flatten() {
                    if !before.is_empty() {
                        add.push((first, before.clone()));
                    }
                    last.push(self.pending[end].task.id.clone());
                }
                if !last.is_empty() {
                    before = last;
                }
            }
        }
        for (at, ids) in add {
            self.pending[at].task.serial.extend(ids);
        }
    }

    fn clash(&self, first: &Task, second: &Task, user: Option<usize>) -> Diagnostic {
        let what = |t: &Task| match &t.origin {
            Origin::Recipe { recipe, step } => format!("step `{step}` of recipe `{recipe}`"),
            Origin::User { index } => format!("the plan's tasks[{index}]"),
        };
        let d = Diagnostic::error(
            "task-duplicate",
            format!(
                "task `{}` is defined twice: by {} and by {}",
                second.id,
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

    /// Every name a reference may use: recipe steps and user tasks (`step@host`: a
    /// delegated recipe step).
    fn known(&self, name: &str) -> bool {
        if let Some((step, _)) = name.split_once('@') {
            return self.set.step_names.contains(step);
        }
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

    /// The tasks reference `r` (written by `p`, task index `me`) points to.
    fn targets(
        &self,
        me: usize,
        p: &Pending<'a>,
        kind: RefKind<'_>,
        r: &refs::Ref,
        look: &Lookup<'_>,
    ) -> Result<Vec<usize>, String> {
        let what = match kind {
            RefKind::After => format!("after `{r}`"),
            RefKind::Input(name) => format!("input `{name}` (`{r}`)"),
        };
        let on = |h: usize| self.by_host[h].get(&r.name).copied();
        let absent = |h: usize| {
            format!(
                "{what}: `{}` does not run on host `{}`",
                r.name,
                self.host(h).name
            )
        };
        let unknown = || format!("{what}: no recipe step or task is named `{}`", r.name);
        match &r.scope {
            Scope::SameHost => match on(p.host) {
                Some(t) => Ok(vec![t]),
                None if !self.known(&r.name) => Err(unknown()),
                None if matches!(kind, RefKind::Input(_)) => Err(absent(p.host)),
                // A plan task waits for what it names on every host it runs on: dropping the
                // wait where the step does not run would let it start before anything it
                // needs (recipes' own steps skip a step another `when` left out).
                None if matches!(p.author, Author::User { .. }) => {
                    Err(self.absent_for_user(&what, r, look))
                }
                None => Ok(Vec::new()),
            },
            Scope::Host(h) => match look.host_index.get(h.as_str()) {
                None => Err(format!("{what}: the plan has no host `{h}`")),
                Some(&hi) => on(hi).map(|t| vec![t]).ok_or_else(|| absent(hi)),
            },
            Scope::FirstControlPlane => match look.first_cp {
                None => Err(format!("{what}: the plan has no control plane")),
                Some(hi) => on(hi).map(|t| vec![t]).ok_or_else(|| absent(hi)),
            },
            Scope::All if self.known(&r.name) => Ok(look
                .by_name
                .get(r.name.as_str())
                .map(|v| v.iter().copied().filter(|&t| t != me).collect())
                .unwrap_or_default()),
            Scope::All => Err(unknown()),
        }
    }

    /// Why a plan task's same-host reference to `r` fails (on some host it runs on): where
    /// the step does run, and the references that would name it there. The same text on
    /// every such host, so it is reported once.
    fn absent_for_user(&self, what: &str, r: &refs::Ref, look: &Lookup<'_>) -> String {
        let mut hosts: Vec<&str> = look
            .by_name
            .get(r.name.as_str())
            .map(|v| {
                v.iter()
                    .map(|&t| self.host(self.pending[t].host).name.as_str())
                    .collect()
            })
            .unwrap_or_default();
        hosts.sort_unstable();
        hosts.dedup();
        let name = &r.name;
        let mut msg = format!(
            "{what}: `{name}` does not run on every host this task runs on, and a task waits for what its `after` names on each of them"
        );
        let first_cp = look.first_cp.map(|i| self.host(i).name.as_str());
        match hosts.as_slice() {
            [] => msg.push_str(&format!(" (`{name}` runs on no host of this plan)")),
            [one] if Some(*one) == first_cp => msg.push_str(&format!(
                "; it runs on `{one}` only: write \"@first_control_plane:{name}\" to wait for it there, or narrow the task's hosts with `on`"
            )),
            [one] => msg.push_str(&format!(
                "; it runs on `{one}` only: write \"{one}:{name}\" to wait for it there, or narrow the task's hosts with `on`"
            )),
            many => msg.push_str(&format!(
                "; it runs on {}: write \"@all:{name}\" to wait for it wherever it runs, or narrow the task's hosts with `on`",
                many.iter().map(|h| format!("`{h}`")).collect::<Vec<_>>().join(", ")
            )),
        }
        msg
    }

    fn resolve(mut self, first_cp: Option<usize>) -> Result<Vec<Task>, Diagnostics> {
        let plan = self.plan;
        let host_index: HashMap<&str, usize> = plan
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| (h.name.as_str(), i))
            .collect();
        let names: Vec<String> = self.pending.iter().map(|p| p.name.clone()).collect();
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, n) in names.iter().enumerate() {
            by_name.entry(n.as_str()).or_default().push(i);
        }
        let look = Lookup {
            by_name,
            host_index,
            first_cp,
        };
        // (kind, target task, output key) per task.
        type Edge<'k> = (RefKind<'k>, usize, Option<&'k str>);
        let mut edges: Vec<Vec<Edge<'a>>> = Vec::with_capacity(self.pending.len());
        let mut errors: Vec<Diagnostic> = Vec::new();
        for (me, p) in self.pending.iter().enumerate() {
            let mut out: Vec<Edge<'a>> = Vec::new();
            let refs: &'a StepRefs = p.refs;
            for (kind, r, path) in refs.iter() {
                match self.targets(me, p, kind, r, &look) {
                    Ok(ts) => out.extend(ts.into_iter().map(|t| (kind, t, r.key.as_deref()))),
                    Err(msg) => {
                        let mut d = p.author.diag(plan, path, msg);
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
                let mut seen: HashSet<usize> = HashSet::new();
                for (kind, target, key) in out {
                    let id = ids[target].clone();
                    match kind {
                        RefKind::After => {
                            if seen.insert(target) {
                                t.after.push(id);
                            }
                        }
                        RefKind::Input(name) => {
                            let key = key.unwrap_or(name).to_string();
                            t.inputs
                                .insert(name.to_string(), InputRef { from: id, key });
                        }
                    }
                }
                t
            })
            .collect();
        Ok(tasks)
    }
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

/// Whether `sel` picks host `h`: [`Selector::matches`].
pub fn selects(sel: &Selector, h: &ResolvedHost) -> bool {
    sel.matches(h)
}

#[cfg(test)]
mod tests;
