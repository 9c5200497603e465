//! `.kwin/<plan file>.lock` (`plan.toml.lock`): one apply of a plan at a time. Each plan of a
//! directory has its own, so CI jobs applying different plans from one checkout do not wait
//! for each other ([`lock_name`]).
//!
//! The lock file (0600) holds the holder's pid, hostname, start time and run id. A second run
//! refuses and names the holder. A lock left by a process that is no longer alive on this
//! machine is stale: it is taken over, and the caller warns. A lock from another machine is
//! never taken over (kwin cannot see whether that process lives).

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockInfo {
    pub pid: u32,
    pub hostname: String,
    pub started: String,
    pub run_id: String,
}

#[derive(Debug, Error)]
pub enum LockError {
    #[error("another kwin run holds {path}: pid {} on {} since {} (run {}); wait for it to finish, or remove the file if that run is gone", .holder.pid, .holder.hostname, .holder.started, .holder.run_id)]
    Held { path: PathBuf, holder: LockInfo },
    #[error("cannot take {path}: {reason}")]
    Io { path: PathBuf, reason: String },
}

/// A held lock; released (file removed) on drop.
#[derive(Debug)]
pub struct Lock {
    path: PathBuf,
    info: LockInfo,
}

/// This machine's host name.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".to_string())
}

fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The lock file of the plan at `plan` in its state directory: `<file name>.lock`.
pub fn lock_name(plan: &Path) -> String {
    let name = plan
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "plan".into());
    format!("{name}.lock")
}

/// Whether `name` (a file of a state directory) is a lock: a plan's, or the one lock of
/// kwin before locks were per plan (`lock`).
pub fn is_lock_name(name: &str) -> bool {
    name == "lock" || (name.ends_with(".lock") && name.len() > ".lock".len())
}

impl Lock {
    /// Take `state_dir/<name>` ([`lock_name`]) for `run_id`. `Ok((lock, Some(warning)))` when
    /// a stale lock was taken over.
    pub fn acquire(
        state_dir: &Path,
        name: &str,
        run_id: &str,
    ) -> Result<(Lock, Option<String>), LockError> {
        let path = state_dir.join(name);
        let io = |e: std::io::Error| LockError::Io {
            path: path.clone(),
            reason: e.to_string(),
        };
        crate::fs::private_dir(state_dir).map_err(io)?;
        let info = LockInfo {
            pid: std::process::id(),
            hostname: hostname(),
            started: crate::fs::rfc3339(crate::fs::unix_ms()),
            run_id: run_id.to_string(),
        };
        let mut warning = None;
        let bytes = serde_json::to_vec(&info).map_err(|e| LockError::Io {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        // The lock appears with its content in one step: written to a private temp file,
        // then hard-linked to `lock` (which fails if `lock` exists). A lock file is therefore
        // never seen empty or half-written by a run that races for it.
        let tmp = state_dir.join(format!(
            ".lock-{}-{}",
            std::process::id(),
            crate::fs::new_nonce()
        ));
        {
            let mut f = crate::fs::private_file_new(&tmp).map_err(io)?;
            f.write_all(&bytes).map_err(io)?;
        }
        let result = (|| {
            for _ in 0..4 {
                match std::fs::hard_link(&tmp, &path) {
                    Ok(()) => return Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        // Released between the link and this read: try to link again. A
                        // missing file must never count as an unreadable lock, or its
                        // takeover could replace a lock another run has just linked.
                        let seen = match std::fs::read(&path) {
                            Ok(b) => b,
                            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                            Err(e) => return Err(io(e)),
                        };
                        let holder = serde_json::from_slice::<LockInfo>(&seen).ok();
                        let stale = match &holder {
                            Some(h) => h.hostname == info.hostname && !pid_alive(h.pid),
                            None => true,
                        };
                        if !stale {
                            if let Some(holder) = holder {
                                return Err(LockError::Held {
                                    path: path.clone(),
                                    holder,
                                });
                            }
                        }
                        warning = Some(match &holder {
                            Some(h) => format!(
                                "taking over stale lock {} of run {} (pid {} is not running)",
                                path.display(),
                                h.run_id,
                                h.pid
                            ),
                            None => format!("taking over unreadable lock {}", path.display()),
                        });
                        // Only one run replaces a stale lock: the take-over is itself guarded by
                        // `<name>.takeover`, created whole like the lock, and replaces the lock only
                        // if it still holds what was judged stale.
                        let guard = state_dir.join(format!("{name}.takeover"));
                        match std::fs::hard_link(&tmp, &guard) {
                            Ok(()) => {
                                let still = std::fs::read(&path).ok().as_deref() == Some(&seen[..]);
                                let replaced = if still {
                                    crate::fs::write_private(&path, &bytes).map_err(io)
                                } else {
                                    Ok(())
                                };
                                let _ = std::fs::remove_file(&guard);
                                replaced?;
                                if still {
                                    return Ok(());
                                }
                            }
                            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                                // A take-over left behind by a run that died in the middle of
                                // it is cleared after a minute.
                                let old = std::fs::metadata(&guard)
                                    .and_then(|m| m.modified())
                                    .ok()
                                    .and_then(|t| t.elapsed().ok())
                                    .is_some_and(|age| age > std::time::Duration::from_secs(60));
                                if old {
                                    let _ = std::fs::remove_file(&guard);
                                }
                                return Err(LockError::Io {
                                    path: path.clone(),
                                    reason: "another run is taking over this stale lock right now"
                                        .into(),
                                });
                            }
                            Err(e) => return Err(io(e)),
                        }
                    }
                    Err(e) => return Err(io(e)),
                }
            }
            Err(LockError::Io {
                path: path.clone(),
                reason: "another run took the lock at the same time".into(),
            })
        })();
        let _ = std::fs::remove_file(&tmp);
        result.map(|()| (Lock { path, info }, warning))
    }

    pub fn info(&self) -> &LockInfo {
        &self.info
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Remove only our own lock.
        let ours = std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|s| serde_json::from_str::<LockInfo>(&s).ok())
            .is_some_and(|h| h == self.info);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_run_refuses_naming_the_holder_and_stale_is_taken_over() {
        let d = tempfile::tempdir().expect("tmp");
        let (lock, warn) = Lock::acquire(d.path(), "p.toml.lock", "run-a").expect("first");
        assert!(warn.is_none());
        let err = Lock::acquire(d.path(), "p.toml.lock", "run-b").expect_err("held");
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        assert!(msg.contains("run-a"), "{msg}");
        drop(lock);
        assert!(!d.path().join("p.toml.lock").exists());

        // A lock of a dead process on this machine.
        let dead = LockInfo {
            pid: 4_000_000_000,
            hostname: hostname(),
            started: "2025-01-01T00:00:00Z".into(),
            run_id: "run-old".into(),
        };
        std::fs::write(
            d.path().join("p.toml.lock"),
            serde_json::to_vec(&dead).expect("json"),
        )
        .expect("write");
        let (_lock, warn) = Lock::acquire(d.path(), "p.toml.lock", "run-c").expect("takeover");
        assert!(warn.expect("warning").contains("run-old"));

        // Another machine's lock is never taken over.
        drop(_lock);
        let other = LockInfo {
            hostname: "elsewhere".into(),
            ..dead
        };
        std::fs::write(
            d.path().join("p.toml.lock"),
            serde_json::to_vec(&other).expect("json"),
        )
        .expect("write");
        assert!(Lock::acquire(d.path(), "p.toml.lock", "run-d").is_err());
        // Another plan of the directory has its own lock.
        let (_other, warn) = Lock::acquire(d.path(), "q.toml.lock", "run-e").expect("own lock");
        assert!(warn.is_none());
    }

    #[test]
    fn a_plan_s_lock_is_named_after_its_file() {
        assert_eq!(lock_name(Path::new("ci/plan.toml")), "plan.toml.lock");
        assert!(is_lock_name("plan.toml.lock") && is_lock_name("lock"));
        assert!(!is_lock_name(".lock") && !is_lock_name("plan.toml.lock.takeover"));
    }
}
