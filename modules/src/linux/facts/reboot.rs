//! Whether a reboot is pending: which of the marker files the distribution writes exist
//! (`reboot`'s `pending_files`).

use kwin_engine::fact::{Fact, FactError, FactOutput};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;

/// Which of `files` exist: one `pending <path>` line each, after a `kwin: checked` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingFilesFact {
    pub files: Vec<String>,
}

impl Fact for PendingFilesFact {
    type Output = Vec<String>;
    fn key(&self) -> String {
        format!("linux.reboot_pending:{}", self.files.join(":"))
    }
    fn command(&self, shell: Shell) -> String {
        if shell != Shell::Posix {
            return "echo 'linux fact on a non-posix host' >&2; exit 2".into();
        }
        let list = self
            .files
            .iter()
            .map(|f| sh_quote(f))
            .collect::<Vec<_>>()
            .join(" ");
        format!(
            "echo 'kwin: checked'\nfor f in {list}; do if [ -e \"$f\" ] || [ -L \"$f\" ]; then printf 'pending %s\\n' \"$f\"; fi; done"
        )
    }
    fn parse(&self, out: &FactOutput) -> Result<Vec<String>, FactError> {
        if out.exit != 0 {
            return Err(FactError::Command {
                exit: out.exit,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        let text = out.stdout_str()?;
        let mut lines = text.lines();
        if lines.next() != Some("kwin: checked") {
            return Err(FactError::Parse(format!(
                "expected `kwin: checked` first, got {:?}",
                text.lines().next().unwrap_or("")
            )));
        }
        let mut found = Vec::new();
        for l in lines {
            match l.strip_prefix("pending ") {
                Some(p) if self.files.iter().any(|f| f == p) => found.push(p.to_string()),
                _ => return Err(FactError::Parse(format!("unexpected line {l:?}"))),
            }
        }
        Ok(found)
    }
}
