//! Public-key login on a libssh2 session where the caller makes the signature.
//!
//! `ssh2::Session::userauth_pubkey_memory` hands libssh2 the private key as text, and libssh2
//! parses it twice per login (once for the public key, once to sign), each time through
//! OpenSSL's decoder framework before its own OpenSSH-format reader: for an ed25519 key that
//! is most of the controller's CPU per connection after the key exchange
//! (bench/results/2026-11-29-host-cpu.md). libssh2's `libssh2_userauth_publickey` takes the
//! public key blob and a signing callback instead (libssh2.h; userauth.c
//! `_libssh2_userauth_publickey`: the callback signs the session identifier and the request,
//! and libssh2 wraps the raw signature as `string method, string signature`, RFC 4252 §7);
//! the ssh2 crate does not wrap it, so this crate does, with the caller's signer as a Rust
//! closure, and signs with an ed25519 key read from OpenSSH's key format ([`Ed25519Key`],
//! [`userauth_ed25519`]).

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use std::ffi::{c_char, c_int, c_uchar, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use libssh2_sys::LIBSSH2_SESSION;

/// libssh2.h: LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED (the server refused the key, or the
/// signer failed) and LIBSSH2_ERROR_AUTHENTICATION_FAILED.
pub const ERROR_PUBLICKEY_UNVERIFIED: c_int = -19;
pub const ERROR_AUTHENTICATION_FAILED: c_int = -18;

type SignCallback = unsafe extern "C" fn(
    session: *mut LIBSSH2_SESSION,
    sig: *mut *mut c_uchar,
    sig_len: *mut libc::size_t,
    data: *const c_uchar,
    data_len: libc::size_t,
    abstract_: *mut *mut c_void,
) -> c_int;

extern "C" {
    // libssh2.h (libssh2 1.9+):
    // int libssh2_userauth_publickey(LIBSSH2_SESSION *session, const char *username,
    //     const unsigned char *pubkeydata, size_t pubkeydata_len,
    //     LIBSSH2_USERAUTH_PUBLICKEY_SIGN_FUNC(*sign_callback), void **abstract);
    fn libssh2_userauth_publickey(
        session: *mut LIBSSH2_SESSION,
        username: *const c_char,
        pubkeydata: *const c_uchar,
        pubkeydata_len: libc::size_t,
        sign_callback: Option<SignCallback>,
        abstract_: *mut *mut c_void,
    ) -> c_int;
}

/// The signer behind the callback's `abstract` pointer.
struct Signer<'a> {
    sign: &'a dyn Fn(&[u8]) -> Option<Vec<u8>>,
}

/// libssh2's signing callback: `data` signed by the [`Signer`] behind `*abstract_`, the raw
/// signature returned in memory from `malloc` (libssh2 frees it with its allocator, which is
/// `free` for a session the ssh2 crate made: `libssh2_session_init_ex(NULL, NULL, NULL, ..)`).
unsafe extern "C" fn sign_callback(
    _session: *mut LIBSSH2_SESSION,
    sig: *mut *mut c_uchar,
    sig_len: *mut libc::size_t,
    data: *const c_uchar,
    data_len: libc::size_t,
    abstract_: *mut *mut c_void,
) -> c_int {
    if sig.is_null() || sig_len.is_null() || data.is_null() || abstract_.is_null() {
        return -1;
    }
    // SAFETY: `abstract_` is the pointer `userauth_publickey` below passed to libssh2, which
    // hands it back unchanged; it points at a live `*mut Signer` for the whole call.
    let signer = unsafe { *abstract_ } as *const Signer<'_>;
    if signer.is_null() {
        return -1;
    }
    // SAFETY: libssh2 passes `data_len` readable bytes at `data` (the buffer it just built).
    let data = unsafe { std::slice::from_raw_parts(data, data_len) };
    // SAFETY: `signer` points at the `Signer` on `userauth_publickey`'s stack (see above).
    let signer = unsafe { &*signer };
    let Ok(Some(s)) = catch_unwind(AssertUnwindSafe(|| (signer.sign)(data))) else {
        return -1;
    };
    if s.is_empty() {
        return -1;
    }
    // SAFETY: a plain allocation of `s.len()` bytes; checked for null below.
    let out = unsafe { libc::malloc(s.len()) } as *mut c_uchar;
    if out.is_null() {
        return -1;
    }
    // SAFETY: `out` has room for `s.len()` bytes and does not overlap `s`; `sig` and
    // `sig_len` are libssh2's out-parameters, checked non-null above.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), out, s.len());
        *sig = out;
        *sig_len = s.len();
    }
    0
}

/// Log in as `user` with the public key `pubkey_blob` (the SSH wire form: `string algorithm,
/// ...`), `sign` making the raw signature of what libssh2 asks to sign (for ssh-ed25519 the
/// 64 bytes of RFC 8709 §6). `Err(code)`: libssh2's error code ([`ERROR_PUBLICKEY_UNVERIFIED`]:
/// refused, or the signer returned `None`); the session's last error has the message.
pub fn userauth_publickey(
    sess: &ssh2::Session,
    user: &str,
    pubkey_blob: &[u8],
    sign: &dyn Fn(&[u8]) -> Option<Vec<u8>>,
) -> Result<(), c_int> {
    let user = CString::new(user).map_err(|_| ERROR_AUTHENTICATION_FAILED)?;
    let mut signer = Signer { sign };
    let mut abstract_ = (&mut signer as *mut Signer<'_>).cast::<c_void>();
    let mut raw = sess.raw();
    let session: *mut LIBSSH2_SESSION = &mut *raw;
    // SAFETY: `session` is the live session behind the ssh2 crate's lock, held until the call
    // returns (nothing else uses it meanwhile; the callback never touches `sess`); `user` and
    // `pubkey_blob` outlive the call; `abstract_` points at `signer`, which outlives the call,
    // and is only read by `sign_callback`.
    let rc = unsafe {
        libssh2_userauth_publickey(
            session,
            user.as_ptr(),
            pubkey_blob.as_ptr(),
            pubkey_blob.len(),
            Some(sign_callback),
            &mut abstract_,
        )
    };
    drop(raw);
    if rc == 0 {
        Ok(())
    } else {
        Err(rc)
    }
}

/// Log in as `user` with `key` (signed here: [`userauth_publickey`]).
pub fn userauth_ed25519(sess: &ssh2::Session, user: &str, key: &Ed25519Key) -> Result<(), c_int> {
    use ed25519_dalek::Signer;
    let sign = |data: &[u8]| Some(key.0.sign(data).to_bytes().to_vec());
    userauth_publickey(sess, user, &key.public_blob(), &sign)
}

/// An ed25519 private key read from OpenSSH's key format (`openssh-key-v1`, PROTOCOL.key in
/// OpenSSH's source): one unencrypted key (cipher and KDF `none`) whose private part holds the
/// same public key as the file's public part, and whose seed derives it. Anything else (other
/// key types, encrypted or PEM keys) is `None`, and libssh2 reads the key itself.
pub struct Ed25519Key(ed25519_dalek::SigningKey);

impl Ed25519Key {
    pub fn from_openssh(text: &str) -> Option<Ed25519Key> {
        let body = text
            .split("-----BEGIN OPENSSH PRIVATE KEY-----")
            .nth(1)?
            .split("-----END OPENSSH PRIVATE KEY-----")
            .next()?;
        let b64: zeroize::Zeroizing<String> = body.split_whitespace().collect::<String>().into();
        let bytes = zeroize::Zeroizing::new(STANDARD.decode(b64.as_bytes()).ok()?);
        let mut r = Reader(bytes.strip_prefix(b"openssh-key-v1\0")?);
        if r.string()? != b"none" || r.string()? != b"none" {
            return None;
        }
        let _kdf_options = r.string()?;
        if r.u32()? != 1 {
            return None;
        }
        let public = r.string()?;
        let mut p = Reader(r.string()?);
        if p.u32()? != p.u32()? || p.string()? != b"ssh-ed25519" {
            return None;
        }
        let pk: [u8; 32] = p.string()?.try_into().ok()?;
        let sk = p.string()?;
        let seed: zeroize::Zeroizing<[u8; 32]> =
            zeroize::Zeroizing::new(sk.get(..32)?.try_into().ok()?);
        let key = ed25519_dalek::SigningKey::from_bytes(&seed);
        let mut pub_r = Reader(public);
        let ok = sk.len() == 64
            && sk.get(32..) == Some(&pk[..])
            && pub_r.string()? == b"ssh-ed25519"
            && pub_r.string()? == pk
            && key.verifying_key().to_bytes() == pk;
        ok.then_some(Ed25519Key(key))
    }

    /// The public key in SSH's wire form (RFC 8709 §4): `string "ssh-ed25519", string key`.
    pub fn public_blob(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(51);
        for part in [&b"ssh-ed25519"[..], &self.0.verifying_key().to_bytes()[..]] {
            v.extend_from_slice(&(part.len() as u32).to_be_bytes());
            v.extend_from_slice(part);
        }
        v
    }
}

/// SSH's `uint32` and `string` (RFC 4251 §5) read from the front of a byte slice.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn u32(&mut self) -> Option<u32> {
        let (n, rest) = self.0.split_first_chunk::<4>()?;
        self.0 = rest;
        Some(u32::from_be_bytes(*n))
    }
    fn string(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        let (s, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// `ssh-keygen` writes a key pair; what it writes is read back as ssh-keygen itself reads it.
    fn keygen(dir: &Path, name: &str, args: &[&str]) -> (String, Vec<u8>) {
        let path = dir.join(name);
        let out = std::process::Command::new("ssh-keygen")
            .args(["-q", "-C", "test", "-f"])
            .arg(&path)
            .args(args)
            .output()
            .expect("ssh-keygen");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let private = std::fs::read_to_string(&path).expect("private key");
        let public = std::fs::read_to_string(path.with_extension("pub")).expect("public key");
        let blob = public
            .split_whitespace()
            .nth(1)
            .and_then(|b| STANDARD.decode(b).ok())
            .expect("a public key line");
        (private, blob)
    }

    #[test]
    fn an_openssh_ed25519_key_signs_here_anything_else_is_left_to_libssh2() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (text, blob) = keygen(dir.path(), "id_ed25519", &["-t", "ed25519", "-N", ""]);
        let key = Ed25519Key::from_openssh(&text).expect("an ed25519 key");
        // The public key ssh-keygen wrote beside it, in the same wire form.
        assert_eq!(key.public_blob(), blob);
        // Its signatures verify with that public key (what sshd checks).
        use ed25519_dalek::{Signer, Verifier};
        let sig = key.0.sign(b"session id and request");
        assert!(key
            .0
            .verifying_key()
            .verify(b"session id and request", &sig)
            .is_ok());

        // Not for this reader: encrypted, other key types, PEM.
        let (enc, _) = keygen(
            dir.path(),
            "id_enc",
            &["-t", "ed25519", "-N", "secret words"],
        );
        let (ecdsa, _) = keygen(dir.path(), "id_ecdsa", &["-t", "ecdsa", "-N", ""]);
        let (rsa, _) = keygen(
            dir.path(),
            "id_rsa",
            &["-t", "rsa", "-b", "2048", "-N", "", "-m", "PEM"],
        );
        for other in [&enc, &ecdsa, &rsa] {
            assert!(
                Ed25519Key::from_openssh(other).is_none(),
                "{}",
                &other[..40]
            );
        }

        // A file whose parts disagree: the private part's public key changed.
        let body: String = text.lines().filter(|l| !l.starts_with("-----")).collect();
        let mut bytes = STANDARD.decode(body).expect("base64");
        let pk = &blob[blob.len() - 32..];
        let at = bytes
            .windows(32)
            .rposition(|w| w == pk)
            .expect("the public key in the private part");
        bytes[at] ^= 1;
        let tampered = format!(
            "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----\n",
            STANDARD.encode(&bytes)
        );
        assert!(Ed25519Key::from_openssh(&tampered).is_none());
        // Truncated anywhere: no panic, no key.
        for n in 0..bytes.len() {
            let cut = format!(
                "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----\n",
                STANDARD.encode(&bytes[..n])
            );
            assert!(Ed25519Key::from_openssh(&cut).is_none(), "cut at {n}");
        }
    }
}
