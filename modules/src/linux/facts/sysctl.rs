//! The live value of a kernel parameter, read from `/proc/sys` (no `sysctl` binary needed).
//!
//! A path fact: the probe answers it with its other path questions (the file's kind, and its
//! content with the other files' in the probe's one `head`), no process of its own.

use super::file::{FileFact, PathState};
use kwin_engine::fact::{Fact, FactError, FactOutput, PathQuery};
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

    fn path_query(&self) -> Option<PathQuery> {
        self.file().path_query()
    }

    fn command(&self, shell: Shell) -> String {
        self.file().command(shell)
    }

    fn parse(&self, out: &FactOutput) -> Result<Option<String>, FactError> {
        match self.file().parse(out)? {
            PathState::Absent => Ok(None),
            PathState::File(f) => {
                let bytes = f.content.ok_or_else(|| {
                    FactError::Parse(format!("no value read for sysctl {}", self.key))
                })?;
                let text = String::from_utf8(bytes)
                    .map_err(|_| FactError::Parse(format!("sysctl {} is not text", self.key)))?;
                Ok(Some(normalize_value(&text)))
            }
            other => Err(FactError::Parse(format!(
                "{} is {}, not a kernel parameter",
                proc_path(&self.key),
                other.kind()
            ))),
        }
    }
}

impl SysctlFact {
    /// The file under `/proc/sys`, content and all.
    fn file(&self) -> FileFact {
        FileFact::content(proc_path(&self.key))
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

    fn answer(value: &[u8]) -> String {
        use base64::Engine;
        use sha2::Digest;
        format!(
            "type=file\nstat=644:0:root:0:root:0\nsha256={}\ncontent={}\n",
            hex::encode(sha2::Sha256::digest(value)),
            base64::engine::general_purpose::STANDARD.encode(value)
        )
    }

    #[test]
    fn values_from_proc_sys() {
        let f = |key: &str| SysctlFact { key: key.into() };
        // Captured on this machine: /proc/sys/net/ipv4/ip_local_port_range.
        let v = f("net.ipv4.ip_local_port_range")
            .parse(&out(&answer(b"32768\t60999\n"), 0))
            .expect("parse");
        assert_eq!(v.as_deref(), Some("32768 60999"));
        assert_eq!(
            f("net.ipv4.ip_forward").parse(&out(&answer(b"0\n"), 0)),
            Ok(Some("0".into()))
        );
        assert_eq!(f("x.y").parse(&out("type=absent\n", 0)), Ok(None));
        assert!(f("x.y")
            .parse(&out("type=dir\nstat=555:0:root:0:root:0\n", 0))
            .is_err());
        // The standalone command prints the same answer for the real file.
        let o = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(f("kernel.ostype").command(Shell::Posix))
            .output()
            .expect("sh");
        let v = f("kernel.ostype")
            .parse(&out(&String::from_utf8_lossy(&o.stdout), 0))
            .expect("parse");
        assert_eq!(v.as_deref(), Some("Linux"));
    }

    #[test]
    fn unreadable_key_is_a_fact_error() {
        let mut o = out("type=file\nstat=600:0:root:0:root:0\n", 1);
        o.stderr =
            b"sha256sum: /proc/sys/net/ipv6/conf/all/stable_secret: Input/output error\n".to_vec();
        let err = SysctlFact {
            key: "net.ipv6.conf.all.stable_secret".into(),
        }
        .parse(&o)
        .expect_err("must fail");
        assert!(err.to_string().contains("Input/output error"), "{err}");
    }
}
