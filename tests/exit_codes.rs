//! The exit codes (docs/exit-codes.md): the page lists exactly the codes in `kwin --help`'s
//! table (which `src/exit.rs` prints from its one table), `--detailed-exitcode`'s help
//! names each of them, and every row is given by the binary: 0, 1, 2, 64 (clap's usage
//! errors among them, never clap's own 2) and 130 (SIGINT during a run).

use kwin_testkit::kwin::Run;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run(dir: &Path, args: &[&str]) -> Run {
    kwin_testkit::kwin!(dir)
        .args(args)
        .env("HOME", root().join("tests/plans/home"))
        .run()
}

/// The codes of the `Exit codes` table at the end of `kwin --help`.
fn help_codes() -> BTreeSet<u8> {
    let r = run(&root(), &["--help"]);
    assert_eq!(r.code, 0, "{r}");
    let table = r
        .stdout
        .split_once("Exit codes")
        .map(|(_, t)| t.to_string())
        .unwrap_or_else(|| panic!("no exit code table in --help:\n{r}"));
    table
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

/// The codes of the table in docs/exit-codes.md (`| N | outcome | when |`).
fn doc_codes() -> BTreeSet<u8> {
    let text = std::fs::read_to_string(root().join("docs/exit-codes.md")).expect("doc");
    text.lines()
        .filter_map(|l| l.strip_prefix('|')?.split('|').next()?.trim().parse().ok())
        .collect()
}

#[test]
fn the_page_the_help_and_the_code_agree() {
    let codes = help_codes();
    assert_eq!(codes, BTreeSet::from([0, 1, 2, 64, 130]));
    assert_eq!(doc_codes(), codes, "docs/exit-codes.md");
    let plan_help = run(&root(), &["plan", "--help"]);
    let text = plan_help.stdout.replace('\n', " ");
    for code in codes {
        assert!(
            text.contains(&format!("{code}:")),
            "`kwin plan --help` does not name exit code {code}:\n{plan_help}"
        );
    }
}

fn local_plan(dir: &Path, slow: bool) {
    let d = dir.display();
    let mut plan = format!(
        r#"[[hosts]]
name = "l1"
os = "linux"
transport = "local"

[[tasks]]
name = "motd"
module = "file"
params = {{ path = "{d}/motd", content = "hi\n" }}
"#
    );
    if slow {
        plan.push_str(&format!(
            r#"
[[tasks]]
name = "slow"
module = "command"
params = {{ run = "touch {d}/slow-started; sleep 2; touch {d}/slow", creates = "{d}/slow" }}

[[tasks]]
name = "after"
module = "command"
after = ["slow"]
params = {{ run = "touch {d}/after", creates = "{d}/after" }}
"#
        ));
    }
    std::fs::write(dir.join("plan.toml"), plan).expect("plan");
}

#[test]
fn every_code_through_the_binary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    local_plan(d, false);
    // 0
    assert_eq!(run(d, &["validate", "plan.toml"]).code, 0);
    assert_eq!(run(d, &["--version"]).code, 0);
    assert_eq!(run(d, &["plan", "plan.toml"]).code, 0);
    // 1
    let bad = run(&root(), &["validate", "tests/plans/bad/bad-cidr.toml"]);
    assert_eq!(bad.code, 1, "{bad}");
    // 2: changes pending, only with --detailed-exitcode
    let r = run(d, &["plan", "plan.toml", "--detailed-exitcode"]);
    assert_eq!(r.code, 2, "{r}");
    assert_eq!(run(d, &["apply", "plan.toml"]).code, 0);
    assert_eq!(
        run(d, &["plan", "plan.toml", "--detailed-exitcode"]).code,
        0
    );
    // 64: every usage error clap or a value parser refuses
    for args in [
        &["plan", "plan.toml", "--bogus"][..],
        &["plan"][..],
        &["nosuchcommand"][..],
        &["doc", "nosuchmodule"][..],
        &["verify", "plan.toml", "--timeout", "soon"][..],
        &[][..],
    ] {
        let r = run(d, args);
        assert_eq!(r.code, 64, "kwin {}: {r}", args.join(" "));
        assert!(!r.stderr.is_empty(), "{r}");
    }
}

/// `kwin apply --output json` in `d`, running, once its task `slow` has started and its
/// command runs on the host (it wrote `slow-started`).
fn apply_until_slow_started(d: &Path) -> kwin_testkit::kwin::Live {
    let started = d.join("slow-started");
    let _ = std::fs::remove_file(&started);
    let mut live = kwin_testkit::kwin!(d)
        .args(["apply", "plan.toml", "--output", "json"])
        .spawn();
    live.wait_for(Duration::from_secs(30), "`slow` started", |e| {
        e["event"] == "task_started" && e["task"] == "slow"
    });
    let t0 = std::time::Instant::now();
    while !started.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "`slow`'s command never ran"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    live
}

/// SIGINT while a step runs: the step finishes, nothing new starts, the summary says
/// `interrupted`, exit 130.
#[test]
fn interrupted_is_130() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    local_plan(d, true);
    let live = apply_until_slow_started(d);
    live.interrupt();
    let r = live.finish(Duration::from_secs(60));
    assert_eq!(r.code, 130, "{r}");
    let last = r.summary();
    assert_eq!(r.events().last(), Some(&last), "{r}");
    assert_eq!(last["outcome"], "interrupted", "{r}");
    assert_eq!(last["exit_code"], 130, "{r}");
    assert!(d.join("slow").exists(), "the running step did not finish");
    assert!(!d.join("after").exists(), "a task started after Ctrl-C");
}

/// A second SIGINT ends kwin at once: the summary is still the last line, with exit 130,
/// and tells what the run did until then (the host reached, the task that had finished),
/// not zeros.
#[test]
fn a_second_interrupt_still_counts_what_ran() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    local_plan(d, false);
    assert_eq!(run(d, &["apply", "plan.toml"]).code, 0);
    local_plan(d, true);
    let live = apply_until_slow_started(d);
    live.interrupt();
    // Two signals, not one: a SIGINT still pending when the next is sent is delivered once,
    // and kwin's answer to the first leaves no trace to wait for.
    std::thread::sleep(Duration::from_millis(300));
    live.interrupt();
    let r = live.finish(Duration::from_secs(60));
    assert_eq!(r.code, 130, "{r}");
    let last = r.summary();
    assert_eq!(r.events().last(), Some(&last), "{r}");
    assert_eq!(last["outcome"], "interrupted", "{r}");
    assert!(
        !d.join("after").exists(),
        "a task started after the first Ctrl-C"
    );
    assert_eq!(
        (&last["hosts"], &last["hosts_reached"]),
        (&serde_json::json!(1), &serde_json::json!(1)),
        "{r}"
    );
    // `motd` was already there: ok before `slow` started.
    assert_eq!(last["ok"], 1, "{r}");
}
