//! `kwin plan`, `kwin apply` and `kwin apply --check`.
//!
//! Load → validate → expand → graph (any diagnostic stops here, exit 1), then `.kwin/` next to
//! the plan (lock for apply), transports, the scrubber seeded with the connection secrets, and
//! the engine run. Events go to `output::render` on its own thread. Ctrl-C once: stop
//! scheduling, finish running steps, summary, journal, exit 130; twice: exit at once.
//!
//! Exit codes: 0 success; 1 any failure; 2 `plan --detailed-exitcode` with changes pending;
//! 130 interrupted.

use crate::RunArgs;
use kwin_engine::event::{Event, EventSink, Mode};
use kwin_engine::exec::connect::{connection_secrets, transport_for, ConnectOptions};
use kwin_engine::exec::lock::Lock;
use kwin_engine::exec::{execute, Cancel, HostHandle, Run, RunOptions};
use kwin_engine::graph::TaskGraph;
use kwin_engine::module::build::Modules;
use kwin_engine::plan::LoadedPlan;
use kwin_engine::secret::Scrubber;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

pub fn plan(run: RunArgs, detailed_exitcode: bool) -> anyhow::Result<ExitCode> {
    go(&run, Mode::Plan, detailed_exitcode, false).map(|(code, _)| code)
}

/// `kwin apply`: converge, then — when everything converged, the plan has a `[cluster]` with
/// `verify` on (the default) and `--no-verify` was not given — `kwin verify`. `--no-verify`
/// skips only that final check, as `cluster.verify = false` does.
pub fn apply(run: RunArgs, check: bool, no_verify: bool) -> anyhow::Result<ExitCode> {
    let mode = if check { Mode::Plan } else { Mode::Apply };
    let (code, plan) = go(&run, mode, false, no_verify)?;
    let Some(plan) = plan else {
        return Ok(code);
    };
    let wanted = plan
        .file
        .cluster
        .as_ref()
        .is_some_and(|c| c.verify.unwrap_or(true));
    if mode == Mode::Apply && code == ExitCode::SUCCESS && wanted && !no_verify {
        return crate::cmd_verify::run_verify(
            &plan,
            &run,
            &crate::cmd_verify::VerifyArgs::default(),
        );
    }
    Ok(code)
}

/// Load, validate, expand and build the graph; print diagnostics. `None`: stop with exit 1.
fn prepare(run: &RunArgs, no_verify: bool) -> Option<(LoadedPlan, TaskGraph, Modules)> {
    let p = crate::prepare::reported(
        crate::prepare::prepare_with(
            &run.plan,
            kwin_modules::recipes::RECIPES,
            crate::prepare::UserTasks::Include,
            no_verify,
            crate::prepare::Checksums::Fetch,
        ),
        run.output,
    )?;
    report_fetched(&p.fetched);
    // Fetched above: every task's params are final, and their modules built.
    Some((p.plan, p.graph, p.modules?))
}

/// What was fetched, on stderr (JSON output on stdout stays events only).
pub fn report_fetched(fetched: &[crate::prepare::Fetched]) {
    let (hashed, files): (Vec<_>, Vec<_>) = fetched.iter().partition(|f| f.from_artifact);
    if !files.is_empty() {
        let names: Vec<&str> = files.iter().map(|f| f.file.as_str()).collect();
        eprintln!(
            "checksums: {} fetched from the upstream checksum files and recorded in .kwin/{}: {}",
            names.len(),
            kwin_engine::checksums::RECORD_FILE,
            names.join(", ")
        );
    }
    if !hashed.is_empty() {
        let names: Vec<String> = hashed
            .iter()
            .map(|f| {
                if f.sha512_checked {
                    format!("{} (checked against its SHA-512 file)", f.file)
                } else {
                    f.file.clone()
                }
            })
            .collect();
        eprintln!(
            "checksums: {} computed from the artifacts themselves, downloaded over https on this machine because their upstream publishes no SHA-256 file, and recorded in .kwin/{}: {}",
            names.len(),
            kwin_engine::checksums::RECORD_FILE,
            names.join(", ")
        );
    }
}

/// Run the plan; the exit code, and the plan once it loaded.
fn go(
    run: &RunArgs,
    mode: Mode,
    detailed_exitcode: bool,
    no_verify: bool,
) -> anyhow::Result<(ExitCode, Option<LoadedPlan>)> {
    let Some((plan, graph, modules)) = prepare(run, no_verify) else {
        return Ok((ExitCode::from(1), None));
    };
    let what = match mode {
        Mode::Plan => "plan",
        Mode::Apply => "apply",
    };
    run_graph(run, mode, detailed_exitcode, plan, graph, modules, what)
}

/// Run a prepared task graph (`apply`, `plan`, `reset`): `.kwin/`, lock, transports,
/// scrubber, executor, rendering. `what` names the run in the output ("apply: 3 hosts, ...").
/// The plan's retention of old runs' logs and journals (`[settings]`, or the defaults).
pub fn retention(
    settings: &kwin_engine::plan::model::Settings,
) -> kwin_engine::exec::retention::Retention {
    let d = kwin_engine::exec::retention::Retention::default();
    kwin_engine::exec::retention::Retention {
        keep_runs: settings.keep_runs.unwrap_or(d.keep_runs),
        max_bytes: settings
            .logs_limit_mib
            .map_or(d.max_bytes, |m| m.saturating_mul(1 << 20)),
    }
}

pub fn run_graph(
    run: &RunArgs,
    mode: Mode,
    detailed_exitcode: bool,
    plan: LoadedPlan,
    graph: TaskGraph,
    modules: Modules,
    what: &'static str,
) -> anyhow::Result<(ExitCode, Option<LoadedPlan>)> {
    let state_dir = plan.base_dir.join(".kwin");
    kwin_engine::exec::state::private_dir(&state_dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", state_dir.display()))?;

    let settings = &plan.file.settings;
    let mut options = RunOptions::new(mode, state_dir.clone());
    options.plan = run.plan.clone();
    options.parallelism = run.parallelism.or(settings.parallelism).unwrap_or(32);
    options.step_timeout = Duration::from_secs(settings.step_timeout.unwrap_or(600));
    options.retries = settings.retries.unwrap_or(3);
    options.retry_delay = Duration::from_secs(settings.retry_delay.unwrap_or(2));
    options.allow_reboot = settings.allow_reboot.unwrap_or(true);
    if let Some(mib) = settings.output_budget_mib {
        options.output_budget = mib.saturating_mul(1 << 20);
    }
    options.retention = retention(settings);
    options.accept_new_host_keys = run.accept_new_host_keys;

    let (sink, rx) = EventSink::channel();
    let _lock = match mode {
        Mode::Apply => match Lock::acquire(&state_dir, &options.run_id) {
            Ok((lock, warning)) => {
                if let Some(w) = warning {
                    sink.send(Event::Warning {
                        host: None,
                        message: w,
                    });
                }
                Some(lock)
            }
            Err(e) => anyhow::bail!("{e}"),
        },
        Mode::Plan => None,
    };

    let scrubber = Scrubber::new();
    for s in plan.plan_secrets() {
        scrubber.add(&s);
    }
    let copts = ConnectOptions {
        accept_new_host_keys: run.accept_new_host_keys,
        known_hosts: state_dir.join("known_hosts"),
    };
    let made: Vec<_> = plan
        .hosts
        .iter()
        .map(|h| {
            for s in connection_secrets(h) {
                scrubber.add(&s);
            }
            (h.name.clone(), transport_for(h, &copts, &scrubber))
        })
        .collect();
    let hosts: Vec<HostHandle> = made
        .iter()
        .map(|(name, m)| HostHandle {
            name: name.clone(),
            transport: m.transport.clone(),
        })
        .collect();

    let tty = std::io::stdout().is_terminal();
    let format = run.output;
    let renderer = std::thread::spawn(move || crate::output::render(rx, format, mode, tty, what));

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let summary = runtime.block_on(async {
        let (canceller, cancel) = Cancel::pair();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                canceller.cancel();
                if tokio::signal::ctrl_c().await.is_ok() {
                    std::process::exit(130);
                }
            }
        });
        execute(Run {
            graph: Arc::new(graph),
            modules,
            hosts,
            options,
            scrubber,
            events: sink,
            cancel,
        })
        .await
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    let _ = renderer.join();
    // After the summary, on stderr, so JSON output still ends with the summary line.
    for (_, m) in &made {
        if let Some(k) = m.recorded_host_key() {
            eprintln!("note: {k}");
        }
    }

    let code = if summary.interrupted {
        ExitCode::from(130)
    } else if summary.counts.failed > 0 {
        ExitCode::from(1)
    } else if detailed_exitcode && summary.counts.changed > 0 {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    };
    Ok((code, Some(plan)))
}
