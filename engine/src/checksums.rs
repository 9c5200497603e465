//! Artifact checksums: where the SHA-256 (or, for a signing key, the OpenPGP fingerprint) of
//! every download comes from.
//!
//! Recipes ask with `sha256_of('file-name', 'checksum-file-url', url='artifact-url',
//! sha512='sha512-file-url')` for a checksum they need (the checksum-file URL is left out when
//! the upstream publishes no SHA-256 file; `sha512=` names the SHA-512 file of an upstream that
//! publishes only that), and with `openpgp_of('file-name', 'key-url')` for a signing key's
//! fingerprint. The answer to `sha256_of`, in this order:
//!
//! 1. the plan's pin, `[artifacts.sha256]`, by file name — always wins;
//! 2. kwin's own digests (`plans/digests.toml`, [`Known`]), by the artifact's upstream URL
//!    (with a mirror, the URL under the mirror maps back to the upstream one): each comes from
//!    a source readable without trusting the download's site (a git tag's blob, another
//!    project's reviewed table), cited there;
//! 3. a checksum recorded earlier in `.kwin/checksums.toml` next to the plan — only `https://`
//!    keys: by checksum-file URL, taken from the upstream's published checksum file; or, for an
//!    artifact without one, by the artifact's own URL, computed from the artifact;
//! 4. nothing yet: the request is remembered ([`Checksums::wanted`]). `kwin plan` / `kwin apply`
//!    then [`fetch`] on the controller: the missing checksum files, and the artifacts whose
//!    upstream publishes no SHA-256 file (hashed as they stream in, at most
//!    [`MAX_ARTIFACT_BYTES`], checked against the upstream's SHA-512 file where `sha512=`
//!    names one) — `https://` only, and a redirect must stay on https; they record the
//!    results and expand again. `kwin validate` and `kwin graph` never touch the network.
//!
//! `openpgp_of` answers from `[artifacts.openpgp]`, then [`Known`]; there is no checksum file
//! for a key. A request neither answers and that names no https URL to fetch cannot be
//! satisfied: the run stops before connecting to any host, naming the file and the plan line
//! to add. With a plain-HTTP mirror, a checksum that would have to be fetched is refused at
//! validation too (`src/prepare.rs`): it would come over the same unauthenticated channel as
//! the artifact.
//!
//! Trust: a checksum file fetched over HTTPS from the upstream (or an https mirror) proves the
//! artifact a host downloads is the one the upstream published, byte for byte; an artifact
//! fetched over HTTPS and hashed on the controller proves exactly the same (the host must get
//! the bytes the controller got from the upstream), and no more. Neither protects against a
//! compromised upstream. kwin's digests and a pin in the plan (or a reviewed
//! `.kwin/checksums.toml` kept with the plan) fix the artifacts for every run.

use crate::diag::{Diagnostic, Location};
use crate::net::Https;
use crate::plan::LoadedPlan;
use crate::task::{Origin, Task};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// File name of the record, inside the plan's state directory.
pub const RECORD_FILE: &str = "checksums.toml";

/// Largest checksum file accepted (upstream files are under 1 KiB; `runc.sha256sum` ~1 KiB).
const MAX_SUMS_BYTES: usize = 64 * 1024;

/// Largest artifact kwin fetches to hash on the controller. What goes this way is a release
/// archive of one or a few programs (flannel's Windows build and windows-container-networking's
/// zip are around 10 MiB) or a manifest; anything larger is refused rather than streamed on.
pub const MAX_ARTIFACT_BYTES: u64 = 64 * 1024 * 1024;

/// One checksum taken from a published checksum file, or computed from the artifact.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recorded {
    /// The artifact's file name, as the recipe named it.
    pub file: String,
    /// Lower-case hex SHA-256.
    pub sha256: String,
    /// For an artifact kwin fetched and hashed itself: the upstream's SHA-512 file it was
    /// checked against, when the upstream publishes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha512_file: Option<String>,
}

/// What a recipe asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WantedKind {
    Sha256,
    /// An OpenPGP key's fingerprint (`openpgp_of`).
    OpenPgp,
}

/// A checksum a recipe asked for and nobody knew.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Wanted {
    pub kind: WantedKind,
    pub file: String,
    /// The upstream's checksum file, when it publishes one.
    pub sums_url: Option<String>,
    /// The artifact's own URL, when the recipe gave it: without a checksum file, kwin fetches
    /// the artifact from it and hashes it.
    pub url: Option<String>,
    /// The upstream's SHA-512 file of the artifact, for one that publishes no SHA-256 file.
    pub sha512_url: Option<String>,
}

impl Wanted {
    /// Where `kwin plan` / `apply` would get the answer from: the checksum file, else the
    /// artifact itself (for a SHA-256 only); `None` when nothing can be fetched.
    pub fn source(&self) -> Option<&str> {
        match self.kind {
            WantedKind::Sha256 => self.sums_url.as_deref().or(self.url.as_deref()),
            WantedKind::OpenPgp => None,
        }
    }

    /// Whether the answer would come from the artifact itself (no checksum file).
    pub fn from_artifact(&self) -> bool {
        self.kind == WantedKind::Sha256 && self.sums_url.is_none() && self.url.is_some()
    }
}

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

pub use crate::plan::syntax::normalize_fingerprint;

/// The checksums known to one expansion, and what was asked for in vain.
#[derive(Debug, Clone, Default)]
pub struct Checksums {
    pins: BTreeMap<String, String>,
    openpgp_pins: BTreeMap<String, String>,
    known: Arc<Known>,
    mirror: Option<String>,
    recorded: BTreeMap<String, Recorded>,
    /// Every request nobody answered, with the tasks whose params asked for it.
    wanted: Arc<Mutex<BTreeMap<Wanted, BTreeSet<Origin>>>>,
    /// The recipe step or plan task whose params are being rendered (set by expansion).
    asking: Arc<Mutex<Option<Origin>>>,
}

impl Checksums {
    /// Pins from the plan (`[artifacts.sha256]`, by file name) and records by checksum-file URL.
    pub fn new(pins: BTreeMap<String, String>, recorded: BTreeMap<String, Recorded>) -> Self {
        let pins = pins
            .into_iter()
            .map(|(k, v)| (k, v.to_ascii_lowercase()))
            .collect();
        Checksums {
            pins,
            recorded,
            ..Checksums::default()
        }
    }

    /// Everything the plan says (pins, mirror) and kwin knows, with the records so far.
    pub fn for_plan(
        file: &crate::plan::PlanFile,
        recorded: BTreeMap<String, Recorded>,
        known: Arc<Known>,
    ) -> Self {
        let mut c = Checksums::new(file.artifacts.sha256.clone(), recorded);
        c.openpgp_pins = file
            .artifacts
            .openpgp
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    normalize_fingerprint(v).unwrap_or_else(|| v.clone()),
                )
            })
            .collect();
        c.known = known;
        c.mirror = file.artifacts.mirror.clone();
        c
    }

    /// The upstream URL of `url`: under the plan's mirror (`<mirror>/<site>/...`) it is
    /// `https://<site>/...`; any other URL is itself.
    pub fn upstream_url(&self, url: &str) -> String {
        if let Some(m) = &self.mirror {
            let m = m.trim_end_matches('/');
            if let Some(rest) = url.strip_prefix(m).and_then(|r| r.strip_prefix('/')) {
                return format!("https://{rest}");
            }
        }
        url.to_string()
    }

    /// The answer to `sha256_pin(file)`: the plan's pin or none, for artifacts whose checksum is
    /// optional. Never remembered as wanted.
    pub fn pin(&self, file: &str) -> Option<String> {
        self.pins.get(file).cloned()
    }

    /// The answer to `sha256_of(file, sums_url, url=..., sha512=...)`; a miss is remembered.
    pub fn lookup(
        &self,
        file: &str,
        sums_url: Option<&str>,
        url: Option<&str>,
        sha512_url: Option<&str>,
    ) -> Option<String> {
        if let Some(pin) = self.pins.get(file) {
            return Some(pin.clone());
        }
        if let Some(h) = url.and_then(|u| self.known.sha256(&self.upstream_url(u))) {
            return Some(h.to_string());
        }
        let w = Wanted {
            kind: WantedKind::Sha256,
            file: file.to_string(),
            sums_url: sums_url.map(str::to_string),
            url: url.map(str::to_string),
            sha512_url: sha512_url.map(str::to_string),
        };
        if let Some(h) = self.recorded_answer(&w) {
            return Some(h.to_string());
        }
        self.remember(w);
        None
    }

    /// The answer `.kwin/checksums.toml` gives to `w` (step 3): only checksums that came over
    /// https are trusted — from the checksum file when there is one, else computed from the
    /// artifact — and only for the file name they were recorded for.
    pub fn recorded_answer(&self, w: &Wanted) -> Option<&str> {
        if w.kind != WantedKind::Sha256 {
            return None;
        }
        w.sums_url
            .as_deref()
            .or(w.url.as_deref())
            .filter(|u| u.starts_with("https://"))
            .and_then(|u| self.recorded.get(u))
            .filter(|r| r.file == w.file)
            .map(|r| r.sha256.as_str())
    }

    /// A request nobody answered, with who is asking.
    fn remember(&self, w: Wanted) {
        let who = self.asking.lock().ok().and_then(|a| a.clone());
        if let Ok(mut m) = self.wanted.lock() {
            let askers = m.entry(w).or_default();
            askers.extend(who);
        }
    }

    /// Expansion says whose params it renders next (`None` when done): a request made
    /// meanwhile is needed by that recipe step or plan task ([`Checksums::needed_by`]).
    pub fn asking(&self, who: Option<Origin>) {
        if let Ok(mut a) = self.asking.lock() {
            *a = who;
        }
    }

    /// The recipe steps and plan tasks whose params asked for `w`.
    pub fn needed_by(&self, w: &Wanted) -> Vec<Origin> {
        self.wanted
            .lock()
            .ok()
            .and_then(|m| m.get(w).map(|s| s.iter().cloned().collect()))
            .unwrap_or_default()
    }

    /// The answer to `openpgp_of(file, url)`: the plan's pin, else kwin's; a miss is remembered.
    pub fn fingerprint(&self, file: &str, url: &str) -> Option<String> {
        if let Some(pin) = self.openpgp_pins.get(file) {
            return Some(pin.clone());
        }
        if let Some(f) = self.known.fingerprint(&self.upstream_url(url)) {
            return Some(f.to_string());
        }
        self.remember(Wanted {
            kind: WantedKind::OpenPgp,
            file: file.to_string(),
            sums_url: None,
            url: Some(url.to_string()),
            sha512_url: None,
        });
        None
    }

    /// Every lookup that found nothing, sorted.
    pub fn wanted(&self) -> Vec<Wanted> {
        self.wanted
            .lock()
            .map(|w| w.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The records, to save after adding fetched ones.
    pub fn recorded(&self) -> &BTreeMap<String, Recorded> {
        &self.recorded
    }

    /// Record `r` under `url`: the checksum file's URL, or the artifact's when kwin hashed it.
    pub fn record(&mut self, url: String, r: Recorded) {
        self.recorded.insert(url, r);
    }

    /// The same knowledge with new records and nothing wanted yet.
    pub fn with_records(&self, recorded: BTreeMap<String, Recorded>) -> Self {
        Checksums {
            recorded,
            wanted: Arc::default(),
            asking: Arc::default(),
            ..self.clone()
        }
    }
}

/// Path of the record in `state_dir` (the plan's `.kwin/`).
pub fn record_path(state_dir: &Path) -> PathBuf {
    state_dir.join(RECORD_FILE)
}

/// Read the record; a missing file is an empty record. Errors name the file.
pub fn load_record(path: &Path) -> Result<BTreeMap<String, Recorded>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let map: BTreeMap<String, Recorded> =
        toml::from_str(&text).map_err(|e| format!("{} is not valid: {e}", path.display()))?;
    for (url, r) in &map {
        if !is_sha256(&r.sha256) {
            return Err(format!(
                "{}: the checksum recorded for {url} is not 64 hex digits (delete the entry to fetch it again)",
                path.display()
            ));
        }
    }
    Ok(map)
}

/// Write the record (0600, replaced atomically).
pub fn save_record(path: &Path, map: &BTreeMap<String, Recorded>) -> Result<(), String> {
    let mut text = String::from(
        "# SHA-256 checksums kwin fetched over https: from the upstream's published checksum\n\
         # files, by the checksum file's URL; for an artifact whose upstream publishes no SHA-256\n\
         # file, computed from the artifact itself (checked against its SHA-512 file where one is\n\
         # published, `sha512_file`), by the artifact's URL. Keep this file with the plan to fix\n\
         # the artifacts of every run; a pin in the plan's [artifacts.sha256] wins over it.\n\n",
    );
    text.push_str(
        &toml::to_string(map).map_err(|e| format!("cannot encode {}: {e}", path.display()))?,
    );
    crate::fs::write_private(path, text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn is_sha256(s: &str) -> bool {
    is_hex(s, 64)
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The SHA-256 of `file` in a checksum file: either one bare hash, or `sha256sum` lines
/// (`<hash>  <name>` / `<hash> *<name>`, the name possibly with a directory) of which the one
/// naming `file` is taken.
pub fn parse_sums(text: &str, file: &str) -> Result<String, String> {
    parse_hex_sums(text, file, 64, "SHA-256")
}

/// The SHA-512 of `file` in a SHA-512 file (`sha512sum` / `shasum -a 512` lines, or one bare
/// hash), as [`parse_sums`].
pub fn parse_sha512_sums(text: &str, file: &str) -> Result<String, String> {
    parse_hex_sums(text, file, 128, "SHA-512")
}

fn parse_hex_sums(text: &str, file: &str, len: usize, what: &str) -> Result<String, String> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let mut named = 0;
    for line in &lines {
        let mut words = line.split_whitespace();
        let (Some(hash), name) = (words.next(), words.next()) else {
            continue;
        };
        if !is_hex(hash, len) {
            continue;
        }
        match name {
            None if lines.len() == 1 => return Ok(hash.to_ascii_lowercase()),
            None => {}
            Some(n) => {
                named += 1;
                let n = n.trim_start_matches('*');
                let base = n.rsplit('/').next().unwrap_or(n);
                if base == file {
                    return Ok(hash.to_ascii_lowercase());
                }
            }
        }
    }
    if named > 0 {
        Err(format!("it lists {named} file(s), none named `{file}`"))
    } else {
        Err(format!("it holds no {what} ({len} hex digits)"))
    }
}

/// A checksum that could not be had: its checksum file, or the artifact kwin hashes itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchError {
    pub file: String,
    /// The URL that failed: the checksum file, the artifact or its SHA-512 file.
    pub url: String,
    pub why: String,
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "checksum of `{}`: {} — {}",
            self.file, self.url, self.why
        )
    }
}

/// How long one artifact kwin hashes itself may take to arrive (checksum files get the
/// caller's timeout).
const ARTIFACT_TIMEOUT: Duration = Duration::from_secs(300);

/// Fetch every wanted checksum (on the controller, all at once) with `client`
/// (`transport::http::Client`): the checksum file where there is one; else the artifact
/// itself, hashed as it streams in (at most [`MAX_ARTIFACT_BYTES`]) and checked against its
/// SHA-512 file when the request names one. Each result is keyed by the URL the checksum came
/// from (checksum file or artifact). Requests with nothing to fetch (no URL, or a signing
/// key) are left out: the caller reports them. Only `https://`, and redirects must stay on
/// https (the client's rule).
pub async fn fetch(
    wanted: &[Wanted],
    client: Arc<dyn Https>,
) -> Vec<Result<(String, Recorded), FetchError>> {
    let mut set = tokio::task::JoinSet::new();
    for (i, w) in wanted.iter().enumerate() {
        let Some(url) = w.source().map(str::to_string) else {
            continue;
        };
        let client = client.clone();
        let w = w.clone();
        set.spawn(async move {
            let client = client.as_ref();
            let r = if w.from_artifact() {
                hash_artifact(client, &url, &w.file, w.sha512_url.as_deref()).await
            } else {
                fetch_one(client, &url, &w.file)
                    .await
                    .map(|sha256| Recorded {
                        file: w.file.clone(),
                        sha256,
                        sha512_file: None,
                    })
                    .map_err(|why| FetchError {
                        file: w.file.clone(),
                        url: url.clone(),
                        why,
                    })
            };
            (i, r.map(|rec| (url, rec)))
        });
    }
    let mut out = Vec::new();
    while let Some(done) = set.join_next().await {
        match done {
            Ok(r) => out.push(r),
            Err(e) => out.push((
                usize::MAX,
                Err(FetchError {
                    file: String::new(),
                    url: String::new(),
                    why: format!("fetch task failed: {e}"),
                }),
            )),
        }
    }
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

/// A small text file (a checksum file) at `url`, at most [`MAX_SUMS_BYTES`].
async fn fetch_text(client: &dyn Https, url: &str) -> Result<String, String> {
    let mut resp = client.get(url, None).await?;
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        if body.len() + chunk.len() > MAX_SUMS_BYTES {
            return Err(format!(
                "larger than {} KiB: not a checksum file",
                MAX_SUMS_BYTES / 1024
            ));
        }
        body.extend_from_slice(&chunk);
    }
    String::from_utf8(body).map_err(|_| "not UTF-8 text".to_string())
}

async fn fetch_one(client: &dyn Https, url: &str, file: &str) -> Result<String, String> {
    parse_sums(&fetch_text(client, url).await?, file)
}

/// The artifact at `url` hashed on the controller: its SHA-256, after its SHA-512 matched the
/// upstream's SHA-512 file at `sha512_url` (fetched first, so a missing one stops before the
/// download).
async fn hash_artifact(
    client: &dyn Https,
    url: &str,
    file: &str,
    sha512_url: Option<&str>,
) -> Result<Recorded, FetchError> {
    use sha2::{Digest, Sha256, Sha512};
    let fail = |url: &str, why: String| FetchError {
        file: file.to_string(),
        url: url.to_string(),
        why,
    };
    let want512 = match sha512_url {
        Some(u) => Some(
            fetch_text(client, u)
                .await
                .and_then(|t| parse_sha512_sums(&t, file))
                .map_err(|why| fail(u, why))?,
        ),
        None => None,
    };
    let too_large = || {
        format!(
            "larger than {} MiB: kwin hashes only artifacts up to that size (pin its SHA-256 in the plan instead)",
            MAX_ARTIFACT_BYTES / (1024 * 1024)
        )
    };
    let mut resp = client
        .get(url, Some(ARTIFACT_TIMEOUT))
        .await
        .map_err(|why| fail(url, why))?;
    if resp.announced_len().is_some_and(|n| n > MAX_ARTIFACT_BYTES) {
        return Err(fail(url, too_large()));
    }
    let mut sha256 = Sha256::new();
    let mut sha512 = want512.as_ref().map(|_| Sha512::new());
    let mut len: u64 = 0;
    while let Some(chunk) = resp.chunk().await.map_err(|why| fail(url, why))? {
        len += chunk.len() as u64;
        if len > MAX_ARTIFACT_BYTES {
            return Err(fail(url, too_large()));
        }
        sha256.update(&chunk);
        if let Some(h) = sha512.as_mut() {
            h.update(&chunk);
        }
    }
    if let (Some(want), Some(h), Some(u)) = (want512, sha512, sha512_url) {
        let got = hex::encode(h.finalize());
        if got != want {
            return Err(fail(
                url,
                format!("its SHA-512 {got} does not match the SHA-512 file {u} ({want})"),
            ));
        }
    }
    Ok(Recorded {
        file: file.to_string(),
        sha256: hex::encode(sha256.finalize()),
        sha512_file: sha512_url.map(str::to_string),
    })
}

/// One entry of an `[artifacts.sha256]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinRow {
    /// The artifact's file name: the key the plan's pins use.
    pub file: String,
    /// Its SHA-256; `None` prints a placeholder for the user to fill in.
    pub sha256: Option<String>,
    /// Where kwin gets it: the checksum file, else the artifact itself.
    pub source: Option<String>,
    /// `source` is the artifact (its upstream publishes no SHA-256 file).
    pub from_artifact: bool,
}

impl PinRow {
    /// The row of a wanted SHA-256, with the digest when known.
    pub fn of(w: &Wanted, sha256: Option<String>) -> PinRow {
        PinRow {
            file: w.file.clone(),
            sha256,
            source: w.source().map(str::to_string),
            from_artifact: w.from_artifact(),
        }
    }
}

/// The value a user replaces in a printed table. Valid TOML; as a pin it is refused
/// (`bad-checksum`), so a table pasted unfilled cannot pass for one.
pub fn placeholder(file: &str) -> String {
    format!("<SHA-256 of {file}>")
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `s` for a one-line TOML comment.
fn comment(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// An `[artifacts.sha256]` table as TOML, ready to paste into a plan: one key per file name
/// (sorted, each once), each after a comment naming where it is published; a row without a
/// digest gets a [`placeholder`].
pub fn sha256_table(rows: &[PinRow]) -> String {
    let mut by_file: BTreeMap<&str, Vec<&PinRow>> = BTreeMap::new();
    for r in rows {
        by_file.entry(r.file.as_str()).or_default().push(r);
    }
    let mut out = String::from("[artifacts.sha256]\n");
    for (file, rows) in by_file {
        let mut sources = BTreeSet::new();
        for r in &rows {
            if let Some(u) = &r.source {
                let what = if r.from_artifact {
                    "the file itself, no SHA-256 file is published"
                } else {
                    "checksum file"
                };
                sources.insert(format!("# {} ({what})\n", comment(u)));
            }
        }
        sources.iter().for_each(|s| out.push_str(s));
        let value = rows
            .iter()
            .find_map(|r| r.sha256.clone())
            .unwrap_or_else(|| placeholder(file));
        out.push_str(&format!(
            "{} = {}\n",
            toml_string(file),
            toml_string(&value)
        ));
    }
    out
}

/// The table `kwin checksums` prints: every SHA-256 in `asked` — what an expansion without
/// records asked for in vain, i.e. neither pinned by the plan nor by kwin — answered from the
/// records of `sums`. `Err`: the files no record answers (fetch them first).
pub fn pin_rows(asked: &[Wanted], sums: &Checksums) -> Result<Vec<PinRow>, Vec<String>> {
    let mut rows = Vec::new();
    let mut missing = Vec::new();
    for w in asked.iter().filter(|w| w.kind == WantedKind::Sha256) {
        match sums.recorded_answer(w) {
            Some(h) => rows.push(PinRow::of(w, Some(h.to_string()))),
            None => missing.push(w.file.clone()),
        }
    }
    if missing.is_empty() {
        Ok(rows)
    } else {
        Err(missing)
    }
}

fn at(loc: &Option<Location>) -> String {
    loc.as_ref()
        .map(|l| format!(" ({}:{}:{})", l.file.display(), l.line, l.col))
        .unwrap_or_default()
}

/// Who needs `w`: each recipe step or plan task that asked for it, on which hosts, where it
/// is defined (the plan's `[[tasks]]` entry, or the recipe step).
pub fn needed_by_text(
    plan: &LoadedPlan,
    sums: &Checksums,
    tasks: &[Task],
    w: &Wanted,
) -> Vec<String> {
    sums.needed_by(w)
        .iter()
        .map(|o| {
            let mine: Vec<&Task> = tasks.iter().filter(|t| &t.origin == o).collect();
            let mut hosts: Vec<&str> = Vec::new();
            for t in &mine {
                if !hosts.contains(&t.id.host.as_str()) {
                    hosts.push(&t.id.host);
                }
            }
            let what = match o {
                Origin::Recipe { recipe, step } => format!("step `{step}` of recipe `{recipe}`"),
                Origin::User { index } => format!(
                    "task `{}`",
                    plan.file
                        .tasks
                        .get(*index)
                        .map(|t| t.name.as_str())
                        .unwrap_or("?")
                ),
            };
            let on = if hosts.is_empty() {
                String::new()
            } else {
                format!(" on {}", hosts.join(", "))
            };
            let loc = match o {
                Origin::User { index } => plan.loc(&format!("tasks[{index}]")),
                Origin::Recipe { .. } => mine.first().and_then(|t| t.location.clone()),
            };
            format!("{what}{on}{}", at(&loc))
        })
        .collect()
}

/// The one error for checksums `kwin plan` / `apply` could not fetch on this machine (no
/// network, an unreachable mirror, a missing or broken checksum file): every artifact, the
/// URL it was to come from and why it did not, which recipe steps or plan tasks need it on
/// which hosts; the hint is the `[artifacts.sha256]` table to paste into the plan, with
/// placeholders, and how to get it filled in (`kwin checksums` on a machine that can reach
/// the URLs). At the plan's `[artifacts]` (else `[cluster]`), where the table goes.
pub fn unfetched_diagnostic(
    plan: &LoadedPlan,
    sums: &Checksums,
    tasks: &[Task],
    wanted: &[Wanted],
    failed: &[FetchError],
) -> Diagnostic {
    let mut lines = Vec::new();
    let mut rows = Vec::new();
    for e in failed {
        lines.push(format!(
            "  - cannot get the checksum of `{}` from {}: {}",
            e.file,
            e.url,
            e.why.replace('\n', " ")
        ));
        let mine: Vec<&Wanted> = wanted
            .iter()
            .filter(|w| {
                w.file == e.file
                    && (w.source() == Some(e.url.as_str())
                        || w.sha512_url.as_deref() == Some(e.url.as_str()))
            })
            .collect();
        let mut needs: Vec<String> = Vec::new();
        for w in &mine {
            rows.push(PinRow::of(w, None));
            for n in needed_by_text(plan, sums, tasks, w) {
                if !needs.contains(&n) {
                    needs.push(n);
                }
            }
        }
        if mine.is_empty() {
            rows.push(PinRow {
                file: e.file.clone(),
                sha256: None,
                source: Some(e.url.clone()),
                from_artifact: false,
            });
        }
        for n in needs {
            lines.push(format!("    needed by {n}"));
        }
    }
    let n = rows
        .iter()
        .map(|r| r.file.as_str())
        .collect::<BTreeSet<_>>()
        .len();
    let summary = format!(
        "cannot get {} on this machine, and neither the plan nor kwin pins {}:\n{}",
        if n == 1 {
            "the checksum of 1 artifact".to_string()
        } else {
            format!("the checksums of {n} artifacts")
        },
        if n == 1 { "it" } else { "them" },
        lines.join("\n")
    );
    let hint = format!(
        "pin {} in the plan: on a machine that can reach these URLs, `kwin checksums {}` fetches \
         them and prints this table filled in (`--write FILE` writes it); or fill in each SHA-256 \
         from a source you trust. Then add the table to the plan (merged with the sha256 \
         pins the plan already has):\n\n{}",
        if n == 1 { "it" } else { "them" },
        plan.path.display(),
        sha256_table(&rows).trim_end()
    );
    Diagnostic::error("artifact-checksum", summary)
        .with_hint(hint)
        .at(plan.loc("artifacts").or_else(|| plan.loc("cluster")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "3dd03954565808eaeb3a7ffc0e8cb7886a64a9aa94b2bfdfbdc6e2ed94842e49";
    const B: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn bare_hash_file() {
        assert_eq!(
            parse_sums(&format!("{A}\n"), "kubelet.exe").as_deref(),
            Ok(A)
        );
        assert_eq!(
            parse_sums(&A.to_ascii_uppercase(), "x").as_deref(),
            Ok(A),
            "upper-case hex is accepted and lowered"
        );
    }

    #[test]
    fn sha256sum_lines_pick_the_named_file() {
        let text = format!("{B}  runc.arm64\n{A}  runc.amd64\n");
        assert_eq!(parse_sums(&text, "runc.amd64").as_deref(), Ok(A));
        assert_eq!(parse_sums(&text, "runc.arm64").as_deref(), Ok(B));
        let err = parse_sums(&text, "runc.ppc64le").expect_err("no such file");
        assert!(err.contains("none named `runc.ppc64le`"), "{err}");
        // binary-mode marker and a directory in the name
        let text = format!("{A} *bin/containerd-1.7.24-linux-amd64.tar.gz\n");
        assert_eq!(
            parse_sums(&text, "containerd-1.7.24-linux-amd64.tar.gz").as_deref(),
            Ok(A)
        );
    }

    #[test]
    fn garbage_is_refused() {
        for text in ["", "<html>not found</html>", "abc  kubelet.exe", &A[..63]] {
            assert!(parse_sums(text, "kubelet.exe").is_err(), "{text:?}");
        }
        // two bare hashes: ambiguous
        assert!(parse_sums(&format!("{A}\n{B}\n"), "f").is_err());
    }

    #[test]
    fn pin_wins_then_record_then_wanted() {
        let mut pins = BTreeMap::new();
        pins.insert("kubelet.exe".to_string(), A.to_ascii_uppercase());
        let mut rec = BTreeMap::new();
        rec.insert(
            "https://m/kubeadm.exe.sha256".to_string(),
            Recorded {
                file: "kubeadm.exe".into(),
                sha256: B.into(),
                ..Recorded::default()
            },
        );
        let c = Checksums::new(pins, rec);
        assert_eq!(
            c.lookup(
                "kubelet.exe",
                Some("https://m/kubelet.exe.sha256"),
                None,
                None
            )
            .as_deref(),
            Some(A)
        );
        assert_eq!(
            c.lookup(
                "kubeadm.exe",
                Some("https://m/kubeadm.exe.sha256"),
                None,
                None
            )
            .as_deref(),
            Some(B)
        );
        // a record for another file name under that URL does not answer
        assert_eq!(
            c.lookup(
                "other.exe",
                Some("https://m/kubeadm.exe.sha256"),
                None,
                None
            ),
            None
        );
        assert_eq!(c.lookup("containerd.service", None, None, None), None);
        let w = c.wanted();
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].file, "containerd.service");
        assert_eq!(w[0].sums_url, None);
        assert_eq!(w[1].file, "other.exe");
    }

    const TABLE: &str = r#"
[[artifact]]
url = "https://raw.githubusercontent.com/o/r/{version}/m.yml"
source = "test"
[artifact.sha256]
"v1.0.0" = "3dd03954565808eaeb3a7ffc0e8cb7886a64a9aa94b2bfdfbdc6e2ed94842e49"

[[signing_key]]
url = "https://pkgs.example/{minor}/deb/Release.key"
fingerprint = "DE15B14486CD377B9E876E1A234654DA9A296436"
source = "test"
"#;

    fn plan_file(mirror: Option<&str>) -> crate::plan::PlanFile {
        let mut f: crate::plan::PlanFile = toml::from_str("").expect("empty plan");
        f.artifacts.mirror = mirror.map(str::to_string);
        f
    }

    #[test]
    fn known_digests_answer_by_upstream_url_also_under_a_mirror() {
        let known = Arc::new(Known::parse(TABLE).expect("table"));
        let c = Checksums::for_plan(&plan_file(None), BTreeMap::new(), known.clone());
        let url = "https://raw.githubusercontent.com/o/r/v1.0.0/m.yml";
        assert_eq!(c.lookup("m.yml", None, Some(url), None).as_deref(), Some(A));
        assert_eq!(
            c.lookup(
                "m.yml",
                None,
                Some("https://raw.githubusercontent.com/o/r/v2.0.0/m.yml"),
                None
            ),
            None
        );
        // under a mirror, the URL maps back to the upstream one
        let c = Checksums::for_plan(
            &plan_file(Some("http://mirror.lab:8080/")),
            BTreeMap::new(),
            known,
        );
        assert_eq!(
            c.lookup(
                "m.yml",
                None,
                Some("http://mirror.lab:8080/raw.githubusercontent.com/o/r/v1.0.0/m.yml"),
                None
            )
            .as_deref(),
            Some(A)
        );
        assert_eq!(
            c.fingerprint(
                "Release.key",
                "http://mirror.lab:8080/pkgs.example/v1.31/deb/Release.key"
            )
            .as_deref(),
            Some("DE15B14486CD377B9E876E1A234654DA9A296436")
        );
        assert_eq!(
            c.fingerprint("Release.key", "https://pkgs.example/latest/deb/Release.key"),
            None
        );
        let w = c.wanted();
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].kind, WantedKind::OpenPgp);
    }

    #[test]
    fn a_record_fetched_over_http_is_no_answer() {
        let mut rec = BTreeMap::new();
        rec.insert(
            "http://m/kubelet.exe.sha256".to_string(),
            Recorded {
                file: "kubelet.exe".into(),
                sha256: A.into(),
                ..Recorded::default()
            },
        );
        let c = Checksums::new(BTreeMap::new(), rec);
        assert_eq!(
            c.lookup(
                "kubelet.exe",
                Some("http://m/kubelet.exe.sha256"),
                None,
                None
            ),
            None
        );
    }

    #[test]
    fn an_artifact_without_a_checksum_file_is_answered_by_its_url_record() {
        let url = "https://github.com/o/r/releases/download/v1/tool-v1.zip";
        let sha512 = "https://github.com/o/r/releases/download/v1/tool-v1.zip.sha512";
        let c = Checksums::new(BTreeMap::new(), BTreeMap::new());
        assert_eq!(c.lookup("tool-v1.zip", None, Some(url), Some(sha512)), None);
        let w = c.wanted();
        assert_eq!(w.len(), 1);
        assert!(w[0].from_artifact());
        assert_eq!(w[0].source(), Some(url));
        assert_eq!(w[0].sha512_url.as_deref(), Some(sha512));
        // recorded by the artifact's URL: the answer, for that file name only
        let mut rec = BTreeMap::new();
        rec.insert(
            url.to_string(),
            Recorded {
                file: "tool-v1.zip".into(),
                sha256: A.into(),
                sha512_file: Some(sha512.into()),
            },
        );
        let c = Checksums::new(BTreeMap::new(), rec.clone());
        assert_eq!(
            c.lookup("tool-v1.zip", None, Some(url), Some(sha512))
                .as_deref(),
            Some(A)
        );
        assert_eq!(c.lookup("other.zip", None, Some(url), None), None);
        // a record under a plain-HTTP URL is no answer
        let http = url.replacen("https://", "http://", 1);
        let mut rec = BTreeMap::new();
        rec.insert(
            http.clone(),
            Recorded {
                file: "tool-v1.zip".into(),
                sha256: A.into(),
                ..Recorded::default()
            },
        );
        let c = Checksums::new(BTreeMap::new(), rec);
        assert_eq!(c.lookup("tool-v1.zip", None, Some(&http), None), None);
        // a signing key is never fetched
        let c = Checksums::new(BTreeMap::new(), BTreeMap::new());
        assert_eq!(c.fingerprint("Release.key", "https://x/Release.key"), None);
        assert_eq!(c.wanted()[0].source(), None);
    }

    #[test]
    fn sha512_files_as_shasum_writes_them() {
        let h = "ab".repeat(64);
        let text = format!("{h}  ./release/windows-container-networking-cni-amd64-v0.3.1.zip\n");
        assert_eq!(
            parse_sha512_sums(&text, "windows-container-networking-cni-amd64-v0.3.1.zip")
                .as_deref(),
            Ok(h.as_str())
        );
        assert!(parse_sha512_sums(&text, "other.zip").is_err());
        // a SHA-256 is not a SHA-512
        let e = parse_sha512_sums(&format!("{A}\n"), "x").expect_err("not a SHA-512");
        assert!(e.contains("no SHA-512 (128 hex digits)"), "{e}");
    }

    #[test]
    fn a_bad_table_is_refused() {
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

    #[test]
    fn a_printed_table_is_toml_keyed_by_file_name() {
        let w = |file: &str, sums: Option<&str>, url: Option<&str>| Wanted {
            kind: WantedKind::Sha256,
            file: file.into(),
            sums_url: sums.map(str::to_string),
            url: url.map(str::to_string),
            sha512_url: None,
        };
        let rows = [
            PinRow::of(
                &w("kubelet.exe", Some("https://m/kubelet.exe.sha256"), None),
                None,
            ),
            PinRow::of(
                &w("odd \"name\".zip", None, Some("https://m/x\n# y")),
                Some(A.into()),
            ),
            // the same file asked for twice: one key
            PinRow::of(
                &w("kubelet.exe", Some("https://m/kubelet.exe.sha256"), None),
                None,
            ),
        ];
        let text = sha256_table(&rows);
        let t: toml::Table = toml::from_str(&text).expect(&text);
        let s = t["artifacts"]["sha256"].as_table().expect("table");
        assert_eq!(s.len(), 2, "{text}");
        assert_eq!(
            s["kubelet.exe"].as_str(),
            Some(placeholder("kubelet.exe").as_str())
        );
        assert_eq!(s["odd \"name\".zip"].as_str(), Some(A));
        assert!(
            text.contains("# https://m/x?# y (the file itself"),
            "{text}"
        );
        // a placeholder left in is no pin
        assert!(crate::plan::syntax::sha256_hex(&placeholder("kubelet.exe")).is_err());
    }

    #[test]
    fn record_round_trip_and_bad_record() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join(RECORD_FILE);
        assert!(load_record(&p).expect("missing is empty").is_empty());
        let mut m = BTreeMap::new();
        m.insert(
            "https://dl.k8s.io/v1.31.4/bin/windows/amd64/kubelet.exe.sha256".to_string(),
            Recorded {
                file: "kubelet.exe".into(),
                sha256: A.into(),
                ..Recorded::default()
            },
        );
        save_record(&p, &m).expect("save");
        assert_eq!(load_record(&p).expect("load"), m);
        std::fs::write(
            &p,
            "[\"https://x/y.sha256\"]\nfile = \"y\"\nsha256 = \"nothex\"\n",
        )
        .expect("write");
        let e = load_record(&p).expect_err("bad record");
        assert!(
            e.contains("https://x/y.sha256") && e.contains("64 hex"),
            "{e}"
        );
    }
}
