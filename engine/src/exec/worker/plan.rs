//! The `plan` policy of the per-host worker ([`PlanOnly`]): `kwin plan` and
//! `kwin apply --check`. After `worker::run` connected and probed (ONE round trip), plan
//! every task against the probed facts, report. Never changes a host; waits on another host
//! only for the plan of a task whose output an input asks for.
//!
//! A task that needs another task's output (a join token) is reported as a change whose
//! details are known only after apply: reading outputs may itself have effects (creating a
//! token), so plan never runs output scripts. Outputs a producer reads from its own facts
//! (`Module::fact_outputs`, published with its outcome once it is planned as a no-op) are
//! known: the consumer is planned with them. Later tasks are planned against the facts as
//! probed, not as earlier changes would leave them (like any dry run).

use super::{InputErr, PlanErr, Policy, ReadAhead, Worker};
use crate::event::{Event, TaskStatus};
use crate::module::{Inputs, Plan};
use crate::secret::Secret;
use async_trait::async_trait;
use std::time::Instant;

/// Plan each task and report it; nothing is queued, so nothing is flushed.
pub(crate) struct PlanOnly;

#[async_trait]
impl Policy for PlanOnly {
    async fn task(&self, w: &mut Worker, t: usize) {
        let mut inputs = Inputs::new();
        w.tasks[t].started = Some(Instant::now());
        let module = match w.tasks[t].module.clone() {
            Ok(m) => m,
            Err(e) => {
                w.finish(t, TaskStatus::Failed, Some(e));
                return;
            }
        };
        // Plan; an input a producer read from its facts is known here too (wait for the
        // producer's plan, which needs no change on any host), any other is not.
        let result = w.plan_task(t, &*module, &mut inputs, self).await;
        match result {
            Ok(plan) => {
                w.emit_planned(t, &plan);
                match plan {
                    Plan::Change(c) if w.tasks[t].read_only => {
                        w.refuse(t, &c.action.to_string(), &c.reason)
                    }
                    Plan::NoOp { why, .. } => w.finish(t, TaskStatus::Ok, Some(why)),
                    Plan::Change(c) => w.finish(
                        t,
                        TaskStatus::WouldChange,
                        Some(format!("{}: {}", c.action, c.reason)),
                    ),
                }
            }
            Err(PlanErr::Input(name, _)) => {
                let task = w.sh.graph.task(w.tasks[t].node);
                let from = task
                    .inputs
                    .get(&name)
                    .map(|r| r.from.to_string())
                    .unwrap_or_else(|| "another task".into());
                let reason = format!("needs `{name}` from {from} (known after apply)");
                w.sh.report.emit(Event::TaskPlanned {
                    host: w.host.clone(),
                    task: w.tasks[t].id.name.clone(),
                    module: w.tasks[t].module_name.clone(),
                    change: true,
                    action: None,
                    reason: reason.clone(),
                    diff: None,
                });
                w.finish(t, TaskStatus::WouldChange, Some(reason));
            }
            Err(PlanErr::Module(e)) => w.finish(t, TaskStatus::Failed, Some(e.to_string())),
        }
    }

    async fn flush(&self, _w: &mut Worker, _ahead: ReadAhead) -> Result<(), String> {
        Ok(())
    }

    /// Only an output its producer read from its facts: nothing runs to read outputs.
    async fn input(&self, w: &mut Worker, t: usize, name: &str) -> Result<Secret, InputErr> {
        w.fact_input_after(t, name, self)
            .await
            .ok_or(InputErr::AfterApply)
    }
}
