//! Module convergence on a real shell, through the real executor.
//!
//! [`converge`] runs one task (a module and its params) on one host twice with
//! `kwin_engine::exec::execute`: the walker, the worker, the probe, the batch with its
//! convergence re-read at the end, the re-plan. The first run must change the host and not
//! fail (the executor itself fails a task whose re-read plan is not a no-op: "did not
//! converge"); the second must change nothing, in ONE round trip (the probe).
//!
//! The host is any [`Transport`]: `LocalTransport` (this machine, under a temporary
//! directory), or [`Sh`], scripts through another command line (`busybox sh -s`,
//! `ip netns exec NAME /bin/sh -s`, `unshare --mount ...`).

use kwin_engine::event::{Event, EventSink, Mode, TaskStatus};
use kwin_engine::exec::{execute, Cancel, HostHandle, Run, RunOptions, RunSummary};
use kwin_engine::graph::TaskGraph;
use kwin_engine::module::build::instantiate;
use kwin_engine::secret::Scrubber;
use kwin_engine::task::{Task, TaskId};
use kwin_engine::transport::output::Keep;
use kwin_engine::transport::{Output, Shell, Transport, TransportError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The host's name in these runs.
pub const HOST: &str = "h1";
/// The task's name in these runs.
pub const TASK: &str = "t";

/// What the executor planned for the task in a run (its `task_planned` event).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Planned {
    pub change: bool,
    pub action: Option<String>,
    pub reason: String,
    pub diff: Option<String>,
}

/// One run of the task.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub summary: RunSummary,
    pub planned: Option<Planned>,
    /// The task's status and message (`task_finished`).
    pub status: Option<TaskStatus>,
    pub message: Option<String>,
    /// Scripts run and files put on the host.
    pub runs: usize,
    pub puts: usize,
    /// Every script sent to the host, in order.
    pub scripts: Vec<String>,
    pub events: Vec<Event>,
}

impl Outcome {
    /// The change's reason (empty for a no-op).
    pub fn reason(&self) -> &str {
        self.planned.as_ref().map_or("", |p| p.reason.as_str())
    }
    /// Whether the run changed the host.
    pub fn changed(&self) -> bool {
        self.summary.counts.changed > 0
    }
    /// The change's action (`create`, `update`, ...), if it planned one.
    pub fn action(&self) -> Option<&str> {
        self.planned.as_ref().and_then(|p| p.action.as_deref())
    }
    /// Whether a script sent to the host contains `text`.
    pub fn sent(&self, text: &str) -> bool {
        self.scripts.iter().any(|s| s.contains(text))
    }
}

/// Counts what a transport is asked to do.
struct Counting {
    inner: Arc<dyn Transport>,
    runs: AtomicUsize,
    puts: AtomicUsize,
    scripts: std::sync::Mutex<Vec<String>>,
}

impl Counting {
    fn count(&self, script: &str) {
        self.runs.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut s) = self.scripts.lock() {
            s.push(script.to_string());
        }
    }
}

#[async_trait::async_trait]
impl Transport for Counting {
    fn shell(&self) -> Shell {
        self.inner.shell()
    }
    fn reboot_shell(&self) -> Shell {
        self.inner.reboot_shell()
    }
    async fn connect(&self) -> Result<(), TransportError> {
        self.inner.connect().await
    }
    async fn run_keeping(
        &self,
        script: &str,
        timeout: Duration,
        keep: &Keep,
    ) -> Result<Output, TransportError> {
        self.count(script);
        self.inner.run_keeping(script, timeout, keep).await
    }
    async fn put(&self, path: &str, bytes: &[u8], mode: Option<u32>) -> Result<(), TransportError> {
        self.puts.fetch_add(1, Ordering::SeqCst);
        self.inner.put(path, bytes, mode).await
    }
    async fn get(&self, path: &str) -> Result<Vec<u8>, TransportError> {
        self.inner.get(path).await
    }
    async fn close(&self) {
        self.inner.close().await
    }
}

/// Run the task `module` with `params` once on `t` (apply), through the executor.
pub async fn apply(t: Arc<dyn Transport>, module: &str, params: serde_json::Value) -> Outcome {
    let counting = Arc::new(Counting {
        inner: t,
        runs: AtomicUsize::new(0),
        puts: AtomicUsize::new(0),
        scripts: std::sync::Mutex::new(Vec::new()),
    });
    let task = Task::new(TaskId::new(HOST, TASK), module, params);
    let graph = match TaskGraph::build(vec![task]) {
        Ok(g) => Arc::new(g),
        Err(d) => panic!("graph of one task: {d}"),
    };
    let shell = counting.shell();
    let modules = match instantiate(&graph, &|_| shell, &kwin_modules::Builtin) {
        Ok(m) => m,
        Err(e) => panic!("{module}: {:?}", e.first().map(|e| &e.error)),
    };
    let state = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("state dir: {e}"),
    };
    let mut options = RunOptions::new(Mode::Apply, state.path().to_path_buf());
    options.retry_delay = Duration::from_millis(10);
    let (events, mut rx) = EventSink::channel();
    let (_canceller, cancel) = Cancel::pair();
    let summary = execute(Run {
        graph,
        hosts: vec![HostHandle {
            name: HOST.into(),
            transport: counting.clone(),
        }],
        modules,
        scope: kwin_engine::graph::scope::Scope::all(),
        options,
        scrubber: Scrubber::default(),
        events,
        cancel,
    })
    .await;
    let mut all = Vec::new();
    while let Ok(e) = rx.try_recv() {
        all.push(e);
    }
    let mut out = Outcome {
        summary,
        planned: None,
        status: None,
        message: None,
        runs: counting.runs.load(Ordering::SeqCst),
        puts: counting.puts.load(Ordering::SeqCst),
        scripts: counting
            .scripts
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default(),
        events: Vec::new(),
    };
    for e in &all {
        match e {
            Event::TaskPlanned {
                change,
                action,
                reason,
                diff,
                ..
            } if out.planned.is_none() => {
                out.planned = Some(Planned {
                    change: *change,
                    action: action.clone(),
                    reason: reason.clone(),
                    diff: diff.clone(),
                });
            }
            Event::TaskFinished {
                status, message, ..
            } => {
                out.status = Some(*status);
                out.message = message.clone();
            }
            _ => {}
        }
    }
    out.events = all;
    out
}

/// Converge the task `module` with `params` on `t`: the first run changes the host (or, when
/// it is already as asked, changes nothing), never fails; the second run changes nothing and
/// costs one round trip. Returns the first run.
pub async fn converge(t: Arc<dyn Transport>, module: &str, params: serde_json::Value) -> Outcome {
    let first = apply(t.clone(), module, params.clone()).await;
    assert!(
        first.summary.counts.failed == 0 && first.status != Some(TaskStatus::Failed),
        "{module} failed: {:?}\n{:#?}",
        first.message,
        first.events
    );
    let second = apply(t, module, params).await;
    assert!(
        second.summary.counts.changed == 0 && second.summary.counts.failed == 0,
        "the second run of {module} is not a no-op: {:?}\n{:#?}",
        second.planned,
        second.events
    );
    assert_eq!(
        second.runs, 1,
        "the second run of {module} took more than the probe: {:#?}",
        second.events
    );
    first
}

/// Run the task once, expecting it to fail; the failure message (the step's stderr, scrubbed).
pub async fn apply_fails(t: Arc<dyn Transport>, module: &str, params: serde_json::Value) -> String {
    let out = apply(t, module, params).await;
    assert_eq!(
        out.status,
        Some(TaskStatus::Failed),
        "{module} did not fail: {:#?}",
        out.events
    );
    out.message.unwrap_or_default()
}

/// A host whose `before`-th script (1: the probe, 2: the first change) is preceded by `hook`:
/// something else changes the host between what kwin read and what it does.
pub struct Before<F: Fn() + Send + Sync> {
    pub inner: Arc<dyn Transport>,
    pub before: usize,
    pub hook: F,
    seen: AtomicUsize,
}

impl<F: Fn() + Send + Sync> Before<F> {
    pub fn new(inner: Arc<dyn Transport>, before: usize, hook: F) -> Before<F> {
        Before {
            inner,
            before,
            hook,
            seen: AtomicUsize::new(0),
        }
    }
    fn tick(&self) {
        if self.seen.fetch_add(1, Ordering::SeqCst) + 1 == self.before {
            (self.hook)();
        }
    }
}

#[async_trait::async_trait]
impl<F: Fn() + Send + Sync> Transport for Before<F> {
    fn shell(&self) -> Shell {
        self.inner.shell()
    }
    async fn connect(&self) -> Result<(), TransportError> {
        self.inner.connect().await
    }
    async fn run_keeping(
        &self,
        script: &str,
        timeout: Duration,
        keep: &Keep,
    ) -> Result<Output, TransportError> {
        self.tick();
        self.inner.run_keeping(script, timeout, keep).await
    }
    async fn put(&self, path: &str, bytes: &[u8], mode: Option<u32>) -> Result<(), TransportError> {
        self.inner.put(path, bytes, mode).await
    }
    async fn get(&self, path: &str) -> Result<Vec<u8>, TransportError> {
        self.inner.get(path).await
    }
    async fn close(&self) {
        self.inner.close().await
    }
}

/// A POSIX host reached by running scripts through a command line (`argv`, reading the script
/// on stdin), optionally with its own `PATH`. Files are put and read on this machine.
#[derive(Debug, Clone)]
pub struct Sh {
    pub argv: Vec<String>,
    pub path: Option<String>,
}

impl Sh {
    pub fn new<S: AsRef<str>>(argv: &[S]) -> Sh {
        Sh {
            argv: argv.iter().map(|s| s.as_ref().to_string()).collect(),
            path: None,
        }
    }
}

fn local() -> kwin_engine::transport::local::LocalTransport {
    kwin_engine::transport::local::LocalTransport { become_root: false }
}

#[async_trait::async_trait]
impl Transport for Sh {
    fn shell(&self) -> Shell {
        Shell::Posix
    }
    async fn connect(&self) -> Result<(), TransportError> {
        Ok(())
    }
    async fn run_keeping(
        &self,
        script: &str,
        timeout: Duration,
        keep: &Keep,
    ) -> Result<Output, TransportError> {
        use tokio::io::AsyncWriteExt;
        let program = self
            .argv
            .first()
            .ok_or_else(|| TransportError::Local("no command line".into()))?;
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(&self.argv[1..])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        if let Some(p) = &self.path {
            cmd.env("PATH", p);
        }
        let local = |e: std::io::Error| TransportError::Local(e.to_string());
        let mut child = cmd.spawn().map_err(local)?;
        let mut stdin = child
            .stdin
            .take()
            .ok_or_else(|| TransportError::Local("no stdin".into()))?;
        stdin.write_all(script.as_bytes()).await.map_err(local)?;
        drop(stdin);
        let out = tokio::time::timeout(timeout, child.wait_with_output())
            .await
            .map_err(|_| TransportError::Timeout(timeout))?
            .map_err(local)?;
        let out = Output {
            stdout: out.stdout,
            stderr: out.stderr,
            exit: out.status.code().unwrap_or(-1),
        };
        Ok(kwin_engine::transport::output::keep_output(out, keep))
    }
    async fn put(&self, path: &str, bytes: &[u8], mode: Option<u32>) -> Result<(), TransportError> {
        local().put(path, bytes, mode).await
    }
    async fn get(&self, path: &str) -> Result<Vec<u8>, TransportError> {
        local().get(path).await
    }
    async fn close(&self) {}
}
