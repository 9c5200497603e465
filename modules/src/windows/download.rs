//! `download` (Windows): the host fetches a URL to a file, verified by SHA-256.
//!
//! Parameters: `url`, `dest` (absolute path), `sha256` (64 hex digits, required), `proxy`
//! (optional URL; default: the machine `HTTPS_PROXY`/`HTTP_PROXY` variable if set).
//! No-op when `dest` exists with that SHA-256. Changes: downloads to a temporary file with an
//! unguessable name beside `dest`, checks the hash (a mismatch deletes the temp file and fails
//! with both hashes) and that it is still a plain file, then renames over `dest`. Large artifacts (kubelet.exe, containerd) travel this way, not through WinRM.
//!
//! ```toml
//! [[tasks]]
//! name = "kubelet-exe"
//! module = "download"
//! on = { os = "windows" }
//! params = { url = "https://dl.k8s.io/v1.31.4/bin/windows/amd64/kubelet.exe", dest = 'C:\k\kubelet.exe', sha256 = "…" }
//! ```

use super::facts::{PathFact, PathState};
use super::{check_path, path_resource, step};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    parse_params, Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Touches,
};
use kwin_engine::quote::ps_quote;
use kwin_engine::transport::Shell;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    url: String,
    dest: String,
    sha256: String,
    proxy: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Download {
    url: String,
    dest: String,
    sha256: String,
    proxy: Option<String>,
}

/// Check a SHA-256 parameter; returns it lowercased.
pub(crate) fn check_sha256(field: &str, s: &str) -> Result<String, ParamError> {
    if s.len() == 64 && s.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(s.to_ascii_lowercase())
    } else {
        Err(ParamError::at(field, "expected 64 hex digits (a SHA-256)"))
    }
}

pub(crate) fn check_url(field: &str, u: &str) -> Result<(), ParamError> {
    if (u.starts_with("https://") || u.starts_with("http://")) && !u.contains(['\n', '\r', ' ']) {
        Ok(())
    } else {
        Err(ParamError::at(
            field,
            format!("`{u}` is not an http(s) URL"),
        ))
    }
}

/// Script downloading `url` to `dest` with hash check and atomic rename.
/// The temporary file is `tmp` (a [`crate::temp_name`]) in `dest`'s directory, and is checked
/// to be a plain file (no link or junction put in its place) before the rename.
pub(crate) fn download_script(
    url: &str,
    dest: &str,
    sha256: &str,
    proxy: Option<&str>,
    tmp: &str,
) -> String {
    let proxy_line = match proxy {
        Some(p) => format!("$px = {}", ps_quote(p)),
        None => "$px = [Environment]::GetEnvironmentVariable('HTTPS_PROXY', 'Machine')\nif (-not $px) { $px = [Environment]::GetEnvironmentVariable('HTTP_PROXY', 'Machine') }".to_string(),
    };
    format!(
        "[Net.ServicePointManager]::SecurityProtocol = [Net.SecurityProtocolType]::Tls12\n\
         $u = {u}\n$d = {d}\n$want = '{sha256}'\n{proxy_line}\n\
         $dir = [IO.Path]::GetDirectoryName($d)\n\
         if ($dir -and -not (Test-Path -LiteralPath $dir)) {{ New-Item -ItemType Directory -Force -Path $dir | Out-Null }}\n\
         $t = [IO.Path]::Combine($dir, {tmp})\n\
         $a = @{{ Uri = $u; OutFile = $t; UseBasicParsing = $true }}\n\
         if ($px) {{ $a['Proxy'] = $px }}\n\
         Invoke-WebRequest @a\n\
         $h = (Get-FileHash -LiteralPath $t -Algorithm SHA256).Hash.ToLowerInvariant()\n\
         if ($h -ne $want) {{ Remove-Item -LiteralPath $t -Force; throw \"checksum mismatch for ${{u}}: expected $want, got $h\" }}\n\
         if ((Get-Item -LiteralPath $t -Force).Attributes -band ([IO.FileAttributes]::ReparsePoint -bor [IO.FileAttributes]::Directory)) {{ throw {replaced} }}\n\
         Move-Item -LiteralPath $t -Destination $d -Force",
        u = ps_quote(url),
        d = ps_quote(dest),
        tmp = ps_quote(tmp),
        replaced = ps_quote(&format!(
            "the temporary file for {dest} was replaced by a link or directory; refusing"
        )),
    )
}

impl Download {
    pub fn new(params: &serde_json::Value) -> Result<Self, ParamError> {
        let p: Params = parse_params(params)?;
        check_url("url", &p.url)?;
        check_path("dest", &p.dest)?;
        let sha256 = check_sha256("sha256", &p.sha256)?;
        if let Some(px) = &p.proxy {
            check_url("proxy", px)?;
        }
        Ok(Download {
            url: p.url,
            dest: p.dest,
            sha256,
            proxy: p.proxy,
        })
    }
    fn fact(&self) -> PathFact {
        PathFact {
            path: self.dest.clone(),
            content_limit: 0,
        }
    }
}

impl Module for Download {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&self.fact(), shell)]
    }
    fn reads(&self) -> Vec<String> {
        vec![path_resource(&self.dest)]
    }
    fn plan(&self, facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let st: PathState = facts.get(&self.fact())?;
        if st.dir {
            return Err(ModuleError::Precondition(format!(
                "{} is a directory",
                self.dest
            )));
        }
        if st.exists && st.sha256.as_deref() == Some(self.sha256.as_str()) {
            return Ok(Plan::noop("present with the expected sha256"));
        }
        Ok(Plan::Change(Change {
            action: if st.exists {
                Action::Update
            } else {
                Action::Create
            },
            reason: if st.exists {
                "sha256 differs".into()
            } else {
                "missing".into()
            },
            diff: Some(format!(
                "{}+ {} sha256 {} (from {})",
                st.sha256
                    .as_ref()
                    .map(|h| format!("- {} sha256 {h}\n", self.dest))
                    .unwrap_or_default(),
                self.dest,
                self.sha256,
                self.url
            )),
            steps: vec![step(download_script(
                &self.url,
                &self.dest,
                &self.sha256,
                self.proxy.as_deref(),
                &crate::temp_name(ctx.nonce, &self.dest),
            ))],
            touches: Touches::Resources(vec![path_resource(&self.dest)]),
        }))
    }
}
