//! [`Session`]: what every command that reaches hosts shares.
//!
//! Opened on a prepared plan: `.kwin/` next to the plan (0700), a run id, the run's options
//! (`[settings]` through [`Effective`](crate::plan::effective::Effective), then the command
//! line's flags), the scrubber (the plan's secrets — proxy credentials, read once by
//! `Effective` — and every host's connection secrets), the event sink and Ctrl-C of the
//! process ([`super::Ctl`]). Then, as the command needs: the lock ([`Session::lock`]), a
//! transport per host ([`Session::open_hosts`]) and the executor ([`Session::execute`]), or
//! one host's logged connection ([`Session::remote`]). [`Session::notes`] says what the user
//! should know afterwards (host keys recorded with `--accept-new-host-keys`).

use super::remote::HostRemote;
use super::{Ctl, Prepared};
use crate::event::{Event, EventSink, Mode};
use crate::exec::conn::Conn;
use crate::exec::lock::Lock;
use crate::exec::logs::HostLog;
use crate::exec::{execute, Cancel, HostHandle, Run, RunOptions, RunSummary};
use crate::graph::scope::Scope;
use crate::graph::TaskGraph;
use crate::module::build::Modules;
use crate::plan::effective::SettingsEff;
use crate::plan::{LoadedPlan, ResolvedHost};
use crate::secret::Scrubber;
use crate::transport::connect::{transport_for, ConnectOptions, Made};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The command line's say in a session.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    /// `--parallelism`, over `settings.parallelism`.
    pub parallelism: Option<usize>,
    /// `--accept-new-host-keys`.
    pub accept_new_host_keys: bool,
    /// `-v`: every script and its output as events (`script`, `output`).
    pub verbose: bool,
}

/// Why a session cannot go on (the command ends with exit code 1).
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("cannot create {path}: {reason}")]
    StateDir { path: PathBuf, reason: String },
    #[error(transparent)]
    Lock(#[from] crate::exec::lock::LockError),
    #[error("every checksum of the recipes must be known before a run, and one is not: run `kwin plan` first")]
    ChecksumsUnknown,
    #[error("the plan has no control plane to run the checks from")]
    NoControlPlane,
}

pub struct Session {
    mode: Mode,
    opts: RunOptions,
    settings: SettingsEff,
    scrubber: Scrubber,
    events: EventSink,
    cancel: Cancel,
    connect: ConnectOptions,
    lock: Option<Lock>,
    /// Every host opened so far, in the order opened.
    hosts: Vec<(String, Made)>,
    /// Whether old runs were pruned (once per session).
    pruned: bool,
    /// Whether the `logs` event was sent (once per session).
    logs_told: bool,
    /// The output budget of the session's own connections (`remote`: `kwin exec`, verify,
    /// the upgrade gate), shared by all of them.
    budget: std::sync::Arc<crate::transport::output::OutputBudget>,
}

/// The executor's options for `settings` (with defaults applied), in `mode`, with the
/// command line's flags over them.
fn options(settings: &SettingsEff, flags: &Flags, mode: Mode, state_dir: PathBuf) -> RunOptions {
    let mut o = RunOptions::from_settings(settings, mode, state_dir);
    if let Some(p) = flags.parallelism {
        o.parallelism = p;
    }
    o.accept_new_host_keys = flags.accept_new_host_keys;
    o.verbose = flags.verbose;
    o
}

impl Session {
    /// A session of `mode` on the prepared plan `p`.
    pub fn open(
        p: &Prepared,
        flags: &Flags,
        mode: Mode,
        ctl: Ctl,
    ) -> Result<Session, SessionError> {
        let state_dir = p.plan.base_dir.join(".kwin");
        crate::fs::private_dir(&state_dir).map_err(|e| SessionError::StateDir {
            path: state_dir.clone(),
            reason: e.to_string(),
        })?;
        let mut opts = options(&p.eff.settings, flags, mode, state_dir.clone());
        opts.plan = p.plan.path.clone();
        let scrubber = Scrubber::new();
        for s in p.eff.secrets() {
            scrubber.add(s);
        }
        for h in &p.plan.hosts {
            for s in h.conn.secrets() {
                scrubber.add(&s);
            }
        }
        Ok(Session {
            mode,
            opts,
            settings: p.eff.settings,
            scrubber,
            events: ctl.events,
            cancel: ctl.cancel,
            connect: ConnectOptions {
                accept_new_host_keys: flags.accept_new_host_keys,
                known_hosts: state_dir.join("known_hosts"),
            },
            lock: None,
            hosts: Vec::new(),
            pruned: false,
            logs_told: false,
            budget: crate::transport::output::OutputBudget::new(p.eff.settings.output_budget_bytes),
        })
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// `kwin facts`: the executor connects and probes, and plans nothing.
    pub(super) fn probe_only(&mut self) {
        self.opts.probe_only = true;
    }

    pub(super) fn events(&self) -> EventSink {
        self.events.clone()
    }

    pub(super) fn run_id(&self) -> &str {
        &self.opts.run_id
    }

    pub(super) fn step_timeout(&self) -> Duration {
        self.opts.step_timeout
    }

    pub(super) fn parallelism(&self) -> usize {
        self.opts.parallelism
    }

    pub(super) fn interrupted(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Take the plan's lock, `.kwin/<plan file>.lock`, for this run (one apply of a plan at a
    /// time); a stale lock taken over is a warning.
    pub(super) fn lock(&mut self) -> Result<(), SessionError> {
        let name = crate::exec::lock::lock_name(&self.opts.plan);
        let (lock, warning) = Lock::acquire(&self.opts.state_dir, &name, &self.opts.run_id)?;
        if let Some(w) = warning {
            self.events.send(Event::Warning {
                host: None,
                message: w,
            });
        }
        self.lock = Some(lock);
        Ok(())
    }

    /// The transport of `host` (made on first use; nothing connects yet).
    fn made(&mut self, host: &ResolvedHost) -> &Made {
        let i = match self.hosts.iter().position(|(n, _)| *n == host.name) {
            Some(i) => i,
            None => {
                let made = transport_for(&host.name, &host.conn, &self.connect, &self.scrubber);
                self.hosts.push((host.name.clone(), made));
                self.hosts.len() - 1
            }
        };
        &self.hosts[i].1
    }

    /// Where this session's host logs go, told once (`Event::Logs`), before the first is
    /// opened.
    fn tell_logs(&mut self) -> PathBuf {
        let dir = self.opts.state_dir.join("logs").join(&self.opts.run_id);
        if !self.logs_told {
            self.logs_told = true;
            self.events.send(Event::Logs {
                run_id: self.opts.run_id.clone(),
                dir: dir.display().to_string(),
            });
        }
        dir
    }

    /// A transport for every host of the plan that is part of the run (`--limit`: the
    /// chosen hosts and those they need; no other host is connected to).
    pub(super) fn open_hosts(&mut self, plan: &LoadedPlan, scope: &Scope) {
        self.tell_logs();
        for h in plan.hosts.iter().filter(|h| scope.has_host(&h.name)) {
            self.made(h);
        }
    }

    /// The execute phase: the executor over every host opened.
    pub(super) async fn execute(
        &mut self,
        graph: Arc<TaskGraph>,
        modules: Modules,
        scope: Scope,
    ) -> RunSummary {
        let hosts = self
            .hosts
            .iter()
            .map(|(name, m)| HostHandle {
                name: name.clone(),
                transport: m.transport.clone(),
            })
            .collect();
        execute(Run {
            graph,
            modules,
            scope,
            hosts,
            options: self.opts.clone(),
            scrubber: self.scrubber.clone(),
            events: self.events.clone(),
            cancel: self.cancel.clone(),
        })
        .await
    }

    /// One host, logged in `.kwin/logs/<run-id>/<host>.log` (old runs pruned first, as a run
    /// does), for work that is not a task graph.
    pub fn remote(&mut self, host: &ResolvedHost) -> HostRemote {
        self.remote_logged(host, &host.name)
    }

    /// [`Session::remote`], logged in `.kwin/logs/<run-id>/<log>.log`: for work before a run
    /// on the same host (the upgrade gate), whose log the run's own must not collide with.
    /// The transport is the host's, so the run reuses the connection.
    pub(super) fn remote_logged(&mut self, host: &ResolvedHost, log: &str) -> HostRemote {
        if !self.pruned {
            self.pruned = true;
            let (dir, r, id) = (
                &self.opts.state_dir,
                &self.opts.retention,
                &self.opts.run_id,
            );
            for e in crate::exec::retention::prune(dir, r, id) {
                self.events.send(Event::Warning {
                    host: None,
                    message: e,
                });
            }
        }
        let logs = self.tell_logs();
        let (log, err) = HostLog::open(&logs, log, self.scrubber.clone());
        if let Some(w) = err {
            self.events.send(Event::Warning {
                host: Some(host.name.clone()),
                message: w,
            });
        }
        let transport = self.made(host).transport.clone();
        HostRemote {
            conn: Arc::new(
                Conn::new(host.name.clone(), transport, log)
                    .with_events(self.events.clone(), self.opts.verbose)
                    .with_budget(self.budget.clone()),
            ),
            events: self.events.clone(),
            scrubber: self.scrubber.clone(),
            cancel: self.cancel.clone(),
            retries: self.settings.retries,
            retry_delay: self.settings.retry_delay(),
            wait_for_hosts: self.settings.wait_for_hosts(),
        }
    }

    /// What the user should know after the run: each host key recorded in
    /// `.kwin/known_hosts` with `--accept-new-host-keys`.
    pub fn notes(&self) -> Vec<String> {
        self.hosts
            .iter()
            .filter_map(|(_, m)| m.recorded_host_key())
            .collect()
    }
}
