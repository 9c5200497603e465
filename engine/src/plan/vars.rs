//! Plan variables: values a plan leaves to whoever runs it (a CI job's VM addresses, keys,
//! fingerprints), declared in the plan with a type and an optional default:
//!
//! ```toml
//! [variables.cp1_address]
//! type = "string"
//! description = "public address of the control plane VM"
//!
//! [[hosts]]
//! name = "cp1"
//! address = "{{ var.cp1_address }}"
//! ```
//!
//! A value comes from, first that has it: the caller's map (the CLI's `--var name=value`),
//! the environment (`KWIN_VAR_<name>`), the declaration's `default`. It is checked against
//! the declared type (`variable-type`, naming where the value came from).
//!
//! Where variables are used: `[[hosts]]` and `[defaults.*]` string values (`address`, `user`,
//! `node_ip`, `host_key`, `private_key`, …), and `[cluster]`'s `control_plane_endpoint` and
//! `api_server_sans` items (the addresses a cloud gives), are substituted while the plan loads, before any
//! rule sees them, so a substituted value is checked by the same rules as a written one (an
//! address must be an address: nothing reaches a shell that validation did not accept); a value
//! that is exactly `"{{ var.name }}"` takes the variable's type (`port = "{{ var.ssh_port }}"`
//! is an integer). In `[[tasks]]` params, `var` is a template value like `host` or
//! `cluster`, rendered by the params' own templates: a module quotes its params, and in a
//! parameter that is code (`command`'s `cmd`) a value goes through `| sh` / `| ps` as every
//! template value does. A use of an undeclared variable (`variable-undeclared`) or of one
//! without a value (`variable-missing`) is reported at the line that uses it, with how to set
//! it. A variable marked `sensitive = true` is a secret: its value is given to the run's
//! scrubber ([`super::effective::Effective::secrets`]).

use super::model::{VarType, Variable};
use super::spans::SpanIndex;
use crate::diag::{Diagnostic, Diagnostics, SourceMap};
use serde::Serialize;
use std::collections::BTreeMap;
use toml::de::{DeTable, DeValue};

/// The environment prefix of a variable's value: `KWIN_VAR_node_ip`.
pub const ENV_PREFIX: &str = "KWIN_VAR_";

/// The values a caller gives: the CLI's `--var name=value` (`cli`), and the environment's
/// `KWIN_VAR_<name>` (`env`, without the prefix).
#[derive(Debug, Clone, Default)]
pub struct VarInput {
    pub cli: BTreeMap<String, String>,
    pub env: BTreeMap<String, String>,
}

impl VarInput {
    /// `cli`, and every `KWIN_VAR_*` of this process's environment.
    pub fn with_env(cli: BTreeMap<String, String>) -> Self {
        let env = std::env::vars_os()
            .filter_map(|(k, v)| {
                let k = k.into_string().ok()?;
                let name = k.strip_prefix(ENV_PREFIX)?.to_string();
                Some((name, v.into_string().ok()?))
            })
            .collect();
        VarInput { cli, env }
    }
}

/// A variable's value, typed as declared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum VarValue {
    String(String),
    Integer(i64),
    Boolean(bool),
}

impl VarValue {
    pub fn text(&self) -> String {
        match self {
            VarValue::String(s) => s.clone(),
            VarValue::Integer(n) => n.to_string(),
            VarValue::Boolean(b) => b.to_string(),
        }
    }
}

/// Where a value came from, for messages.
fn source_name(src: &Source, name: &str) -> String {
    match src {
        Source::Cli => format!("--var {name}=…"),
        Source::Env => format!("{ENV_PREFIX}{name}"),
        Source::Default => format!("the default of variables.{name}"),
    }
}

enum Source {
    Cli,
    Env,
    Default,
}

/// How to give variable `name` a value (for hints).
pub fn how_to_set(name: &str) -> String {
    format!(
        "set it with --var {name}=VALUE or the environment variable {ENV_PREFIX}{name}, or give [variables.{name}] a default"
    )
}

/// The values of the variables marked `sensitive` among `values`, as secrets.
pub fn sensitive_values(
    decls: &BTreeMap<String, Variable>,
    values: &BTreeMap<String, VarValue>,
) -> Vec<crate::secret::Secret> {
    decls
        .iter()
        .filter(|(_, d)| d.sensitive)
        .filter_map(|(name, _)| values.get(name))
        .map(|v| crate::secret::Secret::new(v.text()))
        .collect()
}

/// Every text of `diags` with the values of `secrets` masked (as the run's scrubber masks
/// output): a diagnostic that quotes a value a sensitive variable gave never shows it.
pub fn scrub_diagnostics(diags: &mut Diagnostics, secrets: &[crate::secret::Secret]) {
    if secrets.is_empty() {
        return;
    }
    let s = crate::secret::Scrubber::new();
    for v in secrets {
        s.add(v);
    }
    for d in &mut diags.0 {
        d.summary = s.scrub(&d.summary);
        if let Some(h) = &mut d.hint {
            *h = s.scrub(h);
        }
    }
}

/// Resolve every declared variable: `name → value` for those that have one (well typed).
pub fn resolve(
    decls: &BTreeMap<String, Variable>,
    input: &VarInput,
    source: &SourceMap,
    spans: &SpanIndex,
    diags: &mut Diagnostics,
    invalid: &mut std::collections::BTreeSet<String>,
) -> BTreeMap<String, VarValue> {
    let mut out = BTreeMap::new();
    for (name, d) in decls {
        let given = input
            .cli
            .get(name)
            .map(|v| (Source::Cli, v.clone()))
            .or_else(|| input.env.get(name).map(|v| (Source::Env, v.clone())));
        let (src, value) = match (given, &d.default) {
            (Some((src, text)), _) => (src, parse_text(d.kind, &text)),
            (None, Some(def)) => (Source::Default, from_toml(d.kind, def)),
            (None, None) => continue,
        };
        match value {
            // A secret too short to be masked in output without masking ordinary text.
            Ok(v) if d.sensitive && v.text().len() < crate::secret::MIN_SECRET_LEN => {
                invalid.insert(name.clone());
                let at = match src {
                    Source::Default => spans.find(&format!("variables.{name}.default")),
                    _ => spans.key(&format!("variables.{name}")),
                };
                diags.push(
                    Diagnostic::error(
                        "variable-short",
                        format!(
                            "variable `{name}` is sensitive, but {} gives a value shorter than {} bytes, which kwin could not mask in output without masking ordinary text",
                            source_name(&src, name),
                            crate::secret::MIN_SECRET_LEN
                        ),
                    )
                    .with_hint("give it a longer value (passwords and tokens this short are refused too)")
                    .at(source.span(at)),
                );
            }
            Ok(v) => {
                out.insert(name.clone(), v);
            }
            Err(shown) => {
                invalid.insert(name.clone());
                let at = match src {
                    Source::Default => spans.find(&format!("variables.{name}.default")),
                    _ => spans.key(&format!("variables.{name}")),
                };
                let shown = if d.sensitive {
                    "***".to_string()
                } else {
                    shown
                };
                diags.push(
                    Diagnostic::error(
                        "variable-type",
                        format!(
                            "variable `{name}` is {}, but {} gives {shown}",
                            type_phrase(d.kind),
                            source_name(&src, name)
                        ),
                    )
                    .with_hint(match d.kind {
                        VarType::String => "a string".to_string(),
                        VarType::Integer => "write a whole number, e.g. 22".to_string(),
                        VarType::Boolean => "write true or false".to_string(),
                    })
                    .at(source.span(at)),
                );
            }
        }
    }
    for name in input.cli.keys().filter(|n| !decls.contains_key(*n)) {
        diags.push(
            Diagnostic::error(
                "variable-undeclared",
                format!("--var {name}: the plan declares no variable `{name}`"),
            )
            .with_hint(declared_hint(decls, name))
            .at(Some(source.location(0))),
        );
    }
    out
}

fn type_phrase(t: VarType) -> &'static str {
    match t {
        VarType::String => "a string",
        VarType::Integer => "an integer",
        VarType::Boolean => "a boolean",
    }
}

/// A value given as text (`--var`, the environment) as `kind`; `Err(text as shown)`.
fn parse_text(kind: VarType, text: &str) -> Result<VarValue, String> {
    match kind {
        VarType::String => Ok(VarValue::String(text.to_string())),
        VarType::Integer => text
            .trim()
            .parse()
            .map(VarValue::Integer)
            .map_err(|_| format!("\"{text}\"")),
        VarType::Boolean => match text.trim() {
            "true" => Ok(VarValue::Boolean(true)),
            "false" => Ok(VarValue::Boolean(false)),
            _ => Err(format!("\"{text}\"")),
        },
    }
}

/// A default written in the plan as `kind`.
fn from_toml(kind: VarType, v: &toml::Value) -> Result<VarValue, String> {
    match (kind, v) {
        (VarType::String, toml::Value::String(s)) => Ok(VarValue::String(s.clone())),
        (VarType::Integer, toml::Value::Integer(n)) => Ok(VarValue::Integer(*n)),
        (VarType::Boolean, toml::Value::Boolean(b)) => Ok(VarValue::Boolean(*b)),
        (_, other) => Err(other.to_string()),
    }
}

fn declared_hint(decls: &BTreeMap<String, Variable>, name: &str) -> String {
    let names: Vec<&str> = decls.keys().map(String::as_str).collect();
    if names.is_empty() {
        return format!(
            "the plan declares no variables; declare it: [variables.{name}] with type = \"string\" (or \"integer\", \"boolean\")"
        );
    }
    let guess = crate::diag::did_you_mean(name, names.iter().copied())
        .map(|s| format!("did you mean `{s}`? "))
        .unwrap_or_default();
    format!(
        "{guess}declared: {}; or declare [variables.{name}] with a type",
        names.join(", ")
    )
}

/// `{{ var.NAME }}` occurrences in `s`: (byte range, name).
pub fn uses(s: &str) -> Vec<(std::ops::Range<usize>, &str)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = s[from..].find("{{") {
        let start = from + i;
        let Some(j) = s[start..].find("}}") else {
            break;
        };
        let end = start + j + 2;
        let inner = s[start + 2..end - 2].trim();
        if let Some(name) = inner.strip_prefix("var.") {
            if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                out.push((start..end, name));
            }
        }
        from = end;
    }
    out
}

/// Names after `var.` anywhere in a template text (task params: `{{ var.x | sh }}` too).
fn template_uses(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find("var.") {
        let before = rest[..i].chars().last();
        let tail = &rest[i + 4..];
        let len = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        if len > 0 && !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
            out.push(&tail[..len]);
        }
        rest = &tail[len..];
    }
    out
}

/// The edits that substitute variables in the `[[hosts]]` and `[defaults.*]` string values
/// of `doc` (the value's span in the source → the TOML text that replaces it), reporting uses
/// (there and in `[[tasks]]` params) of undeclared variables or variables without a value at
/// the value that uses them. Replacements never hold a line break (strings are written with
/// escapes), so every line of the plan keeps its number.
/// `masked` gets the location of every value whose substitution failed: the variable's
/// diagnostic says why, so what the rules would say about the value left as written is
/// dropped.
pub fn substitutions(
    doc: &DeTable<'_>,
    decls: &BTreeMap<String, Variable>,
    values: &BTreeMap<String, VarValue>,
    invalid: &std::collections::BTreeSet<String>,
    source: &SourceMap,
    diags: &mut Diagnostics,
    masked: &mut Vec<crate::diag::Location>,
) -> Vec<(std::ops::Range<usize>, String)> {
    let check = |name: &str, span: std::ops::Range<usize>, diags: &mut Diagnostics| -> bool {
        let d = if invalid.contains(name) {
            return false;
        } else if !decls.contains_key(name) {
            Diagnostic::error(
                "variable-undeclared",
                format!("variable `{name}` is not declared"),
            )
            .with_hint(declared_hint(decls, name))
        } else if !values.contains_key(name) {
            Diagnostic::error(
                "variable-missing",
                format!("variable `{name}` has no value"),
            )
            .with_hint(how_to_set(name))
        } else {
            return true;
        };
        diags.push(d.at(source.span(Some(span))));
        false
    };
    let mut tables: Vec<&DeTable<'_>> = Vec::new();
    // Values substituted besides the tables' own: `[cluster]`'s addresses.
    let mut more: Vec<&toml::Spanned<DeValue<'_>>> = Vec::new();
    for (k, v) in doc.iter() {
        match (k.get_ref().as_ref(), v.get_ref()) {
            ("hosts", DeValue::Array(a)) => {
                tables.extend(a.iter().filter_map(|h| h.get_ref().as_table()));
            }
            ("defaults", DeValue::Table(t)) => {
                tables.extend(t.iter().filter_map(|(_, d)| d.get_ref().as_table()));
            }
            ("cluster", DeValue::Table(t)) => {
                more.extend(t.get("control_plane_endpoint"));
                if let Some(DeValue::Array(a)) = t.get("api_server_sans").map(|v| v.get_ref()) {
                    more.extend(a.iter());
                }
            }
            ("tasks", DeValue::Array(a)) => {
                for t in a.iter() {
                    if let Some(p) = t.get_ref().as_table().and_then(|t| t.get("params")) {
                        each_string(p, &mut |s, span| {
                            for name in template_uses(s) {
                                check(name, span.clone(), diags);
                            }
                        });
                    }
                }
            }
            _ => {}
        }
    }
    let mut edits = Vec::new();
    let values_of_tables = tables.into_iter().flat_map(|t| t.iter().map(|(_, v)| v));
    for v in values_of_tables.chain(more) {
        {
            let DeValue::String(s) = v.get_ref() else {
                continue;
            };
            let found = uses(s);
            let Some(first) = found.first() else {
                continue;
            };
            let all_set = found
                .iter()
                .map(|(_, n)| check(n, v.span(), diags))
                .collect::<Vec<bool>>() // every use reported, not only the first
                .into_iter()
                .all(|ok| ok);
            if !all_set {
                masked.extend(source.span(Some(v.span())));
                continue;
            }
            // Exactly one use and nothing else: the variable's own type.
            let whole = found.len() == 1 && first.0 == (0..s.len());
            let literal = match (whole, values.get(first.1)) {
                (true, Some(VarValue::Integer(n))) => n.to_string(),
                (true, Some(VarValue::Boolean(b))) => b.to_string(),
                _ => {
                    let mut text = String::new();
                    let mut last = 0;
                    for (r, name) in &found {
                        text.push_str(&s[last..r.start]);
                        text.push_str(&values.get(*name).map(VarValue::text).unwrap_or_default());
                        last = r.end;
                    }
                    text.push_str(&s[last..]);
                    // A JSON string is a TOML basic string (the same escapes, no line break).
                    serde_json::to_string(&text).unwrap_or_default()
                }
            };
            edits.push((v.span(), literal));
        }
    }
    edits
}

/// `text` with `edits` (sorted or not; they do not overlap) applied.
pub fn apply_edits(text: &str, mut edits: Vec<(std::ops::Range<usize>, String)>) -> String {
    edits.sort_by_key(|(r, _)| r.start);
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (r, new) in edits {
        if r.start < last || r.end > text.len() {
            continue;
        }
        out.push_str(&text[last..r.start]);
        out.push_str(&new);
        last = r.end;
    }
    out.push_str(&text[last..]);
    out
}

/// Call `f` on every string under `v`, with the string's span.
fn each_string(v: &toml::Spanned<DeValue<'_>>, f: &mut dyn FnMut(&str, std::ops::Range<usize>)) {
    match v.get_ref() {
        DeValue::String(s) => f(s, v.span()),
        DeValue::Array(a) => a.iter().for_each(|x| each_string(x, f)),
        DeValue::Table(t) => t.iter().for_each(|(_, x)| each_string(x, f)),
        _ => {}
    }
}

/// The declarations of `doc`'s `[variables]`, read leniently (the structural pass reports
/// what is wrong with them).
pub fn declarations(doc: &DeTable<'_>) -> BTreeMap<String, Variable> {
    let Some(vars) = doc.get("variables").and_then(|v| v.get_ref().as_table()) else {
        return BTreeMap::new();
    };
    vars.iter()
        .filter_map(|(k, v)| {
            let t = v.get_ref().as_table()?;
            let kind = match t.get("type")?.get_ref().as_str()? {
                "string" => VarType::String,
                "integer" => VarType::Integer,
                "boolean" => VarType::Boolean,
                _ => return None,
            };
            let default = t.get("default").and_then(|d| de_to_toml(d.get_ref()));
            let sensitive = t
                .get("sensitive")
                .and_then(|s| s.get_ref().as_bool())
                .unwrap_or(false);
            Some((
                k.get_ref().to_string(),
                Variable {
                    kind,
                    default,
                    description: None,
                    sensitive,
                },
            ))
        })
        .collect()
}

fn de_to_toml(v: &DeValue<'_>) -> Option<toml::Value> {
    Some(match v {
        DeValue::String(s) => toml::Value::String(s.to_string()),
        DeValue::Integer(i) => {
            toml::Value::Integer(i64::from_str_radix(&i.as_str().replace('_', ""), i.radix()).ok()?)
        }
        DeValue::Boolean(b) => toml::Value::Boolean(*b),
        DeValue::Float(f) => toml::Value::Float(f.as_str().parse().ok()?),
        _ => return None,
    })
}
