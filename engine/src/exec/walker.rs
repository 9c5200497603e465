//! Graph scheduling: one worker per host, a board of task outcomes, bounded parallelism.
//!
//! Each host's tasks run in the graph's topological order restricted to that host (a host
//! runs its tasks in order). Every finished task is published on the [`Board`] (a watch
//! channel per task); a task with a dependency on another host waits on that channel. A
//! worker holds a permit of the run's semaphore (`parallelism`) while it works and gives it
//! back while it waits, so waiting hosts never starve the hosts they wait for. A worker
//! flushes its pending batch before it waits, so what others wait for is never stuck in it.
//! No deadlock: the earliest unfinished task in the global order never waits.

use super::board::{Board, Done};
use super::conn::Conn;
use super::journal::{Journal, Reporter};
use super::logs::HostLog;
use super::outputs::Outputs;
use super::run::{Run, RunSummary};
use super::shared::Shared;
use super::worker::{self, apply::Apply, plan::PlanOnly};
use crate::event::{Event, Mode, TaskStatus};
use crate::graph::scope::TaskScope;
use crate::transport::output::OutputBudget;
use petgraph::graph::NodeIndex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Semaphore;

pub async fn walk(run: Run) -> RunSummary {
    let start = Instant::now();
    let opts = run.options.clone();
    let report = Reporter::new(
        run.events.clone(),
        Journal::new(&opts.run_id, &opts.plan, opts.mode),
    );
    let graph = run.graph.clone();
    let scope = run.scope.clone();
    let in_run: Vec<NodeIndex> = graph
        .topo_order()
        .into_iter()
        .filter(|&n| scope.task(n) != TaskScope::Out)
        .collect();
    report.emit(Event::RunStarted {
        run_id: opts.run_id.clone(),
        mode: opts.mode,
        hosts: run.hosts.len(),
        tasks: in_run.len(),
    });
    // `--limit`: the hosts that are part of the run without being chosen, and why.
    for (host, r) in scope.read_only_hosts() {
        report.emit(Event::HostReadOnly {
            host,
            tasks: r.tasks,
            for_hosts: r.for_hosts,
            acting: r.acting,
        });
    }

    for e in super::retention::prune(&opts.state_dir, &opts.retention, &opts.run_id) {
        report.warn(None, e);
    }
    let logs_dir = opts.state_dir.join("logs").join(&opts.run_id);
    // One budget for everything the hosts send (`transport::output`).
    let budget = OutputBudget::new(opts.output_budget);
    let mut conns = HashMap::new();
    let mut log_warned = false;
    for h in &run.hosts {
        let (log, err) = HostLog::open(&logs_dir, &h.name, run.scrubber.clone());
        if let (Some(e), false) = (err, log_warned) {
            report.warn(None, format!("logs disabled: {e}"));
            log_warned = true;
        }
        conns.insert(
            h.name.clone(),
            Arc::new(
                Conn::new(&h.name, h.transport.clone(), log)
                    .with_events(run.events.clone(), opts.verbose)
                    .with_budget(budget.clone()),
            ),
        );
    }

    let modules = graph
        .graph
        .node_indices()
        .map(|n| {
            run.modules.get(n.index()).cloned().ok_or_else(|| {
                "no module was built for this task (this is a bug in kwin)".to_string()
            })
        })
        .collect();

    let mut per_host: HashMap<String, Vec<NodeIndex>> = HashMap::new();
    for n in in_run {
        per_host
            .entry(graph.task(n).id.host.clone())
            .or_default()
            .push(n);
    }

    let shared = Arc::new(Shared {
        graph: graph.clone(),
        modules,
        board: Board::new(graph.len()),
        conns,
        outputs: Outputs::default(),
        scope,
        scrubber: run.scrubber.clone(),
        report,
        opts: opts.clone(),
        cancel: run.cancel.clone(),
        permits: Arc::new(Semaphore::new(opts.parallelism.max(1))),
        budget,
    });

    let mut summary = RunSummary {
        hosts: run.hosts.len(),
        ..RunSummary::default()
    };

    // Tasks on hosts that are not part of the run cannot run; publish them so nothing waits.
    for (host, nodes) in &per_host {
        if shared.conns.contains_key(host) {
            continue;
        }
        for &n in nodes {
            let id = graph.task(n).id.clone();
            shared.board.set(
                n,
                Done {
                    status: TaskStatus::Failed,
                    cause: Some(format!("{id} failed")),
                    refused: false,
                    at: Instant::now(),
                    outputs: None,
                },
            );
            shared.report.emit(Event::TaskFinished {
                host: id.host.clone(),
                task: id.name.clone(),
                status: TaskStatus::Failed,
                message: Some(format!("host `{}` is not part of this run", id.host)),
                duration_ms: 0,
            });
            summary.counts.failed += 1;
        }
    }

    let mut workers = tokio::task::JoinSet::new();
    for h in &run.hosts {
        let nodes = per_host.remove(&h.name).unwrap_or_default();
        let sh = shared.clone();
        let name = h.name.clone();
        match opts.mode {
            Mode::Apply => workers.spawn(worker::run(sh, name, nodes, &Apply)),
            Mode::Plan => workers.spawn(worker::run(sh, name, nodes, &PlanOnly)),
        };
    }
    while let Some(r) = workers.join_next().await {
        match r {
            Ok(o) => {
                summary.counts += o.counts;
                summary.hosts_failed += usize::from(o.host_failed);
                summary.hosts_reached += usize::from(o.reached);
            }
            Err(e) => {
                shared.report.warn(
                    None,
                    format!("a host worker crashed (this is a bug in kwin): {e}"),
                );
                summary.hosts_failed += 1;
            }
        }
    }
    for c in shared.conns.values() {
        c.close().await;
    }

    summary.interrupted = shared.cancel.is_cancelled();
    summary.duration_ms = start.elapsed().as_millis() as u64;
    if summary.interrupted {
        shared.report.emit(Event::Interrupted {});
    }
    let last = Event::RunFinished {
        hosts: summary.hosts,
        hosts_reached: summary.hosts_reached,
        hosts_failed: summary.hosts_failed,
        counts: summary.counts,
        duration_ms: summary.duration_ms,
    };
    let mut journal = shared.report.journal();
    journal.record(&last, summary.duration_ms);
    if let Err(e) = journal.write(&opts.state_dir) {
        shared.report.warn(None, e);
    }
    shared.report.emit(last);
    summary
}
