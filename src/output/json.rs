//! `--output json`: every event as one JSON line (`Event::to_json_line`: the event with
//! `"schema"`), flushed at once. The stream of a command ends with its one `summary`
//! (`Output::finish`).

use kwin_engine::event::Event;
use std::io::Write;

/// Print `e` as one line of the stream.
pub fn line(e: &Event) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", e.to_json_line());
    let _ = out.flush();
}

/// The JSON form of a stage's events: each as it comes.
pub struct Json;

impl super::sink::Sink for Json {
    fn event(&mut self, e: Event) {
        line(&e);
    }
}
