//! The support matrix's rules: which Kubernetes minors are supported or end of life on a
//! given day, which patch releases exist, and which component versions upstream supports with
//! each minor. The data is `[matrix]` of `versions.toml` (parsed by `versions.rs`), every row
//! with its upstream source; nothing else in kwin holds a version rule.
//!
//! Readers: validation (`validate/cluster.rs`: unreleased patches, end-of-life warnings,
//! containerd / Calico / flannel / CNI plugins / crictl / cri-dockerd versions, Calico with
//! Windows Server 2025), the effective values (the default `containerd_source` and component
//! pins), `kwin init` (the starter's Kubernetes release, [`newest_release`]), `kwin --version`
//! and docs/versions.md ([`markdown`]).

use super::versions::{self, Compat, MinorRow, Version, WindowsServer};
use std::fmt::Write as _;

/// A calendar day (UTC), ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Day {
    pub year: i64,
    pub month: u32,
    pub day: u32,
}

impl Day {
    /// `YYYY-MM-DD`.
    pub fn parse(s: &str) -> Option<Day> {
        let mut it = s.trim().splitn(3, '-');
        let year = it.next()?.parse().ok()?;
        let month = it.next()?.parse().ok()?;
        let day = it.next()?.parse().ok()?;
        ((1..=12).contains(&month) && (1..=31).contains(&day)).then_some(Day { year, month, day })
    }

    /// Today, from the system clock (UTC).
    pub fn today() -> Day {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Day::from_unix_days(i64::try_from(secs / 86_400).unwrap_or(0))
    }

    /// The civil date of a day count since 1970-01-01 (H. Hinnant's `civil_from_days`).
    pub fn from_unix_days(z: i64) -> Day {
        let z = z + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
        let month = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
        let year = yoe + era * 400 + i64::from(month <= 2);
        Day { year, month, day }
    }
}

impl std::fmt::Display for Day {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

fn day(s: &str) -> Day {
    Day::parse(s).unwrap_or_else(|| panic!("versions.toml: `{s}` is not a day (a bug in kwin)"))
}

fn version(s: &str) -> Version {
    Version::parse(s)
        .unwrap_or_else(|| panic!("versions.toml: `{s}` is not a version (a bug in kwin)"))
}

/// Where a minor stands on a day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Patched upstream until `until`.
    Supported { until: String },
    /// No more patches since `since`.
    EndOfLife { since: String },
}

/// The matrix row of a minor (`1.37`, or any version of it).
pub fn minor_row(v: &Version) -> Option<&'static MinorRow> {
    Support::builtin().minor_row(v)
}

/// The status of `minor` on `today` ([`Support::status`]).
pub fn status(minor: &Version, today: Day) -> Option<Status> {
    Support::builtin().status(minor, today)
}

/// The minors upstream supports on `today`, oldest first.
pub fn supported_minors(today: Day) -> Vec<String> {
    Support::builtin().supported_minors(today)
}

/// The newest Kubernetes release kwin's matrix knows ([`Support::newest_release`]).
pub fn newest_release() -> String {
    Support::builtin().newest_release()
}

/// Whether a Kubernetes release exists ([`Support::patch_released`]).
pub fn patch_released(v: &Version) -> Result<(), String> {
    Support::builtin().patch_released(v)
}

/// Whether `v` is one of the versions `mins` allows: an entry of its own branch
/// (`major.minor`) at or below it, or a branch newer than every entry of the same major.
pub fn within(mins: &[String], v: &Version) -> bool {
    let branch = v.minor();
    let mut newest_same_major: Option<Version> = None;
    for m in mins {
        let m = version(m);
        if m.minor() == branch && *v >= m {
            return true;
        }
        if m.0.first() == v.0.first() {
            let b = m.minor();
            if newest_same_major.as_ref().is_none_or(|n| b > *n) {
                newest_same_major = Some(b);
            }
        }
    }
    newest_same_major.is_some_and(|n| branch > n)
}

/// What the matrix says of a component version with a Kubernetes minor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fit {
    Ok,
    /// Outside the versions upstream supports: these are (`2.4.0+, 2.3.0+`).
    Outside {
        allowed: String,
        source: String,
    },
    /// The component does not work with this minor at all.
    Refused {
        why: String,
        source: String,
    },
}

fn plus(mins: &[String]) -> String {
    mins.iter()
        .map(|m| format!("{m}+"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// containerd `v` with Kubernetes `minor` ([`Support::containerd_fits`]).
pub fn containerd_fits(minor: &Version, v: &Version) -> Fit {
    Support::builtin().containerd_fits(minor, v)
}

/// Whether the distributions' own containerd packages (all 1.x) can serve `minor`: its
/// containerd row lists a 1.x branch.
pub fn package_containerd_fits(minor: &Version) -> bool {
    minor_row(minor).is_none_or(|r| {
        r.containerd
            .iter()
            .any(|m| version(m).0.first() == Some(&1))
    })
}

fn covers(c: &Compat, minor: &Version) -> bool {
    c.from.as_deref().is_none_or(|f| *minor >= version(f))
        && c.until.as_deref().is_none_or(|u| *minor <= version(u))
}

/// The rows of `component` (a `[versions]` key) that cover `minor`.
pub fn compat_rows(component: &str, minor: &Version) -> Vec<&'static Compat> {
    versions::table()
        .matrix
        .compat
        .iter()
        .filter(|c| c.component == component && covers(c, &minor.minor()))
        .collect()
}

/// `component` (a `[versions]` key) at `v` with Kubernetes `minor`.
pub fn component_fits(component: &str, minor: &Version, v: &Version) -> Fit {
    for c in compat_rows(component, minor) {
        if let Some(why) = &c.refused {
            return Fit::Refused {
                why: why.clone(),
                source: c.source.clone(),
            };
        }
        if c.same_minor && v.minor() != minor.minor() {
            return Fit::Outside {
                allowed: format!("v{}.x", minor.minor()),
                source: c.source.clone(),
            };
        }
        if !c.min.is_empty() && !within(&c.min, v) {
            return Fit::Outside {
                allowed: plus(&c.min),
                source: c.source.clone(),
            };
        }
    }
    Fit::Ok
}

/// Whether the kubelet of `minor` refuses cgroup v1 hosts unless told otherwise
/// (`failCgroupV1`).
pub fn kubelet_refuses_cgroup_v1(minor: &Version) -> bool {
    minor.minor() >= version(&versions::table().matrix.cgroup_v1_refused_from)
}

/// The day a containerd version's branch left support, if it has by `today`.
pub fn containerd_branch_ended(v: &Version, today: Day) -> Option<String> {
    let b = v.minor();
    versions::table()
        .matrix
        .containerd_branches
        .iter()
        .find(|r| version(&r.branch) == b)
        .filter(|r| today > day(&r.end_of_life))
        .map(|r| r.end_of_life.clone())
}

/// The Windows Server release of a `node.kubernetes.io/windows-build` value
/// (`10.0.20348`, `10.0.20348.2113`).
pub fn windows_server(build: &str) -> Option<&'static WindowsServer> {
    versions::table().matrix.windows_server.iter().find(|w| {
        build == w.build
            || build
                .strip_prefix(w.build.as_str())
                .is_some_and(|rest| rest.starts_with('.'))
    })
}

/// What the support matrix says of a Windows node that runs a release: refused, or a warning,
/// in the words validation (a plan's `node.kubernetes.io/windows-build` label) and the probe
/// of the host (windows-worker's `windows-build` step, through
/// `effective::WindowsEff::server_releases`) both give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowsServerVerdict {
    /// Refused (Calico on a release it does not support: validation's
    /// `calico-windows-server`), else a warning (a release Kubernetes no longer lists:
    /// `windows-server-unsupported`).
    pub refused: bool,
    /// What is wrong, after "`<host>` runs ": "Windows Server 2025, which Calico does not
    /// support".
    pub what: String,
    /// The way out, with the matrix row's source.
    pub fix: String,
}

/// The matrix's verdict on a Windows node running `w` in a cluster whose pod network is
/// Calico (`calico`) or not; `None` when nothing is wrong.
pub fn windows_server_verdict(w: &WindowsServer, calico: bool) -> Option<WindowsServerVerdict> {
    let names = |keep: &dyn Fn(&WindowsServer) -> bool| {
        let v: Vec<&str> = versions::table()
            .matrix
            .windows_server
            .iter()
            .filter(|r| keep(r))
            .map(|r| r.name.as_str())
            .collect();
        v.join(" or ")
    };
    if calico && !w.calico {
        Some(WindowsServerVerdict {
            refused: true,
            what: format!("Windows Server {}, which Calico does not support", w.name),
            fix: format!(
                "use flannel (plugin = \"flannel\") for this cluster, or Windows Server {} for this node ({})",
                names(&|r| r.supported && r.calico),
                w.source
            ),
        })
    } else if !w.supported {
        Some(WindowsServerVerdict {
            refused: false,
            what: format!(
                "Windows Server {}, which current Kubernetes releases no longer list",
                w.name
            ),
            fix: format!(
                "use Windows Server {} for this node ({})",
                names(&|r| r.supported),
                w.source
            ),
        })
    } else {
        None
    }
}

/// The default pins (`[matrix.defaults]`).
pub fn pins() -> &'static versions::Pins {
    &versions::table().matrix.defaults
}

/// What a new minor still lacks in kwin's matrix ([`Support::missing_for_minor`]).
pub fn missing_for_minor(minor: &str) -> Vec<String> {
    Support::builtin().missing_for_minor(minor)
}

/// kwin's matrix as Markdown: docs/versions.md ([`Support::markdown`]).
pub fn markdown() -> String {
    Support::builtin().markdown()
}

/// The support matrix of a version table: kwin's own ([`Support::builtin`]), or another one
/// a test builds to show what a changed row changes.
#[derive(Debug, Clone, Copy)]
pub struct Support<'t>(pub &'t versions::Table);

impl Support<'static> {
    /// kwin's matrix (`versions.toml`, embedded).
    pub fn builtin() -> Support<'static> {
        Support(versions::table())
    }
}

impl<'t> Support<'t> {
    /// The matrix row of a minor (`1.37`, or any version of it).
    pub fn minor_row(&self, v: &Version) -> Option<&'t MinorRow> {
        let m = v.minor();
        self.0.matrix.minors.iter().find(|r| version(&r.minor) == m)
    }

    /// The status of `minor` on `today`; none for a minor the matrix does not hold.
    pub fn status(&self, minor: &Version, today: Day) -> Option<Status> {
        let r = self.minor_row(minor)?;
        Some(if today > day(&r.end_of_life) {
            Status::EndOfLife {
                since: r.end_of_life.clone(),
            }
        } else {
            Status::Supported {
                until: r.end_of_life.clone(),
            }
        })
    }

    /// The minors upstream supports on `today`, oldest first.
    pub fn supported_minors(&self, today: Day) -> Vec<String> {
        self.0
            .matrix
            .minors
            .iter()
            .filter(|r| today <= day(&r.end_of_life))
            .map(|r| r.minor.clone())
            .collect()
    }

    /// The newest Kubernetes release the matrix knows: the newest minor's newest patch. What
    /// `kwin init` writes and every example uses.
    pub fn newest_release(&self) -> String {
        let newest = version(&self.0.kubernetes.newest).minor();
        self.minor_row(&newest)
            .map(|r| r.latest_patch.clone())
            .unwrap_or_else(|| {
                panic!("versions.toml has no matrix row for {newest} (a bug in kwin)")
            })
    }

    /// Whether a Kubernetes release exists: `Err(latest patch of its minor)` for a patch newer
    /// than the newest the matrix knows; `Ok` also for a minor it does not hold (validation
    /// refuses those for that reason).
    pub fn patch_released(&self, v: &Version) -> Result<(), String> {
        match self.minor_row(v) {
            Some(r) if *v > version(&r.latest_patch) => Err(r.latest_patch.clone()),
            _ => Ok(()),
        }
    }

    /// containerd `v` with Kubernetes `minor` (its row; `Ok` for a minor the matrix lacks).
    pub fn containerd_fits(&self, minor: &Version, v: &Version) -> Fit {
        match self.minor_row(minor) {
            Some(r) if !within(&r.containerd, v) => Fit::Outside {
                allowed: plus(&r.containerd),
                source: self.0.matrix.containerd_source.clone(),
            },
            _ => Fit::Ok,
        }
    }

    /// Everything a new Kubernetes minor needs before kwin can offer it, missing for `minor`:
    /// its matrix row, kubeadm's pause image, a place inside `[kubernetes]`, a containerd row
    /// the default containerd fits, and every flag the recipes render accepted or refused by the
    /// flag table (flags follow from `added`/`removed`; this lists the rows and pins only).
    pub fn missing_for_minor(&self, minor: &str) -> Vec<String> {
        let t = self.0;
        let pins = &t.matrix.defaults;
        let (oldest, newest) = (
            version(&t.kubernetes.oldest).minor(),
            version(&t.kubernetes.newest).minor(),
        );
        let v = version(minor);
        let mut missing = Vec::new();
        let Some(row) = self.minor_row(&v) else {
            missing.push(format!(
                "[[matrix.minors]] minor = \"{minor}\": released, end_of_life, latest_patch, containerd (containerd RELEASES.md)"
            ));
            if !t.pause.minors.contains_key(minor) {
                missing.push(format!(
                    "[pause.minors] \"{minor}\": kubeadm's PauseVersion (cmd/kubeadm/app/constants/constants.go)"
                ));
            }
            if v > newest {
                missing.push(format!(
                    "[kubernetes] newest = \"{minor}\" with newest_source"
                ));
            }
            return missing;
        };
        if !t.pause.minors.contains_key(minor) {
            missing.push(format!(
                "[pause.minors] \"{minor}\": kubeadm's PauseVersion (cmd/kubeadm/app/constants/constants.go)"
            ));
        }
        if v > newest || v < oldest {
            missing.push(format!("[kubernetes] oldest..newest covering {minor}"));
        }
        if version(&row.latest_patch).minor() != v {
            missing.push(format!("latest_patch of {minor} is not a {minor} release"));
        }
        if self.containerd_fits(&v, &version(&pins.containerd)) != Fit::Ok {
            missing.push(format!(
                "[matrix.defaults] containerd {} is outside {minor}'s containerd row",
                pins.containerd
            ));
        }
        for (component, pin) in [
            ("calico", &pins.calico),
            ("flannel", &pins.flannel),
            ("cni_plugins", &pins.cni_plugins),
            ("runc", &pins.runc),
        ] {
            if component_fits(component, &v, &version(pin)) != Fit::Ok {
                missing.push(format!(
                    "[matrix.defaults] {component} {pin} is outside the [[matrix.compat]] rows of {minor}"
                ));
            }
        }
        missing
    }

    /// The matrix as Markdown: docs/versions.md (`tests/versions_matrix.rs` holds the file equal
    /// to it).
    pub fn markdown(&self) -> String {
        let t = self.0;
        let m = &t.matrix;
        let today = day(&m.checked);
        let mut o = String::new();
        let _ = writeln!(o, "# Supported versions\n");
        let _ = writeln!(
            o,
            "Generated from kwin's support matrix (`engine/src/plan/versions.toml`, `[matrix]`) by\n`KWIN_BLESS=1 cargo test --test versions_matrix`; do not edit by hand. Every row was read\nagainst the upstream source named with it on {}. `kwin validate` refuses what the matrix\ndoes not support and names the versions to use; `kwin plan` warns on an end-of-life minor.\n",
            m.checked
        );
        let _ = writeln!(o, "## Kubernetes\n");
        let _ = writeln!(
            o,
            "| minor | released | end of life | status on {} | patch releases | pause | containerd |",
            m.checked
        );
        let _ = writeln!(o, "|---|---|---|---|---|---|---|");
        for r in m.minors.iter().rev() {
            let st = match self.status(&version(&r.minor), today) {
                Some(Status::EndOfLife { .. }) => "end of life",
                _ => "supported",
            };
            let pause = t.pause.minors.get(&r.minor).map_or("?", String::as_str);
            let _ = writeln!(
                o,
                "| {} | {} | {} | {st} | {}.0 to {} | {}:{pause} | {} |",
                r.minor,
                r.released,
                r.end_of_life,
                r.minor,
                r.latest_patch,
                t.pause.image,
                plus(&r.containerd)
            );
        }
        let _ = writeln!(
            o,
            "\nSources: {} (releases, end of life); {} (patches); {} (containerd); {} (pause).\n",
            m.release_source, m.patch_source, m.containerd_source, t.pause.source
        );
        let _ = writeln!(o, "## Components\n");
        let _ = writeln!(o, "| component | Kubernetes | versions | source |");
        let _ = writeln!(o, "|---|---|---|---|");
        for c in &m.compat {
            let range = match (&c.from, &c.until) {
                (Some(f), Some(u)) => format!("{f} to {u}"),
                (Some(f), None) => format!("{f} and later"),
                (None, Some(u)) => format!("up to {u}"),
                (None, None) => "every minor".to_string(),
            };
            let what = if let Some(why) = &c.refused {
                format!("refused: {why}")
            } else if c.same_minor {
                "the Kubernetes minor (vX.Y.z)".to_string()
            } else {
                plus(&c.min)
            };
            let _ = writeln!(o, "| {} | {range} | {what} | {} |", c.component, c.source);
        }
        let _ = writeln!(o, "\ncontainerd branches (end of support):\n");
        for b in &m.containerd_branches {
            let _ = writeln!(o, "- {}: {}", b.branch, b.end_of_life);
        }
        let _ = writeln!(o, "\n## Defaults\n");
        let p = &m.defaults;
        let _ = writeln!(
            o,
            "`kwin init` writes Kubernetes {}; where a plan's `[versions]` says nothing kwin installs:\n",
            self.newest_release()
        );
        for (k, v) in [
            ("containerd", &p.containerd),
            ("runc", &p.runc),
            ("flannel", &p.flannel),
            ("calico", &p.calico),
            ("cni_plugins", &p.cni_plugins),
            ("cri_dockerd", &p.cri_dockerd),
        ] {
            let _ = writeln!(o, "- {k}: {v}");
        }
        let _ = writeln!(
            o,
            "\nWith Kubernetes 1.36 and later (containerd 2.x only) `runtime.containerd_source` defaults\nto `release`: the distributions' own containerd packages are 1.x.\n"
        );
        let _ = writeln!(o, "## Windows Server\n");
        let _ = writeln!(
            o,
            "| release | build | Kubernetes lists it | Calico | source |"
        );
        let _ = writeln!(o, "|---|---|---|---|---|");
        for w in &m.windows_server {
            let yn = |b: bool| if b { "yes" } else { "no" };
            let _ = writeln!(
                o,
                "| Windows Server {} | {} | {} | {} | {} |",
                w.name,
                w.build,
                yn(w.supported),
                yn(w.calico),
                w.source
            );
        }
        let _ = writeln!(o, "\n## Linux distributions\n");
        let _ = writeln!(
            o,
            "| distribution | `/etc/os-release` | containerd package | source |"
        );
        let _ = writeln!(o, "|---|---|---|---|");
        for d in &m.linux {
            let _ = writeln!(
                o,
                "| {} | ID={} VERSION_ID={} | {} | {} |",
                d.name, d.id, d.version, d.containerd_package, d.source
            );
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).expect("version")
    }

    #[test]
    fn days_come_from_the_clock_as_civil_dates() {
        assert_eq!(Day::from_unix_days(0).to_string(), "1970-01-01");
        assert_eq!(Day::from_unix_days(20_786).to_string(), "2026-11-29");
        assert_eq!(Day::from_unix_days(11_016).to_string(), "2000-02-29");
        assert!(Day::parse("2027-02-28") > Day::parse("2026-11-29"));
        assert_eq!(Day::parse("2026-13-01"), None);
    }

    #[test]
    fn minors_are_supported_or_end_of_life_by_their_dates() {
        let on = |d: &str| Day::parse(d).expect("day");
        assert_eq!(supported_minors(on("2026-11-29")), ["1.35", "1.36", "1.37"]);
        assert!(matches!(
            status(&v("1.31"), on("2026-11-29")),
            Some(Status::EndOfLife { since }) if since == "2025-10-28"
        ));
        assert!(matches!(
            status(&v("1.35.2"), on("2027-02-28")),
            Some(Status::Supported { .. })
        ));
        assert!(matches!(
            status(&v("1.35.2"), on("2027-03-01")),
            Some(Status::EndOfLife { .. })
        ));
        assert_eq!(status(&v("1.28"), on("2026-11-29")), None);
    }

    #[test]
    fn only_released_patches_exist() {
        assert_eq!(patch_released(&v("1.37.2")), Ok(()));
        assert_eq!(patch_released(&v("1.37.99")), Err("1.37.2".to_string()));
        assert_eq!(patch_released(&v("1.36.6")), Err("1.36.5".to_string()));
        assert_eq!(newest_release(), "1.37.2");
    }

    #[test]
    fn containerd_follows_its_release_table() {
        let fits = |k: &str, c: &str| containerd_fits(&v(k), &v(c)) == Fit::Ok;
        assert!(!fits("1.36", "1.7.29"), "1.36 supports containerd 2.x only");
        assert!(!fits("1.37", "2.2.9"), "1.37: 2.4.0+, 2.3.0+");
        assert!(fits("1.37", "2.3.0") && fits("1.37", "2.4.2") && fits("1.37", "2.5.0"));
        assert!(fits("1.35", "1.7.28") && !fits("1.35", "1.7.27"));
        assert!(!fits("1.35", "2.1.4") && fits("1.35", "2.1.5"));
        assert!(!fits("1.29", "2.0.0"), "1.29 lists 1.x only");
        assert!(!package_containerd_fits(&v("1.36")));
        assert!(package_containerd_fits(&v("1.35")));
    }

    #[test]
    fn components_follow_their_rows() {
        assert!(matches!(
            component_fits("cri_dockerd", &v("1.36"), &v("0.4.3")),
            Fit::Refused { why, .. } if why.contains("#560")
        ));
        assert_eq!(
            component_fits("cri_dockerd", &v("1.35"), &v("0.4.3")),
            Fit::Ok
        );
        assert!(matches!(
            component_fits("calico", &v("1.37"), &v("v3.29.7")),
            Fit::Outside { allowed, .. } if allowed == "v3.31.0+"
        ));
        assert_eq!(component_fits("calico", &v("1.35"), &v("v3.29.7")), Fit::Ok);
        assert!(matches!(
            component_fits("crictl", &v("1.37"), &v("v1.34.0")),
            Fit::Outside { .. }
        ));
        assert_eq!(component_fits("crictl", &v("1.37"), &v("v1.37.0")), Fit::Ok);
    }

    #[test]
    fn windows_builds_are_found_by_prefix() {
        assert_eq!(windows_server("10.0.26100").map(|w| w.calico), Some(false));
        let verdict = |build: &str, calico: bool| {
            windows_server(build).and_then(|w| windows_server_verdict(w, calico))
        };
        let v = verdict("10.0.26100", true).expect("Calico on 2025 is refused");
        assert!(v.refused, "{v:?}");
        assert!(v.fix.contains("Windows Server 2022 for this node"), "{v:?}");
        assert_eq!(verdict("10.0.26100", false), None);
        assert_eq!(verdict("10.0.20348", true), None);
        let v = verdict("10.0.17763", false).expect("2019 is a warning");
        assert!(!v.refused, "{v:?}");
        assert!(v.fix.contains("Windows Server 2022 or 2025"), "{v:?}");
        assert_eq!(
            windows_server("10.0.20348.2113").map(|w| w.name.as_str()),
            Some("2022")
        );
        assert!(windows_server("10.0.203481").is_none());
    }

    #[test]
    fn containerd_branches_leave_support_by_date() {
        let on = Day::parse("2026-11-29").expect("day");
        assert_eq!(
            containerd_branch_ended(&v("1.7.29"), on).as_deref(),
            Some("2026-09-30")
        );
        assert_eq!(containerd_branch_ended(&v("2.3.7"), on), None);
    }
}
