//! The operator's tools over a plan's hosts, through the `kwin` binary: host subsets
//! (`--limit`), `kwin exec`, `kwin facts` (docs/operating.md).
//!
//! Tier 1: a `--limit` that names nothing the plan has is an error naming the candidates,
//! before anything connects (the plan's addresses are unroutable). Lab tier (lab 10,
//! `KWIN_LAB_ID=10`, three real sshd hosts): `apply --limit h2` changes only h2 while a
//! host outside the limit is down; the host h2's task depends on is read, not changed, and
//! a change it would need fails the dependent naming the host to include.

use kwin_testkit::{kwin, lab::Lab};
use std::sync::Mutex;

/// The lab these tests use, and only this one.
const LAB_ID: &str = "10";

/// One lab 10 at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Files the plan manages, per host.
const FILES: &[&str] = &[
    "/etc/kwin-limit-mark",
    "/etc/kwin-limit-base",
    "/etc/kwin-limit-dep",
];

/// h1..h3, a file on each; `base` on h1; `dep` on h2 after h1's `base` (a task of a chosen
/// host that needs another host's task).
fn limit_plan(inventory: &str) -> String {
    format!(
        r#"inventory = {inventory:?}

[settings]
step_timeout = 60
retries = 0
retry_delay = 1

[defaults.linux]
connect_timeout = 2

[[hosts]]
name = "h1"
os = "linux"

[[hosts]]
name = "h2"
os = "linux"

[[hosts]]
name = "h3"
os = "linux"

[[tasks]]
name = "mark"
module = "file"
params = {{ path = "/etc/kwin-limit-mark", content = "kwin\n" }}

[[tasks]]
name = "base"
module = "file"
on = {{ hosts = ["h1"] }}
params = {{ path = "/etc/kwin-limit-base", content = "base\n" }}

[[tasks]]
name = "dep"
module = "file"
on = {{ hosts = ["h2"] }}
after = ["h1:base"]
params = {{ path = "/etc/kwin-limit-dep", content = "dep\n" }}
"#
    )
}

#[test]
fn a_limit_that_names_nothing_is_refused_before_connecting() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut text = limit_plan("unused.toml").replace("inventory = \"unused.toml\"\n", "");
    for h in ["h1", "h2", "h3"] {
        let n = &h[1..];
        text = text.replace(
            &format!("name = \"{h}\"\n"),
            &format!("name = \"{h}\"\naddress = \"10.254.254.{n}\"\n"),
        );
    }
    std::fs::write(dir.path().join("plan.toml"), text).expect("plan");
    let d = dir.path();
    for (args, says, candidates) in [
        (
            vec!["--limit", "h4"],
            "the plan has no host `h4`",
            "h1, h2, h3",
        ),
        (
            vec!["--limit", "role:worker"],
            "no host of the plan has this role",
            "h1, h2, h3",
        ),
        (
            vec!["--limit", "h1", "--limit", "os:mac"],
            "no OS `mac`",
            "linux, windows",
        ),
    ] {
        for cmd in ["plan", "apply", "verify", "reset"] {
            let mut a = vec![cmd, "plan.toml", "--output", "json"];
            a.extend(&args);
            if cmd == "reset" {
                a.push("--yes");
            }
            let k = kwin!(d, &a);
            assert_eq!(k.code, 1, "{k}");
            assert!(k.stdout.contains(says), "{k}");
            assert!(k.stdout.contains("\"code\":\"limit\""), "{k}");
            assert!(k.stdout.contains(candidates), "candidates: {k}");
            assert!(
                !k.events().iter().any(|e| e["event"] == "run_started"),
                "a run started: {k}"
            );
        }
    }
    // The closest name is suggested.
    let k = kwin!(d, &["plan", "plan.toml", "--limit", "role:wroker"]);
    assert!(k.stderr.contains("did you mean `worker`?"), "{k}");
}

kwin_testkit::lab_test! {
#[test]
fn apply_limit_changes_only_the_chosen_hosts() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let lab = Lab::up(LAB_ID, 3);
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    std::fs::write(
        d.join("plan.toml"),
        limit_plan(&lab.inventory.display().to_string()),
    )
    .expect("plan");
    let state = |h: &str| lab.hashes(h, FILES);
    let (h1, h3) = (state("h1"), state("h3"));

    // h2's `dep` needs h1's `base`, which would change h1: refused, naming h1; h1 and h3
    // unchanged, h3 not even connected to.
    let k = kwin!(d, &["apply", "plan.toml", "--limit", "h2", "--output", "json"]);
    assert_eq!(k.code, 1, "{k}");
    let base = k.task("h1", "base");
    assert_eq!(base["status"], "failed", "{k}");
    assert!(
        base["message"].as_str().is_some_and(|m| m.contains("h1 is read only under --limit")),
        "{k}"
    );
    let dep = k.task("h2", "dep");
    assert_eq!(dep["status"], "failed", "{k}");
    assert!(
        dep["message"].as_str().is_some_and(|m| m.contains("h1/base would change h1")
            && m.contains("include it: --limit h2,h1")),
        "{k}"
    );
    assert_eq!(k.task("h2", "mark")["status"], "changed", "{k}");
    assert!(
        !k.events().iter().any(|e| e["host"] == "h3"),
        "h3 is outside the limit: {k}"
    );
    assert!(
        !k.events().iter().any(|e| e["host"] == "h1" && e["task"] == "mark"),
        "h1's own file is not part of the run: {k}"
    );
    assert_eq!(state("h1"), h1, "h1 changed");
    assert_eq!(state("h3"), h3, "h3 changed");

    // h1 alone converges; then h3 goes down.
    let k = kwin!(d, &["apply", "plan.toml", "--limit", "h1"]);
    assert_eq!(k.code, 0, "{k}");
    let (h1, h3) = (state("h1"), state("h3"));
    assert!(h1.contains("missing /etc/kwin-limit-dep") && !h1.contains("missing /etc/kwin-limit-base"), "{h1}");
    lab.fault("cut", "h3");

    // Without a limit the down host fails the run ...
    let before_h2 = state("h2");
    let k = kwin!(d, &["plan", "plan.toml", "--output", "json"]);
    assert_eq!(k.code, 1, "h3 is down: {k}");
    assert!(k.host("h3")["error"].is_string(), "{k}");
    // ... with `--limit h2` it is not part of it: h1 read only (base for h2), h2 converges.
    let p = kwin!(d, &["plan", "plan.toml", "--limit", "h2"]);
    assert_eq!(p.code, 0, "{p}");
    assert!(p.stdout.contains("h1: read only (base for h2)"), "{p}");
    let k = kwin!(d, &["apply", "plan.toml", "--limit", "h2"]);
    assert_eq!(k.code, 0, "{k}");
    assert!(k.stdout.contains("h1: read only (base for h2)"), "{k}");
    assert!(k.last_line().starts_with("apply: 2 hosts"), "{k}");
    let j = kwin!(d, &["apply", "plan.toml", "--limit", "h2", "--output", "json"]);
    assert_eq!(j.code, 0, "{j}");
    assert_eq!(j.summary()["changed"], 0, "{j}");
    let ro: Vec<_> = j.events().into_iter().filter(|e| e["event"] == "host_read_only").collect();
    assert_eq!(ro.len(), 1, "{j}");
    assert_eq!(ro[0]["host"], "h1");
    assert_eq!(ro[0]["for_hosts"], serde_json::json!(["h2"]));
    assert_ne!(state("h2"), before_h2, "h2 did not change");
    assert!(!state("h2").contains("missing /etc/kwin-limit-dep"), "{}", state("h2"));
    assert_eq!(state("h1"), h1, "h1 changed");
    lab.fault("heal", "h3");
    assert_eq!(state("h3"), h3, "h3 changed");
}
}
