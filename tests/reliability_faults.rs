//! Faults during `kwin apply` against real lab hosts (network namespaces + sshd), each test
//! bounded in wall time: links cut mid-apply, sshd killed mid-step and restarted, packet loss,
//! Ctrl-C, two applies at once and a stale lock.
//!
//! A `command` task with `creates` that appends to a counter file shows whether a guarded
//! command ran twice. Needs root (lab hosts); without root each test says so and passes.
//! The tests of this binary use lab id 3 and take turns.

#![allow(clippy::print_stderr)]

use kwin_testkit::kwin::{Live, Run};
use kwin_testkit::{host::workspace, kwin, lab::Lab};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

static LAB: Mutex<()> = Mutex::new(());
const LAB_ID: &str = "3";

fn lab(n: usize) -> Lab {
    Lab::up(LAB_ID, n)
}

/// `lab/fault.sh OP HOST [ARG]` on this binary's lab.
fn fault(op: &str, host: &str, arg: Option<&str>) {
    let mut c = Command::new("bash");
    c.arg(workspace().join("lab/fault.sh"))
        .env("KWIN_LAB_ID", LAB_ID)
        .args([op, host])
        .current_dir(workspace());
    if let Some(a) = arg {
        c.arg(a);
    }
    let out = c.output().expect("lab/fault.sh");
    assert!(
        out.status.success(),
        "lab/fault.sh {op} {host}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A plan over `hosts` with a slow guarded step (the window for faults) and a guarded
/// counter: `counter` appends one line to /var/tmp/kwin-counter each time it runs.
fn plan(hosts: &[String], settings: &str, slow_secs: u32) -> String {
    let mut p = format!(
        "inventory = \"x\"\n\n[settings]\n{settings}\n\n[defaults.linux]\nconnect_timeout = 3\n"
    );
    for h in hosts {
        p.push_str(&format!("\n[[hosts]]\nname = \"{h}\"\nos = \"linux\"\n"));
    }
    p.push_str(&format!(
        r#"
[[tasks]]
name = "slow"
module = "command"
params = {{ run = "sleep {slow_secs}; touch /var/tmp/kwin-slow", creates = "/var/tmp/kwin-slow" }}

[[tasks]]
name = "counter"
module = "command"
after = ["slow"]
params = {{ run = "echo ran >> /var/tmp/kwin-counter; touch /var/tmp/kwin-counted", creates = "/var/tmp/kwin-counted" }}

[[tasks]]
name = "motd"
module = "file"
after = ["counter"]
params = {{ path = "/etc/motd", content = "converged by kwin\n" }}
"#
    ));
    p
}

fn names(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("h{i}")).collect()
}

/// `kwin apply --output json` in `dir`, running (`finish` waits for it, at most a given
/// time: kwin must never hang).
fn spawn_apply(dir: &std::path::Path) -> Live {
    kwin_testkit::kwin!(dir)
        .args(["apply", "plan.toml", "--output", "json"])
        .spawn()
}

fn counter_lines(lab: &Lab, host: &str) -> usize {
    lab.ssh(host, "cat /var/tmp/kwin-counter 2>/dev/null || true")
        .lines()
        .count()
}

fn host_error(r: &Run, host: &str) -> String {
    // The host's error, or the message of its failed task.
    let h = r.host(host);
    if let Some(e) = h["error"].as_str() {
        return e.to_string();
    }
    r.events()
        .iter()
        .filter(|e| e["event"] == "task_finished" && e["host"] == host && e["status"] == "failed")
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect::<Vec<_>>()
        .join("; ")
}

fn is_connection_failure(msg: &str) -> bool {
    let m = msg.to_lowercase();
    [
        "connection lost",
        "timed out",
        "cannot connect",
        "no answer",
        "connection reset",
    ]
    .iter()
    .any(|w| m.contains(w))
}

kwin_testkit::lab_test! {
#[test]
fn two_of_ten_hosts_cut_mid_apply_fail_within_their_timeout_and_the_rest_converge() {
    let _turn = LAB.lock().unwrap_or_else(|p| p.into_inner());
    let lab = lab(10);
    let hosts = names(10);
    let step_timeout = 15;
    let dir = lab.plan_dir(&plan(
        &hosts,
        &format!("step_timeout = {step_timeout}\nretries = 1\nretry_delay = 1\nparallelism = 10"),
        4,
    ));
    let t0 = Instant::now();
    let child = spawn_apply(dir.path());
    wait_for_slow_step(&["h3", "h7"]);
    fault("cut", "h3", None);
    fault("cut", "h7", None);
    // Bound: the step's timeout, a reconnect attempt (connect_timeout 3 s, x3 grace), retries.
    let r = child.finish(Duration::from_secs(120));
    let took = t0.elapsed();
    fault("heal", "h3", None);
    fault("heal", "h7", None);
    eprintln!("apply with 2 of 10 cut took {took:?}");
    assert_eq!(r.code, 1, "{r}");
    for h in ["h3", "h7"] {
        let err = host_error(&r, h);
        assert!(
            is_connection_failure(&err),
            "{h}: unclear failure `{err}`\n{r}"
        );
        assert_ne!(r.task(h, "motd")["status"], "changed", "{r}");
    }
    for h in hosts.iter().filter(|h| *h != "h3" && *h != "h7") {
        assert!(r.host(h)["error"].is_null(), "{h}: {r}");
        for t in ["slow", "counter", "motd"] {
            assert_eq!(r.task(h, t)["status"], "changed", "{h}/{t}: {r}");
        }
    }
    let s = r.summary();
    assert_eq!(s["event"], "summary", "{r}");
    assert!(s["hosts_failed"].as_u64() >= Some(2), "{r}");
    assert_eq!(s["changed"].as_u64(), Some(8 * 3), "{r}");
    assert!(took < Duration::from_secs(100), "took {took:?}");

    // Healed: the next apply converges everything; the guarded counter never ran twice.
    let r2 = kwin!(dir.path(), &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(r2.code, 0, "{r2}");
    for h in &hosts {
        assert_eq!(
            counter_lines(&lab, h),
            1,
            "{h}: the guarded command ran twice"
        );
        assert_eq!(lab.ssh(h, "cat /etc/motd"), "converged by kwin\n");
    }
    for h in hosts.iter().filter(|h| *h != "h3" && *h != "h7") {
        for t in ["slow", "counter", "motd"] {
            assert_eq!(r2.task(h, t)["status"], "ok", "{h}/{t}: {r2}");
        }
    }
    let r3 = kwin!(dir.path(), &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(
        (r3.code, r3.summary()["changed"].as_u64()),
        (0, Some(0)),
        "{r3}"
    );
}
}

/// PIDs of the processes in host `host`'s network namespace whose command line (words
/// joined by spaces) `pred` accepts.
fn pids_where(host: &str, pred: impl Fn(&str) -> bool) -> Vec<u32> {
    let ns = format!("kwin{LAB_ID}-{host}");
    let out = Command::new("ip")
        .args(["netns", "pids", &ns])
        .output()
        .expect("ip netns pids");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| {
                let words: Vec<String> = c
                    .split(|&b| b == 0)
                    .filter(|w| !w.is_empty())
                    .map(|w| String::from_utf8_lossy(w).into_owned())
                    .collect();
                pred(&words.join(" "))
            })
        })
        .collect()
}

/// PIDs of sshd processes in host `host`'s network namespace (the lab started them).
fn sshd_pids(host: &str) -> Vec<u32> {
    let ns = format!("kwin{LAB_ID}-{host}");
    let out = Command::new("ip")
        .args(["netns", "pids", &ns])
        .output()
        .expect("ip netns pids");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "sshd")
        })
        .collect()
}

/// Wait until the `slow` step runs on each of `hosts`: its `sleep N` is a process there (the
/// lab's own `sleep infinity` is not).
fn wait_for_slow_step(hosts: &[&str]) {
    let slow = |cmd: &str| {
        cmd.strip_prefix("sleep ")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let t0 = Instant::now();
    while let Some(h) = hosts.iter().find(|h| pids_where(h, slow).is_empty()) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the slow step never ran on {h}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

kwin_testkit::lab_test! {
#[test]
fn sshd_killed_mid_step_and_restarted_reconnects_or_fails_clearly() {
    let _turn = LAB.lock().unwrap_or_else(|p| p.into_inner());
    let lab = lab(2);
    let hosts = names(2);
    let dir = lab.plan_dir(&plan(
        &hosts,
        "step_timeout = 30\nretries = 4\nretry_delay = 1",
        4,
    ));
    let t0 = Instant::now();
    let child = spawn_apply(dir.path());
    wait_for_slow_step(&["h1"]);
    // Stop the listener, then end every session of h1 (the step's shell dies with them).
    fault("kill-sshd", "h1", None);
    let sessions = sshd_pids("h1");
    eprintln!("ending h1's sshd sessions {sessions:?}");
    for p in &sessions {
        let _ = Command::new("kill").args(["-9", &p.to_string()]).status();
    }
    // h1 stays without sshd for 2 s: the outage kwin has to ride out.
    std::thread::sleep(Duration::from_millis(2000));
    fault("start-sshd", "h1", None);
    let r = child.finish(Duration::from_secs(120));
    eprintln!("apply with sshd killed took {:?}", t0.elapsed());
    // h2 is untouched by h1's trouble.
    assert!(r.host("h2")["error"].is_null(), "{r}");
    assert_eq!(r.task("h2", "motd")["status"], "changed", "{r}");
    // h1 either reconnected and converged, or failed with a connection error.
    if r.code == 0 {
        assert_eq!(r.task("h1", "motd")["status"], "changed", "{r}");
    } else {
        let err = host_error(&r, "h1");
        assert!(
            is_connection_failure(&err),
            "h1: unclear failure `{err}`\n{r}"
        );
    }
    // Either way the next apply converges, and the counter ran at most once per successful
    // `counter` step (its guard holds after the first).
    let r2 = kwin!(dir.path(), &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(r2.code, 0, "{r2}");
    for h in &hosts {
        assert_eq!(
            counter_lines(&lab, h),
            1,
            "{h}: the guarded command ran twice"
        );
    }
}
}

kwin_testkit::lab_test! {
#[test]
fn twenty_percent_packet_loss_on_three_hosts_converges_or_fails_clearly_without_hanging() {
    let _turn = LAB.lock().unwrap_or_else(|p| p.into_inner());
    let lab = lab(4);
    let hosts = names(4);
    let dir = lab.plan_dir(&plan(
        &hosts,
        "step_timeout = 40\nretries = 3\nretry_delay = 1",
        1,
    ));
    for h in ["h1", "h2", "h3"] {
        fault("loss", h, Some("20"));
    }
    let t0 = Instant::now();
    let child = spawn_apply(dir.path());
    let r = child.finish(Duration::from_secs(300));
    let took = t0.elapsed();
    for h in ["h1", "h2", "h3"] {
        fault("noloss", h, None);
    }
    eprintln!("apply under 20% loss took {took:?}: exit {}", r.code);
    assert!(!r.stderr.contains("panicked"), "{r}");
    assert_eq!(r.summary()["event"], "summary", "{r}");
    for h in &hosts {
        let motd = r.task(h, "motd");
        if motd["status"] != "changed" {
            let err = host_error(&r, h);
            assert!(
                !err.is_empty() || motd["status"] == "skipped",
                "{h}: neither converged nor failed with a reason\n{r}"
            );
            if !err.is_empty() {
                assert!(
                    is_connection_failure(&err),
                    "{h}: unclear failure `{err}`\n{r}"
                );
            }
        }
    }
    assert_eq!(
        r.task("h4", "motd")["status"],
        "changed",
        "the clean host: {r}"
    );
    // Loss gone: everything converges, and no guarded command ran twice.
    let r2 = kwin!(dir.path(), &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(r2.code, 0, "{r2}");
    for h in &hosts {
        assert_eq!(
            counter_lines(&lab, h),
            1,
            "{h}: the guarded command ran twice"
        );
    }
}
}

fn journals(dir: &std::path::Path) -> Vec<serde_json::Value> {
    let mut v: Vec<_> = std::fs::read_dir(dir.join(".kwin/runs"))
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_else(|_| Vec::new());
    v.sort();
    v.iter()
        .filter_map(|p| serde_json::from_slice(&std::fs::read(p).ok()?).ok())
        .collect()
}

kwin_testkit::lab_test! {
#[test]
fn sigint_mid_apply_finishes_running_steps_records_it_and_the_next_apply_converges() {
    let _turn = LAB.lock().unwrap_or_else(|p| p.into_inner());
    let lab = lab(3);
    let hosts = names(3);
    let dir = lab.plan_dir(&plan(
        &hosts,
        "step_timeout = 30\nretries = 1\nretry_delay = 1",
        3,
    ));
    let child = spawn_apply(dir.path());
    wait_for_slow_step(&["h1", "h2", "h3"]);
    child.interrupt();
    let r = child.finish(Duration::from_secs(60));
    assert_eq!(r.code, 130, "{r}");
    assert_ne!(r.code, 0);
    assert_eq!(r.summary()["event"], "summary", "{r}");
    assert!(
        r.events().iter().any(|e| e["event"] == "interrupted"),
        "the output says the run was interrupted: {r}"
    );
    for h in &hosts {
        // The running step finished; nothing after it started.
        assert_eq!(r.task(h, "slow")["status"], "changed", "{h}: {r}");
        assert_eq!(r.task(h, "counter")["status"], "skipped", "{h}: {r}");
        assert_eq!(counter_lines(&lab, h), 0, "{h}: counter ran after Ctrl-C");
    }
    let j = journals(dir.path());
    assert_eq!(j.len(), 1, "one journal");
    assert_eq!(j[0]["interrupted"], true);
    for h in &hosts {
        let tasks = j[0]["hosts"][h]["tasks"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let status = |t: &str| {
            tasks
                .iter()
                .find(|x| x["task"] == t)
                .map(|x| x["status"].clone())
                .unwrap_or_default()
        };
        assert_eq!(status("slow"), "changed", "{h}: journal {}", j[0]);
        assert_eq!(status("counter"), "skipped", "{h}: journal {}", j[0]);
    }
    // The lock was released; the next apply converges.
    assert!(!dir.path().join(".kwin/plan.toml.lock").exists(), "lock left behind");
    let r2 = kwin!(dir.path(), &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(r2.code, 0, "{r2}");
    for h in &hosts {
        assert_eq!(r2.task(h, "slow")["status"], "ok", "{r2}");
        assert_eq!(counter_lines(&lab, h), 1, "{h}");
    }
}
}

kwin_testkit::lab_test! {
#[test]
fn a_second_apply_of_the_same_plan_refuses_naming_the_holder_and_a_stale_lock_is_taken_over() {
    let _turn = LAB.lock().unwrap_or_else(|p| p.into_inner());
    let lab = lab(1);
    let hosts = names(1);
    let dir = lab.plan_dir(&plan(
        &hosts,
        "step_timeout = 30\nretries = 1\nretry_delay = 1",
        4,
    ));
    let first = spawn_apply(dir.path());
    let first_pid = first.pid();
    let lock = dir.path().join(".kwin/plan.toml.lock");
    let t0 = Instant::now();
    while !lock.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the first apply took no lock"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let second = kwin!(dir.path(), &["apply", "plan.toml"]);
    assert_eq!(second.code, 1, "{second}");
    let msg = format!("{}{}", second.stdout, second.stderr);
    assert!(
        msg.contains(&format!("pid {first_pid}")) && msg.contains("holds"),
        "the refusal must name the holder (pid {first_pid}): {second}"
    );
    assert_eq!(
        counter_lines(&lab, "h1"),
        0,
        "the refused apply ran something"
    );
    let r = first.finish(Duration::from_secs(90));
    assert_eq!(r.code, 0, "{r}");
    assert!(!lock.exists());

    // A lock left by a process that no longer exists (pid of a finished child).
    let dead = Command::new("true").spawn().expect("true");
    let dead_pid = dead.id();
    let _ = dead.wait_with_output();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    std::fs::write(
        &lock,
        format!(
            "{{\"pid\":{dead_pid},\"hostname\":\"{}\",\"started\":\"2020-01-01T00:00:00Z\",\"run_id\":\"crashed-run\"}}",
            host.trim()
        ),
    )
    .expect("write stale lock");
    let r = kwin!(dir.path(), &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(r.code, 0, "a stale lock must not block: {r}");
    assert!(
        format!("{}{}", r.stdout, r.stderr).contains("stale lock"),
        "taking over a stale lock is reported: {r}"
    );
    assert!(!lock.exists());
}
}
