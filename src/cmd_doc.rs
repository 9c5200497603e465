//! `kwin modules` and `kwin doc MODULE`: the module reference of `kwin_modules::reference`
//! (the same text docs/modules.md is generated from).

use crate::output::Output;
use kwin_engine::event::Outcome;
use kwin_modules::reference;

/// Every module, per OS, one line each.
pub fn modules(out: &Output) -> anyhow::Result<Outcome> {
    out.text(&reference::list_text());
    Ok(Outcome::Success)
}

/// One module: its OSes, line, parameters and examples. The name was checked by the
/// argument parser (`args::parse_module`).
pub fn doc(name: &str, out: &Output) -> anyhow::Result<Outcome> {
    let m = reference::find(name).map_err(anyhow::Error::msg)?;
    out.text(&reference::doc_text(&m));
    Ok(Outcome::Success)
}
