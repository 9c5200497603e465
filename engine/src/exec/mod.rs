//! The executor: probe every host in one round trip, then walk the task graph.
//!
//! See ARCHITECTURE.md "Flow of one apply". Hosts run in parallel (bounded); a host runs its
//! tasks in graph order; cross-host edges wait; unchanged tasks cost no round trip.

use crate::event::Mode;
use std::path::PathBuf;
use std::time::Duration;

/// Knobs of one run. Cross-cutting concerns belong here, never in modules.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub mode: Mode,
    pub parallelism: usize,
    pub step_timeout: Duration,
    pub retries: u32,
    pub retry_delay: Duration,
    pub accept_new_host_keys: bool,
    /// `.kwin/` next to the plan: logs, journal, lock, kwin-owned known_hosts.
    pub state_dir: PathBuf,
}

/// Totals of a run, as in the final `summary` event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSummary {
    pub hosts: usize,
    pub ok: usize,
    pub changed: usize,
    pub failed: usize,
    pub skipped: usize,
    pub duration_ms: u64,
    pub interrupted: bool,
}
