//! Connection specs: how to reach one host, fully resolved from the plan (`plan::load`
//! builds them), and where a connection's secrets come from. Pure data with the one rule
//! of which shell a host's scripts are written for ([`ConnSpec::script_shell`]); the
//! transports (`transport::ssh`, `transport::winrm`, `transport::connect`) take them. This
//! layer sits below `plan`, which re-exports every type here.

use crate::secret::Secret;
use crate::shell::Shell;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Environment variable that makes WinRM hosts speak the POSIX dialect of the lab's WinRM
/// stand-in host (`lab/winrm-stand-in`), for kwin's end-to-end tests only.
pub const WINRM_STAND_IN_ENV: &str = "KWIN_WINRM_STAND_IN";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WinrmAuth {
    /// NTLM (message encryption also over HTTP).
    Ntlm,
    /// Basic (HTTPS only).
    Basic,
    /// Kerberos (domain-joined hosts).
    Kerberos,
}

/// Where a secret comes from. The plan names the source, never the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    Env(String),
    File(PathBuf),
}

impl SecretSource {
    /// Read the secret now (at connect time, not at load time). A value shorter than
    /// [`crate::secret::MIN_SECRET_LEN`] is refused: it could not be kept out of the output.
    pub fn read(&self) -> Result<Secret, String> {
        let secret = self.read_raw()?;
        let len = secret.expose().len();
        if len < crate::secret::MIN_SECRET_LEN {
            let from = match self {
                SecretSource::Env(var) => format!("environment variable {var}"),
                SecretSource::File(path) => path.display().to_string(),
            };
            return Err(if len == 0 {
                format!("the secret in {from} is empty")
            } else {
                format!(
                    "the secret in {from} is shorter than {} bytes: kwin cannot keep a value that short out of its output",
                    crate::secret::MIN_SECRET_LEN
                )
            });
        }
        Ok(secret)
    }

    fn read_raw(&self) -> Result<Secret, String> {
        match self {
            SecretSource::Env(var) => std::env::var(var)
                .map(Secret::new)
                .map_err(|_| format!("environment variable {var} is not set")),
            SecretSource::File(path) => crate::fs::read_bounded(path, 64 * 1024)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))
                .and_then(|b| {
                    String::from_utf8(b)
                        .map_err(|_| format!("{} is not UTF-8 text", path.display()))
                })
                .map(|s| Secret::new(s.lines().next().unwrap_or("").to_string())),
        }
    }
}

/// A jump host written as OpenSSH writes one (`ProxyJump`, `ssh -J`): `[user@]host[:port]`,
/// `ssh://[user@]host[:port]`, an IPv6 address in brackets. `host` may be an alias of the
/// user's `~/.ssh/config`; what it leaves out comes from there (see `transport::ssh`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JumpAddress {
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
}

impl JumpAddress {
    /// Parse one jump. A list (`a,b`: a chain of jumps) is refused: kwin goes through at
    /// most one jump host.
    pub fn parse(value: &str) -> Result<JumpAddress, String> {
        let v = value.trim();
        if v.is_empty() {
            return Err("it is empty".into());
        }
        if v.contains(',') {
            return Err(
                "it lists several jump hosts: kwin reaches a host through at most one jump host"
                    .into(),
            );
        }
        if v.contains(|c: char| c.is_whitespace() || c.is_control()) {
            return Err("it contains white space".into());
        }
        let v = v.strip_prefix("ssh://").unwrap_or(v);
        let (user, rest) = match v.rsplit_once('@') {
            Some((u, r)) if !u.is_empty() => (Some(u.to_string()), r),
            Some(_) => return Err("the user before `@` is empty".into()),
            None => (None, v),
        };
        let (host, port) = if let Some(r) = rest.strip_prefix('[') {
            let (h, tail) = r
                .split_once(']')
                .ok_or("an IPv6 address in `[` has no closing `]`")?;
            match tail {
                "" => (h, None),
                t => (
                    h,
                    Some(t.strip_prefix(':').ok_or("expected `:port` after `]`")?),
                ),
            }
        } else {
            match rest.rsplit_once(':') {
                Some((h, p)) if !h.contains(':') => (h, Some(p)),
                Some(_) => return Err("an IPv6 address goes in brackets, `[addr]:port`".into()),
                None => (rest, None),
            }
        };
        if host.is_empty() {
            return Err("the host is empty".into());
        }
        let port = match port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => Some(n),
                _ => return Err(format!("`{p}` is not a port (1 to 65535)")),
            },
        };
        Ok(JumpAddress {
            user,
            host: host.to_string(),
            port,
        })
    }
}

/// The jump host an SSH connection goes through (`proxy_jump` in the plan).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyJump {
    /// `"none"`: straight to the host, even if `~/.ssh/config` names a `ProxyJump`.
    Direct,
    /// An address, resolved through `~/.ssh/config` like OpenSSH does; logged into with the
    /// target's keys (never its password), its host key checked against the known_hosts files.
    Address(JumpAddress),
    /// Another host of the plan: its own resolved connection (address, user, keys, password
    /// source, pinned host key).
    Host { name: String, spec: Box<SshSpec> },
}

/// SSH connection settings of one host, fully resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshSpec {
    pub address: String,
    pub port: u16,
    pub user: String,
    /// Private key file; `None`: ssh-agent.
    pub private_key: Option<PathBuf>,
    pub passphrase: Option<SecretSource>,
    pub password: Option<SecretSource>,
    /// Pinned `SHA256:...` fingerprint.
    pub host_key: Option<String>,
    /// `sudo -n` for a non-root user.
    pub become_root: bool,
    /// Posix for Linux, PowerShell for `ssh-powershell` Windows hosts.
    pub shell: Shell,
    pub connect_timeout_secs: u64,
    /// The jump host the connection goes through; `None`: as `~/.ssh/config` says.
    pub proxy_jump: Option<ProxyJump>,
}

/// WinRM connection settings of one host, fully resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WinrmSpec {
    pub address: String,
    pub port: u16,
    pub user: String,
    pub password: SecretSource,
    pub https: bool,
    pub auth: WinrmAuth,
    /// Pinned SHA-256 of the server certificate, lowercase hex without colons.
    pub cert_fingerprint: Option<String>,
    pub ca_file: Option<PathBuf>,
    pub insecure: bool,
    pub connect_timeout_secs: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnSpec {
    Ssh(SshSpec),
    Winrm(WinrmSpec),
    Local { become_root: bool },
}

impl ConnSpec {
    /// The shell the host itself speaks: PowerShell for every Windows transport.
    pub fn shell(&self) -> Shell {
        match self {
            ConnSpec::Ssh(s) => s.shell,
            ConnSpec::Winrm(_) => Shell::PowerShell,
            ConnSpec::Local { .. } => Shell::Posix,
        }
    }

    /// The shell the host's module scripts are written for: [`ConnSpec::shell`], except
    /// that a WinRM host speaks POSIX to the lab's WinRM stand-in when
    /// [`WINRM_STAND_IN_ENV`] is set (kwin's own end-to-end tests). The one place that reads
    /// that variable: the transport (`transport::connect`) and the build phase
    /// (`module::build`) both ask here, so a module is always built for the shell its
    /// scripts will run in.
    pub fn script_shell(&self) -> Shell {
        match self {
            ConnSpec::Winrm(_) if std::env::var_os(WINRM_STAND_IN_ENV).is_some() => Shell::Posix,
            _ => self.shell(),
        }
    }

    /// Secrets the connection uses (passwords, passphrases), for the run's scrubber. Sources
    /// that cannot be read are skipped here; connecting reports them.
    pub fn secrets(&self) -> Vec<Secret> {
        let sources = match self {
            ConnSpec::Ssh(s) => vec![s.password.as_ref(), s.passphrase.as_ref()],
            ConnSpec::Winrm(w) => vec![Some(&w.password)],
            ConnSpec::Local { .. } => vec![],
        };
        sources
            .into_iter()
            .flatten()
            .filter_map(|s| s.read().ok())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::{JumpAddress, SecretSource};

    #[test]
    fn jump_addresses_parse_like_openssh() {
        let j = |s: &str| JumpAddress::parse(s).map(|j| (j.user, j.host, j.port));
        assert_eq!(j("bastion"), Ok((None, "bastion".into(), None)));
        assert_eq!(
            j("ops@10.0.0.1:2222"),
            Ok((Some("ops".into()), "10.0.0.1".into(), Some(2222)))
        );
        assert_eq!(
            j("ssh://a@b@jump.example"),
            Ok((Some("a@b".into()), "jump.example".into(), None))
        );
        assert_eq!(j("[fd00::1]:22"), Ok((None, "fd00::1".into(), Some(22))));
        assert_eq!(j("[fd00::1]"), Ok((None, "fd00::1".into(), None)));
        for bad in [
            "", "a,b", "fd00::1", "h:0", "h:x", "@h", "[fd00::1", "a b", ":22",
        ] {
            assert!(j(bad).is_err(), "{bad:?} accepted");
        }
        assert!(j("a,b")
            .expect_err("chain")
            .contains("at most one jump host"));
    }

    #[test]
    fn short_or_empty_secrets_are_refused_with_their_source() {
        let dir = tempfile::tempdir().expect("tmp");
        let f = dir.path().join("pw");
        std::fs::write(&f, "abc\nignored second line\n").expect("write");
        let e = SecretSource::File(f.clone()).read().expect_err("3 bytes");
        assert!(e.contains("shorter than 4") && e.contains("pw"), "{e}");
        std::fs::write(&f, "\n").expect("write");
        let e = SecretSource::File(f.clone()).read().expect_err("empty");
        assert!(e.contains("is empty"), "{e}");
        std::fs::write(&f, "abcd\n").expect("write");
        let s = SecretSource::File(f).read().expect("4 bytes");
        assert_eq!(s.expose(), "abcd");
        let e = SecretSource::File(dir.path().join("none"))
            .read()
            .expect_err("missing");
        assert!(e.contains("cannot read"), "{e}");
    }
}
