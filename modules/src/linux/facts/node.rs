//! What a Linux node runs: its distribution (`/etc/os-release` `ID`, `VERSION_ID`,
//! `PRETTY_NAME`) and the file system mounted at `/sys/fs/cgroup`, which tells the cgroup
//! version (`cgroup2fs`: the unified hierarchy, cgroup v2; `tmpfs`: v1 hierarchies, legacy or
//! hybrid, which the kubelet treats as cgroup v1: its `IsCgroup2UnifiedMode` asks exactly
//! this, `statfs("/sys/fs/cgroup")` being `CGROUP2_SUPER_MAGIC`, in
//! k8s.io/kubernetes@v1.37.2 vendor/github.com/opencontainers/cgroups/utils.go).

use super::{kv_get, kv_lines, ok_stdout};
use kwin_engine::fact::{Fact, FactError, FactOutput};
use kwin_engine::transport::Shell;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeOsFact;

/// The cgroup version a node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cgroup {
    V1,
    V2,
    /// Nothing kwin recognises is mounted at `/sys/fs/cgroup` (the type is in `NodeOs`).
    Unknown,
}

/// A node's distribution and cgroup version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeOs {
    pub id: Option<String>,
    pub version_id: Option<String>,
    pub pretty_name: Option<String>,
    /// `stat -fc %T /sys/fs/cgroup`, when it answered.
    pub cgroup_fs: Option<String>,
}

impl NodeOs {
    pub fn cgroup(&self) -> Cgroup {
        match self.cgroup_fs.as_deref() {
            Some("cgroup2fs") => Cgroup::V2,
            Some("tmpfs") => Cgroup::V1,
            _ => Cgroup::Unknown,
        }
    }

    /// How the node names itself: `PRETTY_NAME`, else `ID VERSION_ID`.
    pub fn name(&self) -> String {
        match (&self.pretty_name, &self.id, &self.version_id) {
            (Some(p), _, _) => p.clone(),
            (None, Some(i), Some(v)) => format!("{i} {v}"),
            (None, Some(i), None) => i.clone(),
            _ => "an unknown distribution (no /etc/os-release)".to_string(),
        }
    }
}

impl Fact for NodeOsFact {
    type Output = NodeOs;

    fn key(&self) -> String {
        "linux.node_os".into()
    }

    fn command(&self, _shell: Shell) -> String {
        // os-release(5): /etc/os-release, else /usr/lib/os-release. Only the three keys are
        // printed, each as `os.<KEY>=<value>`; the value's quotes are removed by the parser.
        "f=/etc/os-release; [ -r \"$f\" ] || f=/usr/lib/os-release\n\
         if [ -r \"$f\" ]; then sed -n -e 's/^ID=/os.ID=/p' -e 's/^VERSION_ID=/os.VERSION_ID=/p' -e 's/^PRETTY_NAME=/os.PRETTY_NAME=/p' \"$f\"; fi\n\
         t=$(stat -fc %T /sys/fs/cgroup 2>/dev/null) && echo \"cgroup.fs=$t\"\n\
         echo end=1\n"
            .into()
    }

    fn parse(&self, out: &FactOutput) -> Result<NodeOs, FactError> {
        parse_node_os(ok_stdout(out)?)
    }
}

/// Parse the fact's `key=value` lines (the last one `end=1`: the command ran to its end).
pub fn parse_node_os(text: &str) -> Result<NodeOs, FactError> {
    let kv = kv_lines(text)?;
    if kv_get(&kv, "end") != Some("1") {
        return Err(FactError::Parse("the node's OS answer has no end".into()));
    }
    let get = |k: &str| {
        kv_get(&kv, k)
            .map(kwin_engine::fact::host::os_release_value)
            .filter(|s| !s.is_empty())
    };
    Ok(NodeOs {
        id: get("os.ID"),
        version_id: get("os.VERSION_ID"),
        pretty_name: get("os.PRETTY_NAME"),
        cgroup_fs: get("cgroup.fs"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debian_on_cgroup_v2() {
        let os = parse_node_os(
            "os.PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nos.VERSION_ID=\"12\"\nos.ID=debian\ncgroup.fs=cgroup2fs\nend=1\n",
        )
        .expect("parses");
        assert_eq!(os.id.as_deref(), Some("debian"));
        assert_eq!(os.version_id.as_deref(), Some("12"));
        assert_eq!(os.name(), "Debian GNU/Linux 12 (bookworm)");
        assert_eq!(os.cgroup(), Cgroup::V2);
    }

    #[test]
    fn cgroup_v1_and_missing_answers() {
        let os = parse_node_os("os.ID=ubuntu\nos.VERSION_ID='22.04'\ncgroup.fs=tmpfs\nend=1\n")
            .expect("parses");
        assert_eq!(os.version_id.as_deref(), Some("22.04"));
        assert_eq!(os.cgroup(), Cgroup::V1);
        let os = parse_node_os("end=1\n").expect("parses");
        assert_eq!(os.cgroup(), Cgroup::Unknown);
        assert_eq!(os.name(), "an unknown distribution (no /etc/os-release)");
        assert!(parse_node_os("os.ID=debian\n").is_err(), "cut short");
    }
}
