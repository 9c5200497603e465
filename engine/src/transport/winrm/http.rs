//! HTTP/1.1 to the WinRM service on ONE owned connection (hyper), authenticated once per
//! connection.
//!
//! NTLM authenticates a TCP connection, not a request, so this module owns the connection
//! itself instead of borrowing one from a pool: it knows exactly when a connection is new
//! and must be authenticated again. Flow of [`Client::post`]:
//!
//! 1. no live connection → connect (TCP, then TLS for https) and authenticate:
//!    NTLM: two empty-body requests carrying NEGOTIATE and AUTHENTICATE (the second with the
//!    TLS channel binding over https); Basic: an Identify request with the header;
//! 2. send the request, NTLM-sealed in the `multipart/encrypted` framing over http; on a
//!    sealed connection every reply but a 401 must be sealed too (a plaintext one is refused:
//!    anyone on the path could have sent it);
//! 3. a 401 on a connection that had already been working (the server dropped its security
//!    context) → reconnect, re-authenticate, resend once; a 401 on a connection that was just
//!    authenticated → [`TransportError::Auth`];
//! 4. a request that could not even be written on a reused connection (the server closed it
//!    while idle) is resent once on a new connection; one that broke after being written is
//!    [`TransportError::ConnectionLost`] (the caller cannot know whether it ran).
//!
//! Any failure drops the connection: the next request starts a new one.

use super::auth::{self, NtlmClient};
use super::{crypt, soap, tls};
use crate::transport::spec::{SecretSource, WinrmAuth, WinrmSpec};
use crate::transport::{ConnectKind, TransportError};
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

const SOAP_CONTENT_TYPE: &str = "application/soap+xml;charset=UTF-8";
/// Largest reply body accepted (replies are bounded by MaxEnvelopeSize; this is a backstop).
const MAX_REPLY: usize = 32 * 1024 * 1024;

/// A reply: status and (unsealed) body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
}

/// How sending one request failed.
#[derive(Debug)]
enum SendError {
    /// The request was not written (the connection was already closed).
    NotSent(String),
    /// The connection broke after the request was (possibly) written.
    Lost(String),
    /// No reply within the time allowed.
    TimedOut,
}

struct Conn {
    sender: SendRequest<Full<Bytes>>,
    driver: JoinHandle<()>,
    /// NTLM context sealing requests and unsealing replies (NTLM over http).
    sealing: Option<NtlmClient>,
    /// `Authorization` header sent with every request (Basic).
    basic: Option<String>,
    /// Whether a request other than authentication was answered on this connection.
    proven: bool,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

#[derive(Clone)]
struct TlsSetup {
    connector: tokio_rustls::TlsConnector,
    seen: Arc<tls::Seen>,
    server_name: ServerName<'static>,
}

/// Counters for tests and measurements.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Connections opened and authenticated.
    pub connections: u64,
    /// Requests sent (authentication legs included).
    pub requests: u64,
}

/// The HTTP side of one WinRM transport.
pub struct Client {
    host_name: String,
    /// `host:port`, as shown in errors.
    address: String,
    /// Address to connect to (IPv6 without brackets).
    connect_host: String,
    port: u16,
    url: String,
    host_header: String,
    user: String,
    password: SecretSource,
    auth: WinrmAuth,
    tls: Option<TlsSetup>,
    connect_timeout: Duration,
    conn: Option<Conn>,
    stats: Stats,
    /// Duration of the last connect + authentication.
    pub last_connect: Option<Duration>,
}

impl Client {
    pub fn new(host_name: &str, spec: &WinrmSpec) -> Result<Self, TransportError> {
        let connect_host = spec
            .address
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let bracketed = if connect_host.contains(':') {
            format!("[{connect_host}]")
        } else {
            connect_host.clone()
        };
        let host_header = format!("{bracketed}:{}", spec.port);
        let scheme = if spec.https { "https" } else { "http" };
        let tls = if spec.https {
            let (config, seen) = tls::client_config(spec)?;
            let server_name = ServerName::try_from(connect_host.clone()).map_err(|e| {
                TransportError::Tls(format!(
                    "`{}` is not a valid tls server name: {e}",
                    spec.address
                ))
            })?;
            Some(TlsSetup {
                connector: tokio_rustls::TlsConnector::from(config),
                seen,
                server_name,
            })
        } else {
            None
        };
        Ok(Client {
            host_name: host_name.to_string(),
            address: host_header.clone(),
            connect_host,
            port: spec.port,
            url: format!("{scheme}://{host_header}/wsman"),
            host_header,
            user: spec.user.clone(),
            password: spec.password.clone(),
            auth: spec.auth,
            tls,
            connect_timeout: Duration::from_secs(spec.connect_timeout_secs.max(1)),
            conn: None,
            stats: Stats::default(),
            last_connect: None,
        })
    }

    /// The endpoint URL (`a:To` of every request).
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Drop the connection (the next request opens a new one).
    pub fn disconnect(&mut self) {
        self.conn = None;
    }

    fn auth_error(&self, reason: impl Into<String>) -> TransportError {
        TransportError::Auth {
            host: self.host_name.clone(),
            user: self.user.clone(),
            reason: reason.into(),
        }
    }

    fn connect_error(&self, kind: ConnectKind, reason: impl Into<String>) -> TransportError {
        TransportError::connect(self.address.clone(), kind, reason)
    }

    /// Open a new connection and authenticate it, replacing any current one.
    pub async fn connect(&mut self) -> Result<(), TransportError> {
        self.conn = None;
        let started = Instant::now();
        if self.auth == WinrmAuth::Kerberos {
            return Err(self.auth_error(
                "kerberos is not supported yet by the winrm transport; use auth = \"ntlm\"",
            ));
        }
        if self.auth == WinrmAuth::Basic && self.tls.is_none() {
            return Err(self.auth_error(
                "basic authentication needs https (the winrm service refuses it over http)",
            ));
        }
        let password = self.password.read().map_err(|e| {
            TransportError::Local(format!(
                "password for {}@{}: {e}",
                self.user, self.host_name
            ))
        })?;
        let (conn, cbt) = self.open().await?;
        self.conn = Some(conn);
        let result = match self.auth {
            WinrmAuth::Basic => {
                self.basic_login(auth::basic_header(&self.user, &password))
                    .await
            }
            _ => {
                let ctx =
                    NtlmClient::new(&self.user, &password, &self.connect_host, cbt.as_deref())
                        .map_err(|e| self.auth_error(e))?;
                self.ntlm_login(ctx).await
            }
        };
        if result.is_err() {
            self.conn = None;
        } else {
            self.stats.connections += 1;
            self.last_connect = Some(started.elapsed());
        }
        result
    }

    /// TCP (+ TLS) + HTTP/1.1 handshake. Returns the channel binding hash for TLS.
    async fn open(&mut self) -> Result<(Conn, Option<Vec<u8>>), TransportError> {
        let limit = self.connect_timeout;
        let tcp = match tokio::time::timeout(
            limit,
            TcpStream::connect((self.connect_host.as_str(), self.port)),
        )
        .await
        {
            Err(_) => {
                return Err(self.connect_error(
                    ConnectKind::NoAnswer,
                    format!("no answer within {}s", limit.as_secs()),
                ))
            }
            Ok(Err(e)) => return Err(TransportError::connect_io(self.address.clone(), &e, limit)),
            Ok(Ok(s)) => s,
        };
        let _ = tcp.set_nodelay(true);
        match self.tls.clone() {
            None => Ok((self.handshake(tcp).await?, None)),
            Some(t) => {
                let stream = match tokio::time::timeout(
                    limit,
                    t.connector.connect(t.server_name, tcp),
                )
                .await
                {
                    Err(_) => {
                        return Err(self.connect_error(
                            ConnectKind::NoAnswer,
                            format!("no TLS handshake within {}s", limit.as_secs()),
                        ))
                    }
                    Ok(Err(e)) => return Err(tls::handshake_error(&self.address, &e, &t.seen)),
                    Ok(Ok(s)) => s,
                };
                let cbt = stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .map(|c| tls::end_point_hash(c.as_ref()));
                Ok((self.handshake(stream).await?, cbt))
            }
        }
    }

    async fn handshake<T>(&self, io: T) -> Result<Conn, TransportError>
    where
        T: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .map_err(|e| self.connect_error(ConnectKind::Other, format!("http handshake: {e}")))?;
        let driver = tokio::spawn(async move {
            // The connection ends when the server closes it or the Conn is dropped; its
            // error, if any, surfaces on the next request.
            let _ = connection.await;
        });
        Ok(Conn {
            sender,
            driver,
            sealing: None,
            basic: None,
            proven: false,
        })
    }

    async fn ntlm_login(&mut self, mut ctx: NtlmClient) -> Result<(), TransportError> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let negotiate = ctx.negotiate().map_err(|e| self.auth_error(e))?;
        let first = self
            .send_auth_leg(format!("Negotiate {}", b64.encode(negotiate)))
            .await?;
        if first.status != 401 {
            return Err(self.auth_error(format!(
                "unexpected http {} to the ntlm negotiate message",
                first.status
            )));
        }
        let challenge = first
            .www_authenticate
            .iter()
            .find_map(|v| auth::challenge_token(v))
            .ok_or_else(|| {
                self.auth_error(format!(
                    "the server does not offer negotiate/ntlm authentication (offers: {})",
                    first.www_authenticate.join(", ")
                ))
            })?;
        let authenticate = ctx
            .authenticate(&challenge)
            .map_err(|e| self.auth_error(e))?;
        let second = self
            .send_auth_leg(format!("Negotiate {}", b64.encode(authenticate)))
            .await?;
        match second.status {
            200 => {}
            401 => return Err(self.auth_error("wrong user or password")),
            s => {
                return Err(self.auth_error(format!(
                    "unexpected http {s} to the ntlm authenticate message"
                )))
            }
        }
        if let Some(conn) = self.conn.as_mut() {
            // Over https the TLS session protects the messages; over http they are sealed.
            if self.tls.is_none() {
                conn.sealing = Some(ctx);
            }
        }
        Ok(())
    }

    async fn basic_login(&mut self, header: String) -> Result<(), TransportError> {
        if let Some(conn) = self.conn.as_mut() {
            conn.basic = Some(header.clone());
        }
        let reply = self
            .send_checked(
                Bytes::from(soap::identify()),
                SOAP_CONTENT_TYPE,
                Some(header),
                self.connect_timeout,
            )
            .await?;
        match reply.status {
            200 => Ok(()),
            401 => Err(self.auth_error("wrong user or password")),
            s => Err(self.auth_error(format!("unexpected http {s} to an identify request"))),
        }
    }

    /// One authentication leg: an empty-body POST with `authorization`.
    async fn send_auth_leg(&mut self, authorization: String) -> Result<RawReply, TransportError> {
        let limit = self.connect_timeout;
        self.send_checked(Bytes::new(), SOAP_CONTENT_TYPE, Some(authorization), limit)
            .await
    }

    async fn send_checked(
        &mut self,
        body: Bytes,
        content_type: &str,
        authorization: Option<String>,
        limit: Duration,
    ) -> Result<RawReply, TransportError> {
        match self.send(body, content_type, authorization, limit).await {
            Ok(r) => Ok(r),
            Err(SendError::TimedOut) => {
                self.conn = None;
                Err(self.connect_error(
                    ConnectKind::NoAnswer,
                    format!("no reply within {}s", limit.as_secs()),
                ))
            }
            Err(SendError::NotSent(e) | SendError::Lost(e)) => {
                self.conn = None;
                Err(TransportError::ConnectionLost(format!(
                    "{}: {e}",
                    self.address
                )))
            }
        }
    }

    async fn send(
        &mut self,
        body: Bytes,
        content_type: &str,
        authorization: Option<String>,
        limit: Duration,
    ) -> Result<RawReply, SendError> {
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| SendError::NotSent("not connected".into()))?;
        let mut req = hyper::Request::post("/wsman")
            .header(hyper::header::HOST, self.host_header.as_str())
            .header(
                hyper::header::USER_AGENT,
                concat!("kwin/", env!("CARGO_PKG_VERSION")),
            )
            .header(hyper::header::CONTENT_TYPE, content_type)
            .header(hyper::header::CONTENT_LENGTH, body.len());
        if let Some(a) = authorization {
            req = req.header(hyper::header::AUTHORIZATION, a);
        }
        let req = req
            .body(Full::new(body))
            .map_err(|e| SendError::NotSent(format!("building request: {e}")))?;
        self.stats.requests += 1;
        let exchange = async {
            conn.sender
                .ready()
                .await
                .map_err(|e| SendError::NotSent(e.to_string()))?;
            let resp = conn.sender.send_request(req).await.map_err(|e| {
                if e.is_canceled() {
                    SendError::NotSent(e.to_string())
                } else {
                    SendError::Lost(e.to_string())
                }
            })?;
            let status = resp.status().as_u16();
            let headers = resp.headers();
            let www_authenticate = headers
                .get_all(hyper::header::WWW_AUTHENTICATE)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .map(str::to_string)
                .collect();
            let content_type = headers
                .get(hyper::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            let body = Limited::new(resp.into_body(), MAX_REPLY)
                .collect()
                .await
                .map_err(|e| SendError::Lost(format!("reading reply: {e}")))?
                .to_bytes()
                .to_vec();
            Ok(RawReply {
                status,
                www_authenticate,
                content_type,
                body,
            })
        };
        match tokio::time::timeout(limit, exchange).await {
            Ok(r) => r,
            Err(_) => Err(SendError::TimedOut),
        }
    }

    /// POST one SOAP envelope and return the status and plaintext reply. See the module docs
    /// for reconnection and re-authentication.
    pub async fn post(
        &mut self,
        envelope: &[u8],
        limit: Duration,
    ) -> Result<Reply, TransportError> {
        for attempt in 0..2 {
            let live = self.conn.as_ref().is_some_and(|c| !c.sender.is_closed());
            if !live {
                self.connect().await?;
            }
            let reused = live;
            let Some(conn) = self.conn.as_mut() else {
                return Err(TransportError::ConnectionLost("not connected".into()));
            };
            let (body, content_type) = match conn.sealing.as_mut() {
                Some(ctx) => (
                    crypt::wrap(ctx, envelope).map_err(TransportError::Remote)?,
                    crypt::CONTENT_TYPE,
                ),
                None => (envelope.to_vec(), SOAP_CONTENT_TYPE),
            };
            let authorization = conn.basic.clone();
            let proven = conn.proven;
            match self
                .send(Bytes::from(body), content_type, authorization, limit)
                .await
            {
                Ok(r) if r.status == 401 => {
                    self.conn = None;
                    if proven && attempt == 0 {
                        continue;
                    }
                    return Err(self.auth_error(
                        "the server refused a request on a freshly authenticated connection",
                    ));
                }
                Ok(r) => return self.open_reply(r),
                Err(SendError::NotSent(_)) if reused && attempt == 0 => {
                    self.conn = None;
                    continue;
                }
                Err(SendError::NotSent(e) | SendError::Lost(e)) => {
                    self.conn = None;
                    return Err(TransportError::ConnectionLost(format!(
                        "{}: {e}",
                        self.address
                    )));
                }
                Err(SendError::TimedOut) => {
                    self.conn = None;
                    return Err(TransportError::Timeout(limit));
                }
            }
        }
        Err(TransportError::ConnectionLost(format!(
            "{}: connection replaced twice in one request",
            self.address
        )))
    }

    fn open_reply(&mut self, r: RawReply) -> Result<Reply, TransportError> {
        let Some(conn) = self.conn.as_mut() else {
            return Err(TransportError::ConnectionLost("not connected".into()));
        };
        let body = if crypt::is_encrypted(&r.content_type) {
            let Some(ctx) = conn.sealing.as_mut() else {
                self.conn = None;
                return Err(TransportError::Remote(
                    "encrypted reply on a connection without message encryption".into(),
                ));
            };
            match crypt::unwrap(ctx, &r.body, &r.content_type) {
                Ok(b) => b,
                Err(e) => {
                    self.conn = None;
                    return Err(TransportError::Remote(format!(
                        "cannot unseal the reply: {e}"
                    )));
                }
            }
        } else if conn.sealing.is_some() {
            // Once NTLM seals the connection, the service "MUST use this message [the encrypted
            // one] when responding to a request" (MS-WSMV 2.2.9.1, Encrypted Message Types): a
            // plaintext reply was not written by the holder of the session key. pywinrm and
            // pypsrp take it; kwin refuses it.
            let (status, content_type) = (r.status, r.content_type);
            self.conn = None;
            if status == 503 {
                // http.sys answers for a WinRM service that is stopping (a host going down for
                // a restart) with a plaintext 503: nothing of it is used, and like a lost
                // connection the request may be tried again (a forged one only delays it).
                return Err(TransportError::ConnectionLost(format!(
                    "{}: the winrm service is unavailable (http 503, unencrypted: nothing of it is used)",
                    self.address
                )));
            }
            return Err(TransportError::Remote(format!(
                "{}: refused an unencrypted reply (http {status}, content type `{}`) on a connection whose messages are encrypted: it was not written by the server kwin authenticated with",
                self.address,
                if content_type.is_empty() { "none" } else { content_type.as_str() }
            )));
        } else {
            r.body
        };
        // Any answer other than 401 shows the connection's authentication holds.
        conn.proven = true;
        Ok(Reply {
            status: r.status,
            body,
        })
    }
}

struct RawReply {
    status: u16,
    www_authenticate: Vec<String>,
    content_type: String,
    body: Vec<u8>,
}
