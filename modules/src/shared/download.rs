//! Params of `download` (Linux: `linux/download.rs`, Windows: `windows/download.rs`).

use super::RawMode;

/// Params of `download`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DownloadParams {
    /// Source URL.
    pub url: String,
    /// Absolute destination path.
    pub dest: String,
    /// Expected SHA-256 of the file (64 hex digits).
    pub sha256: String,
    /// Permission bits. Linux only.
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub mode: Option<RawMode>,
    /// Owning user. Linux only.
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub owner: Option<String>,
    /// Owning group. Linux only.
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub group: Option<String>,
    /// Proxy URL (default: the machine `HTTPS_PROXY`, else `HTTP_PROXY`). Windows only.
    #[schemars(extend("x-kwin-shell" = "windows"))]
    pub proxy: Option<String>,
    /// Hosts, domains and CIDRs fetched directly (default: the machine `NO_PROXY`). Windows
    /// only.
    #[schemars(extend("x-kwin-shell" = "windows"))]
    pub no_proxy: Option<Vec<String>>,
    /// Follow a symbolic link at the managed path and manage its target (default `false`: a
    /// link there is refused, since whoever made it chose what root would change). Linux only.
    #[serde(default)]
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub follow: Option<bool>,
}

impl DownloadParams {
    /// The parameters only the Linux module reads, and whether each is set.
    pub(crate) fn linux_fields(&self) -> [(&'static str, bool); 4] {
        [
            ("mode", self.mode.is_some()),
            ("owner", self.owner.is_some()),
            ("group", self.group.is_some()),
            ("follow", self.follow.is_some()),
        ]
    }

    /// The parameters only the Windows module reads, and whether each is set.
    pub(crate) fn windows_fields(&self) -> [(&'static str, bool); 2] {
        [
            ("proxy", self.proxy.is_some()),
            ("no_proxy", self.no_proxy.is_some()),
        ]
    }
}
