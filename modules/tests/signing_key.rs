//! The `package` module's signing-key check (`repository.key_fingerprint`), run by the real
//! `/bin/sh` with the real gpg on keys made for the test: the key with the pinned fingerprint
//! passes; another key, or the pinned key with a second one beside it in the same file, is
//! refused with both fingerprints named and the file removed.

use kwin_modules::linux::package_repo::check_fingerprint;
use std::path::Path;
use std::process::Command;

fn gpg(home: &Path, args: &[&str]) -> String {
    let out = Command::new("gpg")
        .args([
            "--batch",
            "--quiet",
            "--passphrase",
            "",
            "--pinentry-mode",
            "loopback",
        ])
        .args(args)
        .env("GNUPGHOME", home)
        .output()
        .expect("gpg (gnupg) must be installed");
    assert!(out.status.success(), "gpg {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A new ed25519 signing key in `home`: its fingerprint.
fn new_key(home: &Path, uid: &str) -> String {
    gpg(home, &["--quick-gen-key", uid, "ed25519", "sign", "never"]);
    gpg(home, &["--with-colons", "--list-keys", uid])
        .lines()
        .find_map(|l| {
            l.strip_prefix("fpr:")
                .map(|r| r.trim_matches(':').to_string())
        })
        .expect("fingerprint")
}

/// Run the check on `key_file` against `want`: (exit code, stderr, file still there).
fn check(key_file: &Path, want: &str) -> (i32, String, bool) {
    let copy = key_file.with_extension("under-test");
    std::fs::copy(key_file, &copy).expect("copy");
    let script = format!(
        "k={}\n{}echo checked\n",
        kwin_engine::quote::sh_quote(&copy.display().to_string()),
        check_fingerprint(
            "k",
            want,
            "https://pkgs.example/Release.key",
            "rm -f -- \"$k\";"
        )
    );
    let out = Command::new("/bin/sh")
        .arg("-c")
        .arg(&script)
        .env_remove("GNUPGHOME")
        .output()
        .expect("sh");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let code = out.status.code().unwrap_or(-1);
    assert_eq!(code == 0, stdout.contains("checked"), "{stdout}");
    (
        code,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        copy.exists(),
    )
}

#[test]
fn only_the_pinned_key_passes() {
    let dir = tempfile::tempdir().expect("tmp");
    let home = dir.path().join("gnupg");
    std::fs::create_dir(&home).expect("mkdir");
    let a = new_key(&home, "kwin test key A <a@kwin.invalid>");
    let b = new_key(&home, "kwin test key B <b@kwin.invalid>");
    let key_a = dir.path().join("a.asc");
    std::fs::write(&key_a, gpg(&home, &["--armor", "--export", &a])).expect("a");
    let key_ab = dir.path().join("ab.asc");
    std::fs::write(&key_ab, gpg(&home, &["--armor", "--export", &a, &b])).expect("ab");
    let key_a_bin = dir.path().join("a.gpg");
    let bin = Command::new("gpg")
        .args(["--batch", "--export", &a])
        .env("GNUPGHOME", &home)
        .output()
        .expect("gpg");
    std::fs::write(&key_a_bin, bin.stdout).expect("a.gpg");

    // the pinned key, armored or binary
    assert_eq!(check(&key_a, &a).0, 0);
    assert_eq!(check(&key_a_bin, &a).0, 0);
    // another key
    let (code, err, kept) = check(&key_a, &b);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&a) && err.contains(&b), "{err}");
    assert!(!kept, "the refused key file was left behind");
    // the pinned key with another one beside it
    let (code, err, kept) = check(&key_ab, &a);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&b), "{err}");
    assert!(!kept);
    // not a key at all
    let junk = dir.path().join("junk.asc");
    std::fs::write(&junk, "<html>not found</html>\n").expect("junk");
    assert_eq!(check(&junk, &a).0, 1);
}
