//! Lab hosts: real sshd hosts in network namespaces, each with a private overlay of the file
//! system, brought up by `lab/up.sh` and torn down on drop (`lab/down.sh`). Lab `N` is
//! `KWIN_LAB_ID=N`: tests that run at the same time use labs of their own.

use crate::host::workspace;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The lab the end-to-end tests use by default (`KWIN_LAB_ID`, default 1), so the tests run
/// while the default lab (0) is up for something else.
pub fn lab_id() -> String {
    std::env::var("KWIN_LAB_ID").unwrap_or_else(|_| "1".to_string())
}

/// A running lab; torn down on drop.
pub struct Lab {
    pub id: String,
    pub inventory: PathBuf,
    pub ssh_config: PathBuf,
}

/// `n` hosts of the default lab ([`lab_id`]).
pub fn lab(n: usize) -> Lab {
    Lab::up(&lab_id(), n)
}

impl Lab {
    /// Bring up `n` hosts of lab `id`; a failure fails the test.
    pub fn up(id: &str, n: usize) -> Lab {
        let out = Command::new("bash")
            .arg(workspace().join("lab/up.sh"))
            .env("KWIN_LAB_ID", id)
            .arg(n.to_string())
            .current_dir(workspace())
            .output()
            .expect("run lab/up.sh");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "lab/up.sh {n} failed:\n{text}");
        // "lab: 3 hosts up in 1.0s; inventory target/lab/hosts.toml"
        let inv = text
            .lines()
            .rev()
            .find_map(|l| l.split("inventory ").nth(1))
            .map(|p| p.trim().to_string())
            .unwrap_or_else(|| "target/lab/hosts.toml".into());
        let inventory = if Path::new(&inv).is_absolute() {
            PathBuf::from(inv)
        } else {
            workspace().join(inv)
        };
        assert!(
            inventory.exists(),
            "no inventory at {}:\n{text}",
            inventory.display()
        );
        let ssh_config = inventory.with_file_name("ssh_config");
        Lab {
            id: id.to_string(),
            inventory,
            ssh_config,
        }
    }

    /// The command lines of the processes of lab host `host` (`h1`…: those in its network
    /// namespace, `kwin<id>-h1`, lab/lib.sh), by pid.
    pub fn processes(&self, host: &str) -> Vec<(u32, String)> {
        let tag = if self.id == "0" { "" } else { self.id.as_str() };
        let out = Command::new("ip")
            .args(["netns", "pids", &format!("kwin{tag}-{host}")])
            .output()
            .expect("ip netns pids");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
            .filter_map(|p| {
                let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
                let words: Vec<String> = cmdline
                    .split(|&b| b == 0)
                    .filter(|w| !w.is_empty())
                    .map(|w| String::from_utf8_lossy(w).into_owned())
                    .collect();
                Some((p, words.join(" ")))
            })
            .collect()
    }

    /// Run `cmd` on `host` with the system ssh client; stdout.
    pub fn ssh(&self, host: &str, cmd: &str) -> String {
        let out = Command::new("ssh")
            .arg("-F")
            .arg(&self.ssh_config)
            .arg(host)
            .arg(cmd)
            .output()
            .expect("ssh");
        assert!(
            out.status.success(),
            "ssh {host} {cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// sha256 of each path (or "missing") on `host`.
    pub fn hashes(&self, host: &str, paths: &[&str]) -> String {
        let script: Vec<String> = paths
            .iter()
            .map(|p| format!("sha256sum {p} 2>/dev/null || echo missing {p}"))
            .collect();
        self.ssh(host, &script.join("; "))
    }

    /// `lab/fault.sh what host`: cut a link, drop packets, kill sshd, ...
    pub fn fault(&self, what: &str, host: &str) {
        let out = Command::new("bash")
            .arg(workspace().join("lab/fault.sh"))
            .env("KWIN_LAB_ID", &self.id)
            .args([what, host])
            .current_dir(workspace())
            .output()
            .expect("lab/fault.sh");
        assert!(
            out.status.success(),
            "lab/fault.sh {what} {host}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A temp dir holding `plan.toml`: `text` with its `inventory` pointing at this lab's.
    pub fn plan_dir(&self, text: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tmp");
        let text: String = text
            .lines()
            .map(|l| {
                if l.starts_with("inventory = ") {
                    format!("inventory = {:?}", self.inventory.display().to_string())
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        std::fs::write(dir.path().join("plan.toml"), text).expect("write plan");
        dir
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(workspace().join("lab/down.sh"))
            .env("KWIN_LAB_ID", &self.id)
            .current_dir(workspace())
            .output();
    }
}
