//! Artifact checksums end to end: `kwin plan` fetches the upstream checksum files a plan needs
//! (here from a mirror served by a small HTTP server on loopback, laid out like the upstream
//! sites), records them in `.kwin/checksums.toml`, and the tasks carry them; pins win; a missing,
//! broken or unreachable checksum file stops the run before any host is contacted, naming the
//! artifact and its URL; `kwin validate` never fetches.

use kwin_engine::checksums;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

const KUBELET: &str = "1111111111111111111111111111111111111111111111111111111111111111";
const KUBEADM: &str = "2222222222222222222222222222222222222222222222222222222222222222";
const CONTAINERD: &str = "3333333333333333333333333333333333333333333333333333333333333333";
const CNI: &str = "4444444444444444444444444444444444444444444444444444444444444444";
const LOG_RUNNER: &str = "6666666666666666666666666666666666666666666666666666666666666666";
const CRICTL: &str = "7777777777777777777777777777777777777777777777777777777777777777";
const PINNED: &str = "5555555555555555555555555555555555555555555555555555555555555555";

/// Serves `files` (URL path → body) over HTTP/1.1 on loopback, counting requests per path.
struct Mirror {
    port: u16,
    hits: Arc<Mutex<BTreeMap<String, usize>>>,
}

fn serve(files: BTreeMap<String, String>) -> Mirror {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let hits: Arc<Mutex<BTreeMap<String, usize>>> = Arc::default();
    let h = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut line = String::new();
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            loop {
                let mut header = String::new();
                match reader.read_line(&mut header) {
                    Ok(0) | Err(_) => break,
                    Ok(_) if header.trim().is_empty() => break,
                    Ok(_) => {}
                }
            }
            let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
            *h.lock().expect("lock").entry(path.clone()).or_default() += 1;
            let resp = match files.get(&path) {
                Some(body) => format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                ),
                None => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    .to_string(),
            };
            let _ = stream.write_all(resp.as_bytes());
        }
    });
    Mirror { port, hits }
}

fn upstream_files() -> BTreeMap<String, String> {
    let mut f = BTreeMap::new();
    f.insert(
        "/dl.k8s.io/v1.31.4/bin/windows/amd64/kubelet.exe.sha256".into(),
        format!("{KUBELET}\n"),
    );
    f.insert(
        "/dl.k8s.io/v1.31.4/bin/windows/amd64/kubeadm.exe.sha256".into(),
        KUBEADM.to_string(),
    );
    f.insert(
        "/github.com/containerd/containerd/releases/download/v1.7.24/containerd-1.7.24-windows-amd64.tar.gz.sha256sum".into(),
        format!("{CONTAINERD}  containerd-1.7.24-windows-amd64.tar.gz\n"),
    );
    f.insert(
        "/github.com/containernetworking/plugins/releases/download/v1.6.1/cni-plugins-windows-amd64-v1.6.1.tgz.sha256".into(),
        format!("{CNI}  cni-plugins-windows-amd64-v1.6.1.tgz\n"),
    );
    // kube-log-runner with rotation (1.34+) for a 1.31 cluster; crictl of the cluster's minor.
    f.insert(
        "/dl.k8s.io/v1.34.0/bin/windows/amd64/kube-log-runner.exe.sha256".into(),
        LOG_RUNNER.to_string(),
    );
    f.insert(
        "/github.com/kubernetes-sigs/cri-tools/releases/download/v1.31.0/crictl-v1.31.0-windows-amd64.tar.gz.sha256".into(),
        CRICTL.to_string(),
    );
    f
}

/// A flannel cluster with one Windows worker; hosts on a closed loopback port (never reached:
/// every test here is about what happens before, or fails fast on connect).
fn plan(dir: &Path, port: u16, extra: &str) -> PathBuf {
    let p = dir.join("plan.toml");
    std::fs::write(
        &p,
        format!(
            r#"
[cluster]
name = "sums"
kubernetes_version = "1.31.4"

[cni]
plugin = "flannel"

[versions]
containerd = "1.7.24"
cni_plugins = "v1.6.1"

[artifacts]
mirror = "http://127.0.0.1:{port}"
{extra}

[settings]
retries = 0

[[hosts]]
name = "cp1"
address = "127.0.0.2"
node_ip = "192.0.2.10"
port = 1
os = "linux"
role = "control-plane"
host_key = "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
private_key = "/nonexistent"
connect_timeout = 2

[[hosts]]
name = "ww1"
address = "127.0.0.3"
node_ip = "192.0.2.21"
port = 1
os = "windows"
role = "worker"
transport = "winrm"
user = "Administrator"
password_env = "KWIN_TEST_WINRM_PASSWORD"
https = false
connect_timeout = 2
"#
        ),
    )
    .expect("write plan");
    p
}

fn kwin(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kwin"))
        .args(args)
        .env("KWIN_TEST_WINRM_PASSWORD", "Passw0rd-for-a-closed-port")
        .env_remove("HTTPS_PROXY")
        .env_remove("HTTP_PROXY")
        .env_remove("https_proxy")
        .env_remove("http_proxy")
        .env_remove("ALL_PROXY")
        .output()
        .expect("run kwin")
}

/// The sha256 param of `task` after expanding `plan` with its recorded checksums.
fn expanded_sha256(plan: &Path, task: &str) -> Option<String> {
    let loaded = kwin_engine::plan::load(plan).expect("load");
    let rec = checksums::load_record(&checksums::record_path(&loaded.base_dir.join(".kwin")))
        .expect("record");
    let sums = checksums::Checksums::new(loaded.file.artifacts.sha256.clone(), rec);
    let tasks = kwin_engine::expand::expand_with(&loaded, kwin_modules::recipes::RECIPES, &sums)
        .expect("expand");
    let t = tasks
        .iter()
        .find(|t| t.id.to_string() == task)
        .unwrap_or_else(|| panic!("no task {task}"));
    t.params
        .get("sha256")
        .and_then(|v| v.as_str())
        .map(str::to_string)
}

#[test]
fn plan_fetches_records_and_reuses_upstream_checksums() {
    let m = serve(upstream_files());
    let dir = tempfile::tempdir().expect("tmp");
    let p = plan(dir.path(), m.port, "");
    let ps = p.to_str().expect("utf-8");

    // validate and graph: no network
    let v = kwin(&["validate", ps]);
    assert!(v.status.success(), "{v:?}");
    assert!(m.hits.lock().expect("lock").is_empty(), "validate fetched");
    assert!(!dir.path().join(".kwin/checksums.toml").exists());

    let out = kwin(&["plan", ps]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("checksums: 6 fetched"),
        "stderr: {stderr}\nstdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let rec = dir.path().join(".kwin/checksums.toml");
    let text = std::fs::read_to_string(&rec).expect("record written");
    for v in [KUBELET, KUBEADM, CONTAINERD, CNI, LOG_RUNNER, CRICTL] {
        assert!(text.contains(v), "{v} not in {text}");
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&rec).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    assert_eq!(
        expanded_sha256(&p, "ww1/kubelet-download").as_deref(),
        Some(KUBELET)
    );
    assert_eq!(
        expanded_sha256(&p, "ww1/kubeadm-download").as_deref(),
        Some(KUBEADM)
    );
    assert_eq!(
        expanded_sha256(&p, "ww1/containerd-download").as_deref(),
        Some(CONTAINERD)
    );
    assert_eq!(
        expanded_sha256(&p, "ww1/containerd-unpack").as_deref(),
        Some(CONTAINERD)
    );

    // second run: recorded, nothing fetched
    let before: usize = m.hits.lock().expect("lock").values().sum();
    let out = kwin(&["plan", ps]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("fetched"), "{stderr}");
    let after: usize = m.hits.lock().expect("lock").values().sum();
    assert_eq!(before, after, "the record was not used");
}

#[test]
fn a_pin_in_the_plan_wins_and_is_not_fetched() {
    let m = serve(upstream_files());
    let dir = tempfile::tempdir().expect("tmp");
    let p = plan(
        dir.path(),
        m.port,
        &format!(
            "sha256 = {{ \"kubelet.exe\" = \"{}\" }}",
            PINNED.to_uppercase()
        ),
    );
    let out = kwin(&["plan", p.to_str().expect("utf-8")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("checksums: 5 fetched"), "{stderr}");
    assert!(!m
        .hits
        .lock()
        .expect("lock")
        .keys()
        .any(|k| k.ends_with("kubelet.exe.sha256")));
    assert_eq!(
        expanded_sha256(&p, "ww1/kubelet-download").as_deref(),
        Some(PINNED)
    );
}

#[test]
fn a_broken_or_missing_checksum_file_stops_before_any_host() {
    let mut files = upstream_files();
    files.insert(
        "/dl.k8s.io/v1.31.4/bin/windows/amd64/kubeadm.exe.sha256".into(),
        "<html>rate limited</html>".into(),
    );
    files.remove("/github.com/containernetworking/plugins/releases/download/v1.6.1/cni-plugins-windows-amd64-v1.6.1.tgz.sha256");
    let m = serve(files);
    let dir = tempfile::tempdir().expect("tmp");
    let p = plan(dir.path(), m.port, "");
    let out = kwin(&["apply", p.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        all.contains("error[artifact-checksum]: cannot get the checksum of `kubeadm.exe`")
            && all.contains("kubeadm.exe.sha256: it holds no SHA-256"),
        "{all}"
    );
    assert!(
        all.contains("cni-plugins-windows-amd64-v1.6.1.tgz") && all.contains("HTTP 404 Not Found"),
        "{all}"
    );
    assert!(all.contains("hint: pin it in the plan"), "{all}");
    // stopped before connecting: no host was tried, nothing recorded
    assert!(!all.contains("cannot connect to 127.0.0."), "{all}");
    assert!(!dir.path().join(".kwin/checksums.toml").exists());
}

#[test]
fn an_unreachable_mirror_is_named() {
    // a port nothing listens on
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let dir = tempfile::tempdir().expect("tmp");
    let p = plan(dir.path(), port, "");
    let out = kwin(&["plan", p.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "http://127.0.0.1:{port}/dl.k8s.io/v1.31.4/bin/windows/amd64/kubelet.exe.sha256: cannot connect"
        )),
        "{stderr}"
    );
}
