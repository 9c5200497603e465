//! Params of `archive` (Linux: `linux/archive.rs`, Windows: `windows/archive.rs`).

/// Params of `archive`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArchiveParams {
    /// The archive on the host (required on Windows; on Linux give `src` or `url`).
    pub src: Option<String>,
    /// URL of a tarball, fetched to a temporary file (needs `sha256`). Linux only.
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub url: Option<String>,
    /// Expected SHA-256 of the archive (required on Windows and with `url`).
    pub sha256: Option<String>,
    /// Directory to extract into.
    pub dest: String,
    /// Leading path components to drop (`tar --strip-components`). Linux only.
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub strip_components: Option<u32>,
    /// Path whose existence means the archive was extracted. Linux only.
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub creates: Option<String>,
    /// Follow a symbolic link at the managed path and manage its target (default `false`: a
    /// link there is refused, since whoever made it chose what root would change). Linux only.
    #[serde(default)]
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub follow: Option<bool>,
}

impl ArchiveParams {
    /// The parameters only the Linux module reads, and whether each is set.
    pub(crate) fn linux_fields(&self) -> [(&'static str, bool); 4] {
        [
            ("url", self.url.is_some()),
            ("strip_components", self.strip_components.is_some()),
            ("creates", self.creates.is_some()),
            ("follow", self.follow.is_some()),
        ]
    }
}
