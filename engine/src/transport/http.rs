//! HTTPS GETs from the controller (artifact checksum files): https only, a redirect must stay
//! on https, at most a given number of bytes read. Uses the controller's
//! `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY` environment. The only place outside the SSH and
//! WinRM transports that speaks to the network, so `reqwest` stays inside `transport/`.

use std::future::Future;
use std::time::Duration;

/// An HTTPS client for GETs with bounded bodies. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Https {
    client: Result<reqwest::Client, String>,
}

impl Https {
    /// A client whose requests time out after `timeout` (connecting, and as a whole). A
    /// client that cannot be made fails every request with the reason.
    pub fn new(timeout: Duration) -> Https {
        // https only, and a redirect must stay on https.
        let policy = reqwest::redirect::Policy::custom(|attempt| {
            if attempt.url().scheme() != "https" {
                let to = attempt.url().to_string();
                attempt.error(format!(
                    "redirected to {to}: checksum files are fetched only over https"
                ))
            } else if attempt.previous().len() >= 10 {
                attempt.error("more than 10 redirects")
            } else {
                attempt.follow()
            }
        });
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .https_only(true)
            .redirect(policy)
            .user_agent(concat!("kwin/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot make an HTTP client: {e}"));
        Https { client }
    }

    /// GET `url`: the body of a successful response, read up to `limit + 1` bytes — a longer
    /// body comes back cut there, so the caller sees it is longer than `limit` without the
    /// rest ever being held (as `fs::read_bounded` does for files). `Err`: why there is no
    /// body, on one line.
    pub fn get_bounded(
        &self,
        url: String,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<u8>, String>> + Send + 'static {
        let client = self.client.clone();
        async move {
            let client = client?;
            let mut resp = client.get(&url).send().await.map_err(|e| describe(&e))?;
            let status = resp.status();
            if !status.is_success() {
                return Err(format!("HTTP {status}"));
            }
            let mut body = Vec::new();
            while let Some(chunk) = resp.chunk().await.map_err(|e| describe(&e))? {
                let room = (limit + 1).saturating_sub(body.len());
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if body.len() > limit {
                    break;
                }
            }
            Ok(body)
        }
    }
}

/// reqwest's error with its causes, on one line.
fn describe(e: &reqwest::Error) -> String {
    let mut s = if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_connect() {
        "cannot connect".to_string()
    } else {
        "request failed".to_string()
    };
    let mut src = std::error::Error::source(e);
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}
