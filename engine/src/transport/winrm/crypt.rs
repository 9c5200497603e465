//! WinRM message encryption over HTTP (MS-WSMV 2.2.9.1): the `multipart/encrypted` body that
//! carries one NTLM-sealed SOAP envelope.
//!
//! ```text
//! --Encrypted Boundary\r\n
//! \tContent-Type: application/HTTP-SPNEGO-session-encrypted\r\n
//! \tOriginalContent: type=application/soap+xml;charset=UTF-8;Length=<plaintext length>\r\n
//! --Encrypted Boundary\r\n
//! \tContent-Type: application/octet-stream\r\n
//! <u32 LE signature length = 16><signature><sealed bytes, same length as the plaintext>--Encrypted Boundary--\r\n
//! ```
//!
//! Parsing reads lengths instead of searching for boundaries inside the sealed bytes, and
//! accepts `multipart/x-multi-encrypted` bodies (several part pairs).

use super::auth::{NtlmClient, SIGNATURE_LEN};

pub const PROTOCOL: &str = "application/HTTP-SPNEGO-session-encrypted";
pub const BOUNDARY: &str = "Encrypted Boundary";
/// `Content-Type` of an encrypted request.
pub const CONTENT_TYPE: &str =
    "multipart/encrypted;protocol=\"application/HTTP-SPNEGO-session-encrypted\";boundary=\"Encrypted Boundary\"";

/// One sealed message as framed on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedPart {
    pub original_length: usize,
    pub signature: Vec<u8>,
    pub sealed: Vec<u8>,
}

/// Frame one sealed message.
pub fn encode(signature: &[u8], sealed: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(sealed.len() + 256);
    out.extend_from_slice(format!("--{BOUNDARY}\r\n").as_bytes());
    out.extend_from_slice(format!("\tContent-Type: {PROTOCOL}\r\n").as_bytes());
    out.extend_from_slice(
        format!(
            "\tOriginalContent: type=application/soap+xml;charset=UTF-8;Length={}\r\n",
            sealed.len()
        )
        .as_bytes(),
    );
    out.extend_from_slice(format!("--{BOUNDARY}\r\n").as_bytes());
    out.extend_from_slice(b"\tContent-Type: application/octet-stream\r\n");
    out.extend_from_slice(&(signature.len() as u32).to_le_bytes());
    out.extend_from_slice(signature);
    out.extend_from_slice(sealed);
    out.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    out
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from > hay.len() || needle.is_empty() {
        return None;
    }
    hay[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// The boundary named in a `Content-Type` header, or the standard one.
pub fn boundary_of(content_type: &str) -> String {
    let lower = content_type.to_ascii_lowercase();
    if let Some(i) = lower.find("boundary=") {
        let rest = &content_type[i + "boundary=".len()..];
        let rest = rest.trim_start();
        let value = if let Some(stripped) = rest.strip_prefix('"') {
            stripped.split('"').next().unwrap_or("")
        } else {
            rest.split(';').next().unwrap_or("").trim()
        };
        if !value.is_empty() {
            return value.to_string();
        }
    }
    BOUNDARY.to_string()
}

/// Split a framed body into its sealed parts.
pub fn decode(body: &[u8], boundary: &str) -> Result<Vec<SealedPart>, String> {
    let marker = format!("--{boundary}").into_bytes();
    let mut parts = Vec::new();
    let mut pos = 0;
    loop {
        let start = find(body, &marker, pos).ok_or("encrypted body: missing boundary")?;
        let after = start + marker.len();
        if body.get(after..after + 2) == Some(b"--") {
            break;
        }
        let header_end = find(body, &marker, after).ok_or("encrypted body: missing second part")?;
        let header = String::from_utf8_lossy(&body[after..header_end]);
        let length = header
            .split(';')
            .find_map(|kv| {
                let (k, v) = kv.trim().split_once('=')?;
                k.trim()
                    .eq_ignore_ascii_case("length")
                    .then(|| v.trim().trim_end_matches(['\r', '\n']).trim())
                    .and_then(|v| v.parse::<usize>().ok())
            })
            .ok_or("encrypted body: missing OriginalContent length")?;
        let octet = find(body, b"application/octet-stream", header_end)
            .ok_or("encrypted body: missing octet-stream part")?;
        let mut p = find(body, b"\n", octet).ok_or("encrypted body: truncated part header")? + 1;
        let len_bytes: [u8; 4] = body
            .get(p..p + 4)
            .and_then(|b| b.try_into().ok())
            .ok_or("encrypted body: truncated signature length")?;
        let sig_len = u32::from_le_bytes(len_bytes) as usize;
        if sig_len != SIGNATURE_LEN {
            return Err(format!(
                "encrypted body: signature length {sig_len}, expected {SIGNATURE_LEN}"
            ));
        }
        p += 4;
        let signature = body
            .get(p..p + sig_len)
            .ok_or("encrypted body: truncated signature")?
            .to_vec();
        p += sig_len;
        let sealed = body
            .get(p..p + length)
            .ok_or_else(|| {
                format!("encrypted body: payload shorter than its declared length {length}")
            })?
            .to_vec();
        pos = p + length;
        parts.push(SealedPart {
            original_length: length,
            signature,
            sealed,
        });
    }
    if parts.is_empty() {
        return Err("encrypted body: no parts".into());
    }
    Ok(parts)
}

/// Seal and frame `plaintext` with the connection's NTLM context.
pub fn wrap(ctx: &mut NtlmClient, plaintext: &[u8]) -> Result<Vec<u8>, String> {
    let mut data = plaintext.to_vec();
    let signature = ctx.seal(&mut data)?;
    Ok(encode(&signature, &data))
}

/// Unframe and unseal a reply body.
pub fn unwrap(ctx: &mut NtlmClient, body: &[u8], content_type: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for part in decode(body, &boundary_of(content_type))? {
        let mut data = part.sealed;
        ctx.unseal(&part.signature, &mut data)?;
        out.extend_from_slice(&data);
    }
    Ok(out)
}

/// Whether a reply `Content-Type` announces an encrypted body.
pub fn is_encrypted(content_type: &str) -> bool {
    let l = content_type.to_ascii_lowercase();
    (l.starts_with("multipart/encrypted") || l.starts_with("multipart/x-multi-encrypted"))
        && l.contains(&PROTOCOL.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    // A reply body exactly as the WinRM service (and the stand-in) frames it.
    fn wire_sample() -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(b"--Encrypted Boundary\r\n\tContent-Type: application/HTTP-SPNEGO-session-encrypted\r\n\tOriginalContent: type=application/soap+xml;charset=UTF-8;Length=5\r\n--Encrypted Boundary\r\n\tContent-Type: application/octet-stream\r\n");
        b.extend_from_slice(&16u32.to_le_bytes());
        b.extend_from_slice(&[0xAB; 16]);
        b.extend_from_slice(b"--Enc"); // sealed bytes may look like a boundary
        b.extend_from_slice(b"--Encrypted Boundary--\r\n");
        b
    }

    #[test]
    fn decode_reads_lengths_not_boundaries() {
        let parts = decode(&wire_sample(), BOUNDARY).expect("decode");
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].original_length, 5);
        assert_eq!(parts[0].signature, vec![0xAB; 16]);
        assert_eq!(parts[0].sealed, b"--Enc");
    }

    #[test]
    fn encode_is_byte_exact_and_round_trips() {
        let framed = encode(&[0xAB; 16], b"--Enc");
        assert_eq!(framed, wire_sample());
        let big: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
        let parts = decode(&encode(&[7; 16], &big), BOUNDARY).expect("decode");
        assert_eq!(parts[0].sealed, big);
    }

    #[test]
    fn bodies_of_several_parts_decode_and_broken_ones_are_errors() {
        let mut two = encode(&[1; 16], b"abc");
        // x-multi-encrypted: part pairs back to back, one closing boundary
        two.truncate(two.len() - format!("--{BOUNDARY}--\r\n").len());
        two.extend_from_slice(&encode(&[2; 16], b"defg"));
        let parts = decode(&two, BOUNDARY).expect("decode");
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[1].sealed, b"defg");

        let mut short = wire_sample();
        short.truncate(short.len() - 30);
        assert!(decode(&short, BOUNDARY).is_err());
        assert!(decode(b"", BOUNDARY).is_err());
        assert!(decode(b"--Encrypted Boundary--\r\n", BOUNDARY).is_err());
    }

    #[test]
    fn the_encrypted_content_type_and_its_boundary_are_recognised() {
        assert!(is_encrypted(CONTENT_TYPE));
        assert!(!is_encrypted("application/soap+xml;charset=UTF-8"));
        assert_eq!(boundary_of(CONTENT_TYPE), BOUNDARY);
        assert_eq!(boundary_of("multipart/encrypted;boundary=abc;x=1"), "abc");
        assert_eq!(boundary_of("multipart/encrypted"), BOUNDARY);
    }
}
