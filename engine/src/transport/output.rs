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
//! always kept whole: cutting output never changes what kwin parses, so never a result.

use super::error::TransportError;
use crate::shell::MAX_OUTPUT;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes of a step section's end kept after the budget is spent.
pub const TAIL: usize = 4096;

/// Default per-run budget of kept step output (`settings.output_budget_mib`).
pub const DEFAULT_OUTPUT_BUDGET: u64 = 64 << 20;

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

/// How a run's output is kept.
#[derive(Debug, Clone, Default)]
pub struct Keep {
    /// The batch nonce whose step sections count against the budget.
    pub sections: Option<(String, Arc<OutputBudget>)>,
}

impl Keep {
    /// Keep everything (up to [`MAX_OUTPUT`] per stream).
    pub fn all() -> Self {
        Keep::default()
    }

    /// Step sections of the batch with `nonce` count against `budget`.
    pub fn sections(nonce: &str, budget: Arc<OutputBudget>) -> Self {
        Keep {
            sections: Some((nonce.to_string(), budget)),
        }
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
}

/// Longest marker line tag looked for after the marker's prefix (`12:end:255`).
const TAG_MAX: usize = 64;

impl Sections {
    fn content(&mut self, buf: &mut Vec<u8>, b: &[u8]) {
        if b.is_empty() {
            return;
        }
        match &mut self.state {
            State::Outside => buf.extend_from_slice(b),
            State::Inside { cut, tail } => {
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
}

impl Collector {
    pub fn new(keep: &Keep) -> Self {
        Collector {
            buf: Vec::new(),
            received: 0,
            sections: keep.sections.as_ref().map(|(nonce, budget)| Sections {
                nonce: nonce.clone(),
                marker: format!("\n@@kwin:{nonce}:task:").into_bytes(),
                budget: budget.clone(),
                state: State::Outside,
                pending: Vec::new(),
            }),
        }
    }

    /// Take `bytes` received from the host. `OutputTooLarge` past [`MAX_OUTPUT`] received.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), TransportError> {
        if self.received + bytes.len() > MAX_OUTPUT {
            return Err(TransportError::OutputTooLarge { limit: MAX_OUTPUT });
        }
        self.received += bytes.len();
        match &mut self.sections {
            Some(s) => s.push(&mut self.buf, bytes),
            None => self.buf.extend_from_slice(bytes),
        }
        Ok(())
    }

    /// Bytes received so far.
    pub fn received(&self) -> usize {
        self.received
    }

    /// What is kept, once the stream ended.
    pub fn finish(mut self) -> Vec<u8> {
        if let Some(s) = &mut self.sections {
            s.finish(&mut self.buf);
        }
        self.buf
    }
}

/// Apply `keep` to output already read whole (transports without streaming filters).
pub fn keep_whole(bytes: Vec<u8>, keep: &Keep) -> Vec<u8> {
    if keep.sections.is_none() {
        return bytes;
    }
    let mut c = Collector::new(keep);
    for chunk in bytes.chunks(64 * 1024) {
        if c.push(chunk).is_err() {
            break;
        }
    }
    c.finish()
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
        let mut c = Collector::new(keep);
        for piece in stream.chunks(chunk.max(1)) {
            c.push(piece).expect("under the cap");
        }
        c.finish()
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
        let mut c = Collector::new(&keep);
        c.push(&vec![b'x'; 1000]).expect("push");
        assert_eq!(c.finish().len(), 1000);
        let mut c = Collector::new(&keep);
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
}
