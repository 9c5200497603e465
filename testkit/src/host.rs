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
