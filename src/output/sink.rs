//! Where a stage's events are shown: the human form (`human.rs`) or the JSON lines
//! (`json.rs`), fed by the renderer (`render.rs`) and by `kwin show` (`show.rs`).

use kwin_engine::event::Event;

/// Where a stage's events are shown (`human.rs`, `json.rs`; `render.rs` feeds them).
pub trait Sink {
    fn event(&mut self, e: Event);
    /// The stage ended (progress bars cleared).
    fn end(&mut self) {}
}
