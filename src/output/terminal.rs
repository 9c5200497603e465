//! Text shown on the operator's terminal.
//!
//! Whatever a host prints — command output, a file's content in a diff, an error excerpt, a
//! host log's lines told again by `kwin show` — is data, and so is any text kwin quotes from
//! it. A terminal treats C0 and C1 control characters as commands (ESC sequences that set the
//! clipboard with OSC 52, change the window title, erase lines and move the cursor; a carriage
//! return that overwrites a line with a forged `ok` row; the one-byte C1 CSI), so every human
//! line kwin prints goes through [`terminal`] (`kwin_engine::quote::terminal_text`, which the
//! host logs use too), which shows each of them as an escape. Newlines and tabs stay, and so
//! does a line break written `\r\n`. JSON output needs nothing more: its strings escape every
//! control character.

pub use kwin_engine::quote::terminal_text as terminal;

/// A warning given outside a run's events, as the human form prints it on stderr:
/// `warning: h1: …`, or `warning: …` of no host.
pub fn warning_line(host: Option<&str>, message: &str) -> String {
    match host {
        Some(h) => terminal(&format!("warning: {h}: {message}")).into_owned(),
        None => terminal(&format!("warning: {message}")).into_owned(),
    }
}
