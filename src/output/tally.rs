//! What the command's one summary reports ([`Tally`]): gathered from a run's events by the
//! renderer (`render.rs`) and by [`super::Output`]'s printing methods, read by
//! `Output::finish`.

use kwin_engine::event::{CheckCounts, Counts, Event};
use std::path::PathBuf;
use std::time::Instant;

/// What the command's one summary reports, gathered as it runs (by the renderers and the
/// printing methods).
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub(super) command: Option<String>,
    pub(super) start: Option<Instant>,
    pub(super) hosts: usize,
    pub(super) hosts_reached: usize,
    pub(super) hosts_failed: usize,
    pub(super) counts: Counts,
    pub(super) errors: usize,
    pub(super) warnings: usize,
    pub(super) verify: Option<CheckCounts>,
    pub(super) logs: Vec<PathBuf>,
    pub(super) interrupted: bool,
    /// The run under way (`run_started` seen, `run_finished` not yet), counted from its
    /// events as they come: what the summary says when a second Ctrl-C ends the process
    /// before the run's own totals arrive.
    pub(super) live: Option<LiveRun>,
}

/// A run's totals as its events tell them so far.
#[derive(Debug, Default)]
pub(super) struct LiveRun {
    pub(super) hosts: usize,
    pub(super) reached: std::collections::BTreeSet<String>,
    pub(super) failed: std::collections::BTreeSet<String>,
    pub(super) counts: Counts,
}

impl Tally {
    /// Take what the summary needs from an event of a run.
    pub(super) fn record(&mut self, e: &Event) {
        match e {
            Event::RunFinished {
                hosts,
                hosts_reached,
                hosts_failed,
                counts,
                ..
            } => {
                self.live = None;
                self.hosts += hosts;
                self.hosts_reached += hosts_reached;
                self.hosts_failed += hosts_failed;
                self.counts += *counts;
            }
            Event::RunStarted { hosts, .. } => {
                self.live = Some(LiveRun {
                    hosts: *hosts,
                    ..LiveRun::default()
                });
            }
            Event::HostConnected { host, .. } => {
                if let Some(l) = &mut self.live {
                    l.reached.insert(host.clone());
                }
            }
            Event::TaskFinished { status, .. } => {
                if let Some(l) = &mut self.live {
                    l.counts.add(*status);
                }
            }
            Event::HostFinished {
                host,
                error: Some(_),
                ..
            } => {
                if let Some(l) = &mut self.live {
                    l.failed.insert(host.clone());
                }
            }
            Event::VerifyFinished { counts, .. } => self.verify = Some(*counts),
            Event::Logs { dir, .. } => {
                let dir = PathBuf::from(dir);
                if !self.logs.contains(&dir) {
                    self.logs.push(dir);
                }
            }
            Event::Interrupted {} => self.interrupted = true,
            _ => {}
        }
    }
}
