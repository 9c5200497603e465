//! The processes kwin's scripts start on a host, counted: the benchmark's workload (20 tasks:
//! 4 directories, 8 files, 4 lines, 2 kernel parameters, 2 `creates`-guarded commands, as
//! `bench/workload/gen.py` defines them, under a temporary directory) through the real
//! executor, cold then warm, every script run by dash in a PID namespace of its own
//! (`unshare --pid`), in a network namespace (the kernel parameters are per namespace).
//!
//! A new PID namespace numbers its processes from 1: the shell that runs the script is 2, and
//! a process started after the script ends gets the next number, so its number minus 3 is how
//! many processes the script forked. The counts are exact for this machine's dash and
//! coreutils; a change that brings back a subshell per step, a `chown` of what the scripts'
//! account already owns, a `chmod` the umask could do, or a process per path fact changes
//! them and fails the test (`bench/README.md` tells what each count is made of).

use kwin_engine::event::Mode;
use kwin_engine::exec::RunOptions;
use kwin_engine::secret::Scrubber;
use kwin_engine::transport::Transport;
use kwin_modules::Builtin;
use kwin_testkit::converge::Sh;
use kwin_testkit::exec::{run, task, TaskExt};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

/// Forks of the probe (cold and warm): ONE `stat` and ONE `sha256sum` for every path fact,
/// ONE `head` for the content of the 4 line files (line_in_file edits it) and the 2 kernel
/// parameters' values (`/proc/sys`).
const PROBE: usize = 3;
/// Forks of the cold batch: `mkdir` ×4, `mv` ×14 (8 files, 4 lines, 2 sysctl files), the two
/// commands (`sh` ×2 and `head`, `od`, `tr`, `tar`), and the end read (`stat`, `sha256sum`,
/// `head`). Each line file is checked to be still as probed by the shell's own `read` (its
/// probed text is small), not a `sha256sum` each. No subshell per step,
/// no `chown` or `chmod` (root writes root's files, the umask makes the modes), and the
/// directories' checks wait for the end read (what later tasks write below them cannot
/// disturb them).
const COLD_BATCH: usize = 27;

struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.0])
            .output();
    }
}

fn s(p: &Path) -> String {
    p.to_str().expect("utf-8 path").to_string()
}

fn tasks(root: &Path) -> Vec<kwin_engine::task::Task> {
    let h = "h1";
    let r = s(root);
    let mut v = Vec::new();
    for (name, d, mode) in [
        ("dir-conf", "conf.d", "0755"),
        ("dir-data", "data", "0750"),
        ("dir-state", "state", "0700"),
        ("dir-log", "log", "0755"),
    ] {
        v.push(task(
            h,
            name,
            "directory",
            json!({ "path": format!("{r}/{d}"), "mode": mode, "owner": "root", "group": "root" }),
        ));
    }
    let mut files = Vec::new();
    for i in 1..=8 {
        // As gen.py's _file_content: 0.5 to 4 KiB of config-like text.
        let mut content =
            format!("# app-{i}.conf: managed by the benchmark workload\n[section-{i}]\n");
        for k in 0..12 * i {
            content.push_str(&format!(
                "option_{i}_{k:03} = value-{:05}\n",
                (i * 7919 + k * 104729) % 100000
            ));
        }
        let name = format!("file-app-{i}");
        v.push(
            task(
                h,
                &name,
                "file",
                json!({ "path": format!("{r}/conf.d/app-{i}.conf"), "content": content,
                        "mode": if i % 4 == 0 { "0640" } else { "0644" },
                        "owner": "root", "group": "root" }),
            )
            .after(h, "dir-conf"),
        );
        files.push(name);
    }
    for (i, regexp, line) in [
        (1, Some("^listen_port *="), "listen_port = 8081"),
        (2, Some("^workers *="), "workers = 8"),
        (3, None, "max_connections = 512"),
        (4, None, "log_level = info"),
    ] {
        let mut p = json!({ "path": format!("{r}/lines/svc-{i}.conf"), "line": line });
        if let Some(re) = regexp {
            p["regexp"] = json!(re);
        }
        v.push(task(h, &format!("line-svc-{i}"), "line_in_file", p));
    }
    for (name, key, value) in [
        ("sysctl-ip-forward", "net.ipv4.ip_forward", "1"),
        (
            "sysctl-accept-redirects",
            "net.ipv4.conf.all.accept_redirects",
            "0",
        ),
    ] {
        v.push(task(
            h,
            name,
            "sysctl",
            json!({ "key": key, "value": value, "file": format!("{r}/sysctl.d/90-{name}.conf") }),
        ));
    }
    v.push(
        task(
            h,
            "command-token",
            "command",
            json!({ "run": format!("umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n' > {r}/state/token"),
                    "creates": format!("{r}/state/token") }),
        )
        .after(h, "dir-state"),
    );
    let mut snapshot = task(
        h,
        "command-snapshot",
        "command",
        json!({ "run": format!("tar -C {r}/conf.d -cf {r}/data/conf-snapshot.tar ."),
                "creates": format!("{r}/data/conf-snapshot.tar") }),
    );
    for f in &files {
        snapshot = snapshot.after(h, f);
    }
    v.push(snapshot);
    v
}

/// The fork counts of every script run since `from`.
fn counts(file: &Path, from: usize) -> Vec<usize> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines()
        .skip(from)
        .map(|l| {
            let last: usize = l.trim().parse().expect("a pid");
            last.checked_sub(3).expect("pid 3 or later")
        })
        .collect()
}

kwin_testkit::lab_test! {
#[tokio::test]
async fn the_benchmark_workload_forks_this_many_processes_per_script() {
    kwin_testkit::tier::require_command("unshare", "util-linux");
    let ns = Netns(format!("kwin-forks-{}", std::process::id()));
    let out = std::process::Command::new("ip")
        .args(["netns", "add", &ns.0])
        .output()
        .expect("ip netns add");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The values the workload's reset sets (a new namespace may start with the machine's).
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", &ns.0, "sh", "-c"])
        .arg("echo 0 >/proc/sys/net/ipv4/ip_forward && echo 1 >/proc/sys/net/ipv4/conf/all/accept_redirects")
        .output()
        .expect("ip netns exec");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("srv");
    std::fs::create_dir_all(root.join("lines")).expect("mkdir");
    std::fs::create_dir_all(root.join("sysctl.d")).expect("mkdir");
    for i in 1..=4 {
        std::fs::write(
            root.join(format!("lines/svc-{i}.conf")),
            format!("# svc-{i}.conf (fixture written by reset.sh)\nlisten_port = 80\nworkers = 2\n"),
        )
        .expect("fixture");
    }
    let count = tmp.path().join("forks");
    let host: Arc<dyn Transport> = Arc::new(Sh::new(&[
        "ip",
        "netns",
        "exec",
        &ns.0,
        "unshare",
        "--pid",
        "--fork",
        "--mount-proc",
        "/bin/sh",
        "-c",
        &format!(
            "/bin/dash -s; r=$?; /bin/sh -c 'echo $$' >>'{}'; exit $r",
            s(&count)
        ),
    ]));
    // The counter itself: a script that forks nothing counts 0, one that forks once 1.
    for (script, want) in [(":", 0), ("/bin/true", 1)] {
        let from = counts(&count, 0).len();
        let out = host.run(script, std::time::Duration::from_secs(30)).await.expect("run");
        assert_eq!(out.exit, 0);
        assert_eq!(counts(&count, from), vec![want], "`{script}`");
    }
    let state = tempfile::tempdir().expect("state");
    let mut per_run = Vec::new();
    for run_name in ["cold", "warm"] {
        let from = counts(&count, 0).len();
        let out = run(
            tasks(&root),
            &[("h1", host.clone())],
            RunOptions::new(Mode::Apply, state.path().to_path_buf()),
            Scrubber::default(),
            &Builtin,
        )
        .await;
        let c = out.summary.counts;
        assert_eq!(
            (c.failed, c.changed + c.ok),
            (0, 20),
            "{run_name}: {}",
            out.json()
        );
        per_run.push((run_name, c.changed, counts(&count, from)));
    }
    assert_eq!(
        per_run,
        vec![("cold", 20, vec![PROBE, COLD_BATCH]), ("warm", 0, vec![PROBE])],
        "forks per script: probe, batch"
    );
    // What the scripts made is what the workload asks.
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let md = std::fs::metadata(root.join("conf.d/app-4.conf")).expect("stat");
    assert_eq!((md.uid(), md.gid(), md.permissions().mode() & 0o7777), (0, 0, 0o640));
    let md = std::fs::metadata(root.join("state")).expect("stat");
    assert_eq!((md.uid(), md.gid(), md.permissions().mode() & 0o7777), (0, 0, 0o700));
    assert!(std::fs::read_to_string(root.join("lines/svc-1.conf"))
        .expect("read")
        .contains("listen_port = 8081\n"));
}
}
