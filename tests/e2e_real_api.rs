//! Every manifest kwin applies itself (the rendered goldens in tests/golden/manifests: the
//! Windows kube-proxy and flannel DaemonSets with their HostProcess fields, the RuntimeClasses,
//! Calico's services-endpoint ConfigMap) is accepted by a real kube-apiserver of each version
//! the lab built (/var/cache/kwin-lab/bin/kubernetes-*, lab/build/build.sh), applied server
//! side with strict field validation: an unknown or misplaced field fails, as a control
//! manifest with one planted field shows.
//!
//! Not here: Calico's Installation and APIServer (`calico-installation.yaml`), whose CRDs come
//! from tigera-operator.yaml, which kwin downloads at apply time and the lab cannot build (the
//! Go module proxy refuses Calico's modules); the kubeadm configuration, which the real
//! kubeadm reads on every apply of the real cluster (tests/e2e_real_cluster.rs).
//!
//! A lab test (root, the lab's builds): in the default command it needs the default build's
//! kube-apiserver (LAB_K8S_NEWEST, which `.ci/run` builds); with the `real-lab` feature it
//! needs every minor from 1.34 to 1.37 (`cargo test --features real-lab --test e2e_real_api --
//! --include-ignored` after building them).

use kwin_testkit::host::workspace;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn cache() -> PathBuf {
    PathBuf::from(std::env::var("KWIN_LAB_CACHE").unwrap_or_else(|_| "/var/cache/kwin-lab".into()))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The Kubernetes versions whose kube-apiserver the lab built, oldest first: full builds
/// (`bin/kubernetes-V`), kube-apiserver alone (`bin/kube-apiserver-V`, LAB_K8S_APISERVER_ONLY)
/// and the API tier's (`bin/kube-tier-V`, until a full build of V supersedes it).
fn built_versions() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(cache().join("bin"))
        .expect("the lab's builds (lab/build/build.sh)")
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let v = name
                .strip_prefix("kubernetes-")
                .or_else(|| name.strip_prefix("kube-apiserver-"))
                .or_else(|| name.strip_prefix("kube-tier-"))?
                .to_string();
            e.path().join("kube-apiserver").exists().then_some(v)
        })
        .filter(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .collect();
    v.sort_by_key(|s| {
        s.split('.')
            .map(|p| p.parse::<u32>().unwrap_or(0))
            .collect::<Vec<_>>()
    });
    v.dedup();
    v
}

/// kubectl of the oldest full Kubernetes build: the nearest to an older kube-apiserver built
/// alone (kubectl's version skew policy: one minor either side).
fn nearest_kubectl() -> PathBuf {
    built_versions()
        .into_iter()
        .map(|v| cache().join(format!("bin/kubernetes-{v}/kubectl")))
        .find(|p| p.exists())
        .expect("a full Kubernetes build in the lab cache (lab/build/build.sh)")
}

/// The newest etcd the lab built.
fn etcd() -> PathBuf {
    let mut e: Vec<PathBuf> = std::fs::read_dir(cache().join("bin"))
        .expect("lab builds")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("etcd-"))
        })
        .map(|p| p.join("etcd"))
        .filter(|p| p.exists())
        .collect();
    e.sort();
    e.pop().expect("an etcd build in the lab cache")
}

/// etcd and one kube-apiserver on loopback, stopped on drop.
struct Api {
    children: Vec<Child>,
    port: u16,
    token: String,
    kubectl: PathBuf,
    _dir: tempfile::TempDir,
}

impl Api {
    fn start(version: &str) -> Api {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path().to_path_buf();
        // A full build, or kube-apiserver alone (then kubectl of the nearest full build).
        let full = cache().join(format!("bin/kubernetes-{version}"));
        let bin = if full.join("kube-apiserver").exists() {
            full
        } else {
            cache().join(format!("bin/kube-apiserver-{version}"))
        };
        let kubectl_bin = if bin.join("kubectl").exists() {
            bin.join("kubectl")
        } else {
            nearest_kubectl()
        };
        let (client, peer, port) = (free_port(), free_port(), free_port());
        let logs = d.clone();
        let log = move |name: &str| std::fs::File::create(logs.join(name)).expect("log file");
        let etcd = Command::new(etcd())
            .args(["--name", "t", "--data-dir"])
            .arg(d.join("etcd"))
            .arg(format!("--listen-client-urls=http://127.0.0.1:{client}"))
            .arg(format!("--advertise-client-urls=http://127.0.0.1:{client}"))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer}"))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{peer}"
            ))
            .arg(format!("--initial-cluster=t=http://127.0.0.1:{peer}"))
            .stdout(Stdio::null())
            .stderr(log("etcd.log"))
            .spawn()
            .expect("etcd starts");
        let mut api = Api {
            children: vec![etcd],
            port,
            token: format!("{:032x}", rand_token()),
            kubectl: kubectl_bin,
            _dir: dir,
        };
        let sa = d.join("sa.key");
        let ok = Command::new("openssl")
            .args(["genrsa", "-out"])
            .arg(&sa)
            .arg("2048")
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "openssl genrsa");
        std::fs::write(
            d.join("tokens.csv"),
            format!("{},admin,admin,\"system:masters\"\n", api.token),
        )
        .expect("tokens");
        let apiserver = Command::new(bin.join("kube-apiserver"))
            .arg(format!("--etcd-servers=http://127.0.0.1:{client}"))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={port}"))
            .arg(format!("--cert-dir={}", d.join("certs").display()))
            .arg(format!(
                "--token-auth-file={}",
                d.join("tokens.csv").display()
            ))
            .arg("--authorization-mode=RBAC")
            .arg("--service-account-issuer=https://kubernetes.default.svc.cluster.local")
            .arg(format!("--service-account-key-file={}", sa.display()))
            .arg(format!(
                "--service-account-signing-key-file={}",
                sa.display()
            ))
            .arg("--service-cluster-ip-range=10.96.0.0/12")
            // As kubeadm runs it (k8s.io/kubernetes@v1.37.2 cmd/kubeadm/app/phases/
            // controlplane/manifests.go: "allow-privileged": "true"); HostProcess pods need it.
            .arg("--allow-privileged=true")
            .stdout(Stdio::null())
            .stderr(log("kube-apiserver.log"))
            .spawn()
            .expect("kube-apiserver starts");
        api.children.push(apiserver);
        let t0 = Instant::now();
        loop {
            if api.kubectl(&["get", "--raw", "/readyz"]).0 {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "kube-apiserver {version} not ready in 120 s:\n{}",
                std::fs::read_to_string(d.join("kube-apiserver.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        api
    }

    /// `kubectl ARGS` as the tier's admin: (success, stdout and stderr).
    fn kubectl(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new(&self.kubectl)
            .arg(format!("--server=https://127.0.0.1:{}", self.port))
            .arg(format!("--token={}", self.token))
            .arg("--insecure-skip-tls-verify")
            .args(args)
            .output()
            .expect("kubectl runs");
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }

    /// Apply `file` server side with strict field validation, its namespaces made first.
    fn apply_strict(&self, file: &Path) -> (bool, String) {
        let text = std::fs::read_to_string(file).expect("manifest");
        for ns in text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("namespace:"))
            .map(str::trim)
        {
            let _ = self.kubectl(&["create", "namespace", ns]);
        }
        self.kubectl(&[
            "apply",
            "--server-side",
            "--field-manager=kwin",
            "--validate=strict",
            "-f",
            &file.to_string_lossy(),
        ])
    }
}

impl Drop for Api {
    fn drop(&mut self) {
        for c in self.children.iter_mut().rev() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn rand_token() -> u128 {
    use std::hash::{BuildHasher, Hasher};
    let s = std::collections::hash_map::RandomState::new();
    let mut h = s.build_hasher();
    h.write_u128(std::process::id() as u128);
    (h.finish() as u128) << 64 | s.build_hasher().finish() as u128
}

/// The manifests kwin applies to the API server itself, among the goldens.
fn applied_manifests() -> Vec<PathBuf> {
    let dir = workspace().join("tests/golden/manifests");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("goldens")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            let n = p
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            n.ends_with(".yaml")
                && [
                    "kube-proxy-windows",
                    "flannel-windows",
                    "runtime-classes",
                    "calico-services-endpoint",
                ]
                .iter()
                .any(|k| n.contains(k))
        })
        .collect();
    v.sort();
    v
}

kwin_testkit::lab_test! {
#[test]
fn every_manifest_kwin_applies_passes_strict_validation_on_each_built_api_server() {
    let versions = built_versions();
    assert!(!versions.is_empty(), "no kube-apiserver built (lab/build/build.sh)");
    let manifests = applied_manifests();
    assert!(manifests.len() >= 6, "{manifests:?}");
    for version in &versions {
        let api = Api::start(version);
        for m in &manifests {
            let (ok, out) = api.apply_strict(m);
            assert!(ok, "kube-apiserver {version} refuses {}:\n{out}", m.display());
        }
        // The control: one field kwin would never write makes the same apply fail.
        let planted = tempfile::NamedTempFile::new().expect("tmp");
        let rc = manifests
            .iter()
            .find(|m| m.to_string_lossy().contains("runtime-classes"))
            .expect("a RuntimeClass golden");
        let text = std::fs::read_to_string(rc).expect("golden");
        std::fs::write(planted.path(), text.replacen("handler:", "handlr: x\nhandler:", 1))
            .expect("planted");
        let (ok, out) = api.apply_strict(planted.path());
        assert!(
            !ok && (out.contains("unknown field") || out.contains("field not declared in schema")),
            "kube-apiserver {version} accepted an unknown field:\n{out}"
        );
        println!(
            "kube-apiserver {version}: {} manifests accepted, a planted field refused",
            manifests.len()
        );
    }
    // The default build's version at least (lab/build/versions.sh LAB_K8S_NEWEST); with the
    // feature, the minors the support matrix calls supported or just out of support
    // (LAB_K8S_FULL and LAB_K8S_APISERVER_ONLY in lab/build/versions.sh build them).
    let newest = newest();
    assert!(
        versions.contains(&newest),
        "no kube-apiserver {newest} built: {versions:?} (lab/build/build.sh)"
    );
    if cfg!(feature = "real-lab") {
        for minor in ["1.34.", "1.35.", "1.36.", "1.37."] {
            assert!(
                versions.iter().any(|v| v.starts_with(minor)),
                "no kube-apiserver {minor}x built: {versions:?} (lab/build/build.sh with \
                 LAB_K8S_FULL=\"1.35.4 1.36.3 1.37.2\" LAB_K8S_APISERVER_ONLY=1.34.4)"
            );
        }
    }
}
}

/// LAB_K8S_NEWEST of lab/build/versions.sh, its one owner.
fn newest() -> String {
    let out = Command::new("bash")
        .args([
            "-c",
            "source lab/build/versions.sh && printf %s \"$LAB_K8S_NEWEST\"",
        ])
        .current_dir(workspace())
        .output()
        .expect("bash");
    assert!(out.status.success(), "lab/build/versions.sh: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}
