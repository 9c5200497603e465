//! Params of `command` (Linux: `linux/command.rs`, Windows: `windows/command.rs`), and the
//! rules both shells' commands follow.

use kwin_engine::module::ParamError;

/// Params of `command`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("x-kwin-instead" = {
    "cmd": "kwin's `command` takes the command in `run` (Ansible's `cmd`)",
    "argv": "write the command line in `run`",
    "chdir": "change directory in `run` itself: run = \"cd /dir && ...\""
}))]
pub struct CommandParams {
    /// The command (sh on Linux, PowerShell on Windows).
    #[schemars(extend("x-kwin-code" = true))]
    pub run: String,
    /// Absolute path: skip when it exists.
    pub creates: Option<String>,
    /// Absolute path: skip when it does not exist.
    pub removes: Option<String>,
    /// Condition: skip when it succeeds.
    #[schemars(extend("x-kwin-code" = true))]
    pub unless: Option<String>,
    /// Condition: skip unless it succeeds.
    #[schemars(extend("x-kwin-code" = true))]
    pub onlyif: Option<String>,
    /// Absolute paths the command changes (default: the `creates` path on Linux, else
    /// anything).
    pub changes: Option<Vec<String>>,
}

impl CommandParams {
    /// The checks both shells make, with `abs` the shell's absolute-path check: a command,
    /// at least one guard, non-empty conditions, absolute paths.
    pub(crate) fn check(
        &self,
        abs: fn(&str, &str) -> Result<(), ParamError>,
    ) -> Result<(), ParamError> {
        if self.run.trim().is_empty() {
            return Err(ParamError::at("run", "`run` is empty"));
        }
        for (name, v) in [("creates", &self.creates), ("removes", &self.removes)] {
            if let Some(v) = v {
                abs(name, v)?;
            }
        }
        for (name, v) in [("unless", &self.unless), ("onlyif", &self.onlyif)] {
            if v.as_deref().is_some_and(|s| s.trim().is_empty()) {
                return Err(ParamError::at(name, format!("`{name}` is empty")));
            }
        }
        for (i, c) in self.changes.iter().flatten().enumerate() {
            abs(&format!("changes.{i}"), c)?;
        }
        let guarded = [&self.creates, &self.removes, &self.unless, &self.onlyif]
            .iter()
            .any(|g| g.is_some());
        if !guarded {
            return Err(ParamError::new(
                "`command` needs a guard (`creates`, `removes`, `unless` or `onlyif`) so that a second run does nothing",
            ));
        }
        Ok(())
    }
}
