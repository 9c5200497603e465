//! `download` (Windows): the host fetches a URL to a file, verified by SHA-256.
//!
//! Parameters: `url`, `dest` (absolute path), `sha256` (64 hex digits, required), `proxy`
//! (optional URL; default: the machine `HTTPS_PROXY` variable, else `HTTP_PROXY`, if set),
//! `no_proxy` (optional list of hosts, domains and CIDRs; default: the machine `NO_PROXY`
//! variable). A URL whose host `no_proxy` matches (curl's rules, see `no_proxy.rs`) is fetched
//! directly; the plan says which way each download goes. The machine variables are read as
//! facts (re-read after an `env_var` step changed them), so the decision is made, and shown,
//! before anything runs.
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

use super::facts::{EnvVarFact, EnvVarState, PathFact, PathState};
use super::no_proxy::{matching_entry, url_host};
use super::step;
use crate::paths::{windows_abs, windows_resource};
use crate::shared::download::DownloadParams;
use crate::shared::linux_only;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{Change, Ctx, Module, ModuleError, ParamError, Plan, Touches};
use kwin_engine::quote::ps_quote;
use kwin_engine::transport::Shell;

#[derive(Debug, Clone)]
pub struct Download {
    url: String,
    dest: String,
    sha256: String,
    proxy: Option<String>,
    no_proxy: Option<Vec<String>>,
}

/// The machine variables a download's route depends on.
const PROXY_VARS: [&str; 3] = ["HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY"];

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

/// Script downloading `url` to `dest` with hash check and atomic rename, through `proxy` or
/// directly. The temporary file is `tmp` (a [`crate::temp_name`]) in `dest`'s directory, and is
/// checked to be a plain file (no link or junction put in its place) before the rename.
pub(crate) fn download_script(
    url: &str,
    dest: &str,
    sha256: &str,
    proxy: Option<&str>,
    tmp: &str,
) -> String {
    let proxy_line = match proxy {
        Some(p) => format!("$px = {}", ps_quote(p)),
        None => "$px = $null".to_string(),
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

impl Described for Download {
    const NAME: &'static str = "download";
    const DOC: &'static str = "a file fetched from a URL, verified by SHA-256";
    type Params = DownloadParams;

    fn from_params(p: DownloadParams, _shell: Shell) -> Result<Self, ParamError> {
        linux_only("download", &p.linux_fields())?;
        check_url("url", &p.url)?;
        windows_abs("dest", &p.dest)?;
        let sha256 = check_sha256("sha256", &p.sha256)?;
        if let Some(px) = &p.proxy {
            check_url("proxy", px)?;
        }
        if url_host(&p.url).is_none() {
            return Err(ParamError::at("url", format!("`{}` has no host", p.url)));
        }
        Ok(Download {
            url: p.url,
            dest: p.dest,
            sha256,
            proxy: p.proxy,
            no_proxy: p.no_proxy,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![
            FactSample::windows(PathFact {
                path: "C:\\k\\x".into(),
                content_limit: 0,
            }),
            FactSample::windows(EnvVarFact {
                name: "HTTPS_PROXY".into(),
            }),
        ]
    }
}

impl Download {
    fn env_fact(name: &str) -> EnvVarFact {
        EnvVarFact { name: name.into() }
    }
    /// The proxy this download goes through (none: direct), and why, in words.
    fn route(&self, facts: &Facts) -> Result<(Option<String>, String), ModuleError> {
        let env = |n: &str| -> Result<Option<String>, ModuleError> {
            let v: EnvVarState = facts.get(&Self::env_fact(n))?;
            Ok(v.value.filter(|s| !s.trim().is_empty()))
        };
        let proxy = match &self.proxy {
            Some(p) => Some(p.clone()),
            None => env("HTTPS_PROXY")?.or(env("HTTP_PROXY")?),
        };
        let Some(proxy) = proxy else {
            return Ok((None, "direct".into()));
        };
        let list = match &self.no_proxy {
            Some(l) => l.join(","),
            None => env("NO_PROXY")?.unwrap_or_default(),
        };
        let host = url_host(&self.url).unwrap_or_default();
        Ok(match matching_entry(&host, &list) {
            Some(e) => (None, format!("direct: NO_PROXY entry `{e}` matches {host}")),
            None => (Some(proxy.clone()), format!("via proxy {proxy}")),
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
    fn manages(&self) -> Vec<kwin_engine::module::Managed> {
        vec![kwin_engine::module::Managed::Whole(self.dest.clone())]
    }

    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        let mut v = vec![FactQuery::of(&self.fact(), shell)];
        v.extend(
            PROXY_VARS
                .iter()
                .map(|n| FactQuery::of(&Self::env_fact(n), shell)),
        );
        v
    }
    fn reads(&self) -> Vec<String> {
        let mut v = vec![windows_resource(&self.dest)];
        v.extend(PROXY_VARS.iter().map(|n| format!("env:{n}")));
        v
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
        let (proxy, route) = self.route(facts)?;
        Ok(Plan::Change(Change {
            diff: Some(format!(
                "{}+ {} sha256 {} (from {}, {route})",
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
                proxy.as_deref(),
                &crate::temp_name(ctx.nonce, &self.dest),
            ))],
            touches: Touches::Resources(vec![windows_resource(&self.dest)]),
            ..Change::upsert(st.exists, "sha256 differs")
        }))
    }
}
