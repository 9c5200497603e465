//! The per-host worker of `apply`.
//!
//! Flow: connect (retrying) → probe (ONE script with every fact of every task on the host) →
//! for each task in order:
//!
//! 1. wait for its dependencies (cross-host ones through the board; the pending batch is sent
//!    first so nobody waits on it); a dependency that failed or was skipped skips the task;
//! 2. a task that depends directly on a pending command (`Action::Run`) of this host sends
//!    the batch first, so it never shares a script with that command (an interrupt while the
//!    command runs leaves it unstarted);
//!    freshness: if a change still pending in the batch may touch what the task reads, send
//!    the batch now (its script re-reads this task's facts at the end); if an already executed
//!    change may have touched them (or a dependency on another host changed after they were
//!    read), re-probe; otherwise the facts from the probe stand;
//! 3. plan; `InputPending` → resolve the input (wait for the producer, read its outputs once),
//!    plan again;
//! 4. NoOp → ok (published once everything queued before it ran); a change made only of
//!    `Run` steps joins the pending batch; any other change (file put, reboot) sends the batch
//!    and runs alone.
//!
//! A batch is ONE script: each task's steps, then that task's facts re-read (convergence
//! check: planning again must give NoOp, else "did not converge", a bug in the module) —
//! right after its steps when a later change of the batch may touch them, otherwise in the
//! batch's single end read — and the facts of later tasks the batch may have touched. The first failing task stops the
//! script and the host; later tasks are skipped. A retryable transport error while a batch
//! runs: reconnect (with backoff), re-probe, re-plan the batch's tasks — what is now NoOp
//! was applied — and send the rest again. Facts decide; nothing is re-run blindly.

use super::batch::{Batch, Item, ItemResult, Section};
use super::conn::{Backoff, Conn, LogAs, LogStdout};
use super::inputs::last_lines;
use super::walker::{Done, HostOutcome, Shared};
use crate::event::{Event, TaskStatus};
use crate::fact::{self, FactQuery, Facts};
use crate::module::{Action, Change, Ctx, Inputs, Module, ModuleError, Plan, Step, Touches};
use crate::secret::Secret;
use crate::task::TaskId;
use crate::transport::output::Keep;
use crate::transport::Shell;
use petgraph::graph::NodeIndex;
use petgraph::Direction;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::OwnedSemaphorePermit;

pub(crate) struct HTask {
    pub node: NodeIndex,
    pub id: TaskId,
    pub module_name: String,
    pub module: Result<Arc<dyn Module>, String>,
    pub queries: Vec<FactQuery>,
    pub reads: Vec<String>,
    /// Index into `executed` from which changes may have made this task's facts stale.
    pub fresh_since: usize,
    /// When this task's facts were last read.
    pub fresh_at: Instant,
    pub started: Option<Instant>,
    pub done: bool,
    /// The task says `sensitive = true`.
    pub sensitive: bool,
}

/// A task planned but not yet published: a change waiting in the batch, or a NoOp waiting
/// for the changes queued before it.
struct Pending {
    t: usize,
    change: Option<Change>,
    inputs: Inputs,
    why: String,
}

pub(crate) struct Worker {
    pub sh: Arc<Shared>,
    pub host: String,
    pub conn: Arc<Conn>,
    pub shell: Shell,
    pub tasks: Vec<HTask>,
    pub facts: Facts,
    /// Touches of every change run on this host, in order.
    executed: Vec<Touches>,
    pending: Vec<Pending>,
    /// Why the rest of this host's tasks do not run ("h1/x failed").
    pub stopped: Option<String>,
    pub out: HostOutcome,
    pub host_error: Option<String>,
    permit: Option<OwnedSemaphorePermit>,
    start: Instant,
}

enum InputErr {
    Skip(String),
    Fail(String),
    Cancelled,
}

fn is_batchable(c: &Change) -> bool {
    c.steps.iter().all(|s| matches!(s, Step::Run(_)))
}

fn run_scripts(c: &Change) -> Vec<String> {
    c.steps
        .iter()
        .filter_map(|s| match s {
            Step::Run(s) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

impl Worker {
    pub fn new(sh: Arc<Shared>, host: String, nodes: Vec<NodeIndex>) -> Worker {
        let conn = sh.conns[&host].clone();
        let shell = conn.shell();
        let now = Instant::now();
        let tasks = nodes
            .into_iter()
            .map(|n| {
                let task = sh.graph.task(n);
                let module = sh.modules[n.index()].clone();
                let (queries, reads) = match &module {
                    Ok(m) => (m.facts(shell), m.reads()),
                    Err(_) => (Vec::new(), Vec::new()),
                };
                HTask {
                    node: n,
                    id: task.id.clone(),
                    module_name: task.module.clone(),
                    module,
                    queries,
                    reads,
                    fresh_since: 0,
                    fresh_at: now,
                    started: None,
                    done: false,
                    sensitive: task.sensitive,
                }
            })
            .collect();
        Worker {
            sh,
            host,
            conn,
            shell,
            tasks,
            facts: Facts::new(),
            executed: Vec::new(),
            pending: Vec::new(),
            stopped: None,
            out: HostOutcome::default(),
            host_error: None,
            permit: None,
            start: now,
        }
    }

    fn backoff(&self) -> Backoff {
        Backoff::new(self.sh.opts.retries, self.sh.opts.retry_delay)
    }

    pub async fn acquire(&mut self) {
        if self.permit.is_none() {
            self.permit = self.sh.permits.clone().acquire_owned().await.ok();
        }
    }

    fn release(&mut self) {
        self.permit = None;
    }

    // ----- reporting -------------------------------------------------------------------

    pub fn finish(&mut self, t: usize, status: TaskStatus, message: Option<String>) {
        let task = &mut self.tasks[t];
        if task.done {
            return;
        }
        task.done = true;
        let duration_ms = task
            .started
            .map(|s| s.elapsed().as_millis() as u64)
            .unwrap_or(0);
        let cause = match status {
            TaskStatus::Failed => Some(format!("{} failed", task.id)),
            TaskStatus::Skipped => message.clone(),
            _ => None,
        };
        match status {
            TaskStatus::Ok => self.out.ok += 1,
            TaskStatus::Changed => self.out.changed += 1,
            TaskStatus::Failed => self.out.failed += 1,
            TaskStatus::Skipped => self.out.skipped += 1,
        }
        let (node, id) = (task.node, task.id.clone());
        self.sh.board.set(
            node,
            Done {
                status,
                cause,
                at: Instant::now(),
            },
        );
        self.sh.report.emit(Event::TaskFinished {
            host: id.host,
            task: id.name,
            status,
            message: message.map(|m| self.sh.scrubber.scrub(&m)),
            duration_ms,
        });
    }

    /// Fail task `t`; the host's remaining tasks are skipped.
    pub fn fail(&mut self, t: usize, message: String) {
        self.finish(t, TaskStatus::Failed, Some(message));
        if self.stopped.is_none() {
            self.stopped = Some(format!("{} failed", self.tasks[t].id));
        }
    }

    pub fn skip(&mut self, t: usize, cause: &str) {
        self.finish(t, TaskStatus::Skipped, Some(cause.to_string()));
    }

    /// The host failed outside any task: every task not done is skipped.
    pub fn fail_host(&mut self, err: String) {
        let cause = format!("host {} failed", self.host);
        self.host_error = Some(err);
        self.out.host_failed = true;
        for t in 0..self.tasks.len() {
            self.skip(t, &cause);
        }
        self.stopped = Some(cause);
    }

    /// Whether task `t` is sensitive: it says so, or its module finds its content secret
    /// (a file readable by its owner only) given the facts read so far.
    pub fn is_sensitive(&self, t: usize) -> bool {
        let task = &self.tasks[t];
        task.sensitive || task.module.as_ref().is_ok_and(|m| m.sensitive(&self.facts))
    }

    /// Keys of the facts of every sensitive task: their answers are left out of the host log.
    fn sensitive_keys(&self) -> std::collections::HashSet<String> {
        (0..self.tasks.len())
            .filter(|&t| self.is_sensitive(t))
            .flat_map(|t| self.tasks[t].queries.iter().map(|q| q.key.clone()))
            .collect()
    }

    pub fn emit_planned(&self, t: usize, plan: &Plan) {
        let task = &self.tasks[t];
        let sc = &self.sh.scrubber;
        let sensitive = self.is_sensitive(t);
        let (change, action, reason, diff) = match plan {
            Plan::NoOp { why, .. } => (false, None, why.clone(), None),
            Plan::Change(c) => (
                true,
                Some(c.action.to_string()),
                c.reason.clone(),
                c.diff.as_deref().map(|d| {
                    if sensitive {
                        crate::module::hash_diff_lines(d)
                    } else {
                        sc.scrub(d)
                    }
                }),
            ),
        };
        self.sh.report.emit(Event::TaskPlanned {
            host: self.host.clone(),
            task: task.id.name.clone(),
            module: task.module_name.clone(),
            change,
            action,
            reason: sc.scrub(&reason),
            diff,
        });
        if let Plan::NoOp {
            warning: Some(w), ..
        } = plan
        {
            self.sh.report.warn(
                Some(&self.host),
                format!("{}: {}", task.id.name, sc.scrub(w)),
            );
        }
    }

    /// Emit `host_finished` and hand back the totals.
    pub fn end(mut self) -> HostOutcome {
        self.release();
        let error = self.host_error.as_ref().map(|e| self.sh.scrubber.scrub(e));
        self.sh.report.emit(Event::HostFinished {
            host: self.host.clone(),
            ok: self.out.ok,
            changed: self.out.changed,
            failed: self.out.failed,
            skipped: self.out.skipped,
            duration_ms: self.start.elapsed().as_millis() as u64,
            error,
        });
        self.out
    }

    // ----- connecting and probing ------------------------------------------------------

    pub async fn connect(&mut self) -> Result<(), String> {
        let t = Instant::now();
        self.conn
            .connect_retrying(self.backoff())
            .await
            .map_err(|e| e.to_string())?;
        self.sh.report.emit(Event::HostConnected {
            host: self.host.clone(),
            duration_ms: t.elapsed().as_millis() as u64,
        });
        Ok(())
    }

    /// Read `queries` in one round trip (nothing to read: no round trip).
    async fn read_facts(&self, what: &str, queries: &[FactQuery]) -> Result<Facts, String> {
        if queries.is_empty() {
            return Ok(Facts::new());
        }
        let nonce = crate::fs::new_nonce();
        let script = fact::batch_script(self.shell, queries, &nonce);
        let keys = self.sensitive_keys();
        let shell = self.shell;
        let redact = |out: &crate::transport::Output| {
            fact::redact_for_log(shell, queries, out, &nonce, &|k| keys.contains(k))
        };
        let out = self
            .conn
            .run_idempotent_logged(
                what,
                &script,
                self.sh.opts.step_timeout,
                self.backoff(),
                LogAs {
                    stdout: LogStdout::Yes,
                    script: None,
                    output: Some(&redact),
                    keep: None,
                },
            )
            .await
            .map_err(|e| e.to_string())?;
        fact::parse_batch(queries, &out, &nonce).map_err(|e| format!("{what}: {e}"))
    }

    /// The initial probe: every fact of every task on the host.
    pub async fn probe_all(&mut self) -> Result<(), String> {
        let t = Instant::now();
        let queries: Vec<FactQuery> = self
            .tasks
            .iter()
            .flat_map(|t| t.queries.iter().cloned())
            .collect();
        self.facts = self.read_facts("probe", &queries).await?;
        let now = Instant::now();
        for task in &mut self.tasks {
            task.fresh_at = now;
        }
        self.sh.report.emit(Event::HostProbed {
            host: self.host.clone(),
            facts: self.facts.len(),
            duration_ms: t.elapsed().as_millis() as u64,
        });
        Ok(())
    }

    fn exec_stale(&self, u: usize) -> bool {
        let task = &self.tasks[u];
        self.executed[task.fresh_since.min(self.executed.len())..]
            .iter()
            .any(|c| c.may_affect(&task.reads))
    }

    /// Later tasks (from `from`) whose facts executed changes or `extra` may have touched.
    fn stale_from(&self, from: usize, extra: &[&Touches]) -> Vec<usize> {
        (from..self.tasks.len())
            .filter(|&u| {
                let task = &self.tasks[u];
                !task.done
                    && task.module.is_ok()
                    && !task.queries.is_empty()
                    && (self.exec_stale(u) || extra.iter().any(|c| c.may_affect(&task.reads)))
            })
            .collect()
    }

    fn mark_fresh(&mut self, ts: &[usize]) {
        let now = Instant::now();
        let n = self.executed.len();
        for &u in ts {
            self.tasks[u].fresh_since = n;
            self.tasks[u].fresh_at = now;
        }
    }

    /// Re-read the facts of `ts` and of every later task that is stale too, in one round trip.
    async fn reprobe(&mut self, ts: Vec<usize>) -> Result<(), String> {
        let from = ts.iter().copied().min().unwrap_or(self.tasks.len());
        let mut all = ts;
        for u in self.stale_from(from, &[]) {
            if !all.contains(&u) {
                all.push(u);
            }
        }
        let queries: Vec<FactQuery> = all
            .iter()
            .flat_map(|&u| self.tasks[u].queries.iter().cloned())
            .collect();
        let facts = self.read_facts("re-probe", &queries).await?;
        self.facts.merge(facts);
        self.mark_fresh(&all);
        Ok(())
    }

    // ----- the task loop ---------------------------------------------------------------

    fn in_pending(&self, n: NodeIndex) -> bool {
        self.pending.iter().any(|p| self.tasks[p.t].node == n)
    }

    /// Whether `t` depends directly on a task of this host whose pending change runs a
    /// command ([`Action::Run`]).
    fn waits_on_pending_command(&self, t: usize) -> bool {
        let node = self.tasks[t].node;
        self.sh
            .graph
            .graph
            .neighbors_directed(node, Direction::Incoming)
            .any(|p| {
                self.pending.iter().any(|q| {
                    self.tasks[q.t].node == p
                        && q.change.as_ref().is_some_and(|c| c.action == Action::Run)
                })
            })
    }

    /// Wait for dependency `p` on another host (sending the batch first). `None`: cancelled.
    async fn wait_for(&mut self, p: NodeIndex) -> Option<Done> {
        if let Some(d) = self.sh.board.get(p) {
            return Some(d);
        }
        if let Err(e) = self.flush(Vec::new()).await {
            self.host_transport_failed(e);
        }
        self.release();
        let sh = self.sh.clone();
        let d = sh.board.wait(p, &sh.cancel).await;
        self.acquire().await;
        d
    }

    /// Wait for every dependency of `t`. `Ok(latest cross-host change)`, or `Err(skip cause)`,
    /// or `Err(None)` when cancelled.
    async fn await_deps(&mut self, t: usize) -> Result<Option<Instant>, Option<String>> {
        let node = self.tasks[t].node;
        let preds: Vec<NodeIndex> = self
            .sh
            .graph
            .graph
            .neighbors_directed(node, Direction::Incoming)
            .collect();
        let mut changed_at: Option<Instant> = None;
        for p in preds {
            let same_host = self.sh.graph.task(p).id.host == self.host;
            if same_host && self.in_pending(p) {
                continue;
            }
            let done = if same_host {
                match self.sh.board.get(p) {
                    Some(d) => d,
                    None => continue,
                }
            } else {
                match self.wait_for(p).await {
                    Some(d) => d,
                    None => return Err(None),
                }
            };
            if let Some(c) = &self.stopped {
                return Err(Some(c.clone()));
            }
            if !done.succeeded() {
                let id = self.sh.graph.task(p).id.to_string();
                return Err(Some(done.cause.unwrap_or(format!("{id} did not run"))));
            }
            if !same_host && done.status == TaskStatus::Changed {
                changed_at = Some(changed_at.map_or(done.at, |a| a.max(done.at)));
            }
        }
        Ok(changed_at)
    }

    async fn resolve_input(&mut self, t: usize, name: &str) -> Result<Secret, InputErr> {
        let task = self.sh.graph.task(self.tasks[t].node);
        let Some(r) = task.inputs.get(name).cloned() else {
            return Err(InputErr::Fail(format!(
                "module `{}` asked for input `{name}`, which the task does not declare (this is a bug in kwin's recipes)",
                task.module
            )));
        };
        let Some(p) = self.sh.graph.node(&r.from) else {
            return Err(InputErr::Fail(format!(
                "input `{name}` comes from {}, which does not exist",
                r.from
            )));
        };
        let done = if r.from.host == self.host {
            if self.in_pending(p) {
                if let Err(e) = self.flush(Vec::new()).await {
                    return Err(InputErr::Fail(e));
                }
            }
            self.sh.board.get(p)
        } else {
            match self.wait_for(p).await {
                Some(d) => Some(d),
                None => return Err(InputErr::Cancelled),
            }
        };
        if let Some(c) = &self.stopped {
            return Err(InputErr::Skip(c.clone()));
        }
        let done = done.ok_or_else(|| {
            InputErr::Fail(format!(
                "{} has not run before {} (this is a bug in kwin)",
                r.from, self.tasks[t].id
            ))
        })?;
        if !done.succeeded() {
            return Err(InputErr::Skip(
                done.cause.unwrap_or(format!("{} did not run", r.from)),
            ));
        }
        let values =
            self.sh.outputs.get(&self.sh, p).await.map_err(|e| {
                InputErr::Fail(format!("cannot read the outputs of {}: {e}", r.from))
            })?;
        values
            .get(&r.key)
            .cloned()
            .ok_or_else(|| InputErr::Fail(format!("{} has no output `{}`", r.from, r.key)))
    }

    /// A transport error that ends the host's work mid-run.
    fn host_transport_failed(&mut self, err: String) {
        if self.host_error.is_none() {
            self.host_error = Some(err);
        }
        if self.stopped.is_none() {
            self.stopped = Some(format!("host {} failed", self.host));
        }
    }

    /// Fail `t` after the batch queued before it was sent.
    async fn fail_after_flush(&mut self, t: usize, message: String) {
        if let Err(e) = self.flush(Vec::new()).await {
            self.host_transport_failed(e);
        }
        match self.stopped.clone() {
            Some(c) => self.skip(t, &c),
            None => self.fail(t, message),
        }
    }

    async fn step(&mut self, t: usize) {
        self.tasks[t].started = Some(Instant::now());
        let changed_at = match self.await_deps(t).await {
            Ok(c) => c,
            Err(Some(cause)) => return self.skip(t, &cause),
            Err(None) => return,
        };
        let module = match self.tasks[t].module.clone() {
            Ok(m) => m,
            Err(e) => return self.fail_after_flush(t, e).await,
        };
        self.sh.report.emit(Event::TaskStarted {
            host: self.host.clone(),
            task: self.tasks[t].id.name.clone(),
        });

        // A task that waits for a command of this host (an explicit edge to a pending `run`
        // change) starts in a later script: a command is user code of unknown effect and
        // duration, and what waits for it must not be under way already if the run is
        // interrupted while the command runs.
        if self.waits_on_pending_command(t) {
            if let Err(e) = self.flush(Vec::new()).await {
                self.host_transport_failed(e.clone());
                return self.fail(t, e);
            }
            if let Some(c) = self.stopped.clone() {
                return self.skip(t, &c);
            }
        }

        // Freshness of the facts this task reads (a task without facts is never stale).
        let reads = self.tasks[t].reads.clone();
        let has_facts = !self.tasks[t].queries.is_empty();
        let pending_stale = has_facts
            && self.pending.iter().any(|p| {
                p.change
                    .as_ref()
                    .is_some_and(|c| c.touches.may_affect(&reads))
            });
        let cross_stale = has_facts && changed_at.is_some_and(|at| at > self.tasks[t].fresh_at);
        if pending_stale {
            if let Err(e) = self.flush(vec![t]).await {
                self.host_transport_failed(e.clone());
                return self.fail(t, e);
            }
        } else if cross_stale || (has_facts && self.exec_stale(t)) {
            if let Err(e) = self.reprobe(vec![t]).await {
                self.host_transport_failed(e.clone());
                return self.fail(t, e);
            }
        }
        if let Some(c) = self.stopped.clone() {
            return self.skip(t, &c);
        }

        // Plan, resolving inputs as the module asks for them.
        let mut inputs = Inputs::new();
        let mut asked = 0;
        let plan = loop {
            let nonce = crate::module::new_plan_nonce();
            let ctx = Ctx {
                shell: self.shell,
                host: &self.host,
                inputs: &inputs,
                nonce: &nonce,
            };
            match module.plan(&self.facts, &ctx) {
                Ok(p) => break p,
                Err(ModuleError::InputPending(name))
                    if asked <= self.sh.graph.task(self.tasks[t].node).inputs.len() =>
                {
                    asked += 1;
                    match self.resolve_input(t, &name).await {
                        Ok(v) => inputs.insert(name, v),
                        Err(InputErr::Skip(c)) => return self.skip(t, &c),
                        Err(InputErr::Fail(m)) => return self.fail_after_flush(t, m).await,
                        Err(InputErr::Cancelled) => return,
                    }
                }
                Err(e) => return self.fail_after_flush(t, e.to_string()).await,
            }
        };
        self.emit_planned(t, &plan);
        match plan {
            Plan::NoOp { why, .. } => {
                if self.pending.is_empty() {
                    self.finish(t, TaskStatus::Ok, Some(why));
                } else {
                    self.pending.push(Pending {
                        t,
                        change: None,
                        inputs,
                        why,
                    });
                }
            }
            Plan::Change(c) if is_batchable(&c) => self.pending.push(Pending {
                t,
                change: Some(c),
                inputs,
                why: String::new(),
            }),
            Plan::Change(c) => {
                if let Err(e) = self.flush(Vec::new()).await {
                    self.host_transport_failed(e);
                }
                if let Some(cause) = self.stopped.clone() {
                    return self.skip(t, &cause);
                }
                self.run_alone(t, c, inputs).await;
            }
        }
    }

    /// Plan `t` again after its change ran: anything but NoOp is a module bug.
    fn verify(&mut self, t: usize, c: &Change, inputs: &Inputs) {
        let Ok(module) = self.tasks[t].module.clone() else {
            return;
        };
        let nonce = crate::module::new_plan_nonce();
        let ctx = Ctx {
            shell: self.shell,
            host: &self.host,
            inputs,
            nonce: &nonce,
        };
        let name = self.tasks[t].module_name.clone();
        match module.plan(&self.facts, &ctx) {
            Ok(Plan::NoOp { .. }) => self.finish(
                t,
                TaskStatus::Changed,
                Some(format!("{}: {}", c.action, c.reason)),
            ),
            Ok(Plan::Change(c2)) => self.fail(
                t,
                format!(
                    "did not converge: after its steps ran it still plans to {} ({}); this is a bug in module `{name}`",
                    c2.action, c2.reason
                ),
            ),
            Err(e) => self.fail(
                t,
                format!("did not converge: planning again after its steps ran failed: {e}"),
            ),
        }
    }

    // ----- batches ---------------------------------------------------------------------

    /// Send the pending batch (if it holds a change) and publish everything in it. `extra`:
    /// tasks whose facts must be re-read afterwards. `Err`: a transport error not attributed
    /// to any task of the batch.
    async fn flush(&mut self, extra: Vec<usize>) -> Result<(), String> {
        let pending = std::mem::take(&mut self.pending);
        if !pending.iter().any(|p| p.change.is_some()) {
            for p in pending {
                match self.stopped.clone() {
                    Some(c) => self.skip(p.t, &c),
                    None => self.finish(p.t, TaskStatus::Ok, Some(p.why)),
                }
            }
            return if extra.is_empty() {
                Ok(())
            } else {
                self.reprobe(extra).await
            };
        }
        self.run_batch(pending, extra).await;
        Ok(())
    }

    async fn run_batch(&mut self, mut entries: Vec<Pending>, extra: Vec<usize>) {
        let mut backoff = self.backoff();
        loop {
            let changes: Vec<(usize, &Change)> = entries
                .iter()
                .filter_map(|p| p.change.as_ref().map(|c| (p.t, c)))
                .collect();
            let items: Vec<Item> = changes
                .iter()
                .enumerate()
                .map(|(k, (t, c))| Item {
                    steps: run_scripts(c),
                    verify: self.tasks[*t].queries.clone(),
                    // A later change of the batch could disturb the convergence check.
                    verify_now: changes[k + 1..]
                        .iter()
                        .any(|(_, later)| later.touches.may_affect(&self.tasks[*t].reads)),
                    sensitive: self.is_sensitive(*t),
                })
                .collect();
            let last = entries.iter().map(|p| p.t).max().unwrap_or(0);
            let touches: Vec<&Touches> = entries
                .iter()
                .filter_map(|p| p.change.as_ref().map(|c| &c.touches))
                .collect();
            let mut probe_tasks = self.stale_from(last + 1, &touches);
            for &u in &extra {
                if !probe_tasks.contains(&u) {
                    probe_tasks.push(u);
                }
            }
            let probe: Vec<FactQuery> = probe_tasks
                .iter()
                .flat_map(|&u| self.tasks[u].queries.iter().cloned())
                .collect();
            let n = items.len().max(1) as u32;
            let batch = Batch::new(self.shell, items, probe);
            let what = format!(
                "apply {}",
                entries
                    .iter()
                    .filter(|p| p.change.is_some())
                    .map(|p| self.tasks[p.t].id.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let timeout = self.sh.opts.step_timeout.saturating_mul(n);
            let keys = self.sensitive_keys();
            let redact =
                |out: &crate::transport::Output| batch.log_output(out, &|k| keys.contains(k));
            let keep = Keep::sections(batch.nonce(), self.sh.budget.clone());
            match self
                .conn
                .run_logged(
                    &what,
                    &batch.script,
                    timeout,
                    LogAs {
                        stdout: LogStdout::Yes,
                        script: Some(&batch.log_script),
                        output: Some(&redact),
                        keep: Some(&keep),
                    },
                )
                .await
            {
                Ok(out) => {
                    let tasks: Vec<usize> = entries
                        .iter()
                        .filter(|p| p.change.is_some())
                        .map(|p| p.t)
                        .collect();
                    self.warn_cuts(&batch, &out, &tasks);
                    let unread = self.absorb(entries, &batch, &out, &probe_tasks);
                    return self.verify_unread(unread).await;
                }
                Err(e) if e.is_retryable() => {
                    self.sh.report.warn(
                        Some(&self.host),
                        format!("{e}; reconnecting, then re-reading facts before going on"),
                    );
                    if let Err(e) = self.conn.recover(&mut backoff, e).await {
                        return self.batch_failed(entries, e.to_string());
                    }
                    let ts: Vec<usize> = entries.iter().map(|p| p.t).collect();
                    if let Err(e) = self.reprobe(ts).await {
                        return self.batch_failed(entries, e);
                    }
                    entries = self.replan_after_reconnect(entries);
                    if !entries.iter().any(|p| p.change.is_some()) {
                        for p in entries {
                            match self.stopped.clone() {
                                Some(c) => self.skip(p.t, &c),
                                None => self.finish(p.t, TaskStatus::Ok, Some(p.why)),
                            }
                        }
                        return;
                    }
                }
                Err(e) => return self.batch_failed(entries, e.to_string()),
            }
        }
    }

    /// After a reconnect and re-probe: a change that now plans NoOp was applied before the
    /// connection broke; the others stay queued with their fresh plan.
    fn replan_after_reconnect(&mut self, entries: Vec<Pending>) -> Vec<Pending> {
        let mut next = Vec::new();
        for mut p in entries {
            if let Some(c) = &self.stopped {
                self.skip(p.t, &c.clone());
                continue;
            }
            let Some(old) = p.change.take() else {
                next.push(p);
                continue;
            };
            let Ok(module) = self.tasks[p.t].module.clone() else {
                continue;
            };
            let nonce = crate::module::new_plan_nonce();
            let ctx = Ctx {
                shell: self.shell,
                host: &self.host,
                inputs: &p.inputs,
                nonce: &nonce,
            };
            match module.plan(&self.facts, &ctx) {
                Ok(Plan::NoOp { .. }) => {
                    self.executed.push(old.touches.clone());
                    self.finish(
                        p.t,
                        TaskStatus::Changed,
                        Some(format!("{}: {}", old.action, old.reason)),
                    );
                }
                Ok(Plan::Change(c)) if is_batchable(&c) => {
                    p.change = Some(c);
                    next.push(p);
                }
                Ok(Plan::Change(_)) => self.fail(
                    p.t,
                    "the connection broke while this change ran; run apply again to finish it"
                        .into(),
                ),
                Err(e) => self.fail(p.t, e.to_string()),
            }
        }
        next
    }

    /// The batch could not run (transport): its first change fails with `err`, the rest is
    /// skipped; NoOps queued before that change are fine.
    fn batch_failed(&mut self, entries: Vec<Pending>, err: String) {
        for p in entries {
            if let Some(c) = self.stopped.clone() {
                self.skip(p.t, &c);
            } else if p.change.is_some() {
                self.fail(p.t, err.clone());
            } else {
                self.finish(p.t, TaskStatus::Ok, Some(p.why));
            }
        }
        self.host_transport_failed(err);
    }

    /// A warning for each task of `batch` (its items are `tasks`, in order) whose output the
    /// run's output budget cut.
    fn warn_cuts(&self, batch: &Batch, out: &crate::transport::Output, tasks: &[usize]) {
        for (item, bytes) in batch.cuts(out) {
            let Some(&t) = tasks.get(item) else {
                continue;
            };
            self.sh.report.warn(
                Some(&self.host),
                format!(
                    "{}: {bytes} bytes of its output were not kept: the run's output budget of {} MiB (settings.output_budget_mib) is spent; the task's result does not depend on them, and its log keeps the last {} bytes",
                    self.tasks[t].id.name,
                    self.sh.budget.limit() >> 20,
                    crate::transport::output::TAIL,
                ),
            );
        }
    }

    /// Why a step failed: its exit code and the last lines of its output (of a sensitive
    /// task, only kwin's own `kwin: ` lines).
    fn step_failure(&self, exit: i32, out: &Section, sensitive: bool) -> String {
        let shown = |b: &[u8]| {
            if sensitive {
                let lines: Vec<&[u8]> = b
                    .split(|&c| c == b'\n')
                    .filter(|l| l.starts_with(b"kwin: "))
                    .collect();
                self.sh.scrubber.scrub_bytes(&lines.join(&b'\n'))
            } else {
                self.sh.scrubber.scrub_bytes(b)
            }
        };
        let stderr = shown(&out.stderr);
        let stdout = shown(&out.stdout);
        let detail = if stderr.trim().is_empty() {
            last_lines(&stdout, 3)
        } else {
            last_lines(&stderr, 3)
        };
        if detail.is_empty() {
            format!("exit code {exit}")
        } else {
            format!("exit code {exit}: {detail}")
        }
    }

    /// Re-read and verify tasks whose steps ran but whose facts the batch did not bring back.
    async fn verify_unread(&mut self, unread: Vec<(usize, Change, Inputs)>) {
        if unread.is_empty() {
            return;
        }
        let ts: Vec<usize> = unread.iter().map(|u| u.0).collect();
        match self.reprobe(ts).await {
            Ok(()) => {
                for (t, change, inputs) in unread {
                    self.verify(t, &change, &inputs);
                }
            }
            Err(e) => {
                for (t, _, _) in unread {
                    self.fail(
                        t,
                        format!("its steps ran, but its facts could not be read again: {e}"),
                    );
                }
            }
        }
    }

    /// Publish what a batch did. Returns the tasks whose steps ran but whose facts could not be
    /// read back from the batch's output.
    fn absorb(
        &mut self,
        entries: Vec<Pending>,
        batch: &Batch,
        out: &crate::transport::Output,
        probe_tasks: &[usize],
    ) -> Vec<(usize, Change, Inputs)> {
        let mut unread = Vec::new();
        let (results, probe) = batch.parse(out);
        let mut results = results.into_iter();
        for p in entries {
            let result = if p.change.is_some() {
                results.next()
            } else {
                None
            };
            if let Some(c) = self.stopped.clone() {
                self.skip(p.t, &c);
                continue;
            }
            let Some(change) = p.change else {
                self.finish(p.t, TaskStatus::Ok, Some(p.why));
                continue;
            };
            match result {
                Some(ItemResult::Done { verify, .. }) => {
                    self.executed.push(change.touches.clone());
                    match verify {
                        Ok(f) => {
                            self.facts.merge(f);
                            self.mark_fresh(&[p.t]);
                            self.verify(p.t, &change, &p.inputs);
                        }
                        // The end read did not arrive (a later task killed the script):
                        // read them again in a round trip of their own.
                        Err(_) => unread.push((p.t, change, p.inputs)),
                    }
                }
                Some(ItemResult::Failed { exit, out }) => {
                    self.executed.push(change.touches.clone());
                    let msg = self.step_failure(exit, &out, self.is_sensitive(p.t));
                    self.fail(p.t, msg);
                }
                Some(ItemResult::Died { out, script_exit }) => {
                    self.executed.push(change.touches.clone());
                    let msg = self.step_failure(script_exit, &out, self.is_sensitive(p.t));
                    self.fail(p.t, format!("the script ended while this task ran ({msg})"));
                }
                Some(ItemResult::NotRun) | None => self.fail(
                    p.t,
                    "the script ended before this task ran (this is a bug in kwin)".into(),
                ),
            }
        }
        match probe {
            Some(Ok(f)) => {
                self.facts.merge(f);
                self.mark_fresh(probe_tasks);
            }
            Some(Err(e)) => self.sh.report.warn(
                Some(&self.host),
                format!("re-reading facts after a batch: {e}"),
            ),
            None => {}
        }
        unread
    }

    // ----- changes that do not batch (file puts, reboots) ------------------------------

    async fn run_alone(&mut self, t: usize, change: Change, inputs: Inputs) {
        let mut change = change;
        let mut backoff = self.backoff();
        // Trailing `Run` steps go out as a one-task batch, which also re-reads the facts.
        let split = |c: &Change| {
            let tail = c
                .steps
                .iter()
                .rev()
                .take_while(|s| matches!(s, Step::Run(_)))
                .count();
            c.steps.len() - tail
        };
        loop {
            let head = Change {
                steps: change.steps[..split(&change)].to_vec(),
                ..change.clone()
            };
            let sensitive = self.is_sensitive(t);
            match self.exec_steps(t, &head, sensitive).await {
                Ok(()) => break,
                Err(StepErr::Failed(msg)) => {
                    self.executed.push(change.touches.clone());
                    return self.fail(t, msg);
                }
                Err(StepErr::Transport(e)) if e.is_retryable() => {
                    self.executed.push(change.touches.clone());
                    if let Err(e) = self.conn.recover(&mut backoff, e).await {
                        self.host_transport_failed(e.to_string());
                        return self.fail(t, e.to_string());
                    }
                    if let Err(e) = self.reprobe(vec![t]).await {
                        self.host_transport_failed(e.clone());
                        return self.fail(t, e);
                    }
                    let Ok(module) = self.tasks[t].module.clone() else {
                        return;
                    };
                    let nonce = crate::module::new_plan_nonce();
                    let ctx = Ctx {
                        shell: self.shell,
                        host: &self.host,
                        inputs: &inputs,
                        nonce: &nonce,
                    };
                    match module.plan(&self.facts, &ctx) {
                        Ok(Plan::NoOp { .. }) => {
                            return self.finish(
                                t,
                                TaskStatus::Changed,
                                Some(format!("{}: {}", change.action, change.reason)),
                            )
                        }
                        Ok(Plan::Change(c)) => change = c,
                        Err(e) => return self.fail(t, e.to_string()),
                    }
                }
                Err(StepErr::Transport(e)) => {
                    self.host_transport_failed(e.to_string());
                    return self.fail(t, e.to_string());
                }
            }
        }
        if change.steps.iter().any(|s| matches!(s, Step::Reboot(_))) {
            self.executed.push(Touches::Anything);
        }
        let at = split(&change);
        if at < change.steps.len() {
            let tail = Change {
                steps: change.steps[at..].to_vec(),
                ..change
            };
            let entry = Pending {
                t,
                change: Some(tail),
                inputs,
                why: String::new(),
            };
            return self.run_batch(vec![entry], Vec::new()).await;
        }
        self.executed.push(change.touches.clone());
        if let Err(e) = self.reprobe(vec![t]).await {
            self.host_transport_failed(e.clone());
            return self.fail(t, e);
        }
        self.verify(t, &change, &inputs);
    }

    async fn exec_steps(
        &mut self,
        t: usize,
        change: &Change,
        sensitive: bool,
    ) -> Result<(), StepErr> {
        let opts = self.sh.opts.clone();
        let mut runs: Vec<String> = Vec::new();
        let steps = change.steps.iter().map(Some).chain(std::iter::once(None));
        for step in steps {
            if let Some(Step::Run(s)) = step {
                runs.push(s.clone());
                continue;
            }
            if !runs.is_empty() {
                let batch = Batch::new(
                    self.shell,
                    vec![Item {
                        steps: std::mem::take(&mut runs),
                        verify: Vec::new(),
                        verify_now: true,
                        sensitive,
                    }],
                    Vec::new(),
                );
                let keep = Keep::sections(batch.nonce(), self.sh.budget.clone());
                let redact = |out: &crate::transport::Output| batch.log_output(out, &|_| false);
                let out = self
                    .conn
                    .run_logged(
                        "apply",
                        &batch.script,
                        opts.step_timeout,
                        LogAs {
                            stdout: LogStdout::Yes,
                            script: Some(&batch.log_script),
                            output: Some(&redact),
                            keep: Some(&keep),
                        },
                    )
                    .await
                    .map_err(StepErr::Transport)?;
                self.warn_cuts(&batch, &out, &[t]);
                match batch.parse(&out).0.into_iter().next() {
                    Some(ItemResult::Done { .. }) => {}
                    Some(ItemResult::Failed { exit, out }) => {
                        return Err(StepErr::Failed(self.step_failure(exit, &out, sensitive)))
                    }
                    Some(ItemResult::Died { out, script_exit }) => {
                        return Err(StepErr::Failed(format!(
                            "the script ended while this task ran ({})",
                            self.step_failure(script_exit, &out, sensitive)
                        )))
                    }
                    _ => return Err(StepErr::Failed("the script did not run".into())),
                }
            }
            match step {
                Some(Step::Put {
                    path,
                    content,
                    mode,
                }) => self
                    .conn
                    .put(path, content, *mode, opts.step_timeout, self.backoff())
                    .await
                    .map_err(StepErr::Transport)?,
                Some(Step::Reboot(spec)) => {
                    if !opts.allow_reboot {
                        return Err(StepErr::Failed(
                            "a reboot is needed, but settings.allow_reboot is false".into(),
                        ));
                    }
                    super::reboot::reboot(&self.conn, spec, &opts)
                        .await
                        .map_err(StepErr::Failed)?;
                    self.executed.push(Touches::Anything);
                }
                _ => {}
            }
        }
        Ok(())
    }
}

enum StepErr {
    Failed(String),
    Transport(crate::transport::TransportError),
}

/// The apply worker of one host.
pub(crate) async fn work(sh: Arc<Shared>, host: String, nodes: Vec<NodeIndex>) -> HostOutcome {
    let mut w = Worker::new(sh, host, nodes);
    w.acquire().await;
    if let Err(e) = w.connect().await {
        w.fail_host(e);
        return w.end();
    }
    if let Err(e) = w.probe_all().await {
        w.fail_host(e);
        return w.end();
    }
    for t in 0..w.tasks.len() {
        if w.sh.cancel.is_cancelled() {
            break;
        }
        if w.tasks[t].done {
            continue;
        }
        if let Some(c) = w.stopped.clone() {
            w.skip(t, &c);
            continue;
        }
        w.step(t).await;
    }
    if w.sh.cancel.is_cancelled() {
        let pending = std::mem::take(&mut w.pending);
        for p in pending {
            w.skip(p.t, "interrupted");
        }
        for t in 0..w.tasks.len() {
            w.skip(t, "interrupted");
        }
    } else if let Err(e) = w.flush(Vec::new()).await {
        w.host_transport_failed(e);
    }
    w.end()
}
