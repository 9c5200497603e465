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

/// Tasks by outcome: of a host (`host_finished`), of a run (`summary`, the journal,
/// `exec::RunSummary`). Flattened into the events' JSON: `"ok":…,"changed":…,…`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub ok: usize,
    pub changed: usize,
    pub failed: usize,
    pub skipped: usize,
}

impl Counts {
    /// Count one task that ended with `status`.
    pub fn add(&mut self, status: TaskStatus) {
        match status {
            TaskStatus::Ok => self.ok += 1,
            TaskStatus::Changed => self.changed += 1,
            TaskStatus::Failed => self.failed += 1,
            TaskStatus::Skipped => self.skipped += 1,
        }
    }
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.ok += o.ok;
        self.changed += o.changed;
        self.failed += o.failed;
        self.skipped += o.skipped;
    }
}

/// One fact's answer, as `kwin facts` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FactAnswer {
    pub exit: i32,
    pub stdout: String,
    pub stderr: String,
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
    /// Under `--limit`: a host that is part of the run without being chosen. Its `tasks`
    /// are read, not changed (`for_hosts` need them, e.g. join data); `acting` are its
    /// tasks that act for the chosen hosts (reset's drain).
    HostReadOnly {
        host: String,
        tasks: Vec<String>,
        for_hosts: Vec<String>,
        acting: Vec<String>,
    },
    TaskStarted {
        host: String,
        task: String,
    },
    /// `kwin exec`: one host's command ran (`exit`), or could not (`error`: connect,
    /// timeout). Output as the host gave it, scrubbed.
    ExecResult {
        host: String,
        exit: Option<i32>,
        stdout: String,
        stderr: String,
        error: Option<String>,
        duration_ms: u64,
    },
    /// `kwin facts`: what one host's probe answered, by fact key (scrubbed; a sensitive
    /// task's answers only as hashes).
    HostFacts {
        host: String,
        facts: std::collections::BTreeMap<String, FactAnswer>,
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
        #[serde(flatten)]
        counts: Counts,
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
        #[serde(flatten)]
        counts: Counts,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON of the events that carry [`Counts`] is what it was with the counts written
    /// out field by field (consumers of `--output json` and the journal see no change).
    #[test]
    fn counts_flatten_into_the_same_json() {
        let counts = Counts {
            ok: 1,
            changed: 2,
            failed: 3,
            skipped: 4,
        };
        let host = Event::HostFinished {
            host: "h1".into(),
            counts,
            duration_ms: 5,
            error: None,
        };
        assert_eq!(
            serde_json::to_string(&host).expect("json"),
            r#"{"event":"host_finished","host":"h1","ok":1,"changed":2,"failed":3,"skipped":4,"duration_ms":5,"error":null}"#
        );
        let summary = Event::Summary {
            hosts: 2,
            counts,
            duration_ms: 6,
        };
        assert_eq!(
            serde_json::to_string(&summary).expect("json"),
            r#"{"event":"summary","hosts":2,"ok":1,"changed":2,"failed":3,"skipped":4,"duration_ms":6}"#
        );
    }
}
