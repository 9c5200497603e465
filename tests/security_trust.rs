//! Trust: host keys and local file modes, through the `kwin` binary against a real `sshd`
//! started here on 127.0.0.1.
//!
//! - A pinned host key is enforced: the right pin converges, a wrong one is refused with both
//!   fingerprints and nothing runs on the host.
//! - Trust on first use (`--accept-new-host-keys`) records the key in `.kwin/known_hosts`;
//!   after the host's key changes (sshd restarted with a new key) the next run is refused with
//!   both fingerprints, with or without `--accept-new-host-keys`.
//! - An unknown key without `--accept-new-host-keys` is refused.
//! - What kwin writes locally (`.kwin/`: known_hosts, logs, run journal, lock) is 0700/0600.
//!
//! Lab tests (root, `/usr/sbin/sshd`): ignored by `cargo test`, failing when run without them.

use kwin_testkit::kwin;
use kwin_testkit::sshd::Sshd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A plan for the sshd: one task writing a marker under the sshd's dir.
fn write_plan(dir: &Path, sshd: &Sshd, host_key: Option<&str>, marker: &Path) {
    let pin = host_key
        .map(|k| format!("host_key = \"{k}\"\n"))
        .unwrap_or_default();
    let plan = format!(
        r#"[settings]
retries = 0

[[hosts]]
name = "s1"
os = "linux"
address = "127.0.0.1"
port = {port}
user = "root"
private_key = "{key}"
connect_timeout = 5
{pin}
[[tasks]]
name = "marker"
module = "file"
params = {{ path = "{marker}", content = "ok\n" }}
"#,
        port = sshd.port,
        key = sshd.client_key().display(),
        marker = marker.display(),
    );
    std::fs::write(dir.join("plan.toml"), plan).expect("plan");
}

kwin_testkit::lab_test! {
#[test]
fn a_pinned_host_key_is_enforced() {
    let sshd = Sshd::start();
    let dir = tempfile::tempdir().expect("tmp");
    let marker = sshd.path("pinned-marker");

    let wrong = "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    write_plan(dir.path(), &sshd, Some(wrong), &marker);
    let r = kwin!(dir.path(), &["apply", "plan.toml"]);
    assert_eq!(r.code, 1, "{}", r.out());
    assert!(r.out().contains("host key mismatch"), "{}", r.out());
    assert!(
        r.out().contains(wrong) && r.out().contains(&sshd.host_fp),
        "both fingerprints (pinned {wrong}, actual {}) must be named:\n{}",
        sshd.host_fp,
        r.out()
    );
    assert!(!marker.exists(), "a task ran on a host with the wrong key");

    write_plan(dir.path(), &sshd, Some(&sshd.host_fp), &marker);
    let r = kwin!(dir.path(), &["apply", "plan.toml"]);
    assert_eq!(r.code, 0, "{}", r.out());
    assert_eq!(
        std::fs::read_to_string(&marker).ok().as_deref(),
        Some("ok\n")
    );
}
}

kwin_testkit::lab_test! {
#[test]
fn a_host_key_that_changed_between_runs_is_refused_with_both_fingerprints() {
    let mut sshd = Sshd::start();
    let dir = tempfile::tempdir().expect("tmp");
    let marker = sshd.path("tofu-marker");
    write_plan(dir.path(), &sshd, None, &marker);

    // Unknown key, no --accept-new-host-keys: refused, and it says how to proceed.
    let r = kwin!(dir.path(), &["apply", "plan.toml"]);
    assert_eq!(r.code, 1, "{}", r.out());
    assert!(
        r.out().contains("unknown") && r.out().contains(&sshd.host_fp),
        "{}",
        r.out()
    );
    assert!(!marker.exists());

    // Trust on first use: recorded in .kwin/known_hosts.
    let r = kwin!(
        dir.path(),
        &["apply", "plan.toml", "--accept-new-host-keys"],
    );
    assert_eq!(r.code, 0, "{}", r.out());
    let known = std::fs::read_to_string(dir.path().join(".kwin/known_hosts")).expect("known_hosts");
    assert!(
        known.contains(&format!("[127.0.0.1]:{}", sshd.port)),
        "{known}"
    );
    let first_fp = sshd.host_fp.clone();

    // The host's key changes. Refused, with both fingerprints, also with accept-new.
    sshd.rekey();
    assert_ne!(first_fp, sshd.host_fp);
    std::fs::remove_file(&marker).expect("rm marker");
    for args in [
        &["apply", "plan.toml"][..],
        &["apply", "plan.toml", "--accept-new-host-keys"][..],
    ] {
        let r = kwin!(dir.path(), args);
        assert_eq!(r.code, 1, "{args:?}: {}", r.out());
        assert!(
            r.out().contains("host key mismatch"),
            "{args:?}: {}",
            r.out()
        );
        assert!(
            r.out().contains(&first_fp) && r.out().contains(&sshd.host_fp),
            "{args:?}: both fingerprints (known {first_fp}, now {}) must be named:\n{}",
            sshd.host_fp,
            r.out()
        );
        assert!(!marker.exists(), "a task ran on a host whose key changed");
    }
    // kwin did not overwrite the recorded key.
    let after = std::fs::read_to_string(dir.path().join(".kwin/known_hosts")).expect("known");
    assert_eq!(known, after);
}
}

fn walk(p: &Path) -> Vec<PathBuf> {
    let mut v = vec![p.to_path_buf()];
    if p.is_dir() {
        if let Ok(rd) = std::fs::read_dir(p) {
            for e in rd.flatten() {
                v.extend(walk(&e.path()));
            }
        }
    }
    v
}

kwin_testkit::lab_test! {
#[test]
fn files_kwin_writes_locally_are_private() {
    let sshd = Sshd::start();
    let dir = tempfile::tempdir().expect("tmp");
    let marker = sshd.path("modes-marker");
    write_plan(dir.path(), &sshd, None, &marker);
    // A umask that would make files world-readable by default.
    let r = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "umask 000 && exec {} apply plan.toml --accept-new-host-keys",
            env!("CARGO_BIN_EXE_kwin")
        ))
        .current_dir(dir.path())
        .output()
        .expect("kwin");
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stdout));
    let state = dir.path().join(".kwin");
    let mut seen = (0, 0);
    let mut wrong = Vec::new();
    for p in walk(&state) {
        let mode = std::fs::symlink_metadata(&p)
            .map(|m| m.permissions().mode() & 0o7777)
            .unwrap_or(0);
        let want = if p.is_dir() { 0o700 } else { 0o600 };
        if p.is_dir() {
            seen.0 += 1;
        } else {
            seen.1 += 1;
        }
        if mode != want {
            wrong.push(format!("{} is {mode:o}, want {want:o}", p.display()));
        }
    }
    assert!(
        seen.0 >= 3 && seen.1 >= 3,
        "expected logs, runs and known_hosts: {seen:?}"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
}

/// `kwin kubeconfig`, the journal and `checksums.toml` are written by
/// `state::write_private`. In a directory another user can write (a shared project
/// directory, `/tmp`), a file or link planted at the temporary name must never receive the
/// bytes, nor end up at the target: the temporary file is new (`O_EXCL`), 0600 from the start,
/// and its name cannot be guessed. Before, the name was `<target>.tmp<pid>`, opened with
/// `O_TRUNC` and without `O_EXCL`: the admin key went into the planted 0666 file.
#[test]
fn a_file_planted_at_a_local_temporary_name_never_gets_the_bytes() {
    use kwin_engine::fs::write_private;
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let secret = b"client-key-data: LS0tLS1CRUdJTi...\n";

    // A world-writable file at the old temporary name.
    let target = dir.path().join("lab.kubeconfig");
    let planted = target.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&planted, b"").expect("plant");
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    write_private(&target, secret).expect("write");
    let left = std::fs::read(&planted)
        .unwrap_or_else(|e| panic!("the planted file is gone (moved into place?): {e}"));
    assert_eq!(left, b"", "bytes went into the planted file");
    let meta = std::fs::symlink_metadata(&target).expect("target");
    assert!(meta.file_type().is_file());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_ne!(
        meta.ino(),
        std::fs::metadata(&planted).expect("planted").ino(),
        "the planted file was moved into place"
    );
    assert_eq!(std::fs::read(&target).expect("target"), secret);

    // A link at the old temporary name, to a file the planter reads.
    let target = dir.path().join("checksums.toml");
    let planted = target.with_extension(format!("tmp{}", std::process::id()));
    let loot = dir.path().join("loot");
    std::fs::write(&loot, b"").expect("loot");
    std::os::unix::fs::symlink(&loot, &planted).expect("symlink");
    write_private(&target, secret).expect("write");
    assert_eq!(
        std::fs::read(&loot).expect("loot"),
        b"",
        "bytes went through the planted link"
    );
    assert!(std::fs::symlink_metadata(&target)
        .expect("target")
        .file_type()
        .is_file());
    assert_eq!(std::fs::read(&target).expect("target"), secret);

    // Nothing is left behind but what was planted.
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("ls")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let pid = std::process::id();
    let mut want = vec![
        "checksums.toml".to_string(),
        format!("checksums.tmp{pid}"),
        "lab.kubeconfig".to_string(),
        format!("lab.tmp{pid}"),
        "loot".to_string(),
    ];
    want.sort();
    assert_eq!(names, want);
}

kwin_testkit::lab_test! {
/// `.kwin/` made by another user in a shared plan directory (or a link to their directory) is
/// refused before anything is written into it: its owner could read the logs and plant host
/// keys. Needs root (to make a directory owned by another uid).
#[test]
fn a_state_directory_of_another_user_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(
        dir.path().join("plan.toml"),
        "[[hosts]]\nname = \"s1\"\nos = \"linux\"\naddress = \"127.0.0.1\"\nport = 9\nuser = \"root\"\nconnect_timeout = 1\n\n[settings]\nretries = 0\n",
    )
    .expect("plan");
    let state = dir.path().join(".kwin");
    std::fs::create_dir(&state).expect("mkdir");
    std::os::unix::fs::chown(&state, Some(65534), Some(65534)).expect("chown");
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let r = kwin!(dir.path(), &["apply", "plan.toml"]);
    assert_ne!(r.code, 0, "{}", r.out());
    assert!(r.out().contains("belongs to uid 65534"), "{}", r.out());
    assert!(
        std::fs::read_dir(&state).expect("ls").next().is_none(),
        "kwin wrote into a directory of another user"
    );

    // A link named `.kwin` is refused too, even to a directory of kwin's own user.
    std::fs::remove_dir(&state).expect("rmdir");
    let elsewhere = tempfile::tempdir().expect("tmp");
    std::os::unix::fs::symlink(elsewhere.path(), &state).expect("symlink");
    let r = kwin!(dir.path(), &["apply", "plan.toml"]);
    assert_ne!(r.code, 0, "{}", r.out());
    assert!(r.out().contains("symbolic link"), "{}", r.out());
    assert!(std::fs::read_dir(elsewhere.path())
        .expect("ls")
        .next()
        .is_none());
}
}
