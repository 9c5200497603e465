//! `registry_mirrors` (Windows): containerd's registry host files on a Windows node, one
//! `hosts.toml` per upstream registry, so that image pulls go through mirrors first.
//!
//! Parameters: as the Linux module's (`shared/registry_mirrors.rs`): `mirrors` (upstream
//! registry → mirror URLs, tried in order before the registry itself) and `dir`, containerd's
//! `config_path` (default `C:\Program Files\containerd\certs.d`, what kwin's Windows containerd
//! configuration names: `plan/containerd.rs` `WINDOWS_CERTS_DIR`).
//!
//! Each registry gets `<dir>\<registry directory>\hosts.toml`, the same file as on Linux
//! (containerd docs/hosts.md at v2.3.4), in the directory a Windows containerd looks up first:
//! `host:port` is `host_port_`, as Windows allows no `:` in a name
//! (`shared::registry_mirrors::windows_host_dir`). containerd reads these files on every pull:
//! nothing restarts. kwin lists the registries it wrote in `<dir>\.kwin-registries`; a registry
//! it wrote before and the plan no longer names loses its `hosts.toml` (and its directory, when
//! empty). Files of other registries, written by others, are never touched. Each file is
//! written as the Windows `file` module writes one (a new file with an unguessable name beside
//! it, checked, renamed over; parents created); every path reaches PowerShell through
//! `ps_quote` and `-LiteralPath`.
//!
//! No-op when every file holds exactly what the plan says and the list names exactly the
//! plan's registries.
//!
//! ```toml
//! [[tasks]]
//! name = "pull through the site mirror"
//! module = "registry_mirrors"
//! on = { os = "windows" }
//! params = { mirrors = { "registry.k8s.io" = ["https://mirror.example.com"], "mcr.microsoft.com" = ["https://mirror.example.com"] } }
//! ```

use super::facts::{PathFact, PathState};
use super::file::content_diff;
use super::step;
use crate::paths::{windows_abs, windows_resource};
use crate::shared::file::write_script;
use crate::shared::registry_mirrors::{
    hosts_files, index_content, listed, windows_host_dir, RegistryMirrorsParams, INDEX,
};
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Touches};
use kwin_engine::quote::ps_quote;
use kwin_engine::transport::Shell;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// A file's current content comes back for the diff up to this size.
const DIFF_LIMIT: u64 = 256 * 1024;

#[derive(Debug, Clone)]
pub struct RegistryMirrors {
    dir: String,
    /// registry → hosts.toml content
    files: BTreeMap<String, String>,
}

impl Described for RegistryMirrors {
    const NAME: &'static str = "registry_mirrors";
    const DOC: &'static str =
        "containerd's registry host files (hosts.toml): pulls go through mirrors first";
    type Params = RegistryMirrorsParams;

    fn from_params(p: RegistryMirrorsParams, _shell: Shell) -> Result<Self, ParamError> {
        let dir = p
            .dir
            .clone()
            .unwrap_or_else(|| kwin_engine::plan::containerd::WINDOWS_CERTS_DIR.to_string());
        windows_abs("dir", &dir)?;
        let dir = dir.trim_end_matches(['\\', '/']).to_string();
        let files = hosts_files(&p)?;
        Ok(RegistryMirrors { dir, files })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![FactSample::windows(PathFact {
            path: format!(
                "{}\\{INDEX}",
                kwin_engine::plan::containerd::WINDOWS_CERTS_DIR
            ),
            content_limit: DIFF_LIMIT,
        })]
    }
}

impl RegistryMirrors {
    fn registry_dir(&self, registry: &str) -> String {
        format!("{}\\{}", self.dir, windows_host_dir(registry))
    }

    fn path(&self, registry: &str) -> String {
        format!("{}\\hosts.toml", self.registry_dir(registry))
    }

    fn fact(&self, path: String) -> PathFact {
        PathFact {
            path,
            content_limit: DIFF_LIMIT,
        }
    }

    fn index_path(&self) -> String {
        format!("{}\\{INDEX}", self.dir)
    }

    /// The file at `path` as `content`, or the steps and diff that make it so.
    fn ensure(
        &self,
        path: &str,
        st: &PathState,
        content: &str,
        nonce: &str,
    ) -> Result<Option<(String, String, String)>, ModuleError> {
        if st.exists && st.dir {
            return Err(ModuleError::Precondition(format!(
                "{path} is a directory, not a file"
            )));
        }
        let want = hex::encode(Sha256::digest(content.as_bytes()));
        if st.exists && st.sha256.as_deref() == Some(want.as_str()) {
            return Ok(None);
        }
        let reason = if st.exists { "differs" } else { "missing" };
        Ok(Some((
            reason.to_string(),
            content_diff(path, st.content().as_deref(), content.as_bytes()),
            write_script(path, content.as_bytes(), nonce),
        )))
    }

    fn resources(&self) -> Vec<String> {
        vec![windows_resource(&self.dir)]
    }
}

impl Module for RegistryMirrors {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        let mut v: Vec<FactQuery> = self
            .files
            .keys()
            .map(|r| FactQuery::of(&self.fact(self.path(r)), shell))
            .collect();
        v.push(FactQuery::of(&self.fact(self.index_path()), shell));
        v
    }

    fn reads(&self) -> Vec<String> {
        self.resources()
    }

    fn plan(&self, facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let mut reasons = Vec::new();
        let mut diff = String::new();
        let mut steps = Vec::new();
        for (registry, content) in &self.files {
            let path = self.path(registry);
            let st: PathState = facts.get(&self.fact(path.clone()))?;
            if let Some((why, d, script)) = self.ensure(&path, &st, content, ctx.nonce)? {
                reasons.push(format!("{registry}: {why}"));
                diff.push_str(&d);
                steps.push(step(script));
            }
        }
        let index: PathState = facts.get(&self.fact(self.index_path()))?;
        // Registries kwin wrote before that the plan no longer names: their file goes, and
        // their directory when nothing else is in it (a name from the index is checked as a
        // plan's is before it reaches a path: `listed`).
        let before = if index.exists && !index.dir {
            index.content().map(|c| listed(&c)).unwrap_or_default()
        } else {
            Vec::new()
        };
        for stale in before.iter().filter(|r| !self.files.contains_key(*r)) {
            let path = self.path(stale);
            reasons.push(format!("{stale}: no longer mirrored"));
            diff.push_str(&format!("- {path}\n"));
            steps.push(step(format!(
                "$f = {f}\n\
                 if (Test-Path -LiteralPath $f -PathType Leaf) {{ Remove-Item -LiteralPath $f -Force }}\n\
                 $d = {d}\n\
                 if ((Test-Path -LiteralPath $d -PathType Container) -and -not (Get-ChildItem -LiteralPath $d -Force | Select-Object -First 1)) {{ Remove-Item -LiteralPath $d -Force }}",
                f = ps_quote(&path),
                d = ps_quote(&self.registry_dir(stale)),
            )));
        }
        if !self.files.is_empty() || index.exists {
            let want = index_content(self.files.keys());
            if let Some((why, d, script)) =
                self.ensure(&self.index_path(), &index, &want, ctx.nonce)?
            {
                if reasons.is_empty() {
                    reasons.push(format!("{INDEX}: {why}"));
                }
                diff.push_str(&d);
                steps.push(step(script));
            }
        }
        if steps.is_empty() {
            return Ok(Plan::noop(if self.files.is_empty() {
                "no registry mirrors".to_string()
            } else {
                format!(
                    "{} as wanted",
                    self.files.keys().cloned().collect::<Vec<_>>().join(", ")
                )
            }));
        }
        Ok(Plan::Change(Change {
            action: Action::Update,
            reason: reasons.join("; "),
            diff: Some(diff),
            steps,
            touches: Touches::Resources(self.resources()),
        }))
    }
}
