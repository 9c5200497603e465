//! The bodies of [`super::prepare`]'s phases.
//!
//! Artifact checksums (`crate::checksums`): the plan's pins, kwin's digests
//! (`plans/digests.toml`) and `.kwin/checksums.toml` answer `sha256_of` / `openpgp_of`; for plan
//! and apply what is still missing is fetched on the controller (https only): the upstream's
//! checksum files, and the artifacts whose upstream publishes no SHA-256 file (hashed here,
//! checked against their SHA-512 file where there is one); the results are recorded and the
//! plan expanded again. A download with neither a pin nor an https URL to fetch its checksum
//! from is an error for every command, before any host is contacted; so is one whose checksum
//! would come over a plain-HTTP `artifacts.mirror`.

use crate::checksums::{self, Checksums, Known, Wanted, WantedKind};
use crate::diag::{Diagnostic, Diagnostics};
use crate::module::Registry;
use crate::plan::effective::Effective;
use crate::plan::validate::Names;
use crate::plan::LoadedPlan;
use crate::task::Task;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// What a command asks of [`super::prepare`].
pub struct Request<'a> {
    /// The plan file.
    pub plan: &'a Path,
    /// The modules tasks may name.
    pub registry: &'a dyn Registry,
    /// The recipes to expand: (file name, text).
    pub recipes: &'a [(&'a str, &'a str)],
    /// The step names `after` may name besides the plan's tasks (the build recipes' steps).
    pub recipe_steps: &'a [String],
    /// kwin's digests of what the recipes download (`plans/digests.toml`).
    pub digests: &'a str,
    pub user_tasks: UserTasks,
    /// `apply --no-verify`: the effective `cluster.verify` is false (for the recipes and the
    /// verify phase alike: `prepare` sets it once).
    pub no_verify: bool,
    pub checksums: ChecksumMode,
    /// `--limit` selectors (`plan::limit`): empty, every host.
    pub limit: Vec<String>,
    /// The plan's variables given on the command line (`--var name=value`): they win over
    /// the environment's `KWIN_VAR_<name>` and the declarations' defaults (`plan/vars.rs`).
    pub vars: BTreeMap<String, String>,
}

impl Request<'_> {
    /// This request with the command line's `--var` values.
    pub fn with_vars(mut self, vars: BTreeMap<String, String>) -> Self {
        self.vars = vars;
        self
    }
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
pub enum ChecksumMode {
    /// Pins and `.kwin/checksums.toml` only; never the network (validate, graph, reset).
    Known,
    /// Fetch the upstream checksum files still missing, record them (plan, apply).
    Fetch,
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

/// Time allowed for fetching every missing checksum file.
const FETCH_TIMEOUT: Duration = Duration::from_secs(20);

/// The load and validate phases: the plan read and parsed once, then validated (`Ok`: the
/// plan and its warnings; `Err`: every diagnostic, sorted), and with errors every problem of
/// the plan's own `[[tasks]]` that does not depend on them ([`user_task_problems`]), so one
/// run reports the structural, host and cluster problems with the tasks' params, conflicts and
/// templates.
pub(super) fn load_and_validate_all(
    req: &Request<'_>,
) -> Result<(LoadedPlan, Diagnostics), Diagnostics> {
    let modules = req.registry.names();
    let known = Names {
        modules: &modules,
        recipe_steps: req.recipe_steps,
    };
    let checked =
        crate::plan::validate::load_and_validate_with_vars(req.plan, known, req.vars.clone());
    match checked.plan {
        Some(plan) if !checked.diags.has_errors() => Ok((plan, checked.diags)),
        // A variable validation refused has no value: the tasks' templates would only say
        // so again (`undefined value`), so they are not checked alone then.
        Some(_)
            if checked
                .diags
                .0
                .iter()
                .any(|d| d.code.starts_with("variable-")) =>
        {
            Err(checked.diags)
        }
        Some(plan) => {
            let mut d = checked.diags;
            // Not again where validation found something (an undeclared variable's use).
            let seen: Vec<_> = d.0.iter().filter_map(|d| d.location.clone()).collect();
            let more = user_task_problems(req, &plan);
            d.0.extend(
                more.0
                    .into_iter()
                    .filter(|m| m.location.as_ref().is_none_or(|l| !seen.contains(l))),
            );
            crate::plan::vars::scrub_diagnostics(&mut d, &plan.sensitive_values());
            Err(d.dedup().sorted())
        }
        None => Err(checked.diags),
    }
}

/// The problems of the plan's own `[[tasks]]` that can be told without the rest of the plan
/// being right: each task expanded alone (no recipes, no `after` or `inputs`), its params
/// checked against its module (`task-params`), two tasks managing one path
/// (`task-conflict`), its templates (`template`). For a plan whose validation, expansion or
/// graph found errors: those stop the command, and these are reported with them instead
/// of after the next run. A task whose params ask for a checksum kwin does not know offline
/// is left out, as in `kwin validate`.
pub(super) fn user_task_problems(req: &Request<'_>, plan: &LoadedPlan) -> Diagnostics {
    if req.user_tasks == UserTasks::Leave || plan.file.tasks.is_empty() {
        return Diagnostics::default();
    }
    let mut alone = plan.clone();
    for t in &mut alone.file.tasks {
        t.after.clear();
        t.inputs.clear();
    }
    let keep = |d: &Diagnostic| matches!(d.code, "task-params" | "task-conflict" | "template");
    let known = match Known::parse(req.digests) {
        Ok(k) => Arc::new(k),
        Err(_) => return Diagnostics::default(),
    };
    let recorded = checksums::load_record(&checksums::record_path(&plan.base_dir.join(".kwin")))
        .unwrap_or_default();
    let sums = Checksums::for_plan(&alone.file, recorded, known);
    let tasks = match crate::expand::expand_with(&alone, &[], &sums) {
        Ok(t) => t,
        Err(d) if d.0.iter().any(keep) => {
            return Diagnostics(d.0.into_iter().filter(keep).collect())
        }
        // The cluster's own errors leave no template context: the tasks alone, if none of
        // their templates reads the cluster.
        Err(_) => {
            alone.file.cluster = None;
            match crate::expand::expand_with(&alone, &[], &sums) {
                Ok(t) => t,
                Err(_) => return Diagnostics::default(),
            }
        }
    };
    let unfinished: std::collections::BTreeSet<crate::task::Origin> = sums
        .wanted()
        .iter()
        .flat_map(|w| sums.needed_by(w))
        .collect();
    let Ok(graph) = crate::graph::TaskGraph::build(tasks) else {
        return Diagnostics::default();
    };
    let d = crate::module::build::check_params(&alone, &graph, req.registry, &|t| {
        !unfinished.contains(&t.origin)
    });
    Diagnostics(d.0.into_iter().filter(keep).collect())
}

/// What the expand phase gives.
pub(super) struct Expanded {
    pub tasks: Vec<Task>,
    /// The checksums fetched.
    pub fetched: Vec<Fetched>,
    /// Every checksum is known, so every task's params are final. `false` only with
    /// [`ChecksumMode::Known`] and a checksum left to fetch.
    pub complete: bool,
    /// The recipe steps and plan tasks whose params asked for a checksum left to fetch (their
    /// params are not final; every other task's are).
    pub unfinished: std::collections::BTreeSet<crate::task::Origin>,
}

/// The expand phase: the tasks of `plan` with its effective values `eff`, every artifact
/// checksum known (fetched if `req` allows).
pub(super) async fn expand(
    req: &Request<'_>,
    plan: &LoadedPlan,
    eff: &Effective,
) -> Result<Expanded, Diagnostics> {
    let mut expanded = plan.clone();
    if req.user_tasks == UserTasks::Leave {
        expanded.file.tasks.clear();
    }
    let expand =
        |sums: &Checksums| crate::expand::expand_effective(&expanded, eff, req.recipes, sums);
    let error = |e: String| Diagnostics(vec![Diagnostic::error("artifact-checksum", e)]);
    let record = checksums::record_path(&plan.base_dir.join(".kwin"));
    let recorded = checksums::load_record(&record).map_err(error)?;
    let known = Known::parse(req.digests).map_err(error)?;
    let mut sums = Checksums::for_plan(&plan.file, recorded, Arc::new(known));
    let mut tasks = expand(&sums)?;
    let mut fetched = Vec::new();
    let wanted = sums.wanted();
    if wanted.is_empty() {
        return Ok(Expanded {
            tasks,
            fetched,
            complete: true,
            unfinished: Default::default(),
        });
    }
    // Every checksum that cannot be had over https, all at once.
    let unpinnable: Vec<&Wanted> = wanted.iter().filter(|w| w.source().is_none()).collect();
    let mut refused = unpinnable_diags(plan, &unpinnable);
    match plan
        .file
        .artifacts
        .mirror
        .as_deref()
        .filter(|m| m.starts_with("http://"))
    {
        Some(m) => refused.extend(http_mirror_diags(plan, m, &wanted)),
        None => {
            let plain: Vec<&Wanted> = wanted
                .iter()
                .filter(|w| w.source().is_some_and(|u| !u.starts_with("https://")))
                .collect();
            refused.extend(plain_http_diags(plan, &plain));
        }
    }
    if refused.has_errors() {
        return Err(refused);
    }
    if req.checksums == ChecksumMode::Known {
        let unfinished = wanted.iter().flat_map(|w| sums.needed_by(w)).collect();
        return Ok(Expanded {
            tasks,
            fetched,
            complete: false,
            unfinished,
        });
    }
    let client = Arc::new(crate::transport::http::Client::new(FETCH_TIMEOUT));
    let mut failed = Vec::new();
    for r in checksums::fetch(&wanted, client).await {
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
        return Err(Diagnostics(vec![checksums::unfetched_diagnostic(
            plan, &sums, &tasks, &wanted, &failed,
        )]));
    }
    crate::fs::private_dir(&plan.base_dir.join(".kwin"))
        .and_then(|()| {
            checksums::save_record(&record, sums.recorded()).map_err(std::io::Error::other)
        })
        .map_err(|e| error(format!("cannot record fetched checksums: {e}")))?;
    let sums = sums.with_records(sums.recorded().clone());
    tasks = expand(&sums)?;
    let still = sums.wanted();
    if !still.is_empty() {
        let files: Vec<&str> = still.iter().map(|w| w.file.as_str()).collect();
        return Err(error(format!(
            "checksums still unknown after fetching: {}",
            files.join(", ")
        )));
    }
    Ok(Expanded {
        tasks,
        fetched,
        complete: true,
        unfinished: Default::default(),
    })
}

/// `kwin checksums`, after [`expand`] fetched and recorded what was missing: every SHA-256
/// the plan's downloads need that neither the plan nor kwin pins (an expansion without
/// records asks for exactly those), answered from the records, as `[artifacts.sha256]` rows.
pub(super) fn pin_rows(
    req: &Request<'_>,
    plan: &LoadedPlan,
    eff: &Effective,
) -> Result<Vec<checksums::PinRow>, Diagnostics> {
    let error = |e: String| Diagnostics(vec![Diagnostic::error("artifact-checksum", e)]);
    let known = Arc::new(Known::parse(req.digests).map_err(error)?);
    let record = checksums::load_record(&checksums::record_path(&plan.base_dir.join(".kwin")))
        .map_err(error)?;
    let bare = Checksums::for_plan(&plan.file, Default::default(), known.clone());
    crate::expand::expand_effective(plan, eff, req.recipes, &bare)?;
    let sums = Checksums::for_plan(&plan.file, record, known);
    checksums::pin_rows(&bare.wanted(), &sums).map_err(|files| {
        error(format!(
            "checksums still unknown after fetching: {}",
            files.join(", ")
        ))
    })
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
