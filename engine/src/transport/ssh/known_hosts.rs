//! OpenSSH `known_hosts` files: reading, matching a host's key, and recording new keys.
//!
//! Supported: plain host patterns (comma lists, `*`/`?` wildcards, `!` negation), hashed
//! entries (`|1|salt|hash`, HMAC-SHA1 of the name), the `[host]:port` form for ports other
//! than 22, `@revoked` markers. `@cert-authority` lines are skipped (kwin does not do host
//! certificates). Names compare case-insensitively, like OpenSSH.
//!
//! kwin writes only to its own file (`.kwin/known_hosts` next to the plan): plain entries,
//! appended under a process-wide lock, the file created `0600` in a `0700` directory.

use super::config::wildmatch;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use base64::Engine;
use sha2::{Digest, Sha256};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A host key kwin recorded because new keys were accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedHostKey {
    /// The name written to the file: `host`, or `[host]:port` for ports other than 22.
    pub host: String,
    /// `SHA256:...`.
    pub fingerprint: String,
    pub file: PathBuf,
}

impl fmt::Display for RecordedHostKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "recorded new host key {} for {} in {}",
            self.fingerprint,
            self.host,
            self.file.display()
        )
    }
}

/// One key a known_hosts file holds for the host being checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KnownKey {
    pub key_type: String,
    pub blob: Vec<u8>,
    /// `path:line`, for messages.
    pub source: String,
    pub revoked: bool,
}

/// The outcome of checking a host key against the known keys for that host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A known, non-revoked entry holds exactly this key.
    Match,
    /// The key is marked `@revoked`.
    Revoked { source: String },
    /// The host is known, with other keys: `expected` lists them as `fingerprint (path:line)`.
    Mismatch { expected: Vec<String> },
    /// No entry names this host.
    Unknown,
}

/// The name a known_hosts entry carries for `host`:`port`.
pub(crate) fn host_token(host: &str, port: u16) -> String {
    if port == 22 {
        host.to_ascii_lowercase()
    } else {
        format!("[{}]:{port}", host.to_ascii_lowercase())
    }
}

/// `SHA256:<base64 without padding>` of a key blob, as `ssh-keygen -lf` prints it.
pub(crate) fn fingerprint(blob: &[u8]) -> String {
    format!("SHA256:{}", STANDARD_NO_PAD.encode(Sha256::digest(blob)))
}

/// Whether `pinned` (as written in a plan) names the key with fingerprint `actual`. Accepts
/// the value with or without the `SHA256:` prefix and with or without base64 padding.
pub(crate) fn pinned_matches(pinned: &str, actual: &str) -> bool {
    let norm = |s: &str| {
        let s = s.trim();
        let s = s.strip_prefix("SHA256:").unwrap_or(s);
        s.trim_end_matches('=').to_string()
    };
    !norm(pinned).is_empty() && norm(pinned) == norm(actual)
}

/// The key type name a key blob starts with (`ssh-ed25519`, `ecdsa-sha2-nistp256`, ...).
pub(crate) fn key_type_of(blob: &[u8]) -> Option<String> {
    let len_bytes: [u8; 4] = blob.get(..4)?.try_into().ok()?;
    let len = u32::from_be_bytes(len_bytes) as usize;
    let name = blob.get(4..4usize.checked_add(len)?)?;
    String::from_utf8(name.to_vec()).ok()
}

/// Every key the given files hold for `host`:`port`. Missing files are empty; unreadable
/// ones are an error (a file the user keeps must not be silently ignored).
pub(crate) fn lookup(files: &[PathBuf], host: &str, port: u16) -> Result<Vec<KnownKey>, String> {
    let token = host_token(host, port);
    let mut keys = Vec::new();
    for path in files {
        let text = match std::fs::read(path) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        keys.extend(keys_in(&text, path, &token));
    }
    Ok(keys)
}

fn keys_in(text: &str, path: &Path, token: &str) -> Vec<KnownKey> {
    let mut keys = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.split_whitespace();
        let Some(mut hosts) = fields.next() else {
            continue;
        };
        let mut revoked = false;
        if hosts.starts_with('@') {
            match hosts {
                "@revoked" => revoked = true,
                _ => continue, // @cert-authority and unknown markers
            }
            let Some(h) = fields.next() else { continue };
            hosts = h;
        }
        let (Some(key_type), Some(key_b64)) = (fields.next(), fields.next()) else {
            continue;
        };
        if !hosts_match(hosts, token) {
            continue;
        }
        let Ok(blob) = STANDARD.decode(key_b64) else {
            continue;
        };
        keys.push(KnownKey {
            key_type: key_type.to_string(),
            blob,
            source: format!("{}:{}", path.display(), i + 1),
            revoked,
        });
    }
    keys
}

/// Whether a known_hosts host field matches `token` (already lowercased).
fn hosts_match(field: &str, token: &str) -> bool {
    if let Some(hashed) = field.strip_prefix("|1|") {
        return hashed_matches(hashed, token);
    }
    let mut positive = false;
    for pat in field.split(',') {
        if let Some(neg) = pat.strip_prefix('!') {
            if wildmatch(&neg.to_ascii_lowercase(), token) {
                return false;
            }
        } else if wildmatch(&pat.to_ascii_lowercase(), token) {
            positive = true;
        }
    }
    positive
}

/// `salt|hash` (both base64) against HMAC-SHA1(salt, token).
fn hashed_matches(salt_hash: &str, token: &str) -> bool {
    let Some((salt, hash)) = salt_hash.split_once('|') else {
        return false;
    };
    let (Ok(salt), Ok(hash)) = (STANDARD.decode(salt), STANDARD.decode(hash)) else {
        return false;
    };
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, &salt);
    ring::hmac::verify(&key, token.as_bytes(), &hash).is_ok()
}

/// Check the key the host presented against the keys known for it.
///
/// A host known only by keys of other types is a mismatch, not unknown: kwin asks the server
/// for the known types first, so getting another type means the known key is gone.
pub(crate) fn verify(known: &[KnownKey], blob: &[u8]) -> Verdict {
    if let Some(k) = known.iter().find(|k| k.revoked && k.blob == blob) {
        return Verdict::Revoked {
            source: k.source.clone(),
        };
    }
    let live: Vec<&KnownKey> = known.iter().filter(|k| !k.revoked).collect();
    if live.iter().any(|k| k.blob == blob) {
        return Verdict::Match;
    }
    if live.is_empty() {
        return Verdict::Unknown;
    }
    Verdict::Mismatch {
        expected: live
            .iter()
            .map(|k| format!("{} ({})", fingerprint(&k.blob), k.source))
            .collect(),
    }
}

/// Host key algorithms in the order kwin asks for them: the types already known for this
/// host first (so a host known by its RSA key is not reported as changed because it also has
/// an ed25519 key), then ed25519, ECDSA, RSA with SHA-2.
#[cfg(test)]
pub(crate) fn hostkey_prefs(known: &[KnownKey]) -> String {
    hostkey_prefs_except(known, &[])
}

/// The algorithms of a key type as a server offers it (`ssh-rsa` keys sign with SHA-2).
fn algorithms_of(key_type: &str) -> Vec<&str> {
    match key_type {
        "ssh-rsa" => vec!["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"],
        t => vec![t],
    }
}

/// [`hostkey_prefs`] without the algorithms of the key types in `skip` (keys the host has
/// shown already); empty when none is left.
pub(crate) fn hostkey_prefs_except(known: &[KnownKey], skip: &[String]) -> String {
    let skipped: Vec<&str> = skip.iter().flat_map(|t| algorithms_of(t)).collect();
    all_hostkey_prefs(known)
        .into_iter()
        .filter(|a| !skipped.contains(a))
        .collect::<Vec<_>>()
        .join(",")
}

fn all_hostkey_prefs(known: &[KnownKey]) -> Vec<&'static str> {
    const DEFAULT: [&str; 6] = [
        "ssh-ed25519",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
        "rsa-sha2-512",
        "rsa-sha2-256",
    ];
    let mut out: Vec<&str> = Vec::new();
    let push = |alg: &'static str, out: &mut Vec<&str>| {
        if !out.contains(&alg) {
            out.push(alg);
        }
    };
    for k in known.iter().filter(|k| !k.revoked) {
        match k.key_type.as_str() {
            "ssh-rsa" => {
                push("rsa-sha2-512", &mut out);
                push("rsa-sha2-256", &mut out);
                push("ssh-rsa", &mut out);
            }
            t => {
                if let Some(alg) = DEFAULT.iter().find(|a| **a == t) {
                    push(alg, &mut out);
                }
            }
        }
    }
    for alg in DEFAULT {
        push(alg, &mut out);
    }
    out
}

static WRITE_LOCK: Mutex<()> = Mutex::new(());

/// What appending a key to kwin's file did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Recorded {
    /// A new line was written.
    Written,
    /// The file already held this key (another connection recorded it first).
    AlreadyThere,
    /// Meanwhile the file got another key for this host.
    Conflict(Verdict),
}

/// Append `host`:`port` → key to kwin's own known_hosts file, creating it `0600` (and its
/// directory `0700`) when missing.
pub(crate) fn append(path: &Path, host: &str, port: u16, blob: &[u8]) -> Result<Recorded, String> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let key_type = key_type_of(blob).ok_or("the host key is malformed")?;
    let _guard = match WRITE_LOCK.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
    }
    let known = lookup(&[path.to_path_buf()], host, port)?;
    match verify(&known, blob) {
        Verdict::Match => return Ok(Recorded::AlreadyThere),
        Verdict::Unknown => {}
        other => return Ok(Recorded::Conflict(other)),
    }
    // Appended in place (lines of concurrent runs interleave whole); never through a link.
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let line = format!(
        "{} {key_type} {}\n",
        host_token(host, port),
        STANDARD.encode(blob)
    );
    file.write_all(line.as_bytes())
        .and_then(|()| file.sync_data())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(Recorded::Written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(kind: &str, body: &[u8]) -> Vec<u8> {
        let mut b = (kind.len() as u32).to_be_bytes().to_vec();
        b.extend_from_slice(kind.as_bytes());
        b.extend_from_slice(body);
        b
    }

    fn hashed(token: &str, salt: &[u8]) -> String {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, salt);
        let tag = ring::hmac::sign(&key, token.as_bytes());
        format!(
            "|1|{}|{}",
            STANDARD.encode(salt),
            STANDARD.encode(tag.as_ref())
        )
    }

    #[test]
    fn fingerprint_is_ssh_keygen_format() {
        // `ssh-keygen -lf` of this public key prints the same fingerprint.
        let b64 = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";
        let b = STANDARD.decode(b64).unwrap_or_default();
        assert_eq!(key_type_of(&b).as_deref(), Some("ssh-ed25519"));
        let fp = fingerprint(&b);
        assert_eq!(fp, "SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU");
        assert!(pinned_matches(&fp, &fp));
        assert!(pinned_matches(&format!("{fp}="), &fp));
        assert!(pinned_matches(fp.trim_start_matches("SHA256:"), &fp));
        assert!(!pinned_matches("SHA256:", &fp));
        assert!(!pinned_matches("SHA256:AAAA", &fp));
    }

    #[test]
    fn plain_hashed_ported_and_negated_patterns_match() {
        let k1 = blob("ssh-ed25519", b"one");
        let k2 = blob("ssh-ed25519", b"two");
        let k3 = blob("ssh-rsa", b"three");
        let text = format!(
            "# comment\n\
             web*,!web9 ssh-ed25519 {}\n\
             {} ssh-ed25519 {}\n\
             [10.0.0.5]:2222 ssh-rsa {}\n\
             @cert-authority * ssh-ed25519 {}\n\
             @revoked db1 ssh-ed25519 {}\n\
             garbage\n",
            STANDARD.encode(&k1),
            hashed("db1", b"saltsaltsaltsaltsalt"),
            STANDARD.encode(&k2),
            STANDARD.encode(&k3),
            STANDARD.encode(&k2),
            STANDARD.encode(&k1),
        );
        let p = Path::new("kh");
        let find = |host: &str, port: u16| keys_in(&text, p, &host_token(host, port));

        assert_eq!(verify(&find("web1", 22), &k1), Verdict::Match);
        assert_eq!(verify(&find("WEB1", 22), &k1), Verdict::Match);
        assert_eq!(verify(&find("web9", 22), &k1), Verdict::Unknown);
        assert_eq!(verify(&find("web1", 2200), &k1), Verdict::Unknown);
        assert_eq!(verify(&find("db1", 22), &k2), Verdict::Match);
        assert_eq!(
            verify(&find("db1", 22), &k1),
            Verdict::Revoked {
                source: "kh:6".into()
            }
        );
        assert_eq!(verify(&find("10.0.0.5", 2222), &k3), Verdict::Match);
        assert_eq!(verify(&find("10.0.0.5", 22), &k3), Verdict::Unknown);
        match verify(&find("10.0.0.5", 2222), &k2) {
            Verdict::Mismatch { expected } => {
                assert_eq!(expected, vec![format!("{} (kh:4)", fingerprint(&k3))]);
            }
            v => panic!("expected a mismatch, got {v:?}"),
        }
        // Cert-authority lines never vouch for a host key.
        assert_eq!(verify(&find("other", 22), &k2), Verdict::Unknown);
    }

    #[test]
    fn prefs_put_known_types_first() {
        let rsa = KnownKey {
            key_type: "ssh-rsa".into(),
            blob: vec![],
            source: String::new(),
            revoked: false,
        };
        assert!(hostkey_prefs(&[]).starts_with("ssh-ed25519,"));
        let p = hostkey_prefs(&[rsa]);
        assert!(
            p.starts_with("rsa-sha2-512,rsa-sha2-256,ssh-rsa,ssh-ed25519"),
            "{p}"
        );
        assert_eq!(p.matches("rsa-sha2-512").count(), 1);
        // The key types a host has shown are not asked for again.
        let p = hostkey_prefs_except(&[], &["ssh-ed25519".into(), "ssh-rsa".into()]);
        assert_eq!(
            p,
            "ecdsa-sha2-nistp256,ecdsa-sha2-nistp384,ecdsa-sha2-nistp521"
        );
    }

    #[test]
    fn append_creates_private_file_and_detects_conflicts() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = dir.path().join(".kwin/known_hosts");
        let k1 = blob("ssh-ed25519", b"one");
        let k2 = blob("ssh-ed25519", b"two");
        assert_eq!(append(&path, "h1", 2222, &k1), Ok(Recorded::Written));
        assert_eq!(append(&path, "h1", 2222, &k1), Ok(Recorded::AlreadyThere));
        assert!(matches!(
            append(&path, "h1", 2222, &k2),
            Ok(Recorded::Conflict(Verdict::Mismatch { .. }))
        ));
        let mode = |p: &Path| {
            std::fs::metadata(p)
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0)
        };
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(dir.path().join(".kwin").as_path()), 0o700);
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(
            text,
            format!("[h1]:2222 ssh-ed25519 {}\n", STANDARD.encode(&k1))
        );
        let known = lookup(&[path.clone(), dir.path().join("missing")], "h1", 2222);
        assert_eq!(known.map(|k| verify(&k, &k1)), Ok(Verdict::Match));
    }
}
