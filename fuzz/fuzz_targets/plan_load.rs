//! The plan loader and validator on arbitrary text: never panics; a rejected plan has at
//! least one error diagnostic; every diagnostic renders.
#![no_main]

use kwin_engine::plan::{load_str, validate::validate};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // A directory that does not exist: a relative `inventory` cannot read anything.
    let path = Path::new("/nonexistent-kwin-fuzz/plan.toml");
    match load_str(path, &text) {
        Ok(plan) => {
            let diags = validate(&plan, &kwin_modules::Builtin);
            let _ = diags.sorted().to_string();
        }
        Err(diags) => {
            assert!(diags.has_errors(), "rejected without an error: {diags:?}");
            let _ = diags.to_string();
        }
    }
});
