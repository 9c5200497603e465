//! Params of `reboot` (Linux: `linux/reboot.rs`, Windows: `windows/reboot.rs`).

use kwin_engine::module::{ParamError, RebootSpec};

/// What a Windows reboot does on a joined node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnJoined {
    /// No restart: a warning naming what is pending.
    #[default]
    Report,
    /// No restart here: the step says so, and its output `pending` asks the recipe that
    /// drains the node, restarts it (a `reboot` step with `only_if`) and uncordons it.
    Drain,
}

/// Params of `reboot`.
#[derive(Debug, Clone, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RebootParams {
    /// Seconds to wait for the host to go away (default 600).
    pub down_timeout: Option<u64>,
    /// Seconds to wait for it to answer again (default 1800).
    pub up_timeout: Option<u64>,
    /// Absolute paths: a restart is pending while any of them exists (default
    /// `["/var/run/reboot-required"]`). Linux only.
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub pending_files: Option<Vec<String>>,
    /// A Windows feature (`Containers`): restart only when its install waits for it. Windows
    /// only.
    #[schemars(extend("x-kwin-shell" = "windows"))]
    pub feature: Option<String>,
    /// A path whose existence means the node joined the cluster: never restart it then.
    /// Windows only.
    #[schemars(extend("x-kwin-shell" = "windows"))]
    pub joined: Option<String>,
    /// What to do on a joined node with a reboot pending: `report` (default: a warning) or
    /// `drain` (left to a drain, a restart and an uncordon that read this step's output
    /// `pending`). Windows only.
    #[schemars(extend("x-kwin-shell" = "windows"))]
    pub on_joined: Option<OnJoined>,
    /// The name of one of the task's `inputs`: restart only while that input is `true` (and
    /// a reboot is pending), e.g. `pending` of the install path's reboot step after the node
    /// was drained. Windows only.
    #[schemars(extend("x-kwin-shell" = "windows"))]
    pub only_if: Option<String>,
}

impl RebootParams {
    /// The timeouts (defaults 600 s down, 1800 s up; zero refused).
    pub(crate) fn spec(&self) -> Result<RebootSpec, ParamError> {
        let spec = RebootSpec {
            down_timeout_secs: self.down_timeout.unwrap_or(600),
            up_timeout_secs: self.up_timeout.unwrap_or(1800),
        };
        if spec.down_timeout_secs == 0 || spec.up_timeout_secs == 0 {
            return Err(ParamError::new("timeouts must be at least 1 second"));
        }
        Ok(spec)
    }

    /// The parameters only the Windows module reads, and whether each is set.
    pub(crate) fn windows_fields(&self) -> [(&'static str, bool); 4] {
        [
            ("feature", self.feature.is_some()),
            ("joined", self.joined.is_some()),
            ("on_joined", self.on_joined.is_some()),
            ("only_if", self.only_if.is_some()),
        ]
    }
}
