//! Authentication: NTLM through `sspi` (the security context of one TCP connection, and its
//! message sealing) and the HTTP Basic header.
//!
//! NTLM over HTTP goes in three legs on ONE connection: NEGOTIATE (`Authorization: Negotiate
//! <raw NTLM>`, as Windows accepts it without SPNEGO wrapping), the server's CHALLENGE in a 401,
//! AUTHENTICATE. The context that results belongs to that connection: its sealing keys and
//! sequence numbers seal every later request and unseal every reply (see `crypt.rs`).
//! Over HTTPS the AUTHENTICATE message carries the TLS channel binding (`tls-server-end-point`).

use crate::secret::Secret;
use base64::Engine as _;
use sspi::{
    AuthIdentity, AuthIdentityBuffers, BufferType, ClientRequestFlags, CredentialUse,
    DataRepresentation, EncryptionFlags, Ntlm, SecurityBuffer, SecurityBufferRef, SecurityStatus,
    Sspi, SspiImpl, Username,
};

/// Length of an NTLM message signature (the header of each sealed message).
pub const SIGNATURE_LEN: usize = 16;

/// The client side of one NTLM security context.
pub struct NtlmClient {
    ntlm: Ntlm,
    creds: Option<AuthIdentityBuffers>,
    target: String,
    state: LegState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LegState {
    Start,
    Negotiated,
    Authenticated,
}

impl std::fmt::Debug for NtlmClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NtlmClient")
            .field("target", &self.target)
            .field("state", &self.state)
            .finish()
    }
}

fn flags() -> ClientRequestFlags {
    ClientRequestFlags::CONFIDENTIALITY
        | ClientRequestFlags::INTEGRITY
        | ClientRequestFlags::ALLOCATE_MEMORY
}

impl NtlmClient {
    /// A context for `user` (`name`, `DOMAIN\name` or `name@domain`) talking to `host`.
    /// `channel_binding` is the RFC 5929 `tls-server-end-point` hash of the server's
    /// certificate when the connection is TLS.
    pub fn new(
        user: &str,
        password: &Secret,
        host: &str,
        channel_binding: Option<&[u8]>,
    ) -> Result<Self, String> {
        let username = Username::parse(user).map_err(|e| format!("user name `{user}`: {e}"))?;
        let identity = AuthIdentity {
            username,
            password: password.expose().to_string().into(),
        };
        let mut ntlm = Ntlm::new();
        if let Some(hash) = channel_binding {
            let mut token = b"tls-server-end-point:".to_vec();
            token.extend_from_slice(hash);
            ntlm.set_channel_bindings(&token);
        }
        let acquired = ntlm
            .acquire_credentials_handle()
            .with_credential_use(CredentialUse::Outbound)
            .with_auth_data(&identity)
            .execute(&mut ntlm)
            .map_err(|e| format!("ntlm credentials: {e}"))?;
        Ok(NtlmClient {
            ntlm,
            creds: acquired.credentials_handle,
            target: format!("HTTP/{host}"),
            state: LegState::Start,
        })
    }

    /// One round of initializing the NTLM context: the token for the server, answering its
    /// `challenge` when there is one. `what` names the round in errors.
    fn step(
        &mut self,
        challenge: Option<&[u8]>,
        what: &str,
    ) -> Result<(SecurityStatus, Vec<SecurityBuffer>), String> {
        let mut input = challenge.map(|c| vec![SecurityBuffer::new(c.to_vec(), BufferType::Token)]);
        let mut output = vec![SecurityBuffer::new(Vec::new(), BufferType::Token)];
        let mut builder = self
            .ntlm
            .initialize_security_context()
            .with_credentials_handle(&mut self.creds)
            .with_context_requirements(flags())
            .with_target_data_representation(DataRepresentation::Native)
            .with_target_name(&self.target)
            .with_output(&mut output);
        builder.input = input.as_deref_mut();
        let result = self
            .ntlm
            .initialize_security_context_impl(&mut builder)
            .and_then(|mut g| g.resolve_to_result())
            .map_err(|e| format!("{what}: {e}"))?;
        Ok((result.status, output))
    }

    /// The NEGOTIATE message.
    pub fn negotiate(&mut self) -> Result<Vec<u8>, String> {
        if self.state != LegState::Start {
            return Err("ntlm: negotiate out of order".into());
        }
        let (status, output) = self.step(None, "ntlm negotiate")?;
        if status != SecurityStatus::ContinueNeeded {
            return Err(format!("ntlm negotiate: unexpected status {status:?}"));
        }
        self.state = LegState::Negotiated;
        Ok(take_token(output))
    }

    /// The AUTHENTICATE message answering the server's CHALLENGE.
    pub fn authenticate(&mut self, challenge: &[u8]) -> Result<Vec<u8>, String> {
        if self.state != LegState::Negotiated {
            return Err("ntlm: authenticate out of order".into());
        }
        let (status, mut output) = self.step(Some(challenge), "ntlm challenge")?;
        if matches!(
            status,
            SecurityStatus::CompleteNeeded | SecurityStatus::CompleteAndContinue
        ) {
            self.ntlm
                .complete_auth_token(&mut output)
                .map_err(|e| format!("ntlm complete: {e}"))?;
        }
        self.state = LegState::Authenticated;
        Ok(take_token(output))
    }

    /// Seal `data` in place (RC4) and return its signature.
    pub fn seal(&mut self, data: &mut [u8]) -> Result<[u8; SIGNATURE_LEN], String> {
        if self.state != LegState::Authenticated {
            return Err("ntlm: sealing before authentication".into());
        }
        let mut signature = [0u8; SIGNATURE_LEN];
        let mut buffers = [
            SecurityBufferRef::token_buf(&mut signature),
            SecurityBufferRef::data_buf(data),
        ];
        self.ntlm
            .encrypt_message(EncryptionFlags::empty(), &mut buffers)
            .map_err(|e| format!("ntlm seal: {e}"))?;
        Ok(signature)
    }

    /// Check `signature` and unseal `data` in place.
    pub fn unseal(&mut self, signature: &[u8], data: &mut [u8]) -> Result<(), String> {
        if self.state != LegState::Authenticated {
            return Err("ntlm: unsealing before authentication".into());
        }
        if signature.len() != SIGNATURE_LEN {
            return Err(format!(
                "ntlm unseal: signature is {} bytes, expected {SIGNATURE_LEN}",
                signature.len()
            ));
        }
        let mut sig = signature.to_vec();
        let mut buffers = [
            SecurityBufferRef::token_buf(&mut sig),
            SecurityBufferRef::data_buf(data),
        ];
        self.ntlm
            .decrypt_message(&mut buffers)
            .map_err(|e| format!("ntlm unseal: {e}"))?;
        Ok(())
    }
}

fn take_token(output: Vec<SecurityBuffer>) -> Vec<u8> {
    output
        .into_iter()
        .find(|b| b.buffer_type.buffer_type == BufferType::Token)
        .map(|b| b.buffer)
        .unwrap_or_default()
}

/// `Authorization` header value for HTTP Basic.
pub fn basic_header(user: &str, password: &Secret) -> String {
    let raw = format!("{user}:{}", password.expose());
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(raw)
    )
}

/// The token of a `WWW-Authenticate: Negotiate <token>` (or `NTLM <token>`) header value.
pub fn challenge_token(header_value: &str) -> Option<Vec<u8>> {
    let (scheme, param) = header_value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("negotiate") && !scheme.eq_ignore_ascii_case("ntlm") {
        return None;
    }
    base64::engine::general_purpose::STANDARD
        .decode(param.trim())
        .ok()
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiate_message_is_raw_ntlm() {
        let mut c = NtlmClient::new("kwin", &Secret::new("pw"), "127.0.0.1", None).expect("ctx");
        let t = c.negotiate().expect("negotiate");
        assert!(t.starts_with(b"NTLMSSP\0"));
        assert_eq!(t[8], 1, "message type 1");
        assert!(c.negotiate().is_err(), "a second negotiate is out of order");
        assert!(c.seal(&mut [0u8; 4]).is_err());
    }

    #[test]
    fn the_token_is_read_from_a_negotiate_or_ntlm_challenge() {
        assert_eq!(
            challenge_token("Negotiate TlRMTQ=="),
            Some(b"NTLM".to_vec())
        );
        assert_eq!(challenge_token("NTLM TlRMTQ=="), Some(b"NTLM".to_vec()));
        assert_eq!(challenge_token("Negotiate"), None);
        assert_eq!(challenge_token("Basic realm=\"WSMAN\""), None);
    }

    #[test]
    fn basic_header_encodes_user_and_password() {
        assert_eq!(
            basic_header("kwin", &Secret::new("S3cret!")),
            "Basic a3dpbjpTM2NyZXQh"
        );
    }
}
