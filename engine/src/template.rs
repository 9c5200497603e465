//! Templates: minijinja with strict undefined values and quoting filters.
//!
//! Recipes (plans/*.toml) and user task params are data whose strings may be templates. Each
//! string is compiled once ([`Snippet::compile`]) and rendered per host against a context
//! value. Three kinds of strings:
//!
//! - no `{{`, `{%` or `{#`: a literal, copied as is;
//! - exactly one `{{ expression }}` and nothing else but surrounding whitespace: the
//!   expression's value *with its type* (number, bool, list, map, none), so
//!   `vni = "{{ cni.vni }}"` yields the number 4096;
//! - anything else: rendered to a string.
//!
//! Invariants: an undefined variable or attribute is an error (never an empty string); user text
//! reaches a shell only through the `sh` and `ps` filters (built on `quote::sh_quote` and
//! `quote::ps_quote`), a systemd unit file only through `systemd` (`quote::systemd_quote`). Errors name the undefined value and the line inside the template; the
//! caller adds the file and step.

use crate::quote::{ps_quote, sh_quote, systemd_quote};
use base64::Engine as _;
use minijinja::value::ValueKind;
use minijinja::{
    AutoEscape, Environment, Error, ErrorKind, Expression, Template, UndefinedBehavior,
};
use std::collections::HashSet;
use std::fmt;

pub use minijinja::Value;

pub mod budget;

/// Instructions one render of one template string may execute. kwin's recipes need a few
/// thousand at most; nested loops that would run for hours stop here with an error naming the
/// template (`OutOfFuel`), instead of `kwin validate` running forever.
pub const FUEL: u64 = 1_000_000;

/// Most items a sequence or map may have when a template prints it or hands it to a module.
/// `seq * n` builds a lazy sequence of any length without using fuel; printing or converting
/// it would run (or allocate) for as long as its length says.
pub const MAX_ITEMS: usize = 1_000_000;

/// An error when `v` is a sequence, iterable or map longer than [`MAX_ITEMS`].
fn check_items(v: &Value) -> Result<(), Error> {
    if matches!(
        v.kind(),
        ValueKind::Seq | ValueKind::Iterable | ValueKind::Map
    ) {
        if let Some(n) = v.len().filter(|&n| n > MAX_ITEMS) {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("a value of {n} items is too large (at most {MAX_ITEMS})"),
            ));
        }
    }
    Ok(())
}

/// The error of a render (or compile) over its memory budget.
fn too_large(over: budget::Over) -> TemplateError {
    let mib = |n: usize| n.div_ceil(1 << 20);
    let message = match over {
        budget::Over::Render(peak) => format!(
            "the template needs more than {} MiB of memory to render ({} MiB at its largest): a value grows too large (`~`, `*`, a filter, a loop or a macro calling itself?)",
            mib(budget::SOFT),
            mib(peak)
        ),
        budget::Over::Expansion(left) => format!(
            "the plan's templates render more than {} MiB in all ({} MiB with this one)",
            mib(budget::TOTAL),
            mib(left)
        ),
    };
    TemplateError {
        message,
        line: None,
        template: None,
    }
}

/// An error as soon as this render is over its memory budget: kwin's formatter and filters
/// stop it there rather than at its end.
fn check_budget() -> Result<(), Error> {
    if budget::over() {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!(
                "the template needs more than {} MiB of memory to render",
                budget::SOFT >> 20
            ),
        ));
    }
    Ok(())
}

/// The environment every kwin template is compiled in.
pub fn environment<'src>() -> Environment<'src> {
    let mut env = Environment::new();
    env.set_fuel(Some(FUEL));
    env.set_formatter(|out, state, v| {
        check_items(v)?;
        check_budget()?;
        minijinja::escape_formatter(out, state, v)
    });
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_keep_trailing_newline(true);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.add_filter("sh", sh_filter);
    env.add_filter("ps", ps_filter);
    env.add_filter("b64", b64_filter);
    env.add_filter("systemd", systemd_filter);
    env.add_filter("sha256", sha256_filter);
    env
}

/// The words of `v` for a quoting filter: a string, number or bool is one word; a list is one
/// word per item (joined by spaces after quoting).
fn words(filter: &str, v: &Value) -> Result<Vec<String>, Error> {
    let one = |v: &Value| match v.kind() {
        ValueKind::String => Ok(v.as_str().unwrap_or_default().to_string()),
        ValueKind::Number | ValueKind::Bool => Ok(v.to_string()),
        k => Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("`{filter}` cannot quote a value of kind {k}"),
        )),
    };
    match v.kind() {
        ValueKind::Seq | ValueKind::Iterable => v.try_iter()?.map(|x| one(&x)).collect(),
        _ => Ok(vec![one(v)?]),
    }
}

fn sh_filter(v: Value) -> Result<String, Error> {
    Ok(words("sh", &v)?
        .iter()
        .map(|w| sh_quote(w))
        .collect::<Vec<_>>()
        .join(" "))
}

fn ps_filter(v: Value) -> Result<String, Error> {
    Ok(words("ps", &v)?
        .iter()
        .map(|w| ps_quote(w))
        .collect::<Vec<_>>()
        .join(" "))
}

/// One double-quoted systemd unit-file word (`Environment={{ ('A=' ~ x) | systemd }}`).
fn systemd_filter(v: Value) -> Result<String, Error> {
    let s = words("systemd", &v)?.join(" ");
    systemd_quote(&s).map_err(|e| Error::new(ErrorKind::InvalidOperation, e))
}

fn b64_filter(v: Value) -> Result<String, Error> {
    let s = words("b64", &v)?.join(" ");
    Ok(base64::engine::general_purpose::STANDARD.encode(s.as_bytes()))
}

/// Lower-case hex SHA-256 of a text (UTF-8): a fingerprint of rendered content, e.g. a pod
/// template annotation that changes, and so rolls a DaemonSet, when a script it runs changes.
fn sha256_filter(v: Value) -> Result<String, Error> {
    use sha2::{Digest, Sha256};
    let s = words("sha256", &v)?.join(" ");
    Ok(hex::encode(Sha256::digest(s.as_bytes())))
}

/// A template that failed to compile or render.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    /// Lowercase, one line: "undefined value `cluster.nme`".
    pub message: String,
    /// 1-based line inside the template source, when known.
    pub line: Option<usize>,
    /// The template file the error is in (`line` is then a line of that file), when it is
    /// not the string itself but a file it includes ([`Snippet::compile`]).
    pub template: Option<String>,
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        match (&self.template, self.line) {
            (Some(t), Some(l)) => write!(f, " ({t} line {l})")?,
            (Some(t), None) => write!(f, " (in {t})")?,
            (None, Some(l)) => write!(f, " (template line {l})")?,
            (None, None) => {}
        }
        Ok(())
    }
}

impl std::error::Error for TemplateError {}

fn describe(e: &Error) -> String {
    match e.detail() {
        Some(d) => format!("{}: {d}", e.kind()),
        None => e.kind().to_string(),
    }
}

impl TemplateError {
    fn from_minijinja(e: &Error, vars: &HashSet<String>, ctx: Option<&Value>) -> Self {
        // An error inside an included template file comes wrapped ("could not render
        // include"): report the innermost one, with its file and line.
        let mut e = e;
        while let Some(inner) = std::error::Error::source(e).and_then(|s| s.downcast_ref::<Error>())
        {
            e = inner;
        }
        let mut message = describe(e);
        if e.kind() == ErrorKind::OutOfFuel {
            message = format!(
                "the template ran out of fuel: it did not finish within {FUEL} instructions (loops nested too deep or too long?)"
            );
        }
        if e.kind() == ErrorKind::UndefinedError {
            if let Some(name) = ctx.and_then(|c| first_undefined(vars, c)) {
                message = format!("undefined value `{name}");
            }
        }
        TemplateError {
            message,
            line: e.line(),
            template: file_name(e),
        }
    }
}

/// The template file an error happened in: a name `Environment::add_template` gave, not
/// minijinja's `<string>` / `<expression>` of a compiled string.
fn file_name(e: &Error) -> Option<String> {
    e.name().filter(|n| !n.starts_with('<')).map(str::to_string)
}

/// The first of `vars` (dotted paths, sorted) that does not resolve in `ctx`, with what
/// could be named there: "`nothing`; templates can see: cluster, host, …" or
/// "`cluster.nme`; `cluster` has: name, pod_cidr, …".
fn first_undefined(vars: &HashSet<String>, ctx: &Value) -> Option<String> {
    let mut sorted: Vec<&String> = vars.iter().collect();
    sorted.sort();
    sorted.into_iter().find_map(|path| {
        let mut cur = ctx.clone();
        let mut seen = Vec::new();
        for part in path.split('.') {
            let parent = seen.join(".");
            seen.push(part);
            match cur.get_attr(part) {
                Ok(v) if !v.is_undefined() => cur = v,
                _ => {
                    let name = seen.join(".");
                    return Some(match visible_names(&cur) {
                        Some(names) if parent.is_empty() => {
                            format!("{name}`; templates can see: {names}")
                        }
                        Some(names) => format!("{name}`; `{parent}` has: {names}"),
                        None => format!("{name}`"),
                    });
                }
            }
        }
        None
    })
}

/// The keys of a map value, sorted, for "what could be named here" (at most 40).
fn visible_names(v: &Value) -> Option<String> {
    if v.kind() != minijinja::value::ValueKind::Map {
        return None;
    }
    let mut keys: Vec<String> = v
        .try_iter()
        .ok()?
        .filter_map(|k| k.as_str().map(str::to_string))
        .collect();
    if keys.is_empty() {
        return None;
    }
    keys.sort();
    let more = keys.len().saturating_sub(40);
    keys.truncate(40);
    let mut s = keys.join(", ");
    if more > 0 {
        s.push_str(&format!(" and {more} more"));
    }
    Some(s)
}

enum Kind<'env, 'src> {
    Literal(&'src str),
    Text(Template<'env, 'src>),
    Expr(Expression<'env, 'src>),
}

/// One compiled template string.
pub struct Snippet<'env, 'src> {
    kind: Kind<'env, 'src>,
    /// The template's beginning, named if its render grows too large ([`budget::excerpt`]).
    site: Option<std::sync::Arc<str>>,
    /// Dotted variable paths the template reads (for error messages).
    vars: HashSet<String>,
    /// Top-level names the template reads.
    roots: HashSet<String>,
}

impl fmt::Debug for Snippet<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = match self.kind {
            Kind::Literal(_) => "literal",
            Kind::Text(_) => "text",
            Kind::Expr(_) => "expression",
        };
        f.debug_struct("Snippet")
            .field("kind", &k)
            .field("roots", &self.roots)
            .finish()
    }
}

/// The tags of `src` that name another template (`include`, `import`, `from`, `extends`),
/// as (byte offset of the tag, the name written, if it is one quoted string). `{% raw %}`
/// blocks are skipped.
fn template_refs(src: &str) -> Vec<(usize, Option<&str>)> {
    let mut out = Vec::new();
    let mut rest = src;
    let mut base = 0;
    let mut raw = false;
    while let Some(i) = rest.find("{%") {
        let Some(end) = rest[i..].find("%}") else {
            break;
        };
        let tag = rest[i + 2..i + end]
            .trim_matches(|c: char| c == '-' || c == '+')
            .trim();
        let (word, args) = tag.split_once(char::is_whitespace).unwrap_or((tag, ""));
        match word {
            "raw" => raw = true,
            "endraw" => raw = false,
            "include" | "import" | "from" | "extends" if !raw => {
                let args = args.trim_start();
                let quoted = args.chars().next().filter(|c| *c == '"' || *c == '\'');
                // One string, then nothing or a keyword (`ignore missing`, `with context`,
                // `as x`, `import a`): not an expression that computes the name.
                let name = quoted.and_then(|q| {
                    let inner = &args[1..];
                    let j = inner.find(q)?;
                    let after = inner[j + 1..].trim_start();
                    let next = after.split_whitespace().next().unwrap_or("");
                    matches!(next, "" | "ignore" | "with" | "without" | "as" | "import")
                        .then(|| &inner[..j])
                });
                out.push((base + i, name));
            }
            _ => {}
        }
        base += i + end + 2;
        rest = &rest[i + end + 2..];
    }
    out
}

/// Add to `vars` and `roots` what the template files `src` includes or imports read, and
/// what the files they name read, so [`Snippet::reads`] sees through includes (a render that
/// reads `host` in an included file is per host). A template file must be named by one
/// quoted string (`{% include "cni-flannel/windows.yaml.j2" %}`) that `env` knows: anything
/// else is an error at compile time, naming the line.
fn files_read(
    env: &Environment<'_>,
    src: &str,
    vars: &mut HashSet<String>,
    roots: &mut HashSet<String>,
    seen: &mut HashSet<String>,
) -> Result<(), TemplateError> {
    for (at, name) in template_refs(src) {
        let line = Some(src[..at].matches('\n').count() + 1);
        let Some(name) = name else {
            return Err(TemplateError {
                message: "a template file is named by one quoted string: {% include \"<recipe>/<file>.j2\" %}".into(),
                line,
                template: None,
            });
        };
        if !seen.insert(name.to_string()) {
            continue;
        }
        let t = env.get_template(name).map_err(|_| TemplateError {
            message: format!(
                "no template file `{name}` (template files: `plans/<recipe>/<file>.j2`, named without `plans/`)"
            ),
            line,
            template: None,
        })?;
        vars.extend(t.undeclared_variables(true));
        roots.extend(t.undeclared_variables(false));
        files_read(env, t.source(), vars, roots, seen)?;
    }
    Ok(())
}

/// Whether `s` contains template syntax.
pub fn is_template(s: &str) -> bool {
    s.contains("{{") || s.contains("{%") || s.contains("{#")
}

/// The expression of a string that is exactly one `{{ expression }}` (surrounding whitespace
/// allowed, so a long expression may sit on its own lines).
pub fn single_expression(s: &str) -> Option<&str> {
    let inner = s.trim().strip_prefix("{{")?.strip_suffix("}}")?;
    if is_template(inner) || inner.contains("}}") {
        return None;
    }
    Some(inner.trim())
}

impl<'env, 'src> Snippet<'env, 'src> {
    pub fn compile(env: &'env Environment<'src>, src: &'src str) -> Result<Self, TemplateError> {
        let err = |e: Error| TemplateError {
            message: describe(&e),
            line: e.line(),
            template: file_name(&e),
        };
        if !is_template(src) {
            return Ok(Snippet {
                kind: Kind::Literal(src),
                site: None,
                vars: HashSet::new(),
                roots: HashSet::new(),
            });
        }
        // minijinja folds constant expressions while it compiles (`{{ 'x' * 90000000 }}`):
        // compiling is counted as rendering is.
        let site = budget::excerpt(src);
        let scope = budget::Scope::enter(Some(site.clone()));
        let (kind, vars, roots) = match single_expression(src) {
            Some(expr) => {
                let e = env.compile_expression(expr).map_err(err)?;
                let vars = e.undeclared_variables(true);
                let roots = e.undeclared_variables(false);
                (Kind::Expr(e), vars, roots)
            }
            None => {
                let t = env.template_from_str(src).map_err(err)?;
                let mut vars = t.undeclared_variables(true);
                let mut roots = t.undeclared_variables(false);
                files_read(env, src, &mut vars, &mut roots, &mut HashSet::new())?;
                (Kind::Text(t), vars, roots)
            }
        };
        scope.finish().map_err(too_large)?;
        Ok(Snippet {
            kind,
            site: Some(site),
            vars,
            roots,
        })
    }

    /// Whether the snippet reads the top-level variable `name` (e.g. `host`): a snippet that
    /// does not read `host` renders the same on every host.
    pub fn reads(&self, name: &str) -> bool {
        self.roots.contains(name)
    }

    /// Render to a minijinja value (expressions keep their type; text is a string).
    pub fn eval(&self, ctx: &Value) -> Result<Value, TemplateError> {
        let scope = match &self.kind {
            Kind::Literal(s) => return Ok(Value::from(*s)),
            _ => budget::Scope::enter(self.site.clone()),
        };
        let r = match &self.kind {
            Kind::Text(t) => t.render(ctx).map(Value::from),
            Kind::Expr(e) => e.eval(ctx),
            Kind::Literal(s) => Ok(Value::from(*s)),
        };
        scope.finish().map_err(too_large)?;
        match r {
            Ok(v) if v.is_undefined() => Err(TemplateError {
                message: match first_undefined(&self.vars, ctx) {
                    Some(name) => format!("undefined value `{name}"),
                    None => "undefined value".into(),
                },
                line: Some(1),
                template: None,
            }),
            Ok(v) => Ok(v),
            Err(e) => Err(TemplateError::from_minijinja(&e, &self.vars, Some(ctx))),
        }
    }

    /// Render to JSON (module params are JSON).
    pub fn render_json(&self, ctx: &Value) -> Result<serde_json::Value, TemplateError> {
        if let Kind::Literal(s) = self.kind {
            return Ok(serde_json::Value::String(s.to_string()));
        }
        let v = self.eval(ctx)?;
        to_json(&v)
    }

    /// Render a condition: the value must be a bool, or the string "true" / "false".
    pub fn render_bool(&self, ctx: &Value) -> Result<bool, TemplateError> {
        let v = self.eval(ctx)?;
        let text = v.as_str().map(|s| s.trim().to_ascii_lowercase());
        match (v.kind(), text.as_deref()) {
            (ValueKind::Bool, _) => Ok(v.is_true()),
            (_, Some("true")) => Ok(true),
            (_, Some("false")) => Ok(false),
            _ => Err(TemplateError {
                message: format!("expected true or false, got `{v}`"),
                line: None,

                template: None,
            }),
        }
    }
}

/// A minijinja value as JSON. Undefined values are errors.
pub fn to_json(v: &Value) -> Result<serde_json::Value, TemplateError> {
    if v.is_undefined() {
        return Err(TemplateError {
            message: "undefined value".into(),
            line: None,
            template: None,
        });
    }
    // Nested too: every item of every container counts.
    fn walk(v: &Value, left: &mut usize) -> Result<(), Error> {
        check_items(v)?;
        if !matches!(
            v.kind(),
            ValueKind::Seq | ValueKind::Iterable | ValueKind::Map
        ) {
            return Ok(());
        }
        let n = v.len().unwrap_or(0);
        *left = left.checked_sub(n).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidOperation,
                format!("a value of more than {MAX_ITEMS} items in all is too large"),
            )
        })?;
        for item in v.try_iter()? {
            if v.kind() == ValueKind::Map {
                walk(&v.get_item(&item)?, left)?;
            } else {
                walk(&item, left)?;
            }
        }
        Ok(())
    }
    walk(v, &mut MAX_ITEMS.clone()).map_err(|e| TemplateError {
        message: describe(&e),
        line: None,
        template: None,
    })?;
    serde_json::to_value(v).map_err(|e| TemplateError {
        message: format!("cannot convert the value to JSON: {e}"),
        line: None,
        template: None,
    })
}

/// A tree of params (TOML data) whose strings are compiled snippets.
#[derive(Debug)]
pub enum Tree<'env, 'src> {
    Plain(serde_json::Value),
    Str {
        path: String,
        snippet: Box<Snippet<'env, 'src>>,
    },
    Array(Vec<Tree<'env, 'src>>),
    Object(Vec<(String, Tree<'env, 'src>)>),
}

/// Where in a params tree a template failed: the dotted path (`content`, `patches[0].patch`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeError {
    pub path: String,
    pub error: TemplateError,
}

impl<'env, 'src> Tree<'env, 'src> {
    /// Compile every string of `v`. `path` is the dotted path of `v` (for errors).
    pub fn compile(
        env: &'env Environment<'src>,
        v: &'src toml::Value,
        path: &str,
        errors: &mut Vec<TreeError>,
    ) -> Self {
        match v {
            toml::Value::String(s) => match Snippet::compile(env, s) {
                Ok(snippet) => Tree::Str {
                    path: path.to_string(),
                    snippet: Box::new(snippet),
                },
                Err(error) => {
                    errors.push(TreeError {
                        path: path.to_string(),
                        error,
                    });
                    Tree::Plain(serde_json::Value::Null)
                }
            },
            toml::Value::Array(a) => Tree::Array(
                a.iter()
                    .enumerate()
                    .map(|(i, x)| Tree::compile(env, x, &format!("{path}[{i}]"), errors))
                    .collect(),
            ),
            toml::Value::Table(t) => Tree::Object(
                t.iter()
                    .map(|(k, x)| {
                        let p = if path.is_empty() {
                            k.clone()
                        } else {
                            format!("{path}.{k}")
                        };
                        (k.clone(), Tree::compile(env, x, &p, errors))
                    })
                    .collect(),
            ),
            toml::Value::Integer(i) => Tree::Plain(serde_json::Value::from(*i)),
            toml::Value::Float(f) => Tree::Plain(serde_json::Value::from(*f)),
            toml::Value::Boolean(b) => Tree::Plain(serde_json::Value::Bool(*b)),
            toml::Value::Datetime(d) => Tree::Plain(serde_json::Value::String(d.to_string())),
        }
    }

    /// Whether any string of the tree reads the top-level variable `name`.
    pub fn reads(&self, name: &str) -> bool {
        match self {
            Tree::Plain(_) => false,
            Tree::Str { snippet, .. } => snippet.reads(name),
            Tree::Array(a) => a.iter().any(|t| t.reads(name)),
            Tree::Object(o) => o.iter().any(|(_, t)| t.reads(name)),
        }
    }

    pub fn render(&self, ctx: &Value) -> Result<serde_json::Value, TreeError> {
        Ok(match self {
            Tree::Plain(v) => v.clone(),
            Tree::Str { path, snippet } => snippet.render_json(ctx).map_err(|error| TreeError {
                path: path.clone(),
                error,
            })?,
            Tree::Array(a) => {
                serde_json::Value::Array(a.iter().map(|t| t.render(ctx)).collect::<Result<_, _>>()?)
            }
            Tree::Object(o) => serde_json::Value::Object(
                o.iter()
                    .map(|(k, t)| Ok((k.clone(), t.render(ctx)?)))
                    .collect::<Result<_, _>>()?,
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use minijinja::context;

    fn ctx() -> Value {
        context! {
            cluster => context! { name => "lab", pod_cidr => "10.244.0.0/16", vni => 4096 },
            host => context! { name => "it's", taints => vec!["a=b:NoSchedule"] },
            none_value => Value::from(()),
        }
    }

    fn render(src: &str) -> Result<serde_json::Value, TemplateError> {
        let env = environment();
        Snippet::compile(&env, src)?.render_json(&ctx())
    }

    #[test]
    fn literal_text_stays_and_expressions_keep_their_type() {
        assert_eq!(
            render("plain {x}").ok(),
            Some(serde_json::json!("plain {x}"))
        );
        assert_eq!(
            render("name={{ cluster.name }}").ok(),
            Some(serde_json::json!("name=lab"))
        );
        assert_eq!(
            render("{{ cluster.vni }}").ok(),
            Some(serde_json::json!(4096))
        );
        assert_eq!(
            render("{{ host.taints + ['os=windows:NoSchedule'] }}").ok(),
            Some(serde_json::json!([
                "a=b:NoSchedule",
                "os=windows:NoSchedule"
            ]))
        );
        assert_eq!(
            render("{{ none_value }}").ok(),
            Some(serde_json::Value::Null)
        );
        // Two expressions: text, not a typed value.
        assert_eq!(
            render("\n{{ [cluster.vni,\n  1] }}\n").ok(),
            Some(serde_json::json!([4096, 1]))
        );
        // Two expressions: text, not a typed value.
        assert_eq!(
            render("{{ cluster.vni }}{{ cluster.vni }}").ok(),
            Some(serde_json::json!("40964096"))
        );
    }

    #[test]
    fn the_sh_and_ps_filters_quote_values_and_lists() {
        assert_eq!(
            render("echo {{ host.name | sh }}").ok(),
            Some(serde_json::json!("echo 'it'\\''s'"))
        );
        assert_eq!(
            render("Write-Output {{ host.name | ps }}").ok(),
            Some(serde_json::json!("Write-Output 'it''s'"))
        );
        assert_eq!(
            render("x {{ ['a b', 'c'] | sh }}").ok(),
            Some(serde_json::json!("x 'a b' c"))
        );
        assert_eq!(
            render("{{ 'hi' | b64 }}").ok(),
            Some(serde_json::json!("aGk="))
        );
        assert!(render("{{ none_value | sh }}").is_err());
        assert_eq!(
            render("{{ 'abc' | sha256 }}").ok(),
            Some(serde_json::json!(
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
            ))
        );
    }

    #[test]
    fn strict_undefined_names_the_value_and_line() {
        let e = render("a\nb {{ cluster.nme }}").expect_err("undefined");
        assert_eq!(
            e.message,
            "undefined value `cluster.nme`; `cluster` has: name, pod_cidr, vni"
        );
        assert_eq!(e.line, Some(2));
        let e = render("{{ nothing }}").expect_err("undefined");
        assert_eq!(
            e.message,
            "undefined value `nothing`; templates can see: cluster, host, none_value"
        );
        let e = render("{% if cluster.missing %}x{% endif %}").expect_err("undefined");
        assert!(
            e.message
                .starts_with("undefined value `cluster.missing`; `cluster` has: "),
            "{}",
            e.message
        );
    }

    #[test]
    fn syntax_errors_are_compile_errors() {
        let env = environment();
        let e = Snippet::compile(&env, "x {{ cluster. }}").expect_err("syntax");
        assert!(e.message.starts_with("syntax error"), "{}", e.message);
    }

    #[test]
    fn conditions_must_be_booleans() {
        let env = environment();
        let s = Snippet::compile(&env, "{{ cluster.name == 'lab' }}").expect("compile");
        assert_eq!(s.render_bool(&ctx()).ok(), Some(true));
        let s = Snippet::compile(&env, "{{ cluster.name }}").expect("compile");
        assert!(s.render_bool(&ctx()).is_err());
        let s = Snippet::compile(&env, "false").expect("compile");
        assert_eq!(s.render_bool(&ctx()).ok(), Some(false));
        // Text templates render booleans as words too.
        let s = Snippet::compile(&env, " {{ cluster.vni > 1 }} ").expect("compile");
        assert_eq!(s.render_bool(&ctx()).ok(), Some(true));
    }

    #[test]
    fn reads_tracks_roots() {
        let env = environment();
        let s = Snippet::compile(&env, "{{ host.name }}-{{ cluster.name }}").expect("compile");
        assert!(s.reads("host") && s.reads("cluster") && !s.reads("cni"));
    }
}
