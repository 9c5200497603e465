//! The structural pass: a document walked against a JSON Schema.
//!
//! serde stops at the first unknown key or wrong type; this pass reports every one of them,
//! each at its key or value. It is driven by a schema generated from the types serde reads
//! (`$ref`s resolved, `anyOf`/`oneOf` tried branch by branch), so those types stay the single
//! source of what a document may say. Two kinds of document are walked ([`Doc`]): the plan
//! file as parsed (TOML with spans, against the schema of `model.rs`, [`check`]) and a task's
//! rendered params (JSON, against its module's params schema, [`check_value`], from the build
//! phase: `module::build`).
//!
//! Each finding names what to cut from the document so the rest can still be deserialized
//! and validated: the offending key, unless the key is required (then the finding is fatal
//! and validation stops after the structural pass).

use super::spans::{PlanPath, Seg};
use crate::diag::{did_you_mean, Diagnostic};
use serde_json::{Map, Value};
use toml::de::{DeTable, DeValue};

/// What the walker sees of a document's value.
pub enum View<'a, D: ?Sized> {
    String(&'a str),
    /// An integer: its value (`None` beyond `i128`) and how it was written.
    Integer(Option<i128>, String),
    Float,
    Boolean,
    Datetime,
    /// JSON's `null` (TOML has none).
    Null,
    Array(Vec<&'a D>),
    Table(Vec<(&'a str, &'a D)>),
}

/// A document the walker can read.
pub trait Doc {
    fn view(&self) -> View<'_, Self>;
}

impl Doc for DeValue<'_> {
    fn view(&self) -> View<'_, Self> {
        match self {
            DeValue::String(s) => View::String(s.as_ref()),
            DeValue::Integer(n) => {
                let digits = n.as_str().replace('_', "");
                View::Integer(
                    i128::from_str_radix(&digits, n.radix()).ok(),
                    n.as_str().to_string(),
                )
            }
            DeValue::Float(_) => View::Float,
            DeValue::Boolean(_) => View::Boolean,
            DeValue::Datetime(_) => View::Datetime,
            DeValue::Array(items) => View::Array(items.iter().map(|i| i.get_ref()).collect()),
            DeValue::Table(t) => View::Table(entries(t)),
        }
    }
}

impl Doc for Value {
    fn view(&self) -> View<'_, Self> {
        match self {
            Value::String(s) => View::String(s),
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => View::Integer(Some(i.into()), n.to_string()),
                (_, Some(u)) => View::Integer(Some(u.into()), n.to_string()),
                _ => View::Float,
            },
            Value::Bool(_) => View::Boolean,
            Value::Null => View::Null,
            Value::Array(items) => View::Array(items.iter().collect()),
            Value::Object(m) => View::Table(m.iter().map(|(k, v)| (k.as_str(), v)).collect()),
        }
    }
}

fn entries<'a, 'd>(t: &'a DeTable<'d>) -> Vec<(&'a str, &'a DeValue<'d>)> {
    t.iter()
        .map(|(k, v)| (k.get_ref().as_ref(), v.get_ref()))
        .collect()
}

/// Where in the source a finding points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// The key of the entry at the path (unknown keys).
    Key,
    /// The value at the path (wrong types, bad values; for a missing key, its table).
    Value,
}

#[derive(Debug, Clone)]
pub struct Finding {
    pub path: PlanPath,
    pub anchor: Anchor,
    pub diag: Diagnostic,
    /// The key to remove from the document so deserialization can go on; `None` when the
    /// problem cannot be cut out (a required key is missing or wrong).
    pub prune: Option<PlanPath>,
}

/// Walk `doc` against `schema` (the plan's root schema); every structural problem found.
pub fn check(doc: &DeTable<'_>, schema: &Value) -> Vec<Finding> {
    let mut w = Walker {
        root: schema,
        out: Vec::new(),
    };
    w.table(entries(doc), schema, &PlanPath::root());
    w.out
}

/// Walk `value`, found at `at`, against `schema` (a root schema: its `$defs` resolve its
/// `$ref`s); every structural problem found, at paths under `at`.
pub fn check_value<D: Doc>(value: &D, schema: &Value, at: &PlanPath) -> Vec<Finding> {
    let mut w = Walker {
        root: schema,
        out: Vec::new(),
    };
    let t = Target {
        path: at.clone(),
        required: true,
    };
    w.value(value, schema, at, &t);
    w.out
}

/// Remove every prunable path of `findings` from `doc`.
pub fn prune(doc: &mut DeTable<'_>, findings: &[Finding]) {
    for f in findings {
        if let Some(p) = &f.prune {
            remove_path(doc, &p.0);
        }
    }
}

fn remove_path(table: &mut DeTable<'_>, segs: &[Seg]) {
    match segs {
        [Seg::Key(k)] => {
            table.remove(k.as_str());
        }
        [Seg::Key(k), rest @ ..] => {
            if let Some(v) = table.get_mut(k.as_str()) {
                remove_in_value(v.get_mut(), rest);
            }
        }
        _ => {}
    }
}

fn remove_in_value(v: &mut DeValue<'_>, segs: &[Seg]) {
    match (v, segs.first()) {
        (DeValue::Table(t), Some(Seg::Key(_))) => remove_path(t, segs),
        (DeValue::Array(a), Some(Seg::Index(i))) => {
            if let Some(item) = a.get_mut(*i) {
                remove_in_value(item.get_mut(), &segs[1..]);
            }
        }
        _ => {}
    }
}

/// The key a problem below it would be cut at, and whether that key is required.
#[derive(Debug, Clone)]
struct Target {
    path: PlanPath,
    required: bool,
}

struct Walker<'s> {
    root: &'s Value,
    out: Vec<Finding>,
}

fn found<D: ?Sized>(v: &View<'_, D>) -> &'static str {
    match v {
        View::String(_) => "a string",
        View::Integer(..) => "an integer",
        View::Float => "a float",
        View::Boolean => "a boolean",
        View::Datetime => "a datetime",
        View::Null => "null",
        View::Array(_) => "an array",
        View::Table(_) => "a table",
    }
}

fn type_phrase(t: &str) -> &'static str {
    match t {
        "string" => "a string",
        "integer" => "an integer",
        "number" => "a number",
        "boolean" => "a boolean",
        "object" => "a table",
        "array" => "an array",
        _ => "a value",
    }
}

fn kind_matches<D: ?Sized>(v: &View<'_, D>, t: &str) -> bool {
    matches!(
        (t, v),
        ("string", View::String(_))
            | ("integer", View::Integer(..))
            | ("number", View::Integer(..) | View::Float)
            | ("boolean", View::Boolean)
            | ("object", View::Table(_))
            | ("array", View::Array(_))
    )
}

/// Whether `s` (resolved) lets a value be `null`: `type` names it, or a branch of
/// `anyOf`/`oneOf` is the null schema, or it constrains nothing.
fn allows_null(s: &Value, resolve: &dyn Fn(&Value) -> Value) -> bool {
    match s {
        Value::Bool(b) => *b,
        Value::Object(o) => {
            if let Some(t) = o.get("type") {
                return match t {
                    Value::String(t) => t == "null",
                    Value::Array(ts) => ts.iter().any(|t| t == "null"),
                    _ => false,
                };
            }
            if let Some(bs) = o
                .get("anyOf")
                .or_else(|| o.get("oneOf"))
                .and_then(Value::as_array)
            {
                return bs.iter().any(|b| allows_null(&resolve(b), resolve));
            }
            !["$ref", "enum", "const", "properties"]
                .iter()
                .any(|k| o.contains_key(*k))
        }
        _ => false,
    }
}

/// The non-null types a schema names in `type`.
fn types(s: &Value) -> Vec<&str> {
    match s.get("type") {
        Some(Value::String(t)) if t != "null" => vec![t.as_str()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect(),
        _ => Vec::new(),
    }
}

fn is_null_schema(s: &Value) -> bool {
    s.get("type").and_then(Value::as_str) == Some("null")
}

/// Where a key is, in messages: "in `hosts[0]`", "at the top level".
fn place(path: &PlanPath) -> String {
    if path.is_root() {
        "at the top level".to_string()
    } else {
        format!("in `{path}`")
    }
}

/// Where a key of a schema definition lives in a plan, for "belongs in" hints.
fn section_of(def: &str) -> Option<&'static str> {
    Some(match def {
        "Cluster" => "[cluster]",
        "Cni" => "[cni]",
        "Runtime" => "[runtime]",
        "Versions" => "[versions]",
        "Artifacts" => "[artifacts]",
        "Proxy" => "[proxy]",
        "Settings" => "[settings]",
        "Host" => "[[hosts]]",
        "Connection" => "[defaults.linux], [defaults.windows] or [[hosts]]",
        "UserTask" => "[[tasks]]",
        "Selector" => "the `on` table of [[tasks]]",
        _ => return None,
    })
}

fn int_range(s: &Value) -> (i128, i128) {
    let (mut lo, mut hi) = match s.get("format").and_then(Value::as_str) {
        Some("uint8") => (0, u8::MAX as i128),
        Some("uint16") => (0, u16::MAX as i128),
        Some("uint32") => (0, u32::MAX as i128),
        Some("uint64" | "uint") => (0, u64::MAX as i128),
        Some("int8") => (i8::MIN as i128, i8::MAX as i128),
        Some("int16") => (i16::MIN as i128, i16::MAX as i128),
        Some("int32") => (i32::MIN as i128, i32::MAX as i128),
        _ => (i64::MIN as i128, i64::MAX as i128),
    };
    if let Some(m) = s.get("minimum").and_then(Value::as_f64) {
        lo = lo.max(m as i128);
    }
    if let Some(m) = s.get("maximum").and_then(Value::as_f64) {
        hi = hi.min(m as i128);
    }
    (lo, hi)
}

impl<'s> Walker<'s> {
    fn resolve(&self, mut s: &'s Value) -> &'s Value {
        for _ in 0..32 {
            let Some(r) = s.get("$ref").and_then(Value::as_str) else {
                break;
            };
            let Some(name) = r.strip_prefix("#/$defs/") else {
                break;
            };
            match self.root.get("$defs").and_then(|d| d.get(name)) {
                Some(next) => s = next,
                None => break,
            }
        }
        s
    }

    fn push(&mut self, path: &PlanPath, anchor: Anchor, diag: Diagnostic, target: &Target) {
        self.out.push(Finding {
            path: path.clone(),
            anchor,
            diag,
            prune: (!target.required).then(|| target.path.clone()),
        });
    }

    fn silent_errors<D: Doc + ?Sized>(&self, v: &D, s: &'s Value) -> bool {
        let mut w = Walker {
            root: self.root,
            out: Vec::new(),
        };
        let t = Target {
            path: PlanPath::root(),
            required: true,
        };
        w.value(v, s, &PlanPath::root(), &t);
        !w.out.is_empty()
    }

    fn value<D: Doc + ?Sized>(
        &mut self,
        v: &D,
        schema: &'s Value,
        path: &PlanPath,
        target: &Target,
    ) {
        let s = self.resolve(schema);
        let view = v.view();
        if let View::Null = view {
            let resolve = |x: &Value| self.resolve(x).clone();
            if !allows_null(s, &resolve) {
                let ts: Vec<&str> = types(s).into_iter().map(type_phrase).collect();
                let expected = if ts.is_empty() {
                    "a value".to_string()
                } else {
                    ts.join(" or ")
                };
                self.wrong_type(&view, &expected, path, target);
            }
            return;
        }
        match s {
            Value::Bool(true) => return,
            Value::Bool(false) => {
                let d = Diagnostic::error("unknown-key", format!("`{path}` is not allowed here"));
                self.push(path, Anchor::Key, d, target);
                return;
            }
            _ => {}
        }
        if let Some(branches) = s
            .get("anyOf")
            .or_else(|| s.get("oneOf"))
            .and_then(Value::as_array)
        {
            let instead = s.get("x-kwin-instead").and_then(Value::as_object);
            self.branches(v, branches, path, target, instead);
            return;
        }
        if let Some(allowed) = s.get("enum").and_then(Value::as_array) {
            let allowed: Vec<&str> = allowed.iter().filter_map(Value::as_str).collect();
            let instead = s.get("x-kwin-instead").and_then(Value::as_object);
            self.one_of_strings_in(&view, &allowed, path, target, instead);
            return;
        }
        if let Some(c) = s.get("const").and_then(Value::as_str) {
            self.one_of_strings(&view, &[c], path, target);
            return;
        }
        let ts = types(s);
        if ts.is_empty() {
            return;
        }
        let Some(t) = ts.iter().copied().find(|t| kind_matches(&view, t)) else {
            let expected: Vec<&str> = ts.iter().map(|t| type_phrase(t)).collect();
            self.wrong_type(&view, &expected.join(" or "), path, target);
            return;
        };
        match (t, view) {
            ("object", View::Table(table)) => self.table(table, s, path),
            ("array", View::Array(items)) => {
                if let Some(item_schema) = s.get("items") {
                    for (i, item) in items.into_iter().enumerate() {
                        self.value(item, item_schema, &path.index(i), target);
                    }
                }
            }
            ("integer", View::Integer(x, n)) => {
                let (lo, hi) = int_range(s);
                let ok = x.is_some_and(|x| x >= lo && x <= hi);
                if !ok {
                    let range = if hi >= i64::MAX as i128 {
                        format!("at least {lo}")
                    } else {
                        format!("{lo} to {hi}")
                    };
                    let d = Diagnostic::error(
                        "out-of-range",
                        format!("`{path}` = {n} is out of range ({range})"),
                    );
                    self.push(path, Anchor::Value, d, target);
                }
            }
            ("string", View::String(text)) if s.get("x-kwin-duration").is_some() => {
                self.duration(text, s, path, target);
            }
            _ => {}
        }
    }

    /// A duration written as a string (`x-kwin-duration`): the grammar of the CLI's
    /// `--timeout`, and the schema's `minimum` in seconds.
    fn duration(&mut self, text: &str, s: &Value, path: &PlanPath, target: &Target) {
        let (lo, _) = int_range(s);
        let d = match super::syntax::duration_secs(text) {
            Some(secs) if i128::from(secs) >= lo => return,
            Some(_) => Diagnostic::error(
                "out-of-range",
                format!("`{path}` = \"{text}\" is out of range (at least {lo} s)"),
            ),
            None => Diagnostic::error(
                "bad-duration",
                format!("`{path}` = \"{text}\" is not a duration"),
            )
            .with_hint(
                "write seconds (600) or numbers with h, m or s, as for --timeout: \"90s\", \"10m\", \"1h30m\"",
            ),
        };
        self.push(path, Anchor::Value, d, target);
    }

    fn wrong_type<D: ?Sized>(
        &mut self,
        v: &View<'_, D>,
        expected: &str,
        path: &PlanPath,
        target: &Target,
    ) {
        let mut d = Diagnostic::error(
            "wrong-type",
            format!("`{path}`: expected {expected}, found {}", found(v)),
        );
        match (expected, v) {
            ("a string", View::Integer(..) | View::Float | View::Boolean) => {
                d = d.with_hint("put the value in quotes");
            }
            ("an integer", View::String(s)) if s.trim().parse::<i64>().is_ok() => {
                d = d.with_hint(format!("remove the quotes: {}", s.trim()));
            }
            ("a boolean", View::String(s)) if matches!(*s, "true" | "false") => {
                d = d.with_hint(format!("remove the quotes: {s}"));
            }
            ("a boolean", _) => d = d.with_hint("write true or false"),
            ("an array", View::Table(_)) => {
                let name = path.last_key().unwrap_or("...");
                d = d.with_hint(format!("write [[{name}]] (double brackets) for each entry"));
            }
            _ => {}
        }
        self.push(path, Anchor::Value, d, target);
    }

    fn one_of_strings<D: ?Sized>(
        &mut self,
        v: &View<'_, D>,
        allowed: &[&str],
        path: &PlanPath,
        t: &Target,
    ) {
        self.one_of_strings_in(v, allowed, path, t, None)
    }

    /// [`Walker::one_of_strings`] with the schema's `x-kwin-instead` (what a word other
    /// tools use means here) for its hint.
    fn one_of_strings_in<D: ?Sized>(
        &mut self,
        v: &View<'_, D>,
        allowed: &[&str],
        path: &PlanPath,
        t: &Target,
        instead: Option<&Map<String, Value>>,
    ) {
        let View::String(got) = v else {
            self.wrong_type(v, "a string", path, t);
            return;
        };
        if allowed.contains(got) {
            return;
        }
        let quoted: Vec<String> = allowed.iter().map(|a| format!("\"{a}\"")).collect();
        let hint = match (
            instead.and_then(|m| m.get(*got)).and_then(Value::as_str),
            did_you_mean(got, allowed.iter().copied()),
        ) {
            (Some(why), _) => format!("{why}; expected one of {}", quoted.join(", ")),
            (None, Some(s)) => format!("did you mean \"{s}\"?"),
            (None, None) => format!("expected one of {}", quoted.join(", ")),
        };
        let d = Diagnostic::error(
            "unknown-value",
            format!("`{path}`: unknown value \"{got}\""),
        )
        .with_hint(hint);
        self.push(path, Anchor::Value, d, t);
    }

    fn branches<D: Doc + ?Sized>(
        &mut self,
        v: &D,
        branches: &'s [Value],
        path: &PlanPath,
        t: &Target,
        instead: Option<&'s Map<String, Value>>,
    ) {
        let live: Vec<&'s Value> = branches
            .iter()
            .map(|b| self.resolve(b))
            .filter(|b| !is_null_schema(b))
            .collect();
        if let [only] = live.as_slice() {
            return self.value(v, only, path, t);
        }
        // Branches that are each one string or a list of strings (a documented variant
        // becomes a `const` branch of its own beside the others' `enum`): one list.
        let consts: Option<Vec<Vec<&str>>> = live
            .iter()
            .map(|b| match (b.get("const"), b.get("enum")) {
                (Some(Value::String(c)), _) => Some(vec![c.as_str()]),
                (_, Some(Value::Array(e))) => e.iter().map(Value::as_str).collect(),
                _ => None,
            })
            .collect();
        if let Some(consts) = consts {
            let all: Vec<&str> = consts.into_iter().flatten().collect();
            return self.one_of_strings_in(&v.view(), &all, path, t, instead);
        }
        if live.iter().any(|b| !self.silent_errors(v, b)) {
            return;
        }
        let view = v.view();
        let same_kind: Vec<&'s Value> = live
            .iter()
            .copied()
            .filter(|b| types(b).iter().any(|ty| kind_matches(&view, ty)))
            .collect();
        if let [one] = same_kind.as_slice() {
            return self.value(v, one, path, t);
        }
        let mut expected: Vec<&str> = live
            .iter()
            .flat_map(|b| types(b))
            .map(type_phrase)
            .collect();
        expected.dedup();
        self.wrong_type(&view, &expected.join(" or "), path, t);
    }

    fn table<D: Doc + ?Sized>(&mut self, table: Vec<(&str, &D)>, s: &'s Value, path: &PlanPath) {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        let props = s
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or_else(|| EMPTY.get_or_init(Map::new));
        let required: Vec<&str> = s
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for (key, v) in &table {
            let key = *key;
            let child = path.key(key);
            if let Some(ps) = props.get(key) {
                let t = Target {
                    path: child.clone(),
                    required: required.contains(&key),
                };
                self.value(*v, ps, &child, &t);
                continue;
            }
            match s.get("additionalProperties") {
                Some(Value::Bool(false)) => {
                    let instead = s.get("x-kwin-instead").and_then(Value::as_object);
                    self.unknown_key(key, props, instead, path, &child)
                }
                Some(extra @ Value::Object(_)) => {
                    let t = Target {
                        path: child.clone(),
                        required: false,
                    };
                    self.value(*v, extra, &child, &t);
                }
                _ => {}
            }
        }
        for r in required {
            if !table.iter().any(|(k, _)| *k == r) {
                let d =
                    Diagnostic::error("missing-key", format!("missing key `{r}` {}", place(path)))
                        .with_hint(format!("add {r} = ..."));
                // Cutting the whole table would only trade this for other errors.
                let fatal = Target {
                    path: path.clone(),
                    required: true,
                };
                self.push(path, Anchor::Value, d, &fatal);
            }
        }
    }

    fn unknown_key(
        &mut self,
        key: &str,
        props: &Map<String, Value>,
        instead: Option<&Map<String, Value>>,
        table: &PlanPath,
        child: &PlanPath,
    ) {
        let t = Target {
            path: child.clone(),
            required: false,
        };
        if key == "password" && props.contains_key("password_env") {
            let d = Diagnostic::error(
                "plain-password",
                "passwords are not allowed in the plan text",
            )
            .with_hint(
                "use password_env = \"VAR\" (an environment variable) or password_file = \"path\"",
            );
            self.push(child, Anchor::Key, d, &t);
            return;
        }
        let names: Vec<&str> = props.keys().map(String::as_str).collect();
        let said = instead.and_then(|m| m.get(key)).and_then(Value::as_str);
        let hint = match said.map(str::to_string).or_else(|| {
            did_you_mean(key, names.iter().copied()).map(|s| format!("did you mean `{s}`?"))
        }) {
            Some(h) => h,
            None => match self.home_of(key) {
                Some(section) => format!("`{key}` is a key of {section}"),
                None => format!("expected one of: {}", names.join(", ")),
            },
        };
        let d = Diagnostic::error(
            "unknown-key",
            format!("unknown key `{key}` {}", place(table)),
        )
        .with_hint(hint);
        self.push(child, Anchor::Key, d, &t);
    }

    /// The section whose schema has a key named `key`, if exactly one does.
    fn home_of(&self, key: &str) -> Option<&'static str> {
        let defs = self.root.get("$defs")?.as_object()?;
        let mut homes: Vec<&'static str> = defs
            .iter()
            .filter(|(_, d)| d.get("properties").and_then(|p| p.get(key)).is_some())
            .filter_map(|(name, _)| section_of(name))
            .collect();
        // A connection key is on both Connection and the flattened Host.
        if homes.len() == 2 && homes.contains(&"[[hosts]]") {
            homes.retain(|h| *h != "[[hosts]]");
        }
        match homes.as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::schema::schema_value;

    fn findings(text: &str) -> Vec<(String, &'static str, String)> {
        let (doc, errors) = DeTable::parse_recoverable(text);
        assert!(errors.is_empty(), "{errors:?}");
        check(doc.get_ref(), schema_value())
            .into_iter()
            .map(|f| (f.path.to_string(), f.diag.code, f.diag.summary))
            .collect()
    }

    #[test]
    fn reports_every_unknown_key_and_wrong_type() {
        let f = findings(
            "clutser = 1\n[[hosts]]\nname = \"a\"\nadress = \"x\"\nport = \"22\"\n\
             [[hosts]]\nname = \"b\"\nos = \"linuks\"\ntaints = [1]\nlabels = { a = 2 }\n",
        );
        let codes: Vec<(&str, &str)> = f.iter().map(|(p, c, _)| (p.as_str(), *c)).collect();
        assert!(codes.contains(&("clutser", "unknown-key")), "{f:?}");
        assert!(codes.contains(&("hosts[0].adress", "unknown-key")));
        assert!(codes.contains(&("hosts[0].port", "wrong-type")));
        assert!(codes.contains(&("hosts[1].os", "unknown-value")));
        assert!(codes.contains(&("hosts[1].taints[0]", "wrong-type")));
        assert!(codes.contains(&("hosts[1].labels.a", "wrong-type")));
        assert_eq!(f.len(), 6, "{f:?}");
    }

    #[test]
    fn ranges_required_keys_and_plain_passwords_are_reported() {
        let f = findings(
            "[cluster]\nname = \"c\"\nmax_pods_per_node = -1\n[cni]\nport = 70000\n\
             [[hosts]]\nname = \"a\"\npassword = \"hunter2\"\n",
        );
        let codes: Vec<(&str, &str)> = f.iter().map(|(p, c, _)| (p.as_str(), *c)).collect();
        assert!(codes.contains(&("cluster", "missing-key")), "{f:?}");
        assert!(codes.contains(&("cluster.max_pods_per_node", "out-of-range")));
        assert!(codes.contains(&("cni.port", "out-of-range")));
        assert!(codes.contains(&("cni", "missing-key")));
        assert!(codes.contains(&("hosts[0].password", "plain-password")));
    }

    #[test]
    fn prunes_optional_keys_only() {
        let text = "[[hosts]]\nname = 5\nport = \"x\"\nfoo = 1\n";
        let (mut doc, _) = DeTable::parse_recoverable(text);
        let fs = check(doc.get_ref(), schema_value());
        let prunable: Vec<String> = fs
            .iter()
            .filter_map(|f| f.prune.as_ref().map(|p| p.to_string()))
            .collect();
        assert_eq!(prunable, ["hosts[0].foo", "hosts[0].port"]);
        assert!(fs
            .iter()
            .any(|f| f.prune.is_none() && f.path.to_string() == "hosts[0].name"));
        prune(doc.get_mut(), &fs);
        let left = check(doc.get_ref(), schema_value());
        assert_eq!(left.len(), 1, "only the required name is left: {left:?}");
    }

    #[test]
    fn misplaced_key_names_its_section() {
        let (doc, _) = DeTable::parse_recoverable("pod_cidr = \"10.0.0.0/16\"\n");
        let f = check(doc.get_ref(), schema_value());
        assert_eq!(
            f[0].diag.hint.as_deref(),
            Some("`pod_cidr` is a key of [cluster]")
        );
    }
}
