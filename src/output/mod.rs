//! The one owner of the terminal: everything `kwin` prints, reads from the terminal or writes
//! to stdout/stderr goes through [`Output`]. Nothing else in `src/` prints (the crate denies
//! the print lints outside this module; `tests/layers.rs` also fails on any print or
//! `std::io::{stdout, stderr, stdin}` elsewhere in `src/`).
//!
//! Streams: `--output json` keeps stdout for JSON lines only (events, diagnostics, the
//! kubeconfig line); notes, warnings kwin gives before a run starts, and errors go to stderr.
//! The human form prints results on stdout and diagnostics, notes and errors on stderr.
//!
//! A run's events are rendered on their own thread ([`Output::spawn_renderer`]): `human.rs`
//! (progress bars on a TTY, plain lines otherwise, summary tables), `json.rs` (one JSON line
//! per event). Every text in events was scrubbed by the engine.

mod human;
mod json;

use crate::OutputFormat;
use kwin_engine::diag::Diagnostics;
use kwin_engine::event::{Event, Mode};
use kwin_engine::pipeline::Fetched;
use serde_json::json;
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::thread::JoinHandle;
use tokio::sync::mpsc::UnboundedReceiver;

/// How `kwin` prints: the format chosen, and whether stdout is a terminal (detected once).
#[derive(Debug, Clone, Copy)]
pub struct Output {
    format: OutputFormat,
    tty: bool,
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
    pub fn new(format: OutputFormat) -> Output {
        Output {
            format,
            tty: std::io::stdout().is_terminal(),
        }
    }

    fn human(&self) -> bool {
        self.format == OutputFormat::Human
    }

    /// Every diagnostic: human on stderr (`file:line:col: error[code]: …`), JSON one object
    /// per line on stdout.
    pub fn diagnostics(&self, diags: &Diagnostics) {
        match self.format {
            OutputFormat::Human => {
                let mut err = std::io::stderr().lock();
                for d in &diags.0 {
                    let _ = writeln!(err, "{d}");
                }
            }
            OutputFormat::Json => {
                let mut out = std::io::stdout().lock();
                for d in &diags.0 {
                    if let Ok(s) = serde_json::to_string(d) {
                        let _ = writeln!(out, "{s}");
                    }
                }
            }
        }
    }

    /// The warnings of a plan about to run: shown in the human form only (JSON output of a
    /// run is its events).
    pub fn warnings(&self, diags: &Diagnostics) {
        if self.human() && !diags.is_empty() {
            self.diagnostics(diags);
        }
    }

    /// `kwin validate`'s last line (human form only): `plan.toml: ok (0 warnings)` on stdout,
    /// or the counts on stderr when there are errors.
    pub fn validate_summary(&self, path: &Path, errors: usize, warnings: usize) {
        if !self.human() {
            return;
        }
        let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        if errors > 0 {
            let _ = writeln!(
                std::io::stderr().lock(),
                "{}: {}, {}",
                path.display(),
                plural(errors, "error"),
                plural(warnings, "warning")
            );
        } else {
            let _ = writeln!(
                std::io::stdout().lock(),
                "{}: ok ({})",
                path.display(),
                plural(warnings, "warning")
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
            std::io::stderr().lock(),
            "checksums: {files} pinned in {} (paste it into the plan of the controller without internet)",
            file.display()
        );
    }

    /// "there is nothing to do" of `kwin verify` / `kwin reset` on a plan without
    /// `[cluster]` (human form only).
    pub fn nothing_to_do(&self, what: &str) {
        if self.human() {
            let _ = writeln!(
                std::io::stdout().lock(),
                "{what}: the plan has no [cluster]: nothing to {what}"
            );
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
                err,
                "checksums: {} fetched from the upstream checksum files and recorded in .kwin/{record}: {}",
                names.len(),
                names.join(", ")
            );
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
                err,
                "checksums: {} computed from the artifacts themselves, downloaded over https on this machine because their upstream publishes no SHA-256 file, and recorded in .kwin/{record}: {}",
                names.len(),
                names.join(", ")
            );
        }
    }

    /// What a run learned the user should know afterwards (a host key recorded with
    /// `--accept-new-host-keys`), after its summary, on stderr: JSON output still ends with
    /// the summary line.
    pub fn notes(&self, notes: &[String]) {
        let mut err = std::io::stderr().lock();
        for n in notes {
            let _ = writeln!(err, "note: {n}");
        }
    }

    /// A warning given outside a run's events, on stderr.
    pub fn warning(&self, message: &str) {
        let _ = writeln!(std::io::stderr().lock(), "warning: {message}");
    }

    /// The error that ends the command, on stderr.
    pub fn error(&self, e: &anyhow::Error) {
        let _ = writeln!(std::io::stderr().lock(), "error: {e:#}");
    }

    /// `kwin kubeconfig`'s result: the path, context, server and source (never the file's
    /// content: it holds the admin key).
    pub fn kubeconfig_written(&self, k: &KubeconfigWritten<'_>) {
        let mut out = std::io::stdout().lock();
        let _ = match self.format {
            OutputFormat::Human => writeln!(
                out,
                "wrote {} (context {}, server {}, from {}:{})",
                k.path.display(),
                k.context,
                k.server,
                k.host,
                k.from
            ),
            OutputFormat::Json => writeln!(
                out,
                "{}",
                json!({
                    "type": "kubeconfig",
                    "path": k.path.display().to_string(),
                    "context": k.context,
                    "server": k.server,
                    "host": k.host,
                })
            ),
        };
    }

    /// Ask on the terminal (`prompt` on stderr, one line read from stdin); `Ok(None)` when
    /// stdin is not a terminal, so there is no one to ask.
    pub fn confirm(&self, prompt: &str) -> std::io::Result<Option<String>> {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return Ok(None);
        }
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{prompt}");
        let _ = err.flush();
        drop(err);
        let mut answer = String::new();
        stdin.lock().read_line(&mut answer)?;
        Ok(Some(answer))
    }

    /// Render the events of one run from `rx` on a thread of their own, until the channel
    /// closes; `what` names the run in the human output (`apply: 3 hosts, …`).
    pub fn spawn_renderer(
        &self,
        rx: UnboundedReceiver<Event>,
        mode: Mode,
        what: &'static str,
    ) -> JoinHandle<()> {
        let (format, tty) = (self.format, self.tty);
        std::thread::spawn(move || match format {
            OutputFormat::Json => json::render(rx),
            OutputFormat::Human => human::render(rx, mode, tty, what),
        })
    }
}
