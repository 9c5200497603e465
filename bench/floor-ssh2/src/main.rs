//! `floor-ssh2`: the SSH floor from one process (bench/README.md, "The floor").
//!
//! ```text
//! floor-ssh2 --key KEY --known-hosts FILE [--user root] [--command true] [--channels C]
//!             [--login kwin|file] [--parallel K] ADDR[:PORT]...
//! ```
//!
//! One thread per host, all started at once (`--parallel K`: K threads, each taking the next
//! host when its last one is done; `--parallel 1` connects one host after the other): TCP connect, SSH handshake with the algorithm
//! preferences of kwin's transport (engine/src/transport/ssh/session.rs: curve25519-sha256
//! first, AES-GCM), the host key checked against FILE (OpenSSH known_hosts format, libssh2's
//! own matcher), public-key login with KEY (ed25519) as kwin logs in (the key read once, each
//! login signed in the process: engine/ssh-sign; `--login file`: libssh2 reads the key file
//! for every login, `userauth_pubkey_file`), one session channel that execs the
//! command, its output read to the end, the channel closed and the exit status checked
//! (`--channels C`: C such channels one after the other on the connection, to measure what a
//! script's channel costs beyond the login).
//! Prints one JSON line (`{"hosts":N,"ok":K,"failed":[...]}`) and exits 0 only when every
//! connection succeeded with status 0.

use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use ssh2::{CheckResult, KnownHostFileKind, MethodType, Session};

const KEX: &str = "curve25519-sha256,curve25519-sha256@libssh.org";
const CIPHERS: &str = "aes128-gcm@openssh.com,chacha20-poly1305@openssh.com,\
aes256-gcm@openssh.com,aes128-ctr,aes256-ctr";
const MACS: &str =
    "hmac-sha2-256-etm@openssh.com,hmac-sha2-512-etm@openssh.com,hmac-sha2-256,hmac-sha2-512";

struct Args {
    key: PathBuf,
    known_hosts: PathBuf,
    user: String,
    command: String,
    channels: usize,
    file_login: bool,
    parallel: usize,
    hosts: Vec<(String, u16)>,
}

fn usage() -> String {
    "usage: floor-ssh2 --key KEY --known-hosts FILE [--user USER] [--command CMD] [--channels C] [--login kwin|file] [--parallel K] ADDR[:PORT]..."
        .to_string()
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let (mut key, mut known, mut user, mut command) =
        (None, None, "root".to_string(), "true".to_string());
    let mut hosts = Vec::new();
    let mut parallel = 0;
    let mut channels = 1;
    let mut file_login = false;
    while let Some(a) = it.next() {
        let mut val = |name: &str| {
            it.next()
                .ok_or_else(|| format!("{name} needs a value\n{}", usage()))
        };
        match a.as_str() {
            "--key" => key = Some(PathBuf::from(val("--key")?)),
            "--known-hosts" => known = Some(PathBuf::from(val("--known-hosts")?)),
            "--user" => user = val("--user")?,
            "--command" => command = val("--command")?,
            "--channels" => {
                channels = val("--channels")?
                    .parse()
                    .map_err(|_| "--channels takes a number".to_string())?
            }
            "--login" => {
                file_login = match val("--login")?.as_str() {
                    "kwin" => false,
                    "file" => true,
                    o => return Err(format!("--login kwin|file, not {o}")),
                }
            }
            "--parallel" => {
                parallel = val("--parallel")?
                    .parse()
                    .map_err(|_| "--parallel takes a number".to_string())?
            }
            "-h" | "--help" => return Err(usage()),
            h => {
                let (addr, port) = match h.rsplit_once(':') {
                    Some((a, p)) => (
                        a.to_string(),
                        p.parse().map_err(|_| format!("bad port in {h}"))?,
                    ),
                    None => (h.to_string(), 22),
                };
                hosts.push((addr, port));
            }
        }
    }
    Ok(Args {
        key: key.ok_or_else(usage)?,
        known_hosts: known.ok_or_else(usage)?,
        user,
        command,
        channels,
        file_login,
        parallel: if parallel == 0 { hosts.len() } else { parallel },
        hosts,
    })
}

fn one(addr: &str, port: u16, a: &Args) -> Result<(), String> {
    let tcp = TcpStream::connect((addr, port)).map_err(|e| format!("connect: {e}"))?;
    tcp.set_read_timeout(Some(Duration::from_secs(120)))
        .map_err(|e| e.to_string())?;
    let mut sess = Session::new().map_err(|e| e.to_string())?;
    for (kind, pref) in [
        (MethodType::Kex, KEX),
        (MethodType::HostKey, "ssh-ed25519"),
        (MethodType::CryptCs, CIPHERS),
        (MethodType::CryptSc, CIPHERS),
        (MethodType::MacCs, MACS),
        (MethodType::MacSc, MACS),
    ] {
        sess.method_pref(kind, pref)
            .map_err(|e| format!("method_pref: {e}"))?;
    }
    sess.set_tcp_stream(tcp);
    sess.handshake().map_err(|e| format!("handshake: {e}"))?;
    let kex = sess.methods(MethodType::Kex).unwrap_or("?").to_string();
    if kex != "curve25519-sha256" && kex != "curve25519-sha256@libssh.org" {
        return Err(format!("key exchange was {kex}"));
    }
    let (blob, _) = sess.host_key().ok_or("no host key")?;
    let mut kh = sess.known_hosts().map_err(|e| e.to_string())?;
    kh.read_file(&a.known_hosts, KnownHostFileKind::OpenSSH)
        .map_err(|e| format!("known_hosts {}: {e}", a.known_hosts.display()))?;
    match kh.check_port(addr, port, blob) {
        CheckResult::Match => {}
        other => return Err(format!("host key: {other:?}")),
    }
    if a.file_login {
        sess.userauth_pubkey_file(&a.user, None, Path::new(&a.key), None)
            .map_err(|e| format!("auth: {e}"))?;
    } else {
        // As kwin does for every connection: read the key file, sign here.
        let text = std::fs::read_to_string(&a.key).map_err(|e| format!("key: {e}"))?;
        let key = kwin_ssh_sign::Ed25519Key::from_openssh(&text)
            .ok_or("key: not an unencrypted OpenSSH ed25519 key")?;
        kwin_ssh_sign::userauth_ed25519(&sess, &a.user, &key)
            .map_err(|rc| format!("auth: libssh2 error {rc}"))?;
    }
    if !sess.authenticated() {
        return Err("auth: not authenticated".into());
    }
    for _ in 0..a.channels {
        let mut ch = sess
            .channel_session()
            .map_err(|e| format!("channel: {e}"))?;
        ch.exec(&a.command).map_err(|e| format!("exec: {e}"))?;
        // An empty stdin, as a script's end (a command that reads stdin ends there).
        ch.send_eof().map_err(|e| format!("eof: {e}"))?;
        let mut out = Vec::new();
        ch.read_to_end(&mut out).map_err(|e| format!("read: {e}"))?;
        ch.stderr()
            .read_to_end(&mut out)
            .map_err(|e| format!("read stderr: {e}"))?;
        ch.wait_close().map_err(|e| format!("close: {e}"))?;
        match ch.exit_status().map_err(|e| e.to_string())? {
            0 => {}
            s => return Err(format!("exit status {s}")),
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let a = Arc::new(a);
    let next = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..a.parallel.min(a.hosts.len()))
        .map(|_| {
            let (a, next) = (a.clone(), next.clone());
            thread::spawn(move || {
                let (mut ok, mut failed) = (0usize, Vec::new());
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((addr, port)) = a.hosts.get(i) else {
                        break;
                    };
                    match one(addr, *port, &a) {
                        Ok(()) => ok += 1,
                        Err(e) => failed.push(format!("{addr}:{port}: {e}")),
                    }
                }
                (ok, failed)
            })
        })
        .collect();
    let (mut ok, mut failed) = (0usize, Vec::new());
    for w in workers {
        match w.join() {
            Ok((k, f)) => {
                ok += k;
                failed.extend(f);
            }
            Err(_) => failed.push("thread panicked".into()),
        }
    }
    let quoted: Vec<String> = failed
        .iter()
        .map(|e| format!("\"{}\"", e.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect();
    println!(
        "{{\"hosts\":{},\"ok\":{ok},\"failed\":[{}]}}",
        a.hosts.len(),
        quoted.join(",")
    );
    if failed.is_empty() && ok == a.hosts.len() && ok > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
