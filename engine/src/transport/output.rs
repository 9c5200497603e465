//! What a transport keeps of a command's output.
//!
//! Every transport reads stdout and stderr through a [`Collector`] per stream. Two limits
//! apply:
//!
//! - per command and stream, [`MAX_OUTPUT`] bytes *received*: past it the command is an
//!   error (`OutputTooLarge`) and is ended, so endless output never runs until the timeout;
//! - per run, the [`OutputBudget`]: the bytes of *step output* kept in memory (and so written
//!   to the logs) by every host together. Step output is what a batch prints between a
//!   task's begin and end markers (`\n@@kwin:<nonce>:task:<i>:begin\n` …
//!   `\n@@kwin:<nonce>:task:<i>:end…`, see `exec::batch`), given as [`Keep::sections`]. Once
//!   the budget is spent, a section keeps only its last [`TAIL`] bytes (what error messages
//!   quote) behind a line `\n@@kwin:<nonce>:cut:<n> …\n` saying how many bytes were not kept;
//!   the executor turns that line into a warning naming the host and task.
//!
//! Everything outside step sections — markers, exit codes, fact answers, task outputs — is
//! kept whole: cutting output never changes what kwin parses, so never a result. It counts
//! against the same budget ([`Keep::whole`], every command of a run), so one budget covers
//! everything hosts send: once the budget is spent, such output may bring at most
//! [`AFTER_BUDGET`] more bytes per stream and command, past which the command fails
//! (`OutputBudgetSpent`) instead of holding more in memory and in the logs. Output that is
//! only shown (`kwin exec`) is cut like a step section instead: its last [`TAIL`] bytes, after
//! a line saying how much was not kept.
//!
//! With `-v` a [`Keep`] may carry a [`Tap`]: each stream's received bytes (every byte the
//! cap lets in, before the budget cuts anything) are also cut into complete lines by a
//! [`LineBuf`] and handed to the tap as they arrive; a last line without a line break when
//! the stream ends. A stream whose text is decoded only once whole ([`Live::AtEnd`]:
//! PowerShell's CLIXML stderr, UTF-16 stdout) is *declined*: nothing of it reaches the tap,
//! and [`Tap::declined`] tells the caller to show it whole at the end.

use super::error::TransportError;
use crate::shell::{Output, MAX_OUTPUT};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes of a step section's end kept after the budget is spent.
pub const TAIL: usize = 4096;

/// Bytes of step output a run may still keep, shared by all its hosts.
#[derive(Debug)]
pub struct OutputBudget {
    limit: u64,
    left: AtomicU64,
}

impl OutputBudget {
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(OutputBudget {
            limit,
            left: AtomicU64::new(limit),
        })
    }

    /// The budget the run started with.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Take up to `n` bytes; how many were granted.
    pub fn take(&self, n: usize) -> usize {
        let mut granted = 0;
        let _ = self
            .left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                granted = (n as u64).min(left);
                Some(left - granted)
            });
        granted as usize
    }
}

/// Bytes a command's stream may still bring, outside step sections, once the run's output
/// budget is spent (what kwin itself asks a host for is far smaller).
pub const AFTER_BUDGET: usize = 8 << 20;

/// How a run's output is kept.
#[derive(Debug, Clone, Default)]
pub struct Keep {
    /// The batch nonce whose step sections count against the budget.
    pub sections: Option<(String, Arc<OutputBudget>)>,
    /// The run's budget for the output outside step sections.
    pub whole: Option<Whole>,
    /// Where complete lines go as they arrive (`-v`).
    pub tap: Option<Tap>,
}

/// The output outside step sections, counted against the run's budget.
#[derive(Debug, Clone)]
pub struct Whole {
    pub budget: Arc<OutputBudget>,
    /// Only shown (`kwin exec`): cut to its tail once the budget is spent. Else kwin reads
    /// it: kept whole, and at most [`AFTER_BUDGET`] bytes more once the budget is spent.
    pub shown: bool,
}

/// One stream's share of a [`Whole`] budget.
#[derive(Debug)]
struct WholeState {
    whole: Whole,
    /// Bytes read past the spent budget.
    over: usize,
    /// Shown output: bytes not kept, and the tail.
    cut: u64,
    tail: VecDeque<u8>,
}

impl WholeState {
    /// Bytes kwin reads: counted, and refused past [`AFTER_BUDGET`] over a spent budget.
    fn read(&mut self, n: usize) -> Result<(), TransportError> {
        let granted = self.whole.budget.take(n);
        self.over += n - granted;
        if self.over > AFTER_BUDGET {
            return Err(TransportError::OutputBudgetSpent {
                budget: self.whole.budget.limit(),
                after: AFTER_BUDGET,
            });
        }
        Ok(())
    }

    /// Bytes only shown: kept while the budget lasts, then only the tail.
    fn shown(&mut self, buf: &mut Vec<u8>, b: &[u8]) {
        let granted = if self.cut == 0 {
            self.whole.budget.take(b.len())
        } else {
            0
        };
        buf.extend_from_slice(&b[..granted]);
        let rest = &b[granted..];
        if rest.is_empty() {
            return;
        }
        self.cut += rest.len() as u64;
        let rest = &rest[rest.len().saturating_sub(TAIL)..];
        let over = (self.tail.len() + rest.len()).saturating_sub(TAIL);
        self.tail.drain(..over.min(self.tail.len()));
        self.tail.extend(rest);
    }

    fn finish(&mut self, buf: &mut Vec<u8>) {
        if self.cut > 0 {
            let not_kept = self.cut - self.tail.len() as u64;
            buf.extend_from_slice(
                format!(
                    "\n[kwin: {not_kept} bytes of output not kept: the run's output budget of {} bytes is spent]\n",
                    self.whole.budget.limit()
                )
                .as_bytes(),
            );
            buf.extend(self.tail.drain(..));
            self.cut = 0;
        }
    }
}

/// One stream of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn index(self) -> usize {
        match self {
            Stream::Stdout => 0,
            Stream::Stderr => 1,
        }
    }
}

/// How a stream's text can be shown while it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Live {
    /// As received, line by line (POSIX shells).
    Lines,
    /// PowerShell's stdout: UTF-8 (the run wrapper sets it), a leading byte order mark
    /// dropped as `winrm::decode_stdout` drops it; a stream that begins with UTF-16's byte
    /// order mark is decoded only whole, so it is declined.
    Utf8Lines,
    /// Decoded only once whole (PowerShell's stderr, CLIXML): declined.
    AtEnd,
}

type TapFn = dyn Fn(Stream, &[u8]) + Send + Sync;

/// Where a run's complete lines go as they arrive, and which streams were declined.
#[derive(Clone)]
pub struct Tap {
    f: Arc<TapFn>,
    declined: Arc<[AtomicBool; 2]>,
}

impl std::fmt::Debug for Tap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tap(..)")
    }
}

impl Tap {
    pub fn new(f: impl Fn(Stream, &[u8]) + Send + Sync + 'static) -> Tap {
        Tap {
            f: Arc::new(f),
            declined: Arc::new([AtomicBool::new(false), AtomicBool::new(false)]),
        }
    }

    /// Whether `stream` was not shown live (its text is decoded only whole, or no streaming
    /// transport read it): the caller shows it at the end.
    pub fn declined(&self, stream: Stream) -> bool {
        self.declined[stream.index()].load(Ordering::Acquire)
    }

    fn decline(&self, stream: Stream) {
        self.declined[stream.index()].store(true, Ordering::Release);
    }
}

/// Longest text a [`LineBuf`] holds before it hands it on without a line break (a progress
/// bar redrawn with `\r`, a huge line): 64 KiB, cut at a UTF-8 character boundary.
pub const LINE_MAX: usize = 64 * 1024;

/// Cuts a byte stream into complete lines (`\n`, so `\r\n` too, kept as received).
/// Lines that may be a piece of a wrapped base64 encoding (`secret::holds_line`) are held
/// and handed on with the line after them, so a scrubber sees the encoding whole; what is
/// held never grows past [`LINE_MAX`]. Every byte pushed is handed on exactly once, in
/// order.
#[derive(Debug, Default)]
pub struct LineBuf {
    pending: Vec<u8>,
    /// `pending[..scanned]` are complete lines, all held.
    scanned: usize,
}

impl LineBuf {
    pub fn new() -> Self {
        Self::default()
    }

    /// Take `bytes`; hand complete lines to `emit`.
    pub fn push(&mut self, bytes: &[u8], emit: &mut dyn FnMut(&[u8])) {
        self.pending.extend_from_slice(bytes);
        let mut sent = 0;
        let mut from = self.scanned;
        while let Some(nl) = memchr::memchr(b'\n', &self.pending[from..]).map(|i| from + i) {
            let line = &self.pending[from..nl];
            from = nl + 1;
            if crate::secret::holds_line(line) && from - sent <= LINE_MAX {
                continue;
            }
            emit(&self.pending[sent..from]);
            sent = from;
        }
        self.scanned = from;
        while self.pending.len() - sent > LINE_MAX {
            let cut = char_boundary(&self.pending[sent..], LINE_MAX) + sent;
            emit(&self.pending[sent..cut]);
            sent = cut;
            self.scanned = self.scanned.max(cut);
        }
        self.pending.drain(..sent);
        self.scanned -= sent;
    }

    /// The stream ended: hand on what is left (a last line without a line break).
    pub fn finish(&mut self, emit: &mut dyn FnMut(&[u8])) {
        if !self.pending.is_empty() {
            emit(&self.pending);
        }
        self.pending.clear();
        self.scanned = 0;
    }
}

/// The end of the longest prefix of `b`, at most `max` bytes, that does not cut a UTF-8
/// character (`max` itself when no character starts in its last 3 bytes: not UTF-8 anyway).
fn char_boundary(b: &[u8], max: usize) -> usize {
    if max >= b.len() {
        return b.len();
    }
    (max.saturating_sub(3)..=max)
        .rev()
        .find(|&i| (b[i] & 0xC0) != 0x80)
        .filter(|&i| i > 0)
        .unwrap_or(max)
}

/// One stream's [`LineBuf`] and its [`Tap`].
#[derive(Debug)]
struct LineTap {
    tap: Tap,
    stream: Stream,
    /// The stream's first bytes, until the byte order mark is known (`Utf8Lines`).
    head: Option<Vec<u8>>,
    lines: LineBuf,
    declined: bool,
}

const BOM_UTF8: &[u8] = &[0xEF, 0xBB, 0xBF];
const BOM_UTF16LE: &[u8] = &[0xFF, 0xFE];

impl LineTap {
    fn new(tap: Tap, stream: Stream, live: Live) -> LineTap {
        let declined = live == Live::AtEnd;
        if declined {
            tap.decline(stream);
        }
        LineTap {
            tap,
            stream,
            head: (live == Live::Utf8Lines).then(Vec::new),
            lines: LineBuf::new(),
            declined,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        if self.declined {
            return;
        }
        if let Some(head) = &mut self.head {
            head.extend_from_slice(bytes);
            if head.len() >= BOM_UTF8.len() {
                if let Some(head) = self.head.take() {
                    self.feed_head(&head);
                }
            }
            return;
        }
        self.lines(bytes);
    }

    fn lines(&mut self, bytes: &[u8]) {
        let (tap, stream) = (&self.tap, self.stream);
        self.lines.push(bytes, &mut |l| (tap.f)(stream, l));
    }

    /// The stream's first bytes: decline UTF-16, drop a UTF-8 byte order mark.
    fn feed_head(&mut self, head: &[u8]) {
        if head.starts_with(BOM_UTF16LE) {
            self.declined = true;
            self.tap.decline(self.stream);
            return;
        }
        self.lines(head.strip_prefix(BOM_UTF8).unwrap_or(head));
    }

    fn finish(&mut self) {
        if let Some(head) = self.head.take() {
            if !self.declined {
                self.feed_head(&head);
            }
        }
        if self.declined {
            return;
        }
        let (tap, stream) = (&self.tap, self.stream);
        self.lines.finish(&mut |l| (tap.f)(stream, l));
    }
}

impl Keep {
    /// Keep everything (up to [`MAX_OUTPUT`] per stream).
    pub fn all() -> Self {
        Keep::default()
    }

    /// Step sections of the batch with `nonce` count against `budget` (and so does the
    /// rest, see [`Keep::whole`]).
    pub fn sections(nonce: &str, budget: Arc<OutputBudget>) -> Self {
        Keep {
            whole: Some(Whole {
                budget: budget.clone(),
                shown: false,
            }),
            sections: Some((nonce.to_string(), budget)),
            tap: None,
        }
    }

    /// Everything counts against `budget`: output kwin reads, or (`shown`) output it only
    /// shows.
    pub fn budget(budget: Arc<OutputBudget>, shown: bool) -> Self {
        Keep {
            whole: Some(Whole { budget, shown }),
            sections: None,
            tap: None,
        }
    }

    /// The same, complete lines also handed to `tap` as they arrive.
    pub fn with_tap(mut self, tap: Tap) -> Self {
        self.tap = Some(tap);
        self
    }
}

/// Where the step-section filter is.
#[derive(Debug)]
enum State {
    Outside,
    Inside {
        /// Bytes received in this section and not kept (the tail included).
        cut: u64,
        tail: VecDeque<u8>,
    },
}

#[derive(Debug)]
struct Sections {
    nonce: String,
    marker: Vec<u8>,
    budget: Arc<OutputBudget>,
    state: State,
    /// Received bytes not classified yet: they may begin a marker.
    pending: Vec<u8>,
    /// Bytes found inside step sections so far (they count against the budget here).
    inside: u64,
    /// Bytes classified as outside step sections so far, kwin's marker lines aside (they
    /// count against the budget as the rest of the output does: [`Collector::push`]).
    outside: u64,
}

/// Longest marker line tag looked for after the marker's prefix (`12:end:255`).
const TAG_MAX: usize = 64;

impl Sections {
    fn content(&mut self, buf: &mut Vec<u8>, b: &[u8]) {
        if b.is_empty() {
            return;
        }
        match &mut self.state {
            State::Outside => {
                self.outside += b.len() as u64;
                buf.extend_from_slice(b);
            }
            State::Inside { cut, tail } => {
                self.inside += b.len() as u64;
                let granted = if *cut == 0 {
                    self.budget.take(b.len())
                } else {
                    0
                };
                buf.extend_from_slice(&b[..granted]);
                let rest = &b[granted..];
                if rest.is_empty() {
                    return;
                }
                *cut += rest.len() as u64;
                let rest = &rest[rest.len().saturating_sub(TAIL)..];
                let over = (tail.len() + rest.len()).saturating_sub(TAIL);
                tail.drain(..over.min(tail.len()));
                tail.extend(rest);
            }
        }
    }

    /// End the current section: the cut line and the tail, if anything was cut.
    fn close(&mut self, buf: &mut Vec<u8>) {
        if let State::Inside { cut, tail } = std::mem::replace(&mut self.state, State::Outside) {
            if cut > 0 {
                let not_kept = cut - tail.len() as u64;
                buf.extend_from_slice(
                    format!(
                        "\n@@kwin:{}:cut:{not_kept} bytes of output not kept: the run's output budget of {} bytes is spent\n",
                        self.nonce,
                        self.budget.limit()
                    )
                    .as_bytes(),
                );
                buf.extend(tail);
            }
        }
    }

    fn push(&mut self, buf: &mut Vec<u8>, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        let mut pending = std::mem::take(&mut self.pending);
        let mut from = 0;
        loop {
            let Some(i) = find(&pending[from..], &self.marker).map(|i| from + i) else {
                // Keep what could be the start of a marker.
                let keep = (self.marker.len() - 1).min(pending.len() - from);
                let upto = pending.len() - keep;
                self.content(buf, &pending[from..upto]);
                from = upto;
                break;
            };
            self.content(buf, &pending[from..i]);
            let tag_start = i + self.marker.len();
            let Some(nl) = pending[tag_start..]
                .iter()
                .take(TAG_MAX)
                .position(|&b| b == b'\n')
                .map(|n| tag_start + n)
            else {
                if pending.len() - tag_start < TAG_MAX {
                    // The marker line is not complete yet.
                    from = i;
                    break;
                }
                // Not a marker line: content.
                self.content(buf, &pending[i..tag_start]);
                from = tag_start;
                continue;
            };
            let tag = &pending[tag_start..nl];
            if tag.ends_with(b":begin") {
                self.close(buf);
                self.state = State::Inside {
                    cut: 0,
                    tail: VecDeque::new(),
                };
            } else if tag.windows(4).any(|w| w == b":end") {
                self.close(buf);
            }
            buf.extend_from_slice(&pending[i..=nl]);
            from = nl + 1;
        }
        pending.drain(..from);
        self.pending = pending;
    }

    fn finish(&mut self, buf: &mut Vec<u8>) {
        let pending = std::mem::take(&mut self.pending);
        self.content(buf, &pending);
        self.close(buf);
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

/// One stream of one command, as kept.
#[derive(Debug)]
pub struct Collector {
    buf: Vec<u8>,
    received: usize,
    sections: Option<Sections>,
    whole: Option<WholeState>,
    tap: Option<LineTap>,
}

impl Collector {
    /// The collector of `stream`, whose text can be shown live as `live` says (when `keep`
    /// has a tap).
    pub fn new(keep: &Keep, stream: Stream, live: Live) -> Self {
        Collector {
            buf: Vec::new(),
            received: 0,
            tap: keep
                .tap
                .as_ref()
                .map(|t| LineTap::new(t.clone(), stream, live)),
            sections: keep.sections.as_ref().map(|(nonce, budget)| Sections {
                nonce: nonce.clone(),
                marker: format!("\n@@kwin:{nonce}:task:").into_bytes(),
                budget: budget.clone(),
                state: State::Outside,
                pending: Vec::new(),
                inside: 0,
                outside: 0,
            }),
            whole: keep.whole.as_ref().map(|w| WholeState {
                whole: w.clone(),
                over: 0,
                cut: 0,
                tail: VecDeque::new(),
            }),
        }
    }

    /// Take `bytes` received from the host. `OutputTooLarge` past [`MAX_OUTPUT`] received.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), TransportError> {
        if self.received + bytes.len() > MAX_OUTPUT {
            return Err(TransportError::OutputTooLarge { limit: MAX_OUTPUT });
        }
        self.received += bytes.len();
        if let Some(t) = &mut self.tap {
            t.push(bytes);
        }
        match (&mut self.sections, &mut self.whole) {
            (None, Some(w)) if w.whole.shown => w.shown(&mut self.buf, bytes),
            (Some(s), w) => {
                // Bytes still pending (they may begin a marker) count once classified.
                let before = s.outside;
                s.push(&mut self.buf, bytes);
                if let Some(w) = w {
                    w.read((s.outside - before) as usize)?;
                }
            }
            (None, w) => {
                self.buf.extend_from_slice(bytes);
                if let Some(w) = w {
                    w.read(bytes.len())?;
                }
            }
        }
        Ok(())
    }

    /// Bytes received so far.
    pub fn received(&self) -> usize {
        self.received
    }

    /// What is kept, once the stream ended (a tap gets its last line).
    pub fn finish(mut self) -> Vec<u8> {
        if let Some(s) = &mut self.sections {
            let before = s.outside;
            s.finish(&mut self.buf);
            if let Some(w) = &self.whole {
                // The last pending bytes (shorter than a marker): counted, never refused.
                w.whole.budget.take((s.outside - before) as usize);
            }
        }
        if let Some(w) = &mut self.whole {
            w.finish(&mut self.buf);
        }
        if let Some(mut t) = self.tap.take() {
            t.finish();
        }
        std::mem::take(&mut self.buf)
    }
}

impl Drop for Collector {
    /// A stream cut short (timeout, lost connection, the cap): the tap still gets the last
    /// partial line it received.
    fn drop(&mut self) {
        if let Some(mut t) = self.tap.take() {
            t.finish();
        }
    }
}

/// Apply `keep` to a command's output read whole (a transport without streaming filters):
/// [`keep_whole`] of each stream.
pub fn keep_output(out: Output, keep: &Keep) -> Output {
    Output {
        stdout: keep_whole(out.stdout, keep, Stream::Stdout),
        stderr: keep_whole(out.stderr, keep, Stream::Stderr),
        exit: out.exit,
    }
}

/// Apply `keep` to output already read whole (transports without streaming filters): a tap
/// is declined, the output is shown whole at the end.
pub fn keep_whole(bytes: Vec<u8>, keep: &Keep, stream: Stream) -> Vec<u8> {
    if let Some(t) = &keep.tap {
        t.decline(stream);
    }
    // Read whole already: output kwin reads is only counted (its memory is spent anyway).
    let shown = keep.whole.clone().filter(|w| w.shown);
    // Step sections are counted by the collector below; the rest here.
    if let Some(w) = keep.whole.as_ref().filter(|w| !w.shown) {
        let inside = keep.sections.as_ref().map_or(0, |(nonce, _)| {
            section_bytes(&bytes, &format!("\n@@kwin:{nonce}:task:"))
        });
        w.budget.take(bytes.len() - inside.min(bytes.len()));
    }
    if keep.sections.is_none() && shown.is_none() {
        return bytes;
    }
    let keep = Keep {
        sections: keep.sections.clone(),
        whole: shown,
        tap: None,
    };
    let mut c = Collector::new(&keep, stream, Live::AtEnd);
    for chunk in bytes.chunks(64 * 1024) {
        if c.push(chunk).is_err() {
            break;
        }
    }
    c.finish()
}

/// Bytes of the step sections in `bytes`, their marker lines included (`marker`: the
/// markers' common prefix): what [`Sections`] does not count as outside.
fn section_bytes(bytes: &[u8], marker: &str) -> usize {
    let marker = marker.as_bytes();
    let mut inside = 0;
    let mut open: Option<usize> = None;
    let mut at = 0;
    while let Some(i) = find(&bytes[at..], marker).map(|i| at + i) {
        let end = bytes[i + 1..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |n| i + 1 + n + 1);
        let tag = &bytes[i + marker.len()..end.min(bytes.len())];
        if tag.windows(6).any(|w| w == b":begin") {
            open = Some(i);
        } else if let Some(from) = open.take() {
            inside += end.saturating_sub(from);
        }
        at = end;
    }
    if let Some(from) = open {
        inside += bytes.len().saturating_sub(from);
    }
    inside
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(nonce: &str, i: usize, body: &[u8], rc: i32) -> Vec<u8> {
        let mut v = format!("\n@@kwin:{nonce}:task:{i}:begin\n").into_bytes();
        v.extend_from_slice(body);
        v.extend_from_slice(format!("\n@@kwin:{nonce}:task:{i}:end:{rc}\n").as_bytes());
        v
    }

    fn collect(keep: &Keep, stream: &[u8], chunk: usize) -> Vec<u8> {
        let mut c = Collector::new(keep, Stream::Stdout, Live::Lines);
        for piece in stream.chunks(chunk.max(1)) {
            c.push(piece).expect("under the cap");
        }
        c.finish()
    }

    /// Output read whole (a transport without streaming filters) counts each byte once: a
    /// step section's bytes by the section filter, the rest before it.
    #[test]
    fn output_read_whole_counts_each_byte_once() {
        let n = "0123abcd";
        let mut stream = b"outside!!\n".to_vec();
        stream.extend(section(n, 0, &[b'x'; 50], 0));
        let budget = OutputBudget::new(1000);
        let kept = keep_whole(
            stream.clone(),
            &Keep::sections(n, budget.clone()),
            Stream::Stdout,
        );
        assert_eq!(kept, stream);
        let markers = stream.len() - 10 - 50;
        assert!(markers > 0);
        assert_eq!(budget.take(10_000), 1000 - 10 - 50);
    }

    #[test]
    fn within_the_budget_everything_is_kept_exactly() {
        let n = "0123abcd";
        let mut stream = b"\n@@kwin:xe:begin:0\nfact answer\n".to_vec();
        stream.extend(section(n, 0, b"hello\nworld", 0));
        stream.extend(section(n, 1, b"", 0));
        for chunk in [1, 3, 7, 1000] {
            let keep = Keep::sections(n, OutputBudget::new(1 << 20));
            assert_eq!(collect(&keep, &stream, chunk), stream, "chunk {chunk}");
        }
    }

    #[test]
    fn past_the_budget_a_section_keeps_its_tail_and_says_so() {
        let n = "feed";
        let budget = OutputBudget::new(100);
        let keep = Keep::sections(n, budget.clone());
        let body: Vec<u8> = (0..50_000u32)
            .flat_map(|i| format!("{i}\n").into_bytes())
            .collect();
        let mut stream = section(n, 0, &body, 3);
        stream.extend(b"\n@@kwin:feede:begin:0\nnot a step: kept whole\n".iter());
        stream.extend(section(n, 1, b"later step", 0));
        for chunk in [1, 13, 4096, 1 << 20] {
            let budget = OutputBudget::new(100);
            let keep = Keep::sections(n, budget.clone());
            let kept = collect(&keep, &stream, chunk);
            let text = String::from_utf8_lossy(&kept);
            assert!(
                kept.len() < 100 + 2 * TAIL + 600,
                "chunk {chunk}: {}",
                kept.len()
            );
            // The head up to the budget, the cut line, the tail, the end marker and code.
            assert!(
                text.starts_with(&format!("\n@@kwin:{n}:task:0:begin\n0\n1\n2\n")),
                "{text}"
            );
            let cut = body.len() - 100 - TAIL;
            assert!(
                text.contains(&format!("\n@@kwin:{n}:cut:{cut} bytes of output not kept")),
                "chunk {chunk}: {text}"
            );
            assert!(
                text.contains("49999\n\n@@kwin:feed:task:0:end:3\n"),
                "{text}"
            );
            assert!(text.contains("not a step: kept whole"), "{text}");
            // The budget is spent: the next section is cut from its first byte.
            assert!(text.contains(&format!("@@kwin:{n}:cut:0 bytes")), "{text}");
            assert!(
                text.contains("later step\n@@kwin:feed:task:1:end:0\n"),
                "{text}"
            );
            assert_eq!(budget.take(1), 0);
        }
        drop(keep);
    }

    #[test]
    fn without_sections_nothing_is_cut_but_the_cap_holds() {
        let keep = Keep::all();
        let mut c = Collector::new(&keep, Stream::Stdout, Live::Lines);
        c.push(&vec![b'x'; 1000]).expect("push");
        assert_eq!(c.finish().len(), 1000);
        let mut c = Collector::new(&keep, Stream::Stdout, Live::Lines);
        c.push(&vec![0u8; MAX_OUTPUT]).expect("exactly the cap");
        assert!(matches!(
            c.push(b"1"),
            Err(TransportError::OutputTooLarge { .. })
        ));
    }

    #[test]
    fn a_forged_marker_without_the_nonce_is_content() {
        let n = "aaaa";
        let keep = Keep::sections(n, OutputBudget::new(10));
        let mut body = b"\n@@kwin:bbbb:task:0:end:0\n".to_vec();
        body.extend(vec![b'y'; 10_000]);
        let kept = collect(&keep, &section(n, 0, &body, 0), 777);
        let text = String::from_utf8_lossy(&kept);
        assert!(text.contains(&format!("@@kwin:{n}:cut:")), "{text}");
        assert!(
            text.ends_with(&format!("@@kwin:{n}:task:0:end:0\n")),
            "{text}"
        );
    }

    /// What a [`LineBuf`] hands on for `input` pushed in pieces of `chunk` bytes: the pieces
    /// handed on while pushing, then what `finish` hands on.
    fn lines(input: &[u8], chunk: usize) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let mut b = LineBuf::new();
        let mut got = Vec::new();
        for piece in input.chunks(chunk.max(1)) {
            b.push(piece, &mut |l| got.push(l.to_vec()));
        }
        let mut last = Vec::new();
        b.finish(&mut |l| last.push(l.to_vec()));
        (got, last)
    }

    #[test]
    fn lines_split_across_chunks_come_out_whole() {
        let input = b"first\nsecond line\n\nthird\n";
        for chunk in [1, 2, 3, 5, 7, 100] {
            let (got, last) = lines(input, chunk);
            assert_eq!(
                got,
                [&b"first\n"[..], b"second line\n", b"\n", b"third\n"],
                "chunk {chunk}"
            );
            assert!(last.is_empty(), "chunk {chunk}: {last:?}");
        }
    }

    #[test]
    fn crlf_lines_end_at_their_line_feed_and_keep_the_carriage_return() {
        for chunk in [1, 2, 4, 64] {
            let (got, last) = lines(b"one\r\ntwo\r\nthree\r", chunk);
            assert_eq!(got, [&b"one\r\n"[..], b"two\r\n"], "chunk {chunk}");
            assert_eq!(last, [&b"three\r"[..]], "chunk {chunk}");
        }
    }

    #[test]
    fn a_last_line_without_a_line_break_comes_when_the_stream_ends() {
        let (got, last) = lines(b"done\nno newline", 3);
        assert_eq!(got, [&b"done\n"[..]]);
        assert_eq!(last, [&b"no newline"[..]]);
        let (got, last) = lines(b"", 3);
        assert!(got.is_empty() && last.is_empty());
    }

    #[test]
    fn invalid_utf8_passes_through_and_a_split_character_comes_out_whole() {
        // U+20AC (3 bytes) cut between two pushes; 0xFF is never UTF-8.
        let input = b"\xffbad\n\xe2\x82\xac ok\n".to_vec();
        for chunk in 1..=6 {
            let (got, last) = lines(&input, chunk);
            assert_eq!(
                got,
                [&b"\xffbad\n"[..], "\u{20ac} ok\n".as_bytes()],
                "chunk {chunk}"
            );
            assert!(last.is_empty());
            assert_eq!(String::from_utf8_lossy(&got[0]), "\u{fffd}bad\n");
        }
    }

    #[test]
    fn a_huge_line_is_handed_on_in_pieces_cut_between_characters() {
        let line: Vec<u8> = "\u{e9}".repeat(LINE_MAX).into_bytes();
        for chunk in [10_000, 3 * LINE_MAX] {
            let (got, last) = lines(&line, chunk);
            let all: Vec<u8> = got.iter().chain(&last).flatten().copied().collect();
            assert_eq!(all, line, "every byte once, in order");
            assert!(!got.is_empty(), "handed on before the stream ended");
            for piece in got.iter().chain(&last) {
                assert!(piece.len() <= LINE_MAX);
                assert!(std::str::from_utf8(piece).is_ok(), "a character was cut");
            }
        }
    }

    #[test]
    fn a_wrapped_base64_run_is_handed_on_with_the_line_after_it_and_scrubs_whole() {
        use base64::Engine as _;
        let secret = "correct-horse-battery-staple-0123456789";
        let scrubber = crate::secret::Scrubber::new();
        scrubber.add(&crate::secret::Secret::new(secret));
        let b64 = base64::engine::general_purpose::STANDARD.encode(secret.repeat(3));
        let mut input = b"before\n".to_vec();
        for piece in b64.as_bytes().chunks(20) {
            input.extend_from_slice(piece);
            input.push(b'\n');
        }
        input.extend_from_slice(b"after\n");
        for chunk in [1, 7, 4096] {
            let (got, last) = lines(&input, chunk);
            assert!(last.is_empty());
            assert_eq!(got.len(), 2, "chunk {chunk}: {got:?}");
            assert_eq!(got[0], b"before\n");
            assert!(got[1].ends_with(b"after\n"));
            let shown = scrubber.scrub_bytes(&got[1]);
            assert_eq!(
                shown,
                scrubber.scrub_bytes(&input[7..]),
                "as the whole text"
            );
            assert!(shown.contains("***"), "{shown}");
        }
        // Short words are shown at once, not held.
        let (got, _) = lines(b"first\n", 1);
        assert_eq!(got, [&b"first\n"[..]]);
    }

    /// What a tap got (stream, bytes), whether it was declined, what was kept.
    type Tapped = (Vec<(Stream, Vec<u8>)>, bool, Vec<u8>);

    fn tapped(live: Live, chunks: &[&[u8]]) -> Tapped {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let tap = Tap::new(move |stream, l| s2.lock().expect("lock").push((stream, l.to_vec())));
        let keep = Keep::all().with_tap(tap.clone());
        let mut c = Collector::new(&keep, Stream::Stderr, live);
        for ch in chunks {
            c.push(ch).expect("under the cap");
        }
        let kept = c.finish();
        let got = seen.lock().expect("lock").clone();
        (got, tap.declined(Stream::Stderr), kept)
    }

    #[test]
    fn a_collector_taps_what_it_receives_and_keeps_it_all_the_same() {
        let (got, declined, kept) = tapped(Live::Lines, &[b"a\nb", b"c\n", b"d"]);
        assert!(!declined);
        assert_eq!(kept, b"a\nbc\nd");
        let lines: Vec<&[u8]> = got.iter().map(|(_, l)| l.as_slice()).collect();
        assert_eq!(lines, [&b"a\n"[..], b"bc\n", b"d"]);
        assert!(got.iter().all(|(s, _)| *s == Stream::Stderr));
    }

    #[test]
    fn powershell_text_is_tapped_as_decoded_or_declined() {
        // A UTF-8 byte order mark is dropped, as `decode_stdout` drops it.
        let (got, declined, _) = tapped(Live::Utf8Lines, &[b"\xef", b"\xbb\xbfok\n"]);
        assert!(!declined);
        assert_eq!(got, [(Stream::Stderr, b"ok\n".to_vec())]);
        // Short output, no mark.
        let (got, _, _) = tapped(Live::Utf8Lines, &[b"ok"]);
        assert_eq!(got, [(Stream::Stderr, b"ok".to_vec())]);
        // UTF-16 is decoded only whole; CLIXML (`AtEnd`) too.
        for (live, input) in [
            (Live::Utf8Lines, &b"\xff\xfeo\x00k\x00\n\x00"[..]),
            (Live::AtEnd, b"#< CLIXML\n<Objs/>\n"),
        ] {
            let (got, declined, kept) = tapped(live, &[input]);
            assert!(declined && got.is_empty(), "{live:?}: {got:?}");
            assert_eq!(kept, input, "kept whole for the end");
        }
    }

    #[test]
    fn a_stream_cut_short_still_taps_its_last_partial_line_and_nothing_past_the_cap() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let keep = Keep::all().with_tap(Tap::new(move |_, l| {
            s2.lock().expect("lock").push(l.to_vec())
        }));
        let mut c = Collector::new(&keep, Stream::Stdout, Live::Lines);
        c.push(b"line\npartial").expect("push");
        assert!(c.push(&vec![b'x'; MAX_OUTPUT]).is_err());
        drop(c);
        assert_eq!(
            *seen.lock().expect("lock"),
            [b"line\n".to_vec(), b"partial".to_vec()]
        );
    }

    /// Output kwin reads counts against the run's budget; once it is spent, a stream may
    /// bring [`AFTER_BUDGET`] more bytes and no more. Output only shown keeps its tail.
    #[test]
    fn everything_a_host_sends_counts_against_the_budget() {
        let budget = OutputBudget::new(1000);
        let read = Keep::budget(budget.clone(), false);
        let mut c = Collector::new(&read, Stream::Stdout, Live::Lines);
        c.push(&[b'a'; 600]).expect("within the budget");
        assert_eq!(c.finish().len(), 600, "kept whole");
        let mut c = Collector::new(&read, Stream::Stdout, Live::Lines);
        c.push(&vec![b'b'; 400 + AFTER_BUDGET])
            .expect("the rest of the budget and the allowance");
        assert!(matches!(
            c.push(b"one more"),
            Err(TransportError::OutputBudgetSpent { budget: 1000, .. })
        ));
        // Shown only: the tail, after a line saying what was not kept.
        let budget = OutputBudget::new(100);
        let shown = Keep::budget(budget, true);
        let mut c = Collector::new(&shown, Stream::Stdout, Live::Lines);
        for _ in 0..1000 {
            c.push(&[b'x'; 1000]).expect("never an error");
        }
        c.push(b"the end\n").expect("push");
        let kept = c.finish();
        assert!(kept.len() < 100 + TAIL + 200, "{} bytes kept", kept.len());
        let text = String::from_utf8_lossy(&kept);
        assert!(
            text.contains("output budget of 100 bytes is spent") && text.ends_with("the end\n")
        );
    }
}
