//! `registry_mirrors`: containerd's registry host files, one `hosts.toml` per upstream
//! registry, so that image pulls go through mirrors first.
//!
//! Parameters:
//!
//! | name | type | default | meaning |
//! |---|---|---|---|
//! | `mirrors` | table | required | upstream registry host (`registry.k8s.io`, `docker.io`, `host:port`, or `_default`) → list of mirror URLs, tried in order before the registry itself |
//! | `dir` | string | `/etc/containerd/certs.d` | containerd's `config_path` (what kwin's containerd configuration names) |
//!
//! Each registry gets `<dir>/<registry>/hosts.toml` (containerd docs/hosts.md at v2.3.4, the
//! format of containerd 1.5 and later): `server` is the registry's own endpoint
//! (`https://registry-1.docker.io` for `docker.io`, as containerd's default for it; none for
//! `_default`), then one `[host."<mirror>"]` table per mirror with `capabilities = ["pull",
//! "resolve"]`: containerd asks the mirrors in order, then the server. containerd reads these
//! files on every pull: nothing restarts. kwin lists the registries it wrote in
//! `<dir>/.kwin-registries`; a registry it wrote before and the plan no longer names loses
//! its `hosts.toml` (and its directory, when empty). Files of other registries, written by
//! others, are never touched.
//!
//! The Windows module of the same name (`windows/registry_mirrors.rs`) writes the same files
//! on Windows nodes; both take their params, checks and file content from
//! `shared/registry_mirrors.rs`.
//!
//! No-op when every file holds exactly what the plan says and the list names exactly the
//! plan's registries.
//!
//! ```toml
//! [[tasks]]
//! name = "pull through the site mirror"
//! module = "registry_mirrors"
//! params = { mirrors = { "registry.k8s.io" = ["https://mirror.example.com"], "docker.io" = ["https://mirror.example.com"] } }
//! ```

use super::facts::file::{FileFact, PathState};
use super::managed::{ensure_content, route_query};
use super::script::{die, sha256_hex};
use crate::paths::posix_abs;
use crate::shared::registry_mirrors::RegistryMirrorsParams;
use crate::shared::registry_mirrors::{hosts_files, index_content, listed, INDEX};
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;
use std::collections::BTreeMap;

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
            .unwrap_or_else(|| kwin_engine::plan::containerd::LINUX_CERTS_DIR.to_string());
        posix_abs("dir", &dir)?;
        let dir = dir.trim_end_matches('/').to_string();
        let files = hosts_files(&p)?;
        Ok(RegistryMirrors { dir, files })
    }

    fn fact_samples() -> Vec<FactSample> {
        super::facts::file::samples()
    }
}

impl RegistryMirrors {
    fn path(&self, registry: &str) -> String {
        format!("{}/{registry}/hosts.toml", self.dir)
    }

    fn index_path(&self) -> String {
        format!("{}/{INDEX}", self.dir)
    }

    fn file_fact(&self, registry: &str, content: &str) -> FileFact {
        FileFact::content_unless(self.path(registry), sha256_hex(content.as_bytes()))
    }

    fn index_fact(&self) -> FileFact {
        FileFact::content(self.index_path())
    }

    fn resources(&self) -> Vec<String> {
        vec![self.dir.clone()]
    }
}

/// The registries an index file lists.
fn listed_in(st: &PathState) -> Vec<String> {
    match st {
        PathState::File(info) => info.content.as_deref().map(listed).unwrap_or_default(),
        _ => Vec::new(),
    }
}

impl Module for RegistryMirrors {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        let mut v: Vec<FactQuery> = self
            .files
            .iter()
            .map(|(r, c)| FactQuery::of(&self.file_fact(r, c), shell))
            .collect();
        v.push(FactQuery::of(&self.index_fact(), shell));
        // The way to each directory a file is written in (managed::ensure_content checks it).
        v.extend(self.files.keys().map(|r| route_query(&self.path(r), shell)));
        v.push(route_query(&self.index_path(), shell));
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
            let st = facts.get(&self.file_fact(registry, content))?;
            if let Some(w) =
                ensure_content(&path, &st, facts, content.as_bytes(), 0o644, ctx.nonce)?
            {
                reasons.push(format!("{registry}: {}", w.reason));
                diff.push_str(&w.diff);
                steps.extend(w.steps);
            }
        }
        let index = facts.get(&self.index_fact())?;
        // Registries kwin wrote before that the plan no longer names: their file goes (a
        // registry name from the index is checked as a plan's is before it reaches a path).
        for stale in listed_in(&index)
            .into_iter()
            .filter(|r| !self.files.contains_key(r))
        {
            let path = self.path(&stale);
            reasons.push(format!("{stale}: no longer mirrored"));
            diff.push_str(&format!("- {path}\n"));
            steps.push(Step::Run(format!(
                "rm -f -- {p} || {}\nrmdir -- {d} 2>/dev/null || :\n",
                die(&format!("cannot remove {path}")),
                p = sh_quote(&path),
                d = sh_quote(&format!("{}/{stale}", self.dir)),
            )));
        }
        let want = index_content(self.files.keys());
        let wrote_any = !self.files.is_empty() || !matches!(index, PathState::Absent);
        if wrote_any {
            if let Some(w) = ensure_content(
                &self.index_path(),
                &index,
                facts,
                want.as_bytes(),
                0o644,
                ctx.nonce,
            )? {
                if reasons.is_empty() {
                    reasons.push(format!("{INDEX}: {}", w.reason));
                }
                diff.push_str(&w.diff);
                steps.extend(w.steps);
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
