//! Local files and names: the private directory `.kwin/` next to the plan (0700) and its
//! files (0600), bounded reads of local files, random nonces, run ids and timestamps. No
//! imports from the rest of the engine: every layer may use it.
//!
//! Every local file kwin writes (journal, logs, lock, `checksums.toml`, `known_hosts`, the
//! admin kubeconfig) is created here with `O_CREAT|O_EXCL|O_NOFOLLOW` and mode 0600 from its
//! first byte: a whole-file write goes to a new file with a random name in the target's
//! directory and is renamed over the target, so a file or link another user planted in a
//! shared directory is never opened, written through or moved into place. `.kwin/` itself
//! must be a real directory owned by the user running kwin: one planted by another user (or a
//! link to one) is refused, so nothing inside it is theirs either.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// A random 128-bit value as 32 hex digits: markers that delimit sections of a script's
/// output, names of temporary files, run ids.
pub fn new_nonce() -> String {
    use rand::Rng;
    let n: u128 = rand::rng().random();
    format!("{n:032x}")
}

/// Read at most `limit` bytes of `path`; more is an error, so a device or endless file given
/// by mistake (`/dev/zero`) fails at once instead of filling memory.
pub fn read_bounded(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let file = File::open(path)?;
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(io::Error::other("is a directory"));
    }
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::other(format!(
            "larger than {} MiB",
            limit / (1024 * 1024)
        )));
    }
    Ok(bytes)
}

/// Create `dir` (and parents) with mode 0700; tighten an existing one to 0700. The directory
/// must be a directory (not a symbolic link) owned by the effective user.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a directory (a symbolic link is not accepted for kwin's private state)",
            dir.display()
        )));
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(io::Error::other(format!(
            "{} belongs to uid {}, not to the user running kwin (uid {me}); remove it or run as its owner",
            dir.display(),
            meta.uid()
        )));
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// Create `path` with mode 0600, failing if anything (a file, a link) exists at that name.
pub fn private_file_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
}

/// A name for a temporary file beside `path` that nobody can guess: `.kwin-tmp-<128 random
/// bits>` in the same directory.
pub fn temp_beside(path: &Path) -> PathBuf {
    let name = format!(".kwin-tmp-{}", new_nonce());
    match path.parent() {
        Some(d) => d.join(name),
        None => PathBuf::from(name),
    }
}

/// Write `bytes` to `path` (0600): a new file with a random name beside it, created
/// exclusively, synced, then renamed over `path` (which replaces a file or link there without
/// following it).
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let tmp = temp_beside(path);
    let mut f = private_file_new(&tmp)?;
    let written = f
        .write_all(bytes)
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Write a document where the user asked (`kwin checksums --write`, `kwin man --out-dir`):
/// as [`write_private`] does (a new file with a random name beside it, `O_EXCL|O_NOFOLLOW`,
/// renamed over `path`: a file or link another user planted at the name never receives the
/// bytes, and the file is the user's own), with `mode` (before the umask), in a directory
/// [`output_dir_ok`] accepts.
pub fn write_output(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    output_dir_ok(dir)?;
    let tmp = temp_beside(path);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&tmp)?;
    let written = f
        .write_all(bytes)
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Whether kwin may leave a document in `dir`: a directory of the user running kwin or of
/// root, which no other account may rename entries in (not writable by group or others, or
/// sticky, as `/tmp`). Another account's directory would let it replace the document later
/// (a pins file an offline controller then trusts).
pub fn output_dir_ok(dir: &Path) -> io::Result<()> {
    let meta = std::fs::metadata(dir)?;
    let me = rustix::process::geteuid().as_raw();
    if !meta.is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    if meta.uid() != me && meta.uid() != 0 {
        return Err(io::Error::other(format!(
            "{} belongs to uid {}, not to the user running kwin (uid {me}) or root: that account could replace what kwin writes there",
            dir.display(),
            meta.uid()
        )));
    }
    let sticky = meta.mode() & 0o1000 != 0;
    if meta.mode() & 0o022 != 0 && !sticky {
        return Err(io::Error::other(format!(
            "{} is writable by other accounts (mode {:04o}): they could replace what kwin writes there",
            dir.display(),
            meta.mode() & 0o7777
        )));
    }
    Ok(())
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `YYYY-MM-DDTHH:MM:SSZ` for `unix_ms`.
pub fn rfc3339(unix_ms: u64) -> String {
    let (y, mo, d, h, mi, s) = civil(unix_ms / 1000);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// A new run id: UTC time plus a random suffix, e.g. `20250102T030405Z-1a2b3c`. Sorts by time.
pub fn new_run_id() -> String {
    let (y, mo, d, h, mi, s) = civil(unix_ms() / 1000);
    let nonce = new_nonce();
    format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z-{}", &nonce[..6])
}

fn civil(secs: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (h, mi, s) = (
        (rem / 3600) as u32,
        ((rem % 3600) / 60) as u32,
        (rem % 60) as u32,
    );
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d, h, mi, s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_print_as_utc_rfc3339_and_run_ids_have_one_length() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_735_787_045_000), "2025-01-02T03:04:05Z");
        assert_eq!(new_run_id().len(), "20250102T030405Z-1a2b3c".len());
    }

    #[test]
    fn private_dirs_are_0700_and_private_files_0600() {
        let d = tempfile::tempdir().expect("tmp");
        let k = d.path().join(".kwin/runs");
        private_dir(&k).expect("dir");
        let mode = std::fs::metadata(&k).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let f = k.join("x.json");
        write_private(&f, b"{}").expect("write");
        let mode = std::fs::metadata(&f).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
