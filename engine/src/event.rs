//! Events: the one output path of the engine.
//!
//! The engine never prints. Every component sends [`Event`]s to an [`EventSink`]; the CLI owns
//! the receiving end and renders them (progress bars on a TTY, plain lines otherwise, JSON
//! lines with `--output json`). All text inside events has passed the run's scrubber.

use serde::Serialize;
use tokio::sync::mpsc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Probe and show what would change (`kwin plan`, `kwin apply --check`).
    Plan,
    /// Converge.
    Apply,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    /// Already in the desired state.
    Ok,
    /// Changed (apply) or would change (plan).
    Changed,
    Failed,
    /// Not run: a task it depends on failed, the host failed, or the run was interrupted.
    Skipped,
}

/// The outcome of one check of `kwin verify`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckResult {
    Pass,
    Fail,
    /// Not run: what it needs is missing (e.g. a pod that never became ready).
    Skip,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    RunStarted {
        run_id: String,
        mode: Mode,
        hosts: usize,
        tasks: usize,
    },
    HostConnected {
        host: String,
        duration_ms: u64,
    },
    HostProbed {
        host: String,
        facts: usize,
        duration_ms: u64,
    },
    /// A task's plan: what would change and why (diff included), or why nothing changes.
    TaskPlanned {
        host: String,
        task: String,
        module: String,
        change: bool,
        action: Option<String>,
        reason: String,
        diff: Option<String>,
    },
    TaskStarted {
        host: String,
        task: String,
    },
    TaskFinished {
        host: String,
        task: String,
        status: TaskStatus,
        /// Why it failed or was skipped, or what changed.
        message: Option<String>,
        duration_ms: u64,
    },
    HostFinished {
        host: String,
        ok: usize,
        changed: usize,
        failed: usize,
        skipped: usize,
        duration_ms: u64,
        /// Why the host failed, if it did.
        error: Option<String>,
    },
    Warning {
        host: Option<String>,
        message: String,
    },
    /// The run was interrupted (Ctrl-C): no new tasks were started; the summary follows.
    Interrupted {},
    /// One check of `kwin verify` (a row of its table): what was checked, from where to
    /// where, and the evidence.
    Check {
        name: String,
        from: String,
        to: String,
        result: CheckResult,
        detail: String,
    },
    /// The last event of `kwin verify`.
    VerifySummary {
        checks: usize,
        passed: usize,
        failed: usize,
        skipped: usize,
        duration_ms: u64,
    },
    /// Always the last event of a run.
    Summary {
        hosts: usize,
        ok: usize,
        changed: usize,
        failed: usize,
        skipped: usize,
        duration_ms: u64,
    },
}

/// Sending half of the event channel. Cloned into every worker.
#[derive(Debug, Clone)]
pub struct EventSink(mpsc::UnboundedSender<Event>);

impl EventSink {
    pub fn channel() -> (EventSink, mpsc::UnboundedReceiver<Event>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (EventSink(tx), rx)
    }
    /// Send an event; a closed receiver (CLI shutting down) is not an error for the engine.
    pub fn send(&self, e: Event) {
        let _ = self.0.send(e);
    }
}
