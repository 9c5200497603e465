//! The containerd configuration kwin writes (`engine/src/plan/containerd.rs`), read by a real
//! containerd: `containerd --config FILE config dump` must accept each form kwin renders for
//! that containerd and show kwin's values where containerd uses them (the sandbox image, the
//! registry hosts directory, the runc cgroup driver, the CNI directories).
//!
//! The binaries: `KWIN_CONTAINERD_2` / `KWIN_CONTAINERD_1` if set, else the lab's builds
//! (`/var/cache/kwin-lab/bin/containerd-<version>/containerd`, built from source by the lab at
//! kwin's pins: containerd 2.3.7 and 1.7.29). A missing binary fails the test (it is in the
//! lab tier: the lab builds them).

use kwin_engine::plan::containerd::{config_version, render, Inputs, Node};
use std::path::PathBuf;
use std::process::Command;

fn binary(env: &str, version: &str) -> PathBuf {
    std::env::var_os(env).map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(format!(
            "/var/cache/kwin-lab/bin/containerd-{version}/containerd"
        ))
    })
}

/// `containerd --config <text> config dump`: the merged configuration containerd would run
/// with, and what it said on stderr.
fn dump(containerd: &PathBuf, text: &str) -> (toml::Table, String) {
    assert!(
        containerd.exists(),
        "no containerd at {} (the lab builds it; or set KWIN_CONTAINERD_2 / KWIN_CONTAINERD_1)",
        containerd.display()
    );
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("config.toml");
    std::fs::write(&file, text).expect("write config");
    let out = Command::new(containerd)
        .arg("--config")
        .arg(&file)
        .args(["config", "dump"])
        .output()
        .expect("run containerd");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        out.status.success(),
        "containerd refused:\n{stderr}\n---\n{text}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let doc =
        toml::from_str(&stdout).unwrap_or_else(|e| panic!("dump is not TOML ({e}):\n{stdout}"));
    (doc, stderr)
}

fn inputs(version: u32, cgroup_driver: &'static str) -> Inputs<'static> {
    Inputs {
        version,
        sandbox_image: "registry.lab:5000/pause:3.10.2",
        cgroup_driver,
        // What the lab's own nodes need (no CAP_SYS_RESOURCE here): each containerd reads it.
        restrict_oom_score_adj: cgroup_driver == "cgroupfs",
        windows_cni_bin_dir: r"C:\opt\cni\bin",
        windows_cni_conf_dir: r"C:\etc\cni\net.d",
    }
}

fn at<'a>(doc: &'a toml::Table, path: &[&str]) -> &'a toml::Value {
    let mut cur = doc.get(path[0]).unwrap_or_else(|| panic!("no {}", path[0]));
    for p in &path[1..] {
        cur = cur
            .get(p)
            .unwrap_or_else(|| panic!("no {} in {}", p, path.join(".")));
    }
    cur
}

kwin_testkit::lab_test! {
    #[test]
    fn containerd_2_reads_the_linux_file_with_kwins_values() {
        let bin = binary("KWIN_CONTAINERD_2", "2.3.7");
        let version = config_version("2.3.7");
        assert_eq!(version, 4);
        for driver in ["systemd", "cgroupfs"] {
            let text = render(Node::Linux, &inputs(version, driver));
            let (doc, stderr) = dump(&bin, &text);
            assert!(
                !stderr.contains("migrated"),
                "containerd 2.3 migrated kwin's file: {stderr}"
            );
            assert_eq!(doc["version"].as_integer(), Some(4));
            let images = ["plugins", "io.containerd.cri.v1.images"];
            let runtime = ["plugins", "io.containerd.cri.v1.runtime"];
            assert_eq!(
                at(&doc, &[images[0], images[1], "pinned_images", "sandbox"]).as_str(),
                Some("registry.lab:5000/pause:3.10.2")
            );
            assert_eq!(
                at(&doc, &[images[0], images[1], "registry", "config_path"]).as_str(),
                Some("/etc/containerd/certs.d")
            );
            let runc = at(
                &doc,
                &[runtime[0], runtime[1], "containerd", "runtimes", "runc"],
            );
            assert_eq!(runc["runtime_type"].as_str(), Some("io.containerd.runc.v2"));
            assert_eq!(
                runc["options"]["SystemdCgroup"].as_bool(),
                Some(driver == "systemd"),
                "{driver}"
            );
            assert_eq!(
                at(&doc, &[runtime[0], runtime[1], "restrict_oom_score_adj"]).as_bool(),
                Some(driver == "cgroupfs"),
                "{driver}"
            );
            let cni = at(&doc, &[runtime[0], runtime[1], "cni"]);
            assert_eq!(cni["bin_dirs"][0].as_str(), Some("/opt/cni/bin"));
            assert_eq!(cni["conf_dir"].as_str(), Some("/etc/cni/net.d"));
        }
    }

    #[test]
    fn containerd_2_reads_a_version_2_file_and_1_7_reads_kwins_version_2() {
        // The file a containerd 1.7 node has until its drained window: 2.x reads it too.
        let mut i = inputs(2, "systemd");
        i.restrict_oom_score_adj = true;
        let text = render(Node::Linux, &i);
        for (bin, what) in [
            (binary("KWIN_CONTAINERD_2", "2.3.7"), "2.3.7"),
            (binary("KWIN_CONTAINERD_1", "1.7.29"), "1.7.29"),
        ] {
            let (doc, _) = dump(&bin, &text);
            let s = doc.to_string();
            assert!(
                s.contains("registry.lab:5000/pause:3.10.2"),
                "{what}: the sandbox image is not in the dump:\n{s}"
            );
            assert!(s.contains("/etc/containerd/certs.d"), "{what}:\n{s}");
            assert!(s.contains("SystemdCgroup = true"), "{what}:\n{s}");
            assert!(s.contains("restrict_oom_score_adj = true"), "{what}:\n{s}");
        }
    }

    #[test]
    fn containerd_2_reads_the_windows_files_plugin_keys() {
        // A Linux containerd checks the file's grammar and the CRI plugin's keys; what only a
        // Windows containerd can (runhcs, the windows snapshotter) rests on containerd's
        // Windows defaults (internal/cri/config/config_windows.go at v2.3.7), which kwin's
        // values repeat.
        let text = render(Node::Windows, &inputs(4, "systemd"));
        let (doc, stderr) = dump(&binary("KWIN_CONTAINERD_2", "2.3.7"), &text);
        assert!(!stderr.contains("migrated"), "{stderr}");
        let images = at(&doc, &["plugins", "io.containerd.cri.v1.images"]);
        assert_eq!(
            images["pinned_images"]["sandbox"].as_str(),
            Some("registry.lab:5000/pause:3.10.2")
        );
        assert_eq!(images["snapshotter"].as_str(), Some("windows"));
        // The registry hosts directory: containerd sets no default on Windows.
        assert_eq!(
            images["registry"]["config_path"].as_str(),
            Some(kwin_engine::plan::containerd::WINDOWS_CERTS_DIR)
        );
        let runtime = at(&doc, &["plugins", "io.containerd.cri.v1.runtime"]);
        assert_eq!(
            runtime["containerd"]["default_runtime_name"].as_str(),
            Some("runhcs-wcow-process")
        );
        assert_eq!(runtime["cni"]["bin_dirs"][0].as_str(), Some(r"C:\opt\cni\bin"));
        assert_eq!(runtime["cni"]["conf_dir"].as_str(), Some(r"C:\etc\cni\net.d"));
    }

    #[test]
    fn containerd_1_7_and_2_read_the_windows_version_2_file_with_its_registry_hosts() {
        // The Windows file of containerd 1.x (version 2): its registry hosts directory is the
        // CRI plugin's `registry.config_path` for both.
        let text = render(Node::Windows, &inputs(2, "systemd"));
        for (bin, what) in [
            (binary("KWIN_CONTAINERD_2", "2.3.7"), "2.3.7"),
            (binary("KWIN_CONTAINERD_1", "1.7.29"), "1.7.29"),
        ] {
            let (doc, _) = dump(&bin, &text);
            let s = doc.to_string();
            let want = toml::Value::String(
                kwin_engine::plan::containerd::WINDOWS_CERTS_DIR.to_string(),
            )
            .to_string();
            assert!(
                s.contains(&format!("config_path = {want}")),
                "{what}: no registry hosts directory in the dump:\n{s}"
            );
        }
    }
}
