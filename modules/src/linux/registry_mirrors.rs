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
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The file in `dir` that lists the registries kwin wrote.
pub const INDEX: &str = ".kwin-registries";

/// Params of `registry_mirrors`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegistryMirrorsParams {
    /// Upstream registry host → mirror URLs, in order.
    pub mirrors: BTreeMap<String, Vec<String>>,
    /// containerd's registry hosts directory (default `/etc/containerd/certs.d`).
    pub dir: Option<String>,
}

#[derive(Debug, Clone)]
pub struct RegistryMirrors {
    dir: String,
    /// registry → hosts.toml content
    files: BTreeMap<String, String>,
}

/// Whether `s` can name a registry directory: a host or IP with an optional `:port` (as
/// an image reference begins), or `_default`.
fn check_registry(s: &str) -> Result<(), ParamError> {
    let ok = s == "_default"
        || (!s.is_empty()
            && !s.starts_with(['.', '-', ':'])
            && !s.contains("..")
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-:_[]".contains(c)));
    if ok {
        Ok(())
    } else {
        Err(ParamError::at(
            "mirrors",
            format!("`{s}` is not a registry host (`registry.k8s.io`, `host:port`, `_default`)"),
        ))
    }
}

fn check_url(registry: &str, u: &str) -> Result<(), ParamError> {
    let ok = (u.starts_with("http://") || u.starts_with("https://"))
        && u.len() > "https://".len()
        && !u
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || "\"\\'`$".contains(c));
    if ok {
        Ok(())
    } else {
        Err(ParamError::at(
            "mirrors",
            format!("mirror `{u}` of `{registry}` is not an http(s) URL"),
        ))
    }
}

/// The registry's own endpoint, containerd's `server` (docs/hosts.md: "the default for
/// docker.io is registry-1.docker.io").
fn server(registry: &str) -> Option<String> {
    match registry {
        "_default" => None,
        "docker.io" => Some("https://registry-1.docker.io".to_string()),
        r => Some(format!("https://{r}")),
    }
}

/// A `hosts.toml` for `registry` with `mirrors` tried in order. The URLs are checked: no
/// quote or backslash can reach the TOML.
pub fn hosts_toml(registry: &str, mirrors: &[String]) -> String {
    let mut s = format!(
        "# Written by kwin (artifacts.registry_mirrors): pulls from {registry} try these mirrors first.\n"
    );
    if let Some(srv) = server(registry) {
        s.push_str(&format!("server = \"{srv}\"\n"));
    }
    for m in mirrors {
        s.push_str(&format!(
            "\n[host.\"{m}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
        ));
    }
    s
}

impl Described for RegistryMirrors {
    const NAME: &'static str = "registry_mirrors";
    const DOC: &'static str =
        "containerd's registry host files (hosts.toml): pulls go through mirrors first";
    type Params = RegistryMirrorsParams;

    fn from_params(p: RegistryMirrorsParams, _shell: Shell) -> Result<Self, ParamError> {
        let dir = p
            .dir
            .unwrap_or_else(|| kwin_engine::plan::containerd::LINUX_CERTS_DIR.to_string());
        posix_abs("dir", &dir)?;
        let dir = dir.trim_end_matches('/').to_string();
        let mut files = BTreeMap::new();
        for (registry, urls) in &p.mirrors {
            check_registry(registry)?;
            if urls.is_empty() {
                return Err(ParamError::at(
                    "mirrors",
                    format!("`{registry}` has no mirror"),
                ));
            }
            for u in urls {
                check_url(registry, u)?;
            }
            let urls: Vec<String> = urls
                .iter()
                .map(|u| u.trim_end_matches('/').to_string())
                .collect();
            files.insert(registry.clone(), hosts_toml(registry, &urls));
        }
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

    fn index_content(&self) -> String {
        let mut s =
            String::from("# Registries whose hosts.toml kwin wrote (module registry_mirrors).\n");
        for r in self.files.keys() {
            s.push_str(r);
            s.push('\n');
        }
        s
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

/// The registries an index file lists (comments and blank lines skipped).
fn listed(st: &PathState) -> Vec<String> {
    match st {
        PathState::File(info) => info
            .content
            .as_deref()
            .map(|c| {
                String::from_utf8_lossy(c)
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
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
        for stale in listed(&index)
            .into_iter()
            .filter(|r| !self.files.contains_key(r) && check_registry(r).is_ok())
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
        let want = self.index_content();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hosts_file_names_the_registry_then_each_mirror_in_order() {
        let t = hosts_toml(
            "docker.io",
            &["http://10.0.0.1:5000".to_string(), "https://m2".to_string()],
        );
        let v: toml::Value = toml::from_str(&t).expect("valid TOML");
        assert_eq!(v["server"].as_str(), Some("https://registry-1.docker.io"));
        let hosts = v["host"].as_table().expect("host table");
        assert_eq!(hosts.len(), 2);
        assert_eq!(
            hosts["http://10.0.0.1:5000"]["capabilities"],
            toml::Value::Array(vec!["pull".into(), "resolve".into()])
        );
        // the order is the file's order: containerd tries hosts as listed
        assert!(t.find("10.0.0.1:5000").unwrap_or(usize::MAX) < t.find("https://m2").unwrap_or(0));
        let d: toml::Value =
            toml::from_str(&hosts_toml("_default", &["https://m".into()])).expect("valid TOML");
        assert!(d.get("server").is_none());
    }

    #[test]
    fn registry_names_and_urls_that_could_escape_are_refused() {
        for bad in ["../etc", "a/b", "", "-x", "reg\"istry", "x..y"] {
            assert!(check_registry(bad).is_err(), "{bad}");
        }
        for good in ["registry.k8s.io", "10.0.0.1:5000", "_default", "[::1]:5000"] {
            assert!(check_registry(good).is_ok(), "{good}");
        }
        for bad in [
            "ftp://x",
            "http://a\"b",
            "https://",
            "http://x y",
            "https://a\\b",
        ] {
            assert!(check_url("r", bad).is_err(), "{bad}");
        }
    }
}
