//! The plan loader, validator, recipe expansion and task graph (what `kwin validate` runs) on
//! arbitrary text: never panics; a rejected plan has at least one error diagnostic; every
//! diagnostic renders.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // A directory that does not exist: a relative `inventory` cannot read anything.
    let path = Path::new("/nonexistent-kwin-fuzz/plan.toml");
    let registry = kwin_modules::Builtin;
    let steps = kwin_modules::recipes::step_names();
    let diags = kwin_engine::plan::check_str(path, &text, &registry, &steps);
    let _ = diags.to_string();
    if diags.has_errors() {
        return;
    }
    match kwin_engine::plan::load_str(path, &text) {
        Ok(plan) => {
            if let Ok(tasks) = kwin_engine::expand::expand(&plan, kwin_modules::recipes::RECIPES)
            {
                if let Err(d) = kwin_engine::graph::TaskGraph::build(tasks) {
                    assert!(d.has_errors(), "graph rejected without an error: {d:?}");
                }
            }
        }
        Err(d) => panic!("check found no error but load refused: {d}"),
    }
});
