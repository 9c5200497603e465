//! Per-host logs: `.kwin/logs/<run-id>/<host>.log`, every remote command and its output.
//!
//! Every line written has passed the run's scrubber, and shows a host's control characters as
//! escapes (`quote::terminal_text`). One entry per remote operation, each
//! starting with a header line `[+S.mmm] <op> ...` at column 0; script and output lines are
//! indented, so `grep -c '^\[.*\] run #'` counts round trips.

use crate::secret::Scrubber;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

pub struct HostLog {
    file: Mutex<Option<File>>,
    /// Where the entries go; `None` for a log that writes nothing.
    path: Option<PathBuf>,
    scrubber: Scrubber,
    start: Instant,
}

impl HostLog {
    /// Log to `dir/<host>.log` (0600). On error, returns the log that drops everything and
    /// the error text (the caller warns once).
    pub fn open(dir: &Path, host: &str, scrubber: Scrubber) -> (HostLog, Option<String>) {
        let path = dir.join(format!("{host}.log"));
        let (file, err) =
            match crate::fs::private_dir(dir).and_then(|_| crate::fs::private_file_new(&path)) {
                Ok(f) => (Some(f), None),
                Err(e) => (None, Some(format!("cannot write {}: {e}", path.display()))),
            };
        let written = file.is_some().then(|| path.clone());
        (
            HostLog {
                file: Mutex::new(file),
                path: written,
                scrubber,
                start: Instant::now(),
            },
            err,
        )
    }

    /// A log that writes nothing.
    pub fn none(scrubber: Scrubber) -> HostLog {
        HostLog {
            file: Mutex::new(None),
            path: None,
            scrubber,
            start: Instant::now(),
        }
    }

    /// The log file, when there is one.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn scrubber(&self) -> &Scrubber {
        &self.scrubber
    }

    /// Write one entry: a header line and indented blocks (label, text).
    pub fn entry(&self, header: &str, blocks: &[(&str, &[u8])]) {
        let mut guard = match self.file.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let Some(f) = guard.as_mut() else {
            return;
        };
        let t = self.start.elapsed();
        // Line by line through a buffer: an entry can be as large as the output a command
        // may keep, and is not built a second time in memory.
        let mut w = std::io::BufWriter::with_capacity(64 * 1024, f);
        let mut write = || -> std::io::Result<()> {
            writeln!(
                w,
                "[+{}.{:03}s] {}",
                t.as_secs(),
                t.subsec_millis(),
                crate::quote::terminal_text(&self.scrubber.scrub(header))
            )?;
            for (label, bytes) in blocks {
                if bytes.is_empty() {
                    continue;
                }
                let text = self.scrubber.scrub_bytes_cow(bytes);
                for line in text.lines() {
                    w.write_all(b"    ")?;
                    w.write_all(label.as_bytes())?;
                    // Read with `cat`, a log is a terminal's text too: a host's control
                    // characters show as escapes.
                    w.write_all(crate::quote::terminal_text(line).as_bytes())?;
                    w.write_all(b"\n")?;
                }
            }
            w.flush()
        };
        // A log that cannot be written is not a reason to stop converging hosts.
        let _ = write();
    }
}
