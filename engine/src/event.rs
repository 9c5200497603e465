//! Events: the one output path of the engine, and the one event stream of `--output json`.
//!
//! The engine never prints. Every component sends [`Event`]s to an [`EventSink`]; the CLI owns
//! the receiving end and renders them (progress bars on a TTY, plain lines otherwise, JSON
//! lines with `--output json`). All text inside events has passed the run's scrubber.
//!
//! The same enum is every line of `--output json`, for every command: the CLI adds its own
//! events (a `diagnostic` per problem of the plan, `kubeconfig`, `still_running`) and ends
//! every stream with exactly one [`Summary`]. Each line is an [`EventLine`]: the event with
//! `"schema": SCHEMA_VERSION`. `docs/events.schema.json` is [`schema_json`], checked current
//! by `tests/json_events.rs`; `docs/json-events.md` describes the stream.

use crate::diag::Diagnostic;
use schemars::JsonSchema;
use serde::Serialize;
use tokio::sync::mpsc;

/// The version of the event stream, on every line as `"schema"`. Raised when an event or a
/// field is removed or changes meaning (adding one does not raise it).
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Probe and show what would change (`kwin plan`, `kwin apply --check`).
    Plan,
    /// Converge.
    Apply,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Already in the desired state.
    Ok,
    /// Changed (apply).
    Changed,
    /// Would change (plan, `apply --check`): nothing was changed.
    WouldChange,
    Failed,
    /// Not run: a task it depends on failed, the host failed, or the run was interrupted.
    Skipped,
}

/// Tasks by outcome: of a host (`host_finished`), of a run (`run_finished`, `summary`, the
/// journal, `exec::RunSummary`). Flattened into the events' JSON: `"ok":…,"changed":…,…`.
/// In plan mode `changed` is 0 and `would_change` counts the changes a plan found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Counts {
    pub ok: usize,
    pub changed: usize,
    pub would_change: usize,
    /// Tasks that failed (a host that failed before its tasks ran counts in `hosts_failed`,
    /// its tasks in `skipped`).
    pub failed: usize,
    pub skipped: usize,
}

impl Counts {
    /// Count one task that ended with `status`.
    pub fn add(&mut self, status: TaskStatus) {
        match status {
            TaskStatus::Ok => self.ok += 1,
            TaskStatus::Changed => self.changed += 1,
            TaskStatus::WouldChange => self.would_change += 1,
            TaskStatus::Failed => self.failed += 1,
            TaskStatus::Skipped => self.skipped += 1,
        }
    }
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.ok += o.ok;
        self.changed += o.changed;
        self.would_change += o.would_change;
        self.failed += o.failed;
        self.skipped += o.skipped;
    }
}

/// One fact's answer, as `kwin facts` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct FactAnswer {
    pub exit: i32,
    pub stdout: String,
    pub stderr: String,
}

/// What a host is, as `kwin facts` shows it: read by the probe (`fact::host`), in the same
/// script as the plan's facts. A value the host did not give is absent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct HostSystem {
    /// `linux` or `windows`: the family of the script that answered.
    pub os: String,
    /// How the system names itself: os-release `PRETTY_NAME` (`Debian GNU/Linux 12
    /// (bookworm)`); Windows' `ProductName` (`Windows Server 2022 Datacenter`).
    pub name: Option<String>,
    /// os-release `ID` (`debian`, `ubuntu`); `windows`.
    pub id: Option<String>,
    /// os-release `VERSION_ID` (`12`, `24.04`); Windows: major.minor.build (`10.0.20348`).
    pub version: Option<String>,
    /// `uname -r`; Windows: major.minor.build.update-revision (`10.0.20348.2227`).
    pub kernel: Option<String>,
    /// `uname -m` (`x86_64`); Windows' `PROCESSOR_ARCHITECTURE` (`AMD64`).
    pub arch: Option<String>,
    pub hostname: Option<String>,
    /// Logical processors online.
    pub cpus: Option<u32>,
    /// Physical memory the system sees, in bytes.
    pub memory_bytes: Option<u64>,
    /// Linux: `v2` (the unified hierarchy at /sys/fs/cgroup), `v1` (v1 hierarchies, which the
    /// kubelet refuses from 1.35 unless told), `none` (nothing mounted there), or
    /// `unknown (<file system>)`.
    pub cgroup: Option<String>,
    /// Windows: the `node.kubernetes.io/windows-build` label's value (`10.0.20348`).
    pub windows_build: Option<String>,
    /// The host's addresses with their prefix length (`10.0.0.5/24`), loopback and
    /// link-local ones left out.
    pub addresses: Vec<HostAddress>,
}

/// One address of a [`HostSystem`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct HostAddress {
    /// The interface (`eth0`, `Ethernet`), when the host said.
    pub interface: Option<String>,
    /// Address/prefix length (`10.0.0.5/24`), or the address alone when the host gave no
    /// prefix.
    pub address: String,
}

/// One row of an [`Event::Upgrade`]: step `step` (rows with the same step run together).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct UpgradeStep {
    pub step: usize,
    pub node: String,
    /// `control plane`, `kubelet` (a control plane's), `worker`.
    pub part: String,
    /// What runs now.
    pub now: String,
    /// What kwin does.
    pub then: String,
}

/// The outcome of one check of `kwin verify`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CheckResult {
    Pass,
    Fail,
    /// Not run: what it needs is missing (e.g. a pod that never became ready).
    Skip,
}

/// How a command ended; the CLI's exit code is a function of it (`src/drive.rs`,
/// `docs/exit-codes.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Exit 0.
    Success,
    /// Exit 1: the plan is invalid, a task or check failed, a host was not reached, or the
    /// command could not start (lock held, unreadable file, refused confirmation).
    Failed,
    /// Exit 2: `kwin plan --detailed-exitcode` found changes to make.
    ChangesPending,
    /// Exit 64: the command line was wrong (unknown flag, missing argument, bad value).
    UsageError,
    /// Exit 130: Ctrl-C.
    Interrupted,
}

/// Where a script's output came from (`-v`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Stdout,
    Stderr,
}

/// The checks of `kwin verify`, by result (in `verify_finished` and the summary).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct CheckCounts {
    pub checks: usize,
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
}

/// The last line of every `--output json` stream, exactly once: how the command ended and
/// what it did. Counts a command did not reach are 0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Summary {
    /// The command (`validate`, `plan`, `apply`, …; `null` when the command line could not
    /// be parsed).
    pub command: Option<String>,
    pub outcome: Outcome,
    /// The process's exit code (`docs/exit-codes.md`).
    pub exit_code: u8,
    /// Hosts of the run (0 when no run started).
    pub hosts: usize,
    /// Hosts kwin connected to.
    pub hosts_reached: usize,
    /// Hosts that failed as a whole (not reached, probe failed, connection lost).
    pub hosts_failed: usize,
    /// Tasks by outcome, over every host of the run.
    #[serde(flatten)]
    pub counts: Counts,
    /// Errors and warnings among the plan's diagnostics.
    pub errors: usize,
    pub warnings: usize,
    /// The checks of `kwin verify` (also after `kwin apply`), when they ran.
    pub verify: Option<CheckCounts>,
    /// Folders of this command's host logs (`.kwin/logs/<run-id>/`), those that exist.
    pub logs: Vec<String>,
    /// Why the command failed, when no event above says it (the same text as stderr's
    /// `error:` line).
    pub error: Option<String>,
    pub duration_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A problem of the plan (`kwin validate`, and before any run): the same fields as the
    /// human `file:line:col: error[code]: …` line.
    Diagnostic(Diagnostic),
    /// Where the host logs of a session go: every remote command and its output, scrubbed.
    Logs {
        run_id: String,
        dir: String,
    },
    RunStarted {
        run_id: String,
        mode: Mode,
        hosts: usize,
        tasks: usize,
    },
    /// A connection attempt failed with an error worth retrying; the next one follows after
    /// `delay_ms`. While kwin waits for a host that does not answer yet
    /// (`settings.wait_for_hosts`): how long it has waited and will wait at most.
    ConnectRetry {
        host: String,
        /// The attempt that failed (1 is the first).
        attempt: u32,
        error: String,
        delay_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        waited_ms: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wait_ms: Option<u64>,
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
        /// The plan is a change (`kwin plan`: the task would change; `apply`: it is about
        /// to).
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
    /// `kwin facts`: what one host is (`system`; absent when its answer could not be read,
    /// `system_error` says why), and what the probe answered for the plan's tasks (`facts`,
    /// by fact key). All scrubbed; a sensitive task's answers only as hashes.
    HostFacts {
        host: String,
        system: Option<HostSystem>,
        system_error: Option<String>,
        facts: std::collections::BTreeMap<String, FactAnswer>,
    },
    /// `-v`: a script as sent to `host` (`what`: probe, apply, output of a task, …), in the
    /// form the host log has (a sensitive task's content hashed).
    Script {
        host: String,
        what: String,
        script: String,
    },
    /// `-v`: what a script printed, scrubbed as the host log is: complete lines as they
    /// arrive, or, for a script whose host log hides some of its output, all of a stream
    /// when the script ends, as the log has it.
    Output {
        host: String,
        what: String,
        stream: Stream,
        text: String,
    },
    /// A task has been running for `elapsed_s` seconds (every `KWIN_HEARTBEAT_SECS`, 10 by
    /// default, while it runs; given by the CLI when stdout is not a terminal).
    StillRunning {
        host: String,
        task: String,
        elapsed_s: u64,
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
    /// The run was interrupted (Ctrl-C): no new tasks were started; `run_finished` follows.
    Interrupted {},
    /// `kwin verify`'s checks start (alone, or after a clean `kwin apply`), run from `host`
    /// (the first control plane): the events up to `verify_finished` are theirs.
    VerifyStarted {
        host: String,
    },
    /// One check of `kwin verify` (a row of its table): what was checked, from where to
    /// where, and the evidence.
    Check {
        name: String,
        from: String,
        to: String,
        result: CheckResult,
        detail: String,
    },
    /// The end of `kwin verify`'s checks.
    VerifyFinished {
        #[serde(flatten)]
        counts: CheckCounts,
        duration_ms: u64,
    },
    /// The end of a run of the executor (plan, apply, reset): its totals.
    RunFinished {
        hosts: usize,
        hosts_reached: usize,
        hosts_failed: usize,
        #[serde(flatten)]
        counts: Counts,
        duration_ms: u64,
    },
    /// `plan`, `apply`: the cluster runs another version than the plan's. What the upgrade
    /// does, in the order it runs (the version skew policy was checked before).
    Upgrade {
        /// The oldest kube-apiserver's version.
        from: String,
        to: String,
        steps: Vec<UpgradeStep>,
        /// Nodes left as they are, and why; upgrades an earlier run left unfinished.
        notes: Vec<String>,
    },
    /// `kwin kubeconfig` wrote the admin kubeconfig (never its content).
    Kubeconfig {
        path: String,
        context: String,
        server: String,
        host: String,
    },
    /// Always the last line of a command's stream, exactly once.
    Summary(Summary),
}

/// One line of `--output json`: the event and the stream's version.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(
    title = "kwin event",
    description = "One line of `kwin ... --output json`"
)]
pub struct EventLine<'a> {
    /// [`SCHEMA_VERSION`].
    #[schemars(range(min = 1, max = 1))]
    pub schema: u32,
    #[serde(flatten)]
    pub event: &'a Event,
}

impl Event {
    /// The event as one line of `--output json` (no newline).
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(&EventLine {
            schema: SCHEMA_VERSION,
            event: self,
        })
        .unwrap_or_else(|e| {
            format!(
                r#"{{"schema":{SCHEMA_VERSION},"event":"warning","host":null,"message":"an event could not be written as JSON (this is a bug in kwin): {e}"}}"#
            )
        })
    }
}

/// The JSON Schema of one line of `--output json` (`docs/events.schema.json`).
pub fn schema_json() -> String {
    let schema = schemars::schema_for!(EventLine<'static>);
    let mut s = serde_json::to_string_pretty(&schema).unwrap_or_default();
    s.push('\n');
    s
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

    /// The counts flatten into the events' JSON, field by field, after the version.
    #[test]
    fn counts_flatten_into_the_line() {
        let counts = Counts {
            ok: 1,
            changed: 2,
            would_change: 0,
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
            host.to_json_line(),
            r#"{"schema":1,"event":"host_finished","host":"h1","ok":1,"changed":2,"would_change":0,"failed":3,"skipped":4,"duration_ms":5,"error":null}"#
        );
    }
}
