//! Retention of run records: `.kwin/logs/<run-id>/` and `.kwin/runs/<run-id>.json`.
//!
//! When a run starts ([`prune`]), runs beyond the newest `keep_runs` are deleted (the run
//! that starts counts as one of them), then the oldest remaining ones until both folders
//! together fit in `max_bytes`. The runs of every plan of the directory share them (run ids
//! never clash). Never deleted: the run that starts, the runs named in the plans' locks
//! (`.kwin/<plan>.lock`: an apply in progress while a `kwin plan` starts), and anything whose name is
//! not a run id (`YYYYMMDDTHHMMSSZ-xxxxxx`) — kwin deletes only what it wrote. Run ids sort
//! by time, so "newest" is the greatest name.

use std::collections::BTreeMap;
use std::path::Path;

/// How many runs, and how many bytes of them, to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub keep_runs: usize,
    pub max_bytes: u64,
}

/// Whether `name` is a run id as [`crate::fs::new_run_id`] makes them.
pub fn is_run_id(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() == 23
        && b[..8].iter().all(u8::is_ascii_digit)
        && b[8] == b'T'
        && b[9..15].iter().all(u8::is_ascii_digit)
        && b[15] == b'Z'
        && b[16] == b'-'
        && b[17..]
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

/// Bytes of the regular files under `p` (symbolic links not followed).
fn size_of(p: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(p) else {
        return 0;
    };
    if meta.is_dir() {
        std::fs::read_dir(p)
            .map(|rd| rd.flatten().map(|e| size_of(&e.path())).sum())
            .unwrap_or(0)
    } else {
        meta.len()
    }
}

/// The runs the lock files name (every plan's of the directory), those that can be read.
fn locked_runs(state_dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(state_dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| super::lock::is_lock_name(&e.file_name().to_string_lossy()))
        .filter_map(|e| {
            let text = crate::fs::read_bounded(&e.path(), 64 << 10).ok()?;
            let info: super::lock::LockInfo = serde_json::from_slice(&text).ok()?;
            Some(info.run_id)
        })
        .collect()
}

/// Delete old runs as `r` says; `current` is the run that starts. Returns a message for each
/// record that could not be deleted (the caller warns; a run never fails for it).
pub fn prune(state_dir: &Path, r: &Retention, current: &str) -> Vec<String> {
    let logs = state_dir.join("logs");
    let runs = state_dir.join("runs");
    // Run id → bytes, for every run on disk.
    let mut all: BTreeMap<String, u64> = BTreeMap::new();
    if let Ok(rd) = std::fs::read_dir(&logs) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && is_run_id(&name) {
                *all.entry(name).or_default() += size_of(&e.path());
            }
        }
    }
    if let Ok(rd) = std::fs::read_dir(&runs) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let is_file = e.file_type().is_ok_and(|t| t.is_file());
            if let Some(id) = name.strip_suffix(".json").filter(|id| is_run_id(id)) {
                if is_file {
                    *all.entry(id.to_string()).or_default() += size_of(&e.path());
                }
            }
        }
    }
    let protected: Vec<String> = std::iter::once(current.to_string())
        .chain(locked_runs(state_dir))
        .collect();
    // Newest first; the run that starts takes one of the `keep_runs` places.
    let mut kept: Vec<(String, u64)> = Vec::new();
    let mut delete: Vec<String> = Vec::new();
    let mut places = r.keep_runs.max(1).saturating_sub(1);
    for (id, bytes) in all.into_iter().rev() {
        if id == current {
            continue;
        }
        if protected.contains(&id) {
            places = places.saturating_sub(1);
            kept.push((id, bytes));
        } else if places > 0 {
            places -= 1;
            kept.push((id, bytes));
        } else {
            delete.push(id);
        }
    }
    // Then the oldest until the rest fits.
    let mut total: u64 = kept.iter().map(|k| k.1).sum();
    while total > r.max_bytes {
        let Some(pos) = kept.iter().rposition(|(id, _)| !protected.contains(id)) else {
            break;
        };
        let (id, bytes) = kept.remove(pos);
        total -= bytes;
        delete.push(id);
    }
    let mut errors = Vec::new();
    for id in delete {
        let dir = logs.join(&id);
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                errors.push(format!("cannot delete old logs {}: {e}", dir.display()));
            }
        }
        let journal = runs.join(format!("{id}.json"));
        if std::fs::symlink_metadata(&journal).is_ok_and(|m| m.is_file()) {
            if let Err(e) = std::fs::remove_file(&journal) {
                errors.push(format!(
                    "cannot delete old journal {}: {e}",
                    journal.display()
                ));
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_recognised() {
        let id = crate::fs::new_run_id();
        assert!(is_run_id(&id), "{id}");
        for bad in [
            "notes",
            "20200101T000000Z-00000g",
            "20200101T000000Z-0000000",
            "../x",
        ] {
            assert!(!is_run_id(bad), "{bad}");
        }
    }
}
