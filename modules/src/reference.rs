//! The module reference: what `kwin modules`, `kwin doc MODULE` and `docs/modules.md` show,
//! read from the sources the code itself uses.
//!
//! Per module: its name and the OSes it runs on (the family tables' rows, [`crate::table`]),
//! its one line (the row's doc, per OS), its parameters (the JSON Schema derived from its
//! params type: field doc comments are the descriptions, `required` and `default` come from
//! the type) and its examples (`examples.toml` next to this file: `[[tasks]]` entries a plan
//! can hold as written; `tests/reference.rs` validates each one as a plan task).

use crate::table::{Family, Row};
use kwin_engine::transport::Shell;
use serde_json::Value;

/// The examples, one `[[tasks]]` entry each; the module they use is their `module` key.
pub const EXAMPLES: &str = include_str!("examples.toml");

/// An OS a module runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Os {
    Linux,
    Windows,
}

impl Os {
    pub fn name(self) -> &'static str {
        match self {
            Os::Linux => "Linux",
            Os::Windows => "Windows",
        }
    }

    fn of(shell: Shell) -> Os {
        match shell {
            Shell::Posix => Os::Linux,
            Shell::PowerShell => Os::Windows,
        }
    }
}

/// One parameter of a module.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: String,
    /// The type as a reader writes it in TOML (`string`, `list of string`, `"in" | "out"`).
    pub ty: String,
    pub required: bool,
    /// The default the params type declares (as TOML), if it declares one.
    pub default: Option<String>,
    /// The field's doc comment, on one line.
    pub description: String,
}

/// One module of the reference.
#[derive(Debug, Clone, PartialEq)]
pub struct ModuleDoc {
    pub name: &'static str,
    /// What the module manages, per OS it runs on (each row's own line).
    pub lines: Vec<(Os, &'static str)>,
    /// Linux, Windows or Kubernetes: the table the module is in (its first row's).
    pub family: Family,
    pub params: Vec<Param>,
    /// `[[tasks]]` entries, as written in `examples.toml`.
    pub examples: Vec<String>,
}

impl ModuleDoc {
    pub fn oses(&self) -> Vec<Os> {
        self.lines.iter().map(|(o, _)| *o).collect()
    }

    /// The module's line (the OSes' lines joined when they differ).
    pub fn line(&self) -> String {
        let mut seen: Vec<&str> = Vec::new();
        for (_, l) in &self.lines {
            if !seen.contains(l) {
                seen.push(l);
            }
        }
        if seen.len() == 1 {
            return seen[0].to_string();
        }
        self.lines
            .iter()
            .map(|(o, l)| format!("{}: {l}", o.name()))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The name of a family as the reference shows it.
pub fn family_name(f: Family) -> &'static str {
    match f {
        Family::Linux => "Linux",
        Family::Windows => "Windows",
        Family::Kube => "Kubernetes",
    }
}

/// Every module, by name.
pub fn reference() -> Vec<ModuleDoc> {
    reference_of(crate::rows())
}

/// The modules of `rows` (a table's rows, with their family), by name.
pub fn reference_of<'a>(rows: impl IntoIterator<Item = (Family, &'a Row)>) -> Vec<ModuleDoc> {
    let examples = examples();
    let mut out: Vec<ModuleDoc> = Vec::new();
    for (family, r) in rows {
        let i = match out.iter().position(|m| m.name == r.name) {
            Some(i) => i,
            None => {
                out.push(ModuleDoc {
                    name: r.name,
                    lines: Vec::new(),
                    family,
                    params: params_of(&(r.params)().to_value()),
                    examples: examples
                        .iter()
                        .filter(|(m, _)| m == r.name)
                        .map(|(_, t)| t.clone())
                        .collect(),
                });
                out.len() - 1
            }
        };
        for s in r.shells {
            let os = Os::of(*s);
            if !out[i].lines.iter().any(|(o, _)| *o == os) {
                out[i].lines.push((os, r.doc));
            }
        }
    }
    for m in &mut out {
        m.lines.sort_by_key(|(o, _)| *o);
    }
    out.sort_by_key(|m| m.name);
    out
}

/// The module `name`, or an error naming the closest module.
pub fn find(name: &str) -> Result<ModuleDoc, String> {
    let all = reference();
    if let Some(m) = all.iter().find(|m| m.name == name) {
        return Ok(m.clone());
    }
    let hint = kwin_engine::diag::did_you_mean(name, all.iter().map(|m| m.name))
        .map(|s| format!("; did you mean `{s}`?"))
        .unwrap_or_default();
    Err(format!(
        "unknown module `{name}`{hint} (`kwin modules` lists them)"
    ))
}

/// `examples.toml` split into its `[[tasks]]` entries: (module, the entry's text).
/// An entry without a `module` string gets an empty name (the tests report it).
pub fn examples() -> Vec<(String, String)> {
    let mut blocks: Vec<String> = Vec::new();
    for line in EXAMPLES.lines() {
        if line.trim() == "[[tasks]]" {
            blocks.push(String::new());
        }
        if let Some(b) = blocks.last_mut() {
            b.push_str(line);
            b.push('\n');
        }
    }
    blocks
        .into_iter()
        .map(|b| {
            let text = b.trim_end().to_string();
            let module = toml_module(&text).unwrap_or_default();
            (module, text)
        })
        .collect()
}

fn toml_module(entry: &str) -> Option<String> {
    let doc: toml::Table = toml::from_str(entry).ok()?;
    let task = doc.get("tasks")?.as_array()?.first()?;
    Some(task.get("module")?.as_str()?.to_string())
}

/// The parameters of a params schema, in the schema's order (by name).
fn params_of(schema: &Value) -> Vec<Param> {
    let defs = schema.get("$defs").cloned().unwrap_or(Value::Null);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    props
        .iter()
        .map(|(name, p)| Param {
            name: name.clone(),
            ty: type_of(p, &defs, 0),
            required: required.contains(&name.as_str()),
            default: p.get("default").map(toml_value),
            description: one_line(p.get("description").and_then(Value::as_str).unwrap_or("")),
        })
        .collect()
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A JSON value as TOML writes it (defaults are scalars and small lists).
fn toml_value(v: &Value) -> String {
    match v {
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(toml_value).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(o) => format!(
            "{{ {} }}",
            o.iter()
                .map(|(k, v)| format!("{k} = {}", toml_value(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Null => "none".into(),
        v => v.to_string(),
    }
}

/// A schema's type in the words a plan's author uses; `null` (an unset optional) left out.
fn type_of(s: &Value, defs: &Value, depth: usize) -> String {
    if depth > 8 {
        return "any".into();
    }
    let Some(o) = s.as_object() else {
        return "any".into();
    };
    if let Some(r) = o.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or("");
        return match defs.get(name) {
            Some(d) => type_of(d, defs, depth + 1),
            None => "any".into(),
        };
    }
    if let Some(c) = o.get("const") {
        return c.to_string();
    }
    if let Some(e) = o.get("enum").and_then(Value::as_array) {
        return e
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(" | ");
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(a) = o.get(key).and_then(Value::as_array) {
            let parts: Vec<String> = a
                .iter()
                .filter(|b| b.get("type") != Some(&Value::String("null".into())))
                .map(|b| type_of(b, defs, depth + 1))
                .collect();
            return dedup(parts).join(" | ");
        }
    }
    let types: Vec<&str> = match o.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    let parts: Vec<String> = types
        .iter()
        .filter(|t| **t != "null")
        .map(|t| match *t {
            "array" => match o.get("items") {
                Some(i) => format!("list of {}", type_of(i, defs, depth + 1)),
                None => "list".into(),
            },
            "object" => match o.get("properties").and_then(Value::as_object) {
                Some(p) => {
                    let req: Vec<&str> = o
                        .get("required")
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    let keys: Vec<String> = p
                        .keys()
                        .map(|k| {
                            if req.contains(&k.as_str()) {
                                k.clone()
                            } else {
                                format!("{k}?")
                            }
                        })
                        .collect();
                    format!("{{ {} }}", keys.join(", "))
                }
                None => match o.get("additionalProperties") {
                    Some(v @ Value::Object(_)) => {
                        format!("table of {}", type_of(v, defs, depth + 1))
                    }
                    _ => "table".into(),
                },
            },
            t => t.to_string(),
        })
        .collect();
    if parts.is_empty() {
        "any".into()
    } else {
        dedup(parts).join(" | ")
    }
}

fn dedup(v: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in v {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// The modules that run on `os`, each with the line for that OS.
pub fn on_os(all: &[ModuleDoc], os: Os) -> Vec<(&'static str, &'static str)> {
    all.iter()
        .filter_map(|m| {
            m.lines
                .iter()
                .find(|(o, _)| *o == os)
                .map(|(_, l)| (m.name, *l))
        })
        .collect()
}

/// `kwin modules`: per OS, one line per module.
pub fn list_text() -> String {
    let all = reference();
    let mut out = String::new();
    for os in [Os::Linux, Os::Windows] {
        let mods = on_os(&all, os);
        let width = mods.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
        out.push_str(&format!("{} hosts:\n", os.name()));
        for (name, line) in mods {
            out.push_str(&format!("  {name:width$}  {line}\n"));
        }
        out.push('\n');
    }
    out.push_str("`kwin doc MODULE` shows a module's parameters and examples.\n");
    out
}

fn default_text(p: &Param) -> String {
    match (&p.default, p.required) {
        (_, true) => "required".into(),
        (Some(d), false) => format!("default {d}"),
        (None, false) => "optional".into(),
    }
}

/// `kwin doc MODULE`: the module's line, OSes, parameters and examples as terminal text.
pub fn doc_text(m: &ModuleDoc) -> String {
    let oses: Vec<&str> = m.oses().iter().map(|o| o.name()).collect();
    let mut out = format!("{} ({})\n", m.name, oses.join(", "));
    for (os, line) in &m.lines {
        if m.lines.len() > 1 && m.lines.iter().any(|(_, l)| l != line) {
            out.push_str(&format!("  {}: {line}\n", os.name()));
        } else {
            out.push_str(&format!("  {line}\n"));
            break;
        }
    }
    out.push_str("\nParameters:\n");
    if m.params.is_empty() {
        out.push_str("  (none)\n");
    }
    for p in &m.params {
        out.push_str(&format!("  {}  {}, {}\n", p.name, p.ty, default_text(p)));
        if !p.description.is_empty() {
            out.push_str(&format!("      {}\n", p.description));
        }
    }
    out.push_str("\nExamples:\n");
    for e in &m.examples {
        for l in e.lines() {
            out.push_str(&format!("  {l}\n").replace("  \n", "\n"));
        }
        out.push('\n');
    }
    out
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// `docs/modules.md`: every module's line, OSes, parameter table and examples.
pub fn markdown() -> String {
    markdown_of(&reference())
}

/// [`markdown`] of the modules `all`.
pub fn markdown_of(all: &[ModuleDoc]) -> String {
    let mut out = String::from(
        "<!-- Generated from the module tables, the params types and \
         modules/src/examples.toml; do not edit.\n     \
         Regenerate: KWIN_BLESS=1 cargo test -p kwin-modules --test reference -->\n\
         # Modules\n\n\
         A task of the plan (`[[tasks]]`) names one module and gives its `params`. The same \
         reference is printed by `kwin modules` (the list) and `kwin doc MODULE` (one module).\n\n",
    );
    for os in [Os::Linux, Os::Windows] {
        out.push_str(&format!("## {} hosts\n\n", os.name()));
        out.push_str("| module | what it manages |\n|---|---|\n");
        for (name, line) in on_os(all, os) {
            out.push_str(&format!("| [`{name}`](#{name}) | {} |\n", md_cell(line)));
        }
        out.push('\n');
    }
    out.push_str("## Reference\n");
    for m in all {
        let oses: Vec<&str> = m.oses().iter().map(|o| o.name()).collect();
        out.push_str(&format!("\n### {}\n\n", m.name));
        out.push_str(&format!(
            "On {} hosts: {}.\n\n",
            oses.join(" and "),
            m.line()
        ));
        if m.params.is_empty() {
            out.push_str("No parameters.\n\n");
        } else {
            out.push_str("| parameter | type | required / default | description |\n");
            out.push_str("|---|---|---|---|\n");
            for p in &m.params {
                out.push_str(&format!(
                    "| `{}` | {} | {} | {} |\n",
                    p.name,
                    md_cell(&p.ty),
                    md_cell(&default_text(p)),
                    md_cell(&p.description)
                ));
            }
            out.push('\n');
        }
        for e in &m.examples {
            out.push_str(&format!("```toml\n{e}\n```\n\n"));
        }
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

/// The module list of docs/plan.md (between `<!-- modules:begin -->` and
/// `<!-- modules:end -->`) of `rows`: per family, its modules' names, sorted, wrapped as
/// the page's lines.
pub fn plan_list_of<'a>(rows: impl IntoIterator<Item = (Family, &'a Row)>) -> String {
    let rows: Vec<(Family, &Row)> = rows.into_iter().collect();
    let mut words: Vec<String> = Vec::new();
    let families = [Family::Linux, Family::Windows, Family::Kube];
    for (i, family) in families.iter().enumerate() {
        let mut names: Vec<&str> = rows
            .iter()
            .filter(|(f, _)| f == family)
            .map(|(_, r)| r.name)
            .collect();
        names.sort_unstable();
        names.dedup();
        let last = if i + 1 == families.len() { "." } else { ";" };
        for (k, n) in names.iter().enumerate() {
            let head = if k == 0 {
                format!("{} ", family_name(*family))
            } else {
                String::new()
            };
            let tail = if k + 1 == names.len() { last } else { "," };
            words.push(format!("{head}`{n}`{tail}"));
        }
    }
    // A family's name stays on the line of its first module.
    let mut out = String::new();
    let mut line = String::new();
    for w in words {
        if !line.is_empty() && line.len() + 1 + w.len() > 96 {
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&w);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// docs/plan.md's text `page` with its module list made [`plan_list_of`] `rows`; `None`
/// without the markers.
pub fn plan_page_with_list<'a>(
    page: &str,
    rows: impl IntoIterator<Item = (Family, &'a Row)>,
) -> Option<String> {
    let begin = "<!-- modules:begin -->\n";
    let start = page.find(begin)? + begin.len();
    let end = page.find("<!-- modules:end -->")?;
    let list = plan_list_of(rows);
    (start <= end).then(|| format!("{}{list}{}", &page[..start], &page[end..]))
}
