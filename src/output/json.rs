//! `--output json`: every event as one JSON line, flushed at once; the last line of a run is
//! its `summary` (`verify_summary` for `kwin verify`).

use kwin_engine::event::Event;
use std::io::Write;
use tokio::sync::mpsc::UnboundedReceiver;

pub fn render(mut rx: UnboundedReceiver<Event>) {
    let stdout = std::io::stdout();
    while let Some(e) = rx.blocking_recv() {
        if let Ok(line) = serde_json::to_string(&e) {
            let mut out = stdout.lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    }
}
