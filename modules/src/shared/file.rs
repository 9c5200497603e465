//! Params of `file` (Linux: `linux/file.rs`, Windows: `windows/file.rs`).

use super::{RawMode, State};

/// Params of `file`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileParams {
    /// Absolute path of the file.
    pub path: String,
    /// Whole desired content (required on Windows when present); on Linux, without it only
    /// existence and attributes are managed.
    pub content: Option<String>,
    /// Permission bits (`"0644"`). Linux only.
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub mode: Option<RawMode>,
    /// Owning user (name or uid). Linux only.
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub owner: Option<String>,
    /// Owning group (name or gid). Linux only.
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub group: Option<String>,
    /// `present` (default) or `absent`.
    #[serde(default)]
    pub state: State,
    /// Create missing parent directories (default `true`). Linux only (Windows always does).
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub make_parents: Option<bool>,
}

impl FileParams {
    /// The parameters only the Linux module reads, and whether each is set.
    pub(crate) fn linux_fields(&self) -> [(&'static str, bool); 4] {
        [
            ("mode", self.mode.is_some()),
            ("owner", self.owner.is_some()),
            ("group", self.group.is_some()),
            ("make_parents", self.make_parents.is_some()),
        ]
    }
}
