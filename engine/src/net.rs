//! The contract of a GET from the controller (artifact checksums, artifacts kwin hashes):
//! [`Https`], implemented by the transport layer (`transport::http`, the only code that knows
//! an HTTP client) and used by `checksums`, so the checksum policy needs no HTTP client and
//! tests can answer from memory. Vocabulary: no imports from the rest of the engine.

use async_trait::async_trait;
use std::time::Duration;

/// GETs over https from the controller.
#[async_trait]
pub trait Https: Send + Sync {
    /// GET `url` (https only; a redirect must stay on https): the body of a successful
    /// response, to read as it arrives. `timeout`: for this request, instead of the client's.
    /// `Err`: why there is no body, on one line.
    async fn get(&self, url: &str, timeout: Option<Duration>) -> Result<Box<dyn Body>, String>;
}

/// The body of a response, read as it arrives.
#[async_trait]
pub trait Body: Send {
    /// The length the server announced, if it did.
    fn announced_len(&self) -> Option<u64>;
    /// The next piece; `None` at the end.
    async fn chunk(&mut self) -> Result<Option<Vec<u8>>, String>;
}
