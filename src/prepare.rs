//! The front half of every command: load → validate → expand → graph, with every diagnostic
//! collected (warnings are returned alongside the result, errors stop before expansion).
//!
//! Artifact checksums (engine `checksums`): the plan's pins and `.kwin/checksums.toml` answer
//! `sha256_of`; [`prepare_run`] (plan, apply) fetches the upstream checksum files still missing
//! on the controller, records them and expands again. A download with neither a pin nor a
//! published checksum file is an error for every command, before any host is contacted.

use kwin_engine::checksums::{self, Checksums, Wanted};
use kwin_engine::diag::{Diagnostic, Diagnostics};
use kwin_engine::graph::TaskGraph;
use kwin_engine::plan::LoadedPlan;
use kwin_engine::task::Task;
use std::path::Path;
use std::time::Duration;

/// A plan ready to run, and the warnings met on the way.
pub struct Prepared {
    pub plan: LoadedPlan,
    pub graph: TaskGraph,
    pub warnings: Diagnostics,
    /// Checksums fetched from upstream checksum files during this preparation (file, URL).
    pub fetched: Vec<(String, String)>,
}

/// Load, validate (knowing the recipes' step names), expand and build the graph of `path`.
/// Errors: every diagnostic found, warnings included, sorted. Never uses the network.
pub fn prepare(path: &Path) -> Result<Prepared, Diagnostics> {
    prepare_with(path, false)
}

/// [`prepare`], and the checksums the recipes need that are neither pinned nor recorded are
/// fetched from their upstream checksum files and recorded in `.kwin/checksums.toml`.
pub fn prepare_run(path: &Path) -> Result<Prepared, Diagnostics> {
    prepare_with(path, true)
}

fn prepare_with(path: &Path, fetch: bool) -> Result<Prepared, Diagnostics> {
    let registry = kwin_modules::Builtin;
    let steps = kwin_modules::recipes::step_names();
    let diags = kwin_engine::plan::check(path, &registry, &steps);
    if diags.has_errors() {
        return Err(diags);
    }
    let plan = kwin_engine::plan::load(path)?;
    let fail = |mut d: Diagnostics| {
        d.extend(diags.clone());
        d.sorted()
    };
    let record = checksums::record_path(&plan.base_dir.join(".kwin"));
    let recorded = checksums::load_record(&record)
        .map_err(|e| fail(Diagnostics(vec![Diagnostic::error("artifact-checksum", e)])))?;
    let mut sums = Checksums::new(plan.file.artifacts.sha256.clone(), recorded);
    let mut tasks = expand(&plan, &sums).map_err(fail)?;
    let mut fetched = Vec::new();
    let wanted = sums.wanted();
    if !wanted.is_empty() {
        let unpinnable: Vec<&Wanted> = wanted.iter().filter(|w| w.sums_url.is_none()).collect();
        if !unpinnable.is_empty() {
            return Err(fail(unpinnable_diags(&plan, &unpinnable)));
        }
        if fetch {
            let got = fetch_all(&wanted);
            let mut errors = Diagnostics::default();
            for r in got {
                match r {
                    Ok((url, rec)) => {
                        fetched.push((rec.file.clone(), url.clone()));
                        sums.record(url, rec);
                    }
                    Err(e) => errors.push(
                        Diagnostic::error(
                            "artifact-checksum",
                            format!(
                                "cannot get the checksum of `{}` from {}: {}",
                                e.file, e.url, e.why
                            ),
                        )
                        .with_hint(format!(
                            "pin it in the plan: [artifacts.sha256] \"{}\" = \"<sha256>\" \
                             (or set [artifacts] mirror to a site that serves the checksum files)",
                            e.file
                        ))
                        .at(plan.loc("artifacts")),
                    ),
                }
            }
            if errors.has_errors() {
                return Err(fail(errors));
            }
            kwin_engine::exec::state::private_dir(&plan.base_dir.join(".kwin"))
                .and_then(|()| {
                    checksums::save_record(&record, sums.recorded()).map_err(std::io::Error::other)
                })
                .map_err(|e| {
                    fail(Diagnostics(vec![Diagnostic::error(
                        "artifact-checksum",
                        format!("cannot record fetched checksums: {e}"),
                    )]))
                })?;
            let sums = Checksums::new(plan.file.artifacts.sha256.clone(), sums.recorded().clone());
            tasks = expand(&plan, &sums).map_err(fail)?;
            let still = sums.wanted();
            if !still.is_empty() {
                let files: Vec<&str> = still.iter().map(|w| w.file.as_str()).collect();
                return Err(fail(Diagnostics(vec![Diagnostic::error(
                    "artifact-checksum",
                    format!(
                        "checksums still unknown after fetching: {}",
                        files.join(", ")
                    ),
                )])));
            }
        }
    }
    let graph = TaskGraph::build(tasks).map_err(fail)?;
    Ok(Prepared {
        plan,
        graph,
        warnings: diags,
        fetched,
    })
}

fn expand(plan: &LoadedPlan, sums: &Checksums) -> Result<Vec<Task>, Diagnostics> {
    kwin_engine::expand::expand_with(plan, kwin_modules::recipes::RECIPES, sums)
}

fn unpinnable_diags(plan: &LoadedPlan, wanted: &[&Wanted]) -> Diagnostics {
    Diagnostics(
        wanted
            .iter()
            .map(|w| {
                Diagnostic::error(
                    "artifact-checksum",
                    format!(
                        "`{}` has no published checksum file, and the plan pins none",
                        w.file
                    ),
                )
                .with_hint(format!(
                    "add its SHA-256 to the plan: [artifacts.sha256] \"{}\" = \"<64 hex digits>\"",
                    w.file
                ))
                .at(plan.loc("artifacts").or_else(|| plan.loc("cluster")))
            })
            .collect(),
    )
}

fn fetch_all(
    wanted: &[Wanted],
) -> Vec<Result<(String, checksums::Recorded), checksums::FetchError>> {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            return wanted
                .iter()
                .map(|w| {
                    Err(checksums::FetchError {
                        file: w.file.clone(),
                        url: w.sums_url.clone().unwrap_or_default(),
                        why: format!("cannot start: {e}"),
                    })
                })
                .collect()
        }
    };
    runtime.block_on(checksums::fetch(wanted, Duration::from_secs(20)))
}
