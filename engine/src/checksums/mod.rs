//! Artifact checksums: where the SHA-256 (or, for a signing key, the OpenPGP fingerprint) of
//! every download comes from.
//!
//! Recipes ask with `sha256_of('file-name', 'checksum-file-url', url='artifact-url',
//! sha512='sha512-file-url')` for a checksum they need (the checksum-file URL is left out when
//! the upstream publishes no SHA-256 file; `sha512=` names the SHA-512 file of an upstream that
//! publishes only that), and with `openpgp_of('file-name', 'key-url')` for a signing key's
//! fingerprint. The answer to `sha256_of` ([`Checksums::lookup`]), in this order:
//!
//! 1. the plan's pin, `[artifacts.sha256]`, by file name — always wins;
//! 2. kwin's own digests (`plans/digests.toml`, [`Known`]), by the artifact's upstream URL
//!    (with a mirror, the URL under the mirror maps back to the upstream one): each comes from
//!    a source readable without trusting the download's site (a git tag's blob, another
//!    project's reviewed table), cited there;
//! 3. a checksum recorded earlier in `.kwin/checksums.toml` next to the plan ([`Recorded`]) —
//!    only `https://` keys: by checksum-file URL, taken from the upstream's published checksum
//!    file; or, for an artifact without one, by the artifact's own URL, computed from the
//!    artifact;
//! 4. nothing yet: the request is remembered ([`Checksums::wanted`], with the recipe step or
//!    plan task that asked, [`Checksums::asking`]). `kwin plan` / `kwin apply` then
//!    [`fetch`] on the controller: the missing checksum files (at most 64 KiB each), and the
//!    artifacts whose upstream publishes no SHA-256 file (hashed as they stream in, at most
//!    [`MAX_ARTIFACT_BYTES`], checked against the upstream's SHA-512 file where `sha512=`
//!    names one) — `https://` only, and a redirect must stay on https; they record the results
//!    (0600) and expand again (`pipeline/phase.rs`). `kwin validate`, `kwin graph` and
//!    `kwin reset` never touch the network.
//!
//! `openpgp_of` answers from `[artifacts.openpgp]`, then [`Known`]; there is no checksum file
//! for a key. A request neither answers and that names no https URL to fetch cannot be
//! satisfied: the command stops before connecting to any host, naming the file and the plan
//! line to add. With a plain-HTTP mirror, a checksum that would have to be fetched is refused
//! too (`mirror-http`): it would come over the same unauthenticated channel as the artifact.
//! What cannot be fetched (no network, an unreachable mirror, a broken checksum file) is ONE
//! `artifact-checksum` error ([`unfetched_diagnostic`]): every artifact with its URL and why,
//! the steps and tasks that need it on which hosts, and an `[artifacts.sha256]` table with
//! placeholders ([`sha256_table`]). `kwin checksums` prints that table filled in from the
//! records ([`pin_rows`]), for the plan of a controller without a network.
//!
//! Trust: a checksum file fetched over HTTPS from the upstream (or an https mirror) proves the
//! artifact a host downloads is the one the upstream published, byte for byte; an artifact
//! fetched over HTTPS and hashed on the controller proves exactly the same (the host must get
//! the bytes the controller got from the upstream), and no more. Neither protects against a
//! compromised upstream. kwin's digests and a pin in the plan (or a reviewed
//! `.kwin/checksums.toml` kept with the plan) fix the artifacts for every run.
//!
//! The files, one job each, in the order they depend on each other: `sums.rs` (parsing
//! checksum files), `wanted.rs` (a request nobody answered), `known.rs` (kwin's digests),
//! `record.rs` (`.kwin/checksums.toml`), `lookup.rs` (the answer, [`Checksums`]), `fetch.rs`
//! (fetching on the controller through [`crate::net::Https`]), `report.rs` (the pin table and
//! the error).

mod fetch;
mod known;
mod lookup;
mod record;
mod report;
mod sums;
mod wanted;

pub use crate::plan::syntax::normalize_fingerprint;
pub use fetch::{fetch, FetchError, MAX_ARTIFACT_BYTES};
pub use known::Known;
pub use lookup::Checksums;
pub use record::{load_record, record_path, save_record, Recorded, RECORD_FILE};
pub use report::{
    needed_by_text, pin_rows, placeholder, sha256_table, unfetched_diagnostic, PinRow,
};
pub use sums::{parse_sha512_sums, parse_sums};
pub use wanted::{Wanted, WantedKind};
