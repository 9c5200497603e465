//! Params of `directory` (Linux: `linux/directory.rs`, Windows: `windows/directory.rs`).

use super::{RawMode, State};

/// Params of `directory`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DirectoryParams {
    /// Absolute path of the directory.
    pub path: String,
    /// Permission bits of the directory itself (`"0755"`). Linux only.
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub mode: Option<RawMode>,
    /// Owning user (name or uid). Linux only.
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub owner: Option<String>,
    /// Owning group (name or gid). Linux only.
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub group: Option<String>,
    /// `present` (default) or `absent` (removed with everything in it).
    #[serde(default)]
    pub state: State,
    /// Follow a symbolic link at the managed path and manage its target (default `false`: a
    /// link there is refused, since whoever made it chose what root would change). Linux only.
    #[serde(default)]
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub follow: Option<bool>,
}

impl DirectoryParams {
    /// The parameters only the Linux module reads, and whether each is set.
    pub(crate) fn linux_fields(&self) -> [(&'static str, bool); 4] {
        [
            ("mode", self.mode.is_some()),
            ("owner", self.owner.is_some()),
            ("group", self.group.is_some()),
            ("follow", self.follow.is_some()),
        ]
    }
}
