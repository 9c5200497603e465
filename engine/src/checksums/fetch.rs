//! Fetching on the controller what nobody answered (`kwin plan`, `kwin apply`, `kwin
//! checksums`): checksum files (at most 64 KiB), or the artifact itself, hashed as it streams
//! in, for an upstream that publishes no SHA-256 file. Over [`Https`] only (the caller hands
//! in `transport::http::Client`: https, redirects kept on https), every request at once.

use super::record::Recorded;
use super::sums::{parse_sha512_sums, parse_sums};
use super::wanted::Wanted;
use crate::net::Https;
use std::sync::Arc;
use std::time::Duration;

/// Largest checksum file accepted (upstream files are under 1 KiB; `runc.sha256sum` ~1 KiB).
const MAX_SUMS_BYTES: usize = 64 * 1024;

/// Largest artifact kwin fetches to hash on the controller. What goes this way is a release
/// archive of one or a few programs (flannel's Windows build and windows-container-networking's
/// zip are around 10 MiB) or a manifest; anything larger is refused rather than streamed on.
pub const MAX_ARTIFACT_BYTES: u64 = 64 * 1024 * 1024;

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
