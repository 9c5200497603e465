//! What every host worker of a run shares: the graph, every task's module, the board, the
//! connections, the outputs cache, the scrubber, the reporter, the options, the permits.

use super::board::Board;
use super::conn::Conn;
use super::journal::Reporter;
use super::outputs::Outputs;
use super::run::{Cancel, RunOptions};
use crate::event::Counts;
use crate::graph::scope::Scope;
use crate::graph::TaskGraph;
use crate::module::Module;
use crate::secret::Scrubber;
use crate::transport::output::OutputBudget;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// What every worker of a run shares.
pub struct Shared {
    pub graph: Arc<TaskGraph>,
    /// Module per node index, or why it could not be built.
    pub modules: Vec<Result<Arc<dyn Module>, String>>,
    pub board: Board,
    pub conns: HashMap<String, Arc<Conn>>,
    pub outputs: Outputs,
    /// What `--limit` leaves in the run (and read only).
    pub scope: Scope,
    pub scrubber: Scrubber,
    pub report: Reporter,
    pub opts: RunOptions,
    pub cancel: Cancel,
    pub permits: Arc<Semaphore>,
    /// The run's output budget, shared by every host.
    pub budget: Arc<OutputBudget>,
}

/// Per-host totals.
#[derive(Debug, Clone, Default)]
pub struct HostOutcome {
    pub counts: Counts,
    /// The host failed as a whole (connect, probe, a connection lost mid-run).
    pub host_failed: bool,
    /// kwin connected to the host.
    pub reached: bool,
}
