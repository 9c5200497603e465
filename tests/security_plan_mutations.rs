//! Thousands of mutated plans, generated from the example and test plans: byte flips, line
//! deletions and duplications, key renames, value type swaps, truncation, Unicode insertions.
//! Each one goes through kwin's whole front half (load, validate, expand, graph — what
//! `kwin validate` does). None may panic; each is accepted, or rejected with at least one
//! error diagnostic that has a line number. A sample also runs through the real binary
//! (`kwin validate --output json`): exit 0 or 1, JSON lines, no panic.
//!
//! The generator is deterministic (seeded xorshift), so a failure names a reproducible
//! mutant; failing inputs are written to `target/plan-mutants/` for inspection.

use kwin_engine::diag::Diagnostics;
use kwin_engine::pipeline::ChecksumMode;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// Mutants per source plan.
const PER_SOURCE: usize = 250;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The plans mutants are made from: every example and every good test plan.
fn sources() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for dir in ["examples", "tests/plans/good", "tests/plans"] {
        if let Ok(rd) = std::fs::read_dir(root().join(dir)) {
            for e in rd.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "toml") {
                    v.push(p);
                }
            }
        }
    }
    v.sort();
    assert!(v.len() >= 2, "no source plans found: {v:?}");
    v
}

struct Rng(u64);

impl Rng {
    /// A generator whose stream depends on all bits of `n` (splitmix64 of it; never 0).
    fn seeded(n: u64) -> Rng {
        let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const VALUES: &[&str] = &[
    "42",
    "-1",
    "0",
    "99999999999999999999",
    "3.14",
    "nan",
    "inf",
    "true",
    "false",
    "\"\"",
    "\"text\"",
    "'literal'",
    "\"\"\"multi\nline\"\"\"",
    "[]",
    "[1, \"a\"]",
    "[[1], [2]]",
    "{}",
    "{ a = 1 }",
    "1979-05-27T07:32:00Z",
    "07:32:00",
    "\"10.0.0.0/33\"",
    "\"$(id)\"",
    "\"\\u0000\"",
    "\"a\\nb\"",
    "\"\\\"\"",
    "\"日本語\"",
];

const UNICODE: &[&str] = &[
    "\u{202e}", // right-to-left override
    "\u{200b}", // zero-width space
    "\u{feff}", // BOM
    "\u{0301}", // combining acute
    "\u{ff1d}", // fullwidth =
    "\u{a0}",   // no-break space
    "\u{2028}", // line separator
    "\u{201c}", // left double quotation mark
    "\u{2019}", // right single quotation mark
    "😀", "한", "\u{0}", "\r", "\t",
];

/// Keys that exist somewhere in plans, for renames.
const KEYS: &[&str] = &[
    "name",
    "address",
    "os",
    "role",
    "port",
    "user",
    "transport",
    "private_key",
    "password",
    "password_env",
    "password_file",
    "become",
    "https",
    "cert_fingerprint",
    "host_key",
    "inventory",
    "module",
    "params",
    "after",
    "on",
    "hosts",
    "cluster",
    "cni",
    "plugin",
    "backend",
    "vni",
    "pod_cidr",
    "service_cidr",
    "dns_service_ip",
    "kubernetes_version",
    "labels",
    "taints",
    "node_ip",
    "connect_timeout",
    "parallelism",
    "step_timeout",
];

/// One mutation of `text`; returns its name.
fn mutate_once(rng: &mut Rng, text: &mut Vec<u8>) -> &'static str {
    let lines = |t: &[u8]| -> Vec<(usize, usize)> {
        let mut v = Vec::new();
        let mut start = 0;
        for (i, &b) in t.iter().enumerate() {
            if b == b'\n' {
                v.push((start, i + 1));
                start = i + 1;
            }
        }
        if start < t.len() {
            v.push((start, t.len()));
        }
        v
    };
    match rng.below(8) {
        0 => {
            if text.is_empty() {
                return "noop";
            }
            let i = rng.below(text.len());
            text[i] ^= 1 << rng.below(8);
            "byte flip"
        }
        1 => {
            let ls = lines(text);
            if ls.is_empty() {
                return "noop";
            }
            let (a, b) = *rng.pick(&ls);
            text.drain(a..b);
            "line deletion"
        }
        2 => {
            let ls = lines(text);
            if ls.is_empty() {
                return "noop";
            }
            let (a, b) = *rng.pick(&ls);
            let line = text[a..b].to_vec();
            let at = ls[rng.below(ls.len())].0;
            text.splice(at..at, line);
            "line duplication"
        }
        3 => {
            // Rename the key of a `key = value` line.
            let ls: Vec<(usize, usize)> = lines(text)
                .into_iter()
                .filter(|&(a, b)| {
                    let l = &text[a..b];
                    l.contains(&b'=') && l.first().is_some_and(|c| c.is_ascii_alphabetic())
                })
                .collect();
            if ls.is_empty() {
                return "noop";
            }
            let (a, b) = *rng.pick(&ls);
            let eq = a + text[a..b].iter().position(|&c| c == b'=').unwrap_or(0);
            let key = String::from_utf8_lossy(&text[a..eq]).trim().to_string();
            let new = match rng.below(5) {
                0 => rng.pick(KEYS).to_string(),
                1 => key.to_uppercase(),
                2 => key.replace('_', "-"),
                3 => {
                    let mut k: Vec<char> = key.chars().collect();
                    if k.len() > 1 {
                        let i = rng.below(k.len() - 1);
                        k.swap(i, i + 1);
                    }
                    k.into_iter().collect()
                }
                _ => format!("{key}{}", rng.pick(&["s", "_x", ".y", " z", "\"", ""])),
            };
            text.splice(a..eq, format!("{new} ").into_bytes());
            "key rename"
        }
        4 => {
            // Swap the value of a `key = value` line for one of another type.
            let ls: Vec<(usize, usize)> = lines(text)
                .into_iter()
                .filter(|&(a, b)| text[a..b].contains(&b'='))
                .collect();
            if ls.is_empty() {
                return "noop";
            }
            let (a, b) = *rng.pick(&ls);
            let eq = a + text[a..b].iter().position(|&c| c == b'=').unwrap_or(0);
            let end = if text[b - 1] == b'\n' { b - 1 } else { b };
            text.splice(eq + 1..end, format!(" {}", rng.pick(VALUES)).into_bytes());
            "value type swap"
        }
        5 => {
            let at = rng.below(text.len() + 1);
            text.truncate(at);
            "truncation"
        }
        6 => {
            let at = rng.below(text.len() + 1);
            let u = rng.pick(UNICODE).as_bytes().to_vec();
            text.splice(at..at, u);
            "unicode insertion"
        }
        _ => {
            // Raw bytes that are not UTF-8.
            let at = rng.below(text.len() + 1);
            const JUNK: &[&[u8]] = &[b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf0\x9f"];
            let junk = rng.pick(JUNK).to_vec();
            text.splice(at..at, junk.iter().copied());
            "invalid utf-8"
        }
    }
}

/// Load and validate the plan at `path` (read once): the plan, or every diagnostic.
fn load_and_validate(path: &Path) -> kwin_engine::plan::validate::Checked {
    use kwin_engine::module::Registry;
    let steps = kwin_modules::recipes::step_names();
    let modules = kwin_modules::Builtin.names();
    let known = kwin_engine::plan::validate::Names {
        modules: &modules,
        recipe_steps: &steps,
    };
    kwin_engine::plan::validate::load_and_validate(path, known)
}

/// The front half of `kwin validate`, in process: the pipeline's `prepare` as `kwin validate`
/// asks it (load and validate once, effective values, expansion with the checksums known,
/// the graph, the build phase). `Ok(warnings)` or `Err(diagnostics)`.
fn front_half(path: &Path) -> Result<Diagnostics, Diagnostics> {
    use kwin_modules::recipes::{request, Recipes};
    let req = request(path, Recipes::Build, ChecksumMode::Known, false);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime
        .block_on(kwin_engine::pipeline::prepare(&req))
        .map(|p| p.warnings)
}

struct Failure {
    what: String,
    path: String,
    bytes: Vec<u8>,
}

#[test]
fn mutated_plans_are_accepted_or_rejected_with_a_located_diagnostic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut failures: Vec<Failure> = Vec::new();
    let (mut accepted, mut rejected, mut total, mut not_utf8) = (0usize, 0usize, 0usize, 0usize);
    let mut kinds = std::collections::BTreeMap::<&str, usize>::new();
    let mut time = std::collections::BTreeMap::<String, std::time::Duration>::new();
    // Silence the default hook's message for panics we catch and report ourselves.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    for (si, src) in sources().iter().enumerate() {
        let original = std::fs::read(src).expect("read source plan");
        let name = src.file_name().map(|n| n.to_string_lossy().into_owned());
        let name = name.unwrap_or_default();
        for i in 0..PER_SOURCE {
            let mut rng = Rng::seeded(((si as u64) << 32) | i as u64);
            let mut text = original.clone();
            let n = 1 + rng.below(3);
            let mut applied = Vec::new();
            for _ in 0..n {
                let k = mutate_once(&mut rng, &mut text);
                *kinds.entry(k).or_default() += 1;
                applied.push(k);
            }
            total += 1;
            if std::str::from_utf8(&text).is_err() {
                // Not UTF-8: `invalid_utf8_plan_is_rejected_at_the_line_of_the_bad_byte`.
                not_utf8 += 1;
                continue;
            }
            // Same directory as the source: relative paths (inventory, files) resolve alike.
            let path = dir.path().join(format!("{name}-{i}.toml"));
            std::fs::write(&path, &text).expect("write mutant");
            let what = format!("{name} mutant {i} ({})", applied.join(", "));
            let t0 = std::time::Instant::now();
            let r = catch_unwind(AssertUnwindSafe(|| front_half(&path)));
            *time.entry(name.clone()).or_default() += t0.elapsed();
            match r {
                Err(p) => {
                    let msg = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    failures.push(Failure {
                        what: format!("{what}: PANIC {msg}"),
                        bytes: text.clone(),
                        path: path.display().to_string(),
                    });
                }
                Ok(Ok(_)) => accepted += 1,
                Ok(Err(d)) => {
                    rejected += 1;
                    let rendered = d.to_string();
                    if !d.has_errors() {
                        failures.push(Failure {
                            what: format!("{what}: rejected without an error: {rendered}"),
                            bytes: text.clone(),
                            path: path.display().to_string(),
                        });
                    } else if !d
                        .errors()
                        .any(|e| e.location.as_ref().is_some_and(|l| l.line >= 1))
                    {
                        failures.push(Failure {
                            what: format!("{what}: no error has a line: {}", rendered.trim()),
                            bytes: text.clone(),
                            path: path.display().to_string(),
                        });
                    }
                }
            }
            let _ = std::fs::remove_file(&path);
        }
    }
    std::panic::set_hook(hook);
    eprintln!(
        "plan mutants: {total} ({accepted} accepted, {rejected} rejected, {not_utf8} not UTF-8); \
         mutations: {kinds:?}; time: {time:?}"
    );
    assert!(total >= 2000, "only {total} mutants");
    assert!(
        accepted + rejected >= 1500,
        "only {} UTF-8 mutants",
        accepted + rejected
    );
    assert!(
        rejected > (accepted + rejected) / 4,
        "suspiciously few rejections: {rejected} of {}",
        accepted + rejected
    );
    if !failures.is_empty() {
        let out = root().join("target/plan-mutants");
        let _ = std::fs::create_dir_all(&out);
        for (i, f) in failures.iter().enumerate().take(50) {
            let _ = std::fs::write(out.join(format!("failure-{i}.toml")), &f.bytes);
        }
        // Group by the message after the mutant's name, so one bug shows once with a count.
        let mut groups = std::collections::BTreeMap::<String, (usize, &str)>::new();
        for f in &failures {
            let key = f.what.split_once("): ").map_or(f.what.as_str(), |(_, m)| m);
            let key = key.replace(&f.path, "PLAN");
            let key: String = key.chars().take(160).collect();
            groups.entry(key).or_insert((0, &f.what)).0 += 1;
        }
        let lines: Vec<String> = groups
            .iter()
            .map(|(_, (n, first))| format!("{n}× e.g. {first}"))
            .collect();
        panic!(
            "{} of {total} mutants broke the rules (inputs in {}):\n{}",
            failures.len(),
            out.display(),
            lines.join("\n")
        );
    }
}

#[test]
fn invalid_utf8_plan_is_rejected_at_the_line_of_the_bad_byte() {
    // A plan saved in Latin-1, or a byte flipped on disk: the user needs the line to look at.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("plan.toml");
    let text = b"[[hosts]]\nname = \"h1\"\naddress = \"10.0.0.1\"\nos = \"linux\"\nlabels = { team = \"caf\xe9\" }\n";
    std::fs::write(&path, text).expect("write plan");
    let diags = load_and_validate(&path).diags;
    assert!(diags.has_errors(), "accepted: {diags}");
    let lines: Vec<usize> = diags
        .errors()
        .filter_map(|d| d.location.as_ref().map(|l| l.line))
        .collect();
    assert_eq!(lines, [5], "the bad byte is on line 5; got: {diags}");
}

#[test]
fn mutated_plans_through_the_binary_exit_0_or_1_with_json_diagnostics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut problems = Vec::new();
    let mut ran = 0;
    for (si, src) in sources().iter().enumerate() {
        let original = std::fs::read(src).expect("read source plan");
        for i in 0..12u64 {
            let mut rng = Rng::seeded(0x51ed_0000_0000 ^ ((si as u64) << 40) ^ i);
            let mut text = original.clone();
            let k = mutate_once(&mut rng, &mut text);
            let path = dir.path().join(format!("m{si}-{i}.toml"));
            std::fs::write(&path, &text).expect("write mutant");
            let out = kwin_testkit::kwin!(".")
                .command()
                .args(["validate", "--output", "json"])
                .arg(&path)
                .output()
                .expect("run kwin");
            ran += 1;
            let code = out.status.code();
            let stderr = String::from_utf8_lossy(&out.stderr);
            if !matches!(code, Some(0) | Some(1)) || stderr.contains("panicked") {
                problems.push(format!("{} ({k}): exit {code:?}: {stderr}", path.display()));
                continue;
            }
            let stdout = String::from_utf8_lossy(&out.stdout);
            let mut located_error = false;
            for l in stdout.lines().filter(|l| !l.trim().is_empty()) {
                match serde_json::from_str::<serde_json::Value>(l) {
                    Ok(v) => {
                        if v["severity"] == "error" && v["location"]["line"].as_u64().is_some() {
                            located_error = true;
                        }
                    }
                    Err(e) => {
                        problems.push(format!("{} ({k}): not JSON ({e}): {l}", path.display()))
                    }
                }
            }
            if code == Some(1) && !located_error && std::str::from_utf8(&text).is_ok() {
                problems.push(format!(
                    "{} ({k}): rejected without a located error: {stdout}{stderr}",
                    path.display()
                ));
            }
        }
    }
    assert!(ran >= 24);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
