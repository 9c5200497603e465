//! [`PathExists`]: whether something is at a path — the question a step guard
//! (`if_exists` / `unless_exists`, `module/guard.rs`) asks in the probe.

use super::{Fact, FactError, FactOutput, PathQuery, PathRead};
use crate::quote::{ps_quote, sh_quote};
use crate::shell::Shell;

/// Whether something is at a path (a dangling link counts as nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathExists {
    pub path: String,
}

impl Fact for PathExists {
    type Output = bool;

    fn key(&self) -> String {
        format!("guard.exists:{}", self.path)
    }

    /// POSIX: the probe's path readers answer it (`type=<kind>`, see `fact::paths`); this
    /// command prints the same first line when it runs alone. Windows: `Test-Path
    /// -LiteralPath` (Windows PowerShell 5.1, Microsoft.PowerShell.Management; PowerShell-Docs
    /// `reference/5.1/Microsoft.PowerShell.Management/Test-Path.md` @ `27138b21b`).
    fn command(&self, shell: Shell) -> String {
        match shell {
            Shell::Posix => format!(
                "if [ -e {p} ]; then echo type=present; elif [ -L {p} ]; then echo type=dangling; else echo type=absent; fi",
                p = sh_quote(&self.path)
            ),
            Shell::PowerShell => format!(
                "if (Test-Path -LiteralPath {}) {{ 'type=present' }} else {{ 'type=absent' }}",
                ps_quote(&self.path)
            ),
        }
    }

    fn parse(&self, out: &FactOutput) -> Result<bool, FactError> {
        let text = out.stdout_str()?;
        let kind = text
            .lines()
            .find_map(|l| l.trim_end_matches('\r').strip_prefix("type="))
            .ok_or_else(|| {
                FactError::Parse(format!("no `type=` line for {}: {text}", self.path))
            })?;
        Ok(!matches!(kind, "absent" | "dangling"))
    }

    fn path_query(&self) -> Option<PathQuery> {
        Some(PathQuery {
            path: self.path.clone(),
            read: PathRead::Meta,
        })
    }
}
