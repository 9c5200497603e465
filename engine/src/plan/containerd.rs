//! containerd's configuration file, rendered in ONE place for every recipe that writes it
//! (`runtime-containerd` and `windows-worker` on fresh nodes, their twins in the upgrade
//! recipes inside the drained window): the effective values' `runtime.containerd_config`.
//!
//! Version 3 for containerd 2.1 and 2.2, the format containerd 2.x reads natively
//! (containerd/containerd@v2.4.2 docs/cri/config.md, "Full configuration": "Version 3
//! (Recommended for containerd 2.x): Introduced in containerd 2.0. Several plugin IDs have
//! changed"), and version 4 from containerd 2.3, whose highest configuration version it is
//! (containerd/containerd@v2.3.7 version/version.go `ConfigVersion = 4`, 3 at v2.2.9; a
//! version 3 file is migrated with the warning "Configuration migrated from version 3, use
//! `containerd config migrate`", and 2.2 refuses a version above its own,
//! cmd/containerd/server/config/config.go). Versions 3 and 4 name the CRI plugins alike
//! (what 4 moved, the shim manager's and the cgroups metrics' settings, kwin does not set):
//! the CRI plugin is `io.containerd.cri.v1.images` (the sandbox image among its
//! `pinned_images`, the registry hosts directory `registry.config_path`) and
//! `io.containerd.cri.v1.runtime` (runtimes, CNI with `bin_dirs`, which 2.1 introduced:
//! internal/cri/config/config.go at v2.3.7 warns "`bin_dir` is deprecated, please use
//! `bin_dirs` instead"). Version 2 for containerd 1.x (a distribution's package) and 2.0,
//! which 2.x still reads ("Version 2 (Recommended for containerd 1.x) ... Still supported in
//! containerd v2.x"). Checked by `tests/containerd_config.rs` with a real containerd 2.x
//! (`containerd --config FILE config dump`).
//!
//! Registry hosts: the CRI images plugin's `registry.config_path` (`io.containerd.cri.v1.images`
//! in versions 3 and 4, `io.containerd.grpc.v1.cri` in version 2), where the
//! `registry_mirrors` module writes one `hosts.toml` per registry (containerd docs/hosts.md at
//! v2.3.4): [`LINUX_CERTS_DIR`] on Linux, [`WINDOWS_CERTS_DIR`] on Windows. Written on every
//! node, mirrors or not: a directory without a registry's `hosts.toml` leaves that registry's
//! pulls as they were (core/remotes/docker/config/hosts.go `ConfigureHosts` takes a host
//! directory that is not found as "no configuration"), so adding or removing a mirror later
//! never changes this file. On Windows it must be written: containerd sets a default
//! `config_path` on Linux only (plugins/cri/images/plugin.go at v2.3.4: `if runtime.GOOS ==
//! "linux"`); containerd 1.7 reads it as 2.x does (pkg/cri/server/image_pull.go at v1.7.29,
//! `filepath.SplitList(c.config.Registry.ConfigPath)`). The cgroup driver of runc
//! (`SystemdCgroup`) follows the plan's `runtime.cgroup_driver`.

use super::versions::Version;

/// Which node's file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    Linux,
    Windows,
}

/// What the file is rendered from (all effective values).
#[derive(Debug, Clone)]
pub struct Inputs<'a> {
    /// 2, 3 or 4 ([`config_version`]).
    pub version: u32,
    pub sandbox_image: &'a str,
    /// "systemd" | "cgroupfs" (Linux).
    pub cgroup_driver: &'a str,
    /// `restrict_oom_score_adj` of the CRI runtime plugin (Linux; containerd
    /// internal/cri/config/config.go `RestrictOOMScoreAdj`, at v1.7.29 pkg/cri/config too).
    pub restrict_oom_score_adj: bool,
    /// Windows CNI directories (`defaults::windows`).
    pub windows_cni_bin_dir: &'a str,
    pub windows_cni_conf_dir: &'a str,
}

/// The configuration version kwin writes for a containerd release: 4 from 2.3, 3 for 2.1
/// and 2.2, else 2.
pub fn config_version(containerd: &str) -> u32 {
    match Version::parse(containerd) {
        Some(v) if v >= Version(vec![2, 3]) => 4,
        Some(v) if v >= Version(vec![2, 1]) => 3,
        _ => 2,
    }
}

/// The registry hosts directory of a Linux node's containerd (its `config_path`): where the
/// `registry_mirrors` module writes `<registry>/hosts.toml` (containerd docs/hosts.md).
pub const LINUX_CERTS_DIR: &str = "/etc/containerd/certs.d";

/// The registry hosts directory of a Windows node's containerd (its `config_path`), where the
/// Windows `registry_mirrors` module writes `<registry directory>\hosts.toml`: `certs.d`
/// beside `config.toml` in containerd's Windows configuration directory,
/// `%ProgramFiles%\containerd` (containerd v2.3.4 defaults/defaults_windows.go
/// `DefaultConfigDir`; Linux's `/etc/containerd/certs.d` is `certs.d` in `/etc/containerd`,
/// its `DefaultConfigDir`).
pub const WINDOWS_CERTS_DIR: &str = r"C:\Program Files\containerd\certs.d";

/// A TOML basic string (quotes and escapes as the TOML grammar wants them).
fn q(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// The file's text.
pub fn render(node: Node, i: &Inputs<'_>) -> String {
    let systemd = if i.cgroup_driver == "systemd" {
        "true"
    } else {
        "false"
    };
    let sandbox = q(i.sandbox_image);
    let certs = q(LINUX_CERTS_DIR);
    let win_certs = q(WINDOWS_CERTS_DIR);
    let v = i.version;
    // Only written when asked: a line containerd's own default already says would be noise.
    let restrict = if i.restrict_oom_score_adj {
        "  restrict_oom_score_adj = true\n"
    } else {
        ""
    };
    let runtime_plugin = if i.restrict_oom_score_adj {
        "[plugins.\"io.containerd.cri.v1.runtime\"]\n  restrict_oom_score_adj = true\n\n"
    } else {
        ""
    };
    match (node, i.version >= 3) {
        (Node::Linux, true) => format!(
            "# Written by kwin: containerd 2.x, configuration version {v}.\n\
             version = {v}\n\n\
             [plugins.\"io.containerd.cri.v1.images\".pinned_images]\n  sandbox = {sandbox}\n\n\
             [plugins.\"io.containerd.cri.v1.images\".registry]\n  config_path = {certs}\n\n\
             {runtime_plugin}\
             [plugins.\"io.containerd.cri.v1.runtime\".containerd]\n  default_runtime_name = \"runc\"\n\n\
             [plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n\n\
             [plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc.options]\n  SystemdCgroup = {systemd}\n\n\
             [plugins.\"io.containerd.cri.v1.runtime\".cni]\n  bin_dirs = [\"/opt/cni/bin\"]\n  conf_dir = \"/etc/cni/net.d\"\n"
        ),
        (Node::Linux, false) => format!(
            "# Written by kwin: containerd 1.x, configuration version 2.\n\
             version = 2\n\n\
             [plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = {sandbox}\n{restrict}\n\
             [plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = {certs}\n\n\
             [plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  default_runtime_name = \"runc\"\n\n\
             [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n\n\
             [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  SystemdCgroup = {systemd}\n\n\
             [plugins.\"io.containerd.grpc.v1.cri\".cni]\n  bin_dir = \"/opt/cni/bin\"\n  conf_dir = \"/etc/cni/net.d\"\n"
        ),
        (Node::Windows, true) => format!(
            "# Written by kwin: containerd 2.x, configuration version {v}.\n\
             version = {v}\n\
             root = \"C:\\\\ProgramData\\\\containerd\\\\root\"\n\
             state = \"C:\\\\ProgramData\\\\containerd\\\\state\"\n\n\
             [plugins.\"io.containerd.cri.v1.images\"]\n  snapshotter = \"windows\"\n\n\
             [plugins.\"io.containerd.cri.v1.images\".pinned_images]\n  sandbox = {sandbox}\n\n\
             [plugins.\"io.containerd.cri.v1.images\".registry]\n  config_path = {win_certs}\n\n\
             [plugins.\"io.containerd.cri.v1.runtime\".containerd]\n  default_runtime_name = \"runhcs-wcow-process\"\n\n\
             [plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runhcs-wcow-process]\n  runtime_type = \"io.containerd.runhcs.v1\"\n\n\
             [plugins.\"io.containerd.cri.v1.runtime\".cni]\n  bin_dirs = [{}]\n  conf_dir = {}\n",
            q(i.windows_cni_bin_dir),
            q(i.windows_cni_conf_dir)
        ),
        (Node::Windows, false) => format!(
            "# Written by kwin: containerd 1.x, configuration version 2.\n\
             version = 2\n\
             root = \"C:\\\\ProgramData\\\\containerd\\\\root\"\n\
             state = \"C:\\\\ProgramData\\\\containerd\\\\state\"\n\n\
             [plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = {sandbox}\n\n\
             [plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = {win_certs}\n\n\
             [plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  snapshotter = \"windows\"\n  default_runtime_name = \"runhcs-wcow-process\"\n\n\
             [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runhcs-wcow-process]\n  runtime_type = \"io.containerd.runhcs.v1\"\n\n\
             [plugins.\"io.containerd.grpc.v1.cri\".cni]\n  bin_dir = {}\n  conf_dir = {}\n",
            q(i.windows_cni_bin_dir),
            q(i.windows_cni_conf_dir)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(version: u32) -> Inputs<'static> {
        Inputs {
            version,
            sandbox_image: "registry.k8s.io/pause:3.10.2",
            cgroup_driver: "cgroupfs",
            restrict_oom_score_adj: false,
            windows_cni_bin_dir: r"C:\opt\cni\bin",
            windows_cni_conf_dir: r"C:\etc\cni\net.d",
        }
    }

    #[test]
    fn version_3_from_containerd_2_1_and_4_from_2_3() {
        assert_eq!(config_version("1.7.29"), 2);
        assert_eq!(config_version("2.0.6"), 2);
        assert_eq!(config_version("2.1.0"), 3);
        assert_eq!(config_version("2.2.9"), 3);
        assert_eq!(config_version("2.3.7"), 4);
        assert_eq!(config_version("2.4.2"), 4);
    }

    #[test]
    fn every_form_is_toml_with_the_values_where_containerd_reads_them() {
        for node in [Node::Linux, Node::Windows] {
            for version in [2, 3, 4] {
                let text = render(node, &inputs(version));
                let doc: toml::Table = toml::from_str(&text)
                    .unwrap_or_else(|e| panic!("{node:?} v{version}: {e}\n{text}"));
                assert_eq!(doc["version"].as_integer(), Some(i64::from(version)));
                let p = &doc["plugins"];
                let (sandbox, cni) = if version >= 3 {
                    (
                        &p["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"],
                        &p["io.containerd.cri.v1.runtime"]["cni"],
                    )
                } else {
                    (
                        &p["io.containerd.grpc.v1.cri"]["sandbox_image"],
                        &p["io.containerd.grpc.v1.cri"]["cni"],
                    )
                };
                assert_eq!(sandbox.as_str(), Some("registry.k8s.io/pause:3.10.2"));
                let bin = cni
                    .get("bin_dirs")
                    .and_then(|b| b.get(0))
                    .or(cni.get("bin_dir"));
                let want = if node == Node::Windows {
                    r"C:\opt\cni\bin"
                } else {
                    "/opt/cni/bin"
                };
                assert_eq!(bin.and_then(|b| b.as_str()), Some(want), "{text}");
            }
        }
        let linux = render(Node::Linux, &inputs(4));
        assert!(linux.contains("SystemdCgroup = false"), "{linux}");
        assert!(linux.contains("config_path = \"/etc/containerd/certs.d\""));
    }

    /// The registry hosts directory (`config_path`) is in the CRI images plugin of every
    /// form, on Windows too (containerd gives Windows no default): the directory the
    /// `registry_mirrors` module writes.
    #[test]
    fn every_form_names_the_registry_hosts_directory() {
        for (node, dir) in [
            (Node::Linux, LINUX_CERTS_DIR),
            (Node::Windows, WINDOWS_CERTS_DIR),
        ] {
            for version in [2, 3, 4] {
                let text = render(node, &inputs(version));
                let doc: toml::Table = toml::from_str(&text).expect("toml");
                let plugin = if version >= 3 {
                    "io.containerd.cri.v1.images"
                } else {
                    "io.containerd.grpc.v1.cri"
                };
                assert_eq!(
                    doc["plugins"][plugin]["registry"]["config_path"].as_str(),
                    Some(dir),
                    "{node:?} v{version}:\n{text}"
                );
            }
        }
    }

    /// `restrict_oom_score_adj` lands in the CRI runtime plugin of each Linux form, and
    /// nowhere unless asked.
    #[test]
    fn restrict_oom_score_adj_is_the_cri_runtime_plugin_s() {
        for version in [2, 3, 4] {
            let mut i = inputs(version);
            assert!(!render(Node::Linux, &i).contains("restrict_oom_score_adj"));
            i.restrict_oom_score_adj = true;
            let text = render(Node::Linux, &i);
            let doc: toml::Table = toml::from_str(&text).expect("toml");
            let plugin = if version >= 3 {
                "io.containerd.cri.v1.runtime"
            } else {
                "io.containerd.grpc.v1.cri"
            };
            assert_eq!(
                doc["plugins"][plugin]["restrict_oom_score_adj"].as_bool(),
                Some(true),
                "{text}"
            );
        }
    }

    #[test]
    fn a_sandbox_image_with_quotes_stays_one_toml_string() {
        let mut i = inputs(3);
        i.sandbox_image = "reg.lab/pause:3\"\nversion = 9";
        let doc: toml::Table = toml::from_str(&render(Node::Linux, &i)).expect("toml");
        assert_eq!(doc["version"].as_integer(), Some(3));
    }
}
