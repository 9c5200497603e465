//! `file` (Windows): a file with exact content, or no file.
//!
//! Parameters: `path` (absolute Windows path), `content` (text, written as UTF-8 bytes exactly
//! as given, no BOM, no newline conversion), `state` = "present" (default) | "absent".
//! No-op when the file's SHA-256 equals the content's. Changes: writes a new temporary file with
//! an unguessable name beside the target, checks it is still that plain file with that content,
//! and renames it over (atomic on NTFS); creates missing parent directories.
//!
//! ```toml
//! [[tasks]]
//! name = "kubelet-env"
//! module = "file"
//! on = { os = "windows" }
//! params = { path = 'C:\k\kubelet.env', content = "KUBELET_EXTRA_ARGS=--v=2\r\n" }
//! ```

use super::facts::{PathFact, PathState};
use super::{check_path, path_resource, step, State};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    parse_params, Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::quote::ps_quote;
use kwin_engine::transport::Shell;
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// Files up to this size are embedded in the step script; larger ones are uploaded.
const EMBED_LIMIT: usize = 256 * 1024;
/// Current content is read back for a diff up to this size.
const DIFF_LIMIT: u64 = 256 * 1024;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Params {
    path: String,
    content: Option<String>,
    #[serde(default)]
    state: State,
}

/// The JSON Schema of the parameters (what the registry exposes for docs and tests).
pub fn params_schema() -> schemars::Schema {
    schemars::schema_for!(Params)
}

#[derive(Debug, Clone)]
pub struct File {
    path: String,
    content: Option<Vec<u8>>,
    state: State,
}

impl File {
    pub fn new(params: &serde_json::Value) -> Result<Self, ParamError> {
        let p: Params = parse_params(params)?;
        check_path("path", &p.path)?;
        if p.state == State::Present && p.content.is_none() {
            return Err(ParamError::at(
                "content",
                "`content` is required when state is present",
            ));
        }
        Ok(File {
            path: p.path,
            content: p.content.map(String::into_bytes),
            state: p.state,
        })
    }

    fn fact(&self) -> PathFact {
        PathFact {
            path: self.path.clone(),
            content_limit: DIFF_LIMIT,
        }
    }
}

/// Unified diff of two byte strings (lossy UTF-8), or a size/hash note for binary content.
pub(crate) fn content_diff(path: &str, old: Option<&[u8]>, new: &[u8]) -> String {
    let old_text = old.map(String::from_utf8_lossy).unwrap_or_default();
    let new_text = String::from_utf8_lossy(new);
    similar::TextDiff::from_lines(old_text.as_ref(), new_text.as_ref())
        .unified_diff()
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}

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

impl Module for File {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&self.fact(), shell)]
    }

    fn reads(&self) -> Vec<String> {
        vec![path_resource(&self.path)]
    }

    fn plan(&self, facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let st: PathState = facts.get(&self.fact())?;
        let touches = Touches::Resources(vec![path_resource(&self.path)]);
        match (&self.state, &self.content) {
            (State::Absent, _) => {
                if !st.exists {
                    return Ok(Plan::noop("absent"));
                }
                if st.dir {
                    return Err(ModuleError::Precondition(format!(
                        "{} is a directory, not a file",
                        self.path
                    )));
                }
                Ok(Plan::Change(Change {
                    action: Action::Delete,
                    reason: "present".into(),
                    diff: Some(content_diff(&self.path, st.content().as_deref(), b"")),
                    steps: vec![step(format!(
                        "Remove-Item -LiteralPath {} -Force",
                        ps_quote(&self.path)
                    ))],
                    touches,
                }))
            }
            (State::Present, Some(content)) => {
                if st.dir {
                    return Err(ModuleError::Precondition(format!(
                        "{} is a directory, not a file",
                        self.path
                    )));
                }
                let want = hex::encode(Sha256::digest(content));
                if st.exists && st.sha256.as_deref() == Some(want.as_str()) {
                    return Ok(Plan::noop("content matches"));
                }
                let (action, reason) = if st.exists {
                    (Action::Update, "content differs")
                } else {
                    (Action::Create, "missing")
                };
                let steps = if content.len() <= EMBED_LIMIT {
                    vec![step(write_script(&self.path, content, ctx.nonce))]
                } else {
                    vec![Step::Put {
                        path: self.path.clone(),
                        content: content.clone(),
                        mode: None,
                    }]
                };
                Ok(Plan::Change(Change {
                    action,
                    reason: reason.into(),
                    diff: Some(content_diff(&self.path, st.content().as_deref(), content)),
                    steps,
                    touches,
                }))
            }
            (State::Present, None) => {
                Err(ModuleError::Unsupported("file: no content given".into()))
            }
        }
    }
}
