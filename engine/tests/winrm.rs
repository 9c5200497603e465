//! The WinRM transport against the lab's WinRM stand-in host (lab/winrm-stand-in): a real
//! WS-Management server with pyspnego's NTLM acceptor and message sealing, which runs the
//! scripts it receives with /bin/sh. Each test starts its own server on loopback ports.
//!
//! The stand-in is the test kit's ([`kwin_testkit::winrm`]; its venv is created by
//! lab/winrm-stand-in/setup.sh when missing). Lab tests: ignored by `cargo test`, failing
//! when run without root or when the stand-in cannot be set up.
#![allow(clippy::print_stderr)] // skip notices and measurements

use kwin_engine::plan::{SecretSource, WinrmAuth, WinrmSpec};
use kwin_engine::transport::winrm::{Dialect, WinrmTransport, STDIN_CHUNK};
use kwin_engine::transport::{Transport, TransportError};
use kwin_testkit::winrm::{lab_file, python, Server};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const USER: &str = "kwin";
const PASSWORD: &str = "S3cret!kwin";
const T: Duration = Duration::from_secs(30);

struct StandIn {
    server: Server,
    http: String,
    https: String,
    fingerprint: String,
    state: tempfile::TempDir,
    password_file: PathBuf,
}

impl StandIn {
    fn start(extra: &[&str]) -> StandIn {
        Self::start_with(extra, |_, _| {})
    }

    /// Start a stand-in after `prepare(python, state dir)` (e.g. to install a certificate).
    fn start_with(extra: &[&str], prepare: impl FnOnce(&Path, &Path)) -> StandIn {
        let py = python();
        let state = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(state.path().join("host")).expect("state dir");
        prepare(&py, state.path());
        let password_file = state.path().join("password");
        std::fs::write(&password_file, format!("{PASSWORD}\n")).expect("password file");
        let log = std::fs::File::create(state.path().join("server.log")).expect("log");
        let mut cmd = Command::new(py);
        cmd.arg(lab_file("server.py"))
            .args([
                "--http",
                "127.0.0.1:0",
                "--https",
                "127.0.0.1:0",
                "--user",
                USER,
            ])
            .args(["--password-env", "KWIN_TEST_WINRM_PASSWORD", "--state"])
            .arg(state.path().join("host"))
            .args(extra)
            .env("KWIN_TEST_WINRM_PASSWORD", PASSWORD)
            .stderr(log);
        let server = Server::spawn(cmd);
        let sums =
            std::fs::read_to_string(state.path().join("host/cert.sha256")).expect("cert.sha256");
        let fingerprint = sums.lines().nth(1).expect("line 2").trim().to_string();
        StandIn {
            http: server.addr("http="),
            https: server.addr("https="),
            fingerprint,
            server,
            state,
            password_file,
        }
    }

    fn home(&self) -> PathBuf {
        self.state.path().join("host/home")
    }

    fn spec(&self, https: bool, auth: WinrmAuth) -> WinrmSpec {
        let addr = if https { &self.https } else { &self.http };
        let (host, port) = addr.rsplit_once(':').expect("host:port");
        WinrmSpec {
            address: host.to_string(),
            port: port.parse().expect("port"),
            user: USER.to_string(),
            password: SecretSource::File(self.password_file.clone()),
            https,
            auth,
            cert_fingerprint: https.then(|| self.fingerprint.clone()),
            ca_file: None,
            insecure: false,
            connect_timeout_secs: 30,
        }
    }

    fn transport(&self, spec: &WinrmSpec) -> WinrmTransport {
        WinrmTransport::new("win1", spec)
            .expect("transport")
            .with_script_dialect(Dialect::PosixStandIn)
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log =
                std::fs::read_to_string(self.state.path().join("server.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            eprintln!("--- stand-in log (last lines) ---");
            for l in tail.iter().rev() {
                eprintln!("{l}");
            }
        }
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

kwin_testkit::lab_test! {
#[tokio::test]
async fn ntlm_over_http_with_encryption_runs_scripts() {
    let s = StandIn::start(&[]);
    let t = s.transport(&s.spec(false, WinrmAuth::Ntlm));
    let started = Instant::now();
    t.connect().await.expect("connect");
    let connect_time = started.elapsed();

    let out = t
        .run("echo hello; echo oops >&2; exit 3", T)
        .await
        .expect("run");
    assert_eq!(text(&out.stdout), "hello\n");
    assert_eq!(text(&out.stderr), "oops\n");
    assert_eq!(out.exit, 3);

    let out = t
        .run("printf 'a\\0b'; printf 'é ✓ 한국어\\n'", T)
        .await
        .expect("run");
    assert_eq!(out.stdout, "a\0bé ✓ 한국어\n".as_bytes());
    assert!(out.success());

    // Output bigger than one Receive envelope (~500 KiB), stdout and stderr interleaved.
    let out = t
        .run(
            "head -c 3000000 /dev/zero | tr '\\0' x; echo; echo done >&2",
            T,
        )
        .await
        .expect("run");
    assert_eq!(out.stdout.len(), 3_000_001);
    assert!(out.stdout[..3_000_000].iter().all(|&b| b == b'x'));
    assert_eq!(text(&out.stderr), "done\n");

    // Round trips on the one authenticated connection.
    let before = t.stats().await;
    let n = 20;
    let started = Instant::now();
    for i in 0..n {
        let out = t.run(&format!("echo {i}"), T).await.expect("run");
        assert_eq!(text(&out.stdout), format!("{i}\n"));
    }
    let per_run = started.elapsed() / n;
    let after = t.stats().await;
    assert_eq!(after.connections, 1, "one connection, authenticated once");
    let requests_per_run = (after.requests - before.requests) / u64::from(n);
    eprintln!(
        "winrm http+ntlm+encryption on loopback: connect+auth {connect_time:?}, \
         run round trip {per_run:?} ({requests_per_run} requests per run)"
    );
}
}

kwin_testkit::lab_test! {
#[tokio::test]
async fn clixml_stderr_and_utf16_stdout_are_decoded() {
    let s = StandIn::start(&[]);
    let t = s.transport(&s.spec(false, WinrmAuth::Ntlm));
    // What powershell.exe writes to a redirected stderr for `Write-Error "bad"`.
    let script = r#"printf '%s' '#< CLIXML
<Objs Version="1.1.0.1" xmlns="http://schemas.microsoft.com/powershell/2004/04"><Obj S="progress" RefId="0"><TN RefId="0"><T>System.Management.Automation.PSCustomObject</T><T>System.Object</T></TN><MS><I64 N="SourceId">1</I64><PR N="Record"><AV>Preparing modules for first use.</AV><AI>0</AI><Nil /><PI>-1</PI><PC>-1</PC><T>Completed</T><SR>-1</SR><SD> </SD></PR></MS></Obj><S S="Error">Write-Error "bad" : bad_x000D__x000A_</S><S S="Error">    + FullyQualifiedErrorId : Microsoft.PowerShell.Commands.WriteErrorException_x000D__x000A_</S></Objs>' >&2
printf '\377\376h\000i\000\r\000\n\000'
exit 1"#;
    let out = t.run(script, T).await.expect("run");
    assert_eq!(
        text(&out.stderr),
        "Write-Error \"bad\" : bad\n    + FullyQualifiedErrorId : Microsoft.PowerShell.Commands.WriteErrorException\n"
    );
    assert_eq!(text(&out.stdout), "hi\r\n");
    assert_eq!(out.exit, 1);
}
}

kwin_testkit::lab_test! {
#[tokio::test]
async fn scripts_longer_than_a_command_line_go_over_stdin() {
    let s = StandIn::start(&[]);
    let t = s.transport(&s.spec(false, WinrmAuth::Ntlm));
    // 50 KB: far over cmd.exe's 8191 characters (the stand-in refuses such command lines).
    let mut script = String::new();
    for i in 0..2000 {
        script.push_str(&format!("v{i}=\"line {i} of a long script\"\n"));
    }
    script.push_str("echo \"$v0 / $v1999\"\n");
    assert!(script.len() > 50_000);
    let out = t.run(&script, T).await.expect("run");
    assert_eq!(
        text(&out.stdout),
        "line 0 of a long script / line 1999 of a long script\n"
    );

    // 1 MB of script: several Sends, each under the envelope limit.
    let filler = format!("# {}\n", "x".repeat(1000)).repeat(1000);
    let before = t.stats().await.requests;
    let big = format!("{filler}echo end");
    let out = t.run(&big, T).await.expect("run");
    assert_eq!(text(&out.stdout), "end\n");
    let requests = t.stats().await.requests - before;
    let sends = big.len().div_ceil(STDIN_CHUNK) as u64;
    assert!(sends >= 5);
    // command + the Sends + at least one receive + signal
    assert!(
        requests >= sends + 3,
        "1 MB of stdin in 200 KiB Sends: {requests} requests"
    );
}
}

kwin_testkit::lab_test! {
#[tokio::test]
async fn basic_over_https_with_pinned_self_signed_certificate() {
    let s = StandIn::start(&[]);
    let t = s.transport(&s.spec(true, WinrmAuth::Basic));
    t.connect().await.expect("connect");
    let out = t.run("echo basic; exit 7", T).await.expect("run");
    assert_eq!(text(&out.stdout), "basic\n");
    assert_eq!(out.exit, 7);
    // The pin may be written with colons and upper case, as the stand-in prints it.
    let mut spec = s.spec(true, WinrmAuth::Basic);
    let pin = spec.cert_fingerprint.take().expect("pin");
    let colons: Vec<String> = pin
        .as_bytes()
        .chunks(2)
        .map(|c| String::from_utf8_lossy(c).to_uppercase())
        .collect();
    spec.cert_fingerprint = Some(colons.join(":"));
    let out = s.transport(&spec).run("echo again", T).await.expect("run");
    assert_eq!(text(&out.stdout), "again\n");
}
}

kwin_testkit::lab_test! {
#[tokio::test]
async fn ntlm_over_https_sends_the_channel_binding() {
    // strict: the server requires a correct tls-server-end-point binding in AUTHENTICATE
    let s = StandIn::start(&["--cbt-hardening", "strict"]);
    let t = s.transport(&s.spec(true, WinrmAuth::Ntlm));
    let started = Instant::now();
    t.connect().await.expect("connect");
    let connect_time = started.elapsed();
    let out = t.run("echo tls; echo err >&2", T).await.expect("run");
    assert_eq!(text(&out.stdout), "tls\n");
    assert_eq!(text(&out.stderr), "err\n");
    assert_eq!(t.stats().await.connections, 1);
    let started = Instant::now();
    for _ in 0..10 {
        t.run("true", T).await.expect("run");
    }
    eprintln!(
        "winrm https+ntlm on loopback: connect+tls+auth {connect_time:?}, run round trip {:?}",
        started.elapsed() / 10
    );
}
}

kwin_testkit::lab_test! {
#[tokio::test]
async fn wrong_pinned_fingerprint_is_refused() {
    let s = StandIn::start(&[]);
    let mut spec = s.spec(true, WinrmAuth::Basic);
    let wrong = "ab".repeat(32);
    spec.cert_fingerprint = Some(wrong.clone());
    let err = s.transport(&spec).connect().await.expect_err("must refuse");
    let msg = err.to_string();
    assert!(matches!(err, TransportError::Tls(_)), "{err:?}");
    assert!(
        msg.contains(&wrong) && msg.contains(&s.fingerprint),
        "{msg}"
    );
    assert!(!err.is_retryable());
}
}

kwin_testkit::lab_test! {
#[tokio::test]
async fn self_signed_certificate_without_pin_is_refused() {
    let s = StandIn::start(&[]);
    let mut spec = s.spec(true, WinrmAuth::Ntlm);
    spec.cert_fingerprint = None;
    let err = s
        .transport(&spec)
        .run("echo no", T)
        .await
        .expect_err("must refuse");
    assert!(matches!(err, TransportError::Tls(_)), "{err:?}");
    // Named in the form a pin takes (`aa:bb:…`).
    assert!(
        err.to_string()
            .replace(':', "")
            .to_ascii_lowercase()
            .contains(&s.fingerprint.replace(':', "").to_ascii_lowercase()),
        "names the fingerprint to pin: {err}"
    );

    assert!(!err.is_retryable());

    // insecure accepts it (the explicit opt-in).
    spec.ca_file = None;
    spec.insecure = true;
    let out = s
        .transport(&spec)
        .run("echo insecure", T)
        .await
        .expect("run insecure");
    assert_eq!(text(&out.stdout), "insecure\n");
}
}

/// Writes a CA (STATE/ca.pem) and a certificate it issued for `localhost` only (no IP
/// address) as the stand-in's certificate.
const MAKE_CA_SIGNED_CERT: &str = r#"
import datetime, sys
from cryptography import x509
from cryptography.x509.oid import NameOID, ExtendedKeyUsageOID
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
state = sys.argv[1]
now = datetime.datetime.now(datetime.timezone.utc)
def name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
def builder(subject, issuer, key):
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30)))
ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
ca = (builder(name("kwin test ca"), name("kwin test ca"), ca_key)
      .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
      .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                     key_encipherment=False, data_encipherment=False, key_agreement=False,
                     key_cert_sign=True, crl_sign=True, encipher_only=False,
                     decipher_only=False), critical=True)
      .sign(ca_key, hashes.SHA256()))
key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
leaf = (builder(name("win1"), name("kwin test ca"), key)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256()))
pem = serialization.Encoding.PEM
open(state + "/ca.pem", "wb").write(ca.public_bytes(pem))
open(state + "/host/cert.pem", "wb").write(leaf.public_bytes(pem))
open(state + "/host/key.pem", "wb").write(key.private_bytes(pem,
    serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
"#;

kwin_testkit::lab_test! {
#[tokio::test]
async fn ca_file_verifies_chain_and_host_name() {
    let s = StandIn::start_with(&["--cbt-hardening", "strict"], |py, state| {
        let st = Command::new(py)
            .args(["-c", MAKE_CA_SIGNED_CERT])
            .arg(state)
            .status()
            .expect("python");
        assert!(st.success(), "certificate generation failed");
    });
    let mut spec = s.spec(true, WinrmAuth::Ntlm);
    spec.cert_fingerprint = None;
    spec.ca_file = Some(s.state.path().join("ca.pem"));
    // By name: chain and name verified, NTLM channel binding over a CA-issued certificate.
    spec.address = "localhost".into();
    let out = s
        .transport(&spec)
        .run("echo ca", T)
        .await
        .expect("run with ca_file");
    assert_eq!(text(&out.stdout), "ca\n");
    // By address: the certificate does not name 127.0.0.1.
    spec.address = "127.0.0.1".into();
    let err = s
        .transport(&spec)
        .connect()
        .await
        .expect_err("name mismatch");
    assert!(matches!(err, TransportError::Tls(_)), "{err:?}");
    assert!(
        err.to_string().contains("certificate not valid for name \"127.0.0.1\""),
        "{err}"
    );
    // Without the CA the chain is unknown.
    spec.address = "localhost".into();
    spec.ca_file = None;
    let err = s
        .transport(&spec)
        .connect()
        .await
        .expect_err("unknown issuer");
    assert!(
        err.to_string().contains("issued by no authority this machine trusts"),
        "{err}"
    );
}
}

kwin_testkit::lab_test! {
#[tokio::test]
async fn wrong_password_is_an_auth_error() {
    let s = StandIn::start(&[]);
    let wrong = s.state.path().join("wrong");
    std::fs::write(&wrong, "not-the-password\n").expect("write");
    for (https, auth) in [
        (false, WinrmAuth::Ntlm),
        (true, WinrmAuth::Ntlm),
        (true, WinrmAuth::Basic),
    ] {
        let mut spec = s.spec(https, auth);
        spec.password = SecretSource::File(wrong.clone());
        let err = s
            .transport(&spec)
            .run("echo no", T)
            .await
            .expect_err("must refuse");
        assert!(
            matches!(err, TransportError::Auth { .. }),
            "{auth:?}: {err:?}"
        );
        assert_eq!(
            err.to_string(),
            "authentication failed for kwin@win1: wrong user or password"
        );
        assert!(!err.is_retryable());
        assert!(!format!("{err:?}").contains("not-the-password"));
    }
    // Basic over plain http is refused before anything is sent.
    let err = s
        .transport(&s.spec(false, WinrmAuth::Basic))
        .connect()
        .await
        .expect_err("basic over http");
    assert!(err.to_string().contains("needs https"), "{err}");
}
}

kwin_testkit::lab_test! {
/// Someone on the path of a plain-HTTP connection cannot seal a reply (no session key), but can
/// send a plaintext one: once NTLM seals the connection, kwin refuses any reply that is not
/// sealed, and nothing of it is taken as the command's output.
#[tokio::test]
async fn a_plaintext_reply_on_an_encrypted_connection_is_refused() {
    let s = StandIn::start(&["--hostile", "plaintext-replies"]);
    let t = s.transport(&s.spec(false, WinrmAuth::Ntlm));
    let err = t
        .run("echo forged", T)
        .await
        .expect_err("a plaintext reply must be refused");
    let msg = err.to_string();
    assert!(
        msg.contains("refused an unencrypted reply") && msg.contains("http 200"),
        "{msg}"
    );
    assert!(!msg.contains("forged"), "{msg}");
    assert!(!err.is_retryable(), "{err:?}");
}
}

kwin_testkit::lab_test! {
/// A stopping WinRM service (a host going down for a restart) answers a plaintext 503 on a
/// connection whose messages are encrypted: nothing of it is used, and the request is retried
/// like a lost connection, not refused as an attack.
#[tokio::test]
async fn a_plaintext_503_on_an_encrypted_connection_is_retryable() {
    let s = StandIn::start(&["--hostile", "unavailable"]);
    let t = s.transport(&s.spec(false, WinrmAuth::Ntlm));
    let err = t
        .run("echo hello", T)
        .await
        .expect_err("a 503 is no answer");
    assert!(err.is_retryable(), "{err:?}");
    assert!(err.to_string().contains("503"), "{err}");
}
}

kwin_testkit::lab_test! {
/// A reply must say it answers the request (`a:RelatesTo` = the request's `a:MessageID`): one
/// without it, or relating to another message, is refused.
#[tokio::test]
async fn a_reply_that_does_not_relate_to_the_request_is_refused() {
    for (mode, want) in [
        ("no-relates-to", "has no a:RelatesTo"),
        ("wrong-relates-to", "reply relates to uuid:"),
    ] {
        let s = StandIn::start(&["--hostile", mode]);
        for https in [false, true] {
            let t = s.transport(&s.spec(https, WinrmAuth::Ntlm));
            let err = t
                .run("echo hi", T)
                .await
                .expect_err("the reply must be refused");
            let msg = err.to_string();
            assert!(msg.contains(want), "{mode}, https {https}: {msg}");
        }
    }
}
}

#[tokio::test]
async fn kerberos_is_not_supported_yet() {
    let spec = WinrmSpec {
        address: "127.0.0.1".into(),
        port: 1,
        user: "Administrator".into(),
        password: SecretSource::Env("KWIN_TEST_UNSET_PASSWORD".into()),
        https: false,
        auth: WinrmAuth::Kerberos,
        cert_fingerprint: None,
        ca_file: None,
        insecure: false,
        connect_timeout_secs: 1,
    };
    let err = WinrmTransport::new("win1", &spec)
        .expect("new")
        .connect()
        .await
        .expect_err("kerberos");
    assert!(
        err.to_string().contains("kerberos is not supported yet"),
        "{err}"
    );
}

#[tokio::test]
async fn refused_connection_is_retryable() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let dir = tempfile::tempdir().expect("tempdir");
    let pw = dir.path().join("pw");
    std::fs::write(&pw, "x-password\n").expect("write");
    let spec = WinrmSpec {
        address: "127.0.0.1".into(),
        port,
        user: "Administrator".into(),
        password: SecretSource::File(pw),
        https: false,
        auth: WinrmAuth::Ntlm,
        cert_fingerprint: None,
        ca_file: None,
        insecure: false,
        connect_timeout_secs: 2,
    };
    let err = WinrmTransport::new("win1", &spec)
        .expect("new")
        .run("echo", T)
        .await
        .expect_err("nothing listens");
    assert!(matches!(err, TransportError::Connect { .. }), "{err:?}");
    assert!(err.is_retryable());
}

kwin_testkit::lab_test! {
#[tokio::test]
async fn upload_of_ten_megabytes_is_chunked_and_verified() {
    let s = StandIn::start(&[]);
    let t = s.transport(&s.spec(false, WinrmAuth::Ntlm));
    let mut data = Vec::with_capacity(10 * 1024 * 1024);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    while data.len() < 10 * 1024 * 1024 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data.extend_from_slice(&x.to_le_bytes());
    }
    let dst = s.home().join("kubeconfig.bin");
    let dst_s = dst.to_str().expect("utf-8 path");
    let before = t.stats().await.requests;
    let started = Instant::now();
    t.put(dst_s, &data, Some(0o640)).await.expect("put");
    let put_time = started.elapsed();
    let requests = t.stats().await.requests - before;
    assert_eq!(std::fs::read(&dst).expect("uploaded file"), data);
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dst).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o640);
    }
    // 10 MiB in 144 KiB chunks = 72 Sends (+ create, command, receive, signal).
    assert!(requests >= 72 + 4, "{requests} requests");
    let leftovers: Vec<_> = std::fs::read_dir(s.home())
        .expect("home")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains(".kwin-tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "temporary file left behind");

    let started = Instant::now();
    let back = t.get(dst_s).await.expect("get");
    let get_time = started.elapsed();
    assert_eq!(back.len(), data.len());
    assert!(back == data, "get returns the uploaded bytes");
    eprintln!("winrm put 10 MiB: {put_time:?}, get 10 MiB: {get_time:?}");

    // Replacing an existing file, an empty file, and errors.
    t.put(dst_s, b"small\n", None).await.expect("replace");
    assert_eq!(std::fs::read(&dst).expect("file"), b"small\n");
    t.put(dst_s, b"", None).await.expect("empty");
    assert_eq!(std::fs::read(&dst).expect("file"), b"");
    let missing_dir = s.home().join("no/such/dir/file");
    let err = t
        .put(missing_dir.to_str().expect("path"), b"x", None)
        .await
        .expect_err("missing dir");
    assert!(matches!(err, TransportError::Remote(_)), "{err:?}");
    let err = t
        .get(s.home().join("absent").to_str().expect("path"))
        .await
        .expect_err("absent");
    assert!(err.to_string().contains("absent"), "{err}");
}
}

kwin_testkit::lab_test! {
#[tokio::test]
async fn commands_outlasting_a_receive_long_poll_keep_polling() {
    // The service caps each Receive at 1 s and answers w:TimedOut when nothing came.
    let s = StandIn::start(&["--max-timeout-ms", "1000"]);
    let t = s.transport(&s.spec(false, WinrmAuth::Ntlm));
    let before = t.stats().await.requests;
    let out = t
        .run("echo start; sleep 3; echo done; exit 4", T)
        .await
        .expect("run");
    assert_eq!(text(&out.stdout), "start\ndone\n");
    assert_eq!(out.exit, 4);
    let requests = t.stats().await.requests - before;
    assert!(requests >= 6, "several receives: {requests} requests");
}
}

kwin_testkit::lab_test! {
#[tokio::test]
async fn timed_out_command_is_terminated_and_transport_stays_usable() {
    let s = StandIn::start(&[]);
    let t = s.transport(&s.spec(false, WinrmAuth::Ntlm));
    let pid_file = s.home().join("sleep.pid");
    let script = format!("echo $$ > {}; exec sleep 30", pid_file.display());
    let started = Instant::now();
    let err = t
        .run(&script, Duration::from_secs(2))
        .await
        .expect_err("times out");
    let took = started.elapsed();
    assert!(
        matches!(err, TransportError::Timeout(d) if d == Duration::from_secs(2)),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    assert!(took < Duration::from_secs(10), "returned after {took:?}");
    // The command was killed (terminate + delete), not left running.
    let pid = std::fs::read_to_string(&pid_file)
        .expect("pid")
        .trim()
        .to_string();
    let gone = (0..50).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        !Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| s.contains(") Z "))
                .unwrap_or(true)
    });
    assert!(gone, "sleep (pid {pid}) still running");
    let out = t
        .run("echo still here", T)
        .await
        .expect("usable afterwards");
    assert_eq!(text(&out.stdout), "still here\n");
}
}

kwin_testkit::lab_test! {
#[tokio::test]
async fn reboot_fails_retryably_then_succeeds_with_a_new_boot_time() {
    let mut s = StandIn::start(&["--reboot-down-secs", "2"]);
    let t = s.transport(&s.spec(false, WinrmAuth::Ntlm));
    let boot_time = "# kwin:boot-time\necho \"$KWIN_STANDIN_BOOT_TIME\"";
    let first = text(&t.run(boot_time, T).await.expect("boot time").stdout);
    assert!(first.trim().ends_with('Z'), "{first}");

    let out = t.run("Restart-Computer -Force", T).await.expect("restart");
    assert_eq!(out.exit, 0);

    let started = Instant::now();
    let mut failures = Vec::new();
    let second = loop {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "host never came back: {failures:?}"
        );
        match t.run(boot_time, Duration::from_secs(10)).await {
            Ok(out) if text(&out.stdout) != first => break text(&out.stdout),
            Ok(_) => {} // not down yet
            Err(e) => {
                assert!(e.is_retryable(), "not retryable while rebooting: {e:?}");
                failures.push(e.to_string());
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(!failures.is_empty(), "the host was never seen down");
    assert!(
        second.trim() > first.trim(),
        "boot time {second} after {first}"
    );
    assert!(
        t.stats().await.connections >= 2,
        "re-authenticated on a new connection"
    );
    assert!(s.server.reboots() > 0, "the stand-in rebooted");
    let mut kinds: Vec<String> = failures
        .iter()
        .map(|f| f.split(':').next().unwrap_or("").to_string())
        .collect();
    kinds.dedup();
    eprintln!(
        "winrm reboot: {} failed attempts ({}), back after {:?}",
        failures.len(),
        kinds.join(" / "),
        started.elapsed()
    );
}
}

kwin_testkit::lab_test! {
#[tokio::test]
async fn a_vanished_shell_is_replaced() {
    let s = StandIn::start(&[]);
    let spec = s.spec(false, WinrmAuth::Ntlm);
    let t = s.transport(&spec);
    assert_eq!(text(&t.run("echo 1", T).await.expect("run").stdout), "1\n");
    let shell = t.shell_id().await.expect("a kept shell");
    // Another client (pywinrm, its own NTLM session) deletes the shell under us.
    let delete = r#"
import os, sys, winrm
p = winrm.protocol.Protocol(sys.argv[1], transport="ntlm", username="kwin",
                            password=os.environ["PW"], message_encryption="always")
p.close_shell(sys.argv[2])
"#;
    let st = Command::new(python())
        .args(["-c", delete])
        .arg(format!("http://{}/wsman", s.http))
        .arg(&shell)
        .env("PW", PASSWORD)
        .status()
        .expect("pywinrm");
    assert!(st.success(), "pywinrm could not delete the shell");
    let out = t
        .run("echo 2", T)
        .await
        .expect("run after the shell vanished");
    assert_eq!(text(&out.stdout), "2\n");
    assert_ne!(t.shell_id().await.expect("a new shell"), shell);
    assert_eq!(t.stats().await.connections, 1, "same connection throughout");
}
}

kwin_testkit::lab_test! {
#[tokio::test]
async fn close_then_run_reconnects() {
    let s = StandIn::start(&[]);
    let t = s.transport(&s.spec(false, WinrmAuth::Ntlm));
    assert_eq!(text(&t.run("echo 1", T).await.expect("run").stdout), "1\n");
    t.close().await;
    assert_eq!(text(&t.run("echo 2", T).await.expect("run").stdout), "2\n");
    assert_eq!(t.stats().await.connections, 2);
}
}
