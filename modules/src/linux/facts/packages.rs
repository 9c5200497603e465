//! Installed packages and the host's package manager, read from the package database
//! (`dpkg-query`, `rpm -q`): no lock, no network.

use super::ok_stdout;
use kwin_engine::fact::{Fact, FactError, FactOutput};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;
use std::collections::BTreeMap;

/// Where dnf's versionlock plugin keeps its locks.
pub const DNF_VERSIONLOCK_LIST: &str = "/etc/dnf/plugins/versionlock.list";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackagesFact {
    /// Package names, validated (no glob characters, no leading `-`).
    pub names: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manager {
    /// dpkg + apt-get (Debian, Ubuntu).
    Apt,
    /// rpm + dnf (Fedora, RHEL 8+, Rocky, Alma).
    Dnf,
    /// rpm without dnf (old yum-only or unusual systems): not supported.
    RpmOnly,
    None,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Installed {
    /// Installed versions (rpm may hold several, e.g. kernels). apt: `${Version}`; dnf:
    /// `EPOCH:VERSION-RELEASE`.
    pub versions: Vec<String>,
    /// apt: dpkg selection `hold`; dnf: listed in the versionlock plugin's list.
    pub held: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packages {
    pub manager: Manager,
    /// Installed packages among the asked names.
    pub installed: BTreeMap<String, Installed>,
}

impl Fact for PackagesFact {
    type Output = Packages;

    fn key(&self) -> String {
        let mut n = self.names.clone();
        n.sort();
        format!("packages:{}", n.join(","))
    }

    fn command(&self, _shell: Shell) -> String {
        let names: Vec<String> = self.names.iter().map(|n| sh_quote(n)).collect();
        let names = names.join(" ");
        format!(
            "if command -v dpkg-query >/dev/null 2>&1; then\n\
             echo manager=apt\n\
             dpkg-query -W -f='pkg=${{Package}}\\t${{db:Status-Abbrev}}\\t${{Version}}\\n' {names} 2>/dev/null\n\
             :\n\
             elif command -v rpm >/dev/null 2>&1; then\n\
             if command -v dnf >/dev/null 2>&1; then echo manager=dnf; else echo manager=rpm; fi\n\
             rpm -q --qf 'pkg=%{{NAME}}\\tii \\t%{{EPOCHNUM}}:%{{VERSION}}-%{{RELEASE}}\\n' {names} | grep '^pkg=' || :\n\
             if [ -r {lock} ]; then sed 's/^/lock=/' {lock}; fi\n\
             else echo manager=none; fi",
            lock = DNF_VERSIONLOCK_LIST
        )
    }

    fn parse(&self, out: &FactOutput) -> Result<Packages, FactError> {
        parse_packages(&self.names, ok_stdout(out)?)
    }
}

/// Parse [`PackagesFact`]'s output for `names`.
pub fn parse_packages(names: &[String], text: &str) -> Result<Packages, FactError> {
    let mut manager = None;
    let mut installed: BTreeMap<String, Installed> = BTreeMap::new();
    let mut locks = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let (k, v) = line
            .split_once('=')
            .ok_or_else(|| FactError::Parse(format!("unexpected line `{line}`")))?;
        match k {
            "manager" => {
                manager = Some(match v {
                    "apt" => Manager::Apt,
                    "dnf" => Manager::Dnf,
                    "rpm" => Manager::RpmOnly,
                    "none" => Manager::None,
                    o => return Err(FactError::Parse(format!("unknown package manager `{o}`"))),
                })
            }
            "pkg" => {
                let f: Vec<&str> = v.split('\t').collect();
                let [name, status, version] = f.as_slice() else {
                    return Err(FactError::Parse(format!("bad package line `{v}`")));
                };
                // dpkg's abbreviated status: desired (u/i/h/r/p), state (n/c/H/U/F/W/t/i),
                // error flag. Only state `i` is a usable installation.
                let mut st = status.chars();
                let desired = st.next();
                let state = st.next();
                if state != Some('i') || !names.iter().any(|n| n == name) {
                    continue;
                }
                let e = installed.entry(name.to_string()).or_default();
                e.versions.push(version.to_string());
                e.held |= desired == Some('h');
            }
            "lock" => locks.push(v),
            o => return Err(FactError::Parse(format!("unexpected key `{o}`"))),
        }
    }
    let manager = manager.ok_or_else(|| FactError::Parse("no `manager=` line".into()))?;
    for (name, inst) in installed.iter_mut() {
        if locks.iter().any(|l| versionlock_names(l, name)) {
            inst.held = true;
        }
    }
    Ok(Packages { manager, installed })
}

/// Whether a versionlock.list line (`kubelet-0:1.29.0-150500.1.1.*`) locks package `name`.
pub fn versionlock_names(line: &str, name: &str) -> bool {
    let line = line.trim();
    if line.starts_with('#') || line.starts_with('!') {
        return false;
    }
    line.strip_prefix(name)
        .and_then(|r| r.strip_prefix('-'))
        .and_then(|r| r.chars().next())
        .is_some_and(|c| c.is_ascii_digit())
}

/// Whether an installed version satisfies a wanted one. A trailing `*` in `wanted` matches
/// any rest. apt compares whole versions; dnf also accepts the version without epoch, and
/// `VERSION` alone for any release.
pub fn version_matches(manager: Manager, installed: &str, wanted: &str) -> bool {
    let eq = |have: &str| match wanted.strip_suffix('*') {
        Some(prefix) => have.starts_with(prefix),
        None => have == wanted,
    };
    match manager {
        Manager::Dnf | Manager::RpmOnly => {
            let no_epoch = installed.split_once(':').map_or(installed, |(_, r)| r);
            let version_only = no_epoch.rsplit_once('-').map_or(no_epoch, |(v, _)| v);
            eq(installed) || eq(no_epoch) || eq(version_only)
        }
        _ => eq(installed),
    }
}

#[cfg(test)]
mod tests {
    use super::super::out;
    use super::*;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn dpkg_query_output() {
        // The dpkg-query format with kubelet held, curl installed, nano removed (config files
        // left).
        let text = "manager=apt\npkg=curl\tii \t7.88.1-10+deb12u12\npkg=kubelet\thi \t1.30.2-1.1\npkg=nano\trc \t7.2-1+deb12u1\n";
        let f = PackagesFact {
            names: names(&["curl", "kubelet", "nano", "vim"]),
        };
        let p = f.parse(&out(text, 0)).expect("parse");
        assert_eq!(p.manager, Manager::Apt);
        assert_eq!(p.installed.len(), 2);
        assert_eq!(p.installed["curl"].versions, vec!["7.88.1-10+deb12u12"]);
        assert!(!p.installed["curl"].held);
        assert!(p.installed["kubelet"].held);
        assert!(!p.installed.contains_key("nano"));
        assert_eq!(f.key(), "packages:curl,kubelet,nano,vim");
    }

    #[test]
    fn rpm_output_with_versionlock() {
        // The rpm -q --qf format (not-installed lines are filtered by grep) with two kernels,
        // plus /etc/dnf/plugins/versionlock.list lines as dnf's versionlock plugin writes them.
        let text = "manager=dnf\npkg=kernel\tii \t0:5.14.0-362.8.1.el9_3\npkg=kernel\tii \t0:5.14.0-427.13.1.el9_4\npkg=kubelet\tii \t0:1.30.2-150500.1.1\nlock=# Added lock on Mon Jun 10 2024\nlock=kubelet-0:1.30.2-150500.1.1.*\nlock=!containerd-0:1.6.*\n";
        let p = parse_packages(&names(&["kernel", "kubelet", "containerd"]), text).expect("parse");
        assert_eq!(p.manager, Manager::Dnf);
        assert_eq!(p.installed["kernel"].versions.len(), 2);
        assert!(p.installed["kubelet"].held);
        assert!(!p.installed["kernel"].held);
    }

    #[test]
    fn captured_dpkg_query() {
        // Captured on Debian 12: `dpkg-query -W -f=... curl nano libc6 nonexistentpkg`
        // (nano known but not installed; the unknown name only on stderr, exit 1 swallowed).
        let text = "manager=apt\npkg=curl\tii \t7.88.1-10+deb12u15\npkg=libc6\tii \t2.36-9+deb12u14\npkg=nano\tun \t\n";
        let p = parse_packages(&names(&["curl", "nano", "libc6", "nonexistentpkg"]), text)
            .expect("parse");
        assert_eq!(
            p.installed.keys().collect::<Vec<_>>(),
            vec!["curl", "libc6"]
        );
        assert_eq!(p.installed["libc6"].versions, vec!["2.36-9+deb12u14"]);
    }

    #[test]
    fn no_manager() {
        let p = parse_packages(&[], "manager=none\n").expect("parse");
        assert_eq!(p.manager, Manager::None);
        assert!(parse_packages(&[], "pkg=x\tii \t1\n").is_err());
        assert!(parse_packages(&[], "manager=pacman\n").is_err());
        assert!(parse_packages(&names(&["x"]), "manager=apt\npkg=x\n").is_err());
    }

    #[test]
    fn versions() {
        use Manager::*;
        assert!(version_matches(Apt, "1.30.2-1.1", "1.30.2-1.1"));
        assert!(!version_matches(Apt, "1.30.2-1.1", "1.30.2"));
        assert!(version_matches(Apt, "1.30.2-1.1", "1.30.2-*"));
        assert!(version_matches(Apt, "1:2.3-1", "1:2.3-1"));
        assert!(version_matches(Dnf, "0:1.30.2-150500.1.1", "1.30.2"));
        assert!(version_matches(
            Dnf,
            "0:1.30.2-150500.1.1",
            "1.30.2-150500.1.1"
        ));
        assert!(version_matches(
            Dnf,
            "0:1.30.2-150500.1.1",
            "0:1.30.2-150500.1.1"
        ));
        assert!(version_matches(Dnf, "0:1.30.2-150500.1.1", "1.30.*"));
        assert!(!version_matches(Dnf, "0:1.30.2-150500.1.1", "1.30.20"));
        assert!(versionlock_names("kubelet-0:1.30.2-1.*", "kubelet"));
        assert!(!versionlock_names("kubelet-tools-0:1.0-1.*", "kubelet"));
    }
}
