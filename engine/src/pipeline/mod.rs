//! The phases of every command, in one list.
//!
//! ```text
//! prepare   1  load     read plan.toml ONCE, parse, merge defaults and inventory
//!           2  validate every rule, every diagnostic at once (errors stop here)
//!           3  effective the plan's values with kwin's defaults, decided once (plan::effective)
//!           4  expand   recipes + [[tasks]] → tasks; artifact checksums (fetched for plan/apply)
//!           5  graph    the DAG, by named transforms
//! gate         (plan, apply with [cluster]) the cluster's versions checked against the
//!              version skew policy on the first control plane (kwin-modules, called by
//!              the CLI through Session::remote_logged); a refusal ends the command here
//! run       6  lock     .kwin/<plan file>.lock (apply, reset)
//!           7  connect  a transport per host (the TCP connect happens in each host's worker)
//!           8  execute  one worker per host: probe, plan, batches, re-probe
//! then      9  verify   after a clean apply: kwin_modules::kube::verify over a session's Remote
//! ```
//!
//! `kwin validate` and `kwin graph` stop after `prepare`; `plan`, `apply` and `reset` go on
//! with [`run`]; `verify` and `kubeconfig` reach one host through [`Session::remote`]. Every
//! command shares the [`Session`]: `.kwin/` (0700), the run id, the scrubber (the plan's
//! secrets, read once), the transports, host logs, the lock, Ctrl-C, host-key notes.
//!
//! The engine never prints and never exits the process: the CLI (`src/drive.rs`) owns the
//! runtime, the renderer thread, the Ctrl-C signal and the exit code, and hands a session
//! its [`Ctl`].

mod adhoc;
mod phase;
pub mod remote;
mod session;

pub use adhoc::{exec, ExecSummary};
pub use phase::{ChecksumMode, Fetched, Request, UserTasks};
pub use remote::{HostRemote, Interrupted, Remote, RemoteError, RunKind};
pub use session::{Flags, Session, SessionError};

use crate::diag::Diagnostics;
use crate::event::{EventSink, Mode};
use crate::exec::{Cancel, RunSummary};
use crate::graph::scope::Scope;
use crate::graph::TaskGraph;
use crate::module::build::{build_all, check_params, Modules};
use crate::plan::effective::Effective;
use crate::plan::LoadedPlan;
use std::sync::Arc;

/// A plan ready to run, and what was met on the way.
pub struct Prepared {
    pub plan: LoadedPlan,
    pub eff: Effective,
    pub graph: Arc<TaskGraph>,
    /// The tasks and hosts of a run under `--limit` (`Scope::all()` without it).
    pub scope: Scope,
    /// Every task's module, by graph node; `None` while a checksum is left to fetch (the
    /// params that need it are not final; `validate`, `graph` and `reset` never fetch).
    pub modules: Option<Modules>,
    /// Warnings of validation (errors stop `prepare`).
    pub warnings: Diagnostics,
    /// Checksums fetched (plan, apply).
    pub fetched: Vec<Fetched>,
}

/// What the process edge hands a session: where its events go, and its side of Ctrl-C.
pub struct Ctl {
    pub events: EventSink,
    pub cancel: Cancel,
}

pub use crate::event::Outcome;

impl Outcome {
    /// The outcome of an executor run: a failed task or host fails it; with
    /// `detailed_exitcode`, changes a plan found are pending.
    pub fn of(summary: &RunSummary, detailed_exitcode: bool) -> Outcome {
        if summary.interrupted {
            Outcome::Interrupted
        } else if summary.counts.failed > 0 || summary.hosts_failed > 0 {
            Outcome::Failed
        } else if detailed_exitcode && summary.counts.would_change > 0 {
            Outcome::ChangesPending
        } else {
            Outcome::Success
        }
    }
}

/// Phases 1–5: every command starts here. Errors: every diagnostic found, warnings included,
/// sorted. The network is used only to fetch missing checksums ([`ChecksumMode::Fetch`]).
pub async fn prepare(req: &Request<'_>) -> Result<Prepared, Diagnostics> {
    // 1–2. Read and parse the plan once; validate it. `--limit` chooses among its hosts.
    let (mut plan, warnings) = phase::load_and_validate_all(req)?;
    // What a later phase says may quote a value a sensitive variable gave (a rendered param).
    let secrets = plan.sensitive_values();
    let fail = |mut d: Diagnostics| {
        crate::plan::vars::scrub_diagnostics(&mut d, &secrets);
        d.extend(warnings.clone());
        d.sorted()
    };
    let failed = || last_run_unfinished(&plan);
    plan.limit = crate::plan::limit::select_with(&plan, &req.limit, &failed).map_err(fail)?;
    // 3. Effective values.
    let mut eff = Effective::build(&plan).map_err(fail)?;
    if req.no_verify {
        if let Some(c) = eff.cluster.as_mut() {
            c.verify = false;
        }
    }
    // 4. Tasks, with every artifact's checksum. 5. The graph. Their errors come with the
    //    problems of the plan's own tasks that do not depend on them.
    let with_tasks = |mut d: Diagnostics| {
        if !d.0.iter().any(|d| d.code == "task-params") {
            d.extend(phase::user_task_problems(req, &plan));
        }
        fail(d.dedup())
    };
    let expanded = phase::expand(req, &plan, &eff).await.map_err(with_tasks)?;
    let graph = Arc::new(TaskGraph::build(expanded.tasks).map_err(with_tasks)?);
    // 5b. What `--limit` leaves in the run: the chosen hosts' tasks, what they need (read
    //     only), nothing else.
    let scope = match &plan.limit {
        Some(chosen) => Scope::limited(&graph, chosen),
        None => Scope::all(),
    };
    // 6. Every task's module from its rendered params, before any connection. A checksum
    //    left to fetch (validate, graph, reset) leaves the params that need it unfinished:
    //    they are built once it is known; every other task's are checked now.
    let modules = if expanded.complete {
        Some(build_all(&plan, &graph, req.registry).map_err(fail)?)
    } else {
        // Every task whose params do not wait for a checksum is checked all the same.
        let unfinished = &expanded.unfinished;
        let problems = check_params(&plan, &graph, req.registry, &|t| {
            !unfinished.contains(&t.origin)
        });
        if problems.has_errors() {
            return Err(fail(problems));
        }
        None
    };
    Ok(Prepared {
        plan,
        eff,
        graph,
        scope,
        modules,
        warnings,
        fetched: expanded.fetched,
    })
}

/// `--limit failed`: the hosts that did not finish cleanly in the plan's last run, from its
/// journal (`.kwin/runs/`, the newest of this plan).
fn last_run_unfinished(plan: &LoadedPlan) -> Result<Vec<String>, String> {
    let state = plan.base_dir.join(".kwin");
    let name = plan
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let Some((_, j)) = crate::exec::journal::last_of(&state, &plan.path) else {
        return Err(format!(
            "no earlier run of {name} is recorded in {}",
            state.join("runs").display()
        ));
    };
    let hosts = crate::exec::journal::unfinished_hosts(&j);
    if hosts.is_empty() {
        return Err(format!(
            "every host finished cleanly in the last run of {name} ({}): nothing to run again",
            j["run_id"].as_str().unwrap_or("?")
        ));
    }
    Ok(hosts)
}

/// `kwin checksums`: [`prepare`] with the missing checksums fetched and recorded (`req` asks
/// for [`ChecksumMode::Fetch`]), then every checksum the plan needs beyond its own pins and
/// kwin's digests, as `[artifacts.sha256]` rows filled in from the records.
pub async fn pin_rows(
    req: &Request<'_>,
) -> Result<(Prepared, Vec<crate::checksums::PinRow>), Diagnostics> {
    let p = prepare(req).await?;
    let rows = phase::pin_rows(req, &p.plan, &p.eff)?;
    Ok((p, rows))
}

/// `kwin facts`: connect to the chosen hosts (every host without `--limit`; no other) and
/// probe each, ONE script with every fact its tasks read; each host's answers are reported
/// (`host_facts`). Nothing is planned, nothing changes.
pub async fn facts(s: &mut Session, p: &Prepared) -> Result<RunSummary, SessionError> {
    let Some(modules) = p.modules.clone() else {
        return Err(SessionError::ChecksumsUnknown);
    };
    let scope = p.scope.chosen_only(&p.graph);
    s.probe_only();
    s.open_hosts(&p.plan, &scope);
    Ok(s.execute(p.graph.clone(), modules, scope).await)
}

/// Phases 7–9 (`plan`, `apply`, `reset`): lock (apply), a transport per host, the executor.
pub async fn run(s: &mut Session, p: &Prepared) -> Result<RunSummary, SessionError> {
    let Some(modules) = p.modules.clone() else {
        return Err(SessionError::ChecksumsUnknown);
    };
    if s.mode() == Mode::Apply {
        s.lock()?;
    }
    s.open_hosts(&p.plan, &p.scope);
    Ok(s.execute(p.graph.clone(), modules, p.scope.clone()).await)
}
