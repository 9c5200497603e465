//! The starter plan `kwin init` writes: a commented cluster plan (flannel or Calico, N Linux
//! and M Windows workers, WinRM or OpenSSH to Windows) that `kwin validate` accepts as it is
//! written, on any machine.
//!
//! What only the user knows is a placeholder that validates: addresses from TEST-NET-1
//! (192.0.2.0/24, RFC 5737: documentation only, never routed), logins through the ssh-agent
//! (a `private_key` would have to exist on this machine: `local-file`), the Windows password
//! from an environment variable (read when kwin connects, never by `validate`), and the host
//! identities (`host_key`, `cert_fingerprint`) as comments to fill in. Every line the user
//! must look at carries `EDIT`.

use super::effective::defaults;
use std::fmt::Write as _;

/// The pod network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cni {
    Flannel,
    Calico,
}

/// How kwin reaches the Windows hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowsTransport {
    /// WinRM over HTTPS (port 5986): what `prepare-windows.ps1` sets up.
    Winrm,
    /// OpenSSH with PowerShell (`transport = "ssh-powershell"`).
    Ssh,
}

/// What `kwin init` asks for.
#[derive(Debug, Clone)]
pub struct Starter {
    pub cni: Cni,
    pub linux_workers: usize,
    pub windows_workers: usize,
    pub windows_transport: WindowsTransport,
    pub kubernetes_version: String,
}

impl Default for Starter {
    fn default() -> Self {
        Starter {
            cni: Cni::Flannel,
            linux_workers: 1,
            windows_workers: 1,
            windows_transport: WindowsTransport::Winrm,
            kubernetes_version: super::support::newest_release(),
        }
    }
}

/// The first placeholder address (TEST-NET-1) of the control plane, the Linux workers and the
/// Windows workers.
const CP_ADDRESS: u8 = 10;
const LINUX_ADDRESS: u8 = 20;
const WINDOWS_ADDRESS: u8 = 40;
/// Workers of one OS a starter plan can hold (their placeholder addresses do not overlap).
pub const MAX_WORKERS: usize = 20;

/// Key = value, then a comment starting at column 41.
fn line(out: &mut String, kv: &str, comment: &str) {
    if comment.is_empty() {
        let _ = writeln!(out, "{kv}");
    } else {
        let _ = writeln!(out, "{kv:<40} # {comment}");
    }
}

impl Starter {
    /// The plan's hosts: "1 control plane, 2 Linux workers, 1 Windows worker".
    pub fn hosts(&self) -> String {
        let n = |k: usize, what: &str| format!("{k} {what}{}", if k == 1 { "" } else { "s" });
        format!(
            "1 control plane, {}, {}",
            n(self.linux_workers, "Linux worker"),
            n(self.windows_workers, "Windows worker"),
        )
    }

    /// The pod network's name as users read it.
    pub fn cni_name(&self) -> &'static str {
        match self.cni {
            Cni::Flannel => "flannel",
            Cni::Calico => "Calico",
        }
    }

    /// The plan's text.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let hybrid = self.windows_workers > 0;
        let _ = writeln!(
            o,
            "# A kwin plan, written by `kwin init`: a Kubernetes cluster (kubeadm, {} VXLAN) on\n# {}.",
            self.cni_name(),
            self.hosts()
        );
        o.push_str(
            "#\n\
             # It validates as written; lines marked EDIT need your values: each host's address (the\n\
             # ones below are from 192.0.2.0/24, TEST-NET-1, which reaches nothing), the login users,\n\
             # and the host identities to pin. Then:\n\
             #\n",
        );
        if hybrid && self.windows_transport == WindowsTransport::Winrm {
            o.push_str("#   export KWIN_WINDOWS_PASSWORD='...'   # the Windows hosts' password\n");
        }
        o.push_str(
            "#   kwin validate plan.toml     # every problem at once, with its line\n\
             #   kwin plan plan.toml         # what would change on every host; changes nothing\n\
             #   kwin apply plan.toml        # build the cluster, then verify it\n\
             #   kwin kubeconfig plan.toml   # the admin kubeconfig, next to the plan\n\
             #\n\
             # Every key: `kwin schema` (JSON Schema for editor completion) and docs/plan.md in\n\
             # kwin's repository.\n\n",
        );

        o.push_str("[cluster]\n");
        line(
            &mut o,
            "name = \"kwin\"",
            "EDIT: kubeadm clusterName, kubeconfig context",
        );
        line(
            &mut o,
            &format!("kubernetes_version = \"{}\"", self.kubernetes_version),
            "a full x.y.z (docs/versions.md); kubeadm, kubelet, kubectl at it",
        );
        line(
            &mut o,
            &format!("# pod_cidr = \"{}\"", defaults::POD_CIDR),
            "the default; must not overlap the hosts' network",
        );
        line(
            &mut o,
            &format!("# service_cidr = \"{}\"", defaults::SERVICE_CIDR),
            "the default",
        );
        o.push('\n');

        o.push_str("[cni]\n");
        match self.cni {
            Cni::Flannel => line(
                &mut o,
                "plugin = \"flannel\"",
                &format!(
                    "VXLAN, VNI {}, UDP {}: what Windows nodes need",
                    defaults::VXLAN_VNI,
                    defaults::VXLAN_PORT
                ),
            ),
            Cni::Calico => line(
                &mut o,
                "plugin = \"calico\"",
                "VXLAN (Windows supports neither IP-in-IP nor cross-subnet)",
            ),
        }
        o.push('\n');

        o.push_str(
            "# Linux hosts: SSH as root, or as a user with passwordless sudo (become = true).\n\
             # Without private_key kwin uses your ssh-agent.\n\
             [defaults.linux]\n",
        );
        line(&mut o, "user = \"root\"", "EDIT: the login user");
        line(
            &mut o,
            "# become = true",
            "EDIT: for a user that is not root (sudo -n)",
        );
        line(
            &mut o,
            "# private_key = \"~/.ssh/id_ed25519\"",
            "EDIT: the key file, else the ssh-agent",
        );
        o.push('\n');

        if hybrid {
            match self.windows_transport {
                WindowsTransport::Winrm => {
                    o.push_str(
                        "# Windows hosts: WinRM over HTTPS (port 5986), NTLM. Prepare each host with\n\
                         # examples/real-vms/prepare-windows.ps1 from kwin's repository: it prints the\n\
                         # certificate fingerprint to pin below. The password never goes in the plan.\n\
                         [defaults.windows]\n",
                    );
                    line(&mut o, "transport = \"winrm\"", "");
                    line(&mut o, "user = \"Administrator\"", "EDIT: the login user");
                    line(
                        &mut o,
                        "password_env = \"KWIN_WINDOWS_PASSWORD\"",
                        "the environment variable holding the password",
                    );
                }
                WindowsTransport::Ssh => {
                    o.push_str(
                        "# Windows hosts: OpenSSH (Add-WindowsCapability OpenSSH.Server), scripts run by\n\
                         # powershell.exe. The administrator's public key goes into\n\
                         # C:\\ProgramData\\ssh\\administrators_authorized_keys on each host.\n\
                         [defaults.windows]\n",
                    );
                    line(&mut o, "transport = \"ssh-powershell\"", "");
                    line(&mut o, "user = \"Administrator\"", "EDIT: the login user");
                    line(
                        &mut o,
                        "# private_key = \"~/.ssh/id_ed25519\"",
                        "EDIT: the key file, else the ssh-agent",
                    );
                }
            }
            o.push('\n');
        }

        let ssh_pin = |o: &mut String| {
            line(
                o,
                "# host_key = \"SHA256:...\"",
                "EDIT: ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub",
            );
        };
        o.push_str(
            "# The hosts. A host key not pinned here must be in ~/.ssh/known_hosts, or be recorded\n\
             # on the first run with --accept-new-host-keys.\n",
        );
        o.push_str("[[hosts]]\nname = \"cp1\"\n");
        line(
            &mut o,
            &format!("address = \"192.0.2.{CP_ADDRESS}\""),
            "EDIT: how kwin reaches it (IP or DNS name)",
        );
        o.push_str("os = \"linux\"\nrole = \"control-plane\"\n");
        ssh_pin(&mut o);
        for i in 0..self.linux_workers {
            let _ = write!(o, "\n[[hosts]]\nname = \"lw{}\"\n", i + 1);
            line(
                &mut o,
                &format!("address = \"192.0.2.{}\"", usize::from(LINUX_ADDRESS) + i),
                "EDIT",
            );
            o.push_str("os = \"linux\"\nrole = \"worker\"\n");
            ssh_pin(&mut o);
        }
        for i in 0..self.windows_workers {
            let _ = write!(o, "\n[[hosts]]\nname = \"ww{}\"\n", i + 1);
            line(
                &mut o,
                &format!("address = \"192.0.2.{}\"", usize::from(WINDOWS_ADDRESS) + i),
                "EDIT",
            );
            o.push_str("os = \"windows\"\nrole = \"worker\"\n");
            match self.windows_transport {
                WindowsTransport::Winrm => line(
                    &mut o,
                    "# cert_fingerprint = \"6f:3a:...\"",
                    "EDIT: what prepare-windows.ps1 printed",
                ),
                WindowsTransport::Ssh => line(
                    &mut o,
                    "# host_key = \"SHA256:...\"",
                    "EDIT: ssh-keygen -lf C:\\ProgramData\\ssh\\ssh_host_ed25519_key.pub",
                ),
            }
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_starter_names_every_host_once_with_a_test_net_address() {
        let text = Starter::default().render();
        for name in ["cp1", "lw1", "ww1"] {
            assert_eq!(
                text.matches(&format!("name = \"{name}\"")).count(),
                1,
                "{text}"
            );
        }
        assert!(text.contains("address = \"192.0.2.10\""), "{text}");
        assert!(text.contains("plugin = \"flannel\""), "{text}");
        let doc: toml::Table = toml::from_str(&text).expect("TOML");
        assert_eq!(doc["hosts"].as_array().map(Vec::len), Some(3));
    }

    #[test]
    fn max_workers_keep_the_placeholder_addresses_apart() {
        assert!(usize::from(LINUX_ADDRESS) + MAX_WORKERS <= usize::from(WINDOWS_ADDRESS));
        assert!(usize::from(WINDOWS_ADDRESS) + MAX_WORKERS < 255);
    }
}
