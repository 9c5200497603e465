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
        // 1.31 is past its end of life: that warning is the plan's, not the host's.
        .filter(|c| *c != "k8s-end-of-life")
        .collect();
    assert_eq!(codes, ["upgrade-unchecked"], "{}", r.stdout);
    let w = events
        .iter()
        .find(|e| e["event"] == "diagnostic" && e["code"] == "upgrade-unchecked")
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

fn plan_with(dir: &Path, file: &str, tasks: &str) {
    let plan = format!("[settings]\nretries = 0\n\n{}{tasks}", local_host("l1"));
    std::fs::write(dir.join(file), plan).expect("plan");
}

fn lock_of_a_live_run(path: &Path) {
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let lock = serde_json::json!({
        "pid": std::process::id(),
        "hostname": hostname,
        "started": "2026-01-01T00:00:00Z",
        "run_id": "20260101T000000Z-000000",
    });
    std::fs::create_dir_all(path.parent().expect("dir")).expect(".kwin");
    std::fs::write(path, lock.to_string()).expect("lock");
}

/// Two plans in one directory (parallel CI jobs of one checkout): each has its own lock, and
/// `kwin show` tells each plan's own last run. The lock error is said once.
#[test]
fn plans_of_one_directory_keep_their_own_lock_and_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let task = |name: &str| {
        format!(
            "[[tasks]]\nname = \"{name}\"\nmodule = \"file\"\nparams = {{ path = \"{}/{name}\", content = \"hi\\n\" }}\n",
            d.display()
        )
    };
    plan_with(d, "a.toml", &task("from-a"));
    plan_with(d, "b.toml", &task("from-b"));
    // An apply of b.toml holds its lock: a.toml's apply goes on.
    lock_of_a_live_run(&d.join(".kwin/b.toml.lock"));
    let a = run(d, &["apply", "a.toml"]);
    assert_eq!(a.code, 0, "{}{}", a.stdout, a.stderr);
    // b.toml's second apply refuses, and says why once.
    let b = run(d, &["apply", "b.toml"]);
    assert_eq!(b.code, 1, "{}{}", b.stdout, b.stderr);
    let all = format!("{}{}", b.stdout, b.stderr);
    assert_eq!(
        all.matches("another kwin run holds").count(),
        1,
        "the lock error is not said once:\n{all}"
    );
    std::fs::remove_file(d.join(".kwin/b.toml.lock")).expect("unlock");
    let b = run(d, &["plan", "b.toml"]);
    assert_eq!(b.code, 0, "{}{}", b.stdout, b.stderr);
    // Each plan's last run: a.toml's apply, b.toml's plan (the newer run of the directory).
    let shown = run(d, &["show", "a.toml"]);
    assert!(
        shown.stdout.contains("from-a") || shown.stdout.contains("1 changed"),
        "{}",
        shown.stdout
    );
    assert!(
        shown.stdout.contains("apply: 1 host"),
        "show a.toml told another run:\n{}",
        shown.stdout
    );
    let shown = run(d, &["show", "b.toml"]);
    assert!(
        shown.stdout.contains("plan: 1 host"),
        "show b.toml told another run:\n{}",
        shown.stdout
    );
}

/// `--limit failed`: the hosts that did not finish cleanly in the plan's last run, from its
/// journal; none recorded, or none failed, is a `limit` error.
#[test]
fn limit_failed_reruns_the_hosts_the_last_run_did_not_finish() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let port = closed_port();
    let plan = format!(
        "[settings]\nretries = 0\n\n{}{}\
         [[hosts]]\nname = \"gone\"\naddress = \"127.0.0.1\"\nport = {port}\nos = \"linux\"\nuser = \"root\"\n\n\
         [[tasks]]\nname = \"ok\"\nmodule = \"file\"\non = {{ hosts = [\"l1\"] }}\nparams = {{ path = \"{p}/ok\", content = \"x\" }}\n\n\
         [[tasks]]\nname = \"fails\"\nmodule = \"command\"\non = {{ hosts = [\"l2\"] }}\nparams = {{ run = \"test -e {p}/go\", creates = \"{p}/done\" }}\n\n\
         [[tasks]]\nname = \"motd\"\nmodule = \"file\"\non = {{ hosts = [\"gone\"] }}\nparams = {{ path = \"/tmp/never\", content = \"x\" }}\n",
        local_host("l1"),
        local_host("l2"),
        p = d.display()
    );
    std::fs::write(d.join("plan.toml"), plan).expect("plan");
    // No earlier run.
    let r = run(
        d,
        &[
            "apply",
            "plan.toml",
            "--limit",
            "failed",
            "--output",
            "json",
        ],
    );
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stdout.contains("\"code\":\"limit\"") && r.stdout.contains("no earlier run"),
        "{}",
        r.stdout
    );
    // l2's task fails, `gone` cannot be reached, l1 is fine.
    let r = run(d, &["apply", "plan.toml"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    // The rerun chooses l2 and gone only.
    let r = run(
        d,
        &["plan", "plan.toml", "--limit", "failed", "--output", "json"],
    );
    let planned: std::collections::BTreeSet<String> = kwin_testkit::kwin::events(&r.stdout)
        .iter()
        .filter(|e| e["event"] == "host_finished")
        .filter_map(|e| e["host"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        planned.into_iter().collect::<Vec<_>>(),
        ["gone", "l2"],
        "{}",
        r.stdout
    );
    // Fixed (l2 can go on; gone is left out of the plan): every host finishes, and
    // `--limit failed` then has nothing to choose.
    std::fs::write(d.join("go"), "").expect("go");
    let text = std::fs::read_to_string(d.join("plan.toml")).expect("plan");
    let without_gone = text
        .replace(&format!("[[hosts]]\nname = \"gone\"\naddress = \"127.0.0.1\"\nport = {port}\nos = \"linux\"\nuser = \"root\"\n\n"), "")
        .replace("on = { hosts = [\"gone\"] }", "on = { hosts = [\"l1\"] }")
        .replace("path = \"/tmp/never\"", &format!("path = \"{}/motd\"", d.display()));
    std::fs::write(d.join("plan.toml"), without_gone).expect("plan");
    let r = run(d, &["apply", "plan.toml", "--limit", "failed"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let r = run(
        d,
        &[
            "apply",
            "plan.toml",
            "--limit",
            "failed",
            "--output",
            "json",
        ],
    );
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stdout.contains("every host finished cleanly"),
        "{}",
        r.stdout
    );
}

/// `kwin kubeconfig --address HOST[:PORT]`: an address the API server's certificate does not
/// name (kubeadm's names, `cluster.api_server_sans`) is a warning naming the setting, before
/// anything connects; one it names is not; a malformed one is refused.
#[test]
fn kubeconfig_address_is_checked_against_the_api_server_certificate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let port = closed_port();
    let write = |sans: &str| {
        let plan = format!(
            "[settings]\nretries = 0\n\n[cluster]\nname = \"lab\"\nkubernetes_version = \"1.31.4\"\n{sans}\n\n[cni]\nplugin = \"flannel\"\n\n\
             [[hosts]]\nname = \"cp1\"\naddress = \"127.0.0.1\"\nport = {port}\nnode_ip = \"10.10.1.4\"\nos = \"linux\"\nuser = \"root\"\nrole = \"control-plane\"\n"
        );
        std::fs::write(d.join("plan.toml"), plan).expect("plan");
    };
    let warned = |r: &Run| -> Option<String> {
        kwin_testkit::kwin::events(&r.stdout)
            .iter()
            .find(|e| e["event"] == "diagnostic" && e["code"] == "kubeconfig-address")
            .map(|e| format!("{} {}", e["summary"], e["hint"]))
    };
    let kubeconfig = |address: &str| {
        run(
            d,
            &[
                "kubeconfig",
                "plan.toml",
                "--address",
                address,
                "--output",
                "json",
            ],
        )
    };
    write("");
    let r = kubeconfig("203.0.113.10");
    let w = warned(&r).unwrap_or_else(|| panic!("no warning:\n{}", r.stdout));
    assert!(
        w.contains("203.0.113.10") && w.contains("cluster.api_server_sans"),
        "{w}"
    );
    // kubeadm names the node IP; the public address once it is a SAN of the plan.
    let r = kubeconfig("10.10.1.4:6443");
    assert_eq!(warned(&r), None, "{}", r.stdout);
    write("api_server_sans = [\"203.0.113.10\"]");
    let r = kubeconfig("203.0.113.10");
    assert_eq!(warned(&r), None, "{}", r.stdout);
    // Either way the first control plane is read (here: it cannot be reached).
    assert_eq!(r.code, 1, "{}", r.stdout);
    let r = run(
        d,
        &[
            "kubeconfig",
            "plan.toml",
            "--address",
            "https://203.0.113.10",
        ],
    );
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("--address https://203.0.113.10 is not HOST[:PORT]"),
        "{}",
        r.stderr
    );
}

/// The Windows Server 2022 NodePort warning of a plan with Windows nodes does not recommend
/// flannel's host-gw backend, which kwin refuses with Windows nodes.
#[test]
fn a_windows_plan_is_not_told_to_use_host_gw() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let r = kwin_testkit::kwin!(&root)
        .args([
            "validate",
            "tests/plans/bad/windows-nodeport.toml",
            "--output",
            "json",
        ])
        .env("HOME", root.join("tests/plans/home"))
        .run();
    let events = kwin_testkit::kwin::events(&r.stdout);
    let hint = events
        .iter()
        .find(|e| e["event"] == "diagnostic" && e["code"] == "windows-nodeport")
        .and_then(|e| e["hint"].as_str())
        .unwrap_or_else(|| panic!("no windows-nodeport warning:\n{}", r.stdout))
        .to_string();
    assert!(!hint.contains("use host-gw"), "{hint}");
    assert!(hint.contains("externalTrafficPolicy: Local"), "{hint}");
}

/// `kwin plan` shows the kubeadm configuration the first control plane gets (it holds no
/// secret: the bootstrap token is made later), with `cluster.api_server_sans` as its
/// ClusterConfiguration's `apiServer.certSANs`, instead of hiding it as sensitive.
#[test]
fn plan_shows_the_kubeadm_configuration_with_the_api_server_sans() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let plan = "[cluster]\nname = \"lab\"\nkubernetes_version = \"1.31.4\"\napi_server_sans = [\"203.0.113.10\", \"api.lab.example.com\"]\n\n\
                [cni]\nplugin = \"flannel\"\n\n\
                [[hosts]]\nname = \"cp1\"\nnode_ip = \"10.0.0.1\"\nos = \"linux\"\ntransport = \"local\"\nrole = \"control-plane\"\n";
    std::fs::write(d.join("plan.toml"), plan).expect("plan");
    let r = run(d, &["plan", "plan.toml"]);
    let out = &r.stdout;
    let from = out
        .find("cp1: create kubeadm-config")
        .unwrap_or_else(|| panic!("no kubeadm-config change:\n{out}"));
    let diff: String = out[from..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("    "))
        .map(|l| format!("{}\n", l.trim_start()))
        .collect();
    assert!(!diff.contains("(sensitive)"), "{diff}");
    assert!(
        diff.contains(
            "+apiServer:\n+  certSANs:\n+    - \"203.0.113.10\"\n+    - \"api.lab.example.com\"\n"
        ),
        "{diff}"
    );
    assert!(diff.contains("+kind: ClusterConfiguration"), "{diff}");
}

/// The words Ansible users type get kwin's own, with the values kwin takes: `state =
/// "started"` (and `"restarted"`) of `service` is an unknown value, the values listed and
/// kwin's word named; sysctl's `name` and command's `cmd` point at `key` and `run`.
#[test]
fn ansible_words_are_answered_with_kwins() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    plan_with(
        d,
        "plan.toml",
        "[[tasks]]\nname = \"svc\"\nmodule = \"service\"\nparams = { name = \"ssh\", state = \"started\" }\n\n\
         [[tasks]]\nname = \"again\"\nmodule = \"service\"\nparams = { name = \"ssh\", state = \"restarted\" }\n\n\
         [[tasks]]\nname = \"fwd\"\nmodule = \"sysctl\"\nparams = { name = \"net.ipv4.ip_forward\", value = \"1\" }\n\n\
         [[tasks]]\nname = \"cmd\"\nmodule = \"command\"\nparams = { cmd = \"true\" }\n",
    );
    let r = run(d, &["validate", "plan.toml", "--output", "json"]);
    assert_eq!(r.code, 1, "{r}");
    let diag = |task: &str, what: &str| {
        r.events()
            .into_iter()
            .find(|e| {
                e["event"] == "diagnostic"
                    && e["summary"]
                        .as_str()
                        .is_some_and(|s| s.contains(&format!("task `{task}`")) && s.contains(what))
            })
            .unwrap_or_else(|| panic!("no diagnostic of {task} about {what}:\n{r}"))
    };
    let values = "expected one of \"running\", \"stopped\", \"unchanged\"";
    for (task, value) in [("svc", "started"), ("again", "restarted")] {
        let e = diag(task, "state");
        let summary = e["summary"].as_str().unwrap_or_default();
        let hint = e["hint"].as_str().unwrap_or_default();
        assert!(
            summary.ends_with(&format!("unknown value \"{value}\"")),
            "{e}"
        );
        assert!(hint.contains(values), "{e}");
        assert!(hint.contains("\"running\""), "{e}");
        assert!(!summary.contains("found a string"), "{e}");
    }
    assert!(
        diag("svc", "state")["hint"]
            .as_str()
            .is_some_and(|h| h.contains("\"started\" is Ansible's word: kwin's is \"running\"")),
        "{r}"
    );
    assert!(
        diag("again", "state")["hint"]
            .as_str()
            .is_some_and(|h| h.contains("restart_on")),
        "{r}"
    );
    let hint = |task: &str, what: &str| {
        diag(task, what)["hint"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert!(hint("fwd", "unknown key `name`").contains("`key`"), "{r}");
    assert!(hint("cmd", "unknown key `cmd`").contains("`run`"), "{r}");
    // The person at a terminal reads the same, at the plan line.
    let human = run(d, &["validate", "plan.toml"]);
    assert!(
        human.stderr.contains("unknown value \"started\"\n  hint: \"started\" is Ansible's word: kwin's is \"running\"; expected one of \"running\", \"stopped\", \"unchanged\""),
        "{human}"
    );
}

/// A jump host that cannot be reached is named as the jump host on the way, by its plan
/// name, not taken for the host behind it.
#[test]
fn a_jump_host_that_cannot_be_reached_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let port = closed_port();
    let plan = format!(
        "[settings]\nretries = 0\n\n\
         [[hosts]]\nname = \"bastion\"\naddress = \"127.0.0.1\"\nport = {port}\nos = \"linux\"\nuser = \"root\"\n\n\
         [[hosts]]\nname = \"inner\"\naddress = \"192.0.2.7\"\nos = \"linux\"\nuser = \"root\"\nproxy_jump = \"bastion\"\n\n\
         [[tasks]]\nname = \"motd\"\nmodule = \"file\"\non = {{ hosts = [\"inner\"] }}\nparams = {{ path = \"/tmp/kwin-never\", content = \"hi\\n\" }}\n"
    );
    std::fs::write(d.join("plan.toml"), plan).expect("plan");
    let r = run(d, &["plan", "plan.toml", "--output", "json"]);
    assert_eq!(r.code, 1, "{r}");
    let e = r.host("inner")["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        e.contains(&format!(
            "jump host bastion (127.0.0.1:{port}) on the way to inner (192.0.2.7:22)"
        )),
        "{e}"
    );
    assert!(e.contains("connection refused"), "{e}");
    let human = run(d, &["plan", "plan.toml"]);
    assert!(
        human.stdout.contains(&format!(
            "inner: failed: cannot connect to jump host bastion (127.0.0.1:{port}) on the way to inner (192.0.2.7:22): connection refused"
        )),
        "{human}"
    );
}
