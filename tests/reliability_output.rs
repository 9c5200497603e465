//! Remote output that is huge (100 MB), endless, or not UTF-8, through the real transports:
//! `LocalTransport` (a real `/bin/sh`) and `SshTransport` (a real `sshd` started here on
//! 127.0.0.1). A command may print anything; kwin keeps at most `MAX_OUTPUT` bytes of each
//! stream, fails with `OutputTooLarge` past that, keeps memory bounded (peak RSS measured in
//! a process of its own), does not hang, leaves no process behind, and the next command on the
//! same transport works. Bytes that are not UTF-8 come back exactly as sent. Through the
//! binary: a task printing 100 MB fails with a message that says so, and the run goes on.
//!
//! The SSH part needs root, `/usr/sbin/sshd` and `unshare`; without them it says why and passes.

#![allow(clippy::print_stderr)]

use kwin_testkit::host::{alone, peak_rss};
use kwin_testkit::kwin::walk;
use kwin_testkit::sshd::Sshd;

use kwin_engine::transport::local::LocalTransport;
use kwin_engine::transport::{Transport, TransportError, MAX_OUTPUT};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const HUNDRED_MB: u64 = 100_000_000;
const LIMIT: Duration = Duration::from_secs(120);

/// Peak memory may grow by one full buffer per stream plus slack, never by the 100 MB sent.
fn assert_bounded_growth(what: &str, before: u64) {
    let grown = peak_rss().saturating_sub(before);
    let bound = 2 * MAX_OUTPUT as u64 + (48 << 20);
    eprintln!("{what}: peak RSS grew by {} MiB", grown >> 20);
    assert!(
        grown < bound,
        "{what}: peak RSS grew by {} MiB (bound {} MiB)",
        grown >> 20,
        bound >> 20
    );
}

fn too_large(r: &Result<kwin_engine::transport::Output, TransportError>) -> bool {
    matches!(r, Err(TransportError::OutputTooLarge { limit }) if *limit == MAX_OUTPUT)
}

/// Processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        if let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(marker) && !cmd.contains("--exact") {
                v.push(pid);
            }
        }
    }
    v
}

fn wait_gone(marker: &str) -> Vec<u32> {
    let t0 = Instant::now();
    loop {
        let left = processes_with(marker);
        if left.is_empty() || t0.elapsed() > Duration::from_secs(10) {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

// ---------------------------------------------------------------- local transport

#[test]
fn local_100_mb_of_stdout_is_refused_in_bounded_memory() {
    if !alone("local_100_mb_of_stdout_is_refused_in_bounded_memory") {
        return;
    }
    let t = LocalTransport { become_root: false };
    let before = peak_rss();
    let t0 = Instant::now();
    let r = rt().block_on(t.run(&format!("head -c {HUNDRED_MB} /dev/zero\n"), LIMIT));
    assert!(too_large(&r), "{r:?}");
    assert!(t0.elapsed() < LIMIT, "took {:?}", t0.elapsed());
    assert_bounded_growth("local stdout", before);
}

#[test]
fn local_100_mb_of_stderr_is_refused_in_bounded_memory() {
    if !alone("local_100_mb_of_stderr_is_refused_in_bounded_memory") {
        return;
    }
    let t = LocalTransport { become_root: false };
    let before = peak_rss();
    let r = rt().block_on(t.run(&format!("head -c {HUNDRED_MB} /dev/urandom >&2\n"), LIMIT));
    assert!(too_large(&r), "{r:?}");
    assert_bounded_growth("local stderr", before);
}

#[test]
fn local_endless_output_stops_at_the_limit_and_leaves_no_process() {
    let marker = format!("kwin-endless-{}", std::process::id());
    let t = LocalTransport { become_root: false };
    let rt = rt();
    let t0 = Instant::now();
    let r = rt.block_on(t.run(&format!("yes {marker}\n"), LIMIT));
    assert!(too_large(&r), "{r:?}");
    assert!(t0.elapsed() < LIMIT);
    assert_eq!(wait_gone(&marker), Vec::<u32>::new(), "`yes` still runs");
    // Still usable.
    let ok = rt.block_on(t.run("echo fine\n", LIMIT)).expect("next run");
    assert_eq!(ok.stdout, b"fine\n");
}

#[test]
fn local_limit_is_exact() {
    let t = LocalTransport { become_root: false };
    let rt = rt();
    let at = rt
        .block_on(t.run(&format!("head -c {MAX_OUTPUT} /dev/zero\n"), LIMIT))
        .expect("exactly MAX_OUTPUT bytes are kept");
    assert_eq!(at.stdout.len(), MAX_OUTPUT);
    drop(at);
    let over = rt.block_on(t.run(&format!("head -c {} /dev/zero\n", MAX_OUTPUT + 1), LIMIT));
    assert!(too_large(&over), "{over:?}");
}

#[test]
fn local_output_that_is_not_utf8_comes_back_exactly() {
    let t = LocalTransport { become_root: false };
    let script =
        "printf '\\377\\376\\000\\303\\050 \\355\\240\\200 ok'; printf '\\300\\001' >&2; exit 3\n";
    let out = rt().block_on(t.run(script, LIMIT)).expect("run");
    assert_eq!(out.stdout, b"\xff\xfe\x00\xc3\x28 \xed\xa0\x80 ok");
    assert_eq!(out.stderr, b"\xc0\x01");
    assert_eq!(out.exit, 3);
    // What kwin shows of it: lossy text, no panic.
    let shown = kwin_engine::secret::Scrubber::new().scrub_bytes(&out.stdout);
    assert!(shown.ends_with(" ok"), "{shown:?}");
}

#[test]
fn local_output_held_open_by_a_background_process_times_out() {
    // The command exits, but a child it left behind keeps stdout open: the run must end at
    // its timeout, not wait for the child.
    let marker = format!("kwin-lingering-{}", std::process::id());
    let t = LocalTransport { become_root: false };
    let t0 = Instant::now();
    let r = rt().block_on(t.run(
        &format!("sh -c 'sleep 300; : {marker}' &\necho started\n"),
        Duration::from_secs(3),
    ));
    let took = t0.elapsed();
    assert!(
        matches!(r, Err(TransportError::Timeout(_))) || r.is_ok(),
        "{r:?}"
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");
    for pid in processes_with(&marker) {
        let _ = Command::new("kill").arg(pid.to_string()).status();
    }
}

// ---------------------------------------------------------------- ssh transport

kwin_testkit::lab_test! {
#[test]
fn ssh_100_mb_of_stdout_is_refused_in_bounded_memory_and_the_next_run_works() {
    if !alone("ssh_100_mb_of_stdout_is_refused_in_bounded_memory_and_the_next_run_works") {
        return;
    }
    let sshd = Sshd::start();
    let t = sshd.transport("root");
    let rt = rt();
    rt.block_on(t.connect()).expect("connect");
    let before = peak_rss();
    let t0 = Instant::now();
    let r = rt.block_on(t.run(&format!("head -c {HUNDRED_MB} /dev/zero\n"), LIMIT));
    assert!(too_large(&r), "{r:?}");
    assert!(t0.elapsed() < LIMIT, "took {:?}", t0.elapsed());
    assert_bounded_growth("ssh stdout", before);
    // The session was retired; the next run connects afresh and works.
    let ok = rt.block_on(t.run("echo fine\n", LIMIT)).expect("next run");
    assert_eq!(ok.stdout, b"fine\n");
}
}

kwin_testkit::lab_test! {
#[test]
fn ssh_100_mb_file_get_is_refused_in_bounded_memory() {
    if !alone("ssh_100_mb_file_get_is_refused_in_bounded_memory") {
        return;
    }
    let sshd = Sshd::start();
    let big = sshd.path("big.bin");
    let made = Command::new("truncate")
        .args(["-s", &HUNDRED_MB.to_string()])
        .arg(&big)
        .status();
    assert!(
        made.is_ok_and(|s| s.success()),
        "truncate {}",
        big.display()
    );
    let t = sshd.transport("root");
    let rt = rt();
    rt.block_on(t.connect()).expect("connect");
    let before = peak_rss();
    let r = rt.block_on(t.get(&big.display().to_string()));
    assert!(
        matches!(r, Err(TransportError::OutputTooLarge { limit }) if limit == MAX_OUTPUT),
        "{:?}",
        r.map(|b| b.len())
    );
    assert_bounded_growth("ssh get", before);
}
}

kwin_testkit::lab_test! {
#[test]
fn ssh_endless_output_on_both_streams_ends_at_the_limit_and_leaves_no_process() {
    let sshd = Sshd::start();
    let marker = format!("kwin-ssh-endless-{}", std::process::id());
    let t = sshd.transport("root");
    let rt = rt();
    let t0 = Instant::now();
    let r = rt.block_on(t.run(&format!("yes {marker} >&2 &\nyes {marker}\n"), LIMIT));
    assert!(too_large(&r), "{r:?}");
    assert!(t0.elapsed() < LIMIT);
    assert_eq!(
        wait_gone(&marker),
        Vec::<u32>::new(),
        "`yes` still runs on the host"
    );
}
}

kwin_testkit::lab_test! {
#[test]
fn ssh_output_that_is_not_utf8_comes_back_exactly() {
    let sshd = Sshd::start();
    let t = sshd.transport("root");
    let script =
        "printf '\\377\\376\\000\\303\\050 \\355\\240\\200 ok'; printf '\\300\\001' >&2; exit 3\n";
    let out = rt().block_on(t.run(script, LIMIT)).expect("run");
    assert_eq!(out.stdout, b"\xff\xfe\x00\xc3\x28 \xed\xa0\x80 ok");
    assert_eq!(out.stderr, b"\xc0\x01");
    assert_eq!(out.exit, 3);
}
}

// ---------------------------------------------------------------- through the binary

#[test]
fn a_task_printing_100_mb_fails_clearly_and_the_run_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().display().to_string();
    let plan = format!(
        r#"[settings]
step_timeout = 120
retries = 0

[[hosts]]
name = "local1"
os = "linux"
transport = "local"

[[hosts]]
name = "local2"
os = "linux"
transport = "local"

[[tasks]]
name = "flood"
module = "command"
on = {{ hosts = ["local1"] }}
params = {{ run = "head -c {HUNDRED_MB} /dev/zero; touch {d}/flooded", creates = "{d}/flooded" }}

[[tasks]]
name = "garbage"
module = "command"
on = {{ hosts = ["local2"] }}
params = {{ run = "head -c 65536 /dev/urandom; head -c 65536 /dev/urandom >&2; touch {d}/garbage", creates = "{d}/garbage" }}
"#
    );
    std::fs::write(dir.path().join("plan.toml"), plan).expect("plan");
    let t0 = Instant::now();
    let out = kwin_testkit::kwin!(".")
        .command()
        .args(["apply", "plan.toml", "--output", "json"])
        .current_dir(dir.path())
        .output()
        .expect("kwin");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(t0.elapsed() < Duration::from_secs(240));
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    // Bounded output: nothing near the 100 MB reached the terminal or the log.
    assert!(
        out.stdout.len() < 4 << 20,
        "{} bytes of stdout",
        out.stdout.len()
    );
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let task = |name: &str| {
        events
            .iter()
            .find(|e| e["event"] == "task_finished" && e["task"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no task_finished for {name}:\n{stdout}"))
    };
    let flood = task("flood");
    assert_eq!(flood["status"], "failed", "{stdout}");
    let msg = flood["message"].as_str().unwrap_or_default();
    assert!(msg.contains("output exceeded"), "unclear message: {msg}");
    // Binary garbage on another host is no reason to fail; that host converges.
    assert_eq!(task("garbage")["status"], "changed", "{stdout}");
    // The flooding host failed as a whole (its session was retired), with the same reason.
    let host1 = events
        .iter()
        .find(|e| e["event"] == "host_finished" && e["host"] == "local1")
        .cloned()
        .unwrap_or_default();
    assert!(
        host1["error"]
            .as_str()
            .unwrap_or_default()
            .contains("output exceeded"),
        "{stdout}"
    );
    for e in walk(&dir.path().join(".kwin")) {
        let len = std::fs::metadata(&e).map(|m| m.len()).unwrap_or(0);
        assert!(len < 8 << 20, "{} holds {len} bytes", e.display());
    }
}

/// Peak RSS (bytes) of a command run under `/usr/bin/time -v`, and its output.
fn run_measured(cmd: &mut Command) -> (std::process::Output, Option<u64>) {
    let out = cmd.output().expect("run /usr/bin/time");
    let rss = String::from_utf8_lossy(&out.stderr)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Maximum resident set size (kbytes):"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|kb| kb * 1024);
    (out, rss)
}

fn dir_size(p: &Path) -> u64 {
    walk(p)
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum()
}

/// The per-run output budget: 8 hosts whose steps print 60 MiB each (under the 64 MiB cap
/// per stream and command, so no command fails) keep at most the run's budget (64 MiB by
/// default) in controller memory and in `.kwin/logs`; past it, each step's output is cut with
/// a warning naming the host and task, the log says where, and every task still succeeds —
/// cutting output never changes a result. Peak RSS of the `kwin` process is measured with
/// `/usr/bin/time -v` (before the budget: ~730 MiB and 527 MiB of logs on this machine's
/// debug build).
#[test]
fn eight_hosts_printing_60_mib_each_stay_within_the_run_output_budget() {
    assert!(
        Path::new("/usr/bin/time").exists(),
        "this test measures kwin with /usr/bin/time (apt-get install time)"
    );
    const HOSTS: usize = 8;
    const EACH: u64 = 60 << 20;
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().display().to_string();
    let mut plan = String::from("[settings]\nstep_timeout = 300\nretries = 0\n");
    for i in 1..=HOSTS {
        plan.push_str(&format!(
            "\n[[hosts]]\nname = \"l{i}\"\nos = \"linux\"\ntransport = \"local\"\n"
        ));
    }
    // Lines of text, as a chatty build or a package manager prints them.
    plan.push_str(&format!(
        r#"
[[tasks]]
name = "flood"
module = "command"
params = {{ run = "yes 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz | head -c {EACH}; echo flood-done-{{{{ host.name }}}} >&2; touch {d}/{{{{ host.name }}}}", creates = "{d}/{{{{ host.name }}}}" }}
"#
    ));
    std::fs::write(dir.path().join("plan.toml"), plan).expect("plan");
    let t0 = Instant::now();
    let (out, rss) = run_measured(
        Command::new("/usr/bin/time")
            .arg("-v")
            .arg(env!("CARGO_BIN_EXE_kwin"))
            .args(["apply", "plan.toml", "--output", "json"])
            .current_dir(dir.path()),
    );
    let took = t0.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let rss = rss.unwrap_or_else(|| panic!("no RSS from /usr/bin/time:\n{stderr}"));
    let logs = dir_size(&dir.path().join(".kwin"));
    eprintln!(
        "{HOSTS} hosts x {} MiB: peak RSS {} MiB, .kwin {} MiB, {:.1}s",
        EACH >> 20,
        rss >> 20,
        logs >> 20,
        took.as_secs_f64()
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for i in 1..=HOSTS {
        let host = format!("l{i}");
        let t = events
            .iter()
            .find(|e| e["event"] == "task_finished" && e["host"] == host.as_str())
            .unwrap_or_else(|| panic!("no task_finished for {host}:\n{stdout}"));
        assert_eq!(t["status"], "changed", "{host}: {t}");
        assert!(
            dir.path().join(&host).exists(),
            "{host} did not run to the end"
        );
    }
    // What was kept: the budget plus bounded overhead, not 8 x 60 MiB.
    let budget: u64 = 64 << 20;
    assert!(
        rss < budget + (160 << 20),
        "peak RSS {} MiB for a {} MiB budget",
        rss >> 20,
        budget >> 20
    );
    // The log indents each line by 7 bytes (`    1| `): 10% more for these 73-byte lines.
    assert!(
        logs < budget + budget / 4,
        ".kwin holds {} MiB for a {} MiB budget",
        logs >> 20,
        budget >> 20
    );
    // Each cut is said, naming the host and the task; the log says so at the cut.
    let cuts: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| {
            e["event"] == "warning"
                && e["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("flood") && m.contains("output budget"))
        })
        .collect();
    assert!(
        cuts.len() >= HOSTS - 2,
        "{} warnings about cut output:\n{stdout}",
        cuts.len()
    );
    let cut_host = cuts[0]["host"].as_str().expect("warning names its host");
    let log = walk(&dir.path().join(".kwin/logs"))
        .into_iter()
        .find(|p| p.ends_with(format!("{cut_host}.log")))
        .expect("the cut host's log");
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(
        text.contains("output budget"),
        "{}",
        &text[..text.len().min(4000)]
    );
    // The tail of the step's output is kept (for error messages).
    assert!(
        text.contains(&format!("flood-done-{cut_host}")),
        "no tail kept"
    );
}

/// The binary under test (`KWIN_TEST_BIN`: another build, to see what a test catches).
fn kwin_bin() -> String {
    std::env::var("KWIN_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_kwin").to_string())
}

/// A plan of `HOSTS` local hosts in `dir`, each with one file task whose probe hashes a file.
fn local_hosts_plan(dir: &Path, hosts: usize) {
    let d = dir.display();
    let mut plan = String::from("[settings]\nstep_timeout = 300\nretries = 0\n");
    for i in 1..=hosts {
        plan.push_str(&format!(
            "\n[[hosts]]\nname = \"l{i}\"\nos = \"linux\"\ntransport = \"local\"\n"
        ));
    }
    plan.push_str(&format!(
        "\n[[tasks]]\nname = \"f\"\nmodule = \"file\"\nparams = {{ path = \"{d}/{{{{ host.name }}}}.conf\", content = \"x\\n\" }}\n"
    ));
    std::fs::write(dir.join("plan.toml"), plan).expect("plan");
}

/// One budget for everything hosts send: 8 hosts answering `kwin exec` with 40 MiB each, and
/// 8 hosts whose probe's `sha256sum` (a host's own program, replaced) answers with 40 MiB each,
/// keep the controller's memory and `.kwin` near the run's output budget (64 MiB), not 8 x 40
/// MiB. `kwin exec` output past the budget keeps its tail after a line saying so, and every
/// host still ends; a probe answer past the budget (and 8 MiB more) fails that host, naming
/// the budget. (Before: 8 x 60 MiB took 1.3 GB of memory and 1.2 GB of logs.)
#[test]
fn exec_output_and_probe_answers_stay_within_the_run_output_budget() {
    assert!(
        Path::new("/usr/bin/time").exists(),
        "this test measures kwin with /usr/bin/time (apt-get install time)"
    );
    const HOSTS: usize = 8;
    const EACH: u64 = 40 << 20;
    let budget: u64 = 64 << 20;
    let dir = tempfile::tempdir().expect("tempdir");
    local_hosts_plan(dir.path(), HOSTS);
    let flood = format!(
        "yes 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz | head -c {EACH}; echo exec-done"
    );
    let (out, rss) = run_measured(
        Command::new("/usr/bin/time")
            .arg("-v")
            .arg(kwin_bin())
            .args(["exec", "plan.toml", "--output", "json", "--", &flood])
            .current_dir(dir.path()),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rss = rss.expect("RSS");
    let logs = dir_size(&dir.path().join(".kwin"));
    eprintln!("exec: peak RSS {} MiB, .kwin {} MiB", rss >> 20, logs >> 20);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        &stdout[..stdout.len().min(4000)]
    );
    let results: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "exec_result")
        .collect();
    assert_eq!(results.len(), HOSTS);
    assert!(
        results.iter().all(|r| r["exit"] == 0
            && r["stdout"]
                .as_str()
                .is_some_and(|s| s.trim_end().ends_with("exec-done"))),
        "every host's tail is kept"
    );
    assert!(
        results.iter().any(|r| r["stdout"]
            .as_str()
            .is_some_and(|s| s.contains("output budget"))),
        "a cut is said"
    );
    assert!(
        rss < budget + (160 << 20),
        "exec: peak RSS {} MiB",
        rss >> 20
    );
    assert!(
        logs < budget + budget / 4,
        "exec: .kwin holds {} MiB",
        logs >> 20
    );

    // The probe: every host's sha256sum floods before it answers.
    let dir = tempfile::tempdir().expect("tempdir");
    local_hosts_plan(dir.path(), HOSTS);
    for i in 1..=HOSTS {
        std::fs::write(dir.path().join(format!("l{i}.conf")), "old\n").expect("write");
    }
    let evil = dir.path().join("evil-bin");
    std::fs::create_dir(&evil).expect("mkdir");
    let real = String::from_utf8_lossy(
        &Command::new("sh")
            .args(["-c", "command -v sha256sum"])
            .output()
            .expect("sh")
            .stdout,
    )
    .trim()
    .to_string();
    std::fs::write(
        evil.join("sha256sum"),
        format!("#!/bin/sh\nyes 0123456789abcdefghijklmnopqrstuvwxyz | head -c {EACH}\nexec {real} \"$@\"\n"),
    )
    .expect("evil");
    std::fs::set_permissions(
        evil.join("sha256sum"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let path = format!(
        "{}:{}",
        evil.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let (out, rss) = run_measured(
        Command::new("/usr/bin/time")
            .arg("-v")
            .arg(kwin_bin())
            .args(["plan", "plan.toml", "--output", "json"])
            .env("PATH", path)
            .current_dir(dir.path()),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rss = rss.expect("RSS");
    let logs = dir_size(&dir.path().join(".kwin"));
    eprintln!(
        "probe: peak RSS {} MiB, .kwin {} MiB",
        rss >> 20,
        logs >> 20
    );
    assert!(
        stdout.contains("output budget"),
        "a host past the budget fails naming it: {}",
        &stdout[..stdout.len().min(4000)]
    );
    let bound = budget + (HOSTS as u64) * 2 * (8 << 20);
    assert!(
        rss < bound + (160 << 20),
        "probe: peak RSS {} MiB",
        rss >> 20
    );
    assert!(
        logs < bound + bound / 4,
        "probe: .kwin holds {} MiB",
        logs >> 20
    );
}
