//! What a run is given and what it gives back: [`Run`] (the graph, every task's module, the
//! hosts and their transports, [`RunOptions`], the scrubber, the event sink, [`Cancel`]) and
//! [`RunSummary`]. Every other file of the executor imports these from here, never from
//! `mod.rs`.

use super::retention::Retention;
use crate::event::{Counts, EventSink, Mode};
use crate::graph::scope::Scope;
use crate::graph::TaskGraph;
use crate::module::build::Modules;
use crate::plan::effective::SettingsEff;
use crate::secret::Scrubber;
use crate::transport::Transport;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Knobs of one run. Cross-cutting concerns belong here, never in modules.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub mode: Mode,
    pub parallelism: usize,
    pub step_timeout: Duration,
    pub retries: u32,
    pub retry_delay: Duration,
    /// How long a first connection keeps trying a host that does not answer yet
    /// (`settings.wait_for_hosts`; zero: not at all).
    pub wait_for_hosts: Duration,
    pub accept_new_host_keys: bool,
    /// `.kwin/` next to the plan: logs, journal, lock, kwin-owned known_hosts.
    pub state_dir: PathBuf,
    /// Id of this run (names the log folder and the journal).
    pub run_id: String,
    /// The plan file, for the journal.
    pub plan: PathBuf,
    /// Whether a task may reboot a host.
    pub allow_reboot: bool,
    /// How often to poll a rebooting host.
    pub reboot_poll: Duration,
    /// Bytes of step output the run keeps in memory and logs, all hosts together
    /// (`settings.output_budget_mib`); past it, step output is cut (see `transport::output`).
    pub output_budget: u64,
    /// Old runs' logs and journals kept (`settings.keep_runs`, `settings.logs_limit_mib`);
    /// pruned when the run starts.
    pub retention: Retention,
    /// `kwin facts`: each host is connected to and probed, its answers reported
    /// (`host_facts`); no task is planned.
    pub probe_only: bool,
    /// `-v`: every script and its output also as events (`Event::Script`, `Event::Output`),
    /// in the form the host log has.
    pub verbose: bool,
}

impl RunOptions {
    /// The options of a run of `mode` keeping its state in `state_dir`, from the plan's
    /// effective `[settings]` (defaults applied by `plan::effective`). Every setting is
    /// named here: a new one does not compile until it reaches the executor.
    pub fn from_settings(settings: &SettingsEff, mode: Mode, state_dir: PathBuf) -> Self {
        let SettingsEff {
            parallelism,
            step_timeout_secs,
            retries,
            retry_delay_secs,
            wait_for_hosts_secs,
            allow_reboot,
            output_budget_bytes,
            keep_runs,
            logs_limit_bytes,
        } = *settings;
        RunOptions {
            mode,
            parallelism,
            step_timeout: Duration::from_secs(step_timeout_secs),
            retries,
            retry_delay: Duration::from_secs(retry_delay_secs),
            wait_for_hosts: Duration::from_secs(wait_for_hosts_secs),
            accept_new_host_keys: false,
            state_dir,
            run_id: crate::fs::new_run_id(),
            plan: PathBuf::new(),
            allow_reboot,
            reboot_poll: REBOOT_POLL,
            output_budget: output_budget_bytes,
            retention: Retention {
                keep_runs,
                max_bytes: logs_limit_bytes,
            },
            probe_only: false,
            verbose: false,
        }
    }

    /// The options of a plan without `[settings]`: kwin's defaults
    /// (`plan/effective/defaults.rs`).
    pub fn new(mode: Mode, state_dir: PathBuf) -> Self {
        RunOptions::from_settings(&SettingsEff::default(), mode, state_dir)
    }
}

/// How often a rebooting host is polled (not a plan setting).
const REBOOT_POLL: Duration = Duration::from_secs(2);

/// Totals of a run, as in the final `summary` event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSummary {
    pub hosts: usize,
    /// Hosts connected to.
    pub hosts_reached: usize,
    /// Hosts that failed as a whole (not reached, probe failed, connection lost); their
    /// tasks that did not run are `skipped`.
    pub hosts_failed: usize,
    /// Tasks by outcome, the sum of the hosts' `host_finished` counts (and tasks on hosts
    /// outside the run, failed).
    pub counts: Counts,
    pub duration_ms: u64,
    pub interrupted: bool,
}

/// A host of the run and the transport that reaches it (not connected yet).
pub struct HostHandle {
    pub name: String,
    pub transport: Arc<dyn Transport>,
}

/// Asks a run to stop scheduling new tasks (Ctrl-C). Running steps finish or time out.
#[derive(Debug)]
pub struct Canceller(watch::Sender<bool>);

impl Canceller {
    pub fn cancel(&self) {
        self.0.send_replace(true);
    }
}

/// The run's side of a [`Canceller`].
#[derive(Debug, Clone)]
pub struct Cancel(watch::Receiver<bool>);

impl Cancel {
    pub fn pair() -> (Canceller, Cancel) {
        let (tx, rx) = watch::channel(false);
        (Canceller(tx), Cancel(rx))
    }
    pub fn is_cancelled(&self) -> bool {
        *self.0.borrow()
    }
    /// Resolves once cancelled; never, if the canceller is gone without cancelling.
    pub async fn cancelled(&self) {
        let mut rx = self.0.clone();
        loop {
            if *rx.borrow_and_update() {
                return;
            }
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// Everything one run needs.
pub struct Run {
    pub graph: Arc<TaskGraph>,
    /// Every task's module, by node index, built before the run (`module::build`).
    pub modules: Modules,
    /// Which tasks run, which are read only, which are out (`--limit`; `Scope::all()`
    /// without it).
    pub scope: Scope,
    /// Every host of the run (hosts without tasks are connected to and reported too).
    pub hosts: Vec<HostHandle>,
    pub options: RunOptions,
    pub scrubber: Scrubber,
    pub events: EventSink,
    pub cancel: Cancel,
}
