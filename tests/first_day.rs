//! The traps a first-time user and a CI pipeline meet, through the binary, with no lab: local
//! hosts (`transport = "local"`), closed and silent ports on the loopback, plans in a
//! temporary directory. (The plan checks themselves are cases of `tests/validate.rs`:
//! `task-conflict`, `task-inputs-key`, `task-after-host`, `params-every-plan`,
//! `every-problem`, `proxy-jump-address`.)
//!
//! `KWIN_TEST_BIN=<an older kwin>` runs these against that build, to see what they catch.

use kwin_testkit::kwin::Run;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn run(dir: &Path, args: &[&str]) -> Run {
    kwin_testkit::kwin!(dir).args(args).run()
}

fn local_host(name: &str) -> String {
    format!("[[hosts]]\nname = \"{name}\"\nos = \"linux\"\ntransport = \"local\"\n\n")
}

/// `mode = 0o640` (TOML's octal literal, the integer 416) makes a file of mode 0640, as
/// written, and `kwin plan` shows the mode a new file gets.
#[test]
fn a_toml_octal_mode_is_the_mode_it_spells_and_plan_shows_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let target = d.join("motd");
    let plan = format!(
        "{}[[tasks]]\nname = \"motd\"\nmodule = \"file\"\nparams = {{ path = \"{}\", content = \"hi\\n\", mode = 0o640 }}\n",
        local_host("l1"),
        target.display()
    );
    std::fs::write(d.join("plan.toml"), plan).expect("plan");
    let shown = run(d, &["plan", "plan.toml"]);
    assert_eq!(shown.code, 0, "{}{}", shown.stdout, shown.stderr);
    assert!(
        shown.stdout.lines().any(|l| l.trim() == "+ mode 0640"),
        "the plan does not show the new file's mode:\n{}",
        shown.stdout
    );
    let applied = run(d, &["apply", "plan.toml"]);
    assert_eq!(applied.code, 0, "{}{}", applied.stdout, applied.stderr);
    let mode = std::fs::metadata(&target)
        .expect("created")
        .permissions()
        .mode()
        & 0o7777;
    assert_eq!(mode, 0o640, "mode {mode:o}, the plan said 0o640");
    let again = run(d, &["apply", "plan.toml", "--output", "json"]);
    let s = kwin_testkit::kwin::summary(&again.stdout);
    assert_eq!(s["changed"], 0, "{}", again.stdout);
}

/// A TCP port on the loopback that refuses (bound, then closed).
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

fn file_task(dir: &Path, host: &str) -> String {
    format!(
        "[[tasks]]\nname = \"motd-{host}\"\nmodule = \"file\"\non = {{ hosts = [\"{host}\"] }}\nparams = {{ path = \"{}/motd-{host}\", content = \"hi\\n\" }}\n\n",
        dir.display()
    )
}

/// `settings.wait_for_hosts`: a host that refuses is tried again until the wait is over,
/// each attempt told as it happens (human lines and `connect_retry` events with the time
/// waited); without it a refused port fails at once and says so, with the setting to use.
#[test]
fn a_host_still_starting_is_waited_for_and_a_refused_port_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let port = closed_port();
    let host = format!(
        "[[hosts]]\nname = \"booting\"\naddress = \"127.0.0.1\"\nport = {port}\nos = \"linux\"\nuser = \"root\"\n\n"
    );
    let write = |settings: &str| {
        let plan = format!(
            "[settings]\nretries = 3\nretry_delay = 1\n{settings}\n\n{host}{}",
            file_task(d, "booting")
        );
        std::fs::write(d.join("plan.toml"), plan).expect("plan");
    };
    // No wait: refused at once, not after retries, and the message names the setting.
    write("");
    let t = std::time::Instant::now();
    let r = run(d, &["plan", "plan.toml", "--output", "json"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        t.elapsed() < std::time::Duration::from_secs(3),
        "{:?}",
        t.elapsed()
    );
    let events = kwin_testkit::kwin::events(&r.stdout);
    assert!(
        !events.iter().any(|e| e["event"] == "connect_retry"),
        "a refused port was retried like a timeout:\n{}",
        r.stdout
    );
    let error = events
        .iter()
        .find(|e| e["event"] == "host_finished" && e["host"] == "booting")
        .and_then(|e| e["error"].as_str().map(str::to_string))
        .unwrap_or_default();
    assert!(
        error.contains("connection refused") && error.contains("settings.wait_for_hosts"),
        "{error}"
    );
    // A wait of 3 s: tried about every second, each told, then the same error.
    write("wait_for_hosts = \"3s\"");
    let t = std::time::Instant::now();
    let r = run(d, &["plan", "plan.toml", "--output", "json"]);
    let took = t.elapsed();
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        took >= std::time::Duration::from_secs(3) && took < std::time::Duration::from_secs(15),
        "{took:?}"
    );
    let waits: Vec<serde_json::Value> = kwin_testkit::kwin::events(&r.stdout)
        .into_iter()
        .filter(|e| e["event"] == "connect_retry")
        .collect();
    assert!(waits.len() >= 2, "{}", r.stdout);
    for w in &waits {
        assert_eq!(w["wait_ms"], 3000, "{w}");
        assert!(w["waited_ms"].as_u64().is_some_and(|ms| ms < 3000), "{w}");
        assert!(
            w["error"]
                .as_str()
                .is_some_and(|e| e.contains("connection refused")),
            "{w}"
        );
    }
    // The human form shows the wait as it goes.
    let r = run(d, &["plan", "plan.toml"]);
    assert!(
        r.stdout.lines().any(
            |l| l.starts_with("booting: waiting for the host to answer, ") && l.contains(" of 3s ")
        ),
        "{}",
        r.stdout
    );
}

/// A closed port reads the same over SSH and WinRM: "connection refused" in kwin's words,
/// never the OS's `(os error N)`.
#[test]
fn ssh_and_winrm_name_a_refused_port_alike() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let (ssh, winrm) = (closed_port(), closed_port());
    let plan = format!(
        "[settings]\nretries = 0\n\n\
         [[hosts]]\nname = \"l1\"\naddress = \"127.0.0.1\"\nport = {ssh}\nos = \"linux\"\nuser = \"root\"\n\n\
         [[hosts]]\nname = \"w1\"\naddress = \"127.0.0.1\"\nport = {winrm}\nos = \"windows\"\ntransport = \"winrm\"\n\
         https = true\ncert_fingerprint = \"{}\"\nuser = \"admin\"\npassword_env = \"KWIN_TEST_PW\"\n\n\
         [[tasks]]\nname = \"motd\"\nmodule = \"file\"\non = {{ hosts = [\"l1\"] }}\nparams = {{ path = \"{}/motd\", content = \"hi\\n\" }}\n\n\
         [[tasks]]\nname = \"motd-w\"\nmodule = \"file\"\non = {{ hosts = [\"w1\"] }}\nparams = {{ path = 'C:\\motd.txt', content = \"hi\" }}\n",
        "ab".repeat(32),
        d.display()
    );
    std::fs::write(d.join("plan.toml"), plan).expect("plan");
    let r = kwin_testkit::kwin!(d)
        .args(["plan", "plan.toml", "--output", "json"])
        .env("KWIN_TEST_PW", "not-a-real-password")
        .run();
    let events = kwin_testkit::kwin::events(&r.stdout);
    let error = |h: &str| {
        events
            .iter()
            .find(|e| e["event"] == "host_finished" && e["host"] == h)
            .and_then(|e| e["error"].as_str().map(str::to_string))
            .unwrap_or_else(|| panic!("no error for {h}:\n{}", r.stdout))
    };
    let (l1, w1) = (error("l1"), error("w1"));
    let words = "connection refused: the host is up, but nothing listens on that port yet";
    for (h, e) in [("l1", &l1), ("w1", &w1)] {
        assert!(e.contains(words), "{h}: {e}");
        assert!(!e.contains("os error"), "{h}: {e}");
    }
}

/// The first `kwin plan` of a cluster whose first control plane is down: a warning that it
/// cannot be reached (not an upgrade refusal about a cluster that may not exist), and the
/// other hosts are planned; `kwin apply` still changes nothing and says why.
#[test]
fn a_plan_with_the_first_control_plane_down_plans_the_others() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let port = closed_port();
    let plan = format!(
        "[settings]\nretries = 0\n\n\
         [cluster]\nname = \"lab\"\nkubernetes_version = \"1.31.4\"\n\n[cni]\nplugin = \"flannel\"\n\n\
         [[hosts]]\nname = \"cp1\"\naddress = \"127.0.0.1\"\nport = {port}\nnode_ip = \"10.0.0.1\"\nos = \"linux\"\nuser = \"root\"\nrole = \"control-plane\"\n\n\
         [[hosts]]\nname = \"lw1\"\nnode_ip = \"10.0.0.2\"\nos = \"linux\"\ntransport = \"local\"\nrole = \"worker\"\n"
    );
    std::fs::write(d.join("plan.toml"), plan).expect("plan");
    let r = run(d, &["plan", "plan.toml", "--output", "json"]);
    let events = kwin_testkit::kwin::events(&r.stdout);
    let codes: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "diagnostic")
        .filter_map(|e| e["code"].as_str())
        .collect();
    assert_eq!(codes, ["upgrade-unchecked"], "{}", r.stdout);
    let w = events
        .iter()
        .find(|e| e["event"] == "diagnostic")
        .and_then(|e| e["summary"].as_str())
        .unwrap_or_default();
    assert!(
        w.contains("`cp1` cannot be reached") && w.contains("connection refused"),
        "{w}"
    );
    // lw1 is planned: connected and probed, its tasks planned.
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "host_probed" && e["host"] == "lw1"),
        "{}",
        r.stdout
    );
    let lw1 = events
        .iter()
        .find(|e| e["event"] == "host_finished" && e["host"] == "lw1")
        .expect("lw1 finished");
    assert!(lw1["error"].is_null(), "{lw1}");
    // apply refuses before any host changes, and says the host cannot be reached.
    let r = run(d, &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let events = kwin_testkit::kwin::events(&r.stdout);
    let e = events
        .iter()
        .find(|e| e["event"] == "diagnostic" && e["code"] == "upgrade-unreachable")
        .and_then(|e| e["summary"].as_str())
        .unwrap_or_default();
    assert!(e.contains("`cp1` cannot be reached"), "{}", r.stdout);
    assert!(
        !events.iter().any(|e| e["event"] == "task_started"),
        "apply ran tasks: {}",
        r.stdout
    );
}
