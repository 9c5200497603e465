//! A plan's lock (`.kwin/plan.toml.lock`) under contention: however many runs try to take it at the same moment, at
//! most one holds it at any time. (The end-to-end refusal of a second `kwin apply` and the
//! take-over of a dead process's lock are in `reliability_faults.rs`.)

use kwin_engine::exec::lock::Lock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

#[test]
fn racing_acquirers_never_hold_the_lock_together() {
    let dir = tempfile::tempdir().expect("tmp");
    let state = dir.path().join(".kwin");
    const THREADS: usize = 8;
    const ROUNDS: usize = 400;
    let barrier = Arc::new(Barrier::new(THREADS));
    let holding = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let taken = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (barrier, holding, most, taken, state) = (
                barrier.clone(),
                holding.clone(),
                most.clone(),
                taken.clone(),
                state.clone(),
            );
            std::thread::spawn(move || {
                for round in 0..ROUNDS {
                    barrier.wait();
                    if let Ok((lock, _warning)) =
                        Lock::acquire(&state, "plan.toml.lock", &format!("r{round}-t{t}"))
                    {
                        let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        taken.fetch_add(1, Ordering::SeqCst);
                        // Hold it a moment: the window another holder would show up in.
                        std::thread::sleep(Duration::from_micros(200));
                        holding.fetch_sub(1, Ordering::SeqCst);
                        drop(lock);
                    }
                    barrier.wait();
                    // Whoever held it released it: the next round starts from no lock file,
                    // as the next apply after a finished one does.
                    let _ = std::fs::remove_file(state.join("plan.toml.lock"));
                    barrier.wait();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let taken = taken.load(Ordering::SeqCst);
    assert!(taken >= ROUNDS, "some rounds nobody got the lock: {taken}");
    assert_eq!(
        most.load(Ordering::SeqCst),
        1,
        "two runs held the plan's lock at once ({taken} acquisitions in {ROUNDS} rounds): a lock \
         file that is created but not yet written reads as unreadable and is taken over as stale"
    );
}

#[test]
fn racing_takers_of_a_stale_lock_never_hold_it_together() {
    // A crashed run left its lock (its pid is gone). Several runs start at once: each sees the
    // lock is stale and takes it over; still only one may hold it.
    let dir = tempfile::tempdir().expect("tmp");
    let state = dir.path().join(".kwin");
    std::fs::create_dir_all(&state).expect("mkdir");
    let dead = std::process::Command::new("true").spawn().expect("true");
    let dead_pid = dead.id();
    let _ = dead.wait_with_output();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let stale = format!(
        "{{\"pid\":{dead_pid},\"hostname\":\"{}\",\"started\":\"2020-01-01T00:00:00Z\",\"run_id\":\"crashed\"}}",
        host.trim()
    );
    const THREADS: usize = 8;
    const ROUNDS: usize = 400;
    let barrier = Arc::new(Barrier::new(THREADS));
    let holding = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (barrier, holding, most, state, stale) = (
                barrier.clone(),
                holding.clone(),
                most.clone(),
                state.clone(),
                stale.clone(),
            );
            std::thread::spawn(move || {
                for round in 0..ROUNDS {
                    if t == 0 {
                        std::fs::write(state.join("plan.toml.lock"), &stale).expect("stale lock");
                    }
                    barrier.wait();
                    if let Ok((lock, _)) =
                        Lock::acquire(&state, "plan.toml.lock", &format!("r{round}-t{t}"))
                    {
                        let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        // Hold it a moment: the window another holder would show up in.
                        std::thread::sleep(Duration::from_micros(200));
                        holding.fetch_sub(1, Ordering::SeqCst);
                        drop(lock);
                    }
                    barrier.wait();
                    let _ = std::fs::remove_file(state.join("plan.toml.lock"));
                    barrier.wait();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    assert_eq!(
        most.load(Ordering::SeqCst),
        1,
        "two runs held the plan's lock at once after taking over a stale lock: each removes \
         the path after reading it as stale, which can remove the lock another run has \
         just taken"
    );
}
