//! kwin's own digests (`plans/digests.toml`, embedded by `kwin-modules`): the SHA-256 of
//! artifacts by upstream URL and version, and signing-key fingerprints by key URL, each with
//! its source.

use super::sums::is_sha256;
use crate::plan::syntax::normalize_fingerprint;
use serde::Deserialize;
use std::collections::BTreeMap;

/// Digests kwin ships (`plans/digests.toml`): SHA-256 of artifacts by upstream URL and
/// version, and signing-key fingerprints by key URL.
#[derive(Debug, Clone, Default)]
pub struct Known {
    artifacts: Vec<KnownArtifact>,
    keys: Vec<KnownKey>,
}

/// An artifact whose upstream URL has `{version}` in it, with its SHA-256 per version.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct KnownArtifact {
    url: String,
    #[allow(dead_code)] // documentation of the digests, read by people
    source: String,
    sha256: BTreeMap<String, String>,
}

/// A signing key whose URL may have `{minor}` (`v1.31`) in it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct KnownKey {
    url: String,
    fingerprint: String,
    #[allow(dead_code)]
    source: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KnownFile {
    #[serde(default)]
    artifact: Vec<KnownArtifact>,
    #[serde(default)]
    signing_key: Vec<KnownKey>,
}

/// Whether `s` is a minor version as pkgs.k8s.io writes it: `v1.31`.
fn is_minor(s: &str) -> bool {
    s.strip_prefix('v')
        .and_then(|r| r.split_once('.'))
        .is_some_and(|(a, b)| {
            !a.is_empty()
                && !b.is_empty()
                && a.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
        })
}

impl Known {
    /// Parse the table; every digest must be 64 hex digits, every fingerprint 40.
    pub fn parse(text: &str) -> Result<Known, String> {
        let f: KnownFile = toml::from_str(text).map_err(|e| format!("digests: {e}"))?;
        for a in &f.artifact {
            if !a.url.contains("{version}") {
                return Err(format!("digests: {} has no {{version}}", a.url));
            }
            for (v, h) in &a.sha256 {
                if !is_sha256(h) || h.bytes().any(|b| b.is_ascii_uppercase()) {
                    return Err(format!(
                        "digests: {} version {v}: not 64 lower-case hex digits",
                        a.url
                    ));
                }
            }
        }
        for k in &f.signing_key {
            if normalize_fingerprint(&k.fingerprint).as_deref() != Some(k.fingerprint.as_str()) {
                return Err(format!(
                    "digests: key {}: fingerprint is not 40 upper-case hex digits",
                    k.url
                ));
            }
        }
        Ok(Known {
            artifacts: f.artifact,
            keys: f.signing_key,
        })
    }

    /// kwin's SHA-256 of the artifact at upstream `url`.
    pub fn sha256(&self, url: &str) -> Option<&str> {
        self.artifacts.iter().find_map(|a| {
            a.sha256
                .iter()
                .find(|(v, _)| a.url.replace("{version}", v) == url)
                .map(|(_, h)| h.as_str())
        })
    }

    /// kwin's fingerprint of the signing key at upstream `url`.
    pub fn fingerprint(&self, url: &str) -> Option<&str> {
        self.keys.iter().find_map(|k| {
            let hit = match k.url.split_once("{minor}") {
                Some((pre, post)) => url
                    .strip_prefix(pre)
                    .and_then(|r| r.strip_suffix(post))
                    .is_some_and(is_minor),
                None => k.url == url,
            };
            hit.then_some(k.fingerprint.as_str())
        })
    }

    /// Every (upstream URL, SHA-256) the table holds, for tests.
    pub fn all_sha256(&self) -> Vec<(String, String)> {
        self.artifacts
            .iter()
            .flat_map(|a| {
                a.sha256
                    .iter()
                    .map(move |(v, h)| (a.url.replace("{version}", v), h.clone()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_with_a_bad_digest_url_or_fingerprint_is_refused() {
        assert!(Known::parse("[[artifact]]\nurl = \"https://x/{version}\"\nsource = \"s\"\n[artifact.sha256]\n\"1\" = \"abc\"\n").is_err());
        assert!(Known::parse("[[artifact]]\nurl = \"https://x/y\"\nsource = \"s\"\n").is_err());
        assert!(Known::parse(
            "[[signing_key]]\nurl = \"https://x/k\"\nfingerprint = \"de15\"\nsource = \"s\"\n"
        )
        .is_err());
        assert_eq!(
            normalize_fingerprint("0xde15 b144 86cd 377b 9e87  6e1a 2346 54da 9a29 6436")
                .as_deref(),
            Some("DE15B14486CD377B9E876E1A234654DA9A296436")
        );
    }
}
