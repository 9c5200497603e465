//! `package`: packages installed (at a version, optionally held) or removed, with apt or
//! dnf — detected on the host — optionally from a repository with its own signing key.
//!
//! Parameters:
//!
//! | name | type | default | meaning |
//! |---|---|---|---|
//! | `name` | string or list | required | package names |
//! | `version` | string | any | apt: exact `Version` (`1.30.2-1.1`); dnf: `1.30.2`, `1.30.2-150500.1.1` or with epoch; a trailing `*` matches any rest |
//! | `state` | `"present"` / `"absent"` | `"present"` | |
//! | `hold` | bool | unchanged | `true`: `apt-mark hold` / `dnf versionlock add`; `false`: release |
//! | `repository` | table | none | `{ name, url, key_url, key_sha256?, key_fingerprint?, suite = "/", components = [] }` (see below) |
//!
//! `repository` (only with `state = "present"`): apt writes
//! `/etc/apt/sources.list.d/<name>.list` with `signed-by=/etc/apt/keyrings/<name>.gpg` and
//! installs the key (fetched with curl or wget, checked against `key_sha256` and/or
//! `key_fingerprint` — the latter with gpg —, de-armored without gpg); dnf writes
//! `/etc/yum.repos.d/<name>.repo` with `gpgcheck=1` (and refuses key checks it cannot make).
//!
//! No-op when every package is installed (at a matching version) with the wanted hold, and
//! the repository files are as they would be written — or none is installed for `absent`.
//! The probe reads only the package database (`dpkg-query`, `rpm -q`): no lock, no network.
//!
//! Changes: apt: `apt-get install -y pkg=version ...` (`DEBIAN_FRONTEND=noninteractive`,
//! waiting up to 5 minutes for the dpkg lock; when the repository changed, `apt-get update` of
//! that repository's sources file alone first (the other sources keep their lists); a full
//! `apt-get update` once as a retry when the install fails); dnf: `dnf install -y pkg-version`.
//! A held package is released for a version change and held again. Installing runs
//! maintainer scripts that may change anything, so later tasks on the host re-probe.
//!
//! ```toml
//! [[tasks]]
//! name = "kubernetes packages"
//! module = "package"
//! [tasks.params]
//! name = ["kubelet", "kubeadm", "kubectl"]
//! version = "1.30.2-1.1"
//! hold = true
//! repository = { name = "kubernetes", url = "https://pkgs.k8s.io/core:/stable:/v1.30/deb/", key_url = "https://pkgs.k8s.io/core:/stable:/v1.30/deb/Release.key" }
//! ```

use super::common::State;
use super::diff::value_diff;
use super::download::{fetchers, pick_fetcher};
use super::facts::file::PathState;
use super::facts::packages::{version_matches, Manager, Packages, PackagesFact};
use super::managed::ensure_content;
use super::package_repo::Repository;
use super::script::die;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;
use serde::Deserialize;

/// One name or several.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Names {
    One(String),
    Many(Vec<String>),
}

/// Params of `package`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PackageParams {
    /// Package name(s).
    pub name: Names,
    /// Wanted version (all named packages).
    pub version: Option<String>,
    /// `present` (default) or `absent`.
    #[serde(default)]
    pub state: State,
    /// Hold (true) or release (false) the version; unset leaves it.
    pub hold: Option<bool>,
    /// Repository to install from.
    pub repository: Option<Repository>,
}

#[derive(Debug, Clone)]
pub struct Package {
    names: Vec<String>,
    version: Option<String>,
    state: State,
    hold: Option<bool>,
    repository: Option<Repository>,
}

fn check_name(n: &str, at: &str) -> Result<(), ParamError> {
    let ok = n.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || ".+_:-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(ParamError::at(at, format!("`{n}` is not a package name")))
    }
}

impl Described for Package {
    const NAME: &'static str = "package";
    const DOC: &'static str =
        "packages installed at a version (apt or dnf), held, from an optional signed repository";
    type Params = PackageParams;

    fn from_params(p: PackageParams, _shell: Shell) -> Result<Self, ParamError> {
        let names = match p.name {
            Names::One(n) => {
                check_name(&n, "name")?;
                vec![n]
            }
            Names::Many(v) => {
                if v.is_empty() {
                    return Err(ParamError::at("name", "no package named"));
                }
                for (i, n) in v.iter().enumerate() {
                    check_name(n, &format!("name.{i}"))?;
                }
                v
            }
        };
        if let Some(v) = &p.version {
            let ok = !v.is_empty()
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".+~:_*-".contains(c));
            if !ok {
                return Err(ParamError::at("version", format!("`{v}` is not a version")));
            }
        }
        if p.state == State::Absent
            && (p.version.is_some() || p.repository.is_some() || p.hold == Some(true))
        {
            return Err(ParamError::at(
                "state",
                "`version`, `repository` and `hold = true` make no sense with state = \"absent\"",
            ));
        }
        let mut repository = p.repository;
        if let Some(r) = &mut repository {
            r.check("repository")?;
        }
        Ok(Package {
            names,
            version: p.version,
            state: p.state,
            hold: p.hold,
            repository,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        let mut v = super::facts::file::samples();
        v.push(FactSample::linux(PackagesFact {
            names: vec!["containerd".into(), "kubelet".into()],
        }));
        v.push(FactSample::linux(super::download::fetchers()));
        v
    }
}

/// apt-get with the options every call gets.
const APT_GET: &str = "DEBIAN_FRONTEND=noninteractive apt-get -y -q -o DPkg::Lock::Timeout=300";

impl Package {
    fn packages_fact(&self) -> PackagesFact {
        PackagesFact {
            names: self.names.clone(),
        }
    }

    /// Name with version in the manager's syntax.
    fn spec(&self, manager: Manager, name: &str) -> String {
        match (&self.version, manager) {
            (None, _) => name.to_string(),
            (Some(v), Manager::Apt) => format!("{name}={v}"),
            (Some(v), _) => format!("{name}-{v}"),
        }
    }

    fn resources(&self) -> Vec<String> {
        let mut r: Vec<String> = self.names.iter().map(|n| format!("package:{n}")).collect();
        if let Some(repo) = &self.repository {
            r.push(repo.apt_list_path());
            r.push(repo.apt_keyring_path());
            r.push(repo.dnf_repo_path());
        }
        r
    }

    fn plan_present(&self, facts: &Facts, pk: &Packages, nonce: &str) -> Result<Plan, ModuleError> {
        let m = pk.manager;
        let mut reasons: Vec<String> = Vec::new();
        let mut diff = String::new();
        let mut steps: Vec<Step> = Vec::new();
        let mut repo_changed = false;

        if let Some(repo) = &self.repository {
            match m {
                Manager::Apt => {
                    let list = facts.get(&repo.list_fact())?;
                    let ring = facts.get(&repo.keyring_fact())?;
                    let list_w = ensure_content(
                        &repo.apt_list_path(),
                        &list,
                        facts,
                        repo.apt_list().as_bytes(),
                        0o644,
                        nonce,
                    )?;
                    let ring_missing = !matches!(ring, PathState::File(_));
                    if list_w.is_some() || ring_missing {
                        repo_changed = true;
                        reasons.push(format!("repository {} not configured", repo.name));
                        let fetcher = pick_fetcher(&facts.get(&fetchers())?, &repo.key_url)?;
                        diff.push_str(&value_diff(
                            None,
                            Some(&format!(
                                "key {} from {}",
                                repo.apt_keyring_path(),
                                repo.key_url
                            )),
                        ));
                        steps.push(Step::Run(repo.install_key_script(fetcher)));
                        if let Some(w) = list_w {
                            diff.push_str(&w.diff);
                            steps.extend(w.steps);
                        }
                    }
                }
                _ => {
                    if repo.key_sha256.is_some() || repo.key_fingerprint.is_some() {
                        return Err(ModuleError::Unsupported(format!(
                            "repository {}: dnf imports the signing key from {} itself, unchecked; kwin cannot apply key_sha256 / key_fingerprint there",
                            repo.name, repo.key_url
                        )));
                    }
                    let st = facts.get(&repo.repo_fact())?;
                    if let Some(w) = ensure_content(
                        &repo.dnf_repo_path(),
                        &st,
                        facts,
                        repo.dnf_repo().as_bytes(),
                        0o644,
                        nonce,
                    )? {
                        repo_changed = true;
                        reasons.push(format!("repository {} not configured", repo.name));
                        diff.push_str(&w.diff);
                        steps.extend(w.steps);
                    }
                }
            }
        }

        // Which packages need installing (missing or at another version).
        let mut install = Vec::new();
        let mut relock = Vec::new();
        for n in &self.names {
            match pk.installed.get(n) {
                None => {
                    diff.push_str(&value_diff(None, Some(&self.spec(m, n))));
                    install.push(n.clone());
                }
                Some(inst) => {
                    if let Some(v) = &self.version {
                        if !inst.versions.iter().any(|have| version_matches(m, have, v)) {
                            diff.push_str(&value_diff(
                                Some(&format!("{n} {}", inst.versions.join(", "))),
                                Some(&self.spec(m, n)),
                            ));
                            install.push(n.clone());
                            // A version change releases the hold: dnf refuses to change a
                            // locked package (released first), apt drops the hold when told
                            // to change it. Either way it is held again below.
                            if inst.held {
                                relock.push(n.clone());
                            }
                        }
                    }
                }
            }
        }
        if !install.is_empty() {
            let missing = install
                .iter()
                .filter(|n| !pk.installed.contains_key(*n))
                .count();
            reasons.push(match (missing, install.len() - missing) {
                (0, _) => "other version installed".into(),
                (_, 0) => "not installed".into(),
                _ => "not installed or other version".into(),
            });
            let specs: Vec<String> = install.iter().map(|n| sh_quote(&self.spec(m, n))).collect();
            let specs = specs.join(" ");
            let shown = install.join(" ");
            let s = match m {
                Manager::Apt => {
                    let cmd = format!(
                        "{APT_GET} --allow-downgrades --allow-change-held-packages install {specs} </dev/null"
                    );
                    if let (true, Some(r)) = (repo_changed, &self.repository) {
                        // Only the changed repository's lists are fetched: the other sources
                        // keep theirs (each is a request to its mirror, for nothing). The apt
                        // options that make `update` read one sources file and keep every other
                        // list: apt.conf(5) Dir::Etc::sourcelist / sourceparts,
                        // APT::Get::List-Cleanup; the idiom from Debian bug #714877 (as sbuild
                        // uses it, geofft/sbuild@557d394). A failed install still gets a full
                        // update and one more try.
                        format!(
                            "{APT_GET} -o Dir::Etc::sourcelist={list} -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0 update </dev/null || {}\n\
                             {cmd} || {{ {APT_GET} update </dev/null && {cmd}; }} || {}\n",
                            die(&format!("apt-get update of the repository {} failed", r.name)),
                            die(&format!("cannot install {shown}")),
                            list = sh_quote(&r.apt_list_path()),
                        )
                    } else if repo_changed {
                        format!(
                            "{APT_GET} update </dev/null || {}\n{cmd} || {}\n",
                            die("apt-get update failed"),
                            die(&format!("cannot install {shown}"))
                        )
                    } else {
                        // Stale or missing package lists are the usual cause of a failure.
                        format!(
                            "{cmd} || {{ {APT_GET} update </dev/null && {cmd}; }} || {}\n",
                            die(&format!("cannot install {shown}"))
                        )
                    }
                }
                _ => {
                    let mut s = String::new();
                    if !relock.is_empty() && m != Manager::Apt {
                        let q: Vec<String> = relock.iter().map(|n| sh_quote(n)).collect();
                        s.push_str(&format!(
                            "dnf -y versionlock delete {} </dev/null || {}\n",
                            q.join(" "),
                            die("cannot release the version lock (is the dnf versionlock plugin installed?)")
                        ));
                    }
                    s.push_str(&format!(
                        "dnf -y install {specs} </dev/null || {}\n",
                        die(&format!("cannot install {shown}"))
                    ));
                    s
                }
            };
            steps.push(Step::Run(s));
        }

        // Hold state, after any install (a fresh install is not held; a lock released for
        // a version change is taken again unless `hold = false`).
        let held = |n: &String| pk.installed.get(n).is_some_and(|i| i.held) && !relock.contains(n);
        let want_hold = |n: &String| match self.hold {
            Some(h) => Some(h),
            None => relock.contains(n).then_some(true),
        };
        let to_hold: Vec<&String> = self
            .names
            .iter()
            .filter(|n| want_hold(n) == Some(true) && !held(n))
            .collect();
        let to_release: Vec<&String> = self
            .names
            .iter()
            .filter(|n| want_hold(n) == Some(false) && held(n))
            .collect();
        for (hold, list) in [(true, &to_hold), (false, &to_release)] {
            if list.is_empty() {
                continue;
            }
            let q: Vec<String> = list.iter().map(|n| sh_quote(n)).collect();
            let q = q.join(" ");
            let shown: Vec<&str> = list.iter().map(|n| n.as_str()).collect();
            let shown = shown.join(" ");
            for n in list {
                diff.push_str(&if hold {
                    value_diff(None, Some(&format!("hold {n}")))
                } else {
                    value_diff(Some(&format!("hold {n}")), None)
                });
            }
            if install.is_empty() {
                reasons.push(if hold {
                    "not held".into()
                } else {
                    "held".into()
                });
            }
            let (cmd, verb, hint) = match (m, hold) {
                (Manager::Apt, true) => (
                    format!("apt-mark hold {q} </dev/null >/dev/null"),
                    "hold",
                    "",
                ),
                (Manager::Apt, false) => (
                    format!("apt-mark unhold {q} </dev/null >/dev/null"),
                    "release",
                    "",
                ),
                (_, true) => (
                    format!("dnf -y versionlock add {q} </dev/null"),
                    "hold",
                    " (is the dnf versionlock plugin installed?)",
                ),
                (_, false) => (
                    format!("dnf -y versionlock delete {q} </dev/null"),
                    "release",
                    " (is the dnf versionlock plugin installed?)",
                ),
            };
            steps.push(Step::Run(format!(
                "{cmd} || {}\n",
                die(&format!("cannot {verb} {shown}{hint}"))
            )));
        }

        if steps.is_empty() {
            let versions: Vec<String> = self
                .names
                .iter()
                .filter_map(|n| {
                    pk.installed
                        .get(n)
                        .map(|i| format!("{n} {}", i.versions.join(", ")))
                })
                .collect();
            return Ok(Plan::noop(format!("installed ({})", versions.join("; "))));
        }
        let touches = if install.is_empty() {
            Touches::Resources(self.resources())
        } else {
            Touches::Anything
        };
        Ok(Plan::Change(Change {
            action: if install.iter().all(|n| !pk.installed.contains_key(n)) && !install.is_empty()
            {
                Action::Create
            } else {
                Action::Update
            },
            reason: reasons.join("; "),
            diff: Some(diff),
            steps,
            touches,
        }))
    }

    fn plan_absent(&self, pk: &Packages) -> Result<Plan, ModuleError> {
        let present: Vec<&String> = self
            .names
            .iter()
            .filter(|n| pk.installed.contains_key(*n))
            .collect();
        if present.is_empty() {
            return Ok(Plan::noop("not installed"));
        }
        let q: Vec<String> = present.iter().map(|n| sh_quote(n)).collect();
        let q = q.join(" ");
        let shown: Vec<&str> = present.iter().map(|s| s.as_str()).collect();
        let shown = shown.join(" ");
        let cmd = match pk.manager {
            Manager::Apt => format!("{APT_GET} --allow-change-held-packages remove {q} </dev/null"),
            _ => format!("dnf -y remove {q} </dev/null"),
        };
        let mut diff = String::new();
        for n in &present {
            let v = pk
                .installed
                .get(*n)
                .map(|i| i.versions.join(", "))
                .unwrap_or_default();
            diff.push_str(&value_diff(Some(&format!("{n} {v}")), None));
        }
        Ok(Plan::Change(Change {
            action: Action::Delete,
            reason: "installed".into(),
            diff: Some(diff),
            steps: vec![Step::Run(format!(
                "{cmd} || {}\n",
                die(&format!("cannot remove {shown}"))
            ))],
            touches: Touches::Anything,
        }))
    }
}

impl Module for Package {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        let mut v = vec![FactQuery::of(&self.packages_fact(), shell)];
        if let Some(r) = &self.repository {
            v.push(FactQuery::of(&r.list_fact(), shell));
            v.push(FactQuery::of(&r.keyring_fact(), shell));
            v.push(FactQuery::of(&r.repo_fact(), shell));
            v.push(super::managed::route_query(&r.apt_list_path(), shell));
            v.push(super::managed::route_query(&r.dnf_repo_path(), shell));
            v.push(FactQuery::of(&fetchers(), shell));
        }
        v
    }

    fn reads(&self) -> Vec<String> {
        self.resources()
    }

    fn plan(&self, facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let pk = facts.get(&self.packages_fact())?;
        match pk.manager {
            Manager::Apt | Manager::Dnf => {}
            Manager::RpmOnly => return Err(ModuleError::Unsupported(
                "package: this host has rpm but not dnf; kwin installs packages with apt or dnf"
                    .into(),
            )),
            Manager::None => {
                return Err(ModuleError::Unsupported(
                    "package: no supported package manager on this host (apt or dnf)".into(),
                ))
            }
        }
        match self.state {
            State::Present => self.plan_present(facts, &pk, ctx.nonce),
            State::Absent => self.plan_absent(&pk),
        }
    }
}
