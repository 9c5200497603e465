//! The loop that feeds a script's stdin and reads its stdout and stderr over one exec
//! channel, with libssh2 in non-blocking mode.
//!
//! libssh2 reads the socket for whichever stream it is asked for and queues what belongs to
//! the other: a read of stderr can take in stdout's last bytes, or the channel's end, and
//! leave the socket empty. Waiting on the socket then sits until the next packet arrives —
//! a keepalive (30 s by default) or, with none, the deadline. So the loop counts a stream's
//! end as progress and, before it waits, asks libssh2 whether it already holds something
//! for the channel.

use crate::transport::output::Collector;
use crate::transport::TransportError;
use std::io::ErrorKind;
use std::time::Duration;

/// libssh2's "would block" (`LIBSSH2_ERROR_EAGAIN`).
pub(crate) const LIBSSH2_ERROR_EAGAIN: i32 = -37;

/// What the loop needs of an exec channel.
pub(crate) trait ChannelIo {
    /// Write some of `bytes` to the script's stdin.
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize>;
    /// Send the end of stdin: `Ok(true)` sent, `Ok(false)` it would block.
    fn send_eof(&mut self) -> Result<bool, ()>;
    /// Read from stream 0 (stdout) or 1 (stderr); `Ok(0)` at the stream's end.
    fn read(&mut self, stream: i32, buf: &mut [u8]) -> std::io::Result<usize>;
    /// Whether data or the channel's end has been received but not yet read.
    fn holds(&self) -> bool;
}

impl ChannelIo for ssh2::Channel {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        std::io::Write::write(self, bytes)
    }

    fn send_eof(&mut self) -> Result<bool, ()> {
        match ssh2::Channel::send_eof(self) {
            Ok(()) => Ok(true),
            Err(e) if e.code() == ssh2::ErrorCode::Session(LIBSSH2_ERROR_EAGAIN) => Ok(false),
            Err(_) => Err(()),
        }
    }

    fn read(&mut self, stream: i32, buf: &mut [u8]) -> std::io::Result<usize> {
        std::io::Read::read(&mut self.stream(stream), buf)
    }

    fn holds(&self) -> bool {
        self.read_window().available > 0 || self.eof()
    }
}

/// Write `stdin` and read both streams into `out` and `err` until both end. `wait` blocks
/// until the socket is ready (or fails at the deadline); `lost` turns a read error into the
/// error to return.
pub(crate) fn drive(
    ch: &mut impl ChannelIo,
    stdin: &[u8],
    out: &mut Collector,
    err: &mut Collector,
    limit: Duration,
    mut wait: impl FnMut() -> Result<(), TransportError>,
    lost: impl Fn(&std::io::Error) -> TransportError,
) -> Result<(), TransportError> {
    let mut written = 0usize;
    let mut stdin_done = stdin.is_empty();
    let mut eof_sent = false;
    let (mut out_done, mut err_done) = (false, false);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let mut progress = false;
        if !stdin_done {
            match ch.write(&stdin[written..]) {
                Ok(n) => {
                    written += n;
                    progress |= n > 0;
                    stdin_done = written == stdin.len();
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                // The remote side stopped reading (the script exited early); its output
                // is still to be read. A dead connection shows in the reads below.
                Err(_) => stdin_done = true,
            }
        }
        if stdin_done && !eof_sent {
            match ch.send_eof() {
                Ok(true) => {
                    eof_sent = true;
                    progress = true;
                }
                Ok(false) => {}
                Err(()) => eof_sent = true,
            }
        }
        for (stream_id, done, sink) in
            [(0, &mut out_done, &mut *out), (1, &mut err_done, &mut *err)]
        {
            while !*done {
                match ch.read(stream_id, &mut buf) {
                    Ok(0) => {
                        *done = true;
                        progress = true;
                    }
                    Ok(n) => {
                        sink.push(&buf[..n])?;
                        progress = true;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::TimedOut => {
                        return Err(TransportError::Timeout(limit))
                    }
                    Err(e) => return Err(lost(&e)),
                }
            }
        }
        if out_done && err_done {
            return Ok(());
        }
        if !progress && !ch.holds() {
            wait()?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::output::{Keep, Live, Stream};
    use std::collections::VecDeque;

    /// A packet from the server: data on a stream, or the channel's end.
    #[derive(Debug, Clone)]
    enum Packet {
        Data(i32, &'static [u8]),
        End,
    }

    /// An exec channel with libssh2's queueing: every read first takes in all that has
    /// reached the socket, whichever stream it is for; a read then returns queued data of
    /// its own stream, 0 once the end is in and its data read, else `WouldBlock`.
    /// `arrivals[i]` reach the socket when the `i`-th read has taken in what was there
    /// (so they can land between the stdout read and the stderr read of one pass); the
    /// rest of the script comes only while the loop waits on the socket, one batch per wait.
    struct Scripted {
        arrivals: VecDeque<Vec<Packet>>,
        later: VecDeque<Vec<Packet>>,
        socket: Vec<Packet>,
        queued: Vec<Packet>,
        ended: bool,
        /// (wait count when read, stream, bytes) of every non-empty read.
        reads: Vec<(usize, i32, Vec<u8>)>,
        waits: usize,
    }

    impl Scripted {
        fn new(arrivals: Vec<Vec<Packet>>, later: Vec<Vec<Packet>>) -> Self {
            Scripted {
                arrivals: arrivals.into(),
                later: later.into(),
                socket: Vec::new(),
                queued: Vec::new(),
                ended: false,
                reads: Vec::new(),
                waits: 0,
            }
        }
    }

    impl ChannelIo for Scripted {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            Ok(bytes.len())
        }

        fn send_eof(&mut self) -> Result<bool, ()> {
            Ok(true)
        }

        fn read(&mut self, stream: i32, buf: &mut [u8]) -> std::io::Result<usize> {
            for p in std::mem::take(&mut self.socket) {
                match p {
                    Packet::End => self.ended = true,
                    d => self.queued.push(d),
                }
            }
            if let Some(next) = self.arrivals.pop_front() {
                self.socket.extend(next);
            }
            if let Some(i) = self
                .queued
                .iter()
                .position(|p| matches!(p, Packet::Data(s, _) if *s == stream))
            {
                let Packet::Data(_, bytes) = self.queued.remove(i) else {
                    unreachable!("position matched data")
                };
                buf[..bytes.len()].copy_from_slice(bytes);
                self.reads.push((self.waits, stream, bytes.to_vec()));
                return Ok(bytes.len());
            }
            if self.ended {
                Ok(0)
            } else {
                Err(ErrorKind::WouldBlock.into())
            }
        }

        fn holds(&self) -> bool {
            !self.queued.is_empty() || self.ended
        }
    }

    /// Run the loop over `ch`; a wait with nothing left to arrive is the deadline.
    fn run(ch: &mut Scripted) -> Result<(Vec<u8>, Vec<u8>), TransportError> {
        let keep = Keep::default();
        let mut out = Collector::new(&keep, Stream::Stdout, Live::Lines);
        let mut err = Collector::new(&keep, Stream::Stderr, Live::Lines);
        let limit = Duration::from_secs(5);
        let ch = std::cell::RefCell::new(ch);
        drive(
            &mut Proxy(&ch),
            b"",
            &mut out,
            &mut err,
            limit,
            || {
                let mut ch = ch.borrow_mut();
                ch.waits += 1;
                match ch.later.pop_front() {
                    Some(batch) => {
                        ch.socket.extend(batch);
                        Ok(())
                    }
                    None => Err(TransportError::Timeout(limit)),
                }
            },
            |e| TransportError::ConnectionLost(e.to_string()),
        )?;
        Ok((out.finish(), err.finish()))
    }

    /// Lets `wait` reach the script while `drive` holds the channel.
    struct Proxy<'a, 'b>(&'a std::cell::RefCell<&'b mut Scripted>);

    impl ChannelIo for Proxy<'_, '_> {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().write(bytes)
        }
        fn send_eof(&mut self) -> Result<bool, ()> {
            self.0.borrow_mut().send_eof()
        }
        fn read(&mut self, stream: i32, buf: &mut [u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().read(stream, buf)
        }
        fn holds(&self) -> bool {
            self.0.borrow().holds()
        }
    }

    #[test]
    fn the_end_taken_in_by_the_stderr_read_ends_the_run_at_once() {
        // The first pass (which sends the end of stdin) finds nothing; then the second
        // pass's stdout read finds nothing, the last output and the end arrive,
        // and the stderr read takes them in. Nothing more will come.
        let mut ch = Scripted::new(
            vec![
                vec![],
                vec![],
                vec![Packet::Data(0, b"done\n"), Packet::End],
            ],
            Vec::new(),
        );
        let (out, err) = run(&mut ch).expect("the run ends without waiting for more");
        assert_eq!((out.as_slice(), err.as_slice()), (&b"done\n"[..], &b""[..]));
        assert_eq!(ch.waits, 0);
    }

    #[test]
    fn stdout_taken_in_by_the_stderr_read_is_read_before_waiting() {
        // A line reaches the socket between the second pass's stdout and stderr reads; the
        // script then stays quiet until it ends. The line is read (and shown live) before
        // the loop waits for the end, not after.
        let mut ch = Scripted::new(
            vec![vec![], vec![], vec![Packet::Data(0, b"progress\n")]],
            vec![vec![Packet::End]],
        );
        let (out, _) = run(&mut ch).expect("run");
        assert_eq!(out, b"progress\n");
        assert_eq!(ch.reads, vec![(0, 0, b"progress\n".to_vec())]);
    }

    #[test]
    fn output_spread_over_waits_is_all_read() {
        let mut ch = Scripted::new(
            Vec::new(),
            vec![
                vec![Packet::Data(1, b"e1\n"), Packet::Data(0, b"o1\n")],
                vec![Packet::Data(0, b"o2\n")],
                vec![Packet::End],
            ],
        );
        let (out, err) = run(&mut ch).expect("run");
        assert_eq!(
            (out.as_slice(), err.as_slice()),
            (&b"o1\no2\n"[..], &b"e1\n"[..])
        );
        assert_eq!(ch.waits, 3);
    }
}
