//! Small probes: which commands exist, and the outcome of a user's guard condition.

use super::{kv_get, kv_lines, ok_stdout};
use kwin_engine::fact::{Fact, FactError, FactOutput};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;

/// Which of the named commands are on `PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandsFact {
    pub names: Vec<String>,
}

impl Fact for CommandsFact {
    /// The names that were found, in the asked order.
    type Output = Vec<String>;

    fn key(&self) -> String {
        format!("commands:{}", self.names.join(","))
    }

    fn command(&self, _shell: Shell) -> String {
        let mut s = String::new();
        for n in &self.names {
            let q = sh_quote(n);
            s.push_str(&format!(
                "if command -v {q} >/dev/null 2>&1; then echo {q}=yes; else echo {q}=no; fi\n"
            ));
        }
        s
    }

    fn parse(&self, out: &FactOutput) -> Result<Vec<String>, FactError> {
        let kv = kv_lines(ok_stdout(out)?)?;
        self.names
            .iter()
            .filter_map(|n| match kv_get(&kv, n) {
                Some("yes") => Some(Ok(n.clone())),
                Some("no") => None,
                _ => Some(Err(FactError::Parse(format!("no answer for `{n}`")))),
            })
            .collect()
    }
}

/// Runs a user's condition (`sh -c`, output discarded, stdin closed) and reports whether it
/// exited 0. The condition must be read-only; kwin runs it at every probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardFact {
    pub code: String,
}

impl Fact for GuardFact {
    type Output = bool;

    fn key(&self) -> String {
        format!("guard:{}", self.code)
    }

    fn command(&self, _shell: Shell) -> String {
        format!(
            "{}echo \"exit=$?\"",
            crate::private_text::sh_code(&self.code, ">/dev/null 2>&1")
        )
    }

    fn parse(&self, out: &FactOutput) -> Result<bool, FactError> {
        parse_guard(ok_stdout(out)?)
    }
}

/// Parse [`GuardFact`]'s output: `exit=N`.
pub fn parse_guard(text: &str) -> Result<bool, FactError> {
    let kv = kv_lines(text)?;
    match kv_get(&kv, "exit").map(str::parse::<i32>) {
        Some(Ok(code)) => Ok(code == 0),
        _ => Err(FactError::Parse(format!(
            "bad guard answer `{}`",
            text.trim()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::super::out;
    use super::*;

    #[test]
    fn commands() {
        let f = CommandsFact {
            names: vec!["curl".into(), "wget".into()],
        };
        assert_eq!(f.key(), "commands:curl,wget");
        assert_eq!(
            f.parse(&out("curl=no\nwget=yes\n", 0)),
            Ok(vec!["wget".to_string()])
        );
        assert!(f.parse(&out("curl=no\n", 0)).is_err());
    }

    #[test]
    fn guards() {
        assert_eq!(parse_guard("exit=0\n"), Ok(true));
        assert_eq!(parse_guard("exit=1\n"), Ok(false));
        assert_eq!(parse_guard("exit=127\n"), Ok(false));
        assert!(parse_guard("").is_err());
        assert!(parse_guard("exit=x\n").is_err());
    }
}
