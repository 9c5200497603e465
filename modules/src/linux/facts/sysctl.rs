//! The live value of a kernel parameter, read from `/proc/sys` (no `sysctl` binary needed).

use super::ok_stdout;
use kwin_engine::fact::{Fact, FactError, FactOutput};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;

/// `/proc/sys` path of a key. Dotted keys map dots to `/`; a key written with `/` (as
/// `sysctl` allows, for names containing dots like `eth0.100`) is taken literally.
pub fn proc_path(key: &str) -> String {
    if key.contains('/') {
        format!("/proc/sys/{}", key.trim_start_matches('/'))
    } else {
        format!("/proc/sys/{}", key.replace('.', "/"))
    }
}

/// A value as `sysctl` compares it: fields separated by single spaces (`/proc/sys` uses tabs
/// between fields of multi-value keys).
pub fn normalize_value(v: &str) -> String {
    v.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysctlFact {
    pub key: String,
}

impl Fact for SysctlFact {
    /// The normalized value, or `None` when the key does not exist on this kernel (yet: many
    /// keys appear only once their module is loaded).
    type Output = Option<String>;

    fn key(&self) -> String {
        format!("sysctl:{}", self.key)
    }

    fn command(&self, _shell: Shell) -> String {
        format!(
            "f={}\nif [ -e \"$f\" ]; then echo present; cat \"$f\"; else echo absent; fi",
            sh_quote(&proc_path(&self.key))
        )
    }

    fn parse(&self, out: &FactOutput) -> Result<Option<String>, FactError> {
        parse_sysctl(ok_stdout(out)?)
    }
}

/// Parse [`SysctlFact`]'s output.
pub fn parse_sysctl(text: &str) -> Result<Option<String>, FactError> {
    let (first, rest) = text.split_once('\n').unwrap_or((text, ""));
    match first {
        "present" => Ok(Some(normalize_value(rest))),
        "absent" => Ok(None),
        other => Err(FactError::Parse(format!(
            "unexpected sysctl answer `{other}`"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::super::out;
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(
            proc_path("net.ipv4.ip_forward"),
            "/proc/sys/net/ipv4/ip_forward"
        );
        assert_eq!(
            proc_path("net/ipv4/conf/eth0.100/forwarding"),
            "/proc/sys/net/ipv4/conf/eth0.100/forwarding"
        );
    }

    #[test]
    fn values_from_proc_sys() {
        // Captured on this machine: `cat /proc/sys/net/ipv4/ip_local_port_range`.
        let v = SysctlFact {
            key: "net.ipv4.ip_local_port_range".into(),
        }
        .parse(&out("present\n32768\t60999\n", 0))
        .expect("parse");
        assert_eq!(v.as_deref(), Some("32768 60999"));
        assert_eq!(parse_sysctl("present\n0\n"), Ok(Some("0".into())));
        assert_eq!(parse_sysctl("present\n"), Ok(Some(String::new())));
        assert_eq!(parse_sysctl("absent\n"), Ok(None));
        assert!(parse_sysctl("cat: x: Permission denied").is_err());
    }

    #[test]
    fn unreadable_key_is_a_fact_error() {
        let mut o = out("present\n", 1);
        o.stderr = b"cat: /proc/sys/net/ipv6/conf/all/stable_secret: Input/output error\n".to_vec();
        let err = SysctlFact {
            key: "net.ipv6.conf.all.stable_secret".into(),
        }
        .parse(&o)
        .expect_err("must fail");
        assert!(err.to_string().contains("Input/output error"));
    }
}
