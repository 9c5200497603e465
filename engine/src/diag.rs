//! Diagnostics: what kwin tells a user about their plan, with the place it comes from.
//!
//! Every problem found while loading, validating or expanding a plan becomes a [`Diagnostic`]
//! (severity, one-line summary, optional hint, optional source location). Problems are
//! collected, never thrown one at a time, so `kwin validate` reports them all at once.

use schemars::JsonSchema;
use serde::Serialize;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// A place in a source file: path, 1-based line and column.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, JsonSchema)]
pub struct Location {
    pub file: PathBuf,
    pub line: usize,
    pub col: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Diagnostic {
    pub severity: Severity,
    /// Stable short code, e.g. `cidr-overlap`; used by tests and for documentation.
    pub code: &'static str,
    pub summary: String,
    pub hint: Option<String>,
    pub location: Option<Location>,
}

impl Diagnostic {
    pub fn error(code: &'static str, summary: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            code,
            summary: summary.into(),
            hint: None,
            location: None,
        }
    }
    pub fn warning(code: &'static str, summary: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Self::error(code, summary)
        }
    }
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
    pub fn at(mut self, location: Option<Location>) -> Self {
        self.location = location;
        self
    }
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        if let Some(loc) = &self.location {
            write!(f, "{}:{}:{}: ", loc.file.display(), loc.line, loc.col)?;
        }
        write!(f, "{sev}[{}]: {}", self.code, self.summary)?;
        if let Some(h) = &self.hint {
            write!(f, "\n  hint: {h}")?;
        }
        Ok(())
    }
}

/// Maps byte offsets of one source text to line/column.
#[derive(Debug, Clone)]
pub struct SourceMap {
    pub file: PathBuf,
    line_starts: Vec<usize>,
}

impl SourceMap {
    pub fn new(file: &Path, text: &str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        SourceMap {
            file: file.to_path_buf(),
            line_starts,
        }
    }

    pub fn location(&self, offset: usize) -> Location {
        let line = match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        };
        Location {
            file: self.file.clone(),
            line: line + 1,
            col: offset - self.line_starts[line] + 1,
        }
    }

    pub fn span(&self, span: Option<Range<usize>>) -> Option<Location> {
        span.map(|s| self.location(s.start))
    }
}

/// A list of diagnostics with helpers for the common questions.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn push(&mut self, d: Diagnostic) {
        self.0.push(d);
    }
    pub fn has_errors(&self) -> bool {
        self.0.iter().any(Diagnostic::is_error)
    }
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter().filter(|d| d.is_error())
    }
    pub fn extend(&mut self, other: Diagnostics) {
        self.0.extend(other.0);
    }
    /// Sorted by file position, errors before warnings at the same place.
    pub fn sorted(mut self) -> Self {
        self.0.sort_by(|a, b| {
            (a.location.as_ref(), a.severity, a.code).cmp(&(
                b.location.as_ref(),
                b.severity,
                b.code,
            ))
        });
        self
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Without repeats: the same problem found twice (e.g. through a default shared by
    /// several hosts) is reported once.
    pub fn dedup(mut self) -> Self {
        let mut seen = std::collections::HashSet::new();
        self.0
            .retain(|d| seen.insert((d.location.clone(), d.severity, d.code, d.summary.clone())));
        self
    }
    /// Number of warnings.
    pub fn warnings(&self) -> usize {
        self.0.iter().filter(|d| !d.is_error()).count()
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.0 {
            writeln!(f, "{d}")?;
        }
        Ok(())
    }
}

/// "did you mean" for a misspelled name.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_offset_maps_to_its_line_and_column() {
        let sm = SourceMap::new(Path::new("p.toml"), "a = 1\nbb = 2\n");
        assert_eq!(sm.location(0).line, 1);
        let l = sm.location(8);
        assert_eq!((l.line, l.col), (2, 3));
    }

    #[test]
    fn did_you_mean_suggests_the_closest_name_or_none() {
        assert_eq!(did_you_mean("adress", ["address", "port"]), Some("address"));
        assert_eq!(did_you_mean("zzz", ["address", "port"]), None);
    }
}
