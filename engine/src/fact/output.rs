//! A fact query's raw answer and the errors of reading one: the leaf both the batch
//! (`fact.rs`) and the path answers (`paths.rs`) build on.

use thiserror::Error;

/// Raw answer to one fact query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FactOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit: i32,
}

impl FactOutput {
    pub fn stdout_str(&self) -> Result<&str, FactError> {
        std::str::from_utf8(&self.stdout).map_err(|_| FactError::NotUtf8)
    }
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FactError {
    #[error("fact `{0}` was not probed (this is a bug in kwin)")]
    Missing(String),
    #[error("fact output is not valid UTF-8")]
    NotUtf8,
    #[error("cannot parse fact output: {}", clip(.0))]
    Parse(String),
    #[error("fact command failed with exit code {exit}: {}", clip(.stderr))]
    Command { exit: i32, stderr: String },
    /// The host answered the script without running any of it: the login was accepted, then
    /// the account's shell (`nologin`, a forced command, a menu) printed something else.
    /// `said` is the first line the host printed (stdout, else stderr), if any.
    #[error("did not run kwin's script (exit code {exit}){}", said_text(.said))]
    NotRun { exit: i32, said: Option<String> },
}

fn said_text(said: &Option<String>) -> String {
    match said {
        Some(line) => format!("; it printed \"{}\"", clip(line)),
        None => "; it printed nothing".to_string(),
    }
}

/// Longest stretch of remote text an error message quotes (at each end of the text).
const QUOTE_HALF: usize = 512;

/// `text`, or when it is long, its first and last whole words within [`QUOTE_HALF`] bytes
/// each and how many bytes were left out between them. A host can print anything (a 64 MiB
/// line, a runaway loop) and messages go to the terminal, the logs and the run journal, so
/// they quote a bounded amount. Cuts fall only on whitespace: a word, such as a secret the
/// run's scrubber replaces later, is quoted whole or not at all.
pub fn clip(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= 2 * QUOTE_HALF + 64 {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut head_end = QUOTE_HALF;
    while !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let head = if text[head_end..].starts_with(char::is_whitespace) {
        &text[..head_end]
    } else {
        match text[..head_end].rfind(char::is_whitespace) {
            Some(i) => &text[..i],
            None => "",
        }
    };
    let mut tail_start = text.len() - QUOTE_HALF;
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    let tail = if text[..tail_start].ends_with(char::is_whitespace) {
        &text[tail_start..]
    } else {
        match text[tail_start..].find(char::is_whitespace) {
            Some(i) => &text[tail_start + i..],
            None => "",
        }
    };
    let left_out = text.len() - head.len() - tail.len();
    let quoted = format!(
        "{} [... {left_out} bytes left out ...] {}",
        head.trim_end(),
        tail.trim_start()
    );
    std::borrow::Cow::Owned(quoted.trim().to_string())
}

/// Where `needle` first occurs in `hay` (`None` for an empty needle).
pub(crate) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    memchr::memmem::find(hay, needle)
}
