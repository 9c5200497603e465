//! The Kubernetes API tier: a real kube-apiserver and etcd with the real kubeadm and kubectl of
//! the same Kubernetes version (`LAB_K8S_NEWEST` of `lab/build/versions.sh`, and the etcd its
//! kubeadm deploys), built once per machine by `lab/apiserver/build.sh` (`lab/build/build.sh
//! tier`), found where `lab/build/tier.sh` says, started by `lab/apiserver/up.sh` and stopped
//! on drop.

use crate::host::workspace;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The tier's programs, as `lab_tier_bins` of `lab/build/tier.sh` names them.
#[derive(Clone, Debug)]
pub struct Bins {
    pub kube_apiserver: PathBuf,
    pub kubeadm: PathBuf,
    pub kubectl: PathBuf,
    pub etcd: PathBuf,
}

/// Where the tier's programs are, or why they cannot be used (not built yet: run
/// `lab/apiserver/build.sh`). Asked of `lab/build/tier.sh` once per process, so the test kit
/// and the lab scripts agree on one place.
pub fn bins() -> Result<Bins, String> {
    static BINS: OnceLock<Result<Bins, String>> = OnceLock::new();
    BINS.get_or_init(|| {
        let out = Command::new("bash")
            .arg("-c")
            .arg("set -e; source lab/build/versions.sh; source lab/build/tier.sh; lab_tier_bins")
            .current_dir(workspace())
            .output()
            .map_err(|e| format!("run bash for lab/build/tier.sh: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let paths: Vec<PathBuf> = text.lines().map(PathBuf::from).collect();
        match (out.status.success(), paths.as_slice()) {
            (true, [a, k, c, e]) => Ok(Bins {
                kube_apiserver: a.clone(),
                kubeadm: k.clone(),
                kubectl: c.clone(),
                etcd: e.clone(),
            }),
            _ => Err(format!(
                "the API tier's programs are not built (run lab/apiserver/build.sh){}",
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .next()
                    .map(|l| format!(": {l}"))
                    .unwrap_or_default()
            )),
        }
    })
    .clone()
}

/// The tier's kubectl (the same Kubernetes version as its kube-apiserver); a test that needs
/// it fails when it is not built.
pub fn kubectl() -> PathBuf {
    match bins() {
        Ok(b) => b.kubectl,
        Err(e) => panic!("this lab test needs the API tier's kubectl: {e}"),
    }
}

/// The tier's real kubeadm; a test that needs it fails when it is not built.
pub fn kubeadm() -> PathBuf {
    match bins() {
        Ok(b) => b.kubeadm,
        Err(e) => panic!("this lab test needs the API tier's kubeadm: {e}"),
    }
}

/// Fail unless the tier can run here: its programs built.
pub fn require() {
    if let Err(e) = bins() {
        panic!("this lab test needs the API tier: {e}");
    }
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

    /// The directory of the tier's real kubeadm (and of its kubectl, kube-apiserver and etcd:
    /// links in the tier's state dir).
    pub fn kubeadm_dir(&self) -> PathBuf {
        Path::new(&self.var("KUBEADM_BIN"))
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    /// The tier's kubectl (`KUBECTL_BIN` of its env file).
    pub fn kubectl_bin(&self) -> PathBuf {
        PathBuf::from(self.var("KUBECTL_BIN"))
    }

    /// `kubectl --kubeconfig <admin> args` with the tier's kubectl: its stdout; a failure
    /// fails the test.
    pub fn kubectl(&self, args: &[&str]) -> String {
        let out = Command::new(self.kubectl_bin())
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
