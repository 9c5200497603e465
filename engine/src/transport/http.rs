//! HTTPS GETs from the controller ([`crate::net::Https`]): https only, a redirect must stay on
//! https. Uses the controller's `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY` environment. With the
//! SSH and WinRM transports, the only code that knows an HTTP client, so `reqwest` stays
//! inside `transport/`.

use crate::net::{Body, Https};
use async_trait::async_trait;
use std::time::Duration;

/// An HTTPS client (reqwest, rustls). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Client {
    client: Result<reqwest::Client, String>,
}

impl Client {
    /// A client whose requests time out after `timeout` (connecting, and as a whole). A
    /// client that cannot be made fails every request with the reason.
    pub fn new(timeout: Duration) -> Client {
        // https only, and a redirect must stay on https: a checksum (or an artifact hashed on
        // the controller) that could come over plain HTTP proves nothing.
        let policy = reqwest::redirect::Policy::custom(|attempt| {
            if attempt.url().scheme() != "https" {
                let to = attempt.url().to_string();
                attempt.error(format!(
                    "redirected to {to}: checksums are fetched only over https"
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
        Client { client }
    }
}

#[async_trait]
impl Https for Client {
    async fn get(&self, url: &str, timeout: Option<Duration>) -> Result<Box<dyn Body>, String> {
        let client = self.client.as_ref().map_err(Clone::clone)?;
        if !url.starts_with("https://") {
            return Err("checksums are fetched only over https".to_string());
        }
        let mut req = client.get(url);
        if let Some(t) = timeout {
            req = req.timeout(t);
        }
        let resp = req.send().await.map_err(|e| describe(&e))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(format!("HTTP {status}"));
        }
        Ok(Box::new(Response(resp)))
    }
}

struct Response(reqwest::Response);

#[async_trait]
impl Body for Response {
    fn announced_len(&self) -> Option<u64> {
        self.0.content_length()
    }
    async fn chunk(&mut self) -> Result<Option<Vec<u8>>, String> {
        self.0
            .chunk()
            .await
            .map(|c| c.map(|b| b.to_vec()))
            .map_err(|e| describe(&e))
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
