//! Real-shell convergence: each module runs against this machine (`LocalTransport`, dash as
//! /bin/sh, under a temporary directory) or another shell (busybox, a network namespace)
//! through the real executor (`kwin_testkit::converge`: probe, plan, the batch with its
//! convergence re-read, re-plan); a second run is a no-op in one round trip. Paths and
//! contents are hostile on purpose (spaces, quotes, `$()`, backticks, `;`, newlines, unicode)
//! and must arrive literally.

use kwin_engine::module::Registry;
use kwin_engine::transport::local::LocalTransport;
use kwin_engine::transport::{Output, Shell, Transport};
use kwin_modules::Builtin;
use kwin_testkit::converge::{self as kit, Before, Outcome, Sh};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(60);

/// A file name no shell should ever misread.
const HOSTILE: &str = "it's a \"test\" $(touch pwned) `touch pwned2`; x\nnewline ✓ 한";

fn local() -> Arc<dyn Transport> {
    Arc::new(LocalTransport { become_root: false })
}

/// A task: a module and its params (checked to build).
struct Task {
    module: &'static str,
    params: Value,
}

fn build(module: &'static str, params: Value) -> Task {
    if let Err(e) = Builtin.build(module, Shell::Posix, &params) {
        panic!("building {module}: {e} at {:?}", e.path);
    }
    Task { module, params }
}

/// Converge the task (see `kwin_testkit::converge`); the first run.
async fn converge(t: &Arc<dyn Transport>, m: &Task) -> Outcome {
    kit::converge(t.clone(), m.module, m.params.clone()).await
}

/// Run the task once, expecting it to fail; the failure message.
async fn apply_fails(t: &Arc<dyn Transport>, m: &Task) -> String {
    kit::apply_fails(t.clone(), m.module, m.params.clone()).await
}

fn changed(o: &Outcome) -> bool {
    o.changed()
}

fn fail_text(out: &Output) -> String {
    format!(
        "exit {}: {}{}",
        out.exit,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn mode_of(p: &Path) -> u32 {
    std::fs::metadata(p).expect("stat").permissions().mode() & 0o7777
}

fn no_pwned(dir: &Path) {
    for d in [dir, Path::new(".")] {
        assert!(!d.join("pwned").exists(), "a command substitution ran");
        assert!(!d.join("pwned2").exists(), "a backtick command ran");
    }
}

fn s(p: &Path) -> String {
    p.to_str().expect("utf-8 path").to_string()
}

#[tokio::test]
async fn file_create_update_attrs_remove() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join(HOSTILE);
    let path = dir.join(format!("{HOSTILE}.conf"));
    let content = format!("line with {HOSTILE}\n$HOME `id` \\n '\"\nno newline at end ✓");
    let t = local();

    let m = build(
        "file",
        json!({ "path": s(&path), "content": content, "mode": "0640" }),
    );
    let p = converge(&t, &m).await;
    assert!(changed(&p));
    assert_eq!(std::fs::read_to_string(&path).expect("read"), content);
    assert_eq!(mode_of(&path), 0o640);

    // Content changes, mode kept from the file when the plan does not set it.
    let m = build("file", json!({ "path": s(&path), "content": "v2\n" }));
    assert!(changed(&converge(&t, &m).await));
    assert_eq!(std::fs::read(&path).expect("read"), b"v2\n");
    assert_eq!(mode_of(&path), 0o640);

    // Mode only.
    let m = build(
        "file",
        json!({ "path": s(&path), "content": "v2\n", "mode": 600 }),
    );
    let c = converge(&t, &m).await;
    assert!(c.changed(), "mode change expected");
    assert_eq!(c.reason(), "mode differs");
    assert_eq!(mode_of(&path), 0o600);

    // Owner given by name and by id, both match the current user: no-op.
    let uid = std::process::Command::new("id")
        .arg("-u")
        .output()
        .expect("id");
    let uid = String::from_utf8_lossy(&uid.stdout).trim().to_string();
    let m = build(
        "file",
        json!({ "path": s(&path), "content": "v2\n", "owner": uid }),
    );
    assert!(!changed(&converge(&t, &m).await));

    let m = build("file", json!({ "path": s(&path), "state": "absent" }));
    assert!(changed(&converge(&t, &m).await));
    assert!(!path.exists());
    assert!(dir.exists());
    no_pwned(tmp.path());
}

#[tokio::test]
async fn file_through_symlink_and_large_content() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let target = tmp.path().join("real target");
    std::fs::write(&target, "old\n").expect("write");
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let t = local();
    // A link at the managed path is refused unless the task follows it.
    let m = build("file", json!({ "path": s(&link), "content": "new\n" }));
    let err = apply_fails(&t, &m).await;
    assert!(err.contains("is a symbolic link"), "{err}");
    assert_eq!(std::fs::read(&target).expect("read"), b"old\n");
    let m = build(
        "file",
        json!({ "path": s(&link), "content": "new\n", "follow": true }),
    );
    assert!(changed(&converge(&t, &m).await));
    assert!(std::fs::symlink_metadata(&link)
        .expect("lstat")
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read(&target).expect("read"), b"new\n");

    // Over the embedding limit: sent with a put step, compared by hash afterwards.
    let big: String = (0..200_000).map(|i| format!("{i}\n")).collect();
    assert!(big.len() > 1024 * 1024);
    let path = tmp.path().join("big file");
    let m = build(
        "file",
        json!({ "path": s(&path), "content": big, "mode": "0600" }),
    );
    let c = converge(&t, &m).await;
    assert!(c.changed(), "create expected");
    assert!(c.puts > 0, "the content goes by a put step");
    assert_eq!(std::fs::read_to_string(&path).expect("read"), big);
    assert_eq!(mode_of(&path), 0o600);
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
        .expect("ls")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains("kwin"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[tokio::test]
async fn file_write_refuses_when_changed_since_probe() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join("f");
    std::fs::write(&path, "probed\n").expect("write");
    // Someone else writes the file between the probe (script 1) and the change (script 2).
    let p = path.clone();
    let t: Arc<dyn Transport> = Arc::new(Before::new(local(), 2, move || {
        std::fs::write(&p, "someone else\n").expect("write");
    }));
    let m = build("file", json!({ "path": s(&path), "content": "wanted\n" }));
    let err = apply_fails(&t, &m).await;
    assert!(err.contains("changed since it was probed"), "{err}");
    assert_eq!(std::fs::read(&path).expect("read"), b"someone else\n");
}

/// The shells a POSIX host may run kwin's scripts with (`sh` is dash on Debian, bash on Red
/// Hat's family, busybox's ash on small images), each reading the script on stdin.
fn shells() -> Vec<(&'static str, Arc<dyn Transport>)> {
    let mut v: Vec<(&'static str, Arc<dyn Transport>)> = Vec::new();
    for (name, argv) in [
        ("dash", &["/bin/dash", "-s"][..]),
        ("bash", &["/bin/bash", "--posix", "-s"][..]),
        ("busybox", &["busybox", "sh", "-s"][..]),
    ] {
        kwin_testkit::tier::require_command(argv[0], name);
        v.push((name, Arc::new(Sh::new(argv))));
    }
    v
}

/// A line file's write compares the probed text with the shell's own `read` (no process):
/// every change made between the probe and the write is refused, whatever it touches (the
/// last line without a newline, a newline added or removed, a backslash, a CR, a space), and
/// an unchanged file of any of those shapes is written.
#[tokio::test]
async fn line_write_refuses_any_change_since_probe_in_every_shell() {
    let shapes: &[&str] = &[
        "a = 1\nb = 2\n",
        "a = 1\nb = 2",
        "",
        "\n\n",
        "back\\slash \\n 'quote' \"dq\" $HOME `x` \\\n",
        "crlf\r\nline\r\n",
        "  leading and trailing  \n\ttab\n",
    ];
    for (shell, t0) in shells() {
        for (i, probed) in shapes.iter().enumerate() {
            let tmp = tempfile::tempdir().expect("tempdir");
            let path = tmp.path().join("svc.conf");
            let m = build(
                "line_in_file",
                json!({ "path": s(&path), "line": "wanted = yes" }),
            );
            // Unchanged since the probe: written.
            std::fs::write(&path, probed).expect("write");
            let c = converge(&t0, &m).await;
            assert!(c.changed(), "{shell}, shape {i}: {probed:?} written");
            let got = std::fs::read_to_string(&path).expect("read");
            assert!(
                got.starts_with(probed) && got.ends_with("wanted = yes\n"),
                "{shell}, shape {i}: {got:?}"
            );
            // Changed between the probe (script 1) and the write (script 2): refused, the
            // other writer's content kept.
            for other in [
                format!("{probed}x"),
                format!("{probed}\n"),
                probed.strip_suffix('\n').unwrap_or("z").to_string(),
                probed.replacen('\\', "/", 1),
                probed.replacen('\r', "", 1),
                probed.replacen(' ', "  ", 1),
                format!("x{probed}"),
            ] {
                if other == *probed {
                    continue;
                }
                std::fs::write(&path, probed).expect("write");
                let (p, o) = (path.clone(), other.clone());
                let t: Arc<dyn Transport> = Arc::new(Before::new(t0.clone(), 2, move || {
                    std::fs::write(&p, &o).expect("write");
                }));
                let err = apply_fails(&t, &m).await;
                assert!(
                    err.contains("changed since it was probed"),
                    "{shell}, shape {i}, {probed:?} -> {other:?}: {err}"
                );
                assert_eq!(
                    std::fs::read_to_string(&path).expect("read"),
                    other,
                    "{shell}, shape {i}"
                );
            }
        }
    }
}

#[tokio::test]
async fn directory_create_attrs_remove() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join(HOSTILE).join("nested ✓");
    let t = local();
    let m = build("directory", json!({ "path": s(&dir), "mode": "0750" }));
    assert!(changed(&converge(&t, &m).await));
    assert!(dir.is_dir());
    assert_eq!(mode_of(&dir), 0o750);
    let m = build("directory", json!({ "path": s(&dir), "mode": "0700" }));
    let c = converge(&t, &m).await;
    assert!(c.changed(), "mode change expected");
    assert_eq!(c.reason(), "mode differs");
    assert_eq!(mode_of(&dir), 0o700);
    std::fs::write(dir.join("inside"), "x").expect("write");
    let top = tmp.path().join(HOSTILE);
    let m = build("directory", json!({ "path": s(&top), "state": "absent" }));
    assert!(changed(&converge(&t, &m).await));
    assert!(!top.exists());
    assert!(tmp.path().exists());
    no_pwned(tmp.path());
}

/// What an account that owns a directory plants there (or swaps in after the probe) for
/// root to write, `chown` or `chmod` in its stead: a root-only file, a root-only directory.
struct Victims {
    /// The account's directory (uid 65534, `nobody`) and root's victims beside it.
    own: std::path::PathBuf,
    file: std::path::PathBuf,
    dir: std::path::PathBuf,
}

impl Victims {
    fn new(tmp: &Path) -> Victims {
        let own = tmp.join("app");
        std::fs::create_dir(&own).expect("mkdir");
        std::os::unix::fs::chown(&own, Some(65534), Some(65534)).expect("chown");
        let file = tmp.join("shadow");
        std::fs::write(&file, "root secret\n").expect("write");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let dir = tmp.join("cron.d");
        std::fs::create_dir(&dir).expect("mkdir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        Victims { own, file, dir }
    }

    /// Root's victims are as they were: content, owner, mode; nothing new in the directory.
    fn untouched(&self, what: &str) {
        use std::os::unix::fs::MetadataExt;
        let f = std::fs::metadata(&self.file).expect("stat");
        assert_eq!(
            (
                f.uid(),
                f.mode() & 0o7777,
                std::fs::read(&self.file).expect("read")
            ),
            (0, 0o600, b"root secret\n".to_vec()),
            "{what}: the root-only file was changed through a link"
        );
        let d = std::fs::metadata(&self.dir).expect("stat");
        assert_eq!(
            (d.uid(), d.mode() & 0o7777),
            (0, 0o700),
            "{what}: the directory"
        );
        let inside: Vec<_> = std::fs::read_dir(&self.dir).expect("ls").collect();
        assert!(
            inside.is_empty(),
            "{what}: root wrote in the directory: {inside:?}"
        );
    }

    /// `name` in the account's directory is (now) a link to `to`, made by the account.
    fn plant(&self, name: &str, to: &Path) {
        let p = self.own.join(name);
        let _ = std::fs::remove_file(&p);
        let _ = std::fs::remove_dir_all(&p);
        std::os::unix::fs::symlink(to, &p).expect("symlink");
        nix_lchown(&p);
    }
}

/// `lchown` to the account (a link's owner is who made it).
fn nix_lchown(p: &Path) {
    std::os::unix::fs::lchown(p, Some(65534), Some(65534)).expect("lchown");
}

kwin_testkit::lab_test! {
/// Links another account plants at a managed path, or in a directory on the way to it,
/// redirect nothing: `file`, `line_in_file`, `directory`, `download` and `archive` refuse a
/// link at the path (unless `follow = true`), refuse to work as another account below a
/// directory that account does not own, refuse a way through a link in such a directory,
/// and never write, `chown` or `chmod` the link's target. (Before: a 0600 root file became
/// the account's, and root created a job file in a root-only directory.)
#[tokio::test]
async fn links_planted_at_or_above_managed_paths_redirect_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let v = Victims::new(tmp.path());
    let t = local();
    let own = |n: &str| s(&v.own.join(n));

    // At the final name: the file the account asked root to write for it.
    v.plant("app.conf", &v.file);
    let m = build(
        "file",
        json!({ "path": own("app.conf"), "content": "a = 1\n", "owner": "65534", "mode": "0644" }),
    );
    let err = apply_fails(&t, &m).await;
    assert!(err.contains("is a symbolic link"), "{err}");
    v.untouched("file at the name");
    // Only its attributes.
    let m = build("file", json!({ "path": own("app.conf"), "owner": "65534", "mode": "0644" }));
    let err = apply_fails(&t, &m).await;
    assert!(err.contains("is a symbolic link"), "{err}");
    v.untouched("file attributes at the name");
    v.plant("line.conf", &v.file);
    let m = build("line_in_file", json!({ "path": own("line.conf"), "line": "evil" }));
    assert!(apply_fails(&t, &m).await.contains("is a symbolic link"));
    v.untouched("line at the name");
    v.plant("data", &v.dir);
    let m = build(
        "directory",
        json!({ "path": own("data"), "mode": "0755", "owner": "65534" }),
    );
    assert!(apply_fails(&t, &m).await.contains("is a symbolic link"));
    v.untouched("directory at the name");
    let src = tmp.path().join("payload");
    std::fs::write(&src, "payload\n").expect("write");
    v.plant("tool", &v.file);
    let m = build(
        "download",
        json!({ "url": format!("file://{}", s(&src)), "dest": own("tool"),
                "sha256": sha_hex(b"payload\n"), "owner": "65534" }),
    );
    assert!(apply_fails(&t, &m).await.contains("is a symbolic link"));
    v.untouched("download at the name");

    // In a parent: a link to root's directory.
    v.plant("conf.d", &v.dir);
    for (module, params) in [
        ("file", json!({ "path": own("conf.d/job"), "content": "* * * * * root id\n", "owner": "65534" })),
        ("line_in_file", json!({ "path": own("conf.d/job"), "line": "x" })),
        ("directory", json!({ "path": own("conf.d/sub"), "owner": "65534" })),
        ("download", json!({ "url": format!("file://{}", s(&src)), "dest": own("conf.d/job"),
                             "sha256": sha_hex(b"payload\n"), "owner": "65534" })),
        ("archive", json!({ "src": s(&make_tarball(tmp.path(), "a.tgz", &[("job", "x\n")])),
                            "dest": own("conf.d") })),
    ] {
        let err = apply_fails(&t, &build(module, params)).await;
        assert!(
            err.contains("symbolic link") || err.contains("belongs to"),
            "{module}: {err}"
        );
        v.untouched(&format!("{module} through a link in a parent"));
    }
    // A root file below the account's directory: refused, even with no link there yet.
    let m = build("file", json!({ "path": own("root.conf"), "content": "x\n", "mode": "0600" }));
    assert!(apply_fails(&t, &m).await.contains("belongs to"));
    assert!(!v.own.join("root.conf").exists());

    // `follow = true` is the plan's word that the link is trusted: its target is written.
    let theirs = tmp.path().join("theirs.conf");
    std::fs::write(&theirs, "old\n").expect("write");
    v.plant("followed.conf", &theirs);
    let m = build(
        "file",
        json!({ "path": own("followed.conf"), "content": "new\n", "owner": "65534", "follow": true }),
    );
    let c = kit::apply(t.clone(), m.module, m.params.clone()).await;
    assert!(c.changed(), "{:?}", c.message);
    assert!(
        c.planned.as_ref().and_then(|p| p.diff.as_deref()).unwrap_or_default()
            .contains(&format!("is a link to {}", s(&theirs))),
        "the diff names the target: {:?}", c.planned
    );
    assert_eq!(std::fs::read(&theirs).expect("read"), b"new\n");
}

/// The same attacks raced: the account swaps a link in after kwin probed a plain file or
/// directory. A write replaces the link itself (a rename), never its target; a way that
/// now leads elsewhere is refused; an attribute change refuses the swapped name.
#[tokio::test]
async fn links_swapped_in_after_the_probe_redirect_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let v = std::sync::Arc::new(Victims::new(tmp.path()));
    let own = |n: &str| s(&v.own.join(n));

    // The file the account owns, rewritten for it: swapped for a link after the probe.
    std::fs::write(v.own.join("app.conf"), "old\n").expect("write");
    let vv = v.clone();
    let t: Arc<dyn Transport> = Arc::new(Before::new(local(), 2, move || vv.plant("app.conf", &vv.file)));
    let m = build("file", json!({ "path": own("app.conf"), "content": "a = 1\n", "owner": "65534" }));
    let _ = kit::apply(t, m.module, m.params.clone()).await;
    v.untouched("a write raced with a link at the name");

    // Its attributes only: swapped after the probe.
    std::fs::remove_file(v.own.join("app.conf")).expect("rm");
    std::fs::write(v.own.join("app.conf"), "a = 1\n").expect("write");
    std::fs::set_permissions(v.own.join("app.conf"), std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let vv = v.clone();
    let t: Arc<dyn Transport> = Arc::new(Before::new(local(), 2, move || vv.plant("app.conf", &vv.file)));
    let m = build("file", json!({ "path": own("app.conf"), "owner": "65534", "mode": "0644" }));
    let err = kit::apply_fails(t, m.module, m.params.clone()).await;
    assert!(err.contains("not what kwin probed"), "{err}");
    v.untouched("a chmod raced with a link at the name");

    // A directory on the way, swapped for a link to root's directory.
    std::fs::create_dir(v.own.join("conf.d")).expect("mkdir");
    nix_lchown(&v.own.join("conf.d"));
    let vv = v.clone();
    let t: Arc<dyn Transport> = Arc::new(Before::new(local(), 2, move || vv.plant("conf.d", &vv.dir)));
    let m = build(
        "file",
        json!({ "path": own("conf.d/job"), "content": "* * * * * root id\n", "owner": "65534" }),
    );
    let err = kit::apply_fails(t, m.module, m.params.clone()).await;
    assert!(err.contains("is not the directory kwin probed"), "{err}");
    v.untouched("a write raced with a link in a parent");
}
}

kwin_testkit::lab_test! {
/// The owner and group of what a step creates are only checked (`[ -O ]`, `[ -G ]`) when
/// they are the scripts' own account (root here): in a setgid directory the new file and
/// directory get that directory's group, the check fails and `chown` sets root's; another
/// account's owner is set while the file is still empty, and its mode comes from the umask.
#[tokio::test]
async fn owners_are_checked_on_the_host_and_set_where_they_differ() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().expect("tempdir");
    let t = local();
    // A setgid directory of group `daemon` (gid 1 on Debian).
    let shared = tmp.path().join("shared");
    std::fs::create_dir(&shared).expect("mkdir");
    std::os::unix::fs::chown(&shared, Some(0), Some(1)).expect("chown");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o2775)).expect("chmod");

    let file = shared.join("app.conf");
    let m = build(
        "file",
        json!({ "path": s(&file), "content": "a = 1\n", "mode": "0640", "owner": "root", "group": "root" }),
    );
    let c = converge(&t, &m).await;
    assert!(c.changed());
    assert!(c.sent("[ -O /proc/self/fd/9 ] && [ -G /proc/self/fd/9 ] || chown root:root"));
    let md = std::fs::metadata(&file).expect("stat");
    assert_eq!((md.uid(), md.gid(), mode_of(&file)), (0, 0, 0o640));

    // (No mode: a directory made in a setgid directory inherits the setgid bit, which GNU
    // `chmod 0750` and `mkdir -m 0750` both keep.)
    let dir = shared.join("sub");
    let m = build(
        "directory",
        json!({ "path": s(&dir), "owner": "root", "group": "root" }),
    );
    assert!(changed(&converge(&t, &m).await));
    let md = std::fs::metadata(&dir).expect("stat");
    assert_eq!((md.uid(), md.gid()), (0, 0));

    // Outside the setgid directory the checks hold: nothing but the `mv`.
    let plain = tmp.path().join("plain.conf");
    let m = build(
        "file",
        json!({ "path": s(&plain), "content": "b\n", "mode": "0600", "owner": "0", "group": "root" }),
    );
    assert!(changed(&converge(&t, &m).await));
    let md = std::fs::metadata(&plain).expect("stat");
    assert_eq!((md.uid(), md.gid(), mode_of(&plain)), (0, 0, 0o600));

    // Another account: `chown` as asked, the mode from the umask.
    let theirs = tmp.path().join("theirs.conf");
    let m = build(
        "file",
        json!({ "path": s(&theirs), "content": "c\n", "mode": "0640", "owner": "daemon", "group": "daemon" }),
    );
    let c = converge(&t, &m).await;
    assert!(c.changed() && !c.sent("[ -O /proc/self/fd/9 ]"));
    let md = std::fs::metadata(&theirs).expect("stat");
    assert_eq!((md.uid(), md.gid(), mode_of(&theirs)), (1, 1, 0o640));
    assert_eq!(std::fs::read(&theirs).expect("read"), b"c\n");

    // A line edit keeps the file's owner and group: root's only checked, daemon's set.
    for (f, uid) in [(&plain, 0), (&theirs, 1)] {
        let m = build("line_in_file", json!({ "path": s(f), "line": "added" }));
        assert!(changed(&converge(&t, &m).await));
        let md = std::fs::metadata(f).expect("stat");
        assert_eq!((md.uid(), md.gid()), (uid, uid), "{}", f.display());
    }
}
}

#[tokio::test]
async fn line_in_file_append_replace_remove() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join(format!("{HOSTILE}.conf"));
    std::fs::write(
        &path,
        "# header\nSELINUX=enforcing\nlast line without newline",
    )
    .expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let t = local();
    let hostile_line = format!("KEY='{HOSTILE}'").replace('\n', " ");

    let m = build(
        "line_in_file",
        json!({ "path": s(&path), "line": hostile_line }),
    );
    assert!(changed(&converge(&t, &m).await));
    let m = build(
        "line_in_file",
        json!({ "path": s(&path), "regexp": "^SELINUX=", "line": "SELINUX=permissive" }),
    );
    assert!(changed(&converge(&t, &m).await));
    assert_eq!(
        std::fs::read_to_string(&path).expect("read"),
        format!("# header\nSELINUX=permissive\nlast line without newline\n{hostile_line}\n")
    );
    assert_eq!(mode_of(&path), 0o600, "mode is kept");

    let m = build(
        "line_in_file",
        json!({ "path": s(&path), "regexp": "^#", "state": "absent" }),
    );
    assert!(changed(&converge(&t, &m).await));
    assert!(!std::fs::read_to_string(&path)
        .expect("read")
        .contains("# header"));

    let created = tmp.path().join("new.conf");
    let m = build(
        "line_in_file",
        json!({ "path": s(&created), "line": "A=1" }),
    );
    assert!(changed(&converge(&t, &m).await));
    assert_eq!(std::fs::read(&created).expect("read"), b"A=1\n");
    no_pwned(tmp.path());
}

#[tokio::test]
async fn kernel_module_builtin_persists_and_missing_fails_clearly() {
    let t = local();
    let tmp = tempfile::tempdir().expect("tempdir");
    // `bridge` is in /sys/module on any kernel that has bridging (built in or loaded).
    if Path::new("/sys/module/bridge").exists() {
        let file = tmp.path().join("modules load.conf");
        let m = build(
            "kernel_module",
            json!({ "name": "bridge", "file": s(&file) }),
        );
        let c = converge(&t, &m).await;
        assert!(c.changed(), "file expected");
        assert_eq!(c.reason(), "file missing");
        assert_eq!(
            std::fs::read_to_string(&file).expect("read"),
            "# managed by kwin\nbridge\n"
        );
    }
    let m = build(
        "kernel_module",
        json!({ "name": "kwin_no_such_module", "persist": false }),
    );
    let err = apply_fails(&t, &m).await;
    assert!(
        err.contains("kwin: cannot load kernel module kwin_no_such_module"),
        "{err}"
    );
}

/// A private network namespace, so `net.*` kernel parameters can change without touching
/// this machine's own; removed on drop.
struct Netns {
    name: String,
    sh: Arc<dyn Transport>,
}

impl Netns {
    /// A fresh namespace (root, `ip`).
    fn create() -> Netns {
        let name = format!("kwin-test-{}", std::process::id());
        let out = std::process::Command::new("ip")
            .args(["netns", "add", &name])
            .output()
            .expect("run ip netns add");
        assert!(
            out.status.success(),
            "ip netns add: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let sh = Arc::new(Sh::new(&["ip", "netns", "exec", &name, "/bin/sh", "-s"]));
        Netns { name, sh }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

kwin_testkit::lab_test! {
#[tokio::test]
async fn sysctl_in_a_network_namespace() {
    let ns = Netns::create();
    // A new namespace may start with the machine's value (1 where something forwards).
    let out = ns
        .sh
        .run("echo 0 > /proc/sys/net/ipv4/ip_forward", TIMEOUT)
        .await
        .expect("run");
    assert_eq!(out.exit, 0, "{}", fail_text(&out));
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join(format!("99 {HOSTILE}.conf"));
    let m = build(
        "sysctl",
        json!({ "key": "net.ipv4.ip_forward", "value": 1, "file": s(&file) }),
    );
    let c = converge(&ns.sh, &m).await;
    assert!(c.changed(), "change expected");
    assert!(c.reason().contains("live value differs"), "{}", c.reason());
    let live = ns
        .sh
        .run("cat /proc/sys/net/ipv4/ip_forward", TIMEOUT)
        .await
        .expect("run");
    assert_eq!(live.stdout, b"1\n");
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        "# managed by kwin\nnet.ipv4.ip_forward = 1\n"
    );

    let m = build(
        "sysctl",
        json!({ "key": "net.ipv4.ip_local_port_range", "value": "40000    50000", "persist": false }),
    );
    assert!(changed(&converge(&ns.sh, &m).await));
    let live = ns
        .sh
        .run("cat /proc/sys/net/ipv4/ip_local_port_range", TIMEOUT)
        .await
        .expect("run");
    assert_eq!(live.stdout, b"40000\t50000\n");

    let m = build(
        "sysctl",
        json!({ "key": "net.kwin.no_such_key", "value": 1, "persist": false }),
    );
    let err = apply_fails(&ns.sh, &m).await;
    assert!(
        err.contains("sysctl net.kwin.no_such_key does not exist on this kernel"),
        "{err}"
    );
    no_pwned(tmp.path());
}
}

kwin_testkit::lab_test! {
/// In a mount namespace whose /proc/swaps lists no active swap, so this machine's own swap is
/// never turned off.
#[tokio::test]
async fn swap_off_comments_out_fstab() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let none = tmp.path().join("swaps");
    std::fs::write(&none, "Filename\tType\tSize\tUsed\tPriority\n").expect("write");
    let t: Arc<dyn Transport> = Arc::new(Sh::new(&[
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        &format!(
            "mount --bind {} /proc/swaps && exec /bin/sh -s",
            kwin_engine::quote::sh_quote(&s(&none))
        ),
    ]));
    let fstab = tmp.path().join(format!("fstab {HOSTILE}"));
    std::fs::write(
        &fstab,
        "UUID=1 / ext4 defaults 0 1\n/swap.img\tnone\tswap\tsw\t0\t0\n# /old none swap sw 0 0\n",
    )
    .expect("write");
    let m = build("swap_off", json!({ "fstab": s(&fstab) }));
    assert!(changed(&converge(&t, &m).await));
    assert_eq!(
        std::fs::read_to_string(&fstab).expect("read"),
        "UUID=1 / ext4 defaults 0 1\n#/swap.img\tnone\tswap\tsw\t0\t0\n# /old none swap sw 0 0\n"
    );
}
}

#[tokio::test]
async fn command_guards_and_failures() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let made = tmp.path().join(format!("made {HOSTILE}"));
    let t = local();
    let q = kwin_engine::quote::sh_quote(&s(&made));
    // The command reads stdin: it must get /dev/null, not the rest of the batch script (the
    // convergence re-read after it, without which the executor fails the task).
    let m = build(
        "command",
        json!({ "run": format!("cat; printf '%s' \"$0\" > {q}"), "creates": s(&made) }),
    );
    assert!(changed(&converge(&t, &m).await));
    assert!(made.exists());

    // unless: converges once the condition holds.
    let flag = tmp.path().join("flag it's");
    let fq = kwin_engine::quote::sh_quote(&s(&flag));
    let m = build(
        "command",
        json!({ "run": format!("touch {fq}"), "unless": format!("test -e {fq}") }),
    );
    assert!(changed(&converge(&t, &m).await));

    // A failing command fails the step with its code.
    let m = build(
        "command",
        json!({ "run": "echo broken >&2; exit 3", "creates": "/nonexistent/kwin" }),
    );
    let err = apply_fails(&t, &m).await;
    assert!(
        err.contains("broken") && err.contains("command exited with code 3"),
        "{err}"
    );

    // Succeeding without creating what it promised is an error too.
    let m = build(
        "command",
        json!({ "run": "true", "creates": s(&tmp.path().join("never")) }),
    );
    let err = apply_fails(&t, &m).await;
    assert!(err.contains("did not create"), "{err}");
    no_pwned(tmp.path());
}

/// A tiny HTTP server on 127.0.0.1 serving `body` at `/file` (404 elsewhere). It stops by
/// itself after 120 s.
struct Http {
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Http {
    fn serve(body: Vec<u8>) -> Http {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = stop.clone();
        std::thread::spawn(move || {
            let started = std::time::Instant::now();
            while !stop2.load(std::sync::atomic::Ordering::Relaxed)
                && started.elapsed() < Duration::from_secs(120)
            {
                let Ok((mut conn, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                let _ = conn.set_nonblocking(false);
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&req);
                let ok = line.starts_with("GET /file ") || line.starts_with("GET /file?");
                let (status, data): (&str, &[u8]) = if ok {
                    ("200 OK", &body)
                } else {
                    ("404 Not Found", b"not found")
                };
                let _ = conn.write_all(
                    format!(
                        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        data.len()
                    )
                    .as_bytes(),
                );
                let _ = conn.write_all(data);
            }
        });
        Http { port, stop }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

fn sha_hex(b: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(b))
}

#[tokio::test]
async fn download_http_file_url_and_bad_hash() {
    let body: Vec<u8> = (0..100_000u32).flat_map(|i| i.to_le_bytes()).collect();
    let sha = sha_hex(&body);
    let http = Http::serve(body.clone());
    let tmp = tempfile::tempdir().expect("tempdir");
    let t = local();
    assert!(
        kwin_testkit::host::has_command("curl") || kwin_testkit::host::has_command("wget"),
        "the download test needs curl or wget"
    );

    let dest = tmp.path().join(HOSTILE).join("tool ✓");
    let m = build(
        "download",
        json!({ "url": http.url("/file"), "dest": s(&dest), "sha256": sha, "mode": "0755" }),
    );
    assert!(changed(&converge(&t, &m).await));
    assert_eq!(std::fs::read(&dest).expect("read"), body);
    assert_eq!(mode_of(&dest), 0o755);

    // The other fetcher, by answering the probe as if only it were installed.
    for only in ["curl", "wget"] {
        if !kwin_testkit::host::has_command(only) {
            continue;
        }
        let dest = tmp.path().join(format!("via {only}"));
        let m = build(
            "download",
            json!({ "url": http.url("/file"), "dest": s(&dest), "sha256": sha }),
        );
        // A host where the other fetcher is not installed.
        let other = if only == "curl" { "wget" } else { "curl" };
        let t = without(tmp.path(), other);
        let c = converge(&t, &m).await;
        assert!(c.changed(), "{only}: change expected");
        assert!(
            c.sent(&format!("{only} ")),
            "{only}: not fetched with {only}"
        );
        assert_eq!(std::fs::read(&dest).expect("read"), body, "{only}");
    }

    // file:// (curl only).
    if kwin_testkit::host::has_command("curl") {
        let src = tmp.path().join("source file");
        std::fs::write(&src, b"from a file url\n").expect("write");
        let dest2 = tmp.path().join("copied");
        let m = build(
            "download",
            json!({ "url": format!("file://{}", s(&src).replace(' ', "%20")), "dest": s(&dest2), "sha256": sha_hex(b"from a file url\n") }),
        );
        assert!(changed(&converge(&t, &m).await));
        assert_eq!(std::fs::read(&dest2).expect("read"), b"from a file url\n");
    }

    // A wrong hash fails with both hashes and leaves the old file and no temporary file.
    let wrong = "0".repeat(64);
    let m = build(
        "download",
        json!({ "url": http.url("/file"), "dest": s(&dest), "sha256": wrong }),
    );
    let err = apply_fails(&t, &m).await;
    assert!(err.contains(&sha) && err.contains(&wrong), "{err}");
    assert_eq!(std::fs::read(&dest).expect("read"), body);

    // A 404 fails the download.
    let m = build(
        "download",
        json!({ "url": http.url("/missing"), "dest": s(&tmp.path().join("x")), "sha256": sha }),
    );
    let err = apply_fails(&t, &m).await;
    assert!(err.contains("download of"), "{err}");
    let left: Vec<_> = std::fs::read_dir(dest.parent().expect("parent"))
        .expect("ls")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(".kwin-"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
    no_pwned(tmp.path());
}

/// This machine as a host where the fetchers `only` (of curl and wget) are wrappers that
/// append their command line to `log` (one argument a line) and run the real program.
fn recording_fetchers(dir: &Path, log: &Path, only: &[&str]) -> Arc<dyn Transport> {
    let bin = dir.join("bin-recording");
    std::fs::create_dir_all(&bin).expect("mkdir");
    for name in only {
        let real = format!("/usr/bin/{name}");
        let w = bin.join(name);
        std::fs::write(
            &w,
            format!(
                "#!/bin/sh\nprintf '%s\\n' \"$0\" \"$@\" >> {}\nexec {real} \"$@\"\n",
                kwin_engine::quote::sh_quote(&s(log))
            ),
        )
        .expect("wrapper");
        std::fs::set_permissions(&w, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    // Every other program of this machine's PATH beside them, so no other curl or wget is
    // found.
    let path = std::env::var_os("PATH").unwrap_or_default();
    for d in std::env::split_paths(&path) {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let link = bin.join(e.file_name());
            if !link.exists() && !["curl", "wget"].contains(&&*e.file_name().to_string_lossy()) {
                let _ = std::os::unix::fs::symlink(e.path(), link);
            }
        }
    }
    let mut sh = Sh::new(&["/bin/sh", "-s"]);
    sh.path = Some(s(&bin));
    Arc::new(sh)
}

/// A command's text, its `unless` guard and a URL that carries a token reach no command
/// line (which every local user reads with `ps`): the shell that runs the text sees none of it
/// in its own `/proc/<pid>/cmdline`, and curl and wget get the URL on a private descriptor
/// while the download still arrives. (Before: `/bin/sh -c '<text>'`, `curl ... <url>`.)
#[tokio::test]
async fn command_text_and_download_urls_stay_off_command_lines() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let log = tmp.path().join("argv.log");
    let t = recording_fetchers(tmp.path(), &log, &["curl", "wget"]);
    let seen = tmp.path().join("cmdline");
    let guard_seen = tmp.path().join("guard-cmdline");
    let m = build(
        "command",
        json!({
            "run": format!("tr '\\0' '\\n' < /proc/$$/cmdline > {} # TEXT-S3CRET", kwin_engine::quote::sh_quote(&s(&seen))),
            "unless": format!(
                "tr '\\0' '\\n' < /proc/$$/cmdline > {}; [ -s {} ] # GUARD-S3CRET",
                kwin_engine::quote::sh_quote(&s(&guard_seen)),
                kwin_engine::quote::sh_quote(&s(&seen))
            ),
        }),
    );
    let c = kit::apply(t.clone(), m.module, m.params.clone()).await;
    assert!(c.changed(), "{:?}", c.message);
    for (f, secret) in [(&seen, "TEXT-S3CRET"), (&guard_seen, "GUARD-S3CRET")] {
        let cmdline = std::fs::read_to_string(f).expect("the command ran");
        assert!(!cmdline.is_empty(), "{}", f.display());
        assert!(!cmdline.contains(secret), "on the command line: {cmdline}");
    }

    let body = b"fetched with a token\n".to_vec();
    let http = Http::serve(body.clone());
    for only in ["curl", "wget"] {
        if !Path::new(&format!("/usr/bin/{only}")).exists() {
            continue;
        }
        let place = tmp.path().join(format!("with-{only}"));
        std::fs::create_dir(&place).expect("mkdir");
        let t = recording_fetchers(&place, &log, &[only]);
        let dest = tmp.path().join(format!("via-{only}"));
        let url = http.url(&format!("/file?token=TOKEN-S3CRET-{only}"));
        let m = build(
            "download",
            json!({ "url": url, "dest": s(&dest), "sha256": sha_hex(&body) }),
        );
        let c = kit::apply(t.clone(), m.module, m.params.clone()).await;
        assert!(c.changed(), "{only}: {:?}", c.message);
        assert_eq!(std::fs::read(&dest).expect("downloaded"), body, "{only}");
        let argv = std::fs::read_to_string(&log).expect("the fetcher ran");
        assert!(argv.contains(only), "{argv}");
        assert!(
            !argv.contains("TOKEN-S3CRET"),
            "{only}'s command line: {argv}"
        );
    }
}

/// This machine as a host without `hidden`: `/bin/sh` with a `PATH` of one directory holding
/// a link to every other program on this machine's `PATH`.
fn without(dir: &Path, hidden: &str) -> Arc<dyn Transport> {
    let bin = dir.join(format!("bin-without-{hidden}"));
    std::fs::create_dir_all(&bin).expect("mkdir");
    let path = std::env::var_os("PATH").unwrap_or_default();
    for d in std::env::split_paths(&path) {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let name = e.file_name();
            let link = bin.join(&name);
            if name != hidden && !link.exists() {
                let _ = std::os::unix::fs::symlink(e.path(), link);
            }
        }
    }
    let mut sh = Sh::new(&["/bin/sh", "-s"]);
    sh.path = Some(s(&bin));
    Arc::new(sh)
}

fn make_tarball(dir: &Path, name: &str, files: &[(&str, &str)]) -> std::path::PathBuf {
    let src = dir.join(format!("{name}.src"));
    for (p, content) in files {
        let f = src.join(p);
        std::fs::create_dir_all(f.parent().expect("parent")).expect("mkdir");
        std::fs::write(&f, content).expect("write");
    }
    let out = dir.join(format!("{name}.tar.gz"));
    let st = std::process::Command::new("tar")
        .arg("-czf")
        .arg(&out)
        .arg("-C")
        .arg(&src)
        .arg(".")
        .status()
        .expect("tar");
    assert!(st.success());
    out
}

#[tokio::test]
async fn archive_from_path_and_url() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let t = local();
    let weird = format!("top/{}.txt", HOSTILE.replace('\n', "_"));
    let tgz = make_tarball(
        tmp.path(),
        "v1",
        &[("top/bin/tool", "v1\n"), (weird.as_str(), "odd\n")],
    );
    let dest = tmp.path().join(format!("dest {HOSTILE}"));
    let m = build(
        "archive",
        json!({ "src": s(&tgz), "dest": s(&dest), "strip_components": 2 }),
    );
    let c = converge(&t, &m).await;
    assert!(c.changed(), "extract expected");
    assert_eq!(c.reason(), "not extracted");
    assert_eq!(std::fs::read(dest.join("bin/tool")).expect("read"), b"v1\n");

    // A new tarball at the same path is extracted again, once.
    let v2 = make_tarball(tmp.path(), "v2", &[("top/bin/tool", "v2\n")]);
    std::fs::rename(&v2, &tgz).expect("mv");
    let c = converge(&t, &m).await;
    assert!(c.changed(), "re-extract expected");
    assert_eq!(c.reason(), "archive changed since it was extracted");
    assert_eq!(std::fs::read(dest.join("bin/tool")).expect("read"), b"v2\n");

    // From a URL, verified, with `creates`.
    let bytes = std::fs::read(&tgz).expect("read");
    let http = Http::serve(bytes.clone());
    if kwin_testkit::host::has_command("curl") || kwin_testkit::host::has_command("wget") {
        let dest = tmp.path().join("from url");
        let m = build(
            "archive",
            json!({ "url": http.url("/file"), "sha256": sha_hex(&bytes), "dest": s(&dest), "creates": s(&dest.join("top/bin/tool")) }),
        );
        assert!(changed(&converge(&t, &m).await));
        assert_eq!(
            std::fs::read(dest.join("top/bin/tool")).expect("read"),
            b"v2\n"
        );

        let m = build(
            "archive",
            json!({ "url": http.url("/file"), "sha256": "1".repeat(64), "dest": s(&tmp.path().join("bad")) }),
        );
        let err = apply_fails(&t, &m).await;
        assert!(err.contains("expected 1111"), "{err}");
    }

    // A source that is not a tarball fails clearly.
    let junk = tmp.path().join("junk.tgz");
    std::fs::write(&junk, "not a tarball").expect("write");
    let m = build(
        "archive",
        json!({ "src": s(&junk), "dest": s(&tmp.path().join("j")) }),
    );
    let err = apply_fails(&t, &m).await;
    assert!(err.contains("cannot extract"), "{err}");
    no_pwned(tmp.path());
}

#[tokio::test]
async fn service_without_systemd_fails_clearly() {
    let t = local();
    let m = build(
        "service",
        json!({ "name": "kwin-no-such-unit", "state": "stopped", "enabled": false }),
    );
    let out = kit::apply(t, m.module, m.params.clone()).await;
    if Path::new("/run/systemd/system").is_dir() {
        // A systemd host: a unit that does not exist is neither running nor enabled.
        assert!(
            out.summary.counts.failed == 0 && !out.changed(),
            "{:#?}",
            out.events
        );
    } else {
        let err = out.message.unwrap_or_default();
        assert_eq!(out.summary.counts.failed, 1, "{:#?}", out.events);
        assert!(
            err.contains("service `kwin-no-such-unit`: this host does not run systemd"),
            "{err}"
        );
    }
}

#[tokio::test]
async fn apt_key_dearmor_matches_binary() {
    use base64::Engine;
    let t = local();
    let tmp = tempfile::tempdir().expect("tempdir");
    let binary: Vec<u8> = (0..1500u32).map(|i| (i * 7 % 256) as u8).collect();
    let b64 = base64::engine::general_purpose::STANDARD.encode(&binary);
    let body: Vec<String> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    let armored = format!(
        "-----BEGIN PGP PUBLIC KEY BLOCK-----\nComment: test key\n\n{}\n=AbCd\n-----END PGP PUBLIC KEY BLOCK-----\n",
        body.join("\n")
    );
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("armored", armored.clone().into_bytes()),
        ("crlf", armored.replace('\n', "\r\n").into_bytes()),
        ("binary", binary.clone()),
    ];
    for (name, input) in cases {
        let path = tmp.path().join(format!("{name} key's"));
        std::fs::write(&path, &input).expect("write");
        let script = format!(
            "k={}\n{}",
            kwin_engine::quote::sh_quote(&s(&path)),
            kwin_modules::linux::package_repo::dearmor("k", "")
        );
        let out = t.run(&script, TIMEOUT).await.expect("run");
        assert!(out.success(), "{name}: {}", fail_text(&out));
        assert_eq!(std::fs::read(&path).expect("read"), binary, "{name}");
    }
    // A real key: Debian's archive key exported with armor, against `gpg --dearmor`.
    let ring = "/usr/share/keyrings/debian-archive-bookworm-stable.gpg";
    if kwin_testkit::host::has_command("gpg") && Path::new(ring).exists() {
        let home = tmp.path().join("gnupg");
        std::fs::create_dir(&home).expect("mkdir");
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        let real = tmp.path().join("real.asc");
        let out = t
            .run(
                &format!(
                    "export GNUPGHOME={h}\ngpg -q --no-default-keyring --keyring {ring} --export --armor > {a} && gpg -q --dearmor < {a} > {a}.gpg",
                    h = kwin_engine::quote::sh_quote(&s(&home)),
                    a = kwin_engine::quote::sh_quote(&s(&real)),
                ),
                TIMEOUT,
            )
            .await
            .expect("run");
        assert!(out.success(), "{}", fail_text(&out));
        let script = format!(
            "k={}\n{}",
            kwin_engine::quote::sh_quote(&s(&real)),
            kwin_modules::linux::package_repo::dearmor("k", "")
        );
        let out = t.run(&script, TIMEOUT).await.expect("run");
        assert!(out.success(), "{}", fail_text(&out));
        let want = std::fs::read(tmp.path().join("real.asc.gpg")).expect("read");
        assert!(!want.is_empty());
        assert_eq!(std::fs::read(&real).expect("read"), want);
    }

    let broken = tmp.path().join("broken");
    std::fs::write(
        &broken,
        "-----BEGIN PGP PUBLIC KEY BLOCK-----\n-----END PGP PUBLIC KEY BLOCK-----\n",
    )
    .expect("write");
    let script = format!(
        "k={}\n{}",
        kwin_engine::quote::sh_quote(&s(&broken)),
        kwin_modules::linux::package_repo::dearmor("k", "")
    );
    let out = t.run(&script, TIMEOUT).await.expect("run");
    assert!(!out.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a valid ASCII-armored OpenPGP key"),
        "{}",
        fail_text(&out)
    );
}

/// A local apt repository (`file:` URI, trusted) holding a test package in two versions,
/// listed in /etc/apt/sources.list.d for the test's duration. Dropping it purges the package
/// and removes the list and its index files.
struct AptRepo {
    pkg: String,
    list: std::path::PathBuf,
    index_marker: String,
    _dir: tempfile::TempDir,
}

impl AptRepo {
    fn create() -> AptRepo {
        for c in ["apt-get", "dpkg-deb", "dpkg-query", "apt-mark"] {
            kwin_testkit::tier::require_command(c, "Debian's apt and dpkg");
        }
        let dir = tempfile::Builder::new()
            .prefix("kwinapt")
            .tempdir()
            .expect("tempdir");
        let pkg = format!("kwin-test-dummy-{}", std::process::id());
        let repo = dir.path().join("repo");
        std::fs::create_dir(&repo).expect("mkdir");
        let mut index = String::new();
        for v in ["1.0", "2.0"] {
            let b = dir.path().join(format!("build-{v}"));
            std::fs::create_dir_all(b.join("DEBIAN")).expect("mkdir");
            std::fs::write(
                b.join("DEBIAN/control"),
                format!("Package: {pkg}\nVersion: {v}\nArchitecture: all\nMaintainer: kwin tests <tests@kwin.invalid>\nDescription: kwin test package\n"),
            )
            .expect("write");
            let deb = repo.join(format!("{pkg}_{v}_all.deb"));
            let st = std::process::Command::new("dpkg-deb")
                .arg("--build")
                .arg("--root-owner-group")
                .arg(&b)
                .arg(&deb)
                .output()
                .expect("dpkg-deb");
            assert!(
                st.status.success(),
                "{}",
                String::from_utf8_lossy(&st.stderr)
            );
            let bytes = std::fs::read(&deb).expect("read deb");
            index.push_str(&format!(
                "Package: {pkg}\nVersion: {v}\nArchitecture: all\nMaintainer: kwin tests <tests@kwin.invalid>\nDescription: kwin test package\nFilename: ./{pkg}_{v}_all.deb\nSize: {}\nSHA256: {}\n\n",
                bytes.len(),
                sha_hex(&bytes)
            ));
        }
        std::fs::write(repo.join("Packages"), index).expect("write index");
        // apt's unprivileged downloader must be able to read the repository.
        for p in [dir.path(), repo.as_path()] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        let list = std::path::PathBuf::from(format!("/etc/apt/sources.list.d/{pkg}.list"));
        std::fs::write(&list, format!("deb [trusted=yes] file:{} ./\n", s(&repo)))
            .expect("write list");
        let out = std::process::Command::new("apt-get")
            .args(["-q", "update", "-o"])
            .arg(format!("Dir::Etc::sourcelist={}", s(&list)))
            .args([
                "-o",
                "Dir::Etc::sourceparts=-",
                "-o",
                "APT::Get::List-Cleanup=0",
            ])
            .output()
            .expect("apt-get update");
        let index_marker = s(dir.path()).trim_start_matches('/').replace('/', "_");
        let me = AptRepo {
            pkg,
            list,
            index_marker,
            _dir: dir,
        };
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        me
    }

    fn dpkg_status(&self) -> String {
        let out = std::process::Command::new("dpkg-query")
            .args(["-W", "-f=${db:Status-Abbrev}${Version}", &self.pkg])
            .output()
            .expect("dpkg-query");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for AptRepo {
    fn drop(&mut self) {
        let _ = std::process::Command::new("apt-mark")
            .args(["unhold", &self.pkg])
            .output();
        let _ = std::process::Command::new("dpkg")
            .args(["--purge", &self.pkg])
            .output();
        let _ = std::fs::remove_file(&self.list);
        if let Ok(rd) = std::fs::read_dir("/var/lib/apt/lists") {
            for e in rd.filter_map(Result::ok) {
                if e.file_name().to_string_lossy().contains(&self.index_marker) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
}

kwin_testkit::lab_test! {
#[tokio::test]
async fn package_with_apt_from_a_local_repository() {
    let repo = AptRepo::create();
    let t = local();
    let pkg = repo.pkg.clone();

    let m = build(
        "package",
        json!({ "name": pkg, "version": "1.0", "hold": true }),
    );
    let c = converge(&t, &m).await;
    assert!(c.changed(), "install expected");
    assert_eq!(c.action(), Some("create"));
    assert_eq!(repo.dpkg_status(), "hi 1.0");

    // Upgrade a held package; it stays held.
    let m = build(
        "package",
        json!({ "name": pkg, "version": "2.0", "hold": true }),
    );
    let c = converge(&t, &m).await;
    assert!(c.changed(), "upgrade expected");
    assert_eq!(c.reason(), "other version installed");
    assert_eq!(repo.dpkg_status(), "hi 2.0");

    let m = build("package", json!({ "name": [pkg.clone()], "hold": false }));
    assert!(changed(&converge(&t, &m).await));
    assert_eq!(repo.dpkg_status(), "ii 2.0");

    let m = build("package", json!({ "name": pkg, "state": "absent" }));
    assert!(changed(&converge(&t, &m).await));
    assert!(
        !repo.dpkg_status().starts_with("ii"),
        "{}",
        repo.dpkg_status()
    );
}
}

/// busybox's `sh` with only busybox applets on `PATH` (no coreutils, no GNU tar, no curl):
/// the scripts must not depend on GNU options. `None` when busybox is not installed.
fn busybox(dir: &Path) -> Arc<dyn Transport> {
    let bb = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("busybox is installed (apt-get install busybox)");
    let bin = dir.join("busybox-bin");
    std::fs::create_dir(&bin).expect("mkdir");
    let st = std::process::Command::new(bb)
        .arg("--install")
        .arg("-s")
        .arg(&bin)
        .status()
        .expect("busybox --install");
    assert!(st.success());
    let mut sh = Sh::new(&[bb, "sh", "-s"]);
    sh.path = Some(s(&bin));
    Arc::new(sh)
}

kwin_testkit::lab_test! {
#[tokio::test]
async fn modules_converge_under_busybox() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let t = busybox(tmp.path());
    let out = t
        .run(
            "readlink --help 2>&1 | head -1; command -v curl || echo no-curl",
            TIMEOUT,
        )
        .await
        .expect("run");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("BusyBox"),
        "{}",
        fail_text(&out)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("no-curl"));

    let dir = tmp.path().join(HOSTILE);
    let path = dir.join("f ✓");
    let m = build(
        "file",
        json!({ "path": s(&path), "content": format!("{HOSTILE}\n"), "mode": "0640" }),
    );
    assert!(changed(&converge(&t, &m).await));
    let m = build(
        "file",
        json!({ "path": s(&path), "content": "v2\n", "mode": "0600" }),
    );
    assert!(changed(&converge(&t, &m).await));
    assert_eq!(std::fs::read(&path).expect("read"), b"v2\n");
    assert_eq!(mode_of(&path), 0o600);
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&path, &link).expect("symlink");
    let m = build(
        "file",
        json!({ "path": s(&link), "content": "v3\n", "follow": true }),
    );
    assert!(changed(&converge(&t, &m).await));
    assert_eq!(std::fs::read(&path).expect("read"), b"v3\n");

    let m = build(
        "directory",
        json!({ "path": s(&dir.join("sub dir")), "mode": "0750" }),
    );
    assert!(changed(&converge(&t, &m).await));

    let m = build(
        "line_in_file",
        json!({ "path": s(&path), "regexp": "^v", "line": "X='$(id)'" }),
    );
    assert!(changed(&converge(&t, &m).await));
    assert_eq!(std::fs::read(&path).expect("read"), b"X='$(id)'\n");

    let made = tmp.path().join("made it");
    let m = build(
        "command",
        json!({ "run": format!("touch {}", kwin_engine::quote::sh_quote(&s(&made))), "creates": s(&made) }),
    );
    assert!(changed(&converge(&t, &m).await));

    let tgz = make_tarball(tmp.path(), "bb", &[("top/bin/tool", "bb\n")]);
    let dest = tmp.path().join("bb dest");
    let m = build(
        "archive",
        json!({ "src": s(&tgz), "dest": s(&dest), "strip_components": 2 }),
    );
    assert!(changed(&converge(&t, &m).await));
    assert_eq!(std::fs::read(dest.join("bin/tool")).expect("read"), b"bb\n");

    let body = b"served to busybox wget\n".to_vec();
    let http = Http::serve(body.clone());
    let dl = tmp.path().join("downloaded");
    let m = build(
        "download",
        json!({ "url": http.url("/file"), "dest": s(&dl), "sha256": sha_hex(&body) }),
    );
    let c = converge(&t, &m).await;
    assert!(c.changed(), "download expected");
    assert!(c.sent("wget -q"));
    assert_eq!(std::fs::read(&dl).expect("read"), body);

    let fstab = tmp.path().join("fstab");
    std::fs::write(&fstab, "/swap.img none swap sw 0 0\n").expect("write");
    if std::fs::read_to_string("/proc/swaps")
        .unwrap_or_default()
        .lines()
        .count()
        <= 1
    {
        let m = build("swap_off", json!({ "fstab": s(&fstab) }));
        assert!(changed(&converge(&t, &m).await));
    }
    let m = build(
        "kernel_module",
        json!({ "name": "kwin_no_such_module", "persist": false }),
    );
    let err = apply_fails(&t, &m).await;
    assert!(
        err.contains("cannot load kernel module kwin_no_such_module"),
        "{err}"
    );
    no_pwned(tmp.path());
}
}

/// A host whose `/etc` and `/var` are overlays writing into `dir` (a mount namespace of its
/// own per script; the overlays' upper layers keep what earlier scripts wrote): accounts can
/// be made and removed there without touching this machine's.
fn private_etc(dir: &Path) -> Arc<dyn Transport> {
    let mut mounts = String::new();
    for top in ["etc", "var"] {
        let (upper, work) = (
            dir.join(format!("{top}-upper")),
            dir.join(format!("{top}-work")),
        );
        std::fs::create_dir_all(&upper).expect("mkdir");
        std::fs::create_dir_all(&work).expect("mkdir");
        mounts.push_str(&format!(
            "mount -t overlay overlay -o {} /{top} && ",
            kwin_engine::quote::sh_quote(&format!(
                "lowerdir=/{top},upperdir={},workdir={}",
                s(&upper),
                s(&work)
            ))
        ));
    }
    Arc::new(Sh::new(&[
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        &format!("{mounts}exec /bin/sh -s"),
    ]))
}

kwin_testkit::lab_test! {
/// `user` creates an account, changes its shell and groups, and removes it, each change a
/// no-op the second time, on a host whose /etc and /var are private overlays: this machine's
/// own accounts never change.
#[tokio::test]
async fn user_create_change_remove_in_a_private_etc() {
    kwin_testkit::tier::require_command("useradd", "Debian's passwd package");
    let passwd_before = std::fs::read("/etc/passwd").expect("read /etc/passwd");
    let tmp = tempfile::tempdir().expect("tempdir");
    let t = private_etc(tmp.path());
    let home = tmp.path().join("home it's");
    let name = "kwin-test-user";
    let account = |t: Arc<dyn Transport>| async move {
        let out = t
            .run(&format!("getent passwd {name}; id -Gn {name}"), TIMEOUT)
            .await
            .expect("run");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };

    let m = build(
        "user",
        json!({ "name": name, "home": s(&home), "shell": "/bin/sh", "groups": ["adm"] }),
    );
    let c = converge(&t, &m).await;
    assert_eq!(c.action(), Some("create"));
    let got = account(t.clone()).await;
    assert!(
        got.contains(&format!(":{}:/bin/sh\n", s(&home))) && got.contains(" adm"),
        "{got}"
    );
    assert!(home.is_dir(), "useradd -m made the home directory");

    let m = build("user", json!({ "name": name, "shell": "/bin/bash", "groups": [] }));
    let c = converge(&t, &m).await;
    assert_eq!(c.reason(), "groups, shell differ");
    let got = account(t.clone()).await;
    assert!(got.contains(":/bin/bash\n") && !got.contains("adm"), "{got}");

    let m = build("user", json!({ "name": name, "state": "absent" }));
    assert_eq!(converge(&t, &m).await.action(), Some("delete"));
    assert_eq!(account(t.clone()).await, "");
    assert!(home.is_dir(), "userdel keeps the home directory");

    assert_eq!(
        std::fs::read("/etc/passwd").expect("read /etc/passwd"),
        passwd_before,
        "this machine's /etc/passwd changed"
    );
}
}
