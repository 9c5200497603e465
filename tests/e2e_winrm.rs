//! End to end over WinRM: `kwin apply` converges Windows hosts reached through the lab's WinRM
//! stand-in host (`lab/winrm-stand-in`: real NTLM with message encryption and real WS-Man
//! shell operations, scripts run by /bin/sh), and the second apply changes nothing.
//!
//! The stand-in cannot run PowerShell, so kwin is started with `KWIN_WINRM_STAND_IN=1`, which
//! makes WinRM hosts speak the POSIX dialect: the Linux `command` module carries the tasks.
//! What this proves: plan loading and validation of Windows hosts, the WinRM transport under
//! the executor (NTLM + encryption over HTTP; Basic over HTTPS with a pinned self-signed
//! certificate), probe batching, change batching and convergence checks through WS-Man,
//! secrets kept out of output. The Windows modules' PowerShell is covered by
//! modules/tests/windows.rs (parsers on Windows-format output, tree-sitter syntax checks).
#![allow(clippy::print_stderr)]

use kwin_testkit::kwin;
use kwin_testkit::kwin::walk;
use kwin_testkit::winrm::TwoListeners;
use std::path::Path;

const PASSWORD: &str = "Stand-in-Passw0rd!";

fn kwin(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let r = kwin!(dir)
        .args(args)
        .env("KWIN_WINRM_STAND_IN", "1")
        .env("KWIN_E2E_WINRM_PASSWORD", PASSWORD)
        .run();
    (r.code, r.stdout, r.stderr)
}

fn summary(stdout: &str) -> serde_json::Value {
    kwin_testkit::kwin::summary(stdout)
}

kwin_testkit::lab_test! {
#[test]
fn windows_hosts_converge_over_winrm_and_the_second_apply_changes_nothing() {
    let s = TwoListeners::start("KWIN_E2E_WINRM_PASSWORD", PASSWORD);
    let dir = tempfile::tempdir().expect("tmp");
    let work = dir.path().join("hostfs");
    std::fs::create_dir_all(&work).expect("mkdir");
    let w = work.display();
    // Both "Windows hosts" are the same stand-in; each task writes under its own directory.
    let plan = s.hosts_toml()
        + &format!(
            r#"
[[tasks]]
name = "prepare"
module = "command"
params = {{ run = "mkdir -p {w}/{{{{ host.name }}}} && echo run >> {w}/{{{{ host.name }}}}/counter && touch {w}/{{{{ host.name }}}}/prepared", unless = "test -e {w}/{{{{ host.name }}}}/prepared" }}

[[tasks]]
name = "marker"
module = "command"
on = {{ hosts = ["ww1"] }}
after = ["prepare"]
params = {{ run = "printf 'managed by kwin' > {w}/ww1/marker", unless = "grep -qx 'managed by kwin' {w}/ww1/marker" }}
"#
        );
    std::fs::write(dir.path().join("plan.toml"), plan).expect("plan");

    let (code, out, err) = kwin(dir.path(), &["validate", "plan.toml"]);
    assert_eq!(code, 0, "validate:\n{out}\n{err}");

    let (code, out, err) = kwin(dir.path(), &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(code, 0, "first apply:\n{out}\n{err}");
    let sum = summary(&out);
    assert_eq!(
        (
            sum["hosts"].as_u64(),
            sum["changed"].as_u64(),
            sum["failed"].as_u64()
        ),
        (Some(2), Some(3), Some(0)),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(work.join("ww1/marker")).expect("marker"),
        "managed by kwin"
    );

    let (code, out, err) = kwin(dir.path(), &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(code, 0, "second apply:\n{out}\n{err}");
    let sum = summary(&out);
    assert_eq!(
        (
            sum["changed"].as_u64(),
            sum["failed"].as_u64(),
            sum["ok"].as_u64()
        ),
        (Some(0), Some(0), Some(3)),
        "{out}"
    );
    // Guarded commands ran exactly once.
    for h in ["ww1", "ww2"] {
        let n = std::fs::read_to_string(work.join(format!("{h}/counter"))).expect("counter");
        assert_eq!(
            n.lines().count(),
            1,
            "{h} ran its command {} times",
            n.lines().count()
        );
    }
    // The password never shows, in output or logs.
    let mut all = out + &err;
    for e in walk(&dir.path().join(".kwin")) {
        all.push_str(&std::fs::read_to_string(e).unwrap_or_default());
    }
    assert!(!all.contains(PASSWORD), "the WinRM password leaked");
}
}

kwin_testkit::lab_test! {
#[test]
fn a_wrong_certificate_pin_is_refused_for_that_host_only() {
    let s = TwoListeners::start("KWIN_E2E_WINRM_PASSWORD", PASSWORD);
    let dir = tempfile::tempdir().expect("tmp");
    let bad_pin = "00".repeat(32);
    let plan = format!(
        r#"
[defaults.windows]
transport = "winrm"
user = "Administrator"
password_env = "KWIN_E2E_WINRM_PASSWORD"

[[hosts]]
name = "good"
address = "127.0.0.1"
os = "windows"
https = false
port = {http}

[[hosts]]
name = "pinned-wrong"
address = "127.0.0.1"
os = "windows"
port = {https}
cert_fingerprint = "{bad_pin}"

[[tasks]]
name = "noop"
module = "command"
params = {{ run = "true", unless = "true" }}
"#,
        http = TwoListeners::port(&s.http),
        https = TwoListeners::port(&s.https),
    );
    std::fs::write(dir.path().join("plan.toml"), plan).expect("plan");
    let (code, out, err) = kwin(dir.path(), &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(code, 1, "{out}\n{err}");
    let events: Vec<serde_json::Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let host = |name: &str| {
        events
            .iter()
            .find(|e| e["event"] == "host_finished" && e["host"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no host_finished for {name}:\n{out}"))
    };
    assert_eq!(host("good")["failed"].as_u64(), Some(0), "{out}");
    let refused = host("pinned-wrong");
    let why = refused["error"].as_str().unwrap_or_default().to_string();
    let actual = s.fingerprint.replace(':', "").to_lowercase();
    assert!(
        why.contains(&bad_pin) && why.contains(&actual),
        "the refusal names both fingerprints: {why}\n{out}\n{err}"
    );
}
}
