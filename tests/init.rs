//! `kwin init`, through the binary: every starter plan it can write (flannel and Calico, WinRM
//! and OpenSSH to Windows, 0 to 2 workers of each OS) is accepted by `kwin validate` as written
//! on a machine with no SSH key at all, and renders (`kwin graph`) without an error; the file
//! is never overwritten; `-o -` prints.

use kwin_testkit::kwin;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `kwin ARGS` in `dir` with an empty HOME (no ~/.ssh, no known_hosts) and no `KWIN_VAR_*`.
fn run(dir: &Path, args: &[&str]) -> kwin_testkit::kwin::Run {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).expect("home");
    let mut k = kwin!(dir).args(args).env("HOME", &home);
    for (key, _) in std::env::vars() {
        if key.starts_with("KWIN_VAR_") {
            k = k.env_remove(key);
        }
    }
    k.run()
}

#[test]
fn every_starter_plan_validates_as_written_and_renders() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    let mut checked = 0;
    for cni in ["flannel", "calico"] {
        for transport in ["winrm", "ssh"] {
            for linux in ["0", "1", "2"] {
                for windows in ["0", "1", "2"] {
                    let what = format!("--cni {cni} --windows-transport {transport} --linux-workers {linux} --windows-workers {windows}");
                    let r = run(
                        d,
                        &[
                            "init",
                            "-o",
                            "-",
                            "--cni",
                            cni,
                            "--windows-transport",
                            transport,
                            "--linux-workers",
                            linux,
                            "--windows-workers",
                            windows,
                        ],
                    );
                    assert_eq!(r.code, 0, "{what}: {r}");
                    let text = &r.stdout;
                    // what was asked for is what was written
                    let doc: toml::Table =
                        toml::from_str(text).unwrap_or_else(|e| panic!("{what}: {e}\n{text}"));
                    let hosts = doc["hosts"].as_array().expect("hosts");
                    let count = |os: &str, role: &str| {
                        hosts
                            .iter()
                            .filter(|h| {
                                h["os"].as_str() == Some(os) && h["role"].as_str() == Some(role)
                            })
                            .count()
                            .to_string()
                    };
                    assert_eq!(count("linux", "control-plane"), "1", "{what}");
                    assert_eq!(count("linux", "worker"), linux, "{what}");
                    assert_eq!(count("windows", "worker"), windows, "{what}");
                    assert_eq!(doc["cni"]["plugin"].as_str(), Some(cni), "{what}");
                    if windows != "0" {
                        let want = if transport == "ssh" {
                            "ssh-powershell"
                        } else {
                            "winrm"
                        };
                        assert_eq!(
                            doc["defaults"]["windows"]["transport"].as_str(),
                            Some(want),
                            "{what}"
                        );
                    }
                    assert!(text.contains("EDIT"), "{what}: nothing marked to edit");
                    let plan = d.join(format!("{cni}-{transport}-{linux}-{windows}.toml"));
                    std::fs::write(&plan, text).expect("write");
                    let name = plan.file_name().and_then(|n| n.to_str()).expect("name");
                    let v = run(d, &["validate", name]);
                    assert_eq!(v.code, 0, "{what}: {v}");
                    assert!(v.out().contains("ok (0 warnings)"), "{what}: {v}");
                    let g = run(d, &["graph", name, "--format", "text"]);
                    assert_eq!(g.code, 0, "{what}: {g}");
                    assert!(g.stdout.contains("cp1/kubeadm-init"), "{what}: {g}");
                    if windows != "0" {
                        assert!(g.stdout.contains("ww1/"), "{what}: {g}");
                    }
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 36);
}

#[test]
fn init_writes_a_new_file_and_never_overwrites_one() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    let r = run(d, &["init"]);
    assert_eq!(r.code, 0, "{r}");
    let written = std::fs::read_to_string(d.join("plan.toml")).expect("plan.toml written");
    assert!(r.stderr.contains("wrote plan.toml"), "{r}");
    assert_eq!(run(d, &["validate", "plan.toml"]).code, 0);
    // a second init refuses, and the file keeps its content
    std::fs::write(d.join("plan.toml"), "# mine\n").expect("write");
    let r = run(d, &["init"]);
    assert_eq!(r.code, 1, "{r}");
    assert!(r.stderr.contains("plan.toml exists"), "{r}");
    assert_eq!(
        std::fs::read_to_string(d.join("plan.toml")).expect("read"),
        "# mine\n"
    );
    // -o FILE, and -o - prints the same plan as the default file holds
    let r = run(d, &["init", "-o", "cluster.toml"]);
    assert_eq!(r.code, 0, "{r}");
    assert_eq!(
        std::fs::read_to_string(d.join("cluster.toml")).expect("cluster.toml"),
        written
    );
    let r = run(d, &["init", "-o", "-"]);
    assert_eq!(r.stdout, written);
}

#[test]
fn init_refuses_what_the_plan_could_not_hold() {
    let dir = tempfile::tempdir().expect("tmp");
    for (args, want) in [
        (
            &["init", "-o", "-", "--kubernetes-version", "1.31"][..],
            "full version",
        ),
        (
            &["init", "-o", "-", "--kubernetes-version", "1.99.0"][..],
            "kwin knows Kubernetes 1.29 to",
        ),
        (
            &["init", "-o", "-", "--kubernetes-version", "1.37.99"][..],
            "never released: Kubernetes 1.37 has 1.37.0 to 1.37.2",
        ),
        (&["init", "-o", "-", "--linux-workers", "21"][..], "21"),
        (&["init", "-o", "-", "--cni", "weave"][..], "weave"),
    ] {
        let r = run(dir.path(), args);
        assert_ne!(r.code, 0, "{args:?}: {r}");
        assert!(r.stderr.contains(want), "{args:?}: {r}");
        assert!(r.stdout.is_empty(), "{args:?}: {r}");
    }
    // a version kwin knows is written as given
    let r = run(
        dir.path(),
        &["init", "-o", "-", "--kubernetes-version", "1.33.2"],
    );
    assert!(r.stdout.contains("kubernetes_version = \"1.33.2\""), "{r}");
}

/// The release a starter plan names is the one kwin's example plans are checked with: the
/// newest release of the support matrix.
#[test]
fn the_starter_kubernetes_version_is_the_examples_one() {
    let dir = tempfile::tempdir().expect("tmp");
    let r = run(dir.path(), &["init", "-o", "-"]);
    let starter: toml::Table = toml::from_str(&r.stdout).expect("TOML");
    let example: toml::Table = toml::from_str(
        &std::fs::read_to_string(root().join("examples/flannel.toml")).expect("example"),
    )
    .expect("TOML");
    assert_eq!(
        starter["cluster"]["kubernetes_version"],
        example["cluster"]["kubernetes_version"]
    );
    assert_eq!(
        starter["cluster"]["kubernetes_version"].as_str(),
        Some(kwin_engine::plan::support::newest_release().as_str())
    );
}
