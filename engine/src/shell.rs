//! The vocabulary every layer shares about running a script on a host: which [`Shell`] it
//! is written for, and the [`Output`] of one run. Pure data: no IO, no imports from the
//! rest of the engine. `transport` re-exports both for code that reaches them through it.

use std::fmt;

/// The language of scripts a host runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Shell {
    /// `/bin/sh` (POSIX); scripts may rely on coreutils.
    Posix,
    /// Windows PowerShell 5.1 (`powershell.exe`).
    PowerShell,
}

/// Result of one script run.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Output {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit: i32,
}

impl fmt::Debug for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Output")
            .field("stdout_bytes", &self.stdout.len())
            .field("stderr_bytes", &self.stderr.len())
            .field("exit", &self.exit)
            .finish()
    }
}

impl Output {
    pub fn success(&self) -> bool {
        self.exit == 0
    }
}

/// Largest stdout or stderr kwin keeps from one command (bounded memory).
pub const MAX_OUTPUT: usize = 64 * 1024 * 1024;
