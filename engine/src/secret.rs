//! Secrets: values that must never reach output, logs or the journal.
//!
//! A [`Secret`] prints as `***` through `Debug` and `Display`; the only way to the value is
//! [`Secret::expose`], which call sites use when building the byte stream sent to a host.
//! A [`Scrubber`] knows every secret value of a run and replaces it in any text before that
//! text is shown or written anywhere.

use std::fmt;
use std::sync::{Arc, RwLock};

/// Shorter values cannot be masked without masking ordinary text; secret sources refuse them
/// (`plan::SecretSource::read`), and the scrubber ignores them.
pub const MIN_SECRET_LEN: usize = 4;

/// A secret value (password, join token, certificate key, passphrase).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }
    /// The value itself. Only for bytes that go to a host or a library, never to output.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Replaces every known secret value in text with `***`. Cheap to clone; shared by every
/// component of a run. Secrets learned during the run (a join token read from the control
/// plane) are added with [`Scrubber::add`] before anything else sees them.
#[derive(Clone, Default)]
pub struct Scrubber {
    values: Arc<RwLock<Vec<String>>>,
}

impl Scrubber {
    pub fn new() -> Self {
        Self::default()
    }

    /// Remember a secret value. Values shorter than 4 bytes are ignored (they would scrub
    /// ordinary text).
    ///
    /// Besides the value itself, the forms it takes inside a script are scrubbed too: a
    /// value with a `'` is written `'\''` by `sh_quote` and doubled by `ps_quote`, so a
    /// logged script would otherwise show it only slightly disguised.
    pub fn add(&self, secret: &Secret) {
        let v = secret.expose();
        if v.len() < MIN_SECRET_LEN {
            return;
        }
        let mut forms = vec![v.to_string()];
        for quoted in [crate::quote::sh_quote(v), crate::quote::ps_quote(v)] {
            let inner = quoted
                .strip_prefix('\'')
                .and_then(|q| q.strip_suffix('\''))
                .unwrap_or(&quoted);
            if inner != v {
                forms.push(inner.to_string());
            }
        }
        let mut values = match self.values.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        for f in forms {
            if !values.contains(&f) {
                values.push(f);
            }
        }
        // Longest first, so a secret that contains another is replaced whole.
        values.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }

    /// `text` with every known secret replaced by `***`.
    pub fn scrub(&self, text: &str) -> String {
        let values = match self.values.read() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let mut out = text.to_string();
        for v in values.iter() {
            if out.contains(v.as_str()) {
                out = out.replace(v.as_str(), "***");
            }
        }
        out
    }

    /// Lossy UTF-8 decode and scrub, for remote output.
    pub fn scrub_bytes(&self, bytes: &[u8]) -> String {
        self.scrub(&String::from_utf8_lossy(bytes))
    }
}

impl fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Scrubber(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_never_prints() {
        let s = Secret::new("hunter22");
        assert_eq!(format!("{s} {s:?}"), "*** ***");
        assert_eq!(s.expose(), "hunter22");
    }

    #[test]
    fn scrubber_knows_the_quoted_forms() {
        let sc = Scrubber::new();
        let pw = Secret::new("it's a s3cret");
        sc.add(&pw);
        let script = format!(
            "printf '%s' {} | login; $p = {}",
            crate::quote::sh_quote(pw.expose()),
            crate::quote::ps_quote(pw.expose())
        );
        let shown = sc.scrub(&script);
        assert!(!shown.contains("s3cret"), "{shown}");
        assert_eq!(shown, "printf '%s' '***' | login; $p = '***'");
    }

    #[test]
    fn scrubber_replaces_longest_first() {
        let sc = Scrubber::new();
        sc.add(&Secret::new("abcd"));
        sc.add(&Secret::new("abcdefgh"));
        assert_eq!(sc.scrub("x abcdefgh y abcd z"), "x *** y *** z");
        assert_eq!(sc.scrub_bytes(b"no secrets"), "no secrets");
    }
}
