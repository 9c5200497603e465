//! Real-shell convergence: each module runs against this machine through `LocalTransport`
//! (dash as /bin/sh), under a temporary directory: probe (one batched script) → plan → run
//! the steps → probe again → the plan must be a no-op; a second run is a no-op at once.
//! Paths and contents are hostile on purpose (spaces, quotes, `$()`, backticks, `;`,
//! newlines, unicode) and must arrive literally.

use kwin_engine::fact::{batch_script, new_nonce, parse_batch, Facts};
use kwin_engine::module::{Ctx, Inputs, Module, Plan, Registry, Step};
use kwin_engine::transport::local::LocalTransport;
use kwin_engine::transport::{Output, Shell, Transport};
use kwin_modules::Builtin;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(60);

/// A file name no shell should ever misread.
const HOSTILE: &str = "it's a \"test\" $(touch pwned) `touch pwned2`; x\nnewline ✓ 한";

fn local() -> LocalTransport {
    LocalTransport { become_root: false }
}

fn build(name: &str, params: Value) -> Box<dyn Module> {
    match Builtin.build(name, Shell::Posix, &params) {
        Ok(m) => m,
        Err(e) => panic!("building {name}: {e} at {:?}", e.path),
    }
}

async fn probe(t: &dyn Transport, m: &dyn Module) -> Facts {
    let qs = m.facts(Shell::Posix);
    let nonce = new_nonce();
    let out = t
        .run(&batch_script(Shell::Posix, &qs, &nonce), TIMEOUT)
        .await
        .expect("probe runs");
    parse_batch(&qs, &out, &nonce).expect("probe output parses")
}

async fn plan(t: &dyn Transport, m: &dyn Module) -> Plan {
    let facts = probe(t, m).await;
    let inputs = Inputs::new();
    let ctx = Ctx {
        shell: Shell::Posix,
        host: "local",
        inputs: &inputs,
    };
    match m.plan(&facts, &ctx) {
        Ok(p) => p,
        Err(e) => panic!("plan of {m:?} failed: {e}"),
    }
}

/// Run steps as the executor does: consecutive `Run` scripts in one shell, each in its own
/// subshell, the batch failing at the first failure.
async fn run_steps(t: &dyn Transport, steps: &[Step]) -> Result<(), Output> {
    let mut batch = String::new();
    let flush = |batch: &mut String| {
        let s = std::mem::take(batch);
        async move {
            if s.is_empty() {
                return Ok(());
            }
            let out = t.run(&s, TIMEOUT).await.expect("transport runs");
            if out.success() {
                Ok(())
            } else {
                Err(out)
            }
        }
    };
    for s in steps {
        match s {
            Step::Run(script) => {
                batch.push_str(&format!("(\n{script}\n) || exit $?\n"));
            }
            Step::Put {
                path,
                content,
                mode,
            } => {
                flush(&mut batch).await?;
                t.put(path, content, *mode).await.expect("put");
            }
            Step::Reboot(_) => panic!("no reboots here"),
        }
    }
    flush(&mut batch).await
}

fn fail_text(out: &Output) -> String {
    format!(
        "exit {}: {}{}",
        out.exit,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Plan, apply, re-probe: returns the first plan. Panics unless the module converges and a
/// second run is a no-op.
async fn converge(t: &dyn Transport, m: &dyn Module) -> Plan {
    let first = plan(t, m).await;
    if let Plan::Change(c) = &first {
        if let Err(out) = run_steps(t, &c.steps).await {
            panic!(
                "steps of {m:?} failed: {}\nsteps: {:?}",
                fail_text(&out),
                c.steps
            );
        }
        let again = plan(t, m).await;
        assert!(again.is_noop(), "{m:?} did not converge: {again:?}");
    }
    let second = plan(t, m).await;
    assert!(
        second.is_noop(),
        "second run of {m:?} is not a no-op: {second:?}"
    );
    first
}

/// Plan and apply, expecting the steps to fail; returns their stderr.
async fn apply_fails(t: &dyn Transport, m: &dyn Module) -> String {
    match plan(t, m).await {
        Plan::Change(c) => match run_steps(t, &c.steps).await {
            Err(out) => String::from_utf8_lossy(&out.stderr).into_owned(),
            Ok(()) => panic!("steps of {m:?} succeeded"),
        },
        p => panic!("expected a change, got {p:?}"),
    }
}

fn changed(p: &Plan) -> bool {
    !p.is_noop()
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
    let p = converge(&t, m.as_ref()).await;
    assert!(changed(&p));
    assert_eq!(std::fs::read_to_string(&path).expect("read"), content);
    assert_eq!(mode_of(&path), 0o640);

    // Content changes, mode kept from the file when the plan does not set it.
    let m = build("file", json!({ "path": s(&path), "content": "v2\n" }));
    assert!(changed(&converge(&t, m.as_ref()).await));
    assert_eq!(std::fs::read(&path).expect("read"), b"v2\n");
    assert_eq!(mode_of(&path), 0o640);

    // Mode only.
    let m = build(
        "file",
        json!({ "path": s(&path), "content": "v2\n", "mode": 600 }),
    );
    let Plan::Change(c) = converge(&t, m.as_ref()).await else {
        panic!("mode change expected")
    };
    assert_eq!(c.reason, "mode differs");
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
    assert!(!changed(&converge(&t, m.as_ref()).await));

    let m = build("file", json!({ "path": s(&path), "state": "absent" }));
    assert!(changed(&converge(&t, m.as_ref()).await));
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
    let m = build("file", json!({ "path": s(&link), "content": "new\n" }));
    assert!(changed(&converge(&t, m.as_ref()).await));
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
    let Plan::Change(c) = converge(&t, m.as_ref()).await else {
        panic!("create expected")
    };
    assert!(c.steps.iter().any(|s| matches!(s, Step::Put { .. })));
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
    let t = local();
    let m = build("file", json!({ "path": s(&path), "content": "wanted\n" }));
    let Plan::Change(c) = plan(&t, m.as_ref()).await else {
        panic!("change expected")
    };
    std::fs::write(&path, "someone else\n").expect("write");
    let out = run_steps(&t, &c.steps).await.expect_err("must refuse");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("changed since it was probed"),
        "{}",
        fail_text(&out)
    );
    assert_eq!(std::fs::read(&path).expect("read"), b"someone else\n");
}

#[tokio::test]
async fn directory_create_attrs_remove() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join(HOSTILE).join("nested ✓");
    let t = local();
    let m = build("directory", json!({ "path": s(&dir), "mode": "0750" }));
    assert!(changed(&converge(&t, m.as_ref()).await));
    assert!(dir.is_dir());
    assert_eq!(mode_of(&dir), 0o750);
    let m = build("directory", json!({ "path": s(&dir), "mode": "0700" }));
    let Plan::Change(c) = converge(&t, m.as_ref()).await else {
        panic!("mode change expected")
    };
    assert_eq!(c.reason, "mode differs");
    assert_eq!(mode_of(&dir), 0o700);
    std::fs::write(dir.join("inside"), "x").expect("write");
    let top = tmp.path().join(HOSTILE);
    let m = build("directory", json!({ "path": s(&top), "state": "absent" }));
    assert!(changed(&converge(&t, m.as_ref()).await));
    assert!(!top.exists());
    assert!(tmp.path().exists());
    no_pwned(tmp.path());
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
    assert!(changed(&converge(&t, m.as_ref()).await));
    let m = build(
        "line_in_file",
        json!({ "path": s(&path), "regexp": "^SELINUX=", "line": "SELINUX=permissive" }),
    );
    assert!(changed(&converge(&t, m.as_ref()).await));
    assert_eq!(
        std::fs::read_to_string(&path).expect("read"),
        format!("# header\nSELINUX=permissive\nlast line without newline\n{hostile_line}\n")
    );
    assert_eq!(mode_of(&path), 0o600, "mode is kept");

    let m = build(
        "line_in_file",
        json!({ "path": s(&path), "regexp": "^#", "state": "absent" }),
    );
    assert!(changed(&converge(&t, m.as_ref()).await));
    assert!(!std::fs::read_to_string(&path)
        .expect("read")
        .contains("# header"));

    let created = tmp.path().join("new.conf");
    let m = build(
        "line_in_file",
        json!({ "path": s(&created), "line": "A=1" }),
    );
    assert!(changed(&converge(&t, m.as_ref()).await));
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
        let Plan::Change(c) = converge(&t, m.as_ref()).await else {
            panic!("file expected")
        };
        assert_eq!(c.reason, "file missing");
        assert_eq!(
            std::fs::read_to_string(&file).expect("read"),
            "# managed by kwin\nbridge\n"
        );
    }
    let m = build(
        "kernel_module",
        json!({ "name": "kwin_no_such_module", "persist": false }),
    );
    let err = apply_fails(&t, m.as_ref()).await;
    assert!(
        err.contains("kwin: cannot load kernel module kwin_no_such_module"),
        "{err}"
    );
}

/// A transport whose scripts run inside a network namespace, so `net.*` kernel parameters
/// can be changed without touching this machine's own.
struct Netns {
    name: String,
}

impl Netns {
    /// A fresh namespace, or `None` when this machine cannot make one (not root, no `ip`).
    fn create() -> Option<Netns> {
        let name = format!("kwin-test-{}", std::process::id());
        let ok = std::process::Command::new("ip")
            .args(["netns", "add", &name])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        ok.then_some(Netns { name })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

#[async_trait::async_trait]
impl Transport for Netns {
    fn shell(&self) -> Shell {
        Shell::Posix
    }
    async fn connect(&self) -> Result<(), kwin_engine::transport::TransportError> {
        Ok(())
    }
    async fn run(
        &self,
        script: &str,
        timeout: Duration,
    ) -> Result<Output, kwin_engine::transport::TransportError> {
        use tokio::io::AsyncWriteExt;
        let mut child = tokio::process::Command::new("ip")
            .args(["netns", "exec", &self.name, "/bin/sh", "-s"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| kwin_engine::transport::TransportError::Local(e.to_string()))?;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(script.as_bytes())
            .await
            .map_err(|e| kwin_engine::transport::TransportError::Local(e.to_string()))?;
        drop(stdin);
        let out = tokio::time::timeout(timeout, child.wait_with_output())
            .await
            .map_err(|_| kwin_engine::transport::TransportError::Timeout(timeout))?
            .map_err(|e| kwin_engine::transport::TransportError::Local(e.to_string()))?;
        Ok(Output {
            stdout: out.stdout,
            stderr: out.stderr,
            exit: out.status.code().unwrap_or(-1),
        })
    }
    async fn put(
        &self,
        path: &str,
        bytes: &[u8],
        mode: Option<u32>,
    ) -> Result<(), kwin_engine::transport::TransportError> {
        local().put(path, bytes, mode).await
    }
    async fn get(&self, path: &str) -> Result<Vec<u8>, kwin_engine::transport::TransportError> {
        local().get(path).await
    }
    async fn close(&self) {}
}

#[allow(clippy::print_stderr)]
fn skip(why: &str) {
    eprintln!("SKIPPED: {why}");
}

#[tokio::test]
async fn sysctl_in_a_network_namespace() {
    let Some(ns) = Netns::create() else {
        skip("sysctl convergence needs root and `ip netns` to use a private network namespace");
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join(format!("99 {HOSTILE}.conf"));
    let m = build(
        "sysctl",
        json!({ "key": "net.ipv4.ip_forward", "value": 1, "file": s(&file) }),
    );
    let Plan::Change(c) = converge(&ns, m.as_ref()).await else {
        panic!("change expected")
    };
    assert!(c.reason.contains("live value differs"), "{}", c.reason);
    let live = ns
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
    assert!(changed(&converge(&ns, m.as_ref()).await));
    let live = ns
        .run("cat /proc/sys/net/ipv4/ip_local_port_range", TIMEOUT)
        .await
        .expect("run");
    assert_eq!(live.stdout, b"40000\t50000\n");

    let m = build(
        "sysctl",
        json!({ "key": "net.kwin.no_such_key", "value": 1, "persist": false }),
    );
    let err = apply_fails(&ns, m.as_ref()).await;
    assert!(
        err.contains("sysctl net.kwin.no_such_key does not exist on this kernel"),
        "{err}"
    );
    no_pwned(tmp.path());
}
