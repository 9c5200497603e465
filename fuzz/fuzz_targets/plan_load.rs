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
    let modules = kwin_engine::module::Registry::names(&registry);
    let known = kwin_engine::plan::validate::Names {
        modules: &modules,
        recipe_steps: &steps,
    };
    let checked = kwin_engine::plan::validate::load_and_validate_str(path, &text, known);
    let _ = checked.diags.to_string();
    match checked.into_result() {
        Err(_) => {}
        Ok((plan, _)) => {
            if let Ok(tasks) = kwin_engine::expand::expand(&plan, kwin_modules::recipes::RECIPES)
            {
                match kwin_engine::graph::TaskGraph::build(tasks) {
                    Err(d) => assert!(d.has_errors(), "graph rejected without an error: {d:?}"),
                    Ok(graph) => {
                        if let Err(d) =
                            kwin_engine::module::build::build_all(&plan, &graph, &registry)
                        {
                            assert!(d.has_errors(), "build rejected without an error: {d:?}");
                        }
                    }
                }
            }
        }
    }
});
