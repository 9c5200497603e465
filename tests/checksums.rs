//! Artifact checksums end to end: `kwin plan` fetches the upstream checksum files a plan needs
//! (here from a mirror served over HTTPS by a small server on loopback, laid out like the
//! upstream sites, its certificate from a CA made for the test and trusted through
//! `SSL_CERT_FILE`), records them in `.kwin/checksums.toml`, and the tasks carry them; pins win;
//! a missing, broken or unreachable checksum file stops the run before any host is contacted,
//! naming the artifact and its URL; `kwin validate` never fetches.
//!
//! Checksum files come only over HTTPS: a plain-HTTP mirror is refused unless every download
//! has a pinned digest, a redirect from https to http is refused, and a record fetched over
//! http earlier is not trusted. Every URL the recipes render with kwin's default versions has a
//! digest (kwin's or the plan's), an https checksum file, or is an https URL kwin fetches itself.
//!
//! An artifact whose upstream publishes no SHA-256 file (flannel's Windows build; the
//! windows-container-networking zip, which has only a SHA-512 file) is fetched by `kwin plan`
//! on the controller, over HTTPS under the same rules, checked against the SHA-512 file where
//! the upstream publishes one, and its SHA-256 recorded by its URL; a SHA-512 mismatch, a plain
//! HTTP URL or redirect, and a file over the size cap are refused.

use kwin_engine::checksums;
use kwin_testkit::kwin;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
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
const KUBE_PROXY: &str = "8888888888888888888888888888888888888888888888888888888888888888";

/// A CA made for one test and a server certificate for 127.0.0.1 it signed (openssl).
struct TestCa {
    dir: tempfile::TempDir,
    config: Arc<rustls::ServerConfig>,
}

impl TestCa {
    fn new() -> TestCa {
        use rustls::pki_types::pem::PemObject;
        let dir = tempfile::tempdir().expect("tmp");
        let d = dir.path();
        std::fs::write(
            d.join("ext"),
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
        )
        .expect("ext");
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        for args in [
            [
                &["req", "-x509"][..],
                &ec[..],
                &[
                    "-keyout",
                    "ca.key",
                    "-out",
                    "ca.pem",
                    "-days",
                    "2",
                    "-subj",
                    "/CN=kwin test CA",
                    "-addext",
                    "basicConstraints=critical,CA:TRUE",
                    "-addext",
                    "keyUsage=critical,keyCertSign,cRLSign",
                ][..],
            ]
            .concat(),
            [
                &["req"][..],
                &ec[..],
                &[
                    "-keyout",
                    "srv.key",
                    "-out",
                    "srv.csr",
                    "-subj",
                    "/CN=127.0.0.1",
                ][..],
            ]
            .concat(),
            vec![
                "x509",
                "-req",
                "-in",
                "srv.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                "srv.pem",
                "-days",
                "2",
                "-extfile",
                "ext",
            ],
        ] {
            let out = Command::new("openssl")
                .args(&args)
                .current_dir(d)
                .output()
                .expect("openssl (the test makes its own CA)");
            assert!(out.status.success(), "openssl {args:?}: {out:?}");
        }
        let certs: Vec<_> = rustls::pki_types::CertificateDer::pem_file_iter(d.join("srv.pem"))
            .expect("srv.pem")
            .collect::<Result<_, _>>()
            .expect("certs");
        let key = rustls::pki_types::PrivateKeyDer::from_pem_file(d.join("srv.key")).expect("key");
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("protocols")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("server config");
        TestCa {
            dir,
            config: Arc::new(config),
        }
    }

    fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }
}

/// Serves `files` (URL path → body; a body `302 <url>` is a redirect there, `BIG <n>` is `n`
/// bytes sent without a Content-Length, `LEN <n>` a Content-Length of `n` and no body) over
/// HTTP/1.1 on loopback — over TLS when given a server config — counting requests per path.
struct Mirror {
    url: String,
    hits: Arc<Mutex<BTreeMap<String, usize>>>,
}

fn answer(stream: &mut (impl Read + Write), files: &BTreeMap<String, String>) -> Option<String> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => break,
            Ok(_) if header.trim().is_empty() => break,
            Ok(_) => {}
        }
    }
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let stream = reader.into_inner();
    if let Some(n) = files
        .get(&path)
        .and_then(|b| b.strip_prefix("BIG "))
        .and_then(|n| n.parse::<usize>().ok())
    {
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
        let chunk = vec![b'x'; 64 * 1024];
        let mut sent = 0;
        while sent < n {
            let k = chunk.len().min(n - sent);
            if stream.write_all(&chunk[..k]).is_err() {
                break; // the client stopped reading
            }
            sent += k;
        }
        let _ = stream.flush();
        return Some(path);
    }
    let resp = match files.get(&path) {
        Some(body) if body.starts_with("302 ") => format!(
            "HTTP/1.1 302 Found\r\nLocation: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            &body[4..]
        ),
        Some(body) if body.starts_with("LEN ") => format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            &body[4..]
        ),
        Some(body) => format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
        None => {
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string()
        }
    };
    let _ = stream.write_all(resp.as_bytes());
    let _ = stream.flush();
    Some(path)
}

fn serve(files: BTreeMap<String, String>, tls: Option<&TestCa>) -> Mirror {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let hits: Arc<Mutex<BTreeMap<String, usize>>> = Arc::default();
    let h = hits.clone();
    let config = tls.map(|t| t.config.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let path = match &config {
                Some(c) => {
                    let Ok(conn) = rustls::ServerConnection::new(c.clone()) else {
                        continue;
                    };
                    let mut tls = rustls::StreamOwned::new(conn, stream);
                    let p = answer(&mut tls, &files);
                    tls.conn.send_close_notify();
                    let _ = tls.flush();
                    p
                }
                None => {
                    let mut stream = stream;
                    answer(&mut stream, &files)
                }
            };
            if let Some(path) = path {
                *h.lock().expect("lock").entry(path).or_default() += 1;
            }
        }
    });
    let scheme = if tls.is_some() { "https" } else { "http" };
    Mirror {
        url: format!("{scheme}://127.0.0.1:{port}"),
        hits,
    }
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
        "/dl.k8s.io/v1.31.4/bin/windows/amd64/kube-proxy.exe.sha256".into(),
        format!("{KUBE_PROXY}\n"),
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

/// A Calico cluster with one Windows worker; hosts on a closed loopback port (never reached:
/// every test here is about what happens before, or fails fast on connect).
fn plan(dir: &Path, mirror: &str, extra: &str) -> PathBuf {
    plan_cni(dir, mirror, "calico", extra)
}

/// The same cluster with `cni` as its pod network (flannel at v0.26.2, Calico at v3.29.7).
fn plan_cni(dir: &Path, mirror: &str, cni: &str, extra: &str) -> PathBuf {
    let p = dir.join("plan.toml");
    // A pod network version kwin has the manifest's digest of, inside the matrix for 1.31.
    let flannel = if cni == "flannel" {
        "flannel = \"v0.26.2\""
    } else {
        "calico = \"v3.29.7\""
    };
    std::fs::write(
        &p,
        format!(
            r#"
[cluster]
name = "sums"
kubernetes_version = "1.31.4"

[cni]
plugin = "{cni}"

[versions]
containerd = "1.7.24"
cni_plugins = "v1.6.1"
{flannel}

[artifacts]
mirror = "{mirror}"
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
private_key = "id_never_used"
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
    // The plan names a key file, which must exist (kwin checks local files before anything
    // runs); no host is ever reached with it.
    std::fs::write(dir.join("id_never_used"), "not a key\n").expect("write key file");
    p
}

fn kwin(args: &[&str], ca: &TestCa) -> std::process::Output {
    kwin!(".")
        .args(args)
        .env("SSL_CERT_FILE", ca.ca_file())
        .env_remove("SSL_CERT_DIR")
        .env("KWIN_TEST_WINRM_PASSWORD", "Passw0rd-for-a-closed-port")
        .env_remove("HTTPS_PROXY")
        .env_remove("HTTP_PROXY")
        .env_remove("https_proxy")
        .env_remove("http_proxy")
        .env_remove("ALL_PROXY")
        .command()
        .output()
        .expect("run kwin")
}

/// kwin's own digests.
fn known() -> Arc<checksums::Known> {
    Arc::new(checksums::Known::parse(kwin_modules::recipes::DIGESTS).expect("plans/digests.toml"))
}

/// The sha256 param of `task` after expanding `plan` with its recorded checksums.
fn expanded_sha256(plan: &Path, task: &str) -> Option<String> {
    let loaded = kwin_engine::plan::load(plan).expect("load");
    let rec = checksums::load_record(&checksums::record_path(&loaded.base_dir.join(".kwin")))
        .expect("record");
    let sums = checksums::Checksums::for_plan(&loaded.file, rec, known());
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
    let ca = TestCa::new();
    let m = serve(upstream_files(), Some(&ca));
    let dir = tempfile::tempdir().expect("tmp");
    let p = plan(dir.path(), &m.url, "");
    let ps = p.to_str().expect("utf-8");

    // validate and graph: no network
    let v = kwin(&["validate", ps], &ca);
    assert!(v.status.success(), "{v:?}");
    assert!(m.hits.lock().expect("lock").is_empty(), "validate fetched");
    assert!(!dir.path().join(".kwin/checksums.toml").exists());

    let out = kwin(&["plan", ps], &ca);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("checksums: 7 fetched"),
        "stderr: {stderr}\nstdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let rec = dir.path().join(".kwin/checksums.toml");
    let text = std::fs::read_to_string(&rec).expect("record written");
    for v in [
        KUBELET, KUBEADM, CONTAINERD, CNI, LOG_RUNNER, CRICTL, KUBE_PROXY,
    ] {
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
    assert_eq!(
        expanded_sha256(&p, "ww1/kube-proxy-download").as_deref(),
        Some(KUBE_PROXY)
    );

    // second run: recorded, nothing fetched
    let before: usize = m.hits.lock().expect("lock").values().sum();
    let out = kwin(&["plan", ps], &ca);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("fetched"), "{stderr}");
    let after: usize = m.hits.lock().expect("lock").values().sum();
    assert_eq!(before, after, "the record was not used");
}

#[test]
fn a_pin_in_the_plan_wins_and_is_not_fetched() {
    let ca = TestCa::new();
    let m = serve(upstream_files(), Some(&ca));
    let dir = tempfile::tempdir().expect("tmp");
    let p = plan(
        dir.path(),
        &m.url,
        &format!(
            "sha256 = {{ \"kubelet.exe\" = \"{}\" }}",
            PINNED.to_uppercase()
        ),
    );
    let out = kwin(&["plan", p.to_str().expect("utf-8")], &ca);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("checksums: 6 fetched"), "{stderr}");
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
    let ca = TestCa::new();
    let m = serve(files, Some(&ca));
    let dir = tempfile::tempdir().expect("tmp");
    let p = plan(dir.path(), &m.url, "");
    let out = kwin(&["apply", p.to_str().expect("utf-8")], &ca);
    assert_eq!(out.status.code(), Some(1));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        all.contains("error[artifact-checksum]: cannot get the checksums of 2 artifacts")
            && all.contains("cannot get the checksum of `kubeadm.exe` from")
            && all.contains("kubeadm.exe.sha256: it holds no SHA-256"),
        "{all}"
    );
    assert!(
        all.contains("cni-plugins-windows-amd64-v1.6.1.tgz") && all.contains("HTTP 404 Not Found"),
        "{all}"
    );
    assert!(all.contains("hint: pin them in the plan"), "{all}");
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
    let ca = TestCa::new();
    let dir = tempfile::tempdir().expect("tmp");
    let p = plan(dir.path(), &format!("https://127.0.0.1:{port}"), "");
    let out = kwin(&["plan", p.to_str().expect("utf-8")], &ca);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "https://127.0.0.1:{port}/dl.k8s.io/v1.31.4/bin/windows/amd64/kubelet.exe.sha256: cannot connect"
        )),
        "{stderr}"
    );
}

fn output_text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_plain_http_mirror_needs_every_digest_pinned() {
    // The same files, over plain HTTP: the checksum files would come over the same
    // unauthenticated connection as the artifacts.
    let ca = TestCa::new();
    let m = serve(upstream_files(), None);
    let dir = tempfile::tempdir().expect("tmp");
    let p = plan(dir.path(), &m.url, "");
    let ps = p.to_str().expect("utf-8");
    let mut refused: Vec<String> = Vec::new();
    for cmd in ["validate", "plan", "apply"] {
        let out = kwin(&[cmd, ps], &ca);
        let all = output_text(&out);
        assert_eq!(out.status.code(), Some(1), "{cmd}: {all}");
        let prefix = format!(
            "error[mirror-http]: artifacts.mirror \"{}\" is plain HTTP, and `",
            m.url
        );
        refused = all
            .lines()
            .filter_map(|l| l.split_once(prefix.as_str()))
            .filter_map(|(_, rest)| rest.split_once('`').map(|(f, _)| f.to_string()))
            .collect();
        for file in [
            "kubelet.exe",
            "kubeadm.exe",
            "containerd-1.7.24-windows-amd64.tar.gz",
            "cni-plugins-windows-amd64-v1.6.1.tgz",
        ] {
            assert!(
                refused.iter().any(|f| f == file),
                "{cmd}: {file} not refused: {all}"
            );
        }
        assert!(!all.contains("cannot connect to 127.0.0."), "{cmd}: {all}");
    }
    assert!(m.hits.lock().expect("lock").is_empty(), "fetched over http");
    assert!(!dir.path().join(".kwin/checksums.toml").exists());

    // With every one of those downloads pinned in the plan, the http mirror is accepted: the
    // manifests and the apt key have kwin's digests.
    let pins: Vec<String> = refused
        .iter()
        .map(|f| format!("\"{f}\" = \"{PINNED}\""))
        .collect();
    let p = plan(
        dir.path(),
        &m.url,
        &format!("sha256 = {{ {} }}", pins.join(", ")),
    );
    let out = kwin(&["validate", p.to_str().expect("utf-8")], &ca);
    assert!(out.status.success(), "{}", output_text(&out));
}

#[test]
fn a_checksum_recorded_from_http_is_not_trusted() {
    // A record an earlier kwin made over a plain-HTTP mirror: not an answer.
    let ca = TestCa::new();
    let dir = tempfile::tempdir().expect("tmp");
    let mirror = "http://127.0.0.1:9";
    let p = plan(dir.path(), mirror, "");
    let mut rec = BTreeMap::new();
    for (file, sum, path) in [
        (
            "kubelet.exe",
            KUBELET,
            "/dl.k8s.io/v1.31.4/bin/windows/amd64/kubelet.exe.sha256",
        ),
        (
            "kubeadm.exe",
            KUBEADM,
            "/dl.k8s.io/v1.31.4/bin/windows/amd64/kubeadm.exe.sha256",
        ),
    ] {
        rec.insert(
            format!("{mirror}{path}"),
            checksums::Recorded {
                file: file.into(),
                sha256: sum.into(),
                ..checksums::Recorded::default()
            },
        );
    }
    kwin_engine::fs::private_dir(&dir.path().join(".kwin")).expect("state dir");
    checksums::save_record(&checksums::record_path(&dir.path().join(".kwin")), &rec)
        .expect("record");
    assert_eq!(expanded_sha256(&p, "ww1/kubelet-download"), None);
    let out = kwin(&["validate", p.to_str().expect("utf-8")], &ca);
    let all = output_text(&out);
    assert!(
        all.contains("`kubelet.exe` has no pinned SHA-256")
            && all.contains("`kubeadm.exe` has no pinned SHA-256"),
        "{all}"
    );
}

#[test]
fn a_redirect_from_https_to_http_is_refused() {
    let ca = TestCa::new();
    let plain = serve(upstream_files(), None);
    let mut files = upstream_files();
    let kubelet = "/dl.k8s.io/v1.31.4/bin/windows/amd64/kubelet.exe.sha256";
    files.insert(kubelet.into(), format!("302 {}{kubelet}", plain.url));
    let m = serve(files, Some(&ca));
    let dir = tempfile::tempdir().expect("tmp");
    let p = plan(dir.path(), &m.url, "");
    let out = kwin(&["plan", p.to_str().expect("utf-8")], &ca);
    let all = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("cannot get the checksum of `kubelet.exe`")
            && all.contains(&format!("redirected to {}{kubelet}", plain.url))
            && all.contains("only over https"),
        "{all}"
    );
    assert!(
        plain.hits.lock().expect("lock").is_empty(),
        "followed to http"
    );
    assert!(!dir.path().join(".kwin/checksums.toml").exists());
}

/// flannel's Windows build and the windows-container-networking zip as a mirror serves them
/// (contents made up: kwin never looks inside), with the SHA-512 file the latter publishes.
const FLANNEL_TGZ: &str =
    "/github.com/flannel-io/flannel/releases/download/v0.26.2/flannel-v0.26.2-windows-amd64.tar.gz";
const SDN_ZIP: &str = "/github.com/microsoft/windows-container-networking/releases/download/v0.3.1/windows-container-networking-cni-amd64-v0.3.1.zip";
const FLANNEL_BODY: &str = "flanneld.exe, mk-docker-opts.sh and README.md, gzipped\n";
const SDN_BODY: &str = "sdnoverlay.exe, sdnbridge.exe and nat.exe, zipped\n";
const FLANNEL_CNI: &str = "9999999999999999999999999999999999999999999999999999999999999999";

fn sha256_hex(b: &[u8]) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(b))
}

fn sha512_hex(b: &[u8]) -> String {
    use sha2::Digest;
    hex(&sha2::Sha512::digest(b))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// What a flannel cluster with Windows nodes downloads, beyond [`upstream_files`].
fn flannel_files() -> BTreeMap<String, String> {
    let mut f = upstream_files();
    f.insert(
        "/github.com/flannel-io/cni-plugin/releases/download/v1.9.1-flannel3/cni-plugin-flannel-windows-amd64-v1.9.1-flannel3.tgz.sha256".into(),
        format!("{FLANNEL_CNI}  cni-plugin-flannel-windows-amd64-v1.9.1-flannel3.tgz\n"),
    );
    f.insert(FLANNEL_TGZ.into(), FLANNEL_BODY.into());
    f.insert(SDN_ZIP.into(), SDN_BODY.into());
    // What `shasum -a 512 ./release/<zip> > <zip>.sha512` writes (microsoft/
    // windows-container-networking Makefile, target `release`, at v0.3.1).
    f.insert(
        format!("{SDN_ZIP}.sha512"),
        format!(
            "{}  ./release/windows-container-networking-cni-amd64-v0.3.1.zip\n",
            sha512_hex(SDN_BODY.as_bytes())
        ),
    );
    f
}

#[test]
fn artifacts_without_a_sha256_file_are_hashed_on_the_controller_and_recorded() {
    let ca = TestCa::new();
    let m = serve(flannel_files(), Some(&ca));
    let dir = tempfile::tempdir().expect("tmp");
    let p = plan_cni(dir.path(), &m.url, "flannel", "");
    let ps = p.to_str().expect("utf-8");

    // validate needs no pin for them, and fetches nothing
    let v = kwin(&["validate", ps], &ca);
    assert!(v.status.success(), "{}", output_text(&v));
    assert!(m.hits.lock().expect("lock").is_empty(), "validate fetched");

    let out = kwin(&["plan", ps], &ca);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("checksums: 2 computed from the artifacts themselves")
            && stderr.contains("flannel-v0.26.2-windows-amd64.tar.gz")
            && stderr.contains(
                "windows-container-networking-cni-amd64-v0.3.1.zip (checked against its SHA-512 file)"
            ),
        "{}",
        output_text(&out)
    );
    let flannel = sha256_hex(FLANNEL_BODY.as_bytes());
    let sdn = sha256_hex(SDN_BODY.as_bytes());
    // recorded by the artifact's URL, 0600
    let rec = checksums::load_record(&dir.path().join(".kwin/checksums.toml")).expect("record");
    let by_url = |path: &str| {
        rec.get(&format!("{}{path}", m.url))
            .unwrap_or_else(|| panic!("{path} not recorded: {rec:?}"))
    };
    assert_eq!(by_url(FLANNEL_TGZ).sha256, flannel);
    assert_eq!(
        by_url(FLANNEL_TGZ).file,
        "flannel-v0.26.2-windows-amd64.tar.gz"
    );
    assert_eq!(by_url(SDN_ZIP).sha256, sdn);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.path().join(".kwin/checksums.toml"))
        .expect("meta")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    // the node's download and unpack steps check exactly those
    assert_eq!(
        expanded_sha256(&p, "ww1/flanneld-download").as_deref(),
        Some(flannel.as_str())
    );
    assert_eq!(
        expanded_sha256(&p, "ww1/flanneld-unpack").as_deref(),
        Some(flannel.as_str())
    );
    assert_eq!(
        expanded_sha256(&p, "ww1/sdn-cni-download").as_deref(),
        Some(sdn.as_str())
    );

    // second run: recorded, nothing fetched
    let before: usize = m.hits.lock().expect("lock").values().sum();
    let out = kwin(&["plan", ps], &ca);
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("checksums:"),
        "{}",
        output_text(&out)
    );
    let after: usize = m.hits.lock().expect("lock").values().sum();
    assert_eq!(before, after, "the record was not used");
}

/// `kwin plan` on `files` served over TLS fails before any host and records nothing; its
/// output.
fn plan_refused(files: BTreeMap<String, String>) -> String {
    let ca = TestCa::new();
    let m = serve(files, Some(&ca));
    let dir = tempfile::tempdir().expect("tmp");
    let p = plan_cni(dir.path(), &m.url, "flannel", "");
    let out = kwin(&["plan", p.to_str().expect("utf-8")], &ca);
    let all = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(!all.contains("cannot connect to 127.0.0."), "{all}");
    assert!(
        !dir.path().join(".kwin/checksums.toml").exists(),
        "recorded after a refusal: {all}"
    );
    all
}

#[test]
fn an_artifact_that_does_not_match_its_sha512_file_is_refused() {
    let mut files = flannel_files();
    files.insert(
        SDN_ZIP.into(),
        "a zip that is not the one the SHA-512 file names\n".into(),
    );
    let all = plan_refused(files);
    assert!(
        all.contains(
            "error[artifact-checksum]: cannot get the checksum of 1 artifact"
        ) && all.contains(
            "cannot get the checksum of `windows-container-networking-cni-amd64-v0.3.1.zip` from"
        ) && all.contains("does not match the SHA-512")
            && all.contains(".zip.sha512"),
        "{all}"
    );
    // a SHA-512 file that is missing is an error too, never a skipped check
    let mut files = flannel_files();
    files.remove(&format!("{SDN_ZIP}.sha512"));
    let all = plan_refused(files);
    assert!(all.contains(".zip.sha512: HTTP 404 Not Found"), "{all}");
}

#[test]
fn an_artifact_is_fetched_only_over_https() {
    // a redirect from the https mirror to plain http
    let plain = serve(flannel_files(), None);
    let mut files = flannel_files();
    files.insert(
        FLANNEL_TGZ.into(),
        format!("302 {}{FLANNEL_TGZ}", plain.url),
    );
    let all = plan_refused(files);
    assert!(
        all.contains("cannot get the checksum of `flannel-v0.26.2-windows-amd64.tar.gz`")
            && all.contains(&format!("redirected to {}{FLANNEL_TGZ}", plain.url))
            && all.contains("only over https"),
        "{all}"
    );
    assert!(
        plain.hits.lock().expect("lock").is_empty(),
        "followed to http"
    );

    // a plain-HTTP mirror: refused before anything is fetched, the artifacts named
    let ca = TestCa::new();
    let m = serve(flannel_files(), None);
    let dir = tempfile::tempdir().expect("tmp");
    let p = plan_cni(dir.path(), &m.url, "flannel", "");
    for cmd in ["validate", "plan"] {
        let out = kwin(&[cmd, p.to_str().expect("utf-8")], &ca);
        let all = output_text(&out);
        assert_eq!(out.status.code(), Some(1), "{cmd}: {all}");
        for file in [
            "flannel-v0.26.2-windows-amd64.tar.gz",
            "windows-container-networking-cni-amd64-v0.3.1.zip",
        ] {
            assert!(
                all.contains(&format!(
                    "error[mirror-http]: artifacts.mirror \"{}\" is plain HTTP, and `{file}` has no pinned SHA-256",
                    m.url
                )),
                "{cmd}: {file} not refused: {all}"
            );
        }
    }
    assert!(m.hits.lock().expect("lock").is_empty(), "fetched over http");
}

/// Largest artifact kwin hashes on the controller (engine `checksums::MAX_ARTIFACT_BYTES`).
const ARTIFACT_CAP: usize = 64 * 1024 * 1024;

#[test]
fn an_artifact_over_the_size_cap_is_refused() {
    // announced too large: refused without reading it
    let mut files = flannel_files();
    files.insert(FLANNEL_TGZ.into(), format!("LEN {}", ARTIFACT_CAP + 1));
    let all = plan_refused(files);
    assert!(
        all.contains("cannot get the checksum of `flannel-v0.26.2-windows-amd64.tar.gz`")
            && all.contains("larger than 64 MiB"),
        "{all}"
    );
    // sent without a length: cut at the cap
    let mut files = flannel_files();
    files.insert(FLANNEL_TGZ.into(), format!("BIG {}", ARTIFACT_CAP + 1));
    let all = plan_refused(files);
    assert!(
        all.contains("cannot get the checksum of `flannel-v0.26.2-windows-amd64.tar.gz`")
            && all.contains("larger than 64 MiB"),
        "{all}"
    );
}

/// Every string under `v` that looks like a URL, with the path of keys to it.
fn urls(v: &serde_json::Value, path: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    match v {
        serde_json::Value::String(s) if s.starts_with("http://") || s.starts_with("https://") => {
            out.push((path.clone(), s.clone()))
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                path.push(i.to_string());
                urls(x, path, out);
                path.pop();
            }
        }
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                path.push(k.clone());
                urls(x, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// The value at `path` in `v`.
fn at<'a>(v: &'a serde_json::Value, path: &[String]) -> &'a serde_json::Value {
    path.iter().fold(v, |v, k| match v {
        serde_json::Value::Array(a) => k
            .parse::<usize>()
            .ok()
            .and_then(|i| a.get(i))
            .unwrap_or(&serde_json::Value::Null),
        _ => v.get(k).unwrap_or(&serde_json::Value::Null),
    })
}

/// The CNI manifests kwin applies at its default versions (flannel's kube-flannel.yml, Calico's
/// tigera-operator.yaml) are pinned by kwin's own digests: no fetch and no trust on first use
/// for what runs with cluster-admin rights.
#[test]
fn the_default_cni_manifests_are_pinned_by_kwins_digests() {
    let dir = tempfile::tempdir().expect("tmp");
    let newest = kwin_engine::plan::support::newest_release();
    for (cni, task) in [
        ("flannel", "cp1/flannel"),
        ("calico", "cp1/tigera-operator"),
    ] {
        let plan = dir.path().join(format!("{cni}.toml"));
        std::fs::write(
            &plan,
            format!(
                "[cluster]\nname = \"lab\"\nkubernetes_version = \"{newest}\"\n[cni]\nplugin = \"{cni}\"\n[[hosts]]\nname = \"cp1\"\naddress = \"192.168.56.10\"\nos = \"linux\"\nrole = \"control-plane\"\n"
            ),
        )
        .expect("plan");
        let sha = expanded_sha256(&plan, task);
        assert!(
            sha.as_deref().is_some_and(|h| h.len() == 64),
            "{task} at the default {cni} version has no digest of kwin's: {sha:?}"
        );
    }
}

#[test]
fn every_default_url_has_a_digest_or_an_https_checksum_file() {
    // Plans that together take every branch of the recipes that downloads something, with
    // kwin's default versions (and no mirror, no pins, no record). Downloads other work
    // streams add to the recipes are rendered and checked the same way.
    let base = |extra: &str, windows: bool| {
        format!(
            r#"
[cluster]
name = "lab"
kubernetes_version = "1.31.4"
{extra}
[[hosts]]
name = "cp1"
address = "192.168.56.10"
os = "linux"
role = "control-plane"
[[hosts]]
name = "lw1"
address = "192.168.56.11"
os = "linux"
role = "worker"
{}"#,
            if windows {
                "[[hosts]]\nname = \"ww1\"\naddress = \"192.168.56.21\"\nos = \"windows\"\nrole = \"worker\"\npassword_env = \"KWIN_WINDOWS_PASSWORD\"\n"
            } else {
                ""
            }
        )
    };
    let plans = [
        base("[cni]\nplugin = \"flannel\"\n", true),
        base(
            "[cni]\nplugin = \"flannel\"\nbackend = \"host-gw\"\n",
            false,
        ),
        base("[cni]\nplugin = \"calico\"\n", true),
        base(
            "[cni]\nplugin = \"flannel\"\n[runtime]\ncontainerd_source = \"release\"\n",
            false,
        ),
        base(
            "[cni]\nplugin = \"calico\"\n[runtime]\nlinux = \"docker\"\ncri_dockerd = true\n",
            false,
        ),
    ];
    let mut seen = 0;
    let mut problems = Vec::new();
    for text in &plans {
        let plan = kwin_engine::plan::load_str(Path::new("/lab/plan.toml"), text)
            .unwrap_or_else(|d| panic!("{d}"));
        let sums = checksums::Checksums::for_plan(&plan.file, BTreeMap::new(), known());
        let tasks = kwin_engine::expand::expand_with(&plan, kwin_modules::recipes::RECIPES, &sums)
            .unwrap_or_else(|d| panic!("{d}"));
        let wanted = sums.wanted();
        for t in &tasks {
            let mut found = Vec::new();
            urls(&t.params, &mut Vec::new(), &mut found);
            for (path, url) in found {
                seen += 1;
                let key = path.last().map(String::as_str).unwrap_or("");
                let parent = &path[..path.len() - 1];
                let sibling = |k: &str| {
                    let mut p = parent.to_vec();
                    p.push(k.to_string());
                    at(&t.params, &p).as_str().map(str::to_string)
                };
                let ok = match key {
                    // a download, an archive or a manifest: its SHA-256, an https checksum
                    // file to fetch it from, or (no SHA-256 file published) the artifact's own
                    // https URL, which kwin fetches and hashes on the controller
                    "url" if parent.last().map(String::as_str) != Some("repository") => {
                        let file = url.rsplit('/').next().unwrap_or("");
                        sibling("sha256").is_some_and(|h| h.len() == 64)
                            || wanted.iter().any(|w| {
                                w.file == file
                                    && match &w.sums_url {
                                        Some(u) => u.starts_with("https://"),
                                        None => {
                                            w.url.as_deref() == Some(url.as_str())
                                                && url.starts_with("https://")
                                        }
                                    }
                            })
                    }
                    // a package repository: its metadata is verified by the package manager
                    // with the key, and the key by its fingerprint
                    "url" => sibling("key_fingerprint").is_some_and(|f| f.len() == 40),
                    "key_url" => sibling("key_fingerprint").is_some_and(|f| f.len() == 40),
                    _ => false,
                };
                if !ok {
                    problems.push(format!("{} `{}` = {url}", t.id, path.join(".")));
                }
            }
        }
    }
    assert!(seen >= 12, "only {seen} URLs rendered");
    assert!(
        problems.is_empty(),
        "URLs the recipes render with neither a digest (plans/digests.toml or the plan) nor an https checksum file, and that kwin would not fetch itself over https:\n{}",
        problems.join("\n")
    );
}

/// The `[artifacts.sha256]` table in `text`: from its header line to the first line that is
/// neither a key, a comment nor blank-with-more-to-come, as printed; parsed with the toml crate.
fn printed_table(text: &str) -> (String, BTreeMap<String, String>) {
    let start = text
        .lines()
        .position(|l| l.trim() == "[artifacts.sha256]")
        .unwrap_or_else(|| panic!("no [artifacts.sha256] table in: {text}"));
    let block: Vec<&str> = text
        .lines()
        .skip(start)
        .enumerate()
        .take_while(|(i, l)| {
            let l = l.trim();
            *i == 0 || l.starts_with('#') || l.starts_with('"')
        })
        .map(|(_, l)| l)
        .collect();
    let block = block.join("\n");
    let parsed: toml::Table = toml::from_str(&block)
        .unwrap_or_else(|e| panic!("the printed table is not valid TOML: {e}\n{block}"));
    let sha = parsed
        .get("artifacts")
        .and_then(|a| a.get("sha256"))
        .and_then(|s| s.as_table())
        .unwrap_or_else(|| panic!("no artifacts.sha256 in {block}"))
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect();
    (block, sha)
}

/// A port on loopback nothing listens on: a controller without a network route to the
/// mirror (or the internet).
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// Every checksum the flannel test cluster needs from the network, by file name.
fn flannel_needs() -> BTreeMap<&'static str, String> {
    BTreeMap::from([
        ("kubelet.exe", KUBELET.to_string()),
        ("kubeadm.exe", KUBEADM.to_string()),
        ("kube-proxy.exe", KUBE_PROXY.to_string()),
        ("kube-log-runner.exe", LOG_RUNNER.to_string()),
        (
            "containerd-1.7.24-windows-amd64.tar.gz",
            CONTAINERD.to_string(),
        ),
        ("cni-plugins-windows-amd64-v1.6.1.tgz", CNI.to_string()),
        ("crictl-v1.31.0-windows-amd64.tar.gz", CRICTL.to_string()),
        (
            "cni-plugin-flannel-windows-amd64-v1.9.1-flannel3.tgz",
            FLANNEL_CNI.to_string(),
        ),
        (
            "flannel-v0.26.2-windows-amd64.tar.gz",
            sha256_hex(FLANNEL_BODY.as_bytes()),
        ),
        (
            "windows-container-networking-cni-amd64-v0.3.1.zip",
            sha256_hex(SDN_BODY.as_bytes()),
        ),
    ])
}

#[test]
fn without_a_network_plan_names_every_pin_and_prints_a_table_to_fill() {
    let ca = TestCa::new();
    let dir = tempfile::tempdir().expect("tmp");
    let mirror = format!("https://127.0.0.1:{}", closed_port());
    let p = plan_cni(dir.path(), &mirror, "flannel", "");
    let out = kwin(&["plan", p.to_str().expect("utf-8")], &ca);
    let all = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(!all.contains("cannot connect to 127.0.0."), "{all}");
    // one error, at a place in the plan
    let errors: Vec<&str> = all
        .lines()
        .filter(|l| l.contains("error[artifact-checksum]"))
        .collect();
    assert_eq!(errors.len(), 1, "{all}");
    assert!(
        errors[0].starts_with(&format!("{}:", p.display())),
        "no plan location: {all}"
    );
    // every artifact, with where its checksum would come from and which step on which host
    // needs it
    let needs = flannel_needs();
    for file in needs.keys() {
        assert!(
            all.contains(&format!("`{file}`")),
            "{file} not named: {all}"
        );
    }
    assert!(
        all.contains(&format!(
            "{mirror}/dl.k8s.io/v1.31.4/bin/windows/amd64/kubelet.exe.sha256"
        )) && all.contains(&format!("{mirror}{FLANNEL_TGZ}")),
        "{all}"
    );
    assert!(
        all.contains("step `kubelet-download` of recipe `windows-worker` on ww1")
            && all.contains("step `flanneld-download` of recipe `windows-worker` on ww1"),
        "{all}"
    );
    assert!(
        all.contains("kwin checksums") && all.contains("on a machine that can reach"),
        "{all}"
    );
    // the table: valid TOML as printed, one placeholder per artifact, keyed by file name
    let (block, table) = printed_table(&all);
    let keys: Vec<&str> = table.keys().map(String::as_str).collect();
    let want: Vec<&str> = needs.keys().copied().collect();
    assert_eq!(keys, want, "{block}");
    assert!(table.values().all(|v| v.starts_with('<')), "{block}");
    assert!(!dir.path().join(".kwin/checksums.toml").exists());

    // filled in and pasted into the plan, the same controller gets past the checksums: the
    // run stops only at the hosts, which nothing here answers
    let filled = needs
        .iter()
        .fold(block.clone(), |b, (f, h)| b.replace(&table[*f], h));
    let p = plan_cni(dir.path(), &mirror, "flannel", &filled);
    let v = kwin(&["validate", p.to_str().expect("utf-8")], &ca);
    assert!(v.status.success(), "{}", output_text(&v));
    let out = kwin(&["plan", p.to_str().expect("utf-8")], &ca);
    let all = output_text(&out);
    assert!(
        !all.contains("artifact-checksum") && all.contains("cannot connect to 127.0.0."),
        "{all}"
    );
}

#[test]
fn kwin_checksums_fetches_the_table_for_an_air_gapped_controller() {
    let ca = TestCa::new();
    let m = serve(flannel_files(), Some(&ca));
    let connected = tempfile::tempdir().expect("tmp");
    let p = plan_cni(connected.path(), &m.url, "flannel", "");
    let ps = p.to_str().expect("utf-8");
    let out = kwin(&["checksums", ps], &ca);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{}", output_text(&out));
    let (_, table) = printed_table(&stdout);
    let want: BTreeMap<String, String> = flannel_needs()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    assert_eq!(table, want, "{stdout}");
    // recorded as `kwin plan` records them
    assert!(connected.path().join(".kwin/checksums.toml").exists());

    // `--write`: the same table in a file, now from the record (nothing fetched again),
    // a new file of its own: a link planted at the name gets nothing
    let before: usize = m.hits.lock().expect("lock").values().sum();
    let file = connected.path().join("pins.toml");
    let victim = connected.path().join("victim");
    std::fs::write(&victim, "victim\n").expect("write");
    std::os::unix::fs::symlink(&victim, &file).expect("symlink");
    let out = kwin(
        &["checksums", ps, "--write", file.to_str().expect("utf-8")],
        &ca,
    );
    assert!(out.status.success(), "{}", output_text(&out));
    let after: usize = m.hits.lock().expect("lock").values().sum();
    assert_eq!(before, after, "fetched again");
    let written = std::fs::read_to_string(&file).expect("written");
    let (_, again) = printed_table(&written);
    assert_eq!(again, want, "{written}");
    assert_eq!(std::fs::read_to_string(&victim).expect("read"), "victim\n");
    assert!(std::fs::symlink_metadata(&file).expect("pins").is_file());

    // the air-gapped controller: no record, no route to the mirror; the table pasted into
    // its plan, `kwin validate` and `kwin plan` never need the network for a checksum
    let gapped = tempfile::tempdir().expect("tmp");
    let offline = format!("https://127.0.0.1:{}", closed_port());
    let p = plan_cni(gapped.path(), &offline, "flannel", &written);
    let ps = p.to_str().expect("utf-8");
    let v = kwin(&["validate", ps], &ca);
    assert!(v.status.success(), "{}", output_text(&v));
    let out = kwin(&["plan", ps], &ca);
    let all = output_text(&out);
    assert!(
        !all.contains("artifact-checksum")
            && !all.contains("checksums:")
            && all.contains("cannot connect to 127.0.0."),
        "{all}"
    );
    assert!(!gapped.path().join(".kwin/checksums.toml").exists());
    // and `kwin checksums` there has nothing left to fetch
    let out = kwin(&["checksums", ps], &ca);
    assert!(out.status.success(), "{}", output_text(&out));
    let (_, rest) = printed_table(&String::from_utf8_lossy(&out.stdout));
    assert!(rest.is_empty(), "{rest:?}");
}
