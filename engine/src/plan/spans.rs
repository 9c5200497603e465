//! Source spans of every key and value in a TOML document, by path.
//!
//! A path names one value in the plan: `hosts[2].address`, `cluster.pod_cidr`,
//! `hosts[0].labels."node.kubernetes.io/windows-build"`. Keys that are not bare TOML keys
//! (letters, digits, `_`, `-`) are quoted, so a path always splits back into the same
//! segments. [`SpanIndex`] maps every path of a parsed document to the byte range of its key
//! and of its value; lookups fall back to the nearest ancestor so a diagnostic about a value
//! that is absent (a missing key) still points into the right table.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use toml::de::{DeTable, DeValue};

/// One step of a path: a table key or an array index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A path into the plan document.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PlanPath(pub Vec<Seg>);

impl PlanPath {
    pub fn root() -> Self {
        PlanPath(Vec::new())
    }

    /// This path with a key appended.
    pub fn key(&self, k: &str) -> Self {
        let mut p = self.clone();
        p.0.push(Seg::Key(k.to_string()));
        p
    }

    /// This path with an array index appended.
    pub fn index(&self, i: usize) -> Self {
        let mut p = self.clone();
        p.0.push(Seg::Index(i));
        p
    }

    pub fn parent(&self) -> Option<PlanPath> {
        let mut p = self.clone();
        p.0.pop().map(|_| p)
    }

    /// The last key of the path (`port` for `hosts[0].port`), if it ends in a key.
    pub fn last_key(&self) -> Option<&str> {
        match self.0.last() {
            Some(Seg::Key(k)) => Some(k),
            _ => None,
        }
    }

    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// Parse the text form back into segments. Inverse of `Display`.
    pub fn parse(s: &str) -> PlanPath {
        let mut segs = Vec::new();
        let mut chars = s.chars().peekable();
        let mut bare = String::new();
        let flush = |bare: &mut String, segs: &mut Vec<Seg>| {
            if !bare.is_empty() {
                segs.push(Seg::Key(std::mem::take(bare)));
            }
        };
        while let Some(c) = chars.next() {
            match c {
                '.' => flush(&mut bare, &mut segs),
                '[' => {
                    flush(&mut bare, &mut segs);
                    let mut num = String::new();
                    for d in chars.by_ref() {
                        if d == ']' {
                            break;
                        }
                        num.push(d);
                    }
                    match num.parse() {
                        Ok(i) => segs.push(Seg::Index(i)),
                        Err(_) => segs.push(Seg::Key(num)),
                    }
                }
                '"' => {
                    let mut key = String::new();
                    while let Some(d) = chars.next() {
                        match d {
                            '\\' => {
                                if let Some(e) = chars.next() {
                                    key.push(e);
                                }
                            }
                            '"' => break,
                            _ => key.push(d),
                        }
                    }
                    segs.push(Seg::Key(key));
                }
                _ => bare.push(c),
            }
        }
        flush(&mut bare, &mut segs);
        PlanPath(segs)
    }
}

fn is_bare_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl fmt::Display for PlanPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Index(n) => write!(f, "[{n}]")?,
                Seg::Key(k) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    if is_bare_key(k) {
                        f.write_str(k)?;
                    } else {
                        write!(f, "\"{}\"", k.replace('\\', "\\\\").replace('"', "\\\""))?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Byte ranges of every key and value of a document, by path text.
#[derive(Debug, Clone, Default)]
pub struct SpanIndex {
    values: HashMap<String, Range<usize>>,
    keys: HashMap<String, Range<usize>>,
}

impl SpanIndex {
    pub fn build(table: &DeTable<'_>) -> Self {
        let mut idx = SpanIndex::default();
        idx.walk_table(&PlanPath::root(), table);
        idx
    }

    fn walk_table(&mut self, prefix: &PlanPath, table: &DeTable<'_>) {
        for (k, v) in table.iter() {
            let path = prefix.key(k.get_ref());
            self.keys.insert(path.to_string(), k.span());
            self.walk_value(&path, v.get_ref(), v.span());
        }
    }

    fn walk_value(&mut self, path: &PlanPath, v: &DeValue<'_>, span: Range<usize>) {
        self.values.insert(path.to_string(), span);
        match v {
            DeValue::Table(t) => self.walk_table(path, t),
            DeValue::Array(a) => {
                for (i, item) in a.iter().enumerate() {
                    self.walk_value(&path.index(i), item.get_ref(), item.span());
                }
            }
            _ => {}
        }
    }

    /// Span of the value at `path`, else of the nearest ancestor that has one.
    pub fn find(&self, path: &str) -> Option<Range<usize>> {
        if let Some(s) = self.values.get(path) {
            return Some(s.clone());
        }
        let mut p = PlanPath::parse(path);
        while let Some(parent) = p.parent() {
            if let Some(s) = self.values.get(&parent.to_string()) {
                return Some(s.clone());
            }
            p = parent;
        }
        None
    }

    /// Span of the key at `path` (for unknown-key errors), else as [`SpanIndex::find`].
    pub fn key(&self, path: &str) -> Option<Range<usize>> {
        self.keys.get(path).cloned().or_else(|| self.find(path))
    }

    /// Whether the document has a value at exactly `path`.
    pub fn has(&self, path: &str) -> bool {
        self.values.contains_key(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(text: &str) -> SpanIndex {
        let (doc, errors) = DeTable::parse_recoverable(text);
        assert!(errors.is_empty(), "{errors:?}");
        SpanIndex::build(doc.get_ref())
    }

    #[test]
    fn paths_round_trip_through_text() {
        let p = PlanPath::root()
            .key("hosts")
            .index(2)
            .key("labels")
            .key("node.kubernetes.io/windows-build");
        let s = p.to_string();
        assert_eq!(s, r#"hosts[2].labels."node.kubernetes.io/windows-build""#);
        assert_eq!(PlanPath::parse(&s), p);
        let q = PlanPath::root().key("a\"b").key("c");
        assert_eq!(PlanPath::parse(&q.to_string()), q);
        assert_eq!(PlanPath::parse("cluster.pod_cidr").0.len(), 2);
    }

    #[test]
    fn finds_values_keys_and_nearest_parent() {
        let text = "[cluster]\nname = \"x\"\n\n[[hosts]]\nname = \"a\"\nlabels = { \"a.b/c\" = \"v\" }\n\n[[hosts]]\nname = \"b\"\n";
        let idx = index(text);
        let at = |r: Option<Range<usize>>| r.map(|r| &text[r]);
        assert_eq!(at(idx.find("cluster.name")), Some("\"x\""));
        assert_eq!(at(idx.key("cluster.name")), Some("name"));
        assert_eq!(at(idx.find("hosts[1].name")), Some("\"b\""));
        assert_eq!(at(idx.find(r#"hosts[0].labels."a.b/c""#)), Some("\"v\""));
        assert_eq!(at(idx.key(r#"hosts[0].labels."a.b/c""#)), Some("\"a.b/c\""));
        // A missing key points at its table: the `[[hosts]]` header of the second host.
        assert_eq!(at(idx.find("hosts[1].address")), Some("[[hosts]]"));
        assert_eq!(
            idx.find("hosts[1].address").map(|r| r.start),
            text.rfind("[[hosts]]")
        );
        assert_eq!(at(idx.key("cluster.pod_cidr")), Some("[cluster]"));
        assert!(idx.find("nothing.here").is_none());
        assert!(idx.has("hosts[0].name"));
        assert!(!idx.has("hosts[0].address"));
    }
}
