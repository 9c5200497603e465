//! The phases of every command, in one list: the only place they are numbered.
//!
//! ```text
//! prepare   1  load       read plan.toml ONCE, parse, merge defaults and inventory; `--limit`
//!                         chooses among its hosts
//!           2  validate   every rule, every diagnostic at once (errors stop here)
//!           3  effective  the plan's values with kwin's defaults, decided once (plan::effective)
//!           4  expand     recipes + [[tasks]] → tasks; artifact checksums (fetched for plan
//!                         and apply)
//!           5  graph      the DAG, by named transforms; the `--limit` scope
//!           6  build      every task's module from its rendered params (module::build)
//! run       7  gate       the cluster's versions, read on the first control plane, against
//!                         the version skew policy (ClusterSteps::gate); a refusal ends the
//!                         command here
//!           8  lock       .kwin/<plan file>.lock
//!           9  connect    a transport per host (the TCP connect happens in each host's worker)
//!          10  execute    one worker per host: probe, plan, batches, re-probe
//!          11  verify     test workloads deployed and the cluster checked from the first
//!                         control plane (ClusterSteps::verify)
//! ```
//!
//! | command | phases |
//! |---|---|
//! | `validate`, `graph` | 1–6 ([`prepare`]) |
//! | `plan`, `apply --check` | 1–6, then 7 (a plan with `[cluster]`), 9, 10 ([`run`], [`Command::Plan`]) |
//! | `apply` | 1–6, then 7, 8, 9, 10 and, after a clean run of a plan whose effective `cluster.verify` is on, 11 ([`Command::Apply`]) |
//! | `reset` | 1–6 with the reset recipes, then 8, 9, 10 ([`Command::Reset`]) |
//! | `verify` | 1–6, then 11 ([`Command::Verify`]) |
//! | `facts` | 1–6, then 9 and the probe of 10 ([`facts`]) |
//!
//! `exec` and `kubeconfig` reach hosts through the same [`Session`] after 1–6. Every
//! command shares it: `.kwin/` (0700), the run id, the scrubber (the plan's secrets, read
//! once), the transports, host logs, the lock, Ctrl-C, host-key notes. The gate and verify
//! are `kwin-modules`' ([`ClusterSteps`]); when they run is decided here.
//!
//! The engine never prints and never exits the process: the CLI (`src/drive.rs`) owns the
//! runtime, the renderer thread, the Ctrl-C signal and the exit code, and hands a session
//! its [`Ctl`].

mod adhoc;
mod cluster;
mod phase;
pub mod remote;
mod session;

pub use adhoc::{exec, ExecSummary};
pub use cluster::{ClusterSteps, Gate};
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

/// The prepare phases, load to build: every command starts here. Errors: every diagnostic
/// found, warnings included, sorted. The network is used only to fetch missing checksums
/// ([`ChecksumMode::Fetch`]).
pub async fn prepare(req: &Request<'_>) -> Result<Prepared, Diagnostics> {
    // Load: read and parse the plan once; validate it. `--limit` chooses among its hosts.
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
    // Effective values.
    let mut eff = Effective::build(&plan).map_err(fail)?;
    if req.no_verify {
        if let Some(c) = eff.cluster.as_mut() {
            c.verify = false;
        }
    }
    // Expand: tasks, with every artifact's checksum; then the graph. Their errors come with
    // the problems of the plan's own tasks that do not depend on them.
    let with_tasks = |mut d: Diagnostics| {
        if !d.0.iter().any(|d| d.code == "task-params") {
            d.extend(phase::user_task_problems(req, &plan));
        }
        fail(d.dedup())
    };
    let expanded = phase::expand(req, &plan, &eff).await.map_err(with_tasks)?;
    let graph = Arc::new(TaskGraph::build(expanded.tasks).map_err(with_tasks)?);
    // What `--limit` leaves in the run: the chosen hosts' tasks, what they need (read only),
    // nothing else.
    let scope = match &plan.limit {
        Some(chosen) => Scope::limited(&graph, chosen),
        None => Scope::all(),
    };
    // Build: every task's module from its rendered params, before any connection. A
    // checksum left to fetch (validate, graph, reset) leaves the params that need it
    // unfinished: they are built once it is known; every other task's are checked now.
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

/// Which run phases a command runs (the table above).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `kwin plan`, `kwin apply --check`: gate, connect, execute planning only. With
    /// `detailed_exitcode`, changes found are [`Outcome::ChangesPending`].
    Plan { detailed_exitcode: bool },
    /// `kwin apply`: gate, lock, connect, execute, then verify after a clean run.
    Apply,
    /// `kwin reset`: lock, connect, execute (its plan was prepared with the reset recipes).
    Reset,
    /// `kwin verify`: verify only.
    Verify,
}

impl Command {
    /// The session's mode: only `plan` never changes a host.
    pub fn mode(self) -> Mode {
        match self {
            Command::Plan { .. } => Mode::Plan,
            Command::Apply | Command::Reset | Command::Verify => Mode::Apply,
        }
    }
}

/// How a command's run ended.
#[derive(Debug)]
pub struct Ran {
    pub outcome: Outcome,
    /// The upgrade gate's diagnostics, shown after the run: its warnings (`kwin plan` that
    /// could not read the cluster's versions) or why it refused the run.
    pub gate: Option<Diagnostics>,
    /// What the user should know afterwards ([`Session::notes`]).
    pub notes: Vec<String>,
}

/// The run phases of `command` on the prepared plan `p`, in one session opened here with
/// the command line's `flags` and the process's `ctl`; `cluster` is the gate and verify.
pub async fn run(
    p: &Prepared,
    flags: &Flags,
    ctl: Ctl,
    cluster: &dyn ClusterSteps,
    command: Command,
) -> Result<Ran, SessionError> {
    let mut s = Session::open(p, flags, command.mode(), ctl)?;
    let (outcome, gate) = phases(&mut s, p, cluster, command).await?;
    Ok(Ran {
        outcome,
        gate,
        notes: s.notes(),
    })
}

/// The run phases, gate to verify, in the list's order.
async fn phases(
    s: &mut Session,
    p: &Prepared,
    cluster: &dyn ClusterSteps,
    command: Command,
) -> Result<(Outcome, Option<Diagnostics>), SessionError> {
    let mut said = None;
    if matches!(command, Command::Plan { .. } | Command::Apply) {
        match gate(s, p, cluster).await {
            Gate::Go => {}
            Gate::Warn(d) => said = Some(d),
            Gate::Stop(outcome, d) => return Ok((outcome, d)),
        }
    }
    if command == Command::Verify {
        return Ok((verify(s, p, cluster, command).await?, said));
    }
    let Some(modules) = p.modules.clone() else {
        return Err(SessionError::ChecksumsUnknown);
    };
    if s.mode() == Mode::Apply {
        s.lock()?;
    }
    s.open_hosts(&p.plan, &p.scope);
    let summary = s.execute(p.graph.clone(), modules, p.scope.clone()).await;
    let outcome = Outcome::of(
        &summary,
        matches!(
            command,
            Command::Plan {
                detailed_exitcode: true
            }
        ),
    );
    let verify_on = p.eff.cluster.as_ref().is_some_and(|c| c.verify);
    if command == Command::Apply && outcome == Outcome::Success && verify_on {
        return Ok((verify(s, p, cluster, command).await?, said));
    }
    Ok((outcome, said))
}

/// The gate phase: a plan with `[cluster]` whose first control plane is part of the run
/// (`--limit` that neither chooses nor needs it, hosts without a role, runs nothing of the
/// cluster, and no host outside the run is connected to).
async fn gate(s: &mut Session, p: &Prepared, cluster: &dyn ClusterSteps) -> Gate {
    if p.eff.cluster.is_none() {
        return Gate::Go;
    }
    let Some(cp) = p.eff.first_control_plane(&p.plan) else {
        return Gate::Go;
    };
    if !p.scope.has_host(&cp.name) {
        return Gate::Go;
    }
    let remote = s.remote_logged(cp, &format!("{}.gate", cp.name));
    cluster.gate(&remote, p, s.mode()).await
}

/// The verify phase, from the first control plane: logged in its own `<host>.verify.log`
/// after a run (whose `<host>.log` is the host's), in `<host>.log` for `kwin verify`.
async fn verify(
    s: &mut Session,
    p: &Prepared,
    cluster: &dyn ClusterSteps,
    command: Command,
) -> Result<Outcome, SessionError> {
    let Some(cp) = p.eff.first_control_plane(&p.plan) else {
        return Err(SessionError::NoControlPlane);
    };
    let log = match command {
        Command::Verify => cp.name.clone(),
        _ => format!("{}.verify", cp.name),
    };
    let remote = s.remote_logged(cp, &log);
    s.events().send(crate::event::Event::VerifyStarted {
        host: cp.name.clone(),
    });
    Ok(cluster.verify(&remote, p).await)
}
