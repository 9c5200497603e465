//! A checksum a recipe asked for and nobody knew: what `kwin plan` / `apply` fetch, and what
//! the `artifact-checksum` error and `kwin checksums` list.

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
