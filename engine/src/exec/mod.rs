//! The executor: probe every host in one round trip, then walk the task graph.
//!
//! The pieces, each importing only those before it: `text.rs`, `logs.rs`, `lock.rs`,
//! `journal.rs`, `outputs.rs`, `batch.rs` (none of the executor's) < `retention.rs` < `run.rs`
//! < `conn.rs` < `reboot.rs` < `board.rs` < `shared.rs` < `worker/` < `walker.rs` < this file.
//!
//! - `run.rs`: what a run is given and gives back ([`Run`], [`RunOptions`], [`Cancel`],
//!   [`RunSummary`]). Every task's module is built before the run (`module::build`).
//! - [`execute`] (here): hands the run to the walker.
//! - `walker.rs`: one tokio task per host, a semaphore bounding how many hosts work at once;
//!   `board.rs` where every task's outcome is published (a watch channel per task) so
//!   cross-host dependents can wait on it; `shared.rs` what every worker of a run shares.
//! - `worker/`: the ONE per-host worker (`worker::run`): connect, probe (ONE script with
//!   every fact the host's tasks read), then the host's tasks in graph order under a
//!   [`worker::Policy`]: `apply.rs` plans each task against the facts, queues consecutive
//!   changes in a batch, and sends the batch as ONE script that also re-reads each changed
//!   task's facts (convergence check) and the facts later tasks need (unless the host goes on
//!   at once and a task in between would make them stale again first); a task re-probes only
//!   if an earlier change on the host may have touched what it reads (`Touches`), or a task
//!   it depends on changed another host after it was probed. `plan.rs` (`kwin plan` /
//!   `apply --check`): plan and report; changes nothing.
//! - `batch.rs` (apply scripts), `outputs.rs` (task outputs read once per producer),
//!   `reboot.rs` (trigger, wait down, wait up with a new boot id), `conn.rs` (timeouts, retry
//!   with backoff, logging), `text.rs`, `logs.rs` (host logs), `journal.rs` (the run's
//!   record), `lock.rs` (`.kwin/lock`), `retention.rs` (pruning old runs' logs and journals).
//!
//! Invariants: the executor never prints (events only); every text it emits or logs has
//! passed the run's scrubber; a host's failure never stops an unrelated host.

pub(crate) mod batch;
pub(crate) mod board;
pub mod conn;
pub mod journal;
pub mod lock;
pub mod logs;
pub(crate) mod outputs;
pub mod reboot;
pub mod retention;
pub mod run;
pub(crate) mod shared;
pub mod text;
pub(crate) mod walker;
pub(crate) mod worker;

pub use run::{Cancel, Canceller, HostHandle, Run, RunOptions, RunSummary};

/// Run the plan: `Mode::Plan` probes and reports, `Mode::Apply` converges. Emits events (the
/// last one is `summary`), writes logs and the journal under `options.state_dir`.
pub async fn execute(run: Run) -> RunSummary {
    walker::walk(run).await
}
