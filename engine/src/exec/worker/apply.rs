//! The `apply` policy of the per-host worker ([`Apply`]).
//!
//! After `worker::run` connected and probed, for each task in order:
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
//! 3. plan (`Worker::plan_task`, the loop both policies share); an input the module asks for
//!    is resolved by waiting for its producer and reading its outputs once;
//! 4. NoOp → ok (published once everything queued before it ran); a change made only of
//!    `Run` steps joins the pending batch; any other change (file put, reboot) sends the batch
//!    and runs alone.
//!
//! A batch is ONE script: each task's steps, then that task's facts re-read (convergence
//! check: planning again must give NoOp, else "did not converge", a bug in the module) —
//! right after its steps when a later change of the batch may touch them, otherwise in the
//! batch's single end read — and the facts of later tasks the batch may have touched, except,
//! when the host goes on at once ([`ReadAhead::Needed`]), those of a task behind another
//! not-done task that reads the same (that task would change them first: they are read where
//! needed, not twice for nothing, `worth_reading`); a batch sent before the host waits for
//! another host reads them all ([`ReadAhead::All`]). The
//! first failing task stops the script and the host; later tasks are skipped. A retryable transport error while a batch
//! runs: reconnect (with backoff), re-probe, re-plan the batch's tasks — what is now NoOp
//! was applied — and send the rest again. Facts decide; nothing is re-run blindly.

use super::{DepErr, InputErr, Pending, PlanErr, Policy, ReadAhead, Worker};
use crate::event::{Event, TaskStatus};
use crate::exec::batch::{Batch, Item, ItemResult, Script, Section};
use crate::exec::conn::{LogAs, LogStdout, Redact};
use crate::exec::reboot::reboot;
use crate::exec::text::last_lines;
use crate::fact::FactQuery;
use crate::module::{Action, Change, Inputs, Plan, Step, Touches};
use crate::secret::Secret;
use crate::shell::Output;
use crate::transport::output::{Keep, TAIL};
use crate::transport::TransportError;
use async_trait::async_trait;
use petgraph::Direction;
use std::time::Instant;

/// Converge each task: plan, batch, run, verify (see the module docs).
pub(crate) struct Apply;

#[async_trait]
impl Policy for Apply {
    async fn task(&self, w: &mut Worker, t: usize) {
        w.step(t).await;
    }
    async fn flush(&self, w: &mut Worker, ahead: ReadAhead) -> Result<(), String> {
        w.flush(Vec::new(), ahead).await
    }
    async fn input(&self, w: &mut Worker, t: usize, name: &str) -> Result<Secret, InputErr> {
        w.resolve_input(t, name, self).await
    }
}

fn is_batchable(c: &Change) -> bool {
    c.steps.iter().all(|s| script_of(s).is_some())
}

/// A `Run` or `Inline` step as the batch runs it.
fn script_of(step: &Step) -> Option<Script> {
    match step {
        Step::Run(s) => Some(Script {
            text: s.clone(),
            inline: false,
        }),
        Step::Inline(s) => Some(Script {
            text: s.clone(),
            inline: true,
        }),
        Step::Put { .. } | Step::Reboot(_) => None,
    }
}

/// The `Run` / `Inline` steps of a batchable change, taken out of it.
fn take_scripts(c: &mut Change) -> Vec<Script> {
    std::mem::take(&mut c.steps)
        .iter()
        .filter_map(script_of)
        .collect()
}

impl Worker {
    fn exec_stale(&self, u: usize) -> bool {
        let task = &self.tasks[u];
        self.executed[task.fresh_since.min(self.executed.len())..]
            .iter()
            .any(|c| c.may_affect(&task.reads))
    }

    /// Later tasks (from `from`) whose facts executed changes or `extra` may have touched.
    /// The fact queries of `tasks`, in order.
    fn queries_of(&self, tasks: &[usize]) -> Vec<FactQuery> {
        tasks
            .iter()
            .flat_map(|&u| self.tasks[u].queries.iter().cloned())
            .collect()
    }

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

    /// The tasks of `stale` (later tasks, in order, from `from`) whose facts the end read of
    /// a batch after which the host goes on at once brings back ([`ReadAhead::Needed`]): each
    /// one unless a task not done between `from` and it reads the very same resource (or
    /// anything). Such a task, when it changes, changes that first (it writes what it reads:
    /// a file, the API server): its own batch re-reads them, and reading them now would be
    /// for nothing — and would hold back the publication of the batch's tasks, which other
    /// hosts may wait for. A path above is not the same: the task of a directory leaves the
    /// files in it as they are. What is left stale is read when reached, every stale task in
    /// one round trip (`reprobe`).
    fn worth_reading(&self, from: usize, stale: Vec<usize>) -> Vec<usize> {
        let same = |r: &String, q: &String| r == q || r == "*" || q == "*";
        let overlap = |u: usize, v: usize| {
            self.tasks[u]
                .reads
                .iter()
                .any(|r| self.tasks[v].reads.iter().any(|q| same(r, q)))
        };
        stale
            .into_iter()
            .filter(|&u| {
                !(from..u).any(|v| {
                    let task = &self.tasks[v];
                    !task.done && task.module.is_ok() && overlap(u, v)
                })
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
        let all = with_unique(ts, self.stale_from(from, &[]));
        let queries = self.queries_of(&all);
        let facts = self.read_facts("re-probe", &queries).await?;
        self.facts.merge(facts);
        self.mark_fresh(&all);
        Ok(())
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

    /// Fail `t` after the batch queued before it was sent.
    async fn fail_after_flush(&mut self, t: usize, message: String) {
        if let Err(e) = self.flush(Vec::new(), ReadAhead::Needed).await {
            self.host_transport_failed(e);
        }
        match self.stopped.clone() {
            Some(c) => self.skip(t, &c),
            None => self.fail(t, message),
        }
    }

    async fn step(&mut self, t: usize) {
        self.tasks[t].started = Some(Instant::now());
        let changed_at = match self.await_deps(t, &Apply).await {
            Ok(c) => c,
            Err(DepErr::Skip(cause)) => return self.skip(t, &cause),
            Err(DepErr::Fail(m)) => return self.fail_after_flush(t, m).await,
            Err(DepErr::Cancelled) => return,
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
            if let Err(e) = self.flush(Vec::new(), ReadAhead::Needed).await {
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
            if let Err(e) = self.flush(vec![t], ReadAhead::Needed).await {
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
        // A dependency that was queued when the dependencies were awaited has run since.
        if let Some(c) = self.failed_dep(t) {
            return self.skip(t, &c);
        }

        // Plan, resolving inputs as the module asks for them.
        let mut inputs = Inputs::new();
        let plan = match self.plan_task(t, &*module, &mut inputs, &Apply).await {
            Ok(p) => p,
            Err(PlanErr::Input(_, InputErr::Skip(c))) => return self.skip(t, &c),
            Err(PlanErr::Input(_, InputErr::Fail(m))) => return self.fail_after_flush(t, m).await,
            Err(PlanErr::Input(_, InputErr::Cancelled)) => return,
            Err(PlanErr::Input(name, InputErr::AfterApply)) => {
                let m = format!("input `{name}` has no value (this is a bug in kwin)");
                return self.fail_after_flush(t, m).await;
            }
            Err(PlanErr::Module(e)) => return self.fail_after_flush(t, e.to_string()).await,
        };
        self.emit_planned(t, &plan);
        if let (Plan::Change(c), true) = (&plan, self.tasks[t].read_only) {
            if let Err(e) = self.flush(Vec::new(), ReadAhead::Needed).await {
                self.host_transport_failed(e);
            }
            return self.refuse(t, &c.action.to_string(), &c.reason);
        }
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
                if let Err(e) = self.flush(Vec::new(), ReadAhead::Needed).await {
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
        let name = self.tasks[t].module_name.clone();
        match self.plan_once(&*module, inputs) {
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

    /// Send the pending batch (if it holds a change) and publish everything in it. `extra`:
    /// tasks whose facts must be re-read afterwards. `Err`: a transport error not attributed
    /// to any task of the batch.
    async fn flush(&mut self, extra: Vec<usize>, ahead: ReadAhead) -> Result<(), String> {
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
        self.run_batch(pending, extra, ahead).await;
        Ok(())
    }

    async fn run_batch(&mut self, mut entries: Vec<Pending>, extra: Vec<usize>, ahead: ReadAhead) {
        let mut backoff = self.backoff();
        loop {
            // A later change of the batch could disturb a task's convergence check.
            let verify_now: Vec<bool> = {
                let changes: Vec<(usize, &Change)> = entries
                    .iter()
                    .filter_map(|p| p.change.as_ref().map(|c| (p.t, c)))
                    .collect();
                changes
                    .iter()
                    .enumerate()
                    .map(|(k, (t, own))| {
                        let task = &self.tasks[*t];
                        changes[k + 1..].iter().any(|(_, later)| {
                            later.touches.may_disturb(
                                &task.reads,
                                &own.touches,
                                task.reads_paths_only,
                            )
                        })
                    })
                    .collect()
            };
            // The steps move into the batch (no copy): after it, a change is its touches and
            // its account; a retry plans again.
            let items: Vec<Item> = entries
                .iter_mut()
                .filter_map(|p| p.change.as_mut().map(|c| (p.t, c)))
                .zip(verify_now)
                .map(|((t, c), now)| Item {
                    steps: take_scripts(c),
                    verify: self.tasks[t].queries.clone(),
                    verify_now: now,
                    sensitive: self.is_sensitive(t),
                })
                .collect();
            let last = entries.iter().map(|p| p.t).max().unwrap_or(0);
            let touches: Vec<&Touches> = entries
                .iter()
                .filter_map(|p| p.change.as_ref().map(|c| &c.touches))
                .collect();
            let stale = self.stale_from(last + 1, &touches);
            let stale = match ahead {
                ReadAhead::All => stale,
                ReadAhead::Needed => self.worth_reading(last + 1, stale),
            };
            let probe_tasks = with_unique(stale, extra.iter().copied());
            let probe = self.queries_of(&probe_tasks);
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
            let sensitive = |k: &str| keys.contains(k);
            let redact = |out: &Output| batch.log_output(out, &sensitive);
            let keep = Keep::sections(batch.nonce(), self.sh.budget.clone());
            match self
                .conn
                .run_logged(
                    &what,
                    &batch.script,
                    timeout,
                    LogAs {
                        stdout: LogStdout::Yes,
                        script: batch.log_script.as_deref(),
                        output: batch
                            .may_hide_output(&sensitive)
                            .then_some(&redact as Redact),
                        keep: Some(&keep),
                        shown: false,
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
            match self.plan_once(&*module, &p.inputs) {
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
    fn warn_cuts(&self, batch: &Batch, out: &Output, tasks: &[usize]) {
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
                    TAIL,
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
        out: &Output,
        probe_tasks: &[usize],
    ) -> Vec<(usize, Change, Inputs)> {
        let mut unread = Vec::new();
        let (results, probe) = batch.parse(out);
        let mut results = results.into_iter();
        let mut failed_delegated: Option<String> = None;
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
                // A no-op queued behind a delegated step of this batch that failed and that
                // it depends on does not count as done.
                match self.failed_dep(p.t) {
                    Some(c) => self.skip(p.t, &c),
                    None => self.finish(p.t, TaskStatus::Ok, Some(p.why)),
                }
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
                    if self.tasks[p.t].delegated {
                        failed_delegated = Some(format!("{} failed", self.tasks[p.t].id));
                    }
                }
                Some(ItemResult::Died { out, script_exit }) => {
                    self.executed.push(change.touches.clone());
                    let msg = self.step_failure(script_exit, &out, self.is_sensitive(p.t));
                    self.fail(p.t, format!("the script ended while this task ran ({msg})"));
                    if self.tasks[p.t].delegated {
                        failed_delegated = Some(format!("{} failed", self.tasks[p.t].id));
                    }
                }
                // A delegated step failed earlier in this script (it stops the script, not
                // the host): what came after it did not run.
                Some(ItemResult::NotRun) | None if failed_delegated.is_some() => {
                    let cause = failed_delegated.clone().unwrap_or_default();
                    self.skip(p.t, &cause);
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

    async fn run_alone(&mut self, t: usize, change: Change, inputs: Inputs) {
        let mut change = change;
        let mut backoff = self.backoff();
        // Trailing `Run` steps go out as a one-task batch, which also re-reads the facts.
        let split = |c: &Change| {
            let tail = c
                .steps
                .iter()
                .rev()
                .take_while(|s| script_of(s).is_some())
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
                    match self.plan_once(&*module, &inputs) {
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
            return self
                .run_batch(vec![entry], Vec::new(), ReadAhead::Needed)
                .await;
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
        let mut runs: Vec<Script> = Vec::new();
        let steps = change.steps.iter().map(Some).chain(std::iter::once(None));
        for step in steps {
            if let Some(script) = step.and_then(script_of) {
                runs.push(script);
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
                let redact = |out: &Output| batch.log_output(out, &|_| false);
                let out = self
                    .conn
                    .run_logged(
                        "apply",
                        &batch.script,
                        opts.step_timeout,
                        LogAs {
                            stdout: LogStdout::Yes,
                            script: batch.log_script.as_deref(),
                            output: batch
                                .may_hide_output(&|_| false)
                                .then_some(&redact as Redact),
                            keep: Some(&keep),
                            shown: false,
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
                    reboot(&self.conn, spec, opts.step_timeout, opts.reboot_poll)
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
    Transport(TransportError),
}

/// `first`, then each task of `more` it does not hold yet.
fn with_unique(mut first: Vec<usize>, more: impl IntoIterator<Item = usize>) -> Vec<usize> {
    for u in more {
        if !first.contains(&u) {
            first.push(u);
        }
    }
    first
}
