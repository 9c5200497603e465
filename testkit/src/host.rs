//! Facts about the machine the tests run on.

/// Whether this process runs as root (real uid 0, from `/proc/self/status`).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Whether `name` is a program on `PATH`.
pub fn has_command(name: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| {
            let p = d.join(name);
            std::fs::metadata(&p).is_ok_and(|m| {
                use std::os::unix::fs::PermissionsExt;
                m.is_file() && m.permissions().mode() & 0o111 != 0
            })
        })
    })
}

/// The workspace root (the directory of the top `Cargo.toml`).
pub fn workspace() -> std::path::PathBuf {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
}

/// Peak resident set size of this process so far (VmHWM), in bytes.
pub fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Run test `name` of this test binary alone in a child process (its peak memory is then its
/// own); `true` in that child, where the caller does the measured work. The child runs
/// ignored tests too, so a lab test can measure itself this way.
pub fn alone(name: &str) -> bool {
    if std::env::var("KWIN_ALONE").as_deref() == Ok(name) {
        return true;
    }
    let exe = std::env::current_exe().expect("test binary");
    let out = std::process::Command::new(exe)
        .args([
            name,
            "--exact",
            "--include-ignored",
            "--test-threads=1",
            "--nocapture",
        ])
        .env("KWIN_ALONE", name)
        .output()
        .expect("run the test binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{name} in its own process failed:\n{text}"
    );
    assert!(text.contains("1 passed"), "{name} did not run:\n{text}");
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_on_path() {
        assert!(has_command("sh"));
        assert!(!has_command("kwin-no-such-program"));
        assert!(workspace().join("Cargo.toml").is_file());
    }
}
