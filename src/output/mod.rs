//! The one owner of the terminal: everything `kwin` prints, reads from the terminal or writes
//! to stdout/stderr goes through [`Output`]. Nothing else in `src/` prints (the crate denies
//! the print lints outside this module; `tests/layers.rs` also fails on any print or
//! `std::io::{stdout, stderr, stdin}` elsewhere in `src/`).
//!
//! Streams: `--output json` keeps stdout for one event stream (`kwin_engine::event::Event`,
//! one JSON line each with `"schema"`, documented in docs/json-events.md): a run's events,
//! diagnostics, `kubeconfig`, and always exactly one `summary` last ([`Output::finish`], for
//! every command and every way it ends). Notes, fetched checksums and errors go to stderr.
//! The human form prints results on stdout and diagnostics, notes, errors and the host logs'
//! folder on stderr.
//!
//! A run's events are rendered on their own thread ([`Output::spawn_renderer`], `render.rs`:
//! the heartbeat of long tasks when stdout is not a terminal, the totals for the summary):
//! `human.rs` (progress bars on a terminal whose `TERM` is not `dumb`, plain lines otherwise,
//! summary tables), `json.rs` (one JSON line per event). Every text in events was scrubbed
//! by the engine.

mod human;
mod json;
mod render;
mod show;
mod sink;
mod tally;
mod terminal;

pub use human::plural;
pub use render::Render;
pub use show::show;

use crate::args::OutputFormat;
use kwin_engine::diag::Diagnostics;
use kwin_engine::event::{Event, Outcome, Summary};
use kwin_engine::pipeline::Fetched;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;
use tally::{LiveRun, Tally};
use terminal::terminal;
use tokio::sync::mpsc::UnboundedReceiver;

/// How `kwin` prints: the format chosen, whether stdout is a terminal that can draw progress
/// bars (detected once), and what the command's summary will say.
#[derive(Debug, Clone)]
pub struct Output {
    format: OutputFormat,
    /// stdout is a terminal and `TERM` is not `dumb`: progress bars. A dumb terminal gets the
    /// plain lines (indicatif draws nothing there, and its lines would be lost).
    tty: bool,
    tally: Arc<Mutex<Tally>>,
}

/// `TERM=dumb` (Emacs shells, some CI consoles): a terminal that cannot move the cursor.
fn dumb_terminal() -> bool {
    std::env::var("TERM").is_ok_and(|t| t == "dumb")
}

/// `path` relative to the current directory when it is under it (`.kwin/logs/…`).
fn shown(path: &Path) -> String {
    let rel = std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(Path::to_path_buf));
    match rel {
        Some(r) if !r.as_os_str().is_empty() => format!("{}/", r.display()),
        _ => format!("{}/", path.display()),
    }
}

/// What `kwin kubeconfig` wrote.
pub struct KubeconfigWritten<'a> {
    pub path: &'a Path,
    pub context: &'a str,
    pub server: &'a str,
    pub host: &'a str,
    /// Where on the host it was read.
    pub from: &'a str,
}

impl Output {
    /// The output of `command` (`None`: the command line could not be parsed).
    pub fn new(format: OutputFormat, command: Option<&str>) -> Output {
        let tally = Tally {
            command: command.map(str::to_string),
            start: Some(Instant::now()),
            ..Tally::default()
        };
        Output {
            format,
            tty: std::io::stdout().is_terminal() && !dumb_terminal(),
            tally: Arc::new(Mutex::new(tally)),
        }
    }

    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        match self.tally.lock() {
            Ok(t) => t,
            Err(p) => p.into_inner(),
        }
    }

    /// The end of every command: the error that ended it (stderr), the folders of its host
    /// logs (human: stderr; JSON: in the summary), and with `--output json` the one
    /// `summary` line. Returns the outcome, for the exit code.
    pub fn finish(&self, result: anyhow::Result<Outcome>) -> Outcome {
        let (outcome, error) = match result {
            Ok(o) => (o, None),
            Err(e) => {
                self.error(&e);
                (Outcome::Failed, Some(format!("{e:#}")))
            }
        };
        self.finish_as(outcome, error)
    }

    /// [`Output::finish`] with the outcome and the error (already shown) decided.
    fn finish_as(&self, outcome: Outcome, error: Option<String>) -> Outcome {
        let mut outcome = outcome;
        let t = self.tally();
        if t.interrupted && outcome == Outcome::Success {
            outcome = Outcome::Interrupted;
        }
        let logs: Vec<&PathBuf> = t.logs.iter().filter(|d| d.is_dir()).collect();
        // A run cut off before its `run_finished` (a second Ctrl-C): its totals so far.
        let empty = LiveRun::default();
        let live = t.live.as_ref().unwrap_or(&empty);
        let mut counts = t.counts;
        counts += live.counts;
        match self.format {
            OutputFormat::Human => {
                if !logs.is_empty() {
                    let dirs: Vec<String> = logs.iter().map(|d| shown(d)).collect();
                    let _ = writeln!(
                        std::io::stderr().lock(),
                        "{}",
                        terminal(&format!(
                            "logs: {} (every command sent to the hosts and its output)",
                            dirs.join(", ")
                        ))
                    );
                }
            }
            OutputFormat::Json => {
                let summary = Summary {
                    command: t.command.clone(),
                    outcome,
                    exit_code: crate::exit::exit_code_of(outcome),
                    hosts: t.hosts + live.hosts,
                    hosts_reached: t.hosts_reached + live.reached.len(),
                    hosts_failed: t.hosts_failed + live.failed.len(),
                    counts,
                    errors: t.errors,
                    warnings: t.warnings,
                    verify: t.verify,
                    logs: logs.iter().map(|d| d.display().to_string()).collect(),
                    error,
                    duration_ms: t.start.map(|s| s.elapsed().as_millis() as u64).unwrap_or(0),
                };
                json::line(&Event::Summary(summary));
            }
        }
        outcome
    }

    /// A command line clap refused (exit 64): its message on stderr, and with
    /// `--output json` among the arguments, the summary line.
    /// A command line clap refused: its message on stderr, and with `--output json` a
    /// summary whose `error` is that message (what was wrong, without the usage lines).
    pub fn usage_error(e: &clap::Error, json: bool) {
        let _ = e.print();
        if json {
            let text = e.render().to_string();
            let said: Vec<&str> = text
                .lines()
                .map(str::trim)
                .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
                .filter(|l| !l.is_empty())
                .collect();
            let said = said.join(" ");
            let said = said.strip_prefix("error: ").unwrap_or(&said).to_string();
            Output::new(OutputFormat::Json, None).finish_as(Outcome::UsageError, Some(said));
        }
    }

    /// A template render stopped at its memory bound (`template::budget`): what it was and
    /// that no host was changed, on stderr (the process ends next).
    pub fn template_stopped(s: &kwin_engine::template::budget::Stop<'_>) {
        eprintln!(
            "error[template]: a template needs more than {} MiB of memory to render (it asked for {} MiB), so kwin stopped before changing any host; the template begins: {}",
            kwin_engine::template::budget::HARD >> 20,
            s.bytes.div_ceil(1 << 20),
            kwin_engine::quote::terminal_text(s.template)
        );
    }

    fn human(&self) -> bool {
        self.format == OutputFormat::Human
    }

    /// Every diagnostic: human on stderr (`file:line:col: error[code]: …`), JSON one object
    /// per line on stdout.
    pub fn diagnostics(&self, diags: &Diagnostics) {
        {
            let mut t = self.tally();
            t.errors += diags.errors().count();
            t.warnings += diags.warnings();
        }
        match self.format {
            OutputFormat::Human => {
                let mut err = std::io::stderr().lock();
                for d in &diags.0 {
                    let _ = writeln!(err, "{}", terminal(&format!("{d}")));
                }
            }
            OutputFormat::Json => {
                for d in &diags.0 {
                    json::line(&Event::Diagnostic(d.clone()));
                }
            }
        }
    }

    /// The warnings of a plan about to run (diagnostics, in either form).
    pub fn warnings(&self, diags: &Diagnostics) {
        if !diags.is_empty() {
            self.diagnostics(diags);
        }
    }

    /// `kwin validate`'s last line (human form only; JSON ends with the summary, which has
    /// the counts): `plan.toml: ok (0 warnings)` on stdout, or the counts on stderr when
    /// there are errors.
    pub fn validate_summary(&self, path: &Path, errors: usize, warnings: usize) {
        if !self.human() {
            return;
        }
        if errors > 0 {
            let _ = writeln!(
                std::io::stderr().lock(),
                "{}",
                terminal(&format!(
                    "{}: {}, {}",
                    path.display(),
                    plural(errors, "error"),
                    plural(warnings, "warning")
                ))
            );
        } else {
            let _ = writeln!(
                std::io::stdout().lock(),
                "{}",
                terminal(&format!(
                    "{}: ok ({})",
                    path.display(),
                    plural(warnings, "warning")
                ))
            );
        }
    }

    /// A document on stdout as it is (the graph as DOT or text, the plan's JSON Schema).
    pub fn text(&self, s: &str) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(s.as_bytes());
        let _ = out.flush();
    }

    /// `kwin checksums --write FILE`: where the table went (stderr).
    pub fn pins_written(&self, file: &Path, files: usize) {
        let _ = writeln!(
            std::io::stderr().lock(), "{}", terminal(&format!("checksums: {files} pinned in {} (paste it into the plan of the controller without internet)",
            file.display())));
    }

    /// "there is nothing to do" of `kwin verify` / `kwin reset` on a plan without
    /// `[cluster]` (JSON: a warning event).
    pub fn nothing_to_do(&self, what: &str) {
        let message = format!("the plan has no [cluster]: nothing to {what}");
        match self.format {
            OutputFormat::Human => {
                let _ = writeln!(
                    std::io::stdout().lock(),
                    "{}",
                    terminal(&format!("{what}: {message}"))
                );
            }
            OutputFormat::Json => json::line(&Event::Warning {
                host: None,
                message,
            }),
        }
    }

    /// Artifact checksums fetched on the controller (stderr: JSON output on stdout stays
    /// events only): those read from the upstream checksum files, then those computed from
    /// the artifacts themselves.
    pub fn checksums_fetched(&self, fetched: &[Fetched]) {
        let (hashed, files): (Vec<_>, Vec<_>) = fetched.iter().partition(|f| f.from_artifact);
        let record = kwin_engine::checksums::RECORD_FILE;
        let mut err = std::io::stderr().lock();
        if !files.is_empty() {
            let names: Vec<&str> = files.iter().map(|f| f.file.as_str()).collect();
            let _ = writeln!(
                err, "{}", terminal(&format!("checksums: {} fetched from the upstream checksum files and recorded in .kwin/{record}: {}",
                names.len(),
                names.join(", "))));
        }
        if !hashed.is_empty() {
            let names: Vec<String> = hashed
                .iter()
                .map(|f| {
                    if f.sha512_checked {
                        format!("{} (checked against its SHA-512 file)", f.file)
                    } else {
                        f.file.clone()
                    }
                })
                .collect();
            let _ = writeln!(
                err, "{}", terminal(&format!("checksums: {} computed from the artifacts themselves, downloaded over https on this machine because their upstream publishes no SHA-256 file, and recorded in .kwin/{record}: {}",
                names.len(),
                names.join(", "))));
        }
    }

    /// What a run learned the user should know afterwards (a host key recorded with
    /// `--accept-new-host-keys`), after its summary, on stderr: JSON output still ends with
    /// the summary line.
    pub fn notes(&self, notes: &[String]) {
        let mut err = std::io::stderr().lock();
        for n in notes {
            let _ = writeln!(err, "{}", terminal(&format!("note: {n}")));
        }
    }

    /// The error that ends the command, on stderr.
    pub fn error(&self, e: &anyhow::Error) {
        let _ = writeln!(
            std::io::stderr().lock(),
            "{}",
            terminal(&format!("error: {e:#}"))
        );
    }

    /// `kwin kubeconfig`'s result: the path, context, server and source (never the file's
    /// content: it holds the admin key).
    pub fn kubeconfig_written(&self, k: &KubeconfigWritten<'_>) {
        match self.format {
            OutputFormat::Human => {
                let _ = writeln!(
                    std::io::stdout().lock(),
                    "{}",
                    terminal(&format!(
                        "wrote {} (context {}, server {}, from {}:{})",
                        k.path.display(),
                        k.context,
                        k.server,
                        k.host,
                        k.from
                    ))
                );
            }
            OutputFormat::Json => json::line(&Event::Kubeconfig {
                path: k.path.display().to_string(),
                context: k.context.to_string(),
                server: k.server.to_string(),
                host: k.host.to_string(),
            }),
        }
    }

    /// Ask on the terminal (`prompt` on stderr, one line read from stdin); `Ok(None)` when
    /// stdin is not a terminal, so there is no one to ask.
    pub fn confirm(&self, prompt: &str) -> std::io::Result<Option<String>> {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return Ok(None);
        }
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{}", terminal(prompt));
        let _ = err.flush();
        drop(err);
        let mut answer = String::new();
        stdin.lock().read_line(&mut answer)?;
        Ok(Some(answer))
    }

    /// Render the events of one stage from `rx` on a thread of their own, until the channel
    /// closes (`render.rs`).
    pub fn spawn_renderer(&self, rx: UnboundedReceiver<Event>, how: Render) -> JoinHandle<()> {
        let (format, tty, tally) = (self.format, self.tty, self.tally.clone());
        std::thread::spawn(move || render::render(rx, format, tty, how, &tally))
    }
}
