//! A systemd unit's state (`systemctl show`), and whether the host runs systemd at all
//! (`/run/systemd/system` exists, as `sd_booted()` checks).

use super::{kv_lines, ok_stdout};
use kwin_engine::fact::{Fact, FactError, FactOutput};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitFact {
    /// Unit name as given (`kubelet` means `kubelet.service`).
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitState {
    /// `loaded`, `not-found`, `masked`, `error`, ...
    pub load: String,
    /// `active`, `inactive`, `failed`, `activating`, ...
    pub active: String,
    /// `running`, `dead`, `exited`, ...
    pub sub: String,
    /// `enabled`, `disabled`, `static`, `masked`, ... (empty when there is no unit file).
    pub unit_file: String,
    /// The unit file changed on disk since systemd loaded it.
    pub need_daemon_reload: bool,
}

impl UnitState {
    pub fn exists(&self) -> bool {
        self.load != "not-found"
    }
    /// Running, or on its way there.
    pub fn is_running(&self) -> bool {
        matches!(self.active.as_str(), "active" | "activating" | "reloading")
    }
    /// Whether the unit counts as enabled. Units that cannot be enabled (`static`,
    /// `generated`, `transient`, `alias`, `indirect`) count as both enabled and disabled:
    /// `systemctl enable`/`disable` would leave them as they are.
    pub fn is_enabled(&self) -> bool {
        matches!(self.unit_file.as_str(), "enabled" | "enabled-runtime") || self.fixed()
    }
    pub fn is_disabled(&self) -> bool {
        matches!(
            self.unit_file.as_str(),
            "disabled" | "masked" | "linked" | ""
        ) || self.fixed()
    }
    fn fixed(&self) -> bool {
        matches!(
            self.unit_file.as_str(),
            "static" | "generated" | "transient" | "alias" | "indirect"
        )
    }
}

/// Answer of [`UnitFact`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Systemd {
    /// The host was not booted with systemd (containers, the lab's namespaced hosts).
    Absent,
    Unit(UnitState),
}

impl Fact for UnitFact {
    type Output = Systemd;

    fn key(&self) -> String {
        format!("service:{}", self.name)
    }

    fn command(&self, _shell: Shell) -> String {
        format!(
            "if [ -d /run/systemd/system ]; then echo systemd=yes; systemctl show -p LoadState -p ActiveState -p SubState -p UnitFileState -p NeedDaemonReload -- {}; else echo systemd=no; fi",
            sh_quote(&self.name)
        )
    }

    fn parse(&self, out: &FactOutput) -> Result<Systemd, FactError> {
        parse_unit(ok_stdout(out)?)
    }
}

/// Parse [`UnitFact`]'s output.
pub fn parse_unit(text: &str) -> Result<Systemd, FactError> {
    let kv = kv_lines(text)?;
    let get = |k: &str| kv.iter().find(|(a, _)| *a == k).map(|(_, v)| v.to_string());
    match get("systemd").as_deref() {
        Some("no") => return Ok(Systemd::Absent),
        Some("yes") => {}
        _ => return Err(FactError::Parse("no `systemd=` line".into())),
    }
    let need =
        |k: &str| get(k).ok_or_else(|| FactError::Parse(format!("systemctl show printed no {k}")));
    Ok(Systemd::Unit(UnitState {
        load: need("LoadState")?,
        active: need("ActiveState")?,
        sub: get("SubState").unwrap_or_default(),
        unit_file: get("UnitFileState").unwrap_or_default(),
        need_daemon_reload: get("NeedDaemonReload").as_deref() == Some("yes"),
    }))
}

#[cfg(test)]
mod tests {
    use super::super::out;
    use super::*;

    #[test]
    fn running_enabled_unit() {
        // `systemctl show -p ...` prints one `Property=value` line each, in systemd's order.
        let s = UnitFact { name: "ssh".into() }
            .parse(&out(
                "systemd=yes\nLoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=enabled\nNeedDaemonReload=no\n",
                0,
            ))
            .expect("parse");
        let Systemd::Unit(u) = s else {
            panic!("no unit")
        };
        assert!(u.exists() && u.is_running() && u.is_enabled() && !u.is_disabled());
        assert!(!u.need_daemon_reload);
    }

    #[test]
    fn missing_unit() {
        let s = parse_unit("systemd=yes\nNeedDaemonReload=no\nLoadState=not-found\nActiveState=inactive\nSubState=dead\nUnitFileState=\n").expect("parse");
        let Systemd::Unit(u) = s else {
            panic!("no unit")
        };
        assert!(!u.exists() && !u.is_running() && u.is_disabled());
    }

    #[test]
    fn static_and_reload() {
        let s = parse_unit("systemd=yes\nLoadState=loaded\nActiveState=failed\nSubState=failed\nUnitFileState=static\nNeedDaemonReload=yes\n").expect("parse");
        let Systemd::Unit(u) = s else {
            panic!("no unit")
        };
        assert!(u.is_enabled() && u.is_disabled() && !u.is_running() && u.need_daemon_reload);
    }

    #[test]
    fn no_systemd() {
        assert_eq!(parse_unit("systemd=no\n"), Ok(Systemd::Absent));
        assert!(parse_unit("LoadState=loaded\n").is_err());
        assert!(parse_unit("systemd=yes\nSubState=dead\n").is_err());
    }
}
