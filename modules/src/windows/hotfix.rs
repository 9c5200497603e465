//! `hotfix`: a check that a Windows update is present — never installs anything.
//!
//! Parameters: `kb` (e.g. "KB4489899"), `min_build` (e.g. "10.0.17763.379"); at least one. The
//! check passes when the hotfix is installed OR the OS version (major.minor.build.UBR) is at
//! least `min_build` — cumulative updates supersede older KBs, which then no longer show up in
//! `Get-HotFix`. Example: VXLAN overlay on Windows Server 2019 needs KB4489899 (build
//! 17763.379) or any later cumulative update.
//! Always a no-op when satisfied; a failed check is a precondition error for the host.
//!
//! `releases` (with `min_build`): the Windows Server releases the cluster knows, each its
//! `major.minor.build` and what is wrong with a node that runs it here — windows-worker's
//! `windows-build` step gives the support matrix's (`windows.server_releases`: Calico refused
//! on Windows Server 2025, a warning on 2019). The host's probed build is compared with them
//! at `kwin plan` and `kwin apply`, whatever the plan's labels say: a release to `refuse` is
//! a precondition error naming the host, its build and the fix; one to `warn` a no-op with
//! that warning; a build none of them has, a no-op with a warning that kwin's matrix does
//! not know it.
//!
//! ```toml
//! [[tasks]]
//! name = "overlay-update"
//! module = "hotfix"
//! on = { os = "windows" }
//! params = { kb = "KB4489899", min_build = "10.0.17763.379" }
//! ```

use super::facts::{OsBuild, OsBuildFact};
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{Ctx, Module, ModuleError, ParamError, Plan};
use kwin_engine::transport::Shell;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HotfixParams {
    /// A hotfix that must be installed (`KB4489899`). At least one of `kb` and `min_build`;
    /// the check passes when either holds.
    kb: Option<String>,
    /// The lowest OS version (`major.minor.build.UBR`, e.g. `10.0.17763.379`) that counts:
    /// cumulative updates supersede older KBs, which then no longer show in `Get-HotFix`.
    min_build: Option<String>,
    /// The Windows Server releases the host's build is compared with (with `min_build`):
    /// a release to refuse fails the check, one to warn about passes with a warning.
    #[serde(default)]
    releases: Vec<Release>,
}

/// A Windows Server release and what a node that runs it gets.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Release {
    /// `major.minor.build` (`10.0.26100`), as the `node.kubernetes.io/windows-build` label.
    build: String,
    /// How to name it (`2025`: "Windows Server 2025").
    name: String,
    /// Refuse a node that runs it, with this reason and fix.
    refuse: Option<String>,
    /// Warn about a node that runs it, with this reason and fix.
    warn: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Hotfix {
    kb: Option<String>,
    min_build: Option<(u32, u32, u32, u32)>,
    min_build_text: String,
    /// (major, minor, build) → the release.
    releases: Vec<((u32, u32, u32), Release)>,
}

/// `10.0.17763.379` (or `10.0.17763`) → tuple.
pub fn parse_build(s: &str) -> Option<(u32, u32, u32, u32)> {
    let parts: Vec<u32> = s
        .split('.')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    match parts.as_slice() {
        [a, b, c] => Some((*a, *b, *c, 0)),
        [a, b, c, d] => Some((*a, *b, *c, *d)),
        _ => None,
    }
}

impl Described for Hotfix {
    const NAME: &'static str = "hotfix";
    const DOC: &'static str =
        "a precondition: the Windows build has at least the given update revision (and is a Windows Server release the cluster supports)";
    type Params = HotfixParams;

    fn from_params(p: HotfixParams, _shell: Shell) -> Result<Self, ParamError> {
        if p.kb.is_none() && p.min_build.is_none() {
            return Err(ParamError::new("give `kb`, `min_build`, or both"));
        }
        if let Some(kb) = &p.kb {
            let digits = kb
                .strip_prefix("KB")
                .or_else(|| kb.strip_prefix("kb"))
                .unwrap_or("");
            if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
                return Err(ParamError::at(
                    "kb",
                    format!("`{kb}` is not a KB id like KB4489899"),
                ));
            }
        }
        let min_build = match &p.min_build {
            Some(s) => Some(parse_build(s).ok_or_else(|| {
                ParamError::at(
                    "min_build",
                    format!("`{s}` is not a version like 10.0.17763.379"),
                )
            })?),
            None => None,
        };
        if !p.releases.is_empty() && min_build.is_none() {
            return Err(ParamError::at(
                "releases",
                "`releases` goes with `min_build`",
            ));
        }
        let mut releases = Vec::new();
        for r in p.releases {
            let Some((a, b, c, 0)) =
                parse_build(&r.build).filter(|_| r.build.split('.').count() == 3)
            else {
                return Err(ParamError::at(
                    "releases",
                    format!("`{}` is not a build like 10.0.26100", r.build),
                ));
            };
            if r.refuse.is_some() && r.warn.is_some() {
                return Err(ParamError::at(
                    "releases",
                    format!("release {}: `refuse` or `warn`, not both", r.name),
                ));
            }
            releases.push(((a, b, c), r));
        }
        Ok(Hotfix {
            kb: p.kb.map(|k| k.to_ascii_uppercase()),
            min_build,
            min_build_text: p.min_build.unwrap_or_default(),
            releases,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![FactSample::windows(OsBuildFact)]
    }
}

impl Hotfix {
    /// The build against `releases`: refused, warned about, unknown, or fine (`ok`).
    fn release_check(
        &self,
        host: &str,
        version: &str,
        build: (u32, u32, u32),
        ok: String,
    ) -> Result<Plan, ModuleError> {
        if self.releases.is_empty() {
            return Ok(Plan::noop(ok));
        }
        let Some((_, r)) = self.releases.iter().find(|(b, _)| *b == build) else {
            let known: Vec<String> = self
                .releases
                .iter()
                .map(|(_, r)| format!("{} ({})", r.name, r.build))
                .collect();
            return Ok(Plan::noop_warning(
                ok,
                format!(
                    "`{host}` runs build {version}, which is none of the Windows Server releases kwin's support matrix knows ({}): kwin has not checked what Kubernetes and the pod network say of it",
                    known.join(", ")
                ),
            ));
        };
        let said = |why: &str| format!("`{host}` (build {version}) runs {why}");
        if let Some(why) = &r.refuse {
            return Err(ModuleError::Precondition(said(why)));
        }
        if let Some(why) = &r.warn {
            return Ok(Plan::noop_warning(
                format!("{ok}, Windows Server {}", r.name),
                said(why),
            ));
        }
        Ok(Plan::noop(format!("{ok}, Windows Server {}", r.name)))
    }
}

impl Module for Hotfix {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&OsBuildFact, shell)]
    }
    fn reads(&self) -> Vec<String> {
        vec!["os:build".into()]
    }
    fn plan(&self, facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let os: OsBuild = facts.get(&OsBuildFact)?;
        let have = os.version_tuple();
        let version = format!("{}.{}", os.windows_build(), os.ubr);
        if let Some(kb) = &self.kb {
            if os.hotfixes.iter().any(|h| h.eq_ignore_ascii_case(kb)) {
                return Ok(Plan::noop(format!("{kb} installed")));
            }
        }
        if let Some(min) = self.min_build {
            // Only builds of the same release line supersede: 10.0.20348.x is not an update of 17763.
            let same_line = have.2 == min.2;
            if (same_line && have >= min) || (!same_line && have.2 > min.2) {
                let ok = format!("build {version} ≥ {}", self.min_build_text);
                return self.release_check(ctx.host, &version, (have.0, have.1, have.2), ok);
            }
        }
        let wanted = match (&self.kb, self.min_build.is_some()) {
            (Some(kb), true) => format!("{kb} or build {} or later", self.min_build_text),
            (Some(kb), false) => kb.clone(),
            (None, _) => format!("build {} or later", self.min_build_text),
        };
        Err(ModuleError::Precondition(format!(
            "{} ({version}) needs {wanted}: install the latest cumulative update",
            if os.product.is_empty() {
                "this host"
            } else {
                os.product.as_str()
            }
        )))
    }
}
