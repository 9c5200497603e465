//! Proxy credentials: `[proxy] credentials_env` / `credentials_file` hold `user:password`,
//! read like every other secret (from the environment or a file the plan names, never from
//! the plan text) when the recipes are expanded.
//!
//! The proxy URLs hosts get carry them percent-encoded (`http://user:pa%40ss@proxy:3128`);
//! every form the password takes (raw, `user:password`, percent-encoded) is a secret for the
//! run's scrubber ([`ProxyCredentials::secrets`]). Recipes write those URLs only into a
//! root-only file ([`ENV_FILE`], mode 0600) that the container runtimes' units read with
//! `EnvironmentFile=`: an `Environment=` value is readable by every local user over D-Bus
//! (systemd.exec(5), `Environment=`).

use crate::secret::{Secret, MIN_SECRET_LEN};
use crate::transport::spec::SecretSource;

/// The root-only environment file holding the proxy URLs with credentials on Linux nodes.
pub const ENV_FILE: &str = "/etc/kwin/proxy.env";

/// `user:password` for the proxy.
#[derive(Debug, Clone)]
pub struct ProxyCredentials {
    user: String,
    password: Secret,
}

/// Percent-encode everything but RFC 3986 unreserved characters.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl ProxyCredentials {
    /// Read and parse the credentials: `user:password` on the first line.
    pub fn read(source: &SecretSource) -> Result<Self, String> {
        let s = source.read()?;
        let (user, password) = s
            .expose()
            .split_once(':')
            .ok_or("the credentials must be `user:password`")?;
        if user.is_empty() {
            return Err("the credentials have no user before the `:`".into());
        }
        if password.len() < MIN_SECRET_LEN {
            return Err(format!(
                "the proxy password is shorter than {MIN_SECRET_LEN} bytes: kwin cannot keep a value that short out of its output"
            ));
        }
        Ok(ProxyCredentials {
            user: user.to_string(),
            password: Secret::new(password),
        })
    }

    /// `url` with the credentials in its authority (`scheme://user:password@host...`).
    pub fn url_with(&self, url: &str) -> Secret {
        let userinfo = format!("{}:{}", encode(&self.user), encode(self.password.expose()));
        Secret::new(match url.split_once("://") {
            Some((scheme, rest)) => format!("{scheme}://{userinfo}@{rest}"),
            None => format!("{userinfo}@{url}"),
        })
    }

    /// Every form the password takes in what kwin renders, for the run's scrubber.
    pub fn secrets(&self) -> Vec<Secret> {
        let p = self.password.expose();
        let mut v = vec![
            Secret::new(format!("{}:{p}", self.user)),
            Secret::new(p),
            Secret::new(encode(p)),
            Secret::new(format!("{}:{}", encode(&self.user), encode(p))),
        ];
        v.dedup_by(|a, b| a.expose() == b.expose());
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_encoded_into_the_url_and_every_form_is_a_secret() {
        let dir = tempfile::tempdir().expect("tmp");
        let f = dir.path().join("proxy");
        std::fs::write(&f, "kwin:p@ss w:rd/1\nignored\n").expect("write");
        let c = ProxyCredentials::read(&SecretSource::File(f)).expect("read");
        assert_eq!(
            c.url_with("http://proxy.lab:3128").expose(),
            "http://kwin:p%40ss%20w%3Ard%2F1@proxy.lab:3128"
        );
        let s: Vec<String> = c.secrets().iter().map(|s| s.expose().to_string()).collect();
        assert!(s.contains(&"p@ss w:rd/1".to_string()), "{s:?}");
        assert!(s.contains(&"p%40ss%20w%3Ard%2F1".to_string()), "{s:?}");
        assert!(format!("{c:?}").contains("***") && !format!("{c:?}").contains("p@ss"));
    }

    #[test]
    fn malformed_credentials_are_refused() {
        let dir = tempfile::tempdir().expect("tmp");
        for (text, why) in [
            ("nocolon-here", "user:password"),
            (":password", "no user"),
            ("kwin:abc", "shorter than"),
        ] {
            let f = dir.path().join("c");
            std::fs::write(&f, text).expect("write");
            let e = ProxyCredentials::read(&SecretSource::File(f)).expect_err(text);
            assert!(e.contains(why), "{text}: {e}");
            assert!(!e.contains(text), "the message holds the secret: {e}");
        }
    }
}
