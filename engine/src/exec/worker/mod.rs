//! The per-host worker, the same for `apply` and `plan`: [`run`] connects (retrying),
//! probes (ONE script with every fact of every task on the host), then hands each task, in
//! the graph's order restricted to the host, to a [`Policy`] — `apply.rs` converges it,
//! `plan.rs` only plans it — and at the end flushes what the policy queued. What every
//! policy needs is here: reporting a task's outcome (the board, the events), waiting for a
//! dependency on another host (the pending batch is flushed first, so nobody waits on it)
//! and resolving a task's inputs (read once per producer, `exec::outputs`).

pub(crate) mod apply;
pub(crate) mod plan;

use super::board::Done;
use super::conn::{Backoff, Conn, LogAs, LogStdout, Redact};
use super::outputs::Values;
use super::shared::{HostOutcome, Shared};
use super::text::{last_lines, parse_outputs};
use crate::event::{Event, TaskStatus};
use crate::fact::{self, FactQuery, Facts};
use crate::graph::scope::TaskScope;
use crate::module::{Change, Ctx, Inputs, Module, ModuleError, Plan, Touches};
use crate::secret::Secret;
use crate::shell::{Output, Shell};
use crate::task::TaskId;
use async_trait::async_trait;
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
    /// The facts read only the `reads` paths themselves (`Module::reads_paths_only`).
    pub reads_paths_only: bool,
    /// Index into `executed` from which changes may have made this task's facts stale.
    pub fresh_since: usize,
    /// When this task's facts were last read.
    pub fresh_at: Instant,
    pub started: Option<Instant>,
    pub done: bool,
    /// The task says `sensitive = true`.
    pub sensitive: bool,
    /// `--limit` leaves the task's host unchosen and the run needs the task: it may not
    /// change the host (`graph::scope`).
    pub read_only: bool,
    /// Set when the read-only task would have changed its host: what its dependents fail
    /// with.
    refused: Option<String>,
    /// A delegated step (runs here on behalf of another host): its failure stops what
    /// depends on it, not this host's other tasks.
    pub delegated: bool,
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

/// Why an input of a task has no value.
pub(crate) enum InputErr {
    /// Its producer failed or was skipped: skip the task, with this cause.
    Skip(String),
    Fail(String),
    Cancelled,
    /// Known only after apply (`kwin plan`: reading a producer's outputs may have effects).
    AfterApply,
}

/// Why a task has no plan ([`Worker::plan_task`]).
pub(crate) enum PlanErr {
    /// The module's own answer (a failure of the task).
    Module(ModuleError),
    /// The input named `.0` has no value, for the reason `.1`.
    Input(String, InputErr),
}

/// Why a task cannot start after waiting for its dependencies.
pub(crate) enum DepErr {
    /// A dependency failed or was skipped: skip it, with this cause.
    Skip(String),
    /// A read-only dependency would have changed its host (`--limit`): fail it.
    Fail(String),
    Cancelled,
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
                let (queries, reads, reads_paths_only) = match &module {
                    Ok(m) => (m.facts(shell), m.reads(), m.reads_paths_only()),
                    Err(_) => (Vec::new(), Vec::new(), false),
                };
                HTask {
                    node: n,
                    id: task.id.clone(),
                    module_name: task.module.clone(),
                    module,
                    queries,
                    reads,
                    reads_paths_only,
                    fresh_since: 0,
                    fresh_at: now,
                    started: None,
                    done: false,
                    sensitive: task.sensitive,
                    read_only: sh.scope.task(n) == TaskScope::ReadOnly,
                    refused: None,
                    delegated: task.on_behalf_of.is_some(),
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
        let refused = task.refused.clone();
        let cause = match (status, &refused) {
            (_, Some(r)) => Some(r.clone()),
            (TaskStatus::Failed, None) => Some(format!("{} failed", task.id)),
            (TaskStatus::Skipped, None) => message.clone(),
            _ => None,
        };
        self.out.counts.add(status);
        let (node, id) = (task.node, task.id.clone());
        // Outputs from the facts only when they are what the task leaves: not before a
        // change it would make (plan), nor after a failure.
        let outputs = match (status, &task.module) {
            (TaskStatus::Ok | TaskStatus::Changed, Ok(m)) => m.fact_outputs(&self.facts).map(|o| {
                Arc::new(
                    o.into_iter()
                        .map(|(k, v)| (k, Secret::new(v)))
                        .collect::<std::collections::BTreeMap<_, _>>(),
                )
            }),
            _ => None,
        };
        self.sh.board.set(
            node,
            Done {
                status,
                cause,
                refused: refused.is_some(),
                at: Instant::now(),
                outputs,
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

    /// Fail task `t`; the host's remaining tasks are skipped — unless `t` is a delegated
    /// step, whose failure belongs to the host it runs for: then only what depends on it is
    /// skipped (a drain blocked on one node does not stop the first control plane's other
    /// work).
    pub fn fail(&mut self, t: usize, message: String) {
        self.finish(t, TaskStatus::Failed, Some(message));
        if self.stopped.is_none() && !self.tasks[t].delegated {
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

    /// Task `t` is read only (`--limit`) and its plan would change the host: it fails
    /// without running, and so do its dependents, each told which host to include.
    pub fn refuse(&mut self, t: usize, action: &str, reason: &str) {
        let host = self.host.clone();
        let hint = self.sh.scope.include_hint(&host);
        let id = self.tasks[t].id.to_string();
        self.tasks[t].refused = Some(format!(
            "{id} would change {host}, which --limit leaves read only; {hint}"
        ));
        let msg =
            format!("would {action} ({reason}), but {host} is read only under --limit; {hint}");
        self.fail(t, self.sh.scrubber.scrub(&msg));
    }

    /// `kwin facts`: what the host is ([`fact::HostFact`]), and every answer of the probe
    /// for the plan's tasks, scrubbed; a sensitive task's answers (it says so, or its module
    /// finds its content secret) only as a hash.
    fn report_facts(&self) {
        let sc = &self.sh.scrubber;
        let hidden: std::collections::HashSet<&str> = (0..self.tasks.len())
            .filter(|&t| self.is_sensitive(t))
            .flat_map(|t| self.tasks[t].queries.iter().map(|q| q.key.as_str()))
            .collect();
        let mut facts = std::collections::BTreeMap::new();
        for task in &self.tasks {
            for q in &task.queries {
                let Some(out) = self.facts.raw(&q.key) else {
                    continue;
                };
                let text = |b: &[u8]| {
                    if hidden.contains(q.key.as_str()) {
                        crate::secret::sensitive_hash(b)
                    } else {
                        sc.scrub(&String::from_utf8_lossy(b))
                    }
                };
                facts.insert(
                    q.key.clone(),
                    crate::event::FactAnswer {
                        exit: out.exit,
                        stdout: text(&out.stdout),
                        stderr: text(&out.stderr),
                    },
                );
            }
        }
        let (system, error) = match self.facts.get(&fact::HostFact) {
            Ok(mut s) => {
                scrub_system(&mut s, &|t: &str| sc.scrub(t));
                (Some(s), None)
            }
            Err(e) => (None, Some(sc.scrub(&e.to_string()))),
        };
        self.sh.report.emit(Event::HostFacts {
            host: self.host.clone(),
            system,
            system_error: error,
            facts,
        });
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

    /// Plan a task with `module` (its own) against the facts as read so far, with the
    /// values of `inputs`: the one place a task is planned (first, again after its change as
    /// the convergence check, after a reconnect), each time with a fresh nonce.
    pub(crate) fn plan_once(
        &self,
        module: &dyn Module,
        inputs: &Inputs,
    ) -> Result<Plan, ModuleError> {
        let nonce = crate::module::new_plan_nonce();
        let ctx = Ctx {
            shell: self.shell,
            host: &self.host,
            inputs,
            nonce: &nonce,
        };
        module.plan(&self.facts, &ctx)
    }

    /// Plan task `t` with `module`, giving it each input it asks for
    /// ([`ModuleError::InputPending`]) as `policy` resolves it, then planning again: the one
    /// plan loop of both policies. `inputs` ends with every value given. A module that asks
    /// for more inputs than the task declares gets its `InputPending` back as its failure.
    pub(crate) async fn plan_task(
        &mut self,
        t: usize,
        module: &dyn Module,
        inputs: &mut Inputs,
        policy: &dyn Policy,
    ) -> Result<Plan, PlanErr> {
        let declared = self.sh.graph.task(self.tasks[t].node).inputs.len();
        let mut asked = 0;
        loop {
            match self.plan_once(module, inputs) {
                Ok(plan) => return Ok(plan),
                Err(ModuleError::InputPending(name)) if asked <= declared => {
                    asked += 1;
                    match policy.input(self, t, &name).await {
                        Ok(v) => inputs.insert(name, v),
                        Err(e) => return Err(PlanErr::Input(name, e)),
                    }
                }
                Err(e) => return Err(PlanErr::Module(e)),
            }
        }
    }

    /// Emit `host_finished` and hand back the totals.
    pub fn end(mut self) -> HostOutcome {
        self.release();
        let error = self.host_error.as_ref().map(|e| self.sh.scrubber.scrub(e));
        self.out.host_failed |= error.is_some();
        self.sh.report.emit(Event::HostFinished {
            host: self.host.clone(),
            counts: self.out.counts,
            duration_ms: self.start.elapsed().as_millis() as u64,
            error,
        });
        self.out
    }

    pub async fn connect(&mut self) -> Result<(), String> {
        let t = Instant::now();
        self.conn
            .connect_retrying(self.backoff().waiting(self.sh.opts.wait_for_hosts))
            .await
            .map_err(|e| e.to_string())?;
        self.out.reached = true;
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
        let sensitive = |k: &str| keys.contains(k);
        let redact = |out: &Output| fact::redact_for_log(shell, queries, out, &nonce, &sensitive);
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
                    output: fact::may_redact(shell, queries, &sensitive)
                        .then_some(&redact as Redact),
                    keep: None,
                    shown: false,
                },
            )
            .await
            .map_err(|e| e.to_string())?;
        fact::parse_batch(queries, &out, &nonce).map_err(|e| match e {
            // The login was accepted, then something other than a shell answered: say so
            // in the host's own words, and where the whole exchange is.
            fact::FactError::NotRun { .. } => {
                let log = match self.conn.log_path() {
                    Some(p) => format!("; see {}", p.display()),
                    None => String::new(),
                };
                format!(
                    "{what}: {} {e}: the login was accepted, but something other than a shell answered (a nologin shell, a forced command){log}",
                    self.host
                )
            }
            e => format!("{what}: {e}"),
        })
    }

    /// The initial probe: every fact of every task on the host.
    pub async fn probe_all(&mut self) -> Result<(), String> {
        let t = Instant::now();
        let mut queries: Vec<FactQuery> = self
            .tasks
            .iter()
            .flat_map(|t| t.queries.iter().cloned())
            .collect();
        if self.sh.opts.probe_only {
            // `kwin facts`: what the host is, in the same script.
            queries.push(FactQuery::of(&fact::HostFact, self.shell));
        }
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

    fn in_pending(&self, n: NodeIndex) -> bool {
        self.pending.iter().any(|p| self.tasks[p.t].node == n)
    }

    /// Why `t` must be skipped: a dependency on this host that finished without succeeding.
    /// [`Worker::await_deps`] passes over the dependencies still queued in the pending batch;
    /// once the batch ran, one of them may have failed without stopping the host (a delegated
    /// step), and what depends on it must not go on.
    pub(crate) fn failed_dep(&self, t: usize) -> Option<String> {
        let node = self.tasks[t].node;
        self.sh
            .graph
            .graph
            .neighbors_directed(node, Direction::Incoming)
            .filter(|&p| self.sh.graph.task(p).id.host == self.host)
            .find_map(|p| {
                let done = self.sh.board.get(p)?;
                if done.succeeded() {
                    return None;
                }
                let id = self.sh.graph.task(p).id.to_string();
                Some(done.cause.unwrap_or(format!("{id} did not run")))
            })
    }

    /// Wait for dependency `p` on another host (flushing what `policy` queued first, so
    /// nobody waits on it). `None`: cancelled.
    async fn wait_for(&mut self, p: NodeIndex, policy: &dyn Policy) -> Option<Done> {
        if let Some(d) = self.sh.board.get(p) {
            return Some(d);
        }
        if let Err(e) = policy.flush(self, ReadAhead::All).await {
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
    pub(crate) async fn await_deps(
        &mut self,
        t: usize,
        policy: &dyn Policy,
    ) -> Result<Option<Instant>, DepErr> {
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
                match self.wait_for(p, policy).await {
                    Some(d) => d,
                    None => return Err(DepErr::Cancelled),
                }
            };
            if let Some(c) = &self.stopped {
                return Err(DepErr::Skip(c.clone()));
            }
            if !done.succeeded() {
                let id = self.sh.graph.task(p).id.to_string();
                let cause = done.cause.unwrap_or(format!("{id} did not run"));
                return Err(if done.refused {
                    DepErr::Fail(cause)
                } else {
                    DepErr::Skip(cause)
                });
            }
            if !same_host && done.status == TaskStatus::Changed {
                changed_at = Some(changed_at.map_or(done.at, |a| a.max(done.at)));
            }
        }
        Ok(changed_at)
    }

    /// The value of input `name` of task `t`: wait for its producer (flushing what `policy`
    /// queued first when the producer is queued there), read the producer's outputs once.
    pub(crate) async fn resolve_input(
        &mut self,
        t: usize,
        name: &str,
        policy: &dyn Policy,
    ) -> Result<Secret, InputErr> {
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
                if let Err(e) = policy.flush(self, ReadAhead::Needed).await {
                    return Err(InputErr::Fail(e));
                }
            }
            self.sh.board.get(p)
        } else {
            match self.wait_for(p, policy).await {
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
            let cause = done.cause.unwrap_or(format!("{} did not run", r.from));
            return Err(if done.refused {
                InputErr::Fail(cause)
            } else {
                InputErr::Skip(cause)
            });
        }
        let sh = self.sh.clone();
        let values = match done.outputs {
            // Read from the producer's facts: no script, no round trip.
            Some(v) => v,
            None => sh
                .outputs
                .get(p, fetch_outputs(&sh, p))
                .await
                .map_err(|e| {
                    InputErr::Fail(format!("cannot read the outputs of {}: {e}", r.from))
                })?,
        };
        values
            .get(&r.key)
            .cloned()
            .ok_or_else(|| InputErr::Fail(format!("{} has no output `{}`", r.from, r.key)))
    }

    /// The value of input `name` of task `t` once its producer has finished (waiting for it
    /// on another host), when the producer published outputs read from its facts
    /// (`Module::fact_outputs`); `None` otherwise. Never runs a script: what `kwin plan` can
    /// know of an input.
    pub(crate) async fn fact_input_after(
        &mut self,
        t: usize,
        name: &str,
        policy: &dyn Policy,
    ) -> Option<Secret> {
        let task = self.sh.graph.task(self.tasks[t].node);
        let r = task.inputs.get(name)?.clone();
        let p = self.sh.graph.node(&r.from)?;
        let done = if r.from.host == self.host {
            self.sh.board.get(p)?
        } else {
            self.wait_for(p, policy).await?
        };
        if !done.succeeded() {
            return None;
        }
        done.outputs?.get(&r.key).cloned()
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
}

/// Every text of a host's own facts through `scrub` (a host can print anything).
fn scrub_system(s: &mut crate::event::HostSystem, scrub: &dyn Fn(&str) -> String) {
    for v in [
        &mut s.name,
        &mut s.id,
        &mut s.version,
        &mut s.kernel,
        &mut s.arch,
        &mut s.hostname,
        &mut s.cgroup,
        &mut s.windows_build,
    ]
    .into_iter()
    .flatten()
    {
        *v = scrub(v);
    }
    for a in &mut s.addresses {
        a.address = scrub(&a.address);
        if let Some(i) = &mut a.interface {
            *i = scrub(i);
        }
    }
}

/// Run the `output` script of `producer` (finished OK) on its host: its `key=value` lines,
/// every value added to the run's scrubber before anything else sees it.
async fn fetch_outputs(sh: &Shared, producer: NodeIndex) -> Result<Values, String> {
    let task = sh.graph.task(producer);
    let module = sh.modules[producer.index()]
        .as_ref()
        .map_err(|e| e.to_string())?;
    let conn = sh
        .conns
        .get(&task.id.host)
        .ok_or_else(|| format!("host `{}` is not part of this run", task.id.host))?;
    let script = module.output(conn.shell()).ok_or_else(|| {
        format!(
            "module `{}` has no outputs (this is a bug in kwin's recipes)",
            task.module
        )
    })?;
    let out = conn
        .run_idempotent(
            &format!("output of {}", task.id.name),
            &script,
            sh.opts.step_timeout,
            Backoff::new(sh.opts.retries, sh.opts.retry_delay),
            LogStdout::TaskOutputs,
        )
        .await
        .map_err(|e| e.to_string())?;
    let values = parse_outputs(&out.stdout);
    for v in values.values() {
        sh.scrubber.add(v);
    }
    if !out.success() {
        return Err(format!(
            "output script exited with {}: {}",
            out.exit,
            sh.scrubber
                .scrub(last_lines(&String::from_utf8_lossy(&out.stderr), 3).as_str())
        ));
    }
    Ok(Arc::new(values))
}

/// Which stale later tasks the end read of a batch brings back (`apply.rs`,
/// `Worker::worth_reading`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadAhead {
    /// The host goes on at once: not those behind a not-done task that reads the same (that
    /// task would change them first; they are read when needed).
    Needed,
    /// The host is about to wait for another host (or has nothing left): every stale one,
    /// in time the host would stand idle anyway.
    All,
}

/// What a worker does with each task of its host: apply it ([`apply::Apply`]) or only plan
/// it ([`plan::PlanOnly`]). The preamble, the loop and the end are [`run`]'s, the same for
/// both.
#[async_trait]
pub(crate) trait Policy: Sync {
    /// Work on task `t`: not done yet, its host not stopped, the run not cancelled.
    async fn task(&self, w: &mut Worker, t: usize);
    /// Send whatever the policy queued (before waiting on another host, before reading the
    /// outputs of a queued task, and at the end), its end read reading `ahead`.
    /// `Err`: a transport error that no task took.
    async fn flush(&self, w: &mut Worker, ahead: ReadAhead) -> Result<(), String>;
    /// The value of input `name` of task `t`, which its module asked for while planning
    /// ([`Worker::plan_task`]).
    async fn input(&self, w: &mut Worker, t: usize, name: &str) -> Result<Secret, InputErr>;
}

/// The worker of one host: connect, probe (ONE script with every fact of every task on the
/// host), each task in order under `policy`, then send what is still queued; Ctrl-C stops
/// the loop and skips what did not run.
pub(crate) async fn run(
    sh: Arc<Shared>,
    host: String,
    nodes: Vec<NodeIndex>,
    policy: &dyn Policy,
) -> HostOutcome {
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
    if w.sh.opts.probe_only {
        w.report_facts();
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
        policy.task(&mut w, t).await;
    }
    if w.sh.cancel.is_cancelled() {
        let pending = std::mem::take(&mut w.pending);
        for p in pending {
            w.skip(p.t, "interrupted");
        }
        for t in 0..w.tasks.len() {
            w.skip(t, "interrupted");
        }
    } else if let Err(e) = policy.flush(&mut w, ReadAhead::All).await {
        w.host_transport_failed(e);
    }
    w.end()
}
