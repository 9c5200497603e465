//! The operator's tools over a plan's hosts, through the `kwin` binary: host subsets
//! (`--limit`), `kwin exec`, `kwin facts` (docs/operating.md).
//!
//! Tier 1: a `--limit` that names nothing the plan has is an error naming the candidates,
//! before anything connects (the plan's addresses are unroutable). Lab tier (lab 10,
//! `KWIN_LAB_ID=10`, three real sshd hosts): `apply --limit h2` changes only h2 while a
//! host outside the limit is down; the host h2's task depends on is read, not changed, and
//! a change it would need fails the dependent naming the host to include; `kwin exec` on
//! lab hosts (per-host output, exit status, a plan secret masked, the argv one command line
//! for the remote shell) and over the WinRM stand-in (what kwin sends, output back);
//! `kwin facts --limit h1`.
//!
//! Windows: nothing here runs PowerShell. What `kwin exec` hands a Windows host is checked
//! as data: the transport's run wrapper around the command line parses as PowerShell, passes
//! no `"` to a native program, and carries the line byte for byte (base64 of its UTF-8, run
//! as one script block; `engine/src/transport/winrm/scripts.rs`).

use base64::Engine as _;
use kwin_testkit::scripts::{native_args_with_quotes, ps_clean};
use kwin_testkit::winrm::{start_stand_in, Options};
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
        for cmd in ["plan", "apply", "verify", "reset", "facts", "exec"] {
            let mut a = vec![cmd, "plan.toml", "--output", "json"];
            a.extend(&args);
            match cmd {
                "reset" => a.push("--yes"),
                "exec" => a.extend(["--", "true"]),
                _ => {}
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

/// The plan of the exec and facts test: `limit_plan` with proxy credentials, a secret of
/// the plan's (`KWIN_TEST_EXEC_PROXY`).
fn exec_plan(inventory: &str) -> String {
    limit_plan(inventory).replace(
        "[defaults.linux]",
        "[proxy]\nhttp = \"http://proxy.invalid:3128\"\ncredentials_env = \"KWIN_TEST_EXEC_PROXY\"\n\n[defaults.linux]",
    )
}

const PROXY_SECRET: &str = "kwinuser:Pr0xy-s3cret-9f1c";

kwin_testkit::lab_test! {
#[test]
fn exec_and_facts_over_the_plans_connections() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let lab = Lab::up(LAB_ID, 3);
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    std::fs::write(
        d.join("plan.toml"),
        exec_plan(&lab.inventory.display().to_string()),
    )
    .expect("plan");
    let k = |args: &[&str]| {
        kwin!(d)
            .args(args)
            .env("KWIN_TEST_EXEC_PROXY", PROXY_SECRET)
            .run()
    };
    let before: Vec<String> = ["h1", "h2", "h3"].iter().map(|h| lab.hashes(h, FILES)).collect();

    // The words after `--` are one command line for the host's shell, as is: its
    // expansions and `;` are the remote shell's.
    let line = ["echo", "one  two", "$(echo injected)", ";", "echo", "second"];
    let mut args = vec!["exec", "plan.toml", "--limit", "h1,h2", "--output", "json", "--"];
    args.extend(line);
    let r = k(&args);
    assert_eq!(r.code, 0, "{r}");
    let results: Vec<_> = r.events().into_iter().filter(|e| e["event"] == "exec_result").collect();
    assert_eq!(results.len(), 2, "{r}");
    for e in &results {
        assert!(e["host"] == "h1" || e["host"] == "h2", "{r}");
        assert_eq!(e["exit"], 0, "{r}");
        assert_eq!(e["stdout"], "one two injected\nsecond\n", "{r}");
    }
    assert_eq!(r.summary()["failed"], 0, "{r}");
    // Logged like a run: the command line as sent, in the host log of the run.
    let log = std::fs::read_to_string(d.join(".kwin/logs").join(r.run_id()).join("h1.log"))
        .expect("h1's log");
    assert!(log.contains("echo one  two $(echo injected) ; echo second"), "{log}");
    assert!(!d.join(".kwin/logs").join(r.run_id()).join("h3.log").exists());

    // A non-zero exit fails the command (exit 1), per host, with its status.
    let r = k(&["exec", "plan.toml", "--limit", "h2", "--", "echo", "out;", "echo", "err", ">&2;", "exit", "3"]);
    assert_eq!(r.code, 1, "{r}");
    assert!(r.stdout.contains("=== h2: exit 3 in"), "{r}");
    assert!(r.stdout.contains("out\nerr"), "{r}");

    // A secret of the plan printed by a host is masked, in the output and the logs.
    lab.ssh("h3", &format!("printf '%s\\n' '{PROXY_SECRET}' > /root/kwin-exec-secret"));
    let r = k(&["exec", "plan.toml", "--limit", "h3", "--", "cat", "/root/kwin-exec-secret"]);
    assert_eq!(r.code, 0, "{r}");
    assert!(r.stdout.contains("=== h3: exit 0") && r.stdout.contains("***"), "{r}");
    assert!(!r.out().contains("Pr0xy-s3cret"), "{r}");
    for f in kwin_testkit::kwin::walk(&d.join(".kwin")) {
        let text = std::fs::read(&f).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&text).contains("Pr0xy-s3cret"),
            "{} holds the secret",
            f.display()
        );
    }

    // facts --limit h1: what h1 is, and its probe answers, in ONE script (`-v` shows each
    // script sent); nothing changes.
    let f = k(&["facts", "plan.toml", "--limit", "h1", "--output", "json", "-v"]);
    assert_eq!(f.code, 0, "{f}");
    let facts: Vec<_> = f.events().into_iter().filter(|e| e["event"] == "host_facts").collect();
    assert_eq!(facts.len(), 1, "{f}");
    assert_eq!(facts[0]["host"], "h1");
    let scripts: Vec<_> = f.events().into_iter().filter(|e| e["event"] == "script").collect();
    assert_eq!(scripts.len(), 1, "one probe, nothing else: {f}");
    let keys: Vec<&String> = facts[0]["facts"].as_object().expect("facts").keys().collect();
    assert!(keys.iter().any(|k| k.contains("/etc/kwin-limit-base")), "{keys:?}");
    // What the host is, against what the host itself says over ssh (the oracle).
    let sys = &facts[0]["system"];
    let said = |cmd: &str| lab.ssh("h1", cmd).trim().to_string();
    assert_eq!(sys["os"], "linux", "{sys}");
    assert_eq!(sys["hostname"], "h1", "{sys}");
    assert_eq!(sys["kernel"], said("uname -r").as_str(), "{sys}");
    assert_eq!(sys["arch"], said("uname -m").as_str(), "{sys}");
    assert_eq!(sys["id"], said(". /etc/os-release; echo $ID").as_str(), "{sys}");
    assert_eq!(sys["version"], said(". /etc/os-release; echo $VERSION_ID").as_str(), "{sys}");
    assert_eq!(sys["cpus"].to_string(), said("getconf _NPROCESSORS_ONLN"), "{sys}");
    let mem_kib: u64 = said("sed -n 's/^MemTotal: *\\([0-9]*\\) kB$/\\1/p' /proc/meminfo").parse().expect("MemTotal");
    assert_eq!(sys["memory_bytes"].as_u64(), Some(mem_kib * 1024), "{sys}");
    // Lab hosts mount no cgroups unless started with --nodes (lab/README.md).
    let cgroup = match said("stat -fc %T /sys/fs/cgroup").as_str() {
        "cgroup2fs" => "v2",
        "tmpfs" => "v1",
        "sysfs" => "none",
        other => panic!("/sys/fs/cgroup of h1 is {other}"),
    };
    assert_eq!(sys["cgroup"], cgroup, "{sys}");
    let h1_address = said("ip -o -4 addr show dev eth0 | awk '{print $4}'");
    assert_eq!(
        sys["addresses"],
        serde_json::json!([{ "interface": "eth0", "address": h1_address }]),
        "{sys}"
    );
    assert!(!f.events().iter().any(|e| e["event"] == "task_planned" || e["event"] == "task_finished"), "{f}");
    assert!(!f.events().iter().any(|e| e["host"] == "h2" || e["host"] == "h3"), "{f}");
    let human = k(&["facts", "plan.toml", "--limit", "h1"]);
    assert_eq!(human.code, 0, "{human}");
    for want in [
        "h1:\n".to_string(),
        "  hostname:  h1\n".to_string(),
        format!("  addresses: {h1_address} (eth0)\n"),
        format!("  cgroup:    {cgroup}\n"),
        "answers for the plan's tasks".to_string(),
    ] {
        assert!(human.stdout.contains(&want), "{want:?}:\n{human}");
    }
    // The probe's own keys are not what a person reads first.
    assert!(!human.stdout.contains("/etc/kwin-limit-mark"), "{human}");
    assert!(!human.stdout.contains("h2:"), "{human}");
    let after: Vec<String> = ["h1", "h2", "h3"].iter().map(|h| lab.hashes(h, FILES)).collect();
    assert_eq!(before, after, "exec or facts changed a managed file");
}
}

/// What `kwin exec` sends a Windows host: `powershell.exe -NoProfile -NonInteractive
/// -ExecutionPolicy Bypass -Command -` with the command line inside the transport's run
/// wrapper on stdin — quoted nowhere (base64 of its UTF-8), so the host's PowerShell gets it
/// as the operator wrote it.
#[test]
fn exec_hands_a_windows_host_the_line_as_one_script_block() {
    use kwin_engine::transport::winrm::scripts::{self, Dialect};
    let line =
        r#"Get-HnsNetwork | Where-Object { $_.Name -eq "vxlan0" }; Write-Output 'it''s'; exit 3"#;
    let stdin = String::from_utf8(scripts::run_stdin(Dialect::PowerShell, line)).expect("utf-8");
    ps_clean("exec run wrapper", &stdin).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        native_args_with_quotes(&stdin).is_empty(),
        "{:?}",
        native_args_with_quotes(&stdin)
    );
    assert!(scripts::RUN_ARGS.iter().all(|a| !a.contains('"')));
    assert!(
        !stdin.contains("Get-HnsNetwork"),
        "the line travels encoded: {stdin}"
    );
    let b64 = stdin
        .split("FromBase64String('")
        .nth(1)
        .and_then(|r| r.split('\'').next())
        .expect("the encoded line");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("base64");
    assert_eq!(String::from_utf8(decoded).expect("utf-8"), line);
}

const WINRM_PASSWORD: &str = "Exec-Stand-in-Passw0rd!";
const WINRM_PW_ENV: &str = "KWIN_EXEC_WINRM_PASSWORD";

kwin_testkit::lab_test! {
/// `kwin exec` over WinRM (the stand-in speaks the real protocol and runs what it gets with
/// /bin/sh, `KWIN_WINRM_STAND_IN=1`): the command line reaches the host as given (the host
/// log shows it), its output and exit status come back, the WinRM password it echoes is
/// masked. Nothing about PowerShell is claimed.
#[test]
fn exec_over_winrm_carries_the_line_and_brings_output_back() {
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
    let line = format!("echo 'a  b' {WINRM_PASSWORD}; echo err >&2; exit 4");
    let r = kwin!(d)
        .args(["exec", "plan.toml", "--output", "json", "--", &line])
        .env("KWIN_WINRM_STAND_IN", "1")
        .env(WINRM_PW_ENV, WINRM_PASSWORD)
        .run();
    assert_eq!(r.code, 1, "exit 4 is a failure: {r}");
    let e = r
        .events()
        .into_iter()
        .find(|e| e["event"] == "exec_result")
        .unwrap_or_else(|| panic!("no exec_result: {r}"));
    assert_eq!(e["host"], "ww1");
    assert_eq!(e["exit"], 4, "{r}");
    assert_eq!(e["stdout"], "a  b ***\n", "{r}");
    assert_eq!(e["stderr"], "err\n", "{r}");
    assert!(!r.out().contains(WINRM_PASSWORD), "{r}");
    let log = std::fs::read_to_string(d.join(".kwin/logs").join(r.run_id()).join("ww1.log"))
        .expect("ww1's log");
    assert!(log.contains("echo 'a  b' ***; echo err >&2; exit 4"), "{log}");
    assert!(!log.contains(WINRM_PASSWORD), "{log}");
}
}
