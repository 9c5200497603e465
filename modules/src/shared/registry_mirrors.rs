//! Params of `registry_mirrors` (Linux: `linux/registry_mirrors.rs`, Windows:
//! `windows/registry_mirrors.rs`), and what both write: containerd's `hosts.toml` per
//! upstream registry (containerd docs/hosts.md at v2.3.4), the directory containerd looks it
//! up in on each OS, and the index of the registries kwin wrote.

use kwin_engine::module::ParamError;
use std::collections::BTreeMap;

/// The file in the hosts directory that lists the registries kwin wrote.
pub const INDEX: &str = ".kwin-registries";

/// Params of `registry_mirrors`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegistryMirrorsParams {
    /// Upstream registry host → mirror URLs, in order.
    pub mirrors: BTreeMap<String, Vec<String>>,
    /// containerd's registry hosts directory, its `config_path` (default
    /// `/etc/containerd/certs.d` on Linux, `C:\Program Files\containerd\certs.d` on Windows).
    pub dir: Option<String>,
}

/// The checked mirrors: registry → its `hosts.toml`.
pub fn hosts_files(p: &RegistryMirrorsParams) -> Result<BTreeMap<String, String>, ParamError> {
    let mut files = BTreeMap::new();
    for (registry, urls) in &p.mirrors {
        check_registry(registry)?;
        if urls.is_empty() {
            return Err(ParamError::at(
                "mirrors",
                format!("`{registry}` has no mirror"),
            ));
        }
        for u in urls {
            check_url(registry, u)?;
        }
        let urls: Vec<String> = urls
            .iter()
            .map(|u| u.trim_end_matches('/').to_string())
            .collect();
        files.insert(registry.clone(), hosts_toml(registry, &urls));
    }
    Ok(files)
}

/// Whether `s` can name a registry directory: a host or IP with an optional `:port` (as
/// an image reference begins), or `_default`.
pub fn check_registry(s: &str) -> Result<(), ParamError> {
    let ok = s == "_default"
        || (!s.is_empty()
            && !s.starts_with(['.', '-', ':'])
            && !s.contains("..")
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-:_[]".contains(c)));
    if ok {
        Ok(())
    } else {
        Err(ParamError::at(
            "mirrors",
            format!("`{s}` is not a registry host (`registry.k8s.io`, `host:port`, `_default`)"),
        ))
    }
}

fn check_url(registry: &str, u: &str) -> Result<(), ParamError> {
    let ok = (u.starts_with("http://") || u.starts_with("https://"))
        && u.len() > "https://".len()
        && !u
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || "\"\\'`$".contains(c));
    if ok {
        Ok(())
    } else {
        Err(ParamError::at(
            "mirrors",
            format!("mirror `{u}` of `{registry}` is not an http(s) URL"),
        ))
    }
}

/// The registry's own endpoint, containerd's `server` (docs/hosts.md: "the default for
/// docker.io is registry-1.docker.io").
fn server(registry: &str) -> Option<String> {
    match registry {
        "_default" => None,
        "docker.io" => Some("https://registry-1.docker.io".to_string()),
        r => Some(format!("https://{r}")),
    }
}

/// A `hosts.toml` for `registry` with `mirrors` tried in order. The URLs are checked: no
/// quote or backslash can reach the TOML.
pub fn hosts_toml(registry: &str, mirrors: &[String]) -> String {
    let mut s = format!(
        "# Written by kwin (artifacts.registry_mirrors): pulls from {registry} try these mirrors first.\n"
    );
    if let Some(srv) = server(registry) {
        s.push_str(&format!("server = \"{srv}\"\n"));
    }
    for m in mirrors {
        s.push_str(&format!(
            "\n[host.\"{m}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
        ));
    }
    s
}

/// The directory a Windows containerd looks a registry's `hosts.toml` up in first: `host:port`
/// becomes `host_port_` and every other `:` goes, since Windows allows no `:` in a file name
/// (containerd docs/hosts.md at v2.3.4, "Port Handling in Registry Host"; the code,
/// core/remotes/docker/config/config_windows.go `hostPaths` with hosts.go `hostDirectory`, at
/// v2.3.4 and at v1.7.29 remotes/docker/config: `host[:idx] + "_" + host[idx+1:] + "_"` for
/// the last `:` at an index above 0, then `strings.ReplaceAll(.., ":", "")`). A registry
/// without a port keeps its name. On Linux kwin names the directory by the registry itself,
/// which containerd looks up second (config_unix.go `hostPaths`: `host_port_`, then `host:port`).
pub fn windows_host_dir(registry: &str) -> String {
    let dir = match registry.rfind(':') {
        Some(i) if i > 0 => format!("{}_{}_", &registry[..i], &registry[i + 1..]),
        _ => registry.to_string(),
    };
    dir.replace(':', "")
}

/// The index file's content: the registries, one a line.
pub fn index_content(registries: impl Iterator<Item = impl AsRef<str>>) -> String {
    let mut s =
        String::from("# Registries whose hosts.toml kwin wrote (module registry_mirrors).\n");
    for r in registries {
        s.push_str(r.as_ref());
        s.push('\n');
    }
    s
}

/// The registries an index file lists (comments and blank lines skipped), each one a
/// registry name as a plan's is ([`check_registry`]): a line someone else wrote never
/// reaches a path.
pub fn listed(content: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(content)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter(|l| check_registry(l).is_ok())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hosts_file_names_the_registry_then_each_mirror_in_order() {
        let t = hosts_toml(
            "docker.io",
            &["http://10.0.0.1:5000".to_string(), "https://m2".to_string()],
        );
        let v: toml::Value = toml::from_str(&t).expect("valid TOML");
        assert_eq!(v["server"].as_str(), Some("https://registry-1.docker.io"));
        let hosts = v["host"].as_table().expect("host table");
        assert_eq!(hosts.len(), 2);
        assert_eq!(
            hosts["http://10.0.0.1:5000"]["capabilities"],
            toml::Value::Array(vec!["pull".into(), "resolve".into()])
        );
        // the order is the file's order: containerd tries hosts as listed
        assert!(t.find("10.0.0.1:5000").unwrap_or(usize::MAX) < t.find("https://m2").unwrap_or(0));
        let d: toml::Value =
            toml::from_str(&hosts_toml("_default", &["https://m".into()])).expect("valid TOML");
        assert!(d.get("server").is_none());
    }

    #[test]
    fn registry_names_and_urls_that_could_escape_are_refused() {
        for bad in ["../etc", "a/b", "", "-x", "reg\"istry", "x..y", "a\\b"] {
            assert!(check_registry(bad).is_err(), "{bad}");
        }
        for good in ["registry.k8s.io", "10.0.0.1:5000", "_default", "[::1]:5000"] {
            assert!(check_registry(good).is_ok(), "{good}");
        }
        for bad in [
            "ftp://x",
            "http://a\"b",
            "https://",
            "http://x y",
            "https://a\\b",
        ] {
            assert!(check_url("r", bad).is_err(), "{bad}");
        }
    }

    /// As containerd's own Windows test writes a registry's directory
    /// (core/remotes/docker/config/hosts_resolver_test.go at v2.3.4:
    /// `strings.ReplaceAll(hostDirectory(base), ":", "")` when `runtime.GOOS == "windows"`):
    /// the port becomes `_port_`, a name without a port stays as it is.
    #[test]
    fn a_windows_host_directory_is_containerds() {
        for (registry, dir) in [
            ("registry.k8s.io", "registry.k8s.io"),
            ("_default", "_default"),
            ("10.0.0.1:5000", "10.0.0.1_5000_"),
            ("myregistry.io:5000", "myregistry.io_5000_"),
            ("[::1]:5000", "[1]_5000_"),
        ] {
            assert_eq!(windows_host_dir(registry), dir, "{registry}");
            assert!(!windows_host_dir(registry).contains(':'));
        }
    }

    #[test]
    fn an_index_lists_only_registry_names() {
        let c = index_content(["docker.io", "10.0.0.1:5000"].iter());
        assert_eq!(listed(c.as_bytes()), ["docker.io", "10.0.0.1:5000"]);
        assert_eq!(
            listed(b"# x\n\n..\\..\\Windows\nok.io\n../etc\n"),
            ["ok.io"]
        );
    }
}
