//! The front half of every command: load → validate → expand → graph, with every diagnostic
//! collected (warnings are returned alongside the result, errors stop before expansion).
//!
//! Artifact checksums (engine `checksums`): the plan's pins, kwin's digests
//! (`plans/digests.toml`) and `.kwin/checksums.toml` answer `sha256_of` / `openpgp_of`; for plan
//! and apply what is still missing is fetched on the controller (https only): the upstream's
//! checksum files, and the artifacts whose upstream publishes no SHA-256 file (hashed here,
//! checked against their SHA-512 file where there is one); the results are recorded and the
//! plan expanded again. A download with neither a pin nor an https URL to fetch its checksum
//! from is an error for every command, before any host is contacted; so is one whose checksum
//! would come over a plain-HTTP `artifacts.mirror`.

use kwin_engine::checksums::{self, Checksums as SumSet, Known, Wanted, WantedKind};
use kwin_engine::diag::{Diagnostic, Diagnostics};
use kwin_engine::graph::TaskGraph;
use kwin_engine::module::build::{build_all, Modules};
use kwin_engine::module::Registry;
use kwin_engine::plan::validate::{load_and_validate, Names};
use kwin_engine::plan::LoadedPlan;
use kwin_engine::transport::http::Client;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// A plan ready to run, and the warnings met on the way.
pub struct Prepared {
    pub plan: LoadedPlan,
    pub graph: TaskGraph,
    /// Every task's module, by graph node; `None` while a checksum is left to fetch (the
    /// params that need it are not final; `validate` and `graph` never fetch).
    pub modules: Option<Modules>,
    pub warnings: Diagnostics,
    /// Checksums fetched during this preparation.
    pub fetched: Vec<Fetched>,
}

/// One checksum `kwin plan` / `apply` fetched and recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The artifact's file name.
    pub file: String,
    /// The URL it came from: the checksum file, or the artifact kwin hashed.
    pub url: String,
    /// Computed from the artifact itself (its upstream publishes no SHA-256 file).
    pub from_artifact: bool,
    /// The artifact was checked against its upstream's SHA-512 file.
    pub sha512_checked: bool,
}

/// Load and validate (knowing the recipes' step names), expand, build the graph and every
/// task's module of `path`. Errors: every diagnostic found, warnings included, sorted. Never
/// uses the network.
pub fn prepare(path: &Path) -> Result<Prepared, Diagnostics> {
    prepare_with(
        path,
        kwin_modules::recipes::RECIPES,
        UserTasks::Include,
        false,
        Checksums::Known,
    )
}

/// Whether the plan's own `[[tasks]]` become tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserTasks {
    Include,
    /// `kwin reset`: only its recipes run.
    Leave,
}

/// Whether missing artifact checksums may be fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksums {
    /// Pins and `.kwin/checksums.toml` only; never the network (validate, graph, reset).
    Known,
    /// Fetch the upstream checksum files still missing, record them (plan, apply).
    Fetch,
}

/// [`prepare`] with another set of recipes (`kwin reset`'s), with or without the user's tasks,
/// with `no_verify` (`apply --no-verify`) expanding as if `cluster.verify = false`, and with
/// missing checksums fetched or not. The plan is validated exactly as for `apply`.
pub fn prepare_with(
    path: &Path,
    recipes: &[(&str, &str)],
    user_tasks: UserTasks,
    no_verify: bool,
    checksums_mode: Checksums,
) -> Result<Prepared, Diagnostics> {
    let fetch = checksums_mode == Checksums::Fetch;
    let registry = kwin_modules::Builtin;
    let steps = kwin_modules::recipes::step_names();
    let modules = registry.names();
    let known = Names {
        modules: &modules,
        recipe_steps: &steps,
    };
    // Read and parsed once: the plan that validated is the plan that runs.
    let (plan, diags) = load_and_validate(path, known).into_result()?;
    let mut expanded = plan.clone();
    if user_tasks == UserTasks::Leave {
        expanded.file.tasks.clear();
    }
    if no_verify {
        if let Some(c) = expanded.file.cluster.as_mut() {
            c.verify = Some(false);
        }
    }
    let expand = |sums: &SumSet| kwin_engine::expand::expand_with(&expanded, recipes, sums);
    let fail = |mut d: Diagnostics| {
        d.extend(diags.clone());
        d.sorted()
    };
    let record = checksums::record_path(&plan.base_dir.join(".kwin"));
    let recorded = checksums::load_record(&record)
        .map_err(|e| fail(Diagnostics(vec![Diagnostic::error("artifact-checksum", e)])))?;
    let known = known_digests()
        .map_err(|e| fail(Diagnostics(vec![Diagnostic::error("artifact-checksum", e)])))?;
    let mut sums = SumSet::for_plan(&plan.file, recorded, known);
    let mut tasks = expand(&sums).map_err(fail)?;
    let mut fetched = Vec::new();
    let wanted = sums.wanted();
    if !wanted.is_empty() {
        // Every checksum that cannot be had over https, all at once.
        let unpinnable: Vec<&Wanted> = wanted.iter().filter(|w| w.source().is_none()).collect();
        let mut refused = unpinnable_diags(&plan, &unpinnable);
        match plan
            .file
            .artifacts
            .mirror
            .as_deref()
            .filter(|m| m.starts_with("http://"))
        {
            Some(m) => refused.extend(http_mirror_diags(&plan, m, &wanted)),
            None => {
                let plain: Vec<&Wanted> = wanted
                    .iter()
                    .filter(|w| w.source().is_some_and(|u| !u.starts_with("https://")))
                    .collect();
                refused.extend(plain_http_diags(&plan, &plain));
            }
        }
        if refused.has_errors() {
            return Err(fail(refused));
        }
        if fetch {
            let got = fetch_all(&wanted);
            let mut failed = Vec::new();
            for r in got {
                match r {
                    Ok((url, rec)) => {
                        fetched.push(Fetched {
                            file: rec.file.clone(),
                            url: url.clone(),
                            from_artifact: wanted
                                .iter()
                                .any(|w| w.from_artifact() && w.url.as_deref() == Some(&url)),
                            sha512_checked: rec.sha512_file.is_some(),
                        });
                        sums.record(url, rec);
                    }
                    Err(e) => failed.push(e),
                }
            }
            if !failed.is_empty() {
                // One error: every artifact, who needs it, and the table to pin them with.
                return Err(fail(Diagnostics(vec![checksums::unfetched_diagnostic(
                    &plan, &sums, &tasks, &wanted, &failed,
                )])));
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
            let sums = sums.with_records(sums.recorded().clone());
            tasks = expand(&sums).map_err(fail)?;
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
    // The build phase: every task's module from its rendered params, before any connection.
    // A checksum left to fetch (validate, graph) leaves the params that need it unfinished:
    // plan and apply build them once fetched.
    let modules = if wanted.is_empty() || fetch {
        Some(build_all(&plan, &graph, &registry).map_err(fail)?)
    } else {
        None
    };
    Ok(Prepared {
        plan,
        graph,
        modules,
        warnings: diags,
        fetched,
    })
}

/// `kwin checksums`: what [`prepare_with`] fetches for plan/apply, fetched and recorded the
/// same way; then every SHA-256 the plan's downloads need that neither the plan nor kwin pins
/// (an expansion without records asks for exactly those), answered from the records, as
/// `[artifacts.sha256]` rows. With the fetched checksums and the warnings.
pub fn pin_rows(path: &Path) -> Result<(Prepared, Vec<checksums::PinRow>), Diagnostics> {
    let p = prepare_with(
        path,
        kwin_modules::recipes::RECIPES,
        UserTasks::Include,
        false,
        Checksums::Fetch,
    )?;
    let error = |e: String| Diagnostics(vec![Diagnostic::error("artifact-checksum", e)]);
    let known = known_digests().map_err(error)?;
    let record = checksums::load_record(&checksums::record_path(&p.plan.base_dir.join(".kwin")))
        .map_err(error)?;
    let bare = SumSet::for_plan(&p.plan.file, Default::default(), known.clone());
    kwin_engine::expand::expand_with(&p.plan, kwin_modules::recipes::RECIPES, &bare)?;
    let sums = SumSet::for_plan(&p.plan.file, record, known);
    let rows = checksums::pin_rows(&bare.wanted(), &sums).map_err(|files| {
        error(format!(
            "checksums still unknown after fetching: {}",
            files.join(", ")
        ))
    })?;
    Ok((p, rows))
}

/// kwin's own digests (`plans/digests.toml`), parsed once.
fn known_digests() -> Result<Arc<Known>, String> {
    static KNOWN: OnceLock<Result<Arc<Known>, String>> = OnceLock::new();
    KNOWN
        .get_or_init(|| Known::parse(kwin_modules::recipes::DIGESTS).map(Arc::new))
        .clone()
}

fn unpinnable_diags(plan: &LoadedPlan, wanted: &[&Wanted]) -> Diagnostics {
    let at = || plan.loc("artifacts").or_else(|| plan.loc("cluster"));
    Diagnostics(
        wanted
            .iter()
            .map(|w| {
                let what = w
                    .url
                    .as_deref()
                    .map(|u| format!("`{}` ({u})", w.file))
                    .unwrap_or_else(|| format!("`{}`", w.file));
                match w.kind {
                    WantedKind::Sha256 => Diagnostic::error(
                        "artifact-checksum",
                        format!(
                            "{what} has no published checksum file and no URL kwin could fetch it from, and neither the plan nor kwin pins its SHA-256"
                        ),
                    )
                    .with_hint(format!(
                        "add its SHA-256 to the plan: [artifacts.sha256] \"{}\" = \"<64 hex digits>\"",
                        w.file
                    )),
                    WantedKind::OpenPgp => Diagnostic::error(
                        "artifact-checksum",
                        format!(
                            "signing key {what}: neither the plan nor kwin pins its OpenPGP fingerprint"
                        ),
                    )
                    .with_hint(format!(
                        "add the key's fingerprint to the plan: [artifacts.openpgp] \"{}\" = \"<40 hex digits>\"",
                        w.file
                    )),
                }
                .at(at())
            })
            .collect(),
    )
}

/// A plain-HTTP mirror would serve the checksum files (or the artifacts kwin hashes) too:
/// refused for every checksum that is not pinned (by the plan or kwin).
fn http_mirror_diags(plan: &LoadedPlan, mirror: &str, wanted: &[Wanted]) -> Diagnostics {
    Diagnostics(
        wanted
            .iter()
            .filter(|w| w.source().is_some())
            .map(|w| {
                let over = if w.from_artifact() {
                    "kwin would hash the file as that mirror serves it, over the same unauthenticated connection the hosts use"
                } else {
                    "its checksum file would come over the same unauthenticated connection as the file"
                };
                Diagnostic::error(
                    "mirror-http",
                    format!(
                        "artifacts.mirror \"{mirror}\" is plain HTTP, and `{}` has no pinned SHA-256: {over}",
                        w.file
                    ),
                )
                .with_hint(format!(
                    "pin it: [artifacts.sha256] \"{}\" = \"<64 hex digits>\" (taken from the upstream over https), or serve the mirror over https",
                    w.file
                ))
                .at(plan.loc("artifacts.mirror"))
            })
            .collect(),
    )
}

/// A checksum (file or artifact) whose URL is not https: nothing fetched over it is trusted.
fn plain_http_diags(plan: &LoadedPlan, wanted: &[&Wanted]) -> Diagnostics {
    Diagnostics(
        wanted
            .iter()
            .map(|w| {
                Diagnostic::error(
                    "artifact-checksum",
                    format!(
                        "`{}`: its checksum would come from {}, and kwin fetches checksums only over https",
                        w.file,
                        w.source().unwrap_or_default()
                    ),
                )
                .with_hint(format!(
                    "pin it in the plan: [artifacts.sha256] \"{}\" = \"<64 hex digits>\", or use an https URL",
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
                        url: w.source().unwrap_or_default().to_string(),
                        why: format!("cannot start: {e}"),
                    })
                })
                .collect()
        }
    };
    let client = Client::new(Duration::from_secs(20));
    runtime.block_on(checksums::fetch(wanted, Arc::new(client)))
}

/// The prepared plan, its warnings printed (human output only); or `None` with every
/// diagnostic printed — the caller exits 1.
pub fn reported(
    result: Result<Prepared, Diagnostics>,
    output: crate::OutputFormat,
) -> Option<Prepared> {
    match result {
        Ok(p) => {
            if !p.warnings.is_empty() && output == crate::OutputFormat::Human {
                crate::cmd_validate::print_diagnostics(&p.warnings, output);
            }
            Some(p)
        }
        Err(d) => {
            crate::cmd_validate::print_diagnostics(&d, output);
            None
        }
    }
}
