//! The board: every task's outcome, published once it finished (a watch channel per task),
//! so a dependent on another host can wait for it.

use super::outputs::Values;
use super::run::Cancel;
use crate::event::TaskStatus;
use petgraph::graph::NodeIndex;
use std::time::Instant;
use tokio::sync::watch;

/// A finished task, as dependents see it.
#[derive(Debug, Clone)]
pub struct Done {
    pub status: TaskStatus,
    /// For dependents, when this task did not succeed: "cp1/init failed".
    pub cause: Option<String>,
    /// A read-only task (`--limit`) that would have changed its host: its dependents fail
    /// (with `cause`, which names the host to include), they are not merely skipped.
    pub refused: bool,
    pub at: Instant,
    /// The task's outputs read from its facts (`Module::fact_outputs`), when it finished
    /// without a change left to make (ok, or changed and converged).
    pub outputs: Option<Values>,
}

impl Done {
    pub fn succeeded(&self) -> bool {
        matches!(
            self.status,
            TaskStatus::Ok | TaskStatus::Changed | TaskStatus::WouldChange
        )
    }
}

/// Outcome of every task, by node index.
pub struct Board {
    slots: Vec<watch::Sender<Option<Done>>>,
}

impl Board {
    pub fn new(n: usize) -> Self {
        Board {
            slots: (0..n).map(|_| watch::channel(None).0).collect(),
        }
    }
    pub fn set(&self, n: NodeIndex, done: Done) {
        if let Some(s) = self.slots.get(n.index()) {
            s.send_replace(Some(done));
        }
    }
    pub fn get(&self, n: NodeIndex) -> Option<Done> {
        self.slots.get(n.index()).and_then(|s| s.borrow().clone())
    }
    /// Wait until `n` finished; `None` if the run was cancelled first.
    pub async fn wait(&self, n: NodeIndex, cancel: &Cancel) -> Option<Done> {
        let mut rx = self.slots.get(n.index())?.subscribe();
        tokio::select! {
            r = rx.wait_for(|d| d.is_some()) => r.ok().and_then(|d| d.clone()),
            _ = cancel.cancelled() => None,
        }
    }
}
