//! `-v` shows each step's output as it arrives, through the binary (`kwin apply -v --output
//! json` read line by line as kwin writes it, each line timed on arrival).
//!
//! Lab 11 (`KWIN_LAB_ID=11`, two real sshd hosts) and a local host; the WinRM stand-in for
//! the WinRM transport (it runs what it gets with /bin/sh; nothing about PowerShell is
//! claimed). A task prints `first`, sleeps 3 s, prints `second`: the `output` event with
//! `first` arrives seconds before the one with `second` and before the task ends, on every
//! transport. A secret of the plan printed by a task is masked in the live events; a
//! `sensitive = true` task's output never appears in clear (its script is shown only at its
//! end, in the host log's form).

use kwin_testkit::kwin;
use kwin_testkit::lab::Lab;
use kwin_testkit::winrm::{start_stand_in, Options};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

const LAB_ID: &str = "11";

const PROXY_SECRET: &str = "kwinuser:L1ve-s3cret-77ab";
const PROXY_ENV: &str = "KWIN_TEST_VERBOSE_PROXY";
const HIDDEN: &str = "clear-text-of-a-sensitive-task";
const WINRM_PASSWORD: &str = "Live-Stand-in-Passw0rd!";
const WINRM_PW_ENV: &str = "KWIN_VERBOSE_WINRM_PASSWORD";

/// What the slow task runs: `first`, 3 s, `second`.
const SLOW: &str = "echo first; sleep 3; echo second";

/// `kwin` with `args` in `dir`, its stdout read line by line as it arrives: each JSON event
/// with the time since start at which its line arrived; all the output; the exit code.
fn timed_events(k: kwin_testkit::kwin::Kwin) -> (Vec<(Duration, Value)>, String, i32) {
    let (run, lines) = k.spawn().finish_timed(Duration::from_secs(300));
    let events = lines
        .iter()
        .filter_map(|(at, l)| serde_json::from_str::<Value>(l).ok().map(|v| (*at, v)))
        .collect();
    (events, run.out(), run.code)
}

/// When the first `output` event of `host` whose text has `word` arrived.
fn output_at(events: &[(Duration, Value)], host: &str, word: &str, all: &str) -> Duration {
    events
        .iter()
        .find(|(_, e)| {
            e["event"] == "output"
                && e["host"] == host
                && e["text"].as_str().is_some_and(|t| t.contains(word))
        })
        .map(|(t, _)| *t)
        .unwrap_or_else(|| panic!("{host}: no output event with `{word}`:\n{all}"))
}

/// `first` at least 2 s before `second` and before the task ended.
fn assert_live(events: &[(Duration, Value)], host: &str, task: &str, all: &str) {
    let first = output_at(events, host, "first", all);
    let second = output_at(events, host, "second", all);
    assert!(
        second >= first + Duration::from_secs(2),
        "{host}: `first` at {first:?}, `second` at {second:?}: not shown as it arrived\n{all}"
    );
    let finished = events
        .iter()
        .find(|(_, e)| e["event"] == "task_finished" && e["host"] == host && e["task"] == task)
        .map(|(t, _)| *t)
        .unwrap_or_else(|| panic!("{host}: no task_finished for {task}:\n{all}"));
    assert!(
        finished >= first + Duration::from_secs(2),
        "{host}: `first` at {first:?}, {task} finished at {finished:?}\n{all}"
    );
    // Each line once: live, never again at the end.
    let firsts = events
        .iter()
        .filter(|(_, e)| {
            e["event"] == "output"
                && e["host"] == host
                && e["text"].as_str().is_some_and(|t| t.contains("first"))
        })
        .count();
    assert_eq!(firsts, 1, "{host}: `first` told {firsts} times\n{all}");
}

fn plan(inventory: &str, d: &Path) -> String {
    format!(
        r#"inventory = {inventory:?}

[settings]
step_timeout = 60
retries = 0

[proxy]
http = "http://proxy.invalid:3128"
credentials_env = "{PROXY_ENV}"

[[hosts]]
name = "h1"
os = "linux"

[[hosts]]
name = "h2"
os = "linux"

[[hosts]]
name = "l1"
os = "linux"
transport = "local"

[[tasks]]
name = "slow"
module = "command"
on = {{ hosts = ["h1"] }}
params = {{ run = "{SLOW}; touch /root/kwin-verbose-slow", creates = "/root/kwin-verbose-slow" }}

[[tasks]]
name = "leak"
module = "command"
on = {{ hosts = ["h1"] }}
after = ["slow"]
params = {{ run = "cat /root/kwin-verbose-secret; touch /root/kwin-verbose-leak", creates = "/root/kwin-verbose-leak" }}

[[tasks]]
name = "hidden"
module = "command"
on = {{ hosts = ["h2"] }}
sensitive = true
params = {{ run = "echo {HIDDEN}; sleep 1; echo {HIDDEN}; touch /root/kwin-verbose-hidden", creates = "/root/kwin-verbose-hidden" }}

[[tasks]]
name = "slow_local"
module = "command"
on = {{ hosts = ["l1"] }}
params = {{ run = "{SLOW}; touch {d}/local-done", creates = "{d}/local-done" }}
"#,
        d = d.display()
    )
}

kwin_testkit::lab_test! {
#[test]
fn verbose_output_arrives_as_it_is_printed_scrubbed_and_never_a_sensitive_tasks() {
    let lab = Lab::up(LAB_ID, 2);
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    std::fs::write(d.join("plan.toml"), plan(&lab.inventory.display().to_string(), d))
        .expect("plan");
    lab.ssh("h1", &format!("printf '%s\\n' '{PROXY_SECRET}' > /root/kwin-verbose-secret"));

    let (events, all, code) = timed_events(
        kwin!(d)
            .args(["apply", "-v", "--output", "json", "plan.toml"])
            .env(PROXY_ENV, PROXY_SECRET),
    );
    assert_eq!(code, 0, "{all}");
    // SSH and local.
    assert_live(&events, "h1", "slow", &all);
    assert_live(&events, "l1", "slow_local", &all);

    // The secret the task printed: masked in the events told as it arrived.
    assert!(!all.contains(PROXY_SECRET), "the secret in clear:\n{all}");
    assert!(
        events.iter().any(|(_, e)| e["event"] == "output"
            && e["host"] == "h1"
            && e["text"].as_str().is_some_and(|t| t.starts_with("***"))),
        "the secret line is not told masked:\n{all}"
    );

    // The sensitive task: its output only at its end, as the host log has it (hashed).
    assert!(!all.contains(HIDDEN), "a sensitive task's output in clear:\n{all}");
    assert!(
        events.iter().any(|(_, e)| e["event"] == "output"
            && e["host"] == "h2"
            && e["text"]
                .as_str()
                .is_some_and(|t| t.contains("bytes of a sensitive task's output"))),
        "h2's output is not told in the log's form:\n{all}"
    );
    let log = std::fs::read_to_string(d.join(".kwin/logs").join(run_id(&events)).join("h1.log"))
        .expect("h1's log");
    assert!(log.contains("first") && !log.contains(PROXY_SECRET), "{log}");
}

/// The WinRM transport (the stand-in) streams too: `kwin exec -v`.
#[test]
fn verbose_output_over_winrm_arrives_as_it_is_printed() {
    let host = start_stand_in(&Options {
        password_env: WINRM_PW_ENV,
        password: WINRM_PASSWORD,
        down_secs: 1,
        kubeadm: None,
    });
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    std::fs::write(
        d.join("plan.toml"),
        format!(
            r#"[settings]
step_timeout = 30
retries = 0

[[hosts]]
name = "ww1"
address = "127.0.0.1"
os = "windows"
transport = "winrm"
https = false
port = {port}
user = "Administrator"
password_env = "{WINRM_PW_ENV}"
"#,
            port = host.port
        ),
    )
    .expect("plan");
    let line = format!("echo first {WINRM_PASSWORD}; sleep 3; echo second");
    let (events, all, code) = timed_events(
        kwin!(d)
            .args(["exec", "-v", "--output", "json", "plan.toml", "--", &line])
            .env("KWIN_WINRM_STAND_IN", "1")
            .env(WINRM_PW_ENV, WINRM_PASSWORD),
    );
    assert_eq!(code, 0, "{all}");
    let first = output_at(&events, "ww1", "first", &all);
    let second = output_at(&events, "ww1", "second", &all);
    assert!(
        second >= first + Duration::from_secs(2),
        "ww1: `first` at {first:?}, `second` at {second:?}\n{all}"
    );
    assert!(!all.contains(WINRM_PASSWORD), "{all}");
    assert!(all.contains("first ***"), "{all}");
}
}

fn run_id(events: &[(Duration, Value)]) -> String {
    events
        .iter()
        .find_map(|(_, e)| e["run_id"].as_str().map(str::to_string))
        .expect("a run id in the events")
}
