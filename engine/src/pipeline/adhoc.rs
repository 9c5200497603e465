//! `kwin exec`: one command line on every chosen host, over the session's connections.
//!
//! Each host's connection is the session's ([`Session::remote`]): host keys verified as for
//! apply (`--accept-new-host-keys` honoured), the command and its output in
//! `.kwin/logs/<run-id>/<host>.log`, every text scrubbed. The command line goes to the
//! host's shell as it is — `sh` on POSIX hosts, PowerShell on Windows — like `ssh host CMD`;
//! it runs once (never re-sent after a lost connection: it is not known to be idempotent).
//! Hosts run in parallel (`parallelism`); each ends in one `exec_result` event, the run in a
//! `summary` (failed: hosts that could not run it or whose command exited non-zero).

use super::remote::HostRemote;
use super::Session;
use crate::event::{Counts, Event, EventSink, Mode};
use crate::exec::conn::{LogAs, LogStdout};
use crate::plan::ResolvedHost;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// How `kwin exec` went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecSummary {
    pub hosts: usize,
    /// Hosts that could not run the command, or whose command exited non-zero.
    pub failed: usize,
    pub interrupted: bool,
}

/// Run `command` on each of `hosts` (see the module docs).
pub async fn exec(s: &mut Session, hosts: &[&ResolvedHost], command: &str) -> ExecSummary {
    let start = Instant::now();
    let events = s.events();
    events.send(Event::RunStarted {
        run_id: s.run_id().to_string(),
        mode: Mode::Apply,
        hosts: hosts.len(),
        tasks: 0,
    });
    let timeout = s.step_timeout();
    let permits = Arc::new(Semaphore::new(s.parallelism().max(1)));
    let command: Arc<str> = Arc::from(command);
    let mut set = tokio::task::JoinSet::new();
    for h in hosts {
        let r = s.remote(h);
        let (permits, command, events) = (permits.clone(), command.clone(), events.clone());
        set.spawn(async move {
            let _permit = permits.acquire_owned().await;
            one(&r, &command, timeout, &events).await
        });
    }
    let (mut failed, mut unreached) = (0, 0);
    while let Some(r) = set.join_next().await {
        match r {
            Ok(Ran::Ok) => {}
            Ok(Ran::Failed) => failed += 1,
            Ok(Ran::NotRun) | Err(_) => {
                failed += 1;
                unreached += 1;
            }
        }
    }
    let interrupted = s.interrupted();
    if interrupted {
        events.send(Event::Interrupted {});
    }
    events.send(Event::RunFinished {
        hosts: hosts.len(),
        hosts_reached: hosts.len() - unreached,
        hosts_failed: failed,
        counts: Counts {
            ok: hosts.len() - failed,
            changed: 0,
            would_change: 0,
            failed,
            skipped: 0,
        },
        duration_ms: start.elapsed().as_millis() as u64,
    });
    ExecSummary {
        hosts: hosts.len(),
        failed,
        interrupted,
    }
}

/// How one host's command went.
enum Ran {
    /// Ran and exited 0.
    Ok,
    /// Ran and exited non-zero.
    Failed,
    /// Could not run (connect, timeout, interrupted).
    NotRun,
}

/// One host: connect, run once, report.
async fn one(r: &HostRemote, command: &str, timeout: Duration, events: &EventSink) -> Ran {
    let t = Instant::now();
    let host = r.conn.host.clone();
    let result = match crate::pipeline::Remote::connect(r).await {
        Err(e) => Err(e),
        Ok(()) => {
            // Only shown: past the run's output budget, its tail (`transport::output`).
            let log = LogAs {
                shown: true,
                ..LogAs::plain(LogStdout::Yes)
            };
            let run = r.conn.run_logged("exec", command, timeout, log);
            tokio::select! {
                o = run => o.map_err(|e| r.scrubber.scrub(&e.to_string())),
                () = r.cancel.cancelled() => Err("interrupted".to_string()),
            }
        }
    };
    r.conn.close().await;
    let duration_ms = t.elapsed().as_millis() as u64;
    let text = |b: &[u8]| r.scrubber.scrub(&String::from_utf8_lossy(b));
    let (ran, e) = match result {
        Ok(out) => (
            if out.exit == 0 { Ran::Ok } else { Ran::Failed },
            Event::ExecResult {
                host,
                exit: Some(out.exit),
                stdout: text(&out.stdout),
                stderr: text(&out.stderr),
                error: None,
                duration_ms,
            },
        ),
        Err(err) => (
            Ran::NotRun,
            Event::ExecResult {
                host,
                exit: None,
                stdout: String::new(),
                stderr: String::new(),
                error: Some(err),
                duration_ms,
            },
        ),
    };
    events.send(e);
    ran
}
