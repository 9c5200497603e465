//! One host's connection as the executor uses it: the transport, the host log, a round-trip
//! counter, and the retry policy.
//!
//! Every script goes out through [`Conn::run`]: POSIX scripts are wrapped in a brace group
//! reading from `/dev/null`, so the shell parses the whole script before running any of it
//! and no command can read (eat) the rest of the script from stdin.
//!
//! Retry policy: only errors the transport calls retryable (cannot connect, connection lost)
//! are retried, after `retry_delay`, doubling, at most `retries` times, reconnecting first.
//! Whether the operation is simply re-sent is the caller's decision: read-only scripts
//! (probes) are; apply batches are not — the host worker re-probes and lets facts decide.

use super::logs::HostLog;
use crate::event::{Event, EventSink, Stream};
use crate::shell::{Output, Shell};
use crate::transport::output::{self, Keep, OutputBudget, Tap};
use crate::transport::{Transport, TransportError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Conn {
    pub host: String,
    transport: Arc<dyn Transport>,
    log: HostLog,
    runs: AtomicUsize,
    /// Where connection retries are told (`Event::ConnectRetry`), and with `verbose` every
    /// script and its output as logged (`Event::Script`, `Event::Output`): line by line as
    /// it arrives when the log shows the run as it is sent and received, else whole at its
    /// end in the log's form.
    events: Option<EventSink>,
    verbose: bool,
    /// The run's output budget, for everything this host sends (`transport::output`).
    budget: Option<Arc<OutputBudget>>,
}

/// Remaining retries of one operation and the next delay; for a first connection, how long
/// to wait for a host that does not answer yet (`settings.wait_for_hosts`).
#[derive(Debug, Clone)]
pub struct Backoff {
    left: u32,
    delay: Duration,
    wait: Duration,
}

/// Between two attempts to reach a host kwin waits for: `retry_delay`, within these bounds.
const WAIT_INTERVAL: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(10));

impl Backoff {
    pub fn new(retries: u32, delay: Duration) -> Self {
        Backoff {
            left: retries,
            delay,
            wait: Duration::ZERO,
        }
    }

    /// The same, and a first connection keeps trying, whatever the connect failure (refused,
    /// no answer, unreachable), for up to `wait`.
    pub fn waiting(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }
    /// The delay before the next attempt, if one is left.
    pub fn next_delay(&self) -> Option<Duration> {
        (self.left > 0).then_some(self.delay)
    }

    /// Sleep before the next attempt; `false` when no attempt is left.
    pub async fn wait(&mut self) -> bool {
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        tokio::time::sleep(self.delay).await;
        self.delay = self.delay.saturating_mul(2);
        true
    }
}

/// A first connection that failed without `settings.wait_for_hosts`: say it can wait.
fn not_waited(e: TransportError, backoff: &Backoff) -> TransportError {
    match e {
        TransportError::Connect {
            address,
            reason,
            kind,
        } if backoff.wait.is_zero() => TransportError::Connect {
            address,
            reason: format!(
                "{reason}; to wait for a host that is still starting, set settings.wait_for_hosts (e.g. \"10m\")"
            ),
            kind,
        },
        e => e,
    }
}

/// Whether stdout of a run may be logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogStdout {
    Yes,
    /// Stdout is task outputs (`key=value` secrets): every value is added to the scrubber
    /// before anything about this run is logged, and stdout itself is never logged.
    TaskOutputs,
}

/// Redacts a run's output for the host log (`None`: log it as it is).
pub type Redact<'a> = &'a (dyn Fn(&Output) -> Option<Output> + Send + Sync);

/// How a run shows in the host log when it differs from what was sent and received: a
/// sensitive task's steps, answers and output are left out (see `Batch::log_script`,
/// `fact::redact_for_log`). A run with neither `script` nor `output` (and stdout logged) is
/// logged as it is, so `-v` shows its output as it arrives; any other only at its end, in
/// the log's form.
#[derive(Clone, Copy)]
pub struct LogAs<'a> {
    pub stdout: LogStdout,
    /// The script as logged, when it differs from the one sent.
    pub script: Option<&'a str>,
    /// The output as logged, when the log may hide some of it (`None`: as received).
    pub output: Option<Redact<'a>>,
    /// What of the output is kept at all (a batch's step output counts against the run's
    /// output budget); `None`: everything, up to `MAX_OUTPUT` per stream, counted against
    /// the connection's budget ([`Conn::with_budget`]).
    pub keep: Option<&'a Keep>,
    /// The output is only shown (`kwin exec`), never read by kwin: past the spent budget it
    /// keeps its tail, where output kwin reads fails the command.
    pub shown: bool,
}

impl LogAs<'_> {
    pub fn plain(stdout: LogStdout) -> Self {
        LogAs {
            stdout,
            script: None,
            output: None,
            keep: None,
            shown: false,
        }
    }
}

impl Conn {
    pub fn new(host: impl Into<String>, transport: Arc<dyn Transport>, log: HostLog) -> Self {
        Conn {
            host: host.into(),
            transport,
            log,
            runs: AtomicUsize::new(0),
            events: None,
            verbose: false,
            budget: None,
        }
    }

    /// The connection counting everything the host sends against the run's `budget`.
    pub fn with_budget(mut self, budget: Arc<OutputBudget>) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The connection telling `events` of its connection retries, and with `verbose` of
    /// every script and its output (in the form the host log has, scrubbed).
    pub fn with_events(mut self, events: EventSink, verbose: bool) -> Self {
        self.events = Some(events);
        self.verbose = verbose;
        self
    }

    /// Tell that connecting failed with `e`, before the next attempt (`attempt` failed).
    fn tell_retry(&self, attempt: u32, e: &TransportError, backoff: &Backoff) {
        if let (Some(events), Some(delay)) = (&self.events, backoff.next_delay()) {
            events.send(Event::ConnectRetry {
                host: self.host.clone(),
                attempt,
                error: self.log.scrubber().scrub(&e.to_string()),
                delay_ms: delay.as_millis() as u64,
                waited_ms: None,
                wait_ms: None,
            });
        }
    }

    /// `-v`: `what` of the run, scrubbed.
    fn tell_verbose(&self, e: impl FnOnce(&crate::secret::Scrubber) -> Option<Event>) {
        if let (Some(events), true) = (&self.events, self.verbose) {
            if let Some(e) = e(self.log.scrubber()) {
                events.send(e);
            }
        }
    }

    /// `-v` on a run that is logged as it is sent and received: a tap that tells each
    /// complete line of its output as it arrives (`Event::Output`), scrubbed as the host log
    /// is. A run the log shows otherwise (a sensitive task's steps or output, answers that
    /// may be hidden, task outputs) gets none: it is told whole at its end, in the log's
    /// form.
    fn live_tap(&self, what: &str, log: &LogAs<'_>) -> Option<Tap> {
        let events = self.events.as_ref().filter(|_| self.verbose)?;
        if log.stdout != LogStdout::Yes || log.script.is_some() || log.output.is_some() {
            return None;
        }
        let (events, host, what) = (events.clone(), self.host.clone(), what.to_string());
        let scrubber = self.log.scrubber().clone();
        Some(Tap::new(move |stream, line| {
            events.send(Event::Output {
                host: host.clone(),
                what: what.clone(),
                stream: match stream {
                    output::Stream::Stdout => Stream::Stdout,
                    output::Stream::Stderr => Stream::Stderr,
                },
                text: scrubber.scrub_bytes(line),
            })
        }))
    }

    pub fn shell(&self) -> Shell {
        self.transport.shell()
    }

    /// The language of the host's restart and boot-id commands ([`Transport::reboot_shell`]).
    pub fn reboot_shell(&self) -> Shell {
        self.transport.reboot_shell()
    }

    /// Round trips so far (runs, puts, gets).
    pub fn round_trips(&self) -> usize {
        self.runs.load(Ordering::Relaxed)
    }

    /// The host log's file, when there is one.
    pub fn log_path(&self) -> Option<&std::path::Path> {
        self.log.path()
    }

    pub fn log(&self, header: &str) {
        self.log.entry(header, &[]);
    }

    pub async fn connect(&self) -> Result<(), TransportError> {
        let t = Instant::now();
        let r = self.transport.connect().await;
        match &r {
            Ok(()) => self.log(&format!("connect: ok in {}ms", t.elapsed().as_millis())),
            Err(e) => self.log(&format!("connect: {e}")),
        }
        r
    }

    /// Connect, retrying per the policy: within the backoff's wait (`settings.wait_for_hosts`)
    /// every connect failure is tried again, each told (`connect_retry` with the time waited);
    /// after it, a refused port fails at once (the host is up and nothing listens: retrying
    /// like a timeout only delays the message) and other retryable failures are retried
    /// `retries` times.
    pub async fn connect_retrying(&self, mut backoff: Backoff) -> Result<(), TransportError> {
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.connect().await {
                Ok(()) => return Ok(()),
                Err(e @ TransportError::Connect { .. }) if started.elapsed() < backoff.wait => {
                    let left = backoff.wait.saturating_sub(started.elapsed());
                    let pause = backoff
                        .delay
                        .clamp(WAIT_INTERVAL.0, WAIT_INTERVAL.1)
                        .min(left);
                    self.tell_waiting(attempt, &e, pause, started.elapsed(), backoff.wait);
                    tokio::time::sleep(pause).await;
                }
                Err(e) if e.is_refused() => return Err(not_waited(e, &backoff)),
                Err(e) if e.is_retryable() => {
                    self.tell_retry(attempt, &e, &backoff);
                    if !backoff.wait().await {
                        return Err(not_waited(e, &backoff));
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Tell that the host does not answer yet and kwin goes on waiting for it.
    fn tell_waiting(
        &self,
        attempt: u32,
        e: &TransportError,
        pause: Duration,
        waited: Duration,
        wait: Duration,
    ) {
        if let Some(events) = &self.events {
            events.send(Event::ConnectRetry {
                host: self.host.clone(),
                attempt,
                error: self.log.scrubber().scrub(&e.to_string()),
                delay_ms: pause.as_millis() as u64,
                waited_ms: Some(waited.as_millis() as u64),
                wait_ms: Some(wait.as_millis() as u64),
            });
        }
    }

    /// After a retryable error: wait and reconnect until it works or retries run out (then the
    /// last error).
    pub async fn recover(
        &self,
        backoff: &mut Backoff,
        err: TransportError,
    ) -> Result<(), TransportError> {
        let mut err = err;
        let mut attempt = 0;
        loop {
            attempt += 1;
            if err.is_retryable() {
                self.tell_retry(attempt, &err, backoff);
            }
            if !err.is_retryable() || !backoff.wait().await {
                return Err(err);
            }
            self.transport.close().await;
            match self.connect().await {
                Ok(()) => return Ok(()),
                Err(e) => err = e,
            }
        }
    }

    /// Run `script` once. `what` names it in the log (probe, apply, output, reboot).
    pub async fn run(
        &self,
        what: &str,
        script: &str,
        timeout: Duration,
        log_stdout: LogStdout,
    ) -> Result<Output, TransportError> {
        self.run_logged(what, script, timeout, LogAs::plain(log_stdout))
            .await
    }

    /// [`Conn::run`], logged as `log` says.
    pub async fn run_logged(
        &self,
        what: &str,
        script: &str,
        timeout: Duration,
        log: LogAs<'_>,
    ) -> Result<Output, TransportError> {
        let log_stdout = log.stdout;
        let logged_script = log.script.unwrap_or(script);
        let n = self.runs.fetch_add(1, Ordering::Relaxed) + 1;
        // A POSIX script goes in a brace group (the transport joins the parts in the copy it
        // makes anyway: no second copy of a big batch).
        let parts: &[&str] = match self.shell() {
            Shell::Posix => &["{\n", script, "\n} </dev/null\n"],
            Shell::PowerShell => &[script],
        };
        let t = Instant::now();
        let header = format!(
            "run #{n} {what} ({} bytes, timeout {}s)",
            parts.iter().map(|p| p.len()).sum::<usize>(),
            timeout.as_secs()
        );
        if log_stdout == LogStdout::Yes {
            self.log.entry(&header, &[("$ ", logged_script.as_bytes())]);
        }
        self.tell_verbose(|sc| {
            Some(Event::Script {
                host: self.host.clone(),
                what: what.to_string(),
                script: sc.scrub(logged_script),
            })
        });
        let live = self.live_tap(what, &log);
        let budgeted = match (log.keep, &self.budget) {
            (None, Some(b)) => Some(Keep::budget(b.clone(), log.shown)),
            _ => None,
        };
        let keep = log.keep.or(budgeted.as_ref());
        let r = match (keep, &live) {
            (keep, Some(tap)) => {
                let keep = keep.cloned().unwrap_or_default().with_tap(tap.clone());
                self.transport.run_joined(parts, timeout, &keep).await
            }
            (Some(keep), None) => self.transport.run_joined(parts, timeout, keep).await,
            (None, None) => match parts {
                [script] => self.transport.run(script, timeout).await,
                _ => {
                    self.transport
                        .run_joined(parts, timeout, &Keep::all())
                        .await
                }
            },
        };
        let ms = t.elapsed().as_millis();
        if log_stdout == LogStdout::TaskOutputs {
            if let Ok(out) = &r {
                for v in super::text::parse_outputs(&out.stdout).values() {
                    self.log.scrubber().add(v);
                }
            }
            self.log.entry(&header, &[("$ ", logged_script.as_bytes())]);
        }
        match &r {
            Ok(out) => {
                let redacted = log.output.and_then(|f| f(out));
                let out = redacted.as_ref().unwrap_or(out);
                let hidden = format!("({} bytes of task outputs, not logged)", out.stdout.len());
                let stdout: &[u8] = match log_stdout {
                    LogStdout::Yes => &out.stdout,
                    LogStdout::TaskOutputs => hidden.as_bytes(),
                };
                for (stream, bytes, s) in [
                    (Stream::Stdout, stdout, output::Stream::Stdout),
                    (Stream::Stderr, &out.stderr, output::Stream::Stderr),
                ] {
                    if live.as_ref().is_some_and(|t| !t.declined(s)) {
                        // Told line by line as it arrived.
                        continue;
                    }
                    self.tell_verbose(|sc| {
                        (!bytes.is_empty()).then(|| Event::Output {
                            host: self.host.clone(),
                            what: what.to_string(),
                            stream,
                            text: sc.scrub_bytes(bytes),
                        })
                    });
                }
                self.log.entry(
                    &format!("run #{n} exit {} in {ms}ms", out.exit),
                    &[("1| ", stdout), ("2| ", &out.stderr)],
                )
            }
            Err(e) => self
                .log
                .entry(&format!("run #{n} error after {ms}ms: {e}"), &[]),
        }
        r
    }

    /// A read-only script: retried (after reconnecting) on retryable errors.
    pub async fn run_idempotent(
        &self,
        what: &str,
        script: &str,
        timeout: Duration,
        backoff: Backoff,
        log_stdout: LogStdout,
    ) -> Result<Output, TransportError> {
        self.run_idempotent_logged(what, script, timeout, backoff, LogAs::plain(log_stdout))
            .await
    }

    /// [`Conn::run_idempotent`], logged as `log` says.
    pub async fn run_idempotent_logged(
        &self,
        what: &str,
        script: &str,
        timeout: Duration,
        mut backoff: Backoff,
        log: LogAs<'_>,
    ) -> Result<Output, TransportError> {
        loop {
            match self.run_logged(what, script, timeout, log).await {
                Ok(o) => return Ok(o),
                Err(e) if e.is_retryable() => self.recover(&mut backoff, e).await?,
                Err(e) => return Err(e),
            }
        }
    }

    /// Atomic file write; retried on retryable errors (writing the same bytes twice is safe).
    pub async fn put(
        &self,
        path: &str,
        bytes: &[u8],
        mode: Option<u32>,
        timeout: Duration,
        mut backoff: Backoff,
    ) -> Result<(), TransportError> {
        loop {
            let n = self.runs.fetch_add(1, Ordering::Relaxed) + 1;
            let t = Instant::now();
            let r = tokio::time::timeout(timeout, self.transport.put(path, bytes, mode))
                .await
                .unwrap_or(Err(TransportError::Timeout(timeout)));
            let ms = t.elapsed().as_millis();
            match &r {
                Ok(()) => self.log(&format!(
                    "put #{n} {path} ({} bytes, mode {}) ok in {ms}ms",
                    bytes.len(),
                    mode.map(|m| format!("{m:o}")).unwrap_or_else(|| "-".into())
                )),
                Err(e) => self.log(&format!("put #{n} {path} error after {ms}ms: {e}")),
            }
            match r {
                Ok(()) => return Ok(()),
                Err(e) if e.is_retryable() => self.recover(&mut backoff, e).await?,
                Err(e) => return Err(e),
            }
        }
    }

    pub async fn close(&self) {
        self.transport.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::Scrubber;
    use crate::transport::local::LocalTransport;

    /// A script reaches a POSIX host on the shell's stdin: without the wrapper, a command that
    /// reads stdin (`cat`) would read the rest of the script as its input, and what follows
    /// it would never run.
    #[tokio::test]
    async fn a_command_that_reads_stdin_cannot_eat_the_rest_of_the_script() {
        let conn = Conn::new(
            "local",
            Arc::new(LocalTransport { become_root: false }),
            HostLog::none(Scrubber::new()),
        );
        // Past the shell's first read (dash reads its input in blocks), so that without the
        // wrapper `cat` would be handed the rest.
        let padding = "# padding\n".repeat(20_000);
        let script = format!("cat\n{padding}echo after-cat\n");
        let out = conn
            .run("probe", &script, Duration::from_secs(20), LogStdout::Yes)
            .await
            .expect("runs");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "after-cat\n");
    }
}
