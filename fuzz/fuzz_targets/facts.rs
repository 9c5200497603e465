//! Every fact parser (Linux key=value lines, Windows JSON, Kubernetes state lines) on arbitrary
//! output: never panics.
#![no_main]

use kwin_engine::fact::FactOutput;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // First byte selects the exit code (mostly 0, so the parsers see the text).
    let (exit, body) = match data.split_first() {
        Some((e, r)) if *e >= 0xF0 => (i32::from(*e) - 0xF0, r),
        _ => (0, data),
    };
    let out = FactOutput {
        stdout: body.to_vec(),
        stderr: body.to_vec(),
        exit,
    };
    common::every_parser(&out);
});

#[path = "../common.rs"]
mod common;
