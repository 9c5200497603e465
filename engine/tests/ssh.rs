//! The SSH transport against real OpenSSH servers.
//!
//! Each test starts its own `sshd` on 127.0.0.1 and a random port, inside a private mount
//! namespace whose `/etc/passwd`, `/etc/shadow`, `/etc/group`, `/etc/sudoers.d` and `/root`
//! are bind-mounted copies: there, users `kwuser` (passwordless sudo) and `kwnopw` (a
//! password, no sudo) exist, and nothing on the machine itself changes. Host and client keys
//! are made with `ssh-keygen`, which also computes the fingerprints the tests expect.
//!
//! The server is the test kit's ([`kwin_testkit::sshd`]). Lab tests (root, `/usr/sbin/sshd`,
//! `unshare`): ignored by `cargo test`, failing when run without them.

// Tests report skips and measured timings on the console.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use kwin_engine::plan::{SecretSource, SshSpec};
use kwin_engine::transport::ssh::SshTransport;
use kwin_engine::transport::{Shell, Transport, TransportError};
use kwin_testkit::sshd::{
    fingerprint, free_port, mkdir, sh, write, Sshd as Lab, PASSPHRASE, PASSWORD,
};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(20);

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

kwin_testkit::lab_test! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_returns_stdout_stderr_and_exit_code() {
    let lab = Lab::start();
    let t = lab.transport("root");
    t.connect().await.unwrap_or_else(|e| panic!("connect: {e}"));
    let out = t
        .run(
            "echo out; echo err >&2; printf '\\377\\000\\n'; id -un; exit 3\n",
            T,
        )
        .await
        .unwrap_or_else(|e| panic!("run: {e}"));
    assert_eq!(out.stdout, b"out\n\xff\x00\nroot\n");
    assert_eq!(text(&out.stderr), "err\n");
    assert_eq!(out.exit, 3);
    let out = t.run("true", T).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((out.exit, out.stdout.len(), out.stderr.len()), (0, 0, 0));
    let out = t
        .run("kill -TERM $$\n", T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.exit, 128 + 15);
    assert!(t.host_key_fingerprint().is_some_and(|f| f == lab.host_fp));
    t.close().await;
    // A closed transport connects again on use.
    let out = t
        .run("echo again", T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text(&out.stdout), "again\n");
}
}

kwin_testkit::lab_test! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_megabyte_script_goes_over_stdin() {
    let lab = Lab::start();
    let t = lab.transport("root");
    let payload: String = (0..16_000)
        .map(|i| format!("line {i:06} {}\n", "x".repeat(50)))
        .collect();
    assert!(payload.len() > 1_000_000);
    let script = format!("cat <<'KWIN_EOF' | sha256sum\n{payload}KWIN_EOF\necho done >&2\n");
    let expected = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(payload.as_bytes()))
    };
    let out = t.run(&script, T).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.exit, 0, "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).split_whitespace().next(),
        Some(&*expected)
    );
    assert_eq!(text(&out.stderr), "done\n");

    // Output larger than the channel window while the script is still being sent.
    let script = format!(
        "head -c 5000000 /dev/zero\n# {}\ntrue\n",
        "y".repeat(1_000_000)
    );
    let out = t.run(&script, T).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((out.exit, out.stdout.len()), (0, 5_000_000));

    // A script that exits before reading all of its input.
    let script = format!("exit 7\n{}\n", ": padding\n".repeat(200_000));
    let out = t.run(&script, T).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.exit, 7);
}
}

kwin_testkit::lab_test! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_and_get_round_trip_atomically() {
    let lab = Lab::start();
    let t = lab.transport("root");
    let dir = lab.path("shared");
    let small = dir.join("small.conf");
    let small_s = small.display().to_string();
    t.put(&small_s, b"a = 1\n", Some(0o640))
        .await
        .unwrap_or_else(|e| panic!("put: {e}"));
    assert_eq!(std::fs::read(&small).unwrap_or_default(), b"a = 1\n");
    let mode = std::fs::metadata(&small).map(|m| m.permissions().mode() & 0o7777);
    assert_eq!(mode.ok(), Some(0o640));
    assert_eq!(
        t.get(&small_s).await.unwrap_or_else(|e| panic!("get: {e}")),
        b"a = 1\n"
    );
    // Overwrite an existing file; no mode: 0644.
    t.put(&small_s, b"a = 2\n", None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(std::fs::read(&small).unwrap_or_default(), b"a = 2\n");
    let mode = std::fs::metadata(&small).map(|m| m.permissions().mode() & 0o7777);
    assert_eq!(mode.ok(), Some(0o644));

    // 10 MB, while a reader watches the path: it must only ever see the whole old or the
    // whole new content.
    let big = dir.join("big.bin");
    let big_s = big.display().to_string();
    let old = vec![b'a'; 10 * 1024 * 1024];
    let new: Vec<u8> = (0..10 * 1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    t.put(&big_s, &old, Some(0o600))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (stop, big, old, new) = (stop.clone(), big.clone(), old.clone(), new.clone());
        std::thread::spawn(move || {
            let mut reads = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Acquire) {
                let seen = std::fs::read(&big).unwrap_or_else(|e| panic!("read: {e}"));
                assert!(
                    seen == old || seen == new,
                    "partial file seen ({} bytes)",
                    seen.len()
                );
                reads += 1;
            }
            reads
        })
    };
    let t0 = Instant::now();
    t.put(&big_s, &new, Some(0o600))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let put_time = t0.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Release);
    let reads = watcher
        .join()
        .unwrap_or_else(|_| panic!("watcher panicked"));
    assert!(reads > 0);
    let t0 = Instant::now();
    let back = t.get(&big_s).await.unwrap_or_else(|e| panic!("{e}"));
    println!(
        "10 MB over loopback: put {:?}, get {:?}",
        put_time,
        t0.elapsed()
    );
    assert!(back == new, "the 10 MB file came back different");
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".kwin-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");

    // Errors name the path.
    match t.get(&dir.join("missing").display().to_string()).await {
        Err(TransportError::Remote(m)) => assert!(m.contains("missing"), "{m}"),
        other => panic!("expected a remote error, got {other:?}"),
    }
    match t.put("/nonexistent-dir/x", b"x", None).await {
        Err(TransportError::Remote(m)) => assert!(m.contains("/nonexistent-dir"), "{m}"),
        other => panic!("expected a remote error, got {other:?}"),
    }
    // A directory in the way is an error, not a file moved into it.
    let sub = dir.join("sub");
    mkdir(&sub, 0o755);
    match t.put(&sub.display().to_string(), b"x", None).await {
        Err(TransportError::Remote(m)) => assert!(m.contains("is a directory"), "{m}"),
        other => panic!("expected a remote error, got {other:?}"),
    }
    assert_eq!(std::fs::read_dir(&sub).map(|d| d.count()).unwrap_or(9), 0);
    // The session survived the errors.
    let out = t
        .run("echo fine", T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text(&out.stdout), "fine\n");
}
}

kwin_testkit::lab_test! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn become_runs_and_writes_as_root_through_sudo() {
    let lab = Lab::start();
    let t = lab.transport("kwuser");
    let out = t
        .run("id -u; id -un; echo \"$SUDO_USER\"", T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        text(&out.stdout),
        "0\nroot\nkwuser\n",
        "{}",
        text(&out.stderr)
    );

    let target = lab.path("rootonly/secret.conf");
    let target_s = target.display().to_string();
    t.put(&target_s, b"token = x\n", Some(0o600))
        .await
        .unwrap_or_else(|e| panic!("put with become: {e}"));
    let meta = std::fs::metadata(&target).unwrap_or_else(|e| panic!("{e}"));
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        (meta.uid(), meta.gid(), meta.mode() & 0o7777),
        (0, 0, 0o600)
    );
    assert_eq!(std::fs::read(&target).unwrap_or_default(), b"token = x\n");
    assert_eq!(
        t.get(&target_s).await.unwrap_or_else(|e| panic!("{e}")),
        b"token = x\n"
    );
    // Nothing left behind: neither in the target dir nor the private upload dir.
    let out = t
        .run("ls -A /tmp | grep -c '^.kwin-' || true", T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text(&out.stdout).trim(), "0");
    assert_eq!(
        std::fs::read_dir(lab.path("rootonly"))
            .map(|d| d.count())
            .unwrap_or(0),
        1
    );

    // The same user without become cannot write there.
    let mut spec = lab.spec("kwuser");
    spec.become_root = false;
    let plain = SshTransport::new("h1", &spec, lab.opts());
    match plain.put(&target_s, b"y", None).await {
        Err(TransportError::Remote(m)) => assert!(m.contains("rootonly"), "{m}"),
        other => panic!("expected a remote error, got {other:?}"),
    }
    let out = plain
        .run("id -u", T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(text(&out.stdout).trim(), "0");

    // A user whose sudo wants a password: a clear Auth error, for runs and for puts.
    let nopw = lab.transport("kwnopw");
    match nopw.run("id -u", T).await {
        Err(e @ TransportError::Auth { .. }) => {
            let m = e.to_string();
            assert!(m.contains("kwnopw@h1") && m.contains("sudo"), "{m}");
            assert!(!e.is_retryable());
        }
        other => panic!("expected an auth error, got {other:?}"),
    }
    match nopw
        .put(&lab.path("shared/x").display().to_string(), b"x", None)
        .await
    {
        Err(TransportError::Auth { reason, .. }) => assert!(reason.contains("sudo"), "{reason}"),
        other => panic!("expected an auth error, got {other:?}"),
    }
}
}

kwin_testkit::lab_test! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_host_key_is_checked() {
    let lab = Lab::start();
    lab.transport("root")
        .connect()
        .await
        .unwrap_or_else(|e| panic!("pinned key should match: {e}"));
    // Without the SHA256: prefix works too.
    let mut spec = lab.spec("root");
    spec.host_key = Some(lab.host_fp.trim_start_matches("SHA256:").to_string());
    SshTransport::new("h1", &spec, lab.opts())
        .connect()
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    // The pin of the host's other key (ECDSA, while kwin asks for ed25519 first) is the
    // host's too: kwin asks for that type and connects.
    spec.host_key = Some(lab.host_ecdsa_fp.clone());
    SshTransport::new("h1", &spec, lab.opts())
        .connect()
        .await
        .unwrap_or_else(|e| panic!("the pinned ECDSA key is the host's: {e}"));

    let other = fingerprint(&lab.path("id_wrong.pub"));
    spec.host_key = Some(other.clone());
    match SshTransport::new("h1", &spec, lab.opts()).connect().await {
        Err(e @ TransportError::HostKeyMismatch { .. }) => {
            let m = e.to_string();
            // Every key the host showed, each with its type.
            assert!(m.contains(&other) && m.contains(&lab.host_fp), "{m}");
            assert!(m.contains(&format!("{} (ecdsa-sha2-nistp256)", lab.host_ecdsa_fp)), "{m}");
            assert!(m.contains(&format!("{} (ssh-ed25519)", lab.host_fp)), "{m}");
            assert!(!e.is_retryable());
        }
        other => panic!("expected a host key mismatch, got {other:?}"),
    }
}
}

kwin_testkit::lab_test! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_host_refused_then_recorded_then_verified() {
    let mut lab = Lab::start();
    let mut spec = lab.spec("root");
    spec.host_key = None;

    match SshTransport::new("h1", &spec, lab.opts()).connect().await {
        Err(e @ TransportError::HostKeyUnknown { .. }) => {
            let m = e.to_string();
            assert!(m.contains(&lab.host_fp), "{m}");
            assert!(m.contains("accept-new-host-keys"), "{m}");
        }
        other => panic!("expected an unknown host key, got {other:?}"),
    }
    assert!(!lab.path(".kwin/known_hosts").exists());

    let mut accept = lab.opts();
    accept.accept_new_host_keys = true;
    let t = SshTransport::new("h1", &spec, accept.clone());
    t.connect().await.unwrap_or_else(|e| panic!("{e}"));
    let rec = t
        .recorded_new_key()
        .unwrap_or_else(|| panic!("no key recorded"));
    assert_eq!(rec.fingerprint, lab.host_fp);
    assert_eq!(rec.host, format!("[127.0.0.1]:{}", lab.port));
    let kh = lab.path(".kwin/known_hosts");
    let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode() & 0o777);
    assert_eq!(mode(&kh).ok(), Some(0o600));
    assert_eq!(mode(&lab.path(".kwin")).ok(), Some(0o700));
    // OpenSSH agrees with what was written.
    let listed = sh(&format!("ssh-keygen -lf {}", kh.display()));
    assert!(listed.contains(&lab.host_fp), "{listed}");

    // The next connection verifies against the file, recording nothing.
    let again = SshTransport::new("h1", &spec, lab.opts());
    again.connect().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again.recorded_new_key(), None);
    let out = again
        .run("echo ok", T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text(&out.stdout), "ok\n");

    // The host's key changes: refused, even when new keys are accepted.
    let recorded_fp = lab.host_fp.clone();
    lab.rekey();
    for opts in [lab.opts(), accept] {
        match SshTransport::new("h1", &spec, opts).connect().await {
            Err(e @ TransportError::HostKeyMismatch { .. }) => {
                let m = e.to_string();
                assert!(m.contains(&recorded_fp) && m.contains(&lab.host_fp), "{m}");
            }
            other => panic!("expected a host key mismatch, got {other:?}"),
        }
    }
}
}

kwin_testkit::lab_test! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_known_hosts_with_hashed_entries_and_ssh_config_alias() {
    let lab = Lab::start();
    // ~/.ssh of a pretend user: a hashed known_hosts entry (hashed by ssh-keygen -H) and a
    // config alias that supplies the address, port and key.
    let ssh_dir = lab.path("userhome/.ssh");
    mkdir(&ssh_dir, 0o700);
    let kh = ssh_dir.join("known_hosts");
    let pubkey = std::fs::read_to_string(lab.path("host_ed25519.pub")).unwrap_or_default();
    let mut fields = pubkey.split_whitespace();
    let (kind, key) = (fields.next().unwrap_or(""), fields.next().unwrap_or(""));
    write(
        &kh,
        &format!("[127.0.0.1]:{} {kind} {key}\n", lab.port),
        0o600,
    );
    sh(&format!(
        "ssh-keygen -q -H -f {} && rm -f {}.old",
        kh.display(),
        kh.display()
    ));
    assert!(std::fs::read_to_string(&kh)
        .unwrap_or_default()
        .starts_with("|1|"));
    std::fs::copy(lab.path("id_ed25519"), ssh_dir.join("lab_key"))
        .unwrap_or_else(|e| panic!("{e}"));
    write(
        &ssh_dir.join("config"),
        &format!(
            "Host lab-h1\n  HostName 127.0.0.1\n  Port {}\n  IdentityFile ~/.ssh/lab_key\n",
            lab.port
        ),
        0o600,
    );
    let spec = SshSpec {
        address: "lab-h1".into(),
        port: 22,
        user: "root".into(),
        private_key: None,
        passphrase: None,
        password: None,
        host_key: None,
        become_root: false,
        shell: Shell::Posix,
        connect_timeout_secs: 5,
        proxy_jump: None,
    };
    let mut opts = lab.opts();
    opts.user_ssh_dir = Some(ssh_dir);
    let t = SshTransport::new("h1", &spec, opts);
    let out = t
        .run("echo via-alias", T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text(&out.stdout), "via-alias\n");
    assert_eq!(t.recorded_new_key(), None);
}
}

kwin_testkit::lab_test! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passphrase_key_password_and_wrong_credentials() {
    let lab = Lab::start();
    let var = format!("KWIN_TEST_PASSPHRASE_{}", lab.port);
    std::env::set_var(&var, PASSPHRASE);

    let mut spec = lab.spec("root");
    spec.private_key = Some(lab.path("id_pass"));
    spec.passphrase = Some(SecretSource::Env(var.clone()));
    let out = SshTransport::new("h1", &spec, lab.opts())
        .run("echo unlocked", T)
        .await
        .unwrap_or_else(|e| panic!("passphrase key: {e}"));
    assert_eq!(text(&out.stdout), "unlocked\n");

    // No passphrase source, an unset variable, a wrong passphrase: Auth errors that say why.
    let cases = [
        (None, "passphrase-protected"),
        (
            Some(SecretSource::Env("KWIN_TEST_UNSET_VARIABLE".into())),
            "KWIN_TEST_UNSET_VARIABLE",
        ),
        (Some(SecretSource::Env("HOME".into())), "wrong passphrase"),
    ];
    for (source, why) in cases {
        spec.passphrase = source;
        match SshTransport::new("h1", &spec, lab.opts()).connect().await {
            Err(e @ TransportError::Auth { .. }) => {
                let m = e.to_string();
                assert!(m.contains("root@h1") && m.contains(why), "{m}");
                assert!(!m.contains(PASSPHRASE), "{m}");
                assert!(!e.is_retryable());
            }
            other => panic!("expected an auth error ({why}), got {other:?}"),
        }
    }

    // A key the server does not know.
    let mut spec = lab.spec("root");
    spec.private_key = Some(lab.path("id_wrong"));
    match SshTransport::new("h1", &spec, lab.opts()).connect().await {
        Err(e @ TransportError::Auth { .. }) => {
            let m = e.to_string();
            assert!(m.contains("root@h1") && m.contains("id_wrong"), "{m}");
        }
        other => panic!("expected an auth error, got {other:?}"),
    }

    // Password login (from a file), after a refused key.
    let pw_file = lab.path("password");
    write(&pw_file, &format!("{PASSWORD}\n"), 0o600);
    let mut spec = lab.spec("kwnopw");
    spec.become_root = false;
    spec.private_key = Some(lab.path("id_wrong"));
    spec.password = Some(SecretSource::File(pw_file));
    let out = SshTransport::new("h1", &spec, lab.opts())
        .run("id -un", T)
        .await
        .unwrap_or_else(|e| panic!("password: {e}"));
    assert_eq!(text(&out.stdout), "kwnopw\n");

    let wrong = lab.path("wrong-password");
    write(&wrong, "not-the-password\n", 0o600);
    spec.password = Some(SecretSource::File(wrong));
    match SshTransport::new("h1", &spec, lab.opts()).connect().await {
        Err(e @ TransportError::Auth { .. }) => {
            let m = e.to_string();
            assert!(m.contains("password (refused)"), "{m}");
            assert!(!m.contains("not-the-password"), "{m}");
        }
        other => panic!("expected an auth error, got {other:?}"),
    }
}
}

kwin_testkit::lab_test! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_connection_is_a_retryable_connect_error() {
    let lab = Lab::start();
    let mut spec = lab.spec("root");
    spec.port = free_port();
    let t0 = Instant::now();
    match SshTransport::new("h1", &spec, lab.opts()).connect().await {
        Err(e @ TransportError::Connect { .. }) => {
            assert!(e.is_retryable());
            assert!(e.to_string().contains("connection refused"), "{e}");
        }
        other => panic!("expected a connect error, got {other:?}"),
    }
    assert!(t0.elapsed() < Duration::from_secs(2));
}
}

kwin_testkit::lab_test! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_retires_the_session_and_the_next_run_reconnects() {
    let lab = Lab::start();
    let t = lab.transport("root");
    let out = t
        .run("echo $PPID", T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let first_session = text(&out.stdout);
    let t0 = Instant::now();
    match t.run("sleep 30", Duration::from_secs(1)).await {
        Err(e @ TransportError::Timeout(_)) => assert!(!e.is_retryable()),
        other => panic!("expected a timeout, got {other:?}"),
    }
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(3),
        "{took:?}"
    );
    let out = t
        .run("echo back", T)
        .await
        .unwrap_or_else(|e| panic!("after timeout: {e}"));
    assert_eq!(text(&out.stdout), "back\n");
    let out = t
        .run("echo $PPID", T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(text(&out.stdout), first_session, "expected a new session");
}
}

kwin_testkit::lab_test! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_sshd_is_connection_lost_and_reconnect_works() {
    let mut lab = Lab::start();
    let t = Arc::new(lab.transport("root"));
    t.connect().await.unwrap_or_else(|e| panic!("{e}"));
    // sshd stops while the command runs (it wrote its marker).
    let started = lab.path("running");
    let running = {
        let t = t.clone();
        let script = format!("touch {}; sleep 10; echo late", started.display());
        tokio::spawn(async move { t.run(&script, T).await })
    };
    let t0 = Instant::now();
    while !started.exists() {
        assert!(t0.elapsed() < Duration::from_secs(30), "the command never ran");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    lab.stop();
    match running.await.unwrap_or_else(|e| panic!("join: {e}")) {
        Err(e @ TransportError::ConnectionLost(_)) => assert!(e.is_retryable()),
        other => panic!("expected connection lost, got {other:?}"),
    }
    // While the host is down: a retryable connect error.
    match t.connect().await {
        Err(e @ TransportError::Connect { .. }) => assert!(e.is_retryable()),
        other => panic!("expected a connect error, got {other:?}"),
    }
    lab.spawn();
    t.connect()
        .await
        .unwrap_or_else(|e| panic!("reconnect: {e}"));
    let out = t
        .run("echo back", T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text(&out.stdout), "back\n");

    // Killed while idle: the next use reports the loss (retryable), the retry works.
    lab.stop();
    lab.spawn();
    let first = t.run("echo one", T).await;
    if let Err(e) = &first {
        assert!(e.is_retryable(), "{e}");
        t.connect().await.unwrap_or_else(|e| panic!("{e}"));
    }
    let out = t.run("echo two", T).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text(&out.stdout), "two\n");
}
}

kwin_testkit::lab_test! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_runs_across_transports() {
    let lab = Lab::start();
    let transports: Vec<Arc<SshTransport>> =
        (0..10).map(|_| Arc::new(lab.transport("root"))).collect();
    let t0 = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for (i, t) in transports.iter().enumerate() {
        for j in 0..2 {
            let t = t.clone();
            set.spawn(async move {
                let out = t
                    .run(&format!("sleep 1; echo {i}-{j}"), T)
                    .await
                    .unwrap_or_else(|e| panic!("run {i}-{j}: {e}"));
                assert_eq!(text(&out.stdout), format!("{i}-{j}\n"));
            });
        }
    }
    let mut done = 0;
    while let Some(r) = set.join_next().await {
        r.unwrap_or_else(|e| panic!("task: {e}"));
        done += 1;
    }
    let took = t0.elapsed();
    assert_eq!(done, 20);
    // Runs on one transport share its session one after the other (2 s); transports run
    // side by side (serially this would take 20 s).
    assert!(took < Duration::from_secs(6), "{took:?}");
    println!("20 runs of `sleep 1` over 10 transports: {took:?}");
}
}

kwin_testkit::lab_test! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn measure_connect_and_round_trip_times() {
    let lab = Lab::start();
    let n = 10;
    let t0 = Instant::now();
    for _ in 0..n {
        let t = lab.transport("root");
        t.connect().await.unwrap_or_else(|e| panic!("{e}"));
        t.close().await;
    }
    let connect = t0.elapsed() / n;
    let t = lab.transport("root");
    t.connect().await.unwrap_or_else(|e| panic!("{e}"));
    let runs = 50;
    let t0 = Instant::now();
    for _ in 0..runs {
        let out = t.run("true", T).await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.exit, 0);
    }
    let run = t0.elapsed() / runs;
    let t0 = Instant::now();
    for i in 0..runs {
        t.put(
            &lab.path("shared/f").display().to_string(),
            format!("{i}").as_bytes(),
            None,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    }
    let put = t0.elapsed() / runs;
    println!("loopback: connect {connect:?}, run `true` {run:?}, put small file {put:?}");
    assert!(connect < Duration::from_secs(2), "{connect:?}");
    assert!(run < Duration::from_millis(500), "{run:?}");
}
}

kwin_testkit::lab_test! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssh_agent_is_used_when_the_plan_names_no_key() {
    let lab = Lab::start();
    let sock = lab.path("agent.sock");
    let mut agent = Command::new("ssh-agent")
        .args(["-D", "-a"])
        .arg(&sock)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("ssh-agent: {e}"));
    let t0 = Instant::now();
    while !sock.exists() && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let added = Command::new("ssh-add")
        .arg(lab.path("id_ed25519"))
        .env("SSH_AUTH_SOCK", &sock)
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success());
    assert_eq!(added.ok(), Some(true), "ssh-add failed");
    let mut spec = lab.spec("root");
    spec.private_key = None;
    let mut opts = lab.opts();
    opts.ssh_agent = Some(sock.clone());
    let out = SshTransport::new("h1", &spec, opts.clone())
        .run("echo agent", T)
        .await;
    let _ = agent.kill();
    let _ = agent.wait();
    let out = out.unwrap_or_else(|e| panic!("agent auth: {e}"));
    assert_eq!(text(&out.stdout), "agent\n");
    // The agent is gone, or there is none: the error says what was tried.
    for opts in [opts, lab.opts()] {
        match SshTransport::new("h1", &spec, opts).connect().await {
            Err(e @ TransportError::Auth { .. }) => {
                assert!(e.to_string().contains("ssh-agent ("), "{e}")
            }
            other => panic!("expected an auth error, got {other:?}"),
        }
    }
}
}

kwin_testkit::lab_test! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_hosts_connect_in_parallel() {
    let lab = Lab::start();
    // Serial baseline.
    let t0 = Instant::now();
    for _ in 0..3 {
        lab.transport("root")
            .connect()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let one = t0.elapsed() / 3;
    let transports: Vec<Arc<SshTransport>> =
        (0..50).map(|_| Arc::new(lab.transport("root"))).collect();
    let t0 = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for t in &transports {
        let t = t.clone();
        set.spawn(async move { t.run("echo up", T).await });
    }
    while let Some(r) = set.join_next().await {
        let out = r
            .unwrap_or_else(|e| panic!("task: {e}"))
            .unwrap_or_else(|e| panic!("run: {e}"));
        assert_eq!(text(&out.stdout), "up\n");
    }
    let all = t0.elapsed();
    println!("connect + run: one host {one:?}; 50 hosts in parallel {all:?}");
    // Client and server share two cores here, so handshakes cannot all overlap; a serial
    // implementation would take 50 × `one`.
    assert!(all < one * 40, "50 connects took {all:?} (one: {one:?})");
}
}

kwin_testkit::lab_test! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_session_with_keepalives_stays_usable() {
    let lab = Lab::start_with("LogLevel DEBUG1");
    let mut opts = lab.opts();
    opts.keepalive_secs = 1;
    let t = SshTransport::new("h1", &lab.spec("root"), opts);
    let first = t
        .run("echo $PPID", T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // Idle for longer than the keepalive interval: the time passing is what is tested.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let second = t
        .run("echo $PPID", T)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // Same session process on the server: the connection was kept, not re-made.
    assert_eq!(text(&first.stdout), text(&second.stdout));
    // The server saw the keepalives.
    let log = std::fs::read_to_string(lab.path("sshd.log")).unwrap_or_default();
    assert!(
        log.contains("keepalive@libssh2.org"),
        "no keepalive in the sshd log"
    );
}
}
