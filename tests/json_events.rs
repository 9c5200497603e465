//! `--output json` is one event stream for every command (docs/json-events.md): through the
//! binary, every line of every command here is an object with `"event"` and `"schema": 1`
//! that validates against `docs/events.schema.json`, and the last line is the one `summary`,
//! whose `exit_code` is the process's. The schema file is what `kwin schema --events`
//! prints (`KWIN_BLESS=1` rewrites it). No lab: local hosts, a closed port, validation.

use kwin_testkit::kwin::Run;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn schema_file() -> PathBuf {
    root().join("docs/events.schema.json")
}

/// Every stdout line of `r` is an event of the schema; exactly one `summary`, the last, with
/// the process's exit code. The events, parsed.
fn check_stream(what: &str, r: &Run) -> Vec<Value> {
    let text = std::fs::read_to_string(schema_file()).expect("docs/events.schema.json");
    let schema: Value = serde_json::from_str(&text).expect("schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let mut events = Vec::new();
    for line in r.stdout.lines() {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {line}\n{r}"));
        assert!(v["event"].is_string(), "{what}: no \"event\": {line}\n{r}");
        assert_eq!(v["schema"], 1, "{what}: no \"schema\": 1: {line}\n{r}");
        let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
        assert!(
            errors.is_empty(),
            "{what}: {line}\ndoes not validate: {errors:?}"
        );
        events.push(v);
    }
    let summaries = events.iter().filter(|e| e["event"] == "summary").count();
    assert_eq!(summaries, 1, "{what}: {summaries} summaries\n{r}");
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(last["event"], "summary", "{what}: the last line\n{r}");
    assert_eq!(last["exit_code"], r.code, "{what}: exit code\n{r}");
    events
}

/// A plan of local hosts in `dir`: `l1` with a file task and a command that fails when
/// `fail`, and with `gone`, an SSH host on a closed port.
fn local_plan(dir: &Path, fail: bool, gone: bool) -> PathBuf {
    let d = dir.display();
    let mut plan = format!(
        r#"[settings]
retries = 1
retry_delay = 0

[[hosts]]
name = "l1"
os = "linux"
transport = "local"

[[tasks]]
name = "motd"
module = "file"
on = {{ hosts = ["l1"] }}
params = {{ path = "{d}/motd", content = "hi\n" }}
"#
    );
    if fail {
        plan.push_str(&format!(
            r#"
[[tasks]]
name = "fails"
module = "command"
on = {{ hosts = ["l1"] }}
params = {{ run = "echo boom >&2; false", creates = "{d}/never" }}
"#
        ));
    }
    if gone {
        plan.push_str(
            r#"
[[hosts]]
name = "gone"
address = "127.0.0.1"
port = 1
os = "linux"
user = "root"
"#,
        );
    }
    let path = dir.join("plan.toml");
    std::fs::write(&path, plan).expect("plan");
    path
}

fn run(dir: &Path, args: &[&str]) -> Run {
    kwin_testkit::kwin!(dir)
        .args(args)
        .env("HOME", root().join("tests/plans/home"))
        .run()
}

fn find<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == kind).collect()
}

/// `docs/events.schema.json` is the schema the binary prints; `KWIN_BLESS=1` rewrites it.
#[test]
fn the_schema_file_is_current() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = run(dir.path(), &["schema", "--events"]);
    assert_eq!(r.code, 0, "{r}");
    let schema: Value = serde_json::from_str(&r.stdout).expect("schema is JSON");
    jsonschema::meta::validate(&schema).expect("a valid JSON Schema");
    if std::env::var_os("KWIN_BLESS").is_some() {
        std::fs::write(schema_file(), &r.stdout).expect("write the schema");
        return;
    }
    let committed = std::fs::read_to_string(schema_file()).unwrap_or_default();
    assert!(
        committed == r.stdout,
        "docs/events.schema.json is not what `kwin schema --events` prints: run `KWIN_BLESS=1 cargo test --test json_events` and commit it"
    );
}

/// validate: a valid plan ends with a summary; an invalid one streams `diagnostic` events
/// (never bare objects) and its summary counts them.
#[test]
fn validate_streams_diagnostics_and_a_summary() {
    let good = run(
        &root(),
        &[
            "validate",
            "--output",
            "json",
            "tests/plans/good/tasks-only.toml",
        ],
    );
    let events = check_stream("validate good", &good);
    assert_eq!(good.code, 0, "{good}");
    assert_eq!(events.len(), 1, "{good}");
    assert_eq!(events[0]["outcome"], "success");
    assert_eq!(events[0]["command"], "validate");

    let bad = run(
        &root(),
        &[
            "validate",
            "--output",
            "json",
            "tests/plans/bad/bad-cidr.toml",
        ],
    );
    let events = check_stream("validate bad", &bad);
    assert_eq!(bad.code, 1, "{bad}");
    let diags = find(&events, "diagnostic");
    assert_eq!(diags.len(), 2, "{bad}");
    assert_eq!(diags[0]["code"], "bad-cidr");
    let s = bad.summary();
    assert_eq!(
        (s["errors"].as_u64(), s["outcome"].as_str()),
        (Some(2), Some("failed"))
    );

    // plan on an invalid plan: the same diagnostics, then the summary.
    let plan = run(
        &root(),
        &["plan", "--output", "json", "tests/plans/bad/bad-cidr.toml"],
    );
    let events = check_stream("plan of an invalid plan", &plan);
    assert_eq!(find(&events, "diagnostic").len(), 2, "{plan}");
}

/// plan, apply --check, apply, apply again, show: every stream validates; plan mode says
/// `would_change`, never `changed`; `--detailed-exitcode` exits 2 with changes.
#[test]
fn plan_and_apply_stream_events_with_one_summary() {
    let dir = tempfile::tempdir().expect("tempdir");
    local_plan(dir.path(), false, false);
    let d = dir.path();

    for args in [
        &[
            "plan",
            "plan.toml",
            "--output",
            "json",
            "--detailed-exitcode",
        ][..],
        &["apply", "plan.toml", "--check", "--output", "json"][..],
    ] {
        let r = run(d, args);
        let events = check_stream(&args.join(" "), &r);
        let t = find(&events, "task_finished");
        assert_eq!(t.len(), 1, "{r}");
        assert_eq!(t[0]["status"], "would_change", "{r}");
        assert!(
            !r.stdout.contains(r#""status":"changed""#),
            "plan mode says changed:\n{r}"
        );
        let s = r.summary();
        assert_eq!(
            (s["would_change"].as_u64(), s["changed"].as_u64()),
            (Some(1), Some(0))
        );
        assert!(!d.join("motd").exists(), "plan changed the host");
    }
    let r = run(
        d,
        &[
            "plan",
            "plan.toml",
            "--output",
            "json",
            "--detailed-exitcode",
        ],
    );
    assert_eq!(
        (r.code, &r.summary()["outcome"]),
        (2, &Value::from("changes_pending"))
    );

    let r = run(d, &["apply", "plan.toml", "--output", "json"]);
    let events = check_stream("apply", &r);
    assert_eq!(r.code, 0, "{r}");
    assert_eq!(find(&events, "task_finished")[0]["status"], "changed");
    let s = r.summary();
    assert_eq!(s["changed"], 1, "{r}");
    // The host logs' folder is in the summary, and exists.
    let logs = s["logs"].as_array().cloned().unwrap_or_default();
    assert_eq!(logs.len(), 1, "{r}");
    assert!(Path::new(logs[0].as_str().unwrap_or(""))
        .join("l1.log")
        .is_file());

    let again = run(d, &["apply", "plan.toml", "--output", "json"]);
    check_stream("apply again", &again);
    assert_eq!(again.summary()["changed"], 0, "{again}");

    let show = run(d, &["show", "plan.toml", "--output", "json"]);
    check_stream("show", &show);
    assert_eq!(show.code, 0, "{show}");
    assert_eq!(show.summary()["ok"], 1, "{show}");

    // `kwin facts`: what the local host is, with the probe's answers, in the schema.
    let facts = run(d, &["facts", "plan.toml", "--output", "json"]);
    let events = check_stream("facts", &facts);
    let h = find(&events, "host_facts");
    assert_eq!(h.len(), 1, "{facts}");
    assert_eq!(h[0]["system"]["os"], "linux", "{facts}");
    assert!(h[0]["system"]["kernel"].is_string(), "{facts}");
    assert!(
        h[0]["facts"].as_object().is_some_and(|f| !f.is_empty()),
        "{facts}"
    );
}

/// Failures before and outside a run still end with the summary: a held lock, a run that
/// reaches no host, kubeconfig of a plan without a cluster, reset refused without a
/// terminal, a usage error.
#[test]
fn failures_end_with_the_summary_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    local_plan(d, true, true);

    // A task fails on l1 and `gone` is not reached: the summary's `failed` is the sum of
    // the hosts' `failed` (tasks), the failed host is counted apart.
    let r = run(d, &["apply", "plan.toml", "--output", "json"]);
    let events = check_stream("apply with failures", &r);
    assert_eq!(r.code, 1, "{r}");
    let per_host: u64 = find(&events, "host_finished")
        .iter()
        .map(|h| h["failed"].as_u64().unwrap_or(0))
        .sum();
    let s = r.summary();
    assert_eq!(s["failed"].as_u64(), Some(per_host), "{r}");
    assert_eq!(
        (s["hosts_failed"].as_u64(), s["hosts_reached"].as_u64()),
        (Some(1), Some(1))
    );
    // The closed port refuses: the host is up and nothing listens, so it is not retried
    // (without settings.wait_for_hosts) and its error says so.
    let retry = find(&events, "connect_retry");
    assert_eq!(retry.len(), 0, "{r}");
    let gone = find(&events, "host_finished")
        .into_iter()
        .find(|h| h["host"] == "gone")
        .expect("gone finished");
    assert!(
        gone["error"]
            .as_str()
            .is_some_and(|e| e.contains("connection refused")),
        "{r}"
    );

    // The lock held by a live process.
    std::fs::create_dir_all(d.join(".kwin")).expect(".kwin");
    let lock = serde_json::json!({
        "pid": std::process::id(),
        "hostname": "here",
        "started": "2025-01-01T00:00:00Z",
        "run_id": "20250101T000000Z-000000",
    });
    std::fs::write(d.join(".kwin/plan.toml.lock"), lock.to_string()).expect("lock");
    let r = run(d, &["apply", "plan.toml", "--output", "json"]);
    check_stream("lock held", &r);
    assert_eq!(r.code, 1, "{r}");
    assert!(
        r.summary()["error"]
            .as_str()
            .is_some_and(|e| e.contains("holds")),
        "{r}"
    );
    std::fs::remove_file(d.join(".kwin/plan.toml.lock")).expect("unlock");

    for (what, args) in [
        (
            "kubeconfig without a cluster",
            &[
                "kubeconfig",
                "--output",
                "json",
                "tests/plans/good/tasks-only.toml",
            ][..],
        ),
        (
            "reset refused",
            &[
                "reset",
                "--output",
                "json",
                "tests/plans/good/docker-linux.toml",
            ][..],
        ),
        (
            "verify without a cluster",
            &[
                "verify",
                "--output",
                "json",
                "tests/plans/good/tasks-only.toml",
            ][..],
        ),
    ] {
        let r = run(&root(), args);
        check_stream(what, &r);
    }
    let refused = run(
        &root(),
        &[
            "reset",
            "--output",
            "json",
            "tests/plans/good/docker-linux.toml",
        ],
    );
    assert_eq!(refused.code, 1, "{refused}");
    assert!(refused.summary()["error"]
        .as_str()
        .is_some_and(|e| e.contains("without confirmation")));

    let usage = run(d, &["plan", "plan.toml", "--output", "json", "--bogus"]);
    check_stream("usage error", &usage);
    assert_eq!(usage.code, 64, "{usage}");
    assert_eq!(usage.summary()["outcome"], "usage_error");
    // The summary says what was wrong, as the human form does.
    assert!(
        usage.summary()["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("unexpected argument '--bogus' found")),
        "{usage}"
    );
}

/// `-v`: every script and its output are events (`script`, `output`), as the host log has
/// them; without `-v` there are none.
#[test]
fn verbose_streams_scripts_and_their_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    local_plan(d, true, false);
    let quiet = run(d, &["apply", "plan.toml", "--output", "json"]);
    assert!(find(&check_stream("quiet", &quiet), "script").is_empty());
    std::fs::remove_file(d.join("motd")).ok();

    let r = run(d, &["apply", "plan.toml", "--output", "json", "-v"]);
    let events = check_stream("verbose", &r);
    let scripts = find(&events, "script");
    assert!(
        scripts.iter().any(|e| e["script"]
            .as_str()
            .is_some_and(|s| s.contains("echo boom"))),
        "{r}"
    );
    assert!(
        find(&events, "output")
            .iter()
            .any(|e| e["stream"] == "stderr"
                && e["text"].as_str().is_some_and(|t| t.contains("boom"))),
        "{r}"
    );
}

/// docs/json-events.md has a row for exactly the events of the schema.
#[test]
fn the_page_lists_every_event_of_the_schema() {
    let text = std::fs::read_to_string(schema_file()).expect("schema");
    let schema: Value = serde_json::from_str(&text).expect("schema is JSON");
    let from_schema: std::collections::BTreeSet<String> = schema["oneOf"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| {
            v["properties"]["event"]["const"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert!(from_schema.len() > 10, "{from_schema:?}");
    let page = std::fs::read_to_string(root().join("docs/json-events.md")).expect("page");
    let events_table = page
        .split("## Events")
        .nth(1)
        .and_then(|t| t.split("\n## ").next())
        .unwrap_or_default();
    let from_page: std::collections::BTreeSet<String> = events_table
        .lines()
        .filter_map(|l| l.strip_prefix("| `")?.split('`').next().map(str::to_string))
        .collect();
    assert_eq!(from_page, from_schema, "docs/json-events.md vs the schema");
}
