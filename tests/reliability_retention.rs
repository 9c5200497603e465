//! `.kwin/logs` and `.kwin/runs` do not grow without end: when a run starts, runs beyond the
//! last `settings.keep_runs` (default 50) are deleted, then the oldest until both folders fit
//! in `settings.logs_limit_mib` (default 1024) — never the run that starts, never the run
//! named in a plan's lock (`.kwin/plan.toml.lock`), never anything that is not a run's log folder or journal. Through
//! the binary, on a `local` host.

use kwin_testkit::kwin;
use std::path::{Path, PathBuf};

/// A run id of `kwin`'s format for the `n`-th minute of 2020-01-01 (sorts by `n`).
fn old_id(n: usize) -> String {
    format!("20200101T{:02}{:02}00Z-{:06x}", n / 60, n % 60, n)
}

fn fake_run(state: &Path, id: &str, log_bytes: usize) {
    let logs = state.join("logs").join(id);
    std::fs::create_dir_all(&logs).expect("mkdir");
    std::fs::write(logs.join("l1.log"), vec![b'x'; log_bytes]).expect("log");
    std::fs::create_dir_all(state.join("runs")).expect("mkdir");
    std::fs::write(state.join("runs").join(format!("{id}.json")), b"{}").expect("journal");
}

fn runs_in(state: &Path) -> (Vec<String>, Vec<String>) {
    let names = |d: PathBuf| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    (names(state.join("logs")), names(state.join("runs")))
}

fn plan_dir(settings: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path().display().to_string();
    std::fs::write(
        dir.path().join("plan.toml"),
        format!(
            r#"{settings}
[[hosts]]
name = "l1"
os = "linux"
transport = "local"

[[tasks]]
name = "touch"
module = "command"
params = {{ run = "touch {d}/done", creates = "{d}/done" }}
"#
        ),
    )
    .expect("plan");
    dir
}

fn kwin(dir: &Path, args: &[&str]) -> (i32, String) {
    let r = kwin!(dir, args);
    (r.code, r.out())
}

fn run_id(out: &str) -> String {
    out.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "run_started")
        .and_then(|e| e["run_id"].as_str().map(str::to_string))
        .expect("run_started")
}

#[test]
fn runs_beyond_the_last_fifty_are_pruned_when_a_run_starts() {
    let dir = plan_dir("");
    let state = dir.path().join(".kwin");
    for n in 0..60 {
        fake_run(&state, &old_id(n), 100);
    }
    // Not kwin's: left alone.
    std::fs::write(state.join("logs").join("notes.txt"), b"mine").expect("notes");
    std::fs::create_dir_all(state.join("logs").join("keep-me")).expect("dir");
    std::fs::write(state.join("runs").join("other.json"), b"{}").expect("other");
    let (code, out) = kwin(dir.path(), &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(code, 0, "{out}");
    let current = run_id(&out);
    let (logs, runs) = runs_in(&state);
    let logs_runs: Vec<&String> = logs.iter().filter(|n| n.starts_with("20")).collect();
    assert_eq!(logs_runs.len(), 50, "{logs:?}");
    assert!(logs.contains(&current), "the current run's logs: {logs:?}");
    assert!(runs.contains(&format!("{current}.json")), "{runs:?}");
    // The newest 49 old runs stay, the 11 oldest went.
    assert!(
        !logs.contains(&old_id(10)) && logs.contains(&old_id(11)),
        "{logs:?}"
    );
    assert!(!runs.contains(&format!("{}.json", old_id(10))), "{runs:?}");
    assert_eq!(
        runs.iter().filter(|n| n.starts_with("20")).count(),
        50,
        "{runs:?}"
    );
    for mine in ["notes.txt", "keep-me"] {
        assert!(logs.contains(&mine.to_string()), "{logs:?}");
    }
    assert!(runs.contains(&"other.json".to_string()), "{runs:?}");
}

#[test]
fn the_size_cap_deletes_the_oldest_but_never_the_run_holding_the_lock() {
    let dir = plan_dir("[settings]\nkeep_runs = 10\nlogs_limit_mib = 1\n");
    let state = dir.path().join(".kwin");
    // Four runs of 400 KiB: 1.6 MiB with a 1 MiB cap.
    for n in 0..4 {
        fake_run(&state, &old_id(n), 400 << 10);
    }
    // The oldest run still holds the lock (a live process of this machine: this test).
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    std::fs::write(
        state.join("plan.toml.lock"),
        serde_json::json!({
            "pid": std::process::id(),
            "hostname": hostname,
            "started": "2020-01-01T00:00:00Z",
            "run_id": old_id(0),
        })
        .to_string(),
    )
    .expect("lock");
    // `kwin plan` runs beside a held lock (only apply takes it).
    let (code, out) = kwin(dir.path(), &["plan", "plan.toml", "--output", "json"]);
    assert!(code == 0 || code == 2, "{out}");
    let current = run_id(&out);
    let (logs, _) = runs_in(&state);
    assert!(logs.contains(&current), "{logs:?}");
    assert!(
        logs.contains(&old_id(0)),
        "the locked run was deleted: {logs:?}"
    );
    // 0 (locked) + the newest that fit: 1 and 2 went, 3 stays (0.8 MiB with 0).
    assert!(
        !logs.contains(&old_id(1)) && !logs.contains(&old_id(2)),
        "{logs:?}"
    );
    assert!(logs.contains(&old_id(3)), "{logs:?}");
    let size: u64 = walk(&state.join("logs"))
        .iter()
        .chain(walk(&state.join("runs")).iter())
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum();
    assert!(size <= 1 << 20, "{size} bytes left");
}

fn walk(p: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let path = e.path();
            if path.is_dir() {
                v.extend(walk(&path));
            } else {
                v.push(path);
            }
        }
    }
    v
}
