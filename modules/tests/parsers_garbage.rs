//! Every fact parser (Linux and Windows) and the probe's batch splitter on garbage: random
//! bytes, text that is not what the command prints, output that is not UTF-8, JSON of the
//! wrong shape or absurd depth, and huge output. None may panic; garbage is an error that
//! says what was wrong, in a message of bounded size (it ends up in events, logs and the run
//! journal), and parsing huge output takes bounded time and memory.

use kwin_engine::fact::{parse_batch, Fact, FactError, FactOutput, FactQuery};
use kwin_engine::transport::Output;
use kwin_modules::linux::facts as lx;
use kwin_modules::table::{FactSample, Family};
use proptest::prelude::*;
use std::time::{Duration, Instant};

/// Longest error message a parser may produce, whatever the host printed.
const MAX_MESSAGE: usize = 4096;

/// One sample of every fact kind kwin has, from the modules' tables.
fn parsers() -> Vec<FactSample> {
    kwin_modules::fact_samples()
}

fn out(stdout: &[u8], stderr: &[u8], exit: i32) -> FactOutput {
    FactOutput {
        stdout: stdout.to_vec(),
        stderr: stderr.to_vec(),
        exit,
    }
}

/// Run every parser; return (kind, family, result).
fn all(o: &FactOutput) -> Vec<(String, Family, Result<(), FactError>)> {
    parsers()
        .into_iter()
        .map(|s| {
            let r = s.parse(o);
            (s.kind, s.family, r)
        })
        .collect()
}

fn check_bounded(name: &str, r: &Result<(), FactError>) -> Result<(), String> {
    if let Err(e) = r {
        let m = e.to_string();
        if m.len() > MAX_MESSAGE {
            return Err(format!(
                "{name}: error message of {} bytes (limit {MAX_MESSAGE}): {}...",
                m.len(),
                m.chars().take(120).collect::<String>()
            ));
        }
        if m.trim().is_empty() {
            return Err(format!("{name}: empty error message"));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(
        stdout in prop::collection::vec(any::<u8>(), 0..2048),
        stderr in prop::collection::vec(any::<u8>(), 0..256),
        exit in prop_oneof![Just(0), Just(1), Just(2), Just(127), Just(-1), any::<i32>()],
    ) {
        for (name, _, r) in all(&out(&stdout, &stderr, exit)) {
            if let Err(m) = check_bounded(&name, &r) {
                prop_assert!(false, "{}", m);
            }
            if exit != 0 {
                prop_assert!(r.is_err(), "{} accepted output of a command that failed ({})", name, exit);
            }
        }
    }

    #[test]
    fn near_miss_key_value_lines_never_panic(
        lines in prop::collection::vec(
            (
                prop::sample::select(&[
                    "type", "stat", "sha256", "content", "link", "manager", "pkg", "lock",
                    "exit", "proc", "builtin", "sys_module", "curl", "wget", "present",
                    "absent", "LoadState", "ActiveState", "SubState", "UnitFileState",
                    "NeedDaemonReload", "systemd", "Filename",
                ][..]),
                prop_oneof![
                    Just(String::new()),
                    "[a-z0-9:=/\t .+-]{0,30}",
                    "[A-Za-z0-9+/=]{0,24}",
                    "[0-7]{1,4}:[0-9]{1,6}:[a-z]{0,6}:[0-9]{1,6}:[a-z]{0,6}:[0-9]{1,20}",
                    any::<String>(),
                ],
                prop::sample::select(&["=", "", "==", "\t", ": "][..]),
            ),
            0..12,
        ),
        crlf in any::<bool>(),
    ) {
        let nl = if crlf { "\r\n" } else { "\n" };
        let text: String = lines
            .iter()
            .map(|(k, v, sep)| format!("{k}{sep}{v}{nl}"))
            .collect();
        for (name, _, r) in all(&out(text.as_bytes(), b"", 0)) {
            if let Err(m) = check_bounded(&name, &r) {
                prop_assert!(false, "{}", m);
            }
        }
    }

    #[test]
    fn near_miss_json_never_panics(
        pairs in prop::collection::vec(
            (
                prop::sample::select(&[
                    "exists", "dir", "size", "sha256", "content_b64", "found", "state",
                    "kind", "pending", "reasons", "path", "start_mode", "display_name",
                    "value", "enabled", "direction", "action", "protocol", "local_port",
                    "major", "minor", "build", "ubr", "hotfixes", "product",
                ][..]),
                prop::sample::select(&[
                    "true", "false", "null", "0", "-1", "4294967296", "1e999", "1.5",
                    "\"\"", "\"x\"", "[]", "[\"a\"]", "[1]", "{}", "\"aGVsbG8=\"",
                    "\"!!notbase64\"", "\"\\ud800\"", "\"\\u0000\"",
                ][..]),
            ),
            0..8,
        ),
        bom in any::<bool>(),
    ) {
        let body: Vec<String> = pairs.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        let text = format!("{}{{{}}}\r\n", if bom { "\u{feff}" } else { "" }, body.join(","));
        for (name, _, r) in all(&out(text.as_bytes(), b"", 0)) {
            if let Err(m) = check_bounded(&name, &r) {
                prop_assert!(false, "{}", m);
            }
        }
    }
}

#[test]
fn garbage_text_is_a_clear_error() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", b"".to_vec()),
        ("blank", b"\n\r\n  \n".to_vec()),
        ("words", b"garbage".to_vec()),
        (
            "motd",
            b"Welcome to Ubuntu 22.04 LTS\nLast login: today\n".to_vec(),
        ),
        (
            "html",
            b"<html><body>502 Bad Gateway</body></html>".to_vec(),
        ),
        ("bom only", "\u{feff}".as_bytes().to_vec()),
        ("json array", b"[]".to_vec()),
        ("json null", b"null".to_vec()),
        ("json string", b"\"exists\"".to_vec()),
        ("deep arrays", "[".repeat(100_000).into_bytes()),
        ("deep objects", "{\"a\":".repeat(100_000).into_bytes()),
        (
            "two documents",
            b"{\"exists\":false}{\"exists\":true}".to_vec(),
        ),
        ("ansi", b"\x1b[31mtype=file\x1b[0m\n".to_vec()),
    ];
    let mut failures = Vec::new();
    for (what, stdout) in &cases {
        for (name, family, r) in all(&out(stdout, b"", 0)) {
            if let Err(m) = check_bounded(&name, &r) {
                failures.push(format!("{what}: {m}"));
            }
            // Windows facts print exactly one JSON object; none of these is one.
            if family == Family::Windows && r.is_ok() {
                failures.push(format!("{what}: {name} accepted it"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Every Linux fact reads `key=value` lines (or a first line it names): words are garbage.
    for (name, family, r) in all(&out(b"garbage", b"", 0)) {
        if family != Family::Windows {
            let e = r.expect_err(&name);
            assert!(matches!(e, FactError::Parse(_)), "{name}: {e:?}");
        }
    }
}

#[test]
fn output_that_is_not_utf8_is_named_as_such() {
    for stdout in [
        &b"\xff\xfe{\x00\"\x00e\x00"[..], // UTF-16 from a mis-set console
        &b"type=file\nstat=644:0:r\xe9:0:root:1\n"[..], // Latin-1 user name
        &b"\xc3\x28"[..],
        &b"{\"value\":\"\xed\xa0\x80\"}"[..], // a surrogate encoded as UTF-8
    ] {
        for (name, _, r) in all(&out(stdout, b"", 0)) {
            assert_eq!(r, Err(FactError::NotUtf8), "{name} on {stdout:?}");
        }
    }
}

#[test]
fn a_failed_fact_command_reports_its_exit_code_and_stderr() {
    for (name, _, r) in all(&out(b"", b"Access is denied.\r\n", 5)) {
        let e = r.expect_err(&name).to_string();
        assert!(
            e.contains('5') && e.contains("Access is denied"),
            "{name}: {e}"
        );
    }
}

/// Peak resident set size of this process so far (VmHWM), in bytes.
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

#[test]
fn huge_garbage_is_a_bounded_error() {
    // 16 MiB in one line, as from `cat` of a binary file or a runaway loop.
    let one_line = vec![b'A'; 16 << 20];
    let many_lines: Vec<u8> = b"not a key value line\n".repeat((16 << 20) / 21);
    let huge_stderr = vec![b'E'; 16 << 20];
    let mut failures = Vec::new();
    for (what, o) in [
        ("one 16 MiB line", out(&one_line, b"", 0)),
        ("800k lines", out(&many_lines, b"", 0)),
        (
            "16 MiB of stderr from a failed command",
            out(b"", &huge_stderr, 1),
        ),
    ] {
        for sample in parsers() {
            let name = &sample.kind;
            let t0 = Instant::now();
            let r = sample.parse(&o);
            if r.is_ok() {
                failures.push(format!("{what}: {name} accepted it"));
            }
            if let Err(m) = check_bounded(name, &r) {
                failures.push(format!("{what}: {m}"));
            }
            if t0.elapsed() > Duration::from_secs(10) {
                failures.push(format!("{what}: {name} took {:?}", t0.elapsed()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Run the test `name` of this binary alone in a child process (so that peak memory is its
/// own) and fail if it fails. In the child, `KWIN_ALONE` names the test and this returns
/// `true`: the caller then does the measured work.
fn alone(name: &str) -> bool {
    if std::env::var("KWIN_ALONE").as_deref() == Ok(name) {
        return true;
    }
    let exe = std::env::current_exe().expect("test binary");
    let out = std::process::Command::new(exe)
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env("KWIN_ALONE", name)
        .output()
        .expect("run the test binary");
    assert!(
        out.status.success(),
        "{name} in its own process failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    false
}

#[test]
fn huge_valid_looking_output_parses_in_bounded_memory() {
    if !alone("huge_valid_looking_output_parses_in_bounded_memory") {
        return;
    }
    // A 48 MiB base64 `content=` line: the file parser decodes it (36 MiB); peak memory must
    // stay within a small multiple of the input.
    let mut text = b"type=file\nstat=644:0:root:0:root:37748736\ncontent=".to_vec();
    text.extend_from_slice(&b"QUFB".repeat(12 << 20));
    text.push(b'\n');
    let o = out(&text, b"", 0);
    drop(text);
    let before = peak_rss();
    let r = lx::file::FileFact::content("/x").parse(&o);
    let grown = peak_rss().saturating_sub(before);
    match r {
        Ok(lx::file::PathState::File(f)) => {
            assert_eq!(f.content.map(|c| c.len()), Some(36 << 20));
        }
        other => panic!("{:?}", other.map(|s| s.kind().to_string())),
    }
    assert!(
        grown < 3 * o.stdout.len() as u64,
        "peak memory grew by {} MiB for {} MiB of output",
        grown >> 20,
        o.stdout.len() >> 20
    );
}

// ---- the probe's batch splitter ----

const NONCE: &str = "0123456789abcdef0123456789abcdef";

fn queries(n: usize) -> Vec<FactQuery> {
    (0..n)
        .map(|i| FactQuery {
            key: format!("k{i}"),
            command: "true".into(),
            path: None,
        })
        .collect()
}

fn section(i: usize, body: &str, code: &str) -> String {
    format!("\n@@kwin:{NONCE}:begin:{i}\n{body}\n@@kwin:{NONCE}:end:{i}:{code}\n")
}

fn batch(stdout: &[u8], exit: i32) -> Output {
    Output {
        stdout: stdout.to_vec(),
        stderr: Vec::new(),
        exit,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn batch_splitter_never_panics(
        pieces in prop::collection::vec(
            prop_oneof![
                (0usize..4, "[ -~\n]{0,20}", prop::sample::select(&["0", "1", "x", "", "-5", "99999999999"][..]))
                    .prop_map(|(i, b, c)| section(i, &b, c)),
                (0usize..4).prop_map(|i| format!("\n@@kwin:{NONCE}:begin:{i}\n")),
                (0usize..4).prop_map(|i| format!("\n@@kwin:{NONCE}:end:{i}:")),
                (0usize..4).prop_map(|i| format!("\n@@kwin:ffff:begin:{i}\n")),
                prop::collection::vec(any::<u8>(), 0..40)
                    .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
                Just("\r\n".to_string()),
            ],
            0..10,
        ),
        exit in any::<i32>(),
    ) {
        let stdout = pieces.concat();
        let r = parse_batch(&queries(4), &batch(stdout.as_bytes(), exit), NONCE);
        if let Err(e) = r {
            prop_assert!(e.to_string().len() <= MAX_MESSAGE, "{}", e);
        }
    }
}

/// Path queries (answered together by kind), for the path-probe parser.
fn path_queries() -> Vec<FactQuery> {
    use kwin_modules::linux::facts::file::FileFact;
    let facts = [
        FileFact::meta("/a"),
        FileFact::hash("/b"),
        FileFact::content("/c"),
        FileFact::content_unless("/d", "0".repeat(64)),
    ];
    facts
        .iter()
        .map(|f| FactQuery::of(f, kwin_engine::transport::Shell::Posix))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// The path probe's records in any order, number and shape: an error or answers that
    /// every parser takes without panicking.
    #[test]
    fn path_probe_parser_never_panics(
        pieces in prop::collection::vec(
            prop_oneof![
                (0usize..5, prop::sample::select(&["dir", "file", "other", "dangling", "absent", "fifo", ""][..]))
                    .prop_map(|(j, k)| format!("\n@@kwin:{NONCE}:t:{j}:{k}")),
                (0usize..5, "[ -~\n]{0,20}").prop_map(|(j, b)| format!("\n@@kwin:{NONCE}:l:{j}\n{b}")),
                "[0-7]{3}:[0-9]{1,3}:[a-z]{0,4}:[0-9]:[a-z]{0,4}:[0-9]{1,4}"
                    .prop_map(|l| format!("\n@@kwin:{NONCE}:S\n{l}\n{l}")),
                ("-?[0-9]{1,2}", "[ -~\n]{0,20}").prop_map(|(c, b)| format!("\n@@kwin:{NONCE}:s:{c}\n{b}")),
                "[0-9a-f]{60,66}".prop_map(|h| format!("\n@@kwin:{NONCE}:H\n{h}  /b\n\\{h}  /c")),
                ("-?[0-9]{1,2}", "[ -~\n]{0,70}").prop_map(|(c, b)| format!("\n@@kwin:{NONCE}:h:{c}\n{b}")),
                (0usize..5, "[ -~\n]{0,20}", "-?[0-9x]{0,2}")
                    .prop_map(|(j, b, c)| format!("\n@@kwin:{NONCE}:c:{j}\n{b}\n@@kwin:{NONCE}:r:{c}")),
                prop::collection::vec(any::<u8>(), 0..40)
                    .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
            ],
            0..12,
        ),
    ) {
        let stdout = format!(
            "\n@@kwin:{NONCE}:paths\n{}\n@@kwin:{NONCE}:paths:end\n",
            pieces.concat()
        );
        let qs = path_queries();
        match parse_batch(&qs, &batch(stdout.as_bytes(), 0), NONCE) {
            Ok(facts) => {
                for q in &qs {
                    if let Some(a) = facts.raw(&q.key) {
                        let _ = kwin_modules::linux::facts::file::parse_path_state(
                            &String::from_utf8_lossy(&a.stdout),
                        );
                    }
                }
            }
            Err(e) => prop_assert!(e.to_string().len() <= MAX_MESSAGE, "{}", e),
        }
    }
}

#[test]
fn path_probe_answers_in_the_file_fact_format() {
    use kwin_modules::linux::facts::file::{FileFact, PathState};
    let qs = path_queries();
    let h = "ab".repeat(32);
    let stdout = format!(
        "\n@@kwin:{NONCE}:paths\n\n@@kwin:{NONCE}:t:0:dir\n@@kwin:{NONCE}:t:1:file\n@@kwin:{NONCE}:t:2:file\n@@kwin:{NONCE}:t:3:absent\n@@kwin:{NONCE}:S\n755:0:root:0:root:4096\n644:0:root:0:root:2\n600:0:root:0:root:3\n@@kwin:{NONCE}:H\n{h}  /b\n{h}  /c\n@@kwin:{NONCE}:c:2\nhi\n\n@@kwin:{NONCE}:r:0\n@@kwin:{NONCE}:paths:end\n"
    );
    let facts = parse_batch(&qs, &batch(stdout.as_bytes(), 0), NONCE).expect("parse");
    assert!(matches!(
        facts.get(&FileFact::meta("/a")),
        Ok(PathState::Dir { .. })
    ));
    let Ok(PathState::File(c)) = facts.get(&FileFact::content("/c")) else {
        panic!("not a file")
    };
    assert_eq!(c.text(), Some("hi\n"));
    assert_eq!(c.sha256.as_deref(), Some(h.as_str()));
    assert_eq!(
        facts.get(&FileFact::content_unless("/d", "0".repeat(64))),
        Ok(PathState::Absent)
    );
}

#[test]
fn batch_sections_are_found_only_with_this_run_s_nonce() {
    let qs = queries(2);
    let forged = format!(
        "\n@@kwin:ffffffffffffffffffffffffffffffff:begin:0\nforged\n@@kwin:ffffffffffffffffffffffffffffffff:end:0:0\n{}{}",
        section(0, "real", "0"),
        section(1, "", "3")
    );
    let facts = parse_batch(&qs, &batch(forged.as_bytes(), 0), NONCE).expect("parse");
    assert_eq!(
        facts.raw("k0").map(|f| f.stdout.as_slice()),
        Some(&b"real"[..])
    );
    assert_eq!(facts.raw("k1").map(|f| f.exit), Some(3));
}

#[test]
fn batch_cut_short_names_the_query_and_the_exit_code() {
    let qs = queries(3);
    let cut = format!("{}\n@@kwin:{NONCE}:begin:1\npartial", section(0, "a", "0"));
    let e = parse_batch(&qs, &batch(cut.as_bytes(), 255), NONCE)
        .expect_err("a cut batch")
        .to_string();
    assert!(e.contains("`k1`") && e.contains("255"), "{e}");
    let bad = section(0, "a", "zero");
    let e = parse_batch(&queries(1), &batch(bad.as_bytes(), 0), NONCE)
        .expect_err("bad exit marker")
        .to_string();
    assert!(e.contains("exit code marker") && e.contains("`k0`"), "{e}");
}

#[test]
fn batch_with_huge_garbage_is_bounded_in_time() {
    // 64 MiB of garbage (the most a transport keeps) and 100 queries: the splitter gives up
    // with an error, in bounded time, with a bounded message.
    let stdout = b"@@kwin:".repeat((64 << 20) / 7);
    let t0 = Instant::now();
    let e = parse_batch(&queries(100), &batch(&stdout, 0), NONCE).expect_err("garbage");
    let took = t0.elapsed();
    assert!(
        e.to_string().len() <= MAX_MESSAGE,
        "{} bytes",
        e.to_string().len()
    );
    assert!(took < Duration::from_secs(20), "took {took:?}");
    // And 100 well-formed sections of 512 KiB each (50 MiB) split correctly.
    let body = "x".repeat(512 * 1024);
    let ok: String = (0..100).map(|i| section(i, &body, "0")).collect();
    let t0 = Instant::now();
    let facts = parse_batch(&queries(100), &batch(ok.as_bytes(), 0), NONCE).expect("parse");
    assert_eq!(facts.len(), 100);
    assert_eq!(facts.raw("k99").map(|f| f.stdout.len()), Some(body.len()));
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "took {:?}",
        t0.elapsed()
    );
}

/// The tables sample the facts no hand-written list reached: the reboot module's pending
/// files, the Windows command's conditions, and the Kubernetes facts.
#[test]
fn the_tables_sample_every_family() {
    let kinds: Vec<String> = parsers().into_iter().map(|s| s.kind).collect();
    for k in [
        "linux.reboot_pending",
        "win.condition",
        "kube.diff",
        "kube.wait",
        "kube.init",
        "kube.join",
        "file.meta",
        "win.path",
    ] {
        assert!(kinds.iter().any(|x| x == k), "{k} not sampled: {kinds:?}");
    }
}
