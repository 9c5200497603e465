//! Executor fixtures: what the tests that drive `exec::execute` with modules of their own
//! share (engine/tests/exec_mock.rs over the strict mock, tests/security_task_outputs.rs over
//! local shells): a file fact and its reading, string params, tasks with `after` and inputs,
//! and one run of the real executor with its events.

use kwin_engine::event::{Event, EventSink, TaskStatus};
use kwin_engine::exec::{execute, Cancel, HostHandle, Run, RunOptions, RunSummary};
use kwin_engine::fact::{FactError, FactQuery, Facts};
use kwin_engine::graph::TaskGraph;
use kwin_engine::module::build::{instantiate, Modules};
use kwin_engine::module::{ModuleError, Registry};
use kwin_engine::quote::sh_quote;
use kwin_engine::secret::Scrubber;
use kwin_engine::task::{InputRef, Origin, Task, TaskId};
use kwin_engine::transport::{Shell, Transport};
use std::sync::Arc;

/// The fact `file:PATH`: the file's content (`cat`), a non-zero exit when it is missing.
pub fn file_fact(path: &str) -> FactQuery {
    FactQuery {
        key: format!("file:{path}"),
        command: format!("cat {} 2>/dev/null", sh_quote(path)),
        path: None,
    }
}

/// Content of `path` per its [`file_fact`], `None` when missing.
pub fn file_content(facts: &Facts, path: &str) -> Result<Option<String>, ModuleError> {
    let key = format!("file:{path}");
    let out = facts
        .raw(&key)
        .ok_or(ModuleError::Fact(FactError::Missing(key)))?;
    if out.exit != 0 {
        return Ok(None);
    }
    Ok(Some(String::from_utf8_lossy(&out.stdout).into_owned()))
}

/// The string param `k` (empty when absent).
pub fn param(p: &serde_json::Value, k: &str) -> String {
    p.get(k)
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_string()
}

/// A user task `name` on `host`.
pub fn task(host: &str, name: &str, module: &str, params: serde_json::Value) -> Task {
    Task::new(TaskId::new(host, name), module, params).with_origin(Origin::User { index: 0 })
}

/// Ordering and inputs on a task, written the way a plan says them.
pub trait TaskExt {
    /// After `host`/`name`.
    fn after(self, host: &str, name: &str) -> Task;
    /// Input `name` from output `key` of `host`/`from`.
    fn input(self, name: &str, host: &str, from: &str, key: &str) -> Task;
}

impl TaskExt for Task {
    fn after(mut self, host: &str, name: &str) -> Task {
        self.after.push(TaskId::new(host, name));
        self
    }
    fn input(mut self, name: &str, host: &str, from: &str, key: &str) -> Task {
        self.inputs.insert(
            name.into(),
            InputRef {
                from: TaskId::new(host, from),
                key: key.into(),
            },
        );
        self
    }
}

/// What a run gave: its summary and every event, in order.
pub struct Outcome {
    pub summary: RunSummary,
    pub events: Vec<Event>,
}

impl Outcome {
    /// Status and message of `host`/`name`'s `task_finished`.
    pub fn status(&self, host: &str, name: &str) -> (TaskStatus, String) {
        self.events
            .iter()
            .find_map(|e| match e {
                Event::TaskFinished {
                    host: h,
                    task,
                    status,
                    message,
                    ..
                } if h == host && task == name => {
                    Some((*status, message.clone().unwrap_or_default()))
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("no task_finished for {host}/{name}"))
    }

    /// The error of `host`'s `host_finished`.
    pub fn host_error(&self, host: &str) -> Option<String> {
        self.events.iter().find_map(|e| match e {
            Event::HostFinished { host: h, error, .. } if h == host => error.clone(),
            _ => None,
        })
    }

    /// The events as `--output json` prints them, one a line.
    pub fn json(&self) -> String {
        self.events
            .iter()
            .map(|e| serde_json::to_string(e).unwrap_or_else(|e| panic!("event JSON: {e}")))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Every task's module, built by `registry` for the shell of its host's transport (as the
/// build phase builds them for a plan, before the run).
pub fn modules(graph: &TaskGraph, hosts: &[HostHandle], registry: &dyn Registry) -> Modules {
    let shell_of = |t: &Task| {
        hosts
            .iter()
            .find(|h| h.name == t.id.host)
            .map_or(Shell::Posix, |h| h.transport.shell())
    };
    instantiate(graph, &shell_of, registry).unwrap_or_else(|e| panic!("build: {e:?}"))
}

/// One run of the real executor: `tasks` on `hosts`, each task's module built by `registry`
/// for the shell of its host's transport (as the build phase builds them for a plan).
pub async fn run(
    tasks: Vec<Task>,
    hosts: &[(&str, Arc<dyn Transport>)],
    options: RunOptions,
    scrubber: Scrubber,
    registry: &dyn Registry,
) -> Outcome {
    let graph = TaskGraph::build(tasks).unwrap_or_else(|e| panic!("graph: {e:?}"));
    let (sink, mut rx) = EventSink::channel();
    let (_canceller, cancel) = Cancel::pair();
    let hosts: Vec<HostHandle> = hosts
        .iter()
        .map(|(n, t)| HostHandle {
            name: n.to_string(),
            transport: t.clone(),
        })
        .collect();
    let summary = execute(Run {
        modules: modules(&graph, &hosts, registry),
        scope: kwin_engine::graph::scope::Scope::all(),
        graph: Arc::new(graph),
        hosts,
        options,
        scrubber,
        events: sink,
        cancel,
    })
    .await;
    let mut events = Vec::new();
    while let Ok(e) = rx.try_recv() {
        events.push(e);
    }
    Outcome { summary, events }
}
