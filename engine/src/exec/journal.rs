//! The run journal `.kwin/runs/<run-id>.json`: what ran, the status of every task, timings.
//!
//! Built from the very events the user sees ([`Reporter`] sends each event to the CLI and
//! records it here), so the journal and the output cannot disagree. Event texts are already
//! scrubbed. Written once at the end of the run (0600), also when interrupted.

use crate::event::{Counts, Event, EventSink, Mode, TaskStatus};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

#[derive(Debug, Clone, Serialize)]
pub struct Journal {
    pub run_id: String,
    pub plan: PathBuf,
    pub mode: Mode,
    pub started: String,
    pub duration_ms: u64,
    pub interrupted: bool,
    pub summary: Option<JournalSummary>,
    pub hosts: BTreeMap<String, JournalHost>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct JournalSummary {
    pub hosts: usize,
    pub hosts_reached: usize,
    pub hosts_failed: usize,
    #[serde(flatten)]
    pub counts: Counts,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct JournalHost {
    pub connected_ms: Option<u64>,
    pub probe_ms: Option<u64>,
    pub facts: usize,
    pub duration_ms: Option<u64>,
    pub error: Option<String>,
    pub tasks: Vec<JournalTask>,
}

#[derive(Debug, Clone, Serialize)]
pub struct JournalTask {
    pub task: String,
    pub module: Option<String>,
    /// What the plan said: action, or `none`.
    pub planned: Option<String>,
    pub reason: Option<String>,
    pub status: Option<TaskStatus>,
    pub message: Option<String>,
    /// Offset from the run's start when the task finished.
    pub finished_at_ms: Option<u64>,
    pub duration_ms: Option<u64>,
}

/// A journal is small; this bounds what is read of one.
const MAX_JOURNAL: u64 = 64 << 20;

/// The newest journal under `state_dir/runs` of the plan at `plan` (its file name: the
/// directory's other plans keep theirs there too), by when it was written (run ids of one
/// second do not sort by time): its path and content. `None`: no run of that plan.
pub fn last_of(state_dir: &Path, plan: &Path) -> Option<(PathBuf, serde_json::Value)> {
    let name = plan.file_name()?;
    let rd = std::fs::read_dir(state_dir.join("runs")).ok()?;
    let mut runs: Vec<(std::time::SystemTime, String, PathBuf)> = rd
        .flatten()
        .filter_map(|e| {
            let file = e.file_name().to_string_lossy().into_owned();
            let id = file.strip_suffix(".json")?;
            let written = e.metadata().and_then(|m| m.modified()).ok()?;
            super::retention::is_run_id(id).then(|| (written, file, e.path()))
        })
        .collect();
    runs.sort();
    runs.into_iter().rev().find_map(|(_, _, path)| {
        let bytes = crate::fs::read_bounded(&path, MAX_JOURNAL).ok()?;
        let j: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
        let of = j["plan"].as_str().map(Path::new)?.file_name()?.to_owned();
        (of == name).then_some((path, j))
    })
}

/// The hosts of a journal that did not finish cleanly: the host failed (cannot connect, a
/// lost connection), or a task of it failed, was skipped (its host or a task it needs
/// failed) or never finished (an interrupted run). What `--limit failed` reruns.
pub fn unfinished_hosts(j: &serde_json::Value) -> Vec<String> {
    let Some(hosts) = j["hosts"].as_object() else {
        return Vec::new();
    };
    hosts
        .iter()
        .filter(|(_, h)| {
            !h["error"].is_null()
                || h["tasks"].as_array().is_some_and(|ts| {
                    ts.iter().any(|t| {
                        !matches!(
                            t["status"].as_str(),
                            Some("ok" | "changed" | "would_change")
                        )
                    })
                })
        })
        .map(|(name, _)| name.clone())
        .collect()
}

impl Journal {
    pub fn new(run_id: &str, plan: &Path, mode: Mode) -> Self {
        Journal {
            run_id: run_id.to_string(),
            plan: plan.to_path_buf(),
            mode,
            started: crate::fs::rfc3339(crate::fs::unix_ms()),
            duration_ms: 0,
            interrupted: false,
            summary: None,
            hosts: BTreeMap::new(),
        }
    }

    fn task(&mut self, host: &str, task: &str) -> &mut JournalTask {
        let h = self.hosts.entry(host.to_string()).or_default();
        let pos = match h.tasks.iter().position(|t| t.task == task) {
            Some(p) => p,
            None => {
                h.tasks.push(JournalTask {
                    task: task.to_string(),
                    module: None,
                    planned: None,
                    reason: None,
                    status: None,
                    message: None,
                    finished_at_ms: None,
                    duration_ms: None,
                });
                h.tasks.len() - 1
            }
        };
        &mut h.tasks[pos]
    }

    pub fn record(&mut self, e: &Event, at_ms: u64) {
        match e {
            Event::HostConnected { host, duration_ms } => {
                self.hosts.entry(host.clone()).or_default().connected_ms = Some(*duration_ms);
            }
            Event::HostProbed {
                host,
                facts,
                duration_ms,
            } => {
                let h = self.hosts.entry(host.clone()).or_default();
                h.probe_ms = Some(*duration_ms);
                h.facts = *facts;
            }
            Event::TaskPlanned {
                host,
                task,
                module,
                change,
                action,
                reason,
                ..
            } => {
                let t = self.task(host, task);
                t.module = Some(module.clone());
                t.planned = Some(if *change {
                    action.clone().unwrap_or_else(|| "change".into())
                } else {
                    "none".into()
                });
                t.reason = Some(reason.clone());
            }
            Event::TaskFinished {
                host,
                task,
                status,
                message,
                duration_ms,
            } => {
                let t = self.task(host, task);
                t.status = Some(*status);
                t.message = message.clone();
                t.duration_ms = Some(*duration_ms);
                t.finished_at_ms = Some(at_ms);
            }
            Event::HostFinished {
                host,
                duration_ms,
                error,
                ..
            } => {
                let h = self.hosts.entry(host.clone()).or_default();
                h.duration_ms = Some(*duration_ms);
                h.error = error.clone();
            }
            Event::Interrupted {} => self.interrupted = true,
            Event::RunFinished {
                hosts,
                hosts_reached,
                hosts_failed,
                counts,
                duration_ms,
            } => {
                self.duration_ms = *duration_ms;
                self.summary = Some(JournalSummary {
                    hosts: *hosts,
                    hosts_reached: *hosts_reached,
                    hosts_failed: *hosts_failed,
                    counts: *counts,
                });
            }
            Event::RunStarted { .. }
            | Event::Diagnostic(_)
            | Event::Logs { .. }
            | Event::ConnectRetry { .. }
            | Event::TaskStarted { .. }
            | Event::HostReadOnly { .. }
            | Event::ExecResult { .. }
            | Event::HostFacts { .. }
            | Event::Script { .. }
            | Event::Output { .. }
            | Event::StillRunning { .. }
            | Event::Warning { .. }
            | Event::VerifyStarted { .. }
            | Event::Check { .. }
            | Event::VerifyFinished { .. }
            | Event::Kubeconfig { .. }
            | Event::Upgrade { .. }
            | Event::Summary(_) => {}
        }
    }

    /// Write to `state_dir/runs/<run-id>.json`.
    pub fn write(&self, state_dir: &Path) -> Result<PathBuf, String> {
        let dir = state_dir.join("runs");
        let path = dir.join(format!("{}.json", self.run_id));
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| e.to_string())?;
        crate::fs::private_dir(&dir)
            .and_then(|_| crate::fs::write_private(&path, &bytes))
            .map_err(|e| format!("cannot write journal {}: {e}", path.display()))?;
        Ok(path)
    }
}

/// Sends events to the CLI and records them in the journal.
pub struct Reporter {
    sink: EventSink,
    journal: Mutex<Journal>,
    start: Instant,
}

impl Reporter {
    pub fn new(sink: EventSink, journal: Journal) -> Self {
        Reporter {
            sink,
            journal: Mutex::new(journal),
            start: Instant::now(),
        }
    }

    pub fn emit(&self, e: Event) {
        let at = self.start.elapsed().as_millis() as u64;
        match self.journal.lock() {
            Ok(mut j) => j.record(&e, at),
            Err(p) => p.into_inner().record(&e, at),
        }
        self.sink.send(e);
    }

    pub fn warn(&self, host: Option<&str>, message: impl Into<String>) {
        self.emit(Event::Warning {
            host: host.map(str::to_string),
            message: message.into(),
        });
    }

    pub fn journal(&self) -> Journal {
        match self.journal.lock() {
            Ok(j) => j.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
}
