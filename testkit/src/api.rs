//! The Kubernetes API tier: a real kube-apiserver and etcd (built once from Debian's source
//! package by `lab/apiserver/build.sh`, cached in `KWIN_APISERVER_CACHE`, default
//! `/var/cache/kwin-lab/apiserver`), started by `lab/apiserver/up.sh` and stopped on drop.

use crate::host::workspace;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the tier's binaries are cached.
pub fn cache_dir() -> PathBuf {
    PathBuf::from(
        std::env::var("KWIN_APISERVER_CACHE")
            .unwrap_or_else(|_| "/var/cache/kwin-lab/apiserver".into()),
    )
}

/// Fail unless the tier can run here: its binaries built, kubectl installed.
pub fn require() {
    for bin in ["kube-apiserver", "kubeadm"] {
        let p = cache_dir().join("bin").join(bin);
        assert!(
            p.exists(),
            "this lab test needs the API tier: {} is missing (run lab/apiserver/build.sh)",
            p.display()
        );
    }
    crate::tier::require_command("kubectl", "Debian's kubernetes-client");
}

/// A running API tier.
pub struct Tier {
    pub state: PathBuf,
    env: BTreeMap<String, String>,
    _dir: tempfile::TempDir,
}

impl Tier {
    /// Start one ([`require`]d first); a failure fails the test.
    pub fn start() -> Tier {
        require();
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("tier");
        let out = Command::new(workspace().join("lab/apiserver/up.sh"))
            .arg(&state)
            .output()
            .expect("run lab/apiserver/up.sh");
        assert!(
            out.status.success(),
            "lab/apiserver/up.sh failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(state.join("env")).expect("tier env file");
        let env = text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.trim_matches('\'').to_string()))
            .collect();
        Tier {
            state,
            env,
            _dir: dir,
        }
    }

    /// A variable of the tier's env file (`KUBECONFIG`, `APISERVER_PORT`, `KUBEADM_BIN`, ...).
    pub fn var(&self, k: &str) -> String {
        self.env
            .get(k)
            .cloned()
            .unwrap_or_else(|| panic!("{k} missing from the tier's env file"))
    }

    /// The tier's admin kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.env
            .get("KUBECONFIG")
            .map(PathBuf::from)
            .unwrap_or_else(|| self.state.join("admin.conf"))
    }

    /// The API server's port.
    pub fn port(&self) -> u16 {
        self.var("APISERVER_PORT")
            .parse()
            .unwrap_or_else(|e| panic!("APISERVER_PORT: {e}"))
    }

    /// The directory of the tier's real kubeadm.
    pub fn kubeadm_dir(&self) -> PathBuf {
        Path::new(&self.var("KUBEADM_BIN"))
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    /// `kubectl --kubeconfig <admin> args`: its stdout; a failure fails the test.
    pub fn kubectl(&self, args: &[&str]) -> String {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(args)
            .output()
            .expect("kubectl");
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Tier {
    fn drop(&mut self) {
        let _ = Command::new(workspace().join("lab/apiserver/down.sh"))
            .arg(&self.state)
            .output();
    }
}
