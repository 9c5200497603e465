//! What a host is, for `kwin facts`: its OS and version, kernel, architecture, host name, CPU
//! count and memory, cgroup version (Linux), Windows build, and addresses — what pyinfra's
//! `fact` (`pyinfra/facts/server.py`, `hardware.py`) and Ansible's `setup` show first. One
//! [`HostFact`] query, asked in the probe with the plan's own facts (no round trip of its
//! own), answered by a command per shell and parsed by pure functions into the event's
//! [`HostSystem`].
//!
//! Where each value comes from:
//!
//! | value | POSIX | Windows PowerShell 5.1 |
//! |---|---|---|
//! | name, id, version | os-release(5): `/etc/os-release`, else `/usr/lib/os-release` (`PRETTY_NAME`, `ID`, `VERSION_ID`) | `HKLM:\SOFTWARE\Microsoft\Windows NT\CurrentVersion`: `ProductName`, `CurrentMajorVersionNumber`.`CurrentMinorVersionNumber`.`CurrentBuildNumber` (as `fact` of the Windows modules reads the build) |
//! | kernel | `uname -r` | the build and its update revision, `UBR` |
//! | arch, host name | `uname -m`, `uname -n` | `$env:PROCESSOR_ARCHITECTURE`, `$env:COMPUTERNAME` |
//! | cpus | `getconf _NPROCESSORS_ONLN` (pyinfra's `Cpus`) | `Win32_ComputerSystem.NumberOfLogicalProcessors` (uint32) |
//! | memory | `MemTotal` of `/proc/meminfo`, in KiB (Ansible's `memtotal_mb` reads the same) | `Win32_ComputerSystem.TotalPhysicalMemory` (uint64, bytes) |
//! | cgroup | `stat -fc %T /sys/fs/cgroup`: `cgroup2fs` is v2, `tmpfs` v1, `sysfs` none mounted (the kubelet's `IsCgroup2UnifiedMode` asks the same: k8s.io/kubernetes@v1.37.2 vendor/github.com/opencontainers/cgroups/utils.go) | — |
//! | addresses | `ip -o addr show` (iproute2), else `hostname -I` (addresses without interface or prefix) | `Get-NetIPAddress`: `InterfaceAlias`, `IPAddress`, `PrefixLength` |
//!
//! Windows sources: `Win32_ComputerSystem` in MicrosoftDocs/win32
//! (desktop-src/CIMWin32Prov/win32-computersystem.md at 3387bbf776ec62f3d8d96022e343cd28d6b5795e),
//! `Get-NetIPAddress` of Windows Server 2019 in MicrosoftDocs/windows-powershell-docs
//! (docset/winserver2019-ps/nettcpip/Get-NetIPAddress.md at
//! 0cb7634d0c0cadec6412e8c382275c436df83855); the script follows the Windows PowerShell 5.1
//! profile (`modules/tests/ps51_profile.rs` reads it). Loopback and link-local addresses
//! (127.0.0.0/8, ::1, 169.254.0.0/16, fe80::/10) are left out on both.
//!
//! A value the host does not give (no `ip`, no os-release) is absent, never guessed; an
//! answer cut short (no end marker) or not in the expected form is an error.

use super::{Fact, FactError, FactOutput};
use crate::event::{HostAddress, HostSystem};
use crate::shell::Shell;
use serde::Deserialize;
use std::net::IpAddr;

/// The host's own facts (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostFact;

impl Fact for HostFact {
    type Output = HostSystem;

    fn key(&self) -> String {
        "kwin.host".into()
    }

    fn command(&self, shell: Shell) -> String {
        match shell {
            Shell::Posix => POSIX.into(),
            Shell::PowerShell => POWERSHELL.into(),
        }
    }

    fn parse(&self, out: &FactOutput) -> Result<HostSystem, FactError> {
        if out.exit != 0 {
            return Err(FactError::Command {
                exit: out.exit,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        let text = out.stdout_str()?;
        // The answer's own form tells which script answered: a WinRM host of the lab's
        // stand-in speaks the POSIX dialect.
        if text.trim_start().starts_with('{') {
            parse_windows(text)
        } else {
            parse_posix(text)
        }
    }
}

/// Each value on a line of its own, `key=value`; `end=1` last (the script ran to its end).
const POSIX: &str = "echo \"uname=$(uname -n -r -m)\"\n\
f=/etc/os-release; [ -r \"$f\" ] || f=/usr/lib/os-release\n\
if [ -r \"$f\" ]; then sed -n -e 's/^ID=/os.ID=/p' -e 's/^VERSION_ID=/os.VERSION_ID=/p' -e 's/^PRETTY_NAME=/os.PRETTY_NAME=/p' \"$f\"; fi\n\
n=$(getconf _NPROCESSORS_ONLN 2>/dev/null) && echo \"cpus=$n\"\n\
sed -n 's/^MemTotal: *\\([0-9]*\\) kB$/mem_kib=\\1/p' /proc/meminfo 2>/dev/null\n\
t=$(stat -fc %T /sys/fs/cgroup 2>/dev/null) && echo \"cgroup.fs=$t\"\n\
if command -v ip >/dev/null 2>&1; then ip -o addr show 2>/dev/null | sed 's/^/ip=/'; else for a in $(hostname -I 2>/dev/null); do echo \"addr=$a\"; done; fi\n\
echo end=1\n";

/// One JSON object (`ConvertTo-Json -Compress`).
const POWERSHELL: &str = "$cv = Get-ItemProperty -LiteralPath 'HKLM:\\SOFTWARE\\Microsoft\\Windows NT\\CurrentVersion'\n\
$cs = Get-CimInstance -ClassName Win32_ComputerSystem\n\
$ips = @(Get-NetIPAddress -ErrorAction SilentlyContinue | ForEach-Object { @{ interface = [string]$_.InterfaceAlias; address = [string]$_.IPAddress; prefix = [int]$_.PrefixLength } })\n\
ConvertTo-Json -Compress -Depth 4 -InputObject @{ hostname = [string]$env:COMPUTERNAME; product = [string]$cv.ProductName; major = [int]$cv.CurrentMajorVersionNumber; minor = [int]$cv.CurrentMinorVersionNumber; build = [int]$cv.CurrentBuildNumber; ubr = [int]$cv.UBR; arch = [string]$env:PROCESSOR_ARCHITECTURE; cpus = [int]$cs.NumberOfLogicalProcessors; memory = [long]$cs.TotalPhysicalMemory; addresses = $ips }";

/// An os-release value: shell-quoted (`"Debian GNU/Linux 12 (bookworm)"`, `'12'`) or bare
/// (os-release(5)). Also read by the node check (`kwin-modules` linux/facts/node.rs).
pub fn os_release_value(v: &str) -> String {
    let v = v.trim();
    let inner = v
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .or_else(|| v.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
        .unwrap_or(v);
    inner.replace("\\\"", "\"").replace("\\\\", "\\")
}

/// Whether an address is one the host facts leave out: loopback or link-local.
fn left_out(addr: &str) -> bool {
    let bare = addr.split(['/', '%']).next().unwrap_or(addr);
    match bare.parse::<IpAddr>() {
        Ok(IpAddr::V4(a)) => a.is_loopback() || a.is_link_local(),
        Ok(IpAddr::V6(a)) => a.is_loopback() || (a.segments()[0] & 0xffc0) == 0xfe80,
        Err(_) => false,
    }
}

/// The POSIX script's answer.
pub fn parse_posix(text: &str) -> Result<HostSystem, FactError> {
    let mut s = HostSystem {
        os: "linux".into(),
        ..HostSystem::default()
    };
    let mut ended = false;
    let mut cgroup_fs = None;
    for line in text.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let v = v.trim_end();
        match k {
            "uname" => {
                let mut w = v.split_whitespace();
                let nonempty = |x: Option<&str>| x.map(str::to_string);
                s.hostname = nonempty(w.next());
                s.kernel = nonempty(w.next());
                s.arch = nonempty(w.next());
            }
            "os.PRETTY_NAME" => s.name = Some(os_release_value(v)).filter(|x| !x.is_empty()),
            "os.ID" => s.id = Some(os_release_value(v)).filter(|x| !x.is_empty()),
            "os.VERSION_ID" => s.version = Some(os_release_value(v)).filter(|x| !x.is_empty()),
            "cpus" => s.cpus = v.trim().parse().ok(),
            "mem_kib" => s.memory_bytes = v.trim().parse::<u64>().ok().map(|k| k * 1024),
            "cgroup.fs" => cgroup_fs = Some(v.trim().to_string()),
            "ip" => {
                // `ip -o addr show`: `2: eth0    inet 10.0.0.5/24 brd … scope global eth0\ …`
                let w: Vec<&str> = v.split_whitespace().collect();
                if let [_, name, "inet" | "inet6", addr, ..] = w[..] {
                    if !left_out(addr) {
                        s.addresses.push(HostAddress {
                            interface: Some(name.split('@').next().unwrap_or(name).to_string()),
                            address: addr.to_string(),
                        });
                    }
                }
            }
            "addr" => {
                let a = v.trim();
                if !a.is_empty() && !left_out(a) {
                    s.addresses.push(HostAddress {
                        interface: None,
                        address: a.to_string(),
                    });
                }
            }
            "end" => ended = v == "1",
            _ => {}
        }
    }
    if !ended {
        return Err(FactError::Parse(
            "the host's answer about itself has no end".into(),
        ));
    }
    s.cgroup = cgroup_fs.map(|fs| match fs.as_str() {
        "cgroup2fs" => "v2".to_string(),
        "tmpfs" => "v1".to_string(),
        // /sys/fs/cgroup is a directory of sysfs itself: no hierarchy is mounted there.
        "sysfs" => "none".to_string(),
        other => format!("unknown ({other})"),
    });
    Ok(s)
}

#[derive(Deserialize)]
struct WinAnswer {
    #[serde(default)]
    hostname: String,
    #[serde(default)]
    product: String,
    major: u32,
    minor: u32,
    build: u32,
    #[serde(default)]
    ubr: u32,
    #[serde(default)]
    arch: String,
    #[serde(default)]
    cpus: u32,
    #[serde(default)]
    memory: u64,
    #[serde(default)]
    addresses: OneOrMany<WinAddress>,
}

#[derive(Deserialize)]
struct WinAddress {
    #[serde(default)]
    interface: String,
    address: String,
    #[serde(default)]
    prefix: u32,
}

/// `ConvertTo-Json` of Windows PowerShell 5.1 may give a one-element array as the element
/// alone.
#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany<T> {
    Many(Vec<T>),
    One(T),
}

impl<T> Default for OneOrMany<T> {
    fn default() -> Self {
        OneOrMany::Many(Vec::new())
    }
}

/// The PowerShell script's answer.
pub fn parse_windows(text: &str) -> Result<HostSystem, FactError> {
    let w: WinAnswer = serde_json::from_str(text.trim())
        .map_err(|e| FactError::Parse(format!("the host's answer about itself: {e}")))?;
    let some = |s: String| Some(s).filter(|s| !s.is_empty());
    let build = format!("{}.{}.{}", w.major, w.minor, w.build);
    let addresses = match w.addresses {
        OneOrMany::Many(v) => v,
        OneOrMany::One(a) => vec![a],
    };
    Ok(HostSystem {
        os: "windows".into(),
        name: some(w.product),
        id: Some("windows".into()),
        version: Some(build.clone()),
        kernel: Some(format!("{build}.{}", w.ubr)),
        arch: some(w.arch),
        hostname: some(w.hostname),
        cpus: (w.cpus > 0).then_some(w.cpus),
        memory_bytes: (w.memory > 0).then_some(w.memory),
        cgroup: None,
        windows_build: Some(build),
        addresses: addresses
            .into_iter()
            .filter(|a| !left_out(&a.address))
            .map(|a| HostAddress {
                interface: some(a.interface),
                address: format!("{}/{}", a.address, a.prefix),
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fact::{batch_script, new_nonce, parse_batch, FactQuery};

    fn addr(interface: Option<&str>, address: &str) -> HostAddress {
        HostAddress {
            interface: interface.map(str::to_string),
            address: address.to_string(),
        }
    }

    /// A Debian host on cgroup v2, as the POSIX script prints it (`ip -o addr show` of
    /// iproute2 6.1: loopback, a global and a link-local address).
    #[test]
    fn a_linux_answer() {
        let s = parse_posix(
            "uname=cp1 6.1.0-18-amd64 x86_64\n\
             os.PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n\
             os.VERSION_ID=\"12\"\n\
             os.ID=debian\n\
             cpus=4\n\
             mem_kib=8131228\n\
             cgroup.fs=cgroup2fs\n\
             ip=1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n\
             ip=1: lo    inet6 ::1/128 scope host \\       valid_lft forever preferred_lft forever\n\
             ip=2: ens4    inet 10.10.1.4/24 brd 10.10.1.255 scope global dynamic ens4\\       valid_lft 3110sec preferred_lft 3110sec\n\
             ip=2: ens4    inet6 fe80::4001:aff:fe0a:104/64 scope link \\       valid_lft forever preferred_lft forever\n\
             ip=3: flannel.4096    inet 10.244.0.0/32 scope global flannel.4096\\       valid_lft forever preferred_lft forever\n\
             end=1\n",
        )
        .expect("parses");
        assert_eq!(
            s,
            HostSystem {
                os: "linux".into(),
                name: Some("Debian GNU/Linux 12 (bookworm)".into()),
                id: Some("debian".into()),
                version: Some("12".into()),
                kernel: Some("6.1.0-18-amd64".into()),
                arch: Some("x86_64".into()),
                hostname: Some("cp1".into()),
                cpus: Some(4),
                memory_bytes: Some(8131228 * 1024),
                cgroup: Some("v2".into()),
                windows_build: None,
                addresses: vec![
                    addr(Some("ens4"), "10.10.1.4/24"),
                    addr(Some("flannel.4096"), "10.244.0.0/32"),
                ],
            }
        );
    }

    /// What a host leaves unsaid stays absent; `hostname -I` gives addresses alone; a tmpfs
    /// at /sys/fs/cgroup is cgroup v1; an answer without its end is an error.
    #[test]
    fn a_sparse_linux_answer() {
        let s = parse_posix(
            "uname=h1 6.18.0 x86_64\ncgroup.fs=tmpfs\naddr=10.213.0.6\naddr=fe80::1\nend=1\n",
        )
        .expect("parses");
        assert_eq!((s.name, s.cpus, s.memory_bytes), (None, None, None));
        assert_eq!(s.cgroup.as_deref(), Some("v1"));
        assert_eq!(s.addresses, vec![addr(None, "10.213.0.6")]);
        let s = parse_posix("cgroup.fs=sysfs\nend=1\n").expect("parses");
        assert_eq!(s.cgroup.as_deref(), Some("none"));
        let s = parse_posix("cgroup.fs=ext4\nend=1\n").expect("parses");
        assert_eq!(s.cgroup.as_deref(), Some("unknown (ext4)"));
        assert!(parse_posix("uname=h1 6.18.0 x86_64\n").is_err());
    }

    /// Windows Server 2022 as the PowerShell script prints it: `ConvertTo-Json -Compress` of
    /// Windows PowerShell 5.1 (keys in any order, CRLF), an IPv6 link-local address with its
    /// zone (`%4`) as `Get-NetIPAddress` gives it; and a single address given as an object.
    #[test]
    fn a_windows_answer() {
        let s = parse_windows(
            "{\"memory\":17179332608,\"addresses\":[{\"address\":\"fe80::9d2c:1b1:ac3e:2a5f%4\",\"prefix\":64,\"interface\":\"Ethernet\"},{\"address\":\"10.10.1.6\",\"prefix\":24,\"interface\":\"Ethernet\"},{\"address\":\"::1\",\"prefix\":128,\"interface\":\"Loopback Pseudo-Interface 1\"},{\"address\":\"127.0.0.1\",\"prefix\":8,\"interface\":\"Loopback Pseudo-Interface 1\"},{\"address\":\"169.254.83.107\",\"prefix\":16,\"interface\":\"Ethernet 2\"}],\"build\":20348,\"cpus\":4,\"ubr\":2227,\"product\":\"Windows Server 2022 Datacenter\",\"hostname\":\"WW1\",\"major\":10,\"minor\":0,\"arch\":\"AMD64\"}\r\n",
        )
        .expect("parses");
        assert_eq!(
            s,
            HostSystem {
                os: "windows".into(),
                name: Some("Windows Server 2022 Datacenter".into()),
                id: Some("windows".into()),
                version: Some("10.0.20348".into()),
                kernel: Some("10.0.20348.2227".into()),
                arch: Some("AMD64".into()),
                hostname: Some("WW1".into()),
                cpus: Some(4),
                memory_bytes: Some(17179332608),
                cgroup: None,
                windows_build: Some("10.0.20348".into()),
                addresses: vec![addr(Some("Ethernet"), "10.10.1.6/24")],
            }
        );
        let one = parse_windows(
            "{\"major\":10,\"minor\":0,\"build\":17763,\"addresses\":{\"address\":\"192.168.56.21\",\"prefix\":24,\"interface\":\"Ethernet\"}}",
        )
        .expect("parses");
        assert_eq!(
            one.addresses,
            vec![addr(Some("Ethernet"), "192.168.56.21/24")]
        );
        assert_eq!(one.windows_build.as_deref(), Some("10.0.17763"));
        assert!(parse_windows("{\"product\":\"x\"}").is_err(), "no build");
    }

    /// The POSIX script, run by a real `sh` in a probe batch, answers about this machine:
    /// what `uname` and `getconf` say here.
    #[test]
    fn the_posix_script_runs_in_a_probe() {
        let q = [FactQuery::of(&HostFact, Shell::Posix)];
        let nonce = new_nonce();
        let out = crate::testing::run_sh(&batch_script(Shell::Posix, &q, &nonce));
        let facts = parse_batch(&q, &out, &nonce).expect("batch");
        let s = facts.get(&HostFact).expect("host facts");
        let sh = |c: &str| {
            let o = std::process::Command::new("sh")
                .args(["-c", c])
                .output()
                .expect("sh");
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        };
        assert_eq!(s.kernel.as_deref(), Some(sh("uname -r").as_str()));
        assert_eq!(s.arch.as_deref(), Some(sh("uname -m").as_str()));
        assert_eq!(
            s.cpus.map(|c| c.to_string()),
            Some(sh("getconf _NPROCESSORS_ONLN"))
        );
        assert!(s.memory_bytes.is_some_and(|m| m > 0), "{s:?}");
        assert!(s.cgroup.is_some(), "{s:?}");
    }

    #[test]
    fn a_failed_answer_is_an_error() {
        let e = HostFact
            .parse(&FactOutput {
                stdout: vec![],
                stderr: b"Get-CimInstance : Access denied".to_vec(),
                exit: 1,
            })
            .expect_err("failed");
        assert!(e.to_string().contains("Access denied"), "{e}");
    }
}
