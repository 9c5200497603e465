//! The way through a jump host: a `direct-tcpip` channel on the jump host's session, bridged
//! to one end of a Unix socket pair whose other end is the target session's socket (libssh2
//! needs a file descriptor). One pump thread owns the jump session and the channel and
//! copies both ways, in non-blocking mode with `poll(2)` on the jump host's socket and its
//! end of the pair; it sends the jump session's keepalives.
//!
//! Shutdown follows the sockets: when the target session closes its end (disconnect, drop),
//! the pump closes the channel, says goodbye to the jump host and ends; when the jump host
//! or its channel goes away, the pump closes its end and the target session sees its
//! connection lost.

use super::socket::Socket;
use rustix::event::{PollFd, PollFlags, Timespec};
use ssh2::{BlockDirections, Channel, Session};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// The running pump; it ends by itself when either side closes.
pub(crate) struct Tunnel {
    _thread: std::thread::JoinHandle<()>,
}

impl Tunnel {
    /// Start the pump thread for `ch` (on `sess`, whose socket is `sock`) and `local`.
    pub fn start(
        name: &str,
        sess: Session,
        sock: Socket,
        ch: Channel,
        local: UnixStream,
        keepalive: Option<Duration>,
    ) -> std::io::Result<Tunnel> {
        let thread = std::thread::Builder::new()
            .name(name.chars().take(60).collect())
            .spawn(move || pump(&sess, &sock, ch, &local, keepalive))?;
        Ok(Tunnel { _thread: thread })
    }
}

const CHUNK: usize = 32 * 1024;

fn pump(
    sess: &Session,
    sock: &Socket,
    mut ch: Channel,
    local: &UnixStream,
    keepalive: Option<Duration>,
) {
    sess.set_blocking(false);
    if local.set_nonblocking(true).is_err() {
        return;
    }
    let idle = keepalive.unwrap_or(Duration::from_secs(30));
    let mut to_local: Vec<u8> = Vec::new();
    let mut to_remote: Vec<u8> = Vec::new();
    let (mut remote_eof, mut local_eof, mut local_shut) = (false, false, false);
    let mut buf = vec![0u8; CHUNK];
    let mut writer = local;
    let mut reader = local;
    loop {
        let mut progress = false;
        // Jump host -> target session.
        if to_local.is_empty() && !remote_eof {
            match ch.read(&mut buf) {
                Ok(0) => {
                    remote_eof = true;
                    progress = true;
                }
                Ok(n) => {
                    to_local.extend_from_slice(&buf[..n]);
                    progress = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
        }
        if !to_local.is_empty() {
            match writer.write(&to_local) {
                Ok(n) => {
                    to_local.drain(..n);
                    progress |= n > 0;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
        }
        if remote_eof && to_local.is_empty() && !local_shut {
            let _ = local.shutdown(std::net::Shutdown::Write);
            local_shut = true;
        }
        // Target session -> jump host.
        if to_remote.is_empty() && !local_eof {
            match reader.read(&mut buf) {
                Ok(0) => local_eof = true,
                Ok(n) => {
                    to_remote.extend_from_slice(&buf[..n]);
                    progress = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
        }
        if !to_remote.is_empty() {
            match ch.write(&to_remote) {
                Ok(n) => {
                    to_remote.drain(..n);
                    progress |= n > 0;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
        }
        if local_eof && to_remote.is_empty() {
            // The target session is gone: nothing more to carry.
            break;
        }
        if remote_eof && local_shut && local_eof {
            break;
        }
        // A write to the channel reads the socket too, and queues what it finds: when
        // libssh2 already holds the jump host's data or end, polling would wait for the
        // next packet instead (see `channel_io`).
        let held =
            to_local.is_empty() && !remote_eof && (ch.read_window().available > 0 || ch.eof());
        if !progress && !held {
            let mut local_flags = PollFlags::empty();
            if to_remote.is_empty() && !local_eof {
                local_flags |= PollFlags::IN;
            }
            if !to_local.is_empty() {
                local_flags |= PollFlags::OUT;
            }
            let sock_flags = match sess.block_directions() {
                BlockDirections::Outbound | BlockDirections::Both => PollFlags::IN | PollFlags::OUT,
                _ => PollFlags::IN,
            };
            let ts = Timespec {
                tv_sec: idle.as_secs() as _,
                tv_nsec: idle.subsec_nanos() as _,
            };
            let mut fds = [
                PollFd::new(local, local_flags),
                PollFd::new(sock, sock_flags),
            ];
            match rustix::event::poll(&mut fds, Some(&ts)) {
                Ok(0) => {
                    if keepalive.is_some() && sess.keepalive_send().is_err() {
                        break;
                    }
                }
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => break,
            }
        }
    }
    let _ = local.shutdown(std::net::Shutdown::Both);
    sess.set_blocking(true);
    sess.set_timeout(500);
    let _ = ch.close();
    let _ = sess.disconnect(None, "kwin done", None);
}
