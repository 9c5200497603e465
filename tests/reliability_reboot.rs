//! Reliability: a host that reboots in the middle of the plan through the `reboot` module
//! comes back and converges, and reboots only once.
//!
//! The host is the lab's WinRM stand-in (real NTLM, encryption and WS-Man) in a mount
//! namespace of its own (`lab/winrm-stand-in/isolated-stand-in.sh`: private /etc, /var/lib,
//! /run): lab Linux hosts share the machine's kernel and are never rebooted. kwin talks to it
//! with `KWIN_WINRM_STAND_IN=1`, so its modules are the POSIX ones; its restart goes through
//! kwin's reboot path for Windows hosts (boot-time query, `shutdown.exe /r`, wait down, wait up
//! with a new boot time, re-probe), which the stand-in simulates: listeners closed, connections
//! reset, shells gone, a new boot time, `/run` emptied and pending feature installs finished
//! (`windows-feature-stand-in boot`). The Windows `reboot` module's PowerShell (pending-reboot
//! registry keys) is covered by modules/tests/windows.rs only.
//!
//! Lab tests (root for the mount namespaces, the stand-in's Python environment): ignored by
//! `cargo test`, failing when run without them.
#![allow(clippy::print_stderr)]

use kwin_testkit::kwin;
use kwin_testkit::kwin::{events, finished, summary, walk};
use kwin_testkit::winrm::{start_stand_in, Options, StandInHost};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

const PASSWORD: &str = "Reboot-Stand-in-Passw0rd!";
const PW_ENV: &str = "KWIN_REBOOT_WINRM_PASSWORD";

/// The isolated stand-in host, down `down_secs` when it restarts.
fn host(down_secs: u32) -> StandInHost {
    start_stand_in(&Options {
        password_env: PW_ENV,
        password: PASSWORD,
        down_secs,
        kubeadm: None,
    })
}

/// ww1 (the stand-in): a task before, the feature install that leaves a reboot pending, the
/// reboot, tasks after it. local1 (this machine): an unrelated task.
fn plan(port: &str, reboot_params: &str, local_marker: &Path) -> String {
    format!(
        r#"
[settings]
allow_reboot = true
step_timeout = 60
retries = 1

[[hosts]]
name = "ww1"
address = "127.0.0.1"
os = "windows"
transport = "winrm"
https = false
port = {port}
user = "Administrator"
password_env = "{PW_ENV}"

[[hosts]]
name = "local1"
os = "linux"
transport = "local"

[[tasks]]
name = "before"
module = "command"
on = {{ hosts = ["ww1"] }}
params = {{ run = "mkdir -p /var/lib/kwin-reboot && echo ran >> /var/lib/kwin-reboot/before", unless = "test -e /var/lib/kwin-reboot/before" }}

[[tasks]]
name = "feature"
module = "command"
on = {{ hosts = ["ww1"] }}
after = ["before"]
params = {{ run = "windows-feature-stand-in install Containers", unless = "windows-feature-stand-in state Containers | grep -Eqx 'Installed|InstallPending'" }}

[[tasks]]
name = "reboot"
module = "reboot"
on = {{ hosts = ["ww1"] }}
after = ["feature"]
params = {{ {reboot_params} }}

[[tasks]]
name = "after"
module = "command"
on = {{ hosts = ["ww1"] }}
after = ["reboot"]
params = {{ run = "windows-feature-stand-in state Containers >> /var/lib/kwin-reboot/after", unless = "grep -qx Installed /var/lib/kwin-reboot/after" }}

[[tasks]]
name = "after-2"
module = "command"
on = {{ hosts = ["ww1"] }}
after = ["after"]
params = {{ run = "echo ran >> /var/lib/kwin-reboot/after-2", unless = "test -e /var/lib/kwin-reboot/after-2" }}

[[tasks]]
name = "unrelated"
module = "command"
on = {{ hosts = ["local1"] }}
params = {{ run = "echo ran >> {m}", unless = "test -e {m}" }}
"#,
        m = local_marker.display(),
    )
}

fn apply(dir: &Path) -> (i32, String, String) {
    let r = kwin!(dir)
        .args(["apply", "plan.toml", "--output", "json"])
        .env("KWIN_WINRM_STAND_IN", "1")
        .env(PW_ENV, PASSWORD)
        .run();
    (r.code, r.stdout, r.stderr)
}

fn counts(stdout: &str) -> (Option<u64>, Option<u64>, Option<u64>) {
    let s = summary(stdout);
    (
        s["ok"].as_u64(),
        s["changed"].as_u64(),
        s["failed"].as_u64(),
    )
}

fn journal_task(dir: &Path, run: usize, host: &str, task: &str) -> Value {
    let mut runs = walk(&dir.join(".kwin/runs"));
    runs.sort();
    let text = std::fs::read_to_string(&runs[run]).expect("journal");
    let j: Value = serde_json::from_str(&text).expect("journal json");
    j["hosts"][host]["tasks"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["task"] == task))
        .cloned()
        .unwrap_or_else(|| panic!("no {host}/{task} in journal {run}: {j}"))
}

kwin_testkit::lab_test! {
#[test]
fn a_host_rebooting_mid_plan_comes_back_converges_and_reboots_once() {
    let mut s = host(2);
    let dir = tempfile::tempdir().expect("tmp");
    let marker = dir.path().join("local1-ran");
    std::fs::write(
        dir.path().join("plan.toml"),
        plan(&s.port, "down_timeout = 30", &marker),
    )
    .expect("plan");
    let boot0 = s.boot_time();

    let (code, out, err) = apply(dir.path());
    assert_eq!(code, 0, "first apply:\n{out}\n{err}");
    assert_eq!(counts(&out), (Some(0), Some(6), Some(0)), "{out}");
    let order: Vec<String> = finished(&out, "ww1").into_iter().map(|(t, _)| t).collect();
    assert_eq!(order, ["before", "feature", "reboot", "after", "after-2"]);
    assert_eq!(s.reboots(), 1, "{:?}", s.server.seen);
    let boot1 = s.boot_time();
    assert!(boot1 > boot0, "boot time {boot1} after {boot0}");
    // The task after the reboot ran after the boot finished the install, once.
    assert_eq!(
        s.host_file("/var/lib/kwin-reboot/after").as_deref(),
        Some("Installed\n")
    );
    assert_eq!(
        s.host_file("/var/lib/kwin-reboot/before").as_deref(),
        Some("ran\n")
    );
    // The events and the journal show the reboot.
    let planned = events(&out)
        .into_iter()
        .find(|e| e["event"] == "task_planned" && e["task"] == "reboot")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(planned["action"], "reboot");
    let jt = journal_task(dir.path(), 0, "ww1", "reboot");
    assert_eq!(
        (jt["planned"].as_str(), jt["status"].as_str()),
        (Some("reboot"), Some("changed")),
        "{jt}"
    );

    for n in 2..=3 {
        let (code, out, err) = apply(dir.path());
        assert_eq!(code, 0, "apply {n}:\n{out}\n{err}");
        assert_eq!(
            counts(&out),
            (Some(6), Some(0), Some(0)),
            "apply {n}:\n{out}"
        );
        let planned = events(&out)
            .into_iter()
            .find(|e| e["event"] == "task_planned" && e["task"] == "reboot")
            .unwrap_or_else(|| panic!("{out}"));
        assert_eq!(planned["change"], false, "{planned}");
    }
    assert_eq!(s.reboots(), 1, "a later apply restarted the host");
    assert_eq!(s.boot_time(), boot1);
}
}

kwin_testkit::lab_test! {
#[test]
fn a_host_back_too_late_fails_its_branch_and_the_next_apply_converges_without_rebooting_again() {
    // The host stays down 12 s; the reboot task waits 3 s for it to come back.
    let mut s = host(12);
    let dir = tempfile::tempdir().expect("tmp");
    let marker = dir.path().join("local1-ran");
    std::fs::write(
        dir.path().join("plan.toml"),
        plan(&s.port, "down_timeout = 30, up_timeout = 3", &marker),
    )
    .expect("plan");

    let (code, out, err) = apply(dir.path());
    assert_eq!(code, 1, "first apply must fail:\n{out}\n{err}");
    let ww1: Vec<(String, String)> = finished(&out, "ww1");
    let status = |t: &str| {
        ww1.iter()
            .find(|(n, _)| n == t)
            .map(|(_, st)| st.clone())
            .unwrap_or_else(|| panic!("no {t} in {ww1:?}\n{out}"))
    };
    assert_eq!(status("before"), "changed");
    assert_eq!(status("feature"), "changed");
    assert_eq!(status("reboot"), "failed");
    assert_eq!(status("after"), "skipped");
    assert_eq!(status("after-2"), "skipped");
    let failed = events(&out)
        .into_iter()
        .find(|e| e["event"] == "task_finished" && e["task"] == "reboot")
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        failed["message"]
            .as_str()
            .is_some_and(|m| m.contains("did not come back within 3s")),
        "{failed}"
    );
    // The unrelated host is not held back.
    assert_eq!(
        finished(&out, "local1"),
        [("unrelated".to_string(), "changed".to_string())]
    );
    let jt = journal_task(dir.path(), 0, "ww1", "reboot");
    assert_eq!(jt["status"], "failed", "{jt}");
    assert_eq!(s.reboots(), 1);

    // The host comes back on its own; the next apply re-probes, finds no reboot pending and
    // finishes the plan without restarting it again.
    s.wait_back(Duration::from_secs(60));
    let boot1 = s.boot_time();
    let (code, out, err) = apply(dir.path());
    assert_eq!(code, 0, "second apply:\n{out}\n{err}");
    assert_eq!(counts(&out), (Some(4), Some(2), Some(0)), "{out}");
    let ww1 = finished(&out, "ww1");
    assert_eq!(
        ww1,
        [
            ("before", "ok"),
            ("feature", "ok"),
            ("reboot", "ok"),
            ("after", "changed"),
            ("after-2", "changed")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string())),
        "{out}"
    );
    assert_eq!(s.reboots(), 1, "the second apply restarted the host");
    assert_eq!(s.boot_time(), boot1);
    assert_eq!(
        s.host_file("/var/lib/kwin-reboot/after").as_deref(),
        Some("Installed\n")
    );
    assert_eq!(
        std::fs::read_to_string(&marker).ok().as_deref(),
        Some("ran\n")
    );

    let (code, out, err) = apply(dir.path());
    assert_eq!(code, 0, "third apply:\n{out}\n{err}");
    assert_eq!(counts(&out), (Some(6), Some(0), Some(0)), "{out}");
}
}
