//! Params of `file` (Linux: `linux/file.rs`, Windows: `windows/file.rs`).

use super::{RawMode, State};
use kwin_engine::quote::ps_quote;
use sha2::{Digest, Sha256};

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
    /// Follow a symbolic link at `path` and manage its target (default `false`: a link there
    /// is refused, since whoever made it chose what root would write). Linux only.
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub follow: Option<bool>,
}

impl FileParams {
    /// The parameters only the Linux module reads, and whether each is set.
    pub(crate) fn linux_fields(&self) -> [(&'static str, bool); 5] {
        [
            ("mode", self.mode.is_some()),
            ("owner", self.owner.is_some()),
            ("group", self.group.is_some()),
            ("make_parents", self.make_parents.is_some()),
            ("follow", self.follow.is_some()),
        ]
    }
}

// The PowerShell writer of a file (Windows `file`, and the records other modules write on
// Windows hosts, e.g. `kubeadm_upgrade`).

/// Script that writes `content` to `path` atomically: a new file beside it, named by
/// [`crate::temp_name`] (unguessable: nothing can be planted there first) and created with
/// `FileMode.CreateNew` ("If the file already exists, an IOException exception is thrown",
/// learn.microsoft.com/dotnet/api/system.io.filemode, .NET Framework 4.x as in Windows
/// PowerShell 5.1), then checked to be a plain file
/// holding exactly `content` (not a reparse point: a link or junction put in its place) and
/// renamed over `path`.
pub(crate) fn write_script(path: &str, content: &[u8], nonce: &str) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(content);
    format!(
        "$p = {p}\n\
         $d = [IO.Path]::GetDirectoryName($p)\n\
         if ($d -and -not (Test-Path -LiteralPath $d)) {{ New-Item -ItemType Directory -Force -Path $d | Out-Null }}\n\
         $t = [IO.Path]::Combine($d, {tmp})\n\
         $b = [Convert]::FromBase64String('{b64}')\n\
         $f = [IO.File]::Open($t, [IO.FileMode]::CreateNew, [IO.FileAccess]::Write, [IO.FileShare]::None)\n\
         try {{ $f.Write($b, 0, $b.Length) }} finally {{ $f.Dispose() }}\n\
         {check}\n\
         Move-Item -LiteralPath $t -Destination $p -Force",
        p = ps_quote(path),
        tmp = ps_quote(&crate::temp_name(nonce, path)),
        check = temp_check("$t", &hex::encode(Sha256::digest(content)), path),
    )
}

/// PowerShell that throws unless the file named by `var` is a plain file (no reparse point, no
/// directory) whose SHA-256 is `sha256`: what a step created is what it moves into place.
pub(crate) fn temp_check(var: &str, sha256: &str, shown: &str) -> String {
    format!(
        "$i = Get-Item -LiteralPath {var} -Force\n\
         if ($i.Attributes -band ([IO.FileAttributes]::ReparsePoint -bor [IO.FileAttributes]::Directory)) {{ throw {} }}\n\
         if ((Get-FileHash -LiteralPath {var} -Algorithm SHA256).Hash.ToLowerInvariant() -ne '{sha256}') {{ Remove-Item -LiteralPath {var} -Force; throw {} }}",
        ps_quote(&format!(
            "the temporary file for {shown} was replaced by a link or directory; refusing"
        )),
        ps_quote(&format!(
            "the temporary file for {shown} does not hold what was written; refusing"
        )),
    )
}
