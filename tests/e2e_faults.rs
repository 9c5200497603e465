//! End to end: one host with a problem fails with a clear message; the other hosts converge.
//! A wrong pinned host key, a cut network link, a failing command. Needs root.

use kwin_testkit::{kwin, lab::lab};
fn plan(extra_h1: &str, extra_tasks: &str) -> String {
    format!(
        r#"inventory = "../target/lab/hosts.toml"

[settings]
step_timeout = 60
retries = 1
retry_delay = 1

[defaults.linux]
connect_timeout = 2

[[hosts]]
name = "h1"
os = "linux"
{extra_h1}

[[hosts]]
name = "h2"
os = "linux"

[[hosts]]
name = "h3"
os = "linux"

[[tasks]]
name = "motd"
module = "file"
params = {{ path = "/etc/motd", content = "managed by kwin\n" }}

[[tasks]]
name = "marker"
module = "file"
params = {{ path = "/etc/kwin-marker", content = "ok\n" }}
{extra_tasks}
"#
    )
}

kwin_testkit::lab_test! {
#[test]
fn a_broken_host_fails_alone() {
    let lab = lab(3);

    // 1. Host key mismatch on h1 (the plan pins a key the host does not have).
    let dir = lab.plan_dir(&plan(
        "host_key = \"SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"",
        "",
    ));
    let r = kwin!(dir.path(), &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(r.code, 1, "{r}");
    let err = r.host("h1")["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(err.contains("host key mismatch"), "{r}");
    assert!(err.contains("SHA256:AAAAAAAA"), "{r}");
    assert_eq!(r.task("h1", "motd")["status"], "skipped");
    for h in ["h2", "h3"] {
        assert_eq!(r.task(h, "motd")["status"], "changed", "{r}");
        assert!(r.host(h)["error"].is_null());
    }
    assert_eq!(r.summary()["event"], "summary");
    // A failed host is counted apart from failed tasks (its task was skipped).
    assert_eq!(
        (&r.summary()["failed"], &r.summary()["hosts_failed"]),
        (&0.into(), &1.into()),
        "{r}"
    );
    assert_ne!(
        lab.ssh("h1", "cat /etc/motd 2>/dev/null || true"),
        "managed by kwin\n"
    );

    // 2. h2 unreachable (link cut): h2 fails with the transport's message, others converge.
    lab.fault("cut", "h2");
    let dir = lab.plan_dir(&plan("", ""));
    let r = kwin!(dir.path(), &["apply", "plan.toml"]);
    lab.fault("heal", "h2");
    assert_eq!(r.code, 1, "{r}");
    assert!(r.stdout.contains("h2: failed: cannot connect to"), "{r}");
    assert!(r.stdout.contains("h1: changed motd"), "{r}");
    assert!(!r.stdout.contains("h3: failed"), "{r}");
    assert!(
        r.last_line().starts_with("apply: 3 hosts (1 failed), "),
        "the unreachable host counts as one failed host: {r}"
    );

    // 3. A failing command on h3: that task fails with its exit code and stderr, the task
    //    after it on h3 is skipped, the other hosts converge.
    let dir = lab.plan_dir(&plan(
        "",
        r#"
[[tasks]]
name = "broken"
module = "command"
on = { hosts = ["h3"] }
params = { run = "echo 'no such thing' >&2; exit 3", creates = "/etc/never" }

[[tasks]]
name = "after-broken"
module = "file"
on = { hosts = ["h3"] }
after = ["broken"]
params = { path = "/etc/after-broken", content = "x\n" }
"#,
    ));
    let r = kwin!(dir.path(), &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(r.code, 1, "{r}");
    let broken = r.task("h3", "broken");
    assert_eq!(broken["status"], "failed", "{r}");
    let msg = broken["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("exit code 3") && msg.contains("no such thing"),
        "{r}"
    );
    assert_eq!(r.task("h3", "after-broken")["status"], "skipped");
    assert_eq!(r.task("h3", "after-broken")["message"], "h3/broken failed");
    // h1 and h2 converged in the runs before: nothing left to do there.
    for h in ["h1", "h2"] {
        assert_eq!(r.task(h, "marker")["status"], "ok", "{r}");
        assert!(r.host(h)["error"].is_null(), "{r}");
    }
    let s = r.summary();
    assert_eq!(
        (s["failed"].as_u64(), s["skipped"].as_u64()),
        (Some(1), Some(1))
    );

    // 4. Ctrl-C during a slow step: the step finishes, nothing new starts, the summary and the
    //    journal say so, exit 130.
    let dir = lab.plan_dir(&plan(
        "",
        r#"
[[tasks]]
name = "slow"
module = "command"
params = { run = "touch /etc/kwin-slow-started; sleep 2; touch /etc/kwin-slow", creates = "/etc/kwin-slow" }

[[tasks]]
name = "after-slow"
module = "file"
after = ["slow"]
params = { path = "/etc/after-slow", content = "x\n" }
"#,
    ));
    for h in ["h1", "h2", "h3"] {
        lab.ssh(h, "rm -f /etc/kwin-slow-started");
    }
    let live = kwin!(dir.path()).args(["apply", "plan.toml"]).spawn();
    // Ctrl-C once the step's command runs on every host.
    let t0 = std::time::Instant::now();
    for h in ["h1", "h2", "h3"] {
        while lab.ssh(h, "test -e /etc/kwin-slow-started && echo yes || echo no") != "yes\n" {
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(60),
                "the slow step never ran on {h}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    live.interrupt();
    let r = live.finish(std::time::Duration::from_secs(60));
    let stdout = &r.stdout;
    assert_eq!(r.code, 130, "{r}");
    assert!(
        stdout.contains("interrupted: no new tasks were started"),
        "{stdout}"
    );
    assert!(
        stdout.contains("h1: changed slow"),
        "the running step finished: {stdout}"
    );
    assert!(
        stdout.contains("h1: skipped after-slow (interrupted)"),
        "{stdout}"
    );
    assert_eq!(
        lab.ssh("h1", "test -e /etc/after-slow && echo yes || echo no"),
        "no\n"
    );
    let runs: Vec<_> = std::fs::read_dir(dir.path().join(".kwin/runs"))
        .expect("runs")
        .flatten()
        .collect();
    assert_eq!(runs.len(), 1);
    let j: serde_json::Value =
        serde_json::from_slice(&std::fs::read(runs[0].path()).expect("journal")).expect("json");
    assert_eq!(j["interrupted"], true);
}
}
