//! What the user is told about checksums: the `[artifacts.sha256]` table to paste into a plan
//! ([`sha256_table`], with [`placeholder`]s where a digest is unknown; `kwin checksums` fills
//! it from the records, [`pin_rows`]) and the ONE `artifact-checksum` error for what could not
//! be fetched ([`unfetched_diagnostic`]), naming the steps and tasks that need each artifact.

use super::fetch::FetchError;
use super::lookup::Checksums;
use super::wanted::{Wanted, WantedKind};
use crate::diag::{Diagnostic, Location};
use crate::plan::LoadedPlan;
use crate::task::{Origin, Task};
use std::collections::{BTreeMap, BTreeSet};

/// One entry of an `[artifacts.sha256]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinRow {
    /// The artifact's file name: the key the plan's pins use.
    pub file: String,
    /// Its SHA-256; `None` prints a placeholder for the user to fill in.
    pub sha256: Option<String>,
    /// Where kwin gets it: the checksum file, else the artifact itself.
    pub source: Option<String>,
    /// `source` is the artifact (its upstream publishes no SHA-256 file).
    pub from_artifact: bool,
}

impl PinRow {
    /// The row of a wanted SHA-256, with the digest when known.
    pub fn of(w: &Wanted, sha256: Option<String>) -> PinRow {
        PinRow {
            file: w.file.clone(),
            sha256,
            source: w.source().map(str::to_string),
            from_artifact: w.from_artifact(),
        }
    }
}

/// The value a user replaces in a printed table. Valid TOML; as a pin it is refused
/// (`bad-checksum`), so a table pasted unfilled cannot pass for one.
pub fn placeholder(file: &str) -> String {
    format!("<SHA-256 of {file}>")
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `s` for a one-line TOML comment.
fn comment(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// An `[artifacts.sha256]` table as TOML, ready to paste into a plan: one key per file name
/// (sorted, each once), each after a comment naming where it is published; a row without a
/// digest gets a [`placeholder`].
pub fn sha256_table(rows: &[PinRow]) -> String {
    let mut by_file: BTreeMap<&str, Vec<&PinRow>> = BTreeMap::new();
    for r in rows {
        by_file.entry(r.file.as_str()).or_default().push(r);
    }
    let mut out = String::from("[artifacts.sha256]\n");
    for (file, rows) in by_file {
        let mut sources = BTreeSet::new();
        for r in &rows {
            if let Some(u) = &r.source {
                let what = if r.from_artifact {
                    "the file itself, no SHA-256 file is published"
                } else {
                    "checksum file"
                };
                sources.insert(format!("# {} ({what})\n", comment(u)));
            }
        }
        sources.iter().for_each(|s| out.push_str(s));
        let value = rows
            .iter()
            .find_map(|r| r.sha256.clone())
            .unwrap_or_else(|| placeholder(file));
        out.push_str(&format!(
            "{} = {}\n",
            toml_string(file),
            toml_string(&value)
        ));
    }
    out
}

/// The table `kwin checksums` prints: every SHA-256 in `asked` — what an expansion without
/// records asked for in vain, i.e. neither pinned by the plan nor by kwin — answered from the
/// records of `sums`. `Err`: the files no record answers (fetch them first).
pub fn pin_rows(asked: &[Wanted], sums: &Checksums) -> Result<Vec<PinRow>, Vec<String>> {
    let mut rows = Vec::new();
    let mut missing = Vec::new();
    for w in asked.iter().filter(|w| w.kind == WantedKind::Sha256) {
        match sums.recorded_answer(w) {
            Some(h) => rows.push(PinRow::of(w, Some(h.to_string()))),
            None => missing.push(w.file.clone()),
        }
    }
    if missing.is_empty() {
        Ok(rows)
    } else {
        Err(missing)
    }
}

fn at(loc: &Option<Location>) -> String {
    loc.as_ref()
        .map(|l| format!(" ({}:{}:{})", l.file.display(), l.line, l.col))
        .unwrap_or_default()
}

/// Who needs `w`: each recipe step or plan task that asked for it, on which hosts, where it
/// is defined (the plan's `[[tasks]]` entry, or the recipe step).
pub fn needed_by_text(
    plan: &LoadedPlan,
    sums: &Checksums,
    tasks: &[Task],
    w: &Wanted,
) -> Vec<String> {
    sums.needed_by(w)
        .iter()
        .map(|o| {
            let mine: Vec<&Task> = tasks.iter().filter(|t| &t.origin == o).collect();
            let mut hosts: Vec<&str> = Vec::new();
            for t in &mine {
                if !hosts.contains(&t.id.host.as_str()) {
                    hosts.push(&t.id.host);
                }
            }
            let what = match o {
                Origin::Recipe { recipe, step } => format!("step `{step}` of recipe `{recipe}`"),
                Origin::User { index } => format!(
                    "task `{}`",
                    plan.file
                        .tasks
                        .get(*index)
                        .map(|t| t.name.as_str())
                        .unwrap_or("?")
                ),
            };
            let on = if hosts.is_empty() {
                String::new()
            } else {
                format!(" on {}", hosts.join(", "))
            };
            let loc = match o {
                Origin::User { index } => plan.loc(&format!("tasks[{index}]")),
                Origin::Recipe { .. } => mine.first().and_then(|t| t.location.clone()),
            };
            format!("{what}{on}{}", at(&loc))
        })
        .collect()
}

/// The one error for checksums `kwin plan` / `apply` could not fetch on this machine (no
/// network, an unreachable mirror, a missing or broken checksum file): every artifact, the
/// URL it was to come from and why it did not, which recipe steps or plan tasks need it on
/// which hosts; the hint is the `[artifacts.sha256]` table to paste into the plan, with
/// placeholders, and how to get it filled in (`kwin checksums` on a machine that can reach
/// the URLs). At the plan's `[artifacts]` (else `[cluster]`), where the table goes.
pub fn unfetched_diagnostic(
    plan: &LoadedPlan,
    sums: &Checksums,
    tasks: &[Task],
    wanted: &[Wanted],
    failed: &[FetchError],
) -> Diagnostic {
    let mut lines = Vec::new();
    let mut rows = Vec::new();
    for e in failed {
        lines.push(format!(
            "  - cannot get the checksum of `{}` from {}: {}",
            e.file,
            e.url,
            e.why.replace('\n', " ")
        ));
        let mine: Vec<&Wanted> = wanted
            .iter()
            .filter(|w| {
                w.file == e.file
                    && (w.source() == Some(e.url.as_str())
                        || w.sha512_url.as_deref() == Some(e.url.as_str()))
            })
            .collect();
        let mut needs: Vec<String> = Vec::new();
        for w in &mine {
            rows.push(PinRow::of(w, None));
            for n in needed_by_text(plan, sums, tasks, w) {
                if !needs.contains(&n) {
                    needs.push(n);
                }
            }
        }
        if mine.is_empty() {
            rows.push(PinRow {
                file: e.file.clone(),
                sha256: None,
                source: Some(e.url.clone()),
                from_artifact: false,
            });
        }
        for n in needs {
            lines.push(format!("    needed by {n}"));
        }
    }
    let n = rows
        .iter()
        .map(|r| r.file.as_str())
        .collect::<BTreeSet<_>>()
        .len();
    let summary = format!(
        "cannot get {} on this machine, and neither the plan nor kwin pins {}:\n{}",
        if n == 1 {
            "the checksum of 1 artifact".to_string()
        } else {
            format!("the checksums of {n} artifacts")
        },
        if n == 1 { "it" } else { "them" },
        lines.join("\n")
    );
    let hint = format!(
        "pin {} in the plan: on a machine that can reach these URLs, `kwin checksums {}` fetches \
         them and prints this table filled in (`--write FILE` writes it); or fill in each SHA-256 \
         from a source you trust. Then add the table to the plan (merged with the sha256 \
         pins the plan already has):\n\n{}",
        if n == 1 { "it" } else { "them" },
        plan.path.display(),
        sha256_table(&rows).trim_end()
    );
    Diagnostic::error("artifact-checksum", summary)
        .with_hint(hint)
        .at(plan.loc("artifacts").or_else(|| plan.loc("cluster")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "3dd03954565808eaeb3a7ffc0e8cb7886a64a9aa94b2bfdfbdc6e2ed94842e49";

    #[test]
    fn a_printed_table_is_toml_keyed_by_file_name() {
        let w = |file: &str, sums: Option<&str>, url: Option<&str>| Wanted {
            kind: WantedKind::Sha256,
            file: file.into(),
            sums_url: sums.map(str::to_string),
            url: url.map(str::to_string),
            sha512_url: None,
        };
        let rows = [
            PinRow::of(
                &w("kubelet.exe", Some("https://m/kubelet.exe.sha256"), None),
                None,
            ),
            PinRow::of(
                &w("odd \"name\".zip", None, Some("https://m/x\n# y")),
                Some(A.into()),
            ),
            // the same file asked for twice: one key
            PinRow::of(
                &w("kubelet.exe", Some("https://m/kubelet.exe.sha256"), None),
                None,
            ),
        ];
        let text = sha256_table(&rows);
        let t: toml::Table = toml::from_str(&text).expect(&text);
        let s = t["artifacts"]["sha256"].as_table().expect("table");
        assert_eq!(s.len(), 2, "{text}");
        assert_eq!(
            s["kubelet.exe"].as_str(),
            Some(placeholder("kubelet.exe").as_str())
        );
        assert_eq!(s["odd \"name\".zip"].as_str(), Some(A));
        assert!(
            text.contains("# https://m/x?# y (the file itself"),
            "{text}"
        );
        // a placeholder left in is no pin
        assert!(crate::plan::syntax::sha256_hex(&placeholder("kubelet.exe")).is_err());
    }
}
