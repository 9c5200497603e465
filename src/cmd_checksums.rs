//! `kwin checksums plan.toml [--write FILE]`: on a machine that can reach the upstream (or the
//! plan's mirror), every artifact checksum the plan needs beyond its own pins and kwin's
//! digests — fetched as `kwin plan` fetches them, and recorded the same way — as an
//! `[artifacts.sha256]` table to paste into the plan of a controller without internet.

use crate::args::{request, Recipes, VarArgs};
use crate::output::Output;
use anyhow::Context;
use kwin_engine::checksums;
use kwin_engine::event::Outcome;
use kwin_engine::pipeline::ChecksumMode;
use std::collections::BTreeSet;
use std::path::Path;

/// The table on stdout, or in `write`; diagnostics and what was fetched on stderr. Exit 1 when
/// a checksum could not be had.
pub fn checksums(
    path: &Path,
    write: Option<&Path>,
    vars: &VarArgs,
    out: &Output,
) -> anyhow::Result<Outcome> {
    let req = request(path, Recipes::Build, ChecksumMode::Fetch, false).with_vars(vars.map());
    let (p, rows) = match crate::drive::pin_rows(&req)? {
        Ok(r) => r,
        Err(d) => {
            out.diagnostics(&d);
            return Ok(Outcome::Failed);
        }
    };
    out.warnings(&p.warnings);
    out.checksums_fetched(&p.fetched);
    let text = format!(
        "# SHA-256 of every download of {} that neither the plan nor kwin pins, taken over https\n\
         # from the upstream's checksum files (or computed from the artifact where none is\n\
         # published). Paste into the plan of a controller that cannot fetch them (merged with\n\
         # the sha256 pins it has): its kwin validate, plan and apply then need no network for\n\
         # checksums.\n{}",
        path.display(),
        checksums::sha256_table(&rows)
    );
    match write {
        Some(file) => {
            kwin_engine::fs::write_output(file, text.as_bytes(), 0o644)
                .with_context(|| format!("cannot write {}", file.display()))?;
            let files: BTreeSet<&str> = rows.iter().map(|r| r.file.as_str()).collect();
            out.pins_written(file, files.len());
        }
        None => out.text(&text),
    }
    Ok(Outcome::Success)
}
