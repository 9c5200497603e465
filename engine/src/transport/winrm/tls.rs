//! TLS for WinRM over HTTPS (rustls): how the server's certificate is trusted, and the TLS
//! channel binding NTLM needs.
//!
//! Trust, in order of precedence:
//! - a pinned SHA-256 fingerprint (`cert_fingerprint`): exactly that leaf certificate is
//!   accepted, whatever its chain and names (lab hosts use self-signed certificates);
//! - `ca_file`: a PEM bundle; chain and host name are verified against it;
//! - `insecure`: anything is accepted (an explicit opt-in the executor warns about);
//! - otherwise the system's roots (`rustls-native-certs`), chain and host name verified.
//!
//! In every mode the handshake signatures are verified, so a pinned certificate is only
//! accepted from the holder of its key. Verification failures name the certificate's actual
//! fingerprint so the user can pin it.

use super::super::TransportError;
use crate::transport::spec::WinrmSpec;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, OtherError, RootCertStore, SignatureScheme};
use sha2::{Digest, Sha256, Sha384, Sha512};
use std::sync::{Arc, Mutex, OnceLock};

/// Lower-case hex SHA-256 of a DER certificate (the form `cert_fingerprint` is written in).
pub fn fingerprint(der: &[u8]) -> String {
    hex::encode(Sha256::digest(der))
}

/// The pinned certificate was not the one presented.
#[derive(Debug)]
pub struct PinMismatch {
    pub expected: String,
    pub actual: String,
}

impl std::fmt::Display for PinMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "certificate fingerprint mismatch: expected sha256 {}, got {}",
            self.expected, self.actual
        )
    }
}

impl std::error::Error for PinMismatch {}

#[derive(Debug)]
enum Trust {
    Pin(String),
    Verified(Arc<WebPkiServerVerifier>),
    Insecure,
}

/// The fingerprint of the last certificate a verifier saw (for error messages).
#[derive(Debug, Default)]
pub struct Seen(Mutex<Option<String>>);

impl Seen {
    pub fn get(&self) -> Option<String> {
        match self.0.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
    fn set(&self, fp: String) {
        match self.0.lock() {
            Ok(mut g) => *g = Some(fp),
            Err(p) => *p.into_inner() = Some(fp),
        }
    }
}

#[derive(Debug)]
struct Verifier {
    trust: Trust,
    algorithms: WebPkiSupportedAlgorithms,
    seen: Arc<Seen>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let actual = fingerprint(end_entity);
        self.seen.set(actual.clone());
        match &self.trust {
            Trust::Pin(expected) if *expected == actual => Ok(ServerCertVerified::assertion()),
            Trust::Pin(expected) => Err(rustls::Error::InvalidCertificate(
                CertificateError::Other(OtherError(Arc::new(PinMismatch {
                    expected: expected.clone(),
                    actual,
                }))),
            )),
            Trust::Verified(inner) => {
                inner.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            }
            Trust::Insecure => Ok(ServerCertVerified::assertion()),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The system's trust anchors, loaded once per process.
fn system_roots() -> Arc<RootCertStore> {
    static ROOTS: OnceLock<Arc<RootCertStore>> = OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let mut store = RootCertStore::empty();
            let loaded = rustls_native_certs::load_native_certs();
            store.add_parsable_certificates(loaded.certs);
            Arc::new(store)
        })
        .clone()
}

/// TLS client configuration for `spec`, and where its verifier records what it saw.
pub fn client_config(
    spec: &WinrmSpec,
) -> Result<(Arc<rustls::ClientConfig>, Arc<Seen>), TransportError> {
    let provider = provider();
    let trust = if let Some(pin) = &spec.cert_fingerprint {
        let pin = pin.replace(':', "").to_ascii_lowercase();
        if pin.len() != 64 || !pin.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(TransportError::Tls(format!(
                "cert_fingerprint `{pin}` is not a sha-256 fingerprint (64 hex digits)"
            )));
        }
        Trust::Pin(pin)
    } else if spec.insecure {
        Trust::Insecure
    } else {
        let roots = match &spec.ca_file {
            Some(path) => {
                let mut store = RootCertStore::empty();
                let certs = CertificateDer::pem_file_iter(path)
                    .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| {
                        TransportError::Tls(format!("cannot read ca_file {}: {e}", path.display()))
                    })?;
                let (added, _) = store.add_parsable_certificates(certs);
                if added == 0 {
                    return Err(TransportError::Tls(format!(
                        "ca_file {} holds no usable certificate",
                        path.display()
                    )));
                }
                Arc::new(store)
            }
            None => system_roots(),
        };
        let inner = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(|e| TransportError::Tls(format!("no trust anchors: {e}")))?;
        Trust::Verified(inner)
    };
    let seen = Arc::new(Seen::default());
    let verifier = Arc::new(Verifier {
        trust,
        algorithms: provider.signature_verification_algorithms,
        seen: seen.clone(),
    });
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TransportError::Tls(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok((Arc::new(config), seen))
}

/// Why a certificate is not trusted, in words (rustls' own for most; never its `Debug`).
fn untrusted(e: &CertificateError) -> String {
    match e {
        CertificateError::UnknownIssuer => {
            "it is issued by no authority this machine trusts (a self-signed certificate, as prepare-windows.ps1 makes, is one)".to_string()
        }
        CertificateError::BadSignature => "its signature does not verify".to_string(),
        other => other.to_string(),
    }
}

/// `ab:cd:…`: a fingerprint as prepare-windows.ps1 prints it, to compare by eye.
fn colon_hex(hex: &str) -> String {
    hex.as_bytes()
        .chunks(2)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join(":")
}

/// Turn a failed TLS handshake into the error the user sees.
pub fn handshake_error(address: &str, err: &std::io::Error, seen: &Seen) -> TransportError {
    let tls = err
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    let Some(tls) = tls else {
        // not a TLS verdict: the connection broke during the handshake
        return TransportError::connect(
            address,
            crate::transport::ConnectKind::Other,
            format!("tls handshake: {err}"),
        );
    };
    if let rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(other))) = tls {
        if let Some(m) = other.downcast_ref::<PinMismatch>() {
            return TransportError::Tls(format!(
                "certificate of {address} does not match the pinned fingerprint: expected {}, got {}",
                m.expected, m.actual
            ));
        }
    }
    match (tls, seen.get()) {
        (rustls::Error::InvalidCertificate(e), Some(fp)) => {
            let fp = colon_hex(&fp);
            TransportError::Tls(format!(
                "certificate of {address} is not trusted: {}; its SHA-256 fingerprint is {fp}. \
                 Compare it with the `kwin-cert-fingerprint:` line examples/real-vms/prepare-windows.ps1 \
                 printed on that host; only if they are the same, pin it with cert_fingerprint = \"{fp}\" \
                 (or name its CA in ca_file)",
                untrusted(e),
            ))
        }
        (e, _) => TransportError::Tls(format!("tls handshake with {address} failed: {e}")),
    }
}

/// RFC 5929 `tls-server-end-point` hash of the server certificate: the certificate's own
/// signature hash, or SHA-256 for MD5/SHA-1 (and anything unknown).
pub fn end_point_hash(der: &[u8]) -> Vec<u8> {
    const SHA384_RSA: &[u8] = &[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x0C];
    const SHA512_RSA: &[u8] = &[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x0D];
    const SHA384_ECDSA: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x03];
    const SHA512_ECDSA: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x04];
    match signature_algorithm(der) {
        Some(oid) if oid == SHA384_RSA || oid == SHA384_ECDSA => Sha384::digest(der).to_vec(),
        Some(oid) if oid == SHA512_RSA || oid == SHA512_ECDSA => Sha512::digest(der).to_vec(),
        _ => Sha256::digest(der).to_vec(),
    }
}

/// One DER TLV at `pos`: (tag, content start, content end).
fn tlv(buf: &[u8], pos: usize) -> Option<(u8, usize, usize)> {
    let tag = *buf.get(pos)?;
    let first = *buf.get(pos + 1)?;
    let (len, start) = if first < 0x80 {
        (first as usize, pos + 2)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 {
            return None;
        }
        let mut len = 0usize;
        for i in 0..n {
            len = (len << 8) | *buf.get(pos + 2 + i)? as usize;
        }
        (len, pos + 2 + n)
    };
    let end = start.checked_add(len)?;
    (end <= buf.len()).then_some((tag, start, end))
}

/// The OID bytes of `Certificate.signatureAlgorithm`.
fn signature_algorithm(der: &[u8]) -> Option<&[u8]> {
    let (tag, start, _) = tlv(der, 0)?; // Certificate
    if tag != 0x30 {
        return None;
    }
    let (tag, _, tbs_end) = tlv(der, start)?; // tbsCertificate
    if tag != 0x30 {
        return None;
    }
    let (tag, alg_start, _) = tlv(der, tbs_end)?; // signatureAlgorithm
    if tag != 0x30 {
        return None;
    }
    let (tag, oid_start, oid_end) = tlv(der, alg_start)?;
    (tag == 0x06).then(|| &der[oid_start..oid_end])
}

#[cfg(test)]
mod tests {
    use super::*;

    // A minimal certificate-shaped DER: SEQUENCE { SEQUENCE {}, SEQUENCE { OID }, BIT STRING }.
    fn cert_with(oid: &[u8]) -> Vec<u8> {
        let mut alg = vec![0x06, oid.len() as u8];
        alg.extend_from_slice(oid);
        let mut inner = vec![0x30, 0x00, 0x30, alg.len() as u8];
        inner.extend_from_slice(&alg);
        inner.extend_from_slice(&[0x03, 0x01, 0x00]);
        let mut der = vec![0x30, inner.len() as u8];
        der.extend_from_slice(&inner);
        der
    }

    #[test]
    fn end_point_hash_follows_signature_algorithm() {
        let sha256_rsa = cert_with(&[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x0B]);
        assert_eq!(end_point_hash(&sha256_rsa).len(), 32);
        let sha384_ecdsa = cert_with(&[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x03]);
        assert_eq!(end_point_hash(&sha384_ecdsa).len(), 48);
        let sha512_rsa = cert_with(&[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x0D]);
        assert_eq!(end_point_hash(&sha512_rsa).len(), 64);
        assert_eq!(end_point_hash(b"garbage").len(), 32);
        assert_eq!(
            end_point_hash(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]).len(),
            32
        );
    }

    /// An untrusted certificate is said in words (no `Debug` dump), with its fingerprint in
    /// the form prepare-windows.ps1 prints, to compare before pinning.
    #[test]
    fn an_untrusted_certificate_is_compared_with_what_prepare_windows_printed() {
        let seen = Seen::default();
        seen.set("ab".repeat(32));
        let err = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
        );
        let m = handshake_error("10.0.0.21:5986", &err, &seen).to_string();
        let colon = vec!["ab"; 32].join(":");
        assert!(!m.contains("UnknownIssuer"), "{m}");
        assert!(
            m.contains("issued by no authority this machine trusts"),
            "{m}"
        );
        assert!(m.contains(&format!("fingerprint is {colon}.")), "{m}");
        assert!(m.contains("kwin-cert-fingerprint:"), "{m}");
        assert!(
            m.contains(&format!("cert_fingerprint = \"{colon}\"")),
            "{m}"
        );
    }

    #[test]
    fn fingerprint_is_lowercase_hex() {
        assert_eq!(
            fingerprint(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
