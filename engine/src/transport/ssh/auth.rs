//! User authentication on an established, host-verified session.
//!
//! Order (the first that succeeds wins):
//! 1. the plan's `private_key` — and then nothing else but a password: a named key means
//!    "this identity", like OpenSSH's `IdentitiesOnly`;
//! 2. without a plan key: the ssh-agent (`SSH_AUTH_SOCK`), then `IdentityFile`s from
//!    `~/.ssh/config`, then the default `~/.ssh/id_ed25519`, `id_ecdsa`, `id_rsa` that exist;
//! 3. the password source, if any (`password`, then `keyboard-interactive`).
//!
//! A key's passphrase comes from the plan's passphrase source. The `Auth` error lists what was
//! tried and why each failed; it never contains a secret.

use crate::transport::spec::SecretSource;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ssh2::Session;
use std::path::{Path, PathBuf};

/// Where a key file came from (for messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyOrigin {
    Plan,
    SshConfig,
    Default,
}

#[derive(Debug, Clone)]
pub(crate) struct Credentials {
    pub keys: Vec<(PathBuf, KeyOrigin)>,
    /// Ask the ssh-agent (only when the plan names no key).
    pub use_agent: bool,
    /// The agent's socket; `None`: no agent is running.
    pub agent_socket: Option<PathBuf>,
    pub passphrase: Option<SecretSource>,
    pub password: Option<SecretSource>,
}

/// Whether a private key file (text) is encrypted with a passphrase.
pub(crate) fn key_is_encrypted(text: &str) -> bool {
    if text.contains("Proc-Type: 4,ENCRYPTED") || text.contains("BEGIN ENCRYPTED PRIVATE KEY") {
        return true;
    }
    let Some(body) = text
        .split("-----BEGIN OPENSSH PRIVATE KEY-----")
        .nth(1)
        .and_then(|rest| rest.split("-----END OPENSSH PRIVATE KEY-----").next())
    else {
        return false;
    };
    let b64: String = body.split_whitespace().collect();
    let Ok(bytes) = STANDARD.decode(b64) else {
        return false;
    };
    // "openssh-key-v1\0", then string ciphername.
    let Some(rest) = bytes.strip_prefix(b"openssh-key-v1\0") else {
        return false;
    };
    let Some(len) = rest
        .get(..4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_be_bytes)
    else {
        return false;
    };
    rest.get(4..4 + len as usize)
        .is_some_and(|cipher| cipher != b"none")
}

fn origin_word(o: KeyOrigin) -> &'static str {
    match o {
        KeyOrigin::Plan => "key",
        KeyOrigin::SshConfig => "key (ssh config)",
        KeyOrigin::Default => "key",
    }
}

/// Try every credential in order. `Err` carries the list of attempts for the `Auth` error.
pub(crate) fn authenticate(sess: &Session, user: &str, creds: &Credentials) -> Result<(), String> {
    let mut tried: Vec<String> = Vec::new();

    for (path, origin) in &creds.keys {
        match try_key(sess, user, path, creds.passphrase.as_ref()) {
            Ok(()) => return Ok(()),
            Err(why) => tried.push(format!(
                "{} {} ({why})",
                origin_word(*origin),
                path.display()
            )),
        }
    }

    if creds.use_agent {
        match &creds.agent_socket {
            Some(sock) => match try_agent(sess, user, sock) {
                Ok(()) => return Ok(()),
                Err(why) => tried.push(format!("ssh-agent ({why})")),
            },
            None => tried.push("ssh-agent (SSH_AUTH_SOCK is not set)".into()),
        }
    }

    if let Some(src) = &creds.password {
        match src.read() {
            Err(why) => tried.push(format!("password ({why})")),
            Ok(pw) => {
                if sess.userauth_password(user, pw.expose()).is_ok() && sess.authenticated() {
                    return Ok(());
                }
                let mut prompt = Answer(pw.expose().to_string());
                if sess
                    .userauth_keyboard_interactive(user, &mut prompt)
                    .is_ok()
                    && sess.authenticated()
                {
                    return Ok(());
                }
                tried.push("password (refused)".into());
            }
        }
    }

    if tried.is_empty() {
        return Err("nothing to try: no private_key, no ssh-agent, no password source".into());
    }
    Err(format!("tried {}", tried.join(", ")))
}

fn try_agent(sess: &Session, user: &str, sock: &Path) -> Result<(), String> {
    let mut agent = sess.agent().map_err(|e| lower(e.message()))?;
    agent
        .set_identity_path(sock)
        .map_err(|e| lower(e.message()))?;
    agent
        .connect()
        .map_err(|e| format!("cannot reach {}: {}", sock.display(), lower(e.message())))?;
    let ids = agent
        .list_identities()
        .and_then(|()| agent.identities())
        .map_err(|e| lower(e.message()));
    let result = match ids {
        Err(e) => Err(e),
        Ok(ids) if ids.is_empty() => Err("the agent holds no keys".into()),
        Ok(ids) => {
            let n = ids.len();
            if ids
                .iter()
                .any(|id| agent.userauth(user, id).is_ok() && sess.authenticated())
            {
                Ok(())
            } else {
                Err(format!("none of its {n} keys was accepted"))
            }
        }
    };
    let _ = agent.disconnect();
    result
}

fn try_key(
    sess: &Session,
    user: &str,
    path: &Path,
    passphrase: Option<&SecretSource>,
) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    let secret = if key_is_encrypted(&text) {
        match passphrase {
            None => return Err("passphrase-protected, and no passphrase source is set".into()),
            Some(src) => Some(src.read().map_err(|why| format!("passphrase: {why}"))?),
        }
    } else {
        None
    };
    // An unencrypted ed25519 key in OpenSSH's format (what `ssh-keygen` writes): signed here.
    if secret.is_none() {
        if let Some(key) = kwin_ssh_sign::Ed25519Key::from_openssh(&text) {
            return match kwin_ssh_sign::userauth_ed25519(sess, user, &key) {
                Ok(()) if sess.authenticated() => Ok(()),
                _ => Err("refused".into()),
            };
        }
    }
    // From the text read above, not the file again: libssh2 would hold it open while the
    // server answers, one more open file per host connecting at the same time.
    match sess.userauth_pubkey_memory(user, None, &text, secret.as_ref().map(|s| s.expose())) {
        Ok(()) if sess.authenticated() => Ok(()),
        Ok(()) => Err("refused".into()),
        Err(e) => {
            let msg = e.message().to_ascii_lowercase();
            if msg.contains("passphrase") || msg.contains("unable to extract") {
                Err(if secret.is_some() {
                    "wrong passphrase or unsupported key format".into()
                } else {
                    "unsupported key format".into()
                })
            } else {
                Err("refused".into())
            }
        }
    }
}

fn lower(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// Answers every keyboard-interactive prompt with the password (servers that take the
/// password only through PAM's keyboard-interactive).
struct Answer(String);

impl ssh2::KeyboardInteractivePrompt for Answer {
    fn prompt<'a>(
        &mut self,
        _username: &str,
        _instructions: &str,
        prompts: &[ssh2::Prompt<'a>],
    ) -> Vec<String> {
        prompts.iter().map(|_| self.0.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_encrypted_keys() {
        let pem = |cipher: &str| {
            let mut body = b"openssh-key-v1\0".to_vec();
            body.extend_from_slice(&(cipher.len() as u32).to_be_bytes());
            body.extend_from_slice(cipher.as_bytes());
            body.extend_from_slice(&[0u8; 40]);
            format!(
                "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----\n",
                STANDARD.encode(body)
            )
        };
        let plain = pem("none");
        let enc = pem("aes256-ctr");
        assert!(!key_is_encrypted(&plain));
        assert!(key_is_encrypted(&enc));
        assert!(key_is_encrypted(
            "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n"
        ));
        assert!(!key_is_encrypted("garbage"));
    }
}
