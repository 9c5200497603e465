//! The executor: probe every host in one round trip, then walk the task graph.
//!
//! See ARCHITECTURE.md "Flow of one apply". The pieces:
//!
//! - [`execute`] (here): takes every task's module (built before the run by
//!   `module::build`), wraps each host's transport in a logged [`conn::Conn`], and hands over
//!   to the walker.
//! - `walker.rs`: one tokio task per host, a semaphore bounding how many hosts work at once,
//!   and the [`walker::Board`] where every task's outcome is published (a watch channel per
//!   task) so cross-host dependents can wait on it.
//! - `host.rs`: the per-host worker. Connect, probe (ONE script with every fact the host's
//!   tasks read), then the host's tasks in graph order: plan each against the facts, queue
//!   consecutive changes in a batch, and send the batch as ONE script that also re-reads each
//!   changed task's facts (convergence check) and the facts later tasks need. A task re-probes
//!   only if an earlier change on the host may have touched what it reads (`Touches`), or a
//!   task it depends on changed another host after it was probed.
//! - `plan_only.rs`: `kwin plan` / `apply --check`: probe, plan, report; changes nothing.
//! - `batch.rs` (apply scripts), `inputs.rs` (task outputs read once per producer),
//!   `reboot.rs` (trigger, wait down, wait up with a new boot id), `conn.rs` (timeouts, retry
//!   with backoff, logging), `logs.rs`, `journal.rs`, `lock.rs`, `state.rs` (`.kwin/`),
//!   `connect.rs` (transport per host).
//!
//! Invariants: the executor never prints (events only); every text it emits or logs has
//! passed the run's scrubber; a host's failure never stops an unrelated host.

pub(crate) mod batch;
pub mod conn;
pub mod connect;
pub(crate) mod host;
pub(crate) mod inputs;
pub mod journal;
pub mod lock;
pub mod logs;
pub(crate) mod plan_only;
pub mod reboot;
pub mod retention;
pub mod state;
pub(crate) mod walker;

use crate::event::{EventSink, Mode};
use crate::graph::TaskGraph;
use crate::module::build::Modules;
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
    pub retention: retention::Retention,
}

impl RunOptions {
    /// Defaults of `[settings]` for a run of `mode` keeping its state in `state_dir`.
    pub fn new(mode: Mode, state_dir: PathBuf) -> Self {
        RunOptions {
            mode,
            parallelism: 32,
            step_timeout: Duration::from_secs(600),
            retries: 3,
            retry_delay: Duration::from_secs(2),
            accept_new_host_keys: false,
            state_dir,
            run_id: crate::fs::new_run_id(),
            plan: PathBuf::new(),
            allow_reboot: true,
            reboot_poll: Duration::from_secs(2),
            output_budget: crate::transport::output::DEFAULT_OUTPUT_BUDGET,
            retention: retention::Retention::default(),
        }
    }
}

/// Totals of a run, as in the final `summary` event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSummary {
    pub hosts: usize,
    pub ok: usize,
    pub changed: usize,
    /// Failed tasks, plus hosts that failed before any of their tasks could (connect, probe).
    pub failed: usize,
    pub skipped: usize,
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
    /// Every host of the plan (hosts without tasks are connected to and reported too).
    pub hosts: Vec<HostHandle>,
    pub options: RunOptions,
    pub scrubber: Scrubber,
    pub events: EventSink,
    pub cancel: Cancel,
}

/// Run the plan: `Mode::Plan` probes and reports, `Mode::Apply` converges. Emits events (the
/// last one is `summary`), writes logs and the journal under `options.state_dir`.
pub async fn execute(run: Run) -> RunSummary {
    walker::walk(run).await
}

/// Every PowerShell script shape the executor itself generates (a batch of two steps with
/// their convergence re-probe), for syntax checks by the test suite.
pub fn powershell_batch_sample() -> String {
    use crate::fact::FactQuery;
    let q = |k: &str| FactQuery {
        key: k.into(),
        command: "ConvertTo-Json -Compress -InputObject @{ a = 1 }".into(),
        path: None,
    };
    let items = vec![
        batch::Item {
            steps: vec!["Write-Output 'one'".into()],
            verify: vec![q("a")],
            verify_now: true,
            sensitive: false,
        },
        batch::Item {
            steps: vec!["$x = 1\nif ($x) { 'two' }".into(), "'three'".into()],
            verify: vec![q("b")],
            verify_now: true,
            sensitive: false,
        },
    ];
    batch::Batch::new(crate::transport::Shell::PowerShell, items, vec![q("c")]).script
}
