//! What kwin knows about component versions: the Kubernetes minors it supports, kubeadm's
//! pause image per minor, and every command-line flag its recipes give kubelet, kube-proxy,
//! kubeadm, flanneld and containerd, with the version that added, deprecated or removed it.
//!
//! The facts live in `versions.toml` beside this file (embedded in the binary), each with the
//! upstream source it was taken from. Validation refuses a Kubernetes version outside
//! [`oldest`]..=[`newest`]; the template context takes the default sandbox image from
//! [`pause_image`]; the recipes render flags through the template functions `flag()` and
//! `flag_supported()` (see `expand/context.rs`), which answer from [`flag_support`].

use serde::Deserialize;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::OnceLock;

/// The table's text (TOML).
pub const TABLE: &str = include_str!("versions.toml");

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Table {
    pub kubernetes: KubernetesRange,
    pub pause: Pause,
    /// The support matrix (rules in `plan/support.rs`).
    pub matrix: Matrix,
    /// Component → what versions it (`kubernetes`, `flannel`, `containerd`).
    pub components: BTreeMap<String, String>,
    pub flags: Vec<Flag>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubernetesRange {
    pub oldest: String,
    pub newest: String,
    pub newest_source: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pause {
    pub source: String,
    pub image: String,
    /// Minor ("1.31") → pause version ("3.10").
    pub minors: BTreeMap<String, String>,
}

/// `[matrix]`: what upstream supports with each Kubernetes minor, and kwin's default pins.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matrix {
    /// The day the rows were last read against their sources (`YYYY-MM-DD`).
    pub checked: String,
    pub release_source: String,
    pub patch_source: String,
    pub containerd_source: String,
    /// The first minor whose kubelet refuses cgroup v1 by default.
    pub cgroup_v1_refused_from: String,
    pub cgroup_v1_source: String,
    pub minors: Vec<MinorRow>,
    pub containerd_branches: Vec<Branch>,
    pub compat: Vec<Compat>,
    pub windows_server: Vec<WindowsServer>,
    pub linux: Vec<Distro>,
    pub defaults: Pins,
}

/// One Kubernetes minor.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinorRow {
    /// "1.37".
    pub minor: String,
    /// `YYYY-MM-DD` of its `.0`.
    pub released: String,
    /// `YYYY-MM-DD` after which upstream publishes no more patches.
    pub end_of_life: String,
    /// The newest patch release ("1.37.2"): every patch from `.0` to it exists.
    pub latest_patch: String,
    /// containerd's lowest supported patch per branch ("2.3.0" covers 2.3.x from 2.3.0).
    pub containerd: Vec<String>,
}

/// A containerd release branch and the day its support ends.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Branch {
    pub branch: String,
    pub end_of_life: String,
}

/// A component's support over a range of Kubernetes minors.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compat {
    /// A `[versions]` key: `calico`, `runc`, `crictl`, `flannel`, `cni_plugins`,
    /// `cri_dockerd`.
    pub component: String,
    /// The first minor the row covers (none: every minor up to `until`).
    pub from: Option<String>,
    /// The last minor the row covers (none: every minor from `from`).
    pub until: Option<String>,
    /// Lowest versions, one per branch (as `MinorRow::containerd`).
    #[serde(default)]
    pub min: Vec<String>,
    /// The component's minor must be the Kubernetes minor (crictl).
    #[serde(default)]
    pub same_minor: bool,
    /// The component does not work with these minors: why.
    pub refused: Option<String>,
    pub source: String,
}

/// A Windows Server release as its Node label names it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowsServer {
    /// "2022".
    pub name: String,
    /// `major.minor.build` ("10.0.20348"), the prefix of `node.kubernetes.io/windows-build`.
    pub build: String,
    /// Listed by Kubernetes for its current releases.
    pub supported: bool,
    /// Calico supports it.
    pub calico: bool,
    pub source: String,
}

/// A Linux distribution kwin supports on its nodes (`/etc/os-release` `ID` and
/// `VERSION_ID`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Distro {
    pub id: String,
    pub version: String,
    pub name: String,
    /// The containerd its own package installs.
    pub containerd_package: String,
    pub source: String,
}

/// `[matrix.defaults]`: the versions kwin installs where the plan's `[versions]` says nothing.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pins {
    pub containerd: String,
    pub runc: String,
    pub flannel: String,
    pub calico: String,
    pub cni_plugins: String,
    pub cri_dockerd: String,
    pub source: String,
}

/// One flag of one component.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Flag {
    pub component: String,
    /// With its dashes: `--node-ip`.
    pub flag: String,
    /// Takes a value (`--name=value`) or stands alone (`--name`).
    pub value: bool,
    pub added: Option<String>,
    pub deprecated: Option<String>,
    pub removed: Option<String>,
    pub defined_in: String,
    pub source: String,
}

/// The table, parsed once. It is kwin's own data, checked by the tests below: a table that
/// does not parse is a bug in kwin.
pub fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| {
        toml::from_str(TABLE).unwrap_or_else(|e| {
            panic!("engine/src/plan/versions.toml is invalid (a bug in kwin): {e}")
        })
    })
}

/// A dotted release version (`1.31`, `1.31.4`, `v0.26.7`, `1.7.29`), compared number by number
/// with missing numbers as 0; anything after `-` or `+` is ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version(pub Vec<u64>);

impl Version {
    pub fn parse(s: &str) -> Option<Version> {
        let s = s.trim().trim_start_matches('v');
        let core = s.split(['-', '+']).next()?;
        let parts: Option<Vec<u64>> = core.split('.').map(|p| p.parse().ok()).collect();
        parts.filter(|p| !p.is_empty()).map(Version)
    }

    /// `major.minor`.
    pub fn minor(&self) -> Version {
        Version(
            self.0
                .iter()
                .copied()
                .chain(std::iter::repeat(0))
                .take(2)
                .collect(),
        )
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        let n = self.0.len().max(other.0.len());
        for i in 0..n {
            let (a, b) = (
                self.0.get(i).copied().unwrap_or(0),
                other.0.get(i).copied().unwrap_or(0),
            );
            match a.cmp(&b) {
                Ordering::Equal => continue,
                o => return o,
            }
        }
        Ordering::Equal
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(u64::to_string).collect();
        f.write_str(&parts.join("."))
    }
}

fn minor_of(s: &str) -> Version {
    Version::parse(s)
        .map(|v| v.minor())
        .unwrap_or_else(|| panic!("versions.toml: `{s}` is not a version (a bug in kwin)"))
}

/// The oldest Kubernetes minor kwin supports.
pub fn oldest() -> Version {
    minor_of(&table().kubernetes.oldest)
}

/// The newest Kubernetes minor kwin knows.
pub fn newest() -> Version {
    minor_of(&table().kubernetes.newest)
}

/// Every minor from [`oldest`] to [`newest`].
pub fn known_minors() -> Vec<Version> {
    let (lo, hi) = (oldest(), newest());
    let major = lo.0[0];
    (lo.0[1]..=hi.0[1])
        .map(|m| Version(vec![major, m]))
        .collect()
}

/// kubeadm's pause version for the minor of `kubernetes_version`, if kwin knows the minor.
pub fn pause_version(kubernetes_version: &str) -> Option<&'static str> {
    let minor = Version::parse(kubernetes_version)?.minor().to_string();
    table().pause.minors.get(&minor).map(String::as_str)
}

/// The sandbox (pause) image kubeadm uses for `kubernetes_version`: the table's, for a minor
/// kwin knows; else that of the nearest known minor (validation refuses such versions before
/// anything runs).
pub fn pause_image(kubernetes_version: &str) -> String {
    let t = table();
    let v = Version::parse(kubernetes_version)
        .map(|v| v.minor())
        .unwrap_or_else(newest);
    let clamped = v.clamp(oldest(), newest()).to_string();
    let tag = t.pause.minors.get(&clamped).cloned().unwrap_or_else(|| {
        panic!("versions.toml has no pause image for {clamped} (a bug in kwin)")
    });
    format!("{}:{tag}", t.pause.image)
}

/// Whether a component's version takes a flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    Accepted {
        deprecated: Option<String>,
    },
    /// Added in a later version.
    NotYet {
        added: String,
    },
    /// Removed in `removed` or earlier: the program refuses it.
    Removed {
        removed: String,
        source: String,
    },
}

/// The table's entry for `flag` of `component`.
pub fn flag(component: &str, flag: &str) -> Result<&'static Flag, String> {
    let t = table();
    if !t.components.contains_key(component) {
        return Err(format!(
            "unknown component `{component}` (known: {})",
            t.components.keys().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    t.flags
        .iter()
        .find(|f| f.component == component && f.flag == flag)
        .ok_or_else(|| {
            format!(
                "{component} flag `{flag}` is not in kwin's flag table (engine/src/plan/versions.toml): add it with its upstream source"
            )
        })
}

/// Whether `component` at `version` (of what the component is versioned by) takes `flag`.
pub fn flag_support(component: &str, flag_name: &str, version: &str) -> Result<Support, String> {
    let f = flag(component, flag_name)?;
    let v = Version::parse(version)
        .ok_or_else(|| format!("`{version}` is not a version of {component}"))?;
    if let Some(r) = &f.removed {
        if v >= minor_or_version(r) {
            return Ok(Support::Removed {
                removed: r.clone(),
                source: f.source.clone(),
            });
        }
    }
    if let Some(a) = &f.added {
        if v < minor_or_version(a) {
            return Ok(Support::NotYet { added: a.clone() });
        }
    }
    let deprecated = f
        .deprecated
        .as_ref()
        .filter(|d| v >= minor_or_version(d))
        .cloned();
    Ok(Support::Accepted { deprecated })
}

fn minor_or_version(s: &str) -> Version {
    Version::parse(s)
        .unwrap_or_else(|| panic!("versions.toml: `{s}` is not a version (a bug in kwin)"))
}

/// What a component is versioned by (`kubernetes`, `flannel`, `containerd`).
pub fn versioned_by(component: &str) -> Option<&'static str> {
    table().components.get(component).map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_parses_and_is_consistent() {
        let t = table();
        let known = known_minors();
        assert_eq!(known.first(), Some(&oldest()));
        assert_eq!(known.last(), Some(&newest()));
        for m in &known {
            assert!(
                t.pause.minors.contains_key(&m.to_string()),
                "no pause image for {m}"
            );
        }
        assert_eq!(
            t.pause.minors.len(),
            known.len(),
            "pause images outside the range"
        );
        for f in &t.flags {
            assert!(f.flag.starts_with("--"), "{f:?}");
            assert!(t.components.contains_key(&f.component), "{f:?}");
            assert!(!f.source.is_empty() && !f.defined_in.is_empty(), "{f:?}");
            for v in [&f.added, &f.deprecated, &f.removed].into_iter().flatten() {
                assert!(Version::parse(v).is_some(), "{f:?}");
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for f in &t.flags {
            assert!(seen.insert((&f.component, &f.flag)), "listed twice: {f:?}");
        }
    }

    #[test]
    fn versions_compare_number_by_number() {
        let v = |s: &str| Version::parse(s).expect("version");
        assert!(v("1.35.0") >= v("1.35"));
        assert!(v("1.34.9") < v("1.35"));
        assert!(v("v0.26.7") < v("0.28.9"));
        assert!(v("1.7.29") < v("2.0.0"));
        assert_eq!(v("1.31.4").minor().to_string(), "1.31");
        assert_eq!(v("1.37.0-rc.1"), v("1.37.0"));
        assert_eq!(Version::parse("latest"), None);
    }

    #[test]
    fn kubelet_1_35_refuses_the_pod_infra_flag() {
        let s = |v: &str| flag_support("kubelet", "--pod-infra-container-image", v).expect("known");
        assert!(matches!(
            s("1.34.3"),
            Support::Accepted {
                deprecated: Some(_)
            }
        ));
        assert!(matches!(s("1.35.0"), Support::Removed { .. }));
        assert!(matches!(s("1.37.1"), Support::Removed { .. }));
        assert!(matches!(
            flag_support("kubelet", "--log-dir", "1.29.0"),
            Ok(Support::Removed { .. })
        ));
        assert!(flag_support("kubelet", "--no-such-flag", "1.31.0").is_err());
        assert!(flag_support("kubelett", "--node-ip", "1.31.0").is_err());
    }

    #[test]
    fn pause_images_follow_kubeadm() {
        assert_eq!(pause_image("1.29.4"), "registry.k8s.io/pause:3.9");
        assert_eq!(pause_image("1.31.4"), "registry.k8s.io/pause:3.10");
        assert_eq!(pause_image("1.34.0"), "registry.k8s.io/pause:3.10.1");
        assert_eq!(pause_image("1.37.2"), "registry.k8s.io/pause:3.10.2");
        assert_eq!(pause_version("1.28.0"), None);
    }
}
