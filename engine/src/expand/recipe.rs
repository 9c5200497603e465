//! Recipes: the format of `plans/*.toml`, parsing, static checks and compilation.
//!
//! ```toml
//! recipe = "control-plane"                       # unique name
//! description = "kubeadm init on the first control plane"
//! applies = { roles = ["control-plane"], os = "linux", when = "{{ ... }}" }
//! requires = ["kube-packages"]    # recipes whose steps come first on the same host
//!
//! [[asserts]]                     # checked on every host the recipe applies to
//! that = "{{ runtime.windows == 'containerd' }}"
//! message = "Windows workers need runtime.windows = \"containerd\""
//!
//! [[steps]]
//! name = "kubeadm-init"           # task id: <host>/<name>
//! module = "kubeadm_init"
//! when = "{{ host.is_first_control_plane }}"   # optional; true/false
//! after = ["@first_control_plane:cni-ready"]   # optional; see refs.rs
//! inputs = { token = "@first_control_plane:join-data.token" }   # optional data edges
//! [steps.params]                  # module params; every string is a template
//! config = "/etc/kubernetes/kubeadm-config.yaml"
//! ```
//!
//! Upgrades need three more things, none of which knows Kubernetes:
//!
//! - `serial = 1` or `serial = "{{ upgrade.max_unavailable }}"` on a recipe: the hosts it
//!   applies to, in plan order, form batches of that size ([`super::serial_batches`]); the
//!   recipe's first step on every host of a batch follows its last step on every host of the
//!   batch before (graph transform `add-serial-edges`).
//! - `delegate = "first_control_plane"` on a step: the task runs on the first control plane
//!   (`cp1/<step>@<host>`) but belongs to the recipe's host (its template context and its place
//!   in that host's step order).
//! - `if_exists = "<path>"` / `unless_exists = "<path>"` on a step: a path read in the same
//!   probe; when the guard says no, the task is a no-op saying why (`module/guard.rs`).
//!
//! `applies` picks hosts: `roles` (any of; empty: any host), `os`, `first_control_plane = true`
//! (only the first control plane), `when` (a template rendered per host). Steps run in file
//! order; the first step of a recipe follows the last step of every recipe it `requires` that
//! runs on the same host.
//!
//! Besides recipes, the sources hold ([`source_kind`]): template files
//! (`plans/<recipe>/<name>.<ext>.j2`, what a step's template includes by its path under
//! `plans/`; `expand` registers them), the step library (`plans/lib/steps.toml`: steps
//! several recipes share; a step with `use = "<name>"` takes its module and params from it,
//! filled in by [`RecipeSet::parse`], and their locations point into the library) and
//! libraries (`plans/lib/<name>.ps1`, [`libraries`]).
//!
//! Static checks (before any host is looked at): unique recipe names, unique step names in a
//! recipe, known `requires` without cycles, well-formed references that name a step some recipe
//! defines, recipes never name plan hosts, `use` names a shared step and replaces `module` and
//! `params`.

use crate::diag::{did_you_mean, Diagnostic, Diagnostics, Location, SourceMap};
use crate::plan::refs::{self, Ref, Scope};
use crate::plan::spans::SpanIndex;
use crate::plan::{Os, Role};
use crate::template::{Snippet, TemplateError, Tree, TreeError};
use minijinja::Environment;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Applies {
    #[serde(default)]
    pub roles: Vec<Role>,
    pub os: Option<Os>,
    #[serde(default)]
    pub first_control_plane: bool,
    pub when: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssertDef {
    pub that: String,
    pub message: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepDef {
    pub name: String,
    /// The module; for a step with `use`, the shared step's (filled in by
    /// [`RecipeSet::parse`]).
    #[serde(default)]
    pub module: String,
    /// `use = "<name>"`: the step's module and params are the shared step `<name>` of the
    /// step library (`plans/lib/steps.toml`).
    #[serde(rename = "use")]
    pub uses: Option<String>,
    pub when: Option<String>,
    #[serde(default)]
    pub after: Vec<String>,
    #[serde(default)]
    pub inputs: BTreeMap<String, String>,
    #[serde(default)]
    pub params: toml::Table,
    /// Like a plan task's `sensitive`: content shows as hashes only.
    #[serde(default)]
    pub sensitive: bool,
    /// The step acts from its host for the hosts `--limit` chose (reads `host.chosen` of
    /// each): it runs, and may change its host, whenever one is chosen (`graph::scope`).
    #[serde(default)]
    pub acts_for_chosen: bool,
    /// `"first_control_plane"`: run the step there, on behalf of the recipe's host.
    pub delegate: Option<String>,
    /// The step does something only where this path exists.
    pub if_exists: Option<String>,
    /// The step does something only where this path does not exist.
    pub unless_exists: Option<String>,
}

/// The only value `delegate` takes.
pub const DELEGATE_FIRST_CONTROL_PLANE: &str = "first_control_plane";

/// A recipe's `serial`: a batch size, or a template that renders to one.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Serial {
    Size(i64),
    Template(String),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecipeDef {
    pub recipe: String,
    pub description: Option<String>,
    pub applies: Applies,
    #[serde(default)]
    pub requires: Vec<String>,
    /// Batches of this many hosts, one batch after the other.
    pub serial: Option<Serial>,
    #[serde(default)]
    pub asserts: Vec<AssertDef>,
    #[serde(default)]
    pub steps: Vec<StepDef>,
}

/// A TOML file of the recipe sources with what locates its values: a recipe or the step
/// library.
#[derive(Debug, Clone)]
pub struct TomlSource {
    text: String,
    source: SourceMap,
    spans: SpanIndex,
}

impl TomlSource {
    fn new(file: &str, text: &str) -> Result<TomlSource, Diagnostic> {
        let source = SourceMap::new(Path::new(file), text);
        let doc = toml::de::DeTable::parse(text).map_err(|e| {
            Diagnostic::error("recipe-syntax", e.message().trim().to_string())
                .at(source.span(e.span()))
        })?;
        let spans = SpanIndex::build(doc.get_ref());
        Ok(TomlSource {
            text: text.to_string(),
            source,
            spans,
        })
    }

    fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, Diagnostic> {
        toml::from_str(&self.text).map_err(|e| {
            Diagnostic::error("recipe-type", e.message().trim().to_string())
                .at(self.source.span(e.span()))
        })
    }

    fn loc(&self, path: &str) -> Option<Location> {
        self.source.span(self.spans.find(path))
    }

    fn loc_in_template(&self, path: &str, line: Option<usize>) -> Option<Location> {
        let span = self.spans.find(path)?;
        let mut loc = self.source.location(span.start);
        let Some(line) = line else { return Some(loc) };
        let rest = self.text.get(span.start..).unwrap_or("");
        let multi = rest.starts_with("\"\"\"") || rest.starts_with("'''");
        let trimmed_newline =
            multi && (rest[3..].starts_with('\n') || rest[3..].starts_with("\r\n"));
        let extra = line.saturating_sub(1) + usize::from(trimmed_newline);
        if extra > 0 {
            loc.line += extra;
            loc.col = 1;
        }
        Some(loc)
    }
}

/// One parsed recipe file.
#[derive(Debug, Clone)]
pub struct Recipe {
    pub def: RecipeDef,
    own: TomlSource,
    /// Per step index with `use`: the step library and the shared step's name, where its
    /// module and params are written.
    shared: HashMap<usize, (Arc<TomlSource>, String)>,
}

impl Recipe {
    pub fn name(&self) -> &str {
        &self.def.recipe
    }

    /// Where the value at `path` of the recipe is written: in the recipe, or for the params
    /// of a step with `use` in the step library.
    fn source_of(&self, path: &str) -> (&TomlSource, String) {
        for (j, (lib, name)) in &self.shared {
            let prefix = format!("steps[{j}].");
            if let Some(rest) = path.strip_prefix(&prefix) {
                if rest == "module" || rest == "params" || rest.starts_with("params.") {
                    return (lib, format!("{name}.{rest}"));
                }
            }
        }
        (&self.own, path.to_string())
    }

    /// Location of the value at `path` (e.g. `steps[2].after[0]`).
    pub fn loc(&self, path: &str) -> Option<Location> {
        let (src, path) = self.source_of(path);
        src.loc(&path)
    }

    /// Location of line `line` (1-based) inside the template string at `path`.
    pub fn loc_in_template(&self, path: &str, line: Option<usize>) -> Option<Location> {
        let (src, path) = self.source_of(path);
        src.loc_in_template(&path, line)
    }
}

/// What a file among the recipe sources is, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// `plans/<name>.toml`.
    Recipe,
    /// The step library, `plans/lib/steps.toml`: steps several recipes share (`use`).
    Steps,
    /// A template file, `plans/<recipe>/<name>.<ext>.j2`: a manifest or script a recipe's
    /// template includes (`{% include "<recipe>/<name>.<ext>.j2" %}`) or imports macros from.
    Template,
    /// A library, `plans/lib/<name>.ps1`: script text inserted as it is (`{{ lib.<name> }}`).
    Library,
}

/// The kind of the recipe source `file`.
pub fn source_kind(file: &str) -> SourceKind {
    let in_lib = Path::new(file)
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|d| d == "lib");
    if file.ends_with(".j2") {
        SourceKind::Template
    } else if !file.ends_with(".toml") {
        SourceKind::Library
    } else if in_lib {
        SourceKind::Steps
    } else {
        SourceKind::Recipe
    }
}

/// The name templates use for the template file `file`: its path under `plans/`
/// (`cni-flannel/windows.yaml.j2`).
pub fn template_name(file: &str) -> &str {
    file.strip_prefix("plans/").unwrap_or(file)
}

/// Every recipe, ordered so that each comes after the recipes it requires.
#[derive(Debug, Clone, Default)]
pub struct RecipeSet {
    pub recipes: Vec<Recipe>,
    /// Every step name any recipe defines.
    pub step_names: HashSet<String>,
}

/// Whether a source of the recipe list is something other than a recipe (a library, a
/// template file, the step library: [`source_kind`]).
pub fn is_library(file: &str) -> bool {
    source_kind(file) != SourceKind::Recipe
}

/// The libraries among `sources`, by name (the file name without directory and extension):
/// script text shared by several recipes, which their templates insert with
/// `{{ lib.<name> }}` as it is (never rendered as a template itself).
pub fn libraries(sources: &[(&str, &str)]) -> Result<BTreeMap<String, String>, Diagnostics> {
    let mut out = BTreeMap::new();
    let mut diags = Diagnostics::default();
    for (file, text) in sources
        .iter()
        .filter(|(f, _)| source_kind(f) == SourceKind::Library)
    {
        let name = Path::new(file)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        let plain = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !plain {
            diags.push(Diagnostic::error(
                "recipe-library",
                format!("library {file}: its name must be lower-case letters, digits and `_`"),
            ));
        } else if out.insert(name.clone(), text.to_string()).is_some() {
            diags.push(Diagnostic::error(
                "recipe-library",
                format!("library {file}: another library is named `{name}`"),
            ));
        }
    }
    if diags.has_errors() {
        return Err(diags);
    }
    Ok(out)
}

impl RecipeSet {
    /// Parse and check `sources` ((file name, text) pairs); libraries ([`is_library`]) are
    /// left to [`libraries`].
    pub fn parse(sources: &[(&str, &str)]) -> Result<RecipeSet, Diagnostics> {
        let mut diags = Diagnostics::default();
        let shared = step_library(sources, &mut diags);
        let mut recipes = Vec::new();
        for (file, text) in sources
            .iter()
            .filter(|(f, _)| source_kind(f) == SourceKind::Recipe)
        {
            match parse_one(file, text) {
                Ok(mut r) => {
                    use_shared_steps(&mut r, &shared, &mut diags);
                    recipes.push(r)
                }
                Err(d) => diags.push(d),
            }
        }
        if diags.has_errors() {
            return Err(diags);
        }
        check_names(&recipes, &mut diags);
        let step_names: HashSet<String> = recipes
            .iter()
            .flat_map(|r| r.def.steps.iter().map(|s| s.name.clone()))
            .collect();
        for r in &recipes {
            check_refs(r, &step_names, &mut diags);
        }
        let recipes = order_by_requires(recipes, &mut diags);
        if diags.has_errors() {
            return Err(diags);
        }
        Ok(RecipeSet {
            recipes,
            step_names,
        })
    }
}

fn parse_one(file: &str, text: &str) -> Result<Recipe, Diagnostic> {
    let own = TomlSource::new(file, text)?;
    let def: RecipeDef = own.parse()?;
    Ok(Recipe {
        def,
        own,
        shared: HashMap::new(),
    })
}

/// A step of the step library: the module and params of a step several recipes take with
/// `use` (their `name`, `when`, `after`, `inputs` and guards stay their own).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedStepDef {
    pub module: String,
    #[serde(default)]
    pub params: toml::Table,
}

/// The shared steps of the step libraries among `sources`, by name, with their source.
fn step_library(
    sources: &[(&str, &str)],
    diags: &mut Diagnostics,
) -> BTreeMap<String, (SharedStepDef, Arc<TomlSource>)> {
    let mut out = BTreeMap::new();
    for (file, text) in sources
        .iter()
        .filter(|(f, _)| source_kind(f) == SourceKind::Steps)
    {
        let parsed = TomlSource::new(file, text).and_then(|src| {
            let steps: BTreeMap<String, SharedStepDef> = src.parse()?;
            Ok((steps, Arc::new(src)))
        });
        match parsed {
            Ok((steps, src)) => {
                for (name, def) in steps {
                    if out.contains_key(&name) {
                        diags.push(
                            Diagnostic::error(
                                "recipe-step-use",
                                format!("shared step `{name}` is defined twice"),
                            )
                            .at(src.loc(&name)),
                        );
                    }
                    out.insert(name, (def, src.clone()));
                }
            }
            Err(d) => diags.push(d),
        }
    }
    out
}

/// Give every step of `r` with `use` its shared step's module and params; a step needs
/// `module` or `use`, not both.
fn use_shared_steps(
    r: &mut Recipe,
    shared: &BTreeMap<String, (SharedStepDef, Arc<TomlSource>)>,
    diags: &mut Diagnostics,
) {
    for j in 0..r.def.steps.len() {
        let s = &r.def.steps[j];
        let err = |key: &str, msg: String| {
            Diagnostic::error(
                "recipe-step-use",
                format!("recipe `{}` step `{}`: {msg}", r.name(), s.name),
            )
            .at(r.loc(&format!("steps[{j}].{key}")))
        };
        let Some(name) = s.uses.clone() else {
            if s.module.is_empty() {
                diags.push(err("name", "a step needs `module` (or `use`)".into()));
            }
            continue;
        };
        if !s.module.is_empty() || !s.params.is_empty() {
            diags.push(err(
                "use",
                format!("`use = \"{name}\"` gives the step its module and params: leave out `module` and `params`"),
            ));
            continue;
        }
        let Some((def, src)) = shared.get(&name) else {
            let mut d = err(
                "use",
                format!("`use = \"{name}\"`: the step library has no step `{name}`"),
            );
            if let Some(h) = did_you_mean(&name, shared.keys().map(String::as_str)) {
                d = d.with_hint(format!("did you mean `{h}`?"));
            }
            diags.push(d);
            continue;
        };
        let step = &mut r.def.steps[j];
        step.module = def.module.clone();
        step.params = def.params.clone();
        r.shared.insert(j, (src.clone(), name));
    }
}

fn check_names(recipes: &[Recipe], diags: &mut Diagnostics) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, r) in recipes.iter().enumerate() {
        if !refs::valid_name(r.name()) {
            diags.push(
                Diagnostic::error(
                    "recipe-name",
                    format!("recipe name `{}` is not valid", r.name()),
                )
                .at(r.loc("recipe")),
            );
        }
        if seen.insert(r.name(), i).is_some() {
            diags.push(
                Diagnostic::error(
                    "recipe-duplicate",
                    format!("recipe `{}` is defined twice", r.name()),
                )
                .at(r.loc("recipe")),
            );
        }
        let mut steps = HashSet::new();
        for (j, s) in r.def.steps.iter().enumerate() {
            if !refs::valid_name(&s.name) {
                diags.push(
                    Diagnostic::error(
                        "recipe-step-name",
                        format!(
                            "recipe `{}`: step name `{}` is not valid (no spaces, `.`, `:`, `/` or `@`)",
                            r.name(),
                            s.name
                        ),
                    )
                    .at(r.loc(&format!("steps[{j}].name"))),
                );
            }
            check_step_features(r, j, s, diags);
            if !steps.insert(s.name.as_str()) {
                diags.push(
                    Diagnostic::error(
                        "recipe-step-duplicate",
                        format!("recipe `{}`: step `{}` is defined twice", r.name(), s.name),
                    )
                    .at(r.loc(&format!("steps[{j}].name"))),
                );
            }
        }
    }
    for r in recipes {
        if let Some(Serial::Size(n)) = r.def.serial {
            if n < 1 {
                diags.push(
                    Diagnostic::error(
                        "recipe-serial",
                        format!(
                            "recipe `{}`: `serial = {n}`: batches need at least one host",
                            r.name()
                        ),
                    )
                    .at(r.loc("serial")),
                );
            }
        }
        for (k, req) in r.def.requires.iter().enumerate() {
            if !seen.contains_key(req.as_str()) {
                let hint = did_you_mean(req, seen.keys().copied());
                let mut d = Diagnostic::error(
                    "recipe-requires",
                    format!(
                        "recipe `{}` requires `{req}`, which no recipe defines",
                        r.name()
                    ),
                )
                .at(r.loc(&format!("requires[{k}]")));
                if let Some(h) = hint {
                    d = d.with_hint(format!("did you mean `{h}`?"));
                }
                diags.push(d);
            }
        }
    }
}

/// `delegate` and the guards of step `j`: a known delegate, one guard at most, a non-empty
/// path, and no guard on a delegated step (its path would be read on the host the step runs
/// on, not on the host it is for).
fn check_step_features(r: &Recipe, j: usize, s: &StepDef, diags: &mut Diagnostics) {
    let err = |key: &str, msg: String| {
        Diagnostic::error(
            "recipe-step",
            format!("recipe `{}` step `{}`: {msg}", r.name(), s.name),
        )
        .at(r.loc(&format!("steps[{j}].{key}")))
    };
    if let Some(d) = &s.delegate {
        if d != DELEGATE_FIRST_CONTROL_PLANE {
            diags.push(err(
                "delegate",
                format!(
                    "`delegate = \"{d}\"`: the only value is \"{DELEGATE_FIRST_CONTROL_PLANE}\""
                ),
            ));
        }
    }
    if s.if_exists.is_some() && s.unless_exists.is_some() {
        diags.push(err(
            "unless_exists",
            "`if_exists` and `unless_exists` together: give one guard".into(),
        ));
    }
    for (key, v) in [
        ("if_exists", &s.if_exists),
        ("unless_exists", &s.unless_exists),
    ] {
        let Some(v) = v else { continue };
        if v.trim().is_empty() || v.contains(['\n', '\0']) {
            diags.push(err(key, format!("`{key}` needs one path")));
        } else if s.delegate.is_some() {
            diags.push(err(
                key,
                format!("`{key}` on a delegated step would read the path on the host it runs on, not on the host it is for"),
            ));
        }
    }
}

fn check_refs(r: &Recipe, known: &HashSet<String>, diags: &mut Diagnostics) {
    let mut check = |s: &str, path: String, with_key: bool, what: &str| {
        let err = |msg: String| {
            Diagnostic::error("recipe-ref", format!("recipe `{}`: {msg}", r.name()))
                .at(r.loc(&path))
        };
        match refs::parse(s, with_key) {
            Err(e) => diags.push(err(e)),
            Ok(rf) => {
                if let Scope::Host(h) = &rf.scope {
                    diags.push(err(format!(
                        "`{s}` names host `{h}`; recipes name hosts only as `@first_control_plane` or `@all`"
                    )));
                } else if rf.scope == Scope::All && what != "after" {
                    diags.push(err(format!(
                        "`@all` is allowed only in `after`, not in `{what}`"
                    )));
                } else if !known.contains(&rf.name) {
                    let mut d = err(format!(
                        "`{s}` names step `{}`, which no recipe defines",
                        rf.name
                    ));
                    if let Some(h) = did_you_mean(&rf.name, known.iter().map(String::as_str)) {
                        d = d.with_hint(format!("did you mean `{h}`?"));
                    }
                    diags.push(d);
                }
            }
        }
    };
    for (j, s) in r.def.steps.iter().enumerate() {
        for (k, a) in s.after.iter().enumerate() {
            check(a, format!("steps[{j}].after[{k}]"), false, "after");
        }
        for (name, a) in &s.inputs {
            check(a, format!("steps[{j}].inputs.{name}"), true, "inputs");
        }
    }
}

/// Order recipes so each follows those it requires (stable: file order otherwise). A cycle
/// among `requires` is an error naming every recipe in it.
fn order_by_requires(recipes: Vec<Recipe>, diags: &mut Diagnostics) -> Vec<Recipe> {
    let index: HashMap<String, usize> = recipes
        .iter()
        .enumerate()
        .map(|(i, r)| (r.name().to_string(), i))
        .collect();
    let mut indeg = vec![0usize; recipes.len()];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); recipes.len()];
    for (i, r) in recipes.iter().enumerate() {
        for req in &r.def.requires {
            if let Some(&j) = index.get(req) {
                indeg[i] += 1;
                users[j].push(i);
            }
        }
    }
    let mut ready: std::collections::BTreeSet<usize> =
        (0..recipes.len()).filter(|&i| indeg[i] == 0).collect();
    let mut order = Vec::with_capacity(recipes.len());
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &u in &users[i] {
            indeg[u] -= 1;
            if indeg[u] == 0 {
                ready.insert(u);
            }
        }
    }
    if order.len() < recipes.len() {
        let stuck: Vec<&str> = (0..recipes.len())
            .filter(|i| !order.contains(i))
            .map(|i| recipes[i].name())
            .collect();
        let first = (0..recipes.len()).find(|i| !order.contains(i)).unwrap_or(0);
        diags.push(
            Diagnostic::error(
                "recipe-requires-cycle",
                format!(
                    "recipes require each other in a cycle: {}",
                    stuck.join(", ")
                ),
            )
            .at(recipes[first].loc("requires")),
        );
        return recipes;
    }
    let mut slots: Vec<Option<Recipe>> = recipes.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

/// What a reference is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefKind<'a> {
    After,
    /// The input of this name.
    Input(&'a str),
}

/// The parsed references of one step or user task, each with the path it was written at
/// (`steps[3].after[0]`, `tasks[1].after[0]`).
#[derive(Debug, Clone, Default)]
pub struct StepRefs {
    pub after: Vec<(Ref, String)>,
    pub inputs: Vec<(String, Ref, String)>,
}

impl StepRefs {
    pub fn iter(&self) -> impl Iterator<Item = (RefKind<'_>, &Ref, &str)> {
        let after = self
            .after
            .iter()
            .map(|(r, p)| (RefKind::After, r, p.as_str()));
        let inputs = self
            .inputs
            .iter()
            .map(|(n, r, p)| (RefKind::Input(n.as_str()), r, p.as_str()));
        after.chain(inputs)
    }
}

/// A step with its templates compiled and references parsed.
#[derive(Debug)]
pub struct CompiledStep<'env, 'src> {
    pub index: usize,
    pub def: &'src StepDef,
    pub location: Option<Location>,
    pub when: Option<Snippet<'env, 'src>>,
    pub params: Tree<'env, 'src>,
    pub refs: StepRefs,
}

/// A recipe's `serial`, its template compiled.
#[derive(Debug)]
pub enum CompiledSerial<'env, 'src> {
    Size(usize),
    Template(Box<Snippet<'env, 'src>>),
}

/// A recipe with its templates compiled.
#[derive(Debug)]
pub struct CompiledRecipe<'env, 'src> {
    pub recipe: &'src Recipe,
    pub when: Option<Snippet<'env, 'src>>,
    pub serial: Option<CompiledSerial<'env, 'src>>,
    pub asserts: Vec<(Snippet<'env, 'src>, &'src str)>,
    pub steps: Vec<CompiledStep<'env, 'src>>,
}

/// A template diagnostic located in a recipe.
pub fn template_diag(
    r: &Recipe,
    step: Option<&str>,
    path: &str,
    what: &str,
    e: &TemplateError,
    host: Option<&str>,
) -> Diagnostic {
    let step = step.map(|s| format!(" step `{s}`")).unwrap_or_default();
    let on = host.map(|h| format!(" (host `{h}`)")).unwrap_or_default();
    match &e.template {
        // An error inside a template file the string includes: located in that file.
        Some(file) => {
            let dir = r.own.source.file.parent().unwrap_or(Path::new(""));
            Diagnostic::error(
                "template",
                format!(
                    "recipe `{}`{step}: {what}: {} (in {file}){on}",
                    r.name(),
                    e.message
                ),
            )
            .at(Some(Location {
                file: dir.join(file),
                line: e.line.unwrap_or(1),
                col: 1,
            }))
        }
        None => Diagnostic::error(
            "template",
            format!("recipe `{}`{step}: {what}: {}{on}", r.name(), e.message),
        )
        .at(r.loc_in_template(path, e.line)),
    }
}

impl<'env, 'src> CompiledRecipe<'env, 'src> {
    pub fn compile(
        env: &'env Environment<'src>,
        recipe: &'src Recipe,
        diags: &mut Diagnostics,
    ) -> Self {
        let snippet =
            |src: &'src str,
             path: &str,
             step: Option<&str>,
             what: &str,
             diags: &mut Diagnostics| match Snippet::compile(env, src) {
                Ok(s) => Some(s),
                Err(e) => {
                    diags.push(template_diag(recipe, step, path, what, &e, None));
                    None
                }
            };
        let when = recipe
            .def
            .applies
            .when
            .as_deref()
            .and_then(|w| snippet(w, "applies.when", None, "applies.when", diags));
        let serial = match &recipe.def.serial {
            None => None,
            Some(Serial::Size(n)) => Some(CompiledSerial::Size(
                usize::try_from(*n).unwrap_or(1).max(1),
            )),
            Some(Serial::Template(t)) => snippet(t, "serial", None, "serial", diags)
                .map(|s| CompiledSerial::Template(Box::new(s))),
        };
        let asserts = recipe
            .def
            .asserts
            .iter()
            .enumerate()
            .filter_map(|(i, a)| {
                let p = format!("asserts[{i}].that");
                snippet(&a.that, &p, None, &p, diags).map(|s| (s, a.message.as_str()))
            })
            .collect();
        let mut steps = Vec::new();
        for (j, s) in recipe.def.steps.iter().enumerate() {
            let when = s.when.as_deref().and_then(|w| {
                snippet(w, &format!("steps[{j}].when"), Some(&s.name), "when", diags)
            });
            let mut errors: Vec<TreeError> = Vec::new();
            let mut params = Tree::Object(Vec::new());
            if let Tree::Object(items) = &mut params {
                for (k, v) in &s.params {
                    items.push((k.clone(), Tree::compile(env, v, k, &mut errors)));
                }
            }
            for e in errors {
                diags.push(template_diag(
                    recipe,
                    Some(&s.name),
                    &format!("steps[{j}].params.{}", e.path),
                    &format!("params.{}", e.path),
                    &e.error,
                    None,
                ));
            }
            // References were checked by `RecipeSet::parse`; unparsable ones are skipped here.
            let parse_all = |list: &[String], what: &str| {
                list.iter()
                    .enumerate()
                    .filter_map(|(k, a)| {
                        refs::parse(a, false)
                            .ok()
                            .map(|r| (r, format!("steps[{j}].{what}[{k}]")))
                    })
                    .collect::<Vec<_>>()
            };
            let refs = StepRefs {
                after: parse_all(&s.after, "after"),
                inputs: s
                    .inputs
                    .iter()
                    .filter_map(|(name, a)| {
                        refs::parse(a, true)
                            .ok()
                            .map(|r| (name.clone(), r, format!("steps[{j}].inputs.{name}")))
                    })
                    .collect(),
            };
            steps.push(CompiledStep {
                index: j,
                def: s,
                location: recipe.loc(&format!("steps[{j}]")),
                when,
                params,
                refs,
            });
        }
        CompiledRecipe {
            recipe,
            when,
            serial,
            asserts,
            steps,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = r#"
recipe = "a"
applies = { roles = ["worker"] }
[[steps]]
name = "one"
module = "command"
[[steps]]
name = "two"
module = "command"
after = ["one"]
"#;

    #[test]
    fn parses_and_orders_by_requires() {
        let b = r#"
recipe = "b"
applies = {}
requires = ["a"]
[[steps]]
name = "three"
module = "command"
inputs = { token = "@first_control_plane:one.token" }
"#;
        let set = RecipeSet::parse(&[("plans/b.toml", b), ("plans/a.toml", A)]).expect("parses");
        let names: Vec<&str> = set.recipes.iter().map(Recipe::name).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(set.step_names.contains("three"));
    }

    fn errors(sources: &[(&str, &str)]) -> String {
        RecipeSet::parse(sources)
            .expect_err("invalid recipes")
            .to_string()
    }

    #[test]
    fn static_errors_point_into_the_recipe() {
        let bad = r#"
recipe = "bad"
applies = {}
requires = ["aa"]
[[steps]]
name = "x"
module = "command"
after = ["onee", "cp1:one"]
inputs = { t = "@all:one.token" }
"#;
        let msg = errors(&[("plans/a.toml", A), ("plans/bad.toml", bad)]);
        assert!(msg.contains("plans/bad.toml:4:"), "{msg}");
        assert!(msg.contains("requires `aa`"), "{msg}");
        assert!(msg.contains("did you mean `a`?"), "{msg}");
        assert!(msg.contains("plans/bad.toml:8:"), "{msg}");
        assert!(msg.contains("names step `onee`"), "{msg}");
        assert!(msg.contains("did you mean `one`?"), "{msg}");
        assert!(msg.contains("names host `cp1`"), "{msg}");
        assert!(msg.contains("`@all` is allowed only in `after`"), "{msg}");
    }

    #[test]
    fn requires_cycle_names_every_recipe() {
        let x = "recipe = \"x\"\napplies = {}\nrequires = [\"y\"]\n";
        let y = "recipe = \"y\"\napplies = {}\nrequires = [\"x\"]\n";
        let msg = errors(&[("x.toml", x), ("y.toml", y)]);
        assert!(msg.contains("cycle: x, y"), "{msg}");
    }

    #[test]
    fn unknown_keys_and_duplicates() {
        let msg = errors(&[("u.toml", "recipe = \"u\"\napplies = {}\nstepz = []\n")]);
        assert!(msg.contains("u.toml:3:1"), "{msg}");
        let dup = "recipe = \"d\"\napplies = {}\n[[steps]]\nname = \"s\"\nmodule = \"m\"\n[[steps]]\nname = \"s\"\nmodule = \"m\"\n";
        let msg = errors(&[("d.toml", dup)]);
        assert!(msg.contains("step `s` is defined twice"), "{msg}");
    }

    #[test]
    fn template_lines_map_into_multiline_strings() {
        let text = "recipe = \"t\"\napplies = {}\n[[steps]]\nname = \"s\"\nmodule = \"file\"\n[steps.params]\ncontent = \"\"\"\nline one\n{{ nope }}\n\"\"\"\n";
        let set = RecipeSet::parse(&[("t.toml", text)]).expect("parses");
        let loc = set.recipes[0]
            .loc_in_template("steps[0].params.content", Some(2))
            .expect("location");
        assert_eq!(loc.line, 9);
    }
}
