//! Source spans of every key and value in a TOML document, by path (`hosts[2].address`).

use std::collections::HashMap;
use std::ops::Range;
use toml::de::{DeTable, DeValue};

#[derive(Debug, Clone, Default)]
pub struct SpanIndex {
    values: HashMap<String, Range<usize>>,
    keys: HashMap<String, Range<usize>>,
}

impl SpanIndex {
    pub fn build(table: &DeTable<'_>) -> Self {
        let mut idx = SpanIndex::default();
        idx.walk_table("", table);
        idx
    }

    fn walk_table(&mut self, prefix: &str, table: &DeTable<'_>) {
        for (k, v) in table.iter() {
            let path = if prefix.is_empty() {
                k.get_ref().to_string()
            } else {
                format!("{prefix}.{}", k.get_ref())
            };
            self.keys.insert(path.clone(), k.span());
            self.walk_value(&path, v.get_ref(), v.span());
        }
    }

    fn walk_value(&mut self, path: &str, v: &DeValue<'_>, span: Range<usize>) {
        self.values.insert(path.to_string(), span);
        match v {
            DeValue::Table(t) => self.walk_table(path, t),
            DeValue::Array(a) => {
                for (i, item) in a.iter().enumerate() {
                    self.walk_value(&format!("{path}[{i}]"), item.get_ref(), item.span());
                }
            }
            _ => {}
        }
    }

    /// Span of the value at `path`, else of the nearest ancestor that has one.
    pub fn find(&self, path: &str) -> Option<Range<usize>> {
        let mut p = path;
        loop {
            if let Some(s) = self.values.get(p) {
                return Some(s.clone());
            }
            let cut = p.rfind(['.', '['])?;
            p = &p[..cut];
        }
    }

    /// Span of the key at `path` (for unknown-key errors).
    pub fn key(&self, path: &str) -> Option<Range<usize>> {
        self.keys.get(path).cloned().or_else(|| self.find(path))
    }
}
