//! The probe's batch splitter and every fact parser behind it on arbitrary output: never
//! panics, whatever the host printed (truncated sections, forged markers, CRLF, not UTF-8),
//! for command facts and for path facts (the path probe's records).
#![no_main]

use kwin_engine::fact::{parse_batch, FactQuery, PathQuery, PathRead};
use kwin_engine::transport::Output;
use libfuzzer_sys::fuzz_target;

const NONCE: &str = "0123456789abcdef0123456789abcdef";

fuzz_target!(|data: &[u8]| {
    // First byte: exit code; next two: where stdout ends and stderr begins.
    let (exit, rest) = match data.split_first() {
        Some((e, r)) => (i32::from(*e) - 1, r),
        None => (0, data),
    };
    let (cut, body) = match rest {
        [a, b, body @ ..] => (usize::from(u16::from_le_bytes([*a, *b])), body),
        _ => (0, rest),
    };
    let cut = cut.min(body.len());
    let out = Output {
        stdout: body[..cut].to_vec(),
        stderr: body[cut..].to_vec(),
        exit,
    };
    let queries: Vec<FactQuery> = ["a", "b", "a", "c"]
        .iter()
        .map(|k| FactQuery {
            key: (*k).to_string(),
            command: "true".to_string(),
            path: None,
        })
        .collect();
    // The same output as path facts' answers (the path probe's records).
    let paths: Vec<FactQuery> = ["/a", "/b", "/c"]
        .iter()
        .enumerate()
        .map(|(i, p)| FactQuery {
            key: format!("p{i}"),
            command: "true".to_string(),
            path: Some(PathQuery {
                path: (*p).to_string(),
                read: [PathRead::Meta, PathRead::Content, PathRead::ContentUnless("0".repeat(64))][i]
                    .clone(),
            }),
        })
        .collect();
    if let Ok(facts) = parse_batch(&paths, &out, NONCE) {
        for key in ["p0", "p1", "p2"] {
            if let Some(answer) = facts.raw(key) {
                kwin_fuzz_common::every_parser(answer);
            }
        }
    }
    if let Ok(facts) = parse_batch(&queries, &out, NONCE) {
        for key in ["a", "b", "c"] {
            if let Some(answer) = facts.raw(key) {
                kwin_fuzz_common::every_parser(answer);
            }
        }
    }
});

#[path = "../common.rs"]
mod kwin_fuzz_common;
