//! The renderer thread of one stage: every event from the engine goes to the summary's
//! tally and to the form chosen (`human.rs`, `json.rs`); when stdout is not a terminal, a
//! task running longer than [`HEARTBEAT`] is reported every [`HEARTBEAT`]
//! (`still running: h1 kubeadm-init (40s)`, JSON `still_running`), so a CI job that kills
//! silent jobs sees kwin alive.

use super::{human::Human, json::Json, sink::Sink, tally::Tally, terminal::warning_line};
use crate::args::OutputFormat;
use kwin_engine::event::{Event, Mode};
use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedReceiver;

/// How often a running task is reported when stdout is not a terminal.
pub const HEARTBEAT: Duration = Duration::from_secs(10);

/// `KWIN_HEARTBEAT_SECS` replaces [`HEARTBEAT`]: for tests only (docs/json-events.md).
fn heartbeat() -> Duration {
    std::env::var("KWIN_HEARTBEAT_SECS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|&s| s > 0)
        .map(Duration::from_secs)
        .unwrap_or(HEARTBEAT)
}

/// How a stage's events are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Render {
    /// By the renderer, naming the run `what` (`apply: 3 hosts, …`).
    Run(Mode, &'static str),
    /// No run output in the human form (`kwin kubeconfig`): only warnings, on stderr. The
    /// JSON form shows every event.
    Quiet,
}

/// The human form of [`Render::Quiet`]: warnings on stderr.
struct Warnings;

impl Sink for Warnings {
    fn event(&mut self, e: Event) {
        if let Event::Warning { host, message } = e {
            let line = warning_line(host.as_deref(), &message);
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
    }
}

/// The tasks each host has started and not finished, in order: the first is the one
/// running (the others wait in its batch).
struct Running {
    /// A new task of a host ends its previous one (`kwin verify`'s phases never finish).
    phases: bool,
    every: Duration,
    hosts: BTreeMap<String, HostRunning>,
}

struct HostRunning {
    tasks: VecDeque<String>,
    /// Since when the first task is the one running.
    since: Instant,
    next: Instant,
}

impl Running {
    fn track(&mut self, e: &Event, now: Instant) {
        let every = self.every;
        match e {
            Event::TaskStarted { host, task } => {
                let h = self.hosts.entry(host.clone()).or_insert(HostRunning {
                    tasks: VecDeque::new(),
                    since: now,
                    next: now + every,
                });
                if self.phases {
                    h.tasks.clear();
                }
                if h.tasks.is_empty() {
                    h.since = now;
                    h.next = now + every;
                }
                h.tasks.push_back(task.clone());
            }
            Event::TaskFinished { host, task, .. } => {
                if let Some(h) = self.hosts.get_mut(host) {
                    let was_first = h.tasks.front() == Some(task);
                    h.tasks.retain(|t| t != task);
                    if was_first {
                        h.since = now;
                        h.next = now + every;
                    }
                }
            }
            Event::HostFinished { host, .. } => {
                self.hosts.remove(host);
            }
            Event::RunFinished { .. } | Event::VerifyFinished { .. } => self.hosts.clear(),
            _ => {}
        }
    }

    fn next_due(&self) -> Option<Instant> {
        self.hosts
            .values()
            .filter(|h| !h.tasks.is_empty())
            .map(|h| h.next)
            .min()
    }

    /// The `still_running` events due at `now`.
    fn due(&mut self, now: Instant) -> Vec<Event> {
        let mut v = Vec::new();
        for (host, h) in &mut self.hosts {
            let Some(task) = h.tasks.front() else {
                continue;
            };
            if h.next <= now {
                v.push(Event::StillRunning {
                    host: host.clone(),
                    task: task.clone(),
                    elapsed_s: now.saturating_duration_since(h.since).as_secs(),
                });
                while h.next <= now {
                    h.next += self.every;
                }
            }
        }
        v
    }
}

/// How the events from `e` on are shown, when that changes: `verify_started` after a run
/// (`kwin apply`) shows the checks as `kwin verify` does, after the run's summary table, by
/// a renderer of their own (whose tasks are phases).
fn switch(shown: Render, e: &Event) -> Option<Render> {
    let verify = Render::Run(Mode::Apply, "verify");
    (matches!(e, Event::VerifyStarted { .. }) && shown != verify).then_some(verify)
}

/// Render every event from `rx` until the channel closes.
pub fn render(
    mut rx: UnboundedReceiver<Event>,
    format: OutputFormat,
    tty: bool,
    how: Render,
    tally: &Arc<Mutex<Tally>>,
) {
    let sink_for = |how: Render| -> Box<dyn Sink> {
        match (format, how) {
            (OutputFormat::Json, _) => Box::new(Json),
            (OutputFormat::Human, Render::Run(mode, what)) => Box::new(Human::new(mode, tty, what)),
            (OutputFormat::Human, Render::Quiet) => Box::new(Warnings),
        }
    };
    let mut sink = sink_for(how);
    let mut shown = how;
    let mut verify_starts = |e: &Event, sink: &mut Box<dyn Sink>, running: &mut Running| {
        if let Some(next) = switch(shown, e) {
            sink.end();
            *sink = sink_for(next);
            running.phases = true;
            shown = next;
        }
    };
    let record = |e: &Event| match tally.lock() {
        Ok(mut t) => t.record(e),
        Err(p) => p.into_inner().record(e),
    };
    let mut running = Running {
        phases: matches!(how, Render::Run(_, "verify")),
        every: heartbeat(),
        hosts: BTreeMap::new(),
    };
    let heartbeats = !tty;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build();
    let Ok(runtime) = runtime else {
        // No timer: the events without the heartbeat.
        while let Some(e) = rx.blocking_recv() {
            record(&e);
            verify_starts(&e, &mut sink, &mut running);
            sink.event(e);
        }
        sink.end();
        return;
    };
    runtime.block_on(async {
        loop {
            let due = running.next_due().filter(|_| heartbeats);
            let next = match due {
                Some(at) => {
                    tokio::select! {
                        e = rx.recv() => e,
                        _ = tokio::time::sleep_until(tokio::time::Instant::from_std(at)) => {
                            for e in running.due(Instant::now()) {
                                sink.event(e);
                            }
                            continue;
                        }
                    }
                }
                None => rx.recv().await,
            };
            let Some(e) = next else {
                break;
            };
            record(&e);
            verify_starts(&e, &mut sink, &mut running);
            running.track(&e, Instant::now());
            sink.event(e);
        }
    });
    sink.end();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started(host: &str, task: &str) -> Event {
        Event::TaskStarted {
            host: host.into(),
            task: task.into(),
        }
    }

    /// After an apply's run, `verify_started` hands the rest to a verify renderer; under
    /// `kwin verify` it is shown as it was, and no other event changes the renderer.
    #[test]
    fn verify_started_after_a_run_switches_to_the_verify_renderer() {
        let checks = Event::VerifyStarted { host: "cp1".into() };
        let apply = Render::Run(Mode::Apply, "apply");
        let verify = Render::Run(Mode::Apply, "verify");
        assert_eq!(switch(apply, &checks), Some(verify));
        assert_eq!(switch(verify, &checks), None);
        assert_eq!(switch(apply, &started("cp1", "nodes")), None);
        assert_eq!(
            switch(Render::Run(Mode::Plan, "plan"), &Event::Interrupted {}),
            None
        );
    }

    /// The first unfinished task of a host is reported, every interval, with its time.
    #[test]
    fn heartbeat_names_the_running_task() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut r = Running {
            phases: false,
            every: 10 * s,
            hosts: BTreeMap::new(),
        };
        r.track(&started("h1", "init"), t0);
        r.track(&started("h1", "join"), t0);
        assert!(r.due(t0 + 9 * s).is_empty());
        assert_eq!(
            r.due(t0 + 10 * s),
            [Event::StillRunning {
                host: "h1".into(),
                task: "init".into(),
                elapsed_s: 10
            }]
        );
        assert!(r.due(t0 + 15 * s).is_empty());
        assert_eq!(r.next_due(), Some(t0 + 20 * s));
        r.track(
            &Event::TaskFinished {
                host: "h1".into(),
                task: "init".into(),
                status: kwin_engine::event::TaskStatus::Changed,
                message: None,
                duration_ms: 0,
            },
            t0 + 21 * s,
        );
        assert_eq!(
            r.due(t0 + 31 * s),
            [Event::StillRunning {
                host: "h1".into(),
                task: "join".into(),
                elapsed_s: 10
            }]
        );
        r.track(
            &Event::HostFinished {
                host: "h1".into(),
                counts: Default::default(),
                duration_ms: 0,
                error: None,
            },
            t0 + 32 * s,
        );
        assert_eq!(r.next_due(), None);
    }
}
