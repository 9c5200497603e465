//! The plan file as typed data (what `plan.toml` may say), with defaults.
//!
//! This is the serde/schemars model: `kwin schema` prints its JSON Schema. Loading
//! (`load.rs`) fills in defaults from `[defaults.*]` and the inventory and resolves each host's
//! connection; validation (`validate.rs`) checks every rule across fields.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A kwin plan: the machines and, optionally, the cluster to build on them.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    /// Cluster settings. Without `[cluster]` the plan only runs the `[[tasks]]` it lists.
    pub cluster: Option<Cluster>,
    /// Pod network (required with `[cluster]`).
    pub cni: Option<Cni>,
    /// Container runtime per OS.
    #[serde(default)]
    pub runtime: Runtime,
    /// Versions of the components kwin installs besides Kubernetes itself.
    #[serde(default)]
    pub versions: Versions,
    /// Where artifacts come from (mirror, offline files).
    #[serde(default)]
    pub artifacts: Artifacts,
    /// HTTP(S) proxy for hosts behind one (set machine-wide on Windows, for the runtime on Linux).
    pub proxy: Option<Proxy>,
    /// Connection defaults per OS; any host may override.
    #[serde(default)]
    pub defaults: Defaults,
    /// Engine settings: timeouts, retries, parallelism.
    #[serde(default)]
    pub settings: Settings,
    /// A TOML file of `[[hosts]]` connection entries (e.g. the lab's `target/lab/hosts.toml`),
    /// relative to the plan file. Plan hosts take missing connection fields from the entry of
    /// the same name.
    pub inventory: Option<String>,
    /// The machines.
    #[serde(default)]
    pub hosts: Vec<Host>,
    /// The user's own steps, on top of the built-in recipes.
    #[serde(default)]
    pub tasks: Vec<UserTask>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Cluster {
    /// Cluster name; used in the kubeconfig context and as the kubeadm clusterName.
    pub name: String,
    /// Kubernetes version, full `x.y.z` (e.g. "1.31.4").
    pub kubernetes_version: String,
    /// Pod (cluster) CIDR. Default 10.244.0.0/16.
    pub pod_cidr: Option<String>,
    /// Service CIDR. Default 10.96.0.0/12.
    pub service_cidr: Option<String>,
    /// Cluster DNS service IP. Default: the .10 address of service_cidr.
    pub dns_service_ip: Option<String>,
    /// Maximum pods per node. Default 110.
    pub max_pods_per_node: Option<u32>,
    /// Stable address (host:port or DNS name) in front of the API servers. Required with more
    /// than one control plane.
    pub control_plane_endpoint: Option<String>,
    /// Cluster DNS domain. Default cluster.local.
    pub dns_domain: Option<String>,
    /// Deploy test workloads after apply and check connectivity (`kwin verify`). Default true.
    pub verify: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CniPlugin {
    Flannel,
    Calico,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CniBackend {
    /// VXLAN overlay (flannel vxlan / Calico VXLAN). Windows: win-overlay.
    Vxlan,
    /// flannel host-gw (Windows: win-bridge). Needs all nodes on one L2 segment.
    HostGw,
    /// Calico IP-in-IP (not supported with Windows nodes).
    Ipip,
    /// Calico VXLAN only across subnets (not supported with Windows nodes).
    VxlanCrossSubnet,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Cni {
    /// "flannel" or "calico".
    pub plugin: CniPlugin,
    /// flannel: "vxlan" (default) or "host-gw"; calico: "vxlan" (default).
    pub backend: Option<CniBackend>,
    /// VXLAN network identifier. Default 4096 (the only VNI Windows flannel supports).
    pub vni: Option<u32>,
    /// VXLAN UDP port. Default 4789 (the only port Windows supports).
    pub port: Option<u16>,
    /// Offline labs: a local copy of the upstream manifest (flannel kube-flannel.yml or the
    /// tigera-operator manifest) instead of the pinned URL. Relative to the plan file.
    pub manifest_file: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeKind {
    #[default]
    Containerd,
    Docker,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Runtime {
    /// Runtime on Linux nodes: "containerd" (default) or "docker" (with cri-dockerd).
    #[serde(default)]
    pub linux: RuntimeKind,
    /// Runtime on Windows nodes: "containerd" (default) or "docker".
    #[serde(default)]
    pub windows: RuntimeKind,
    /// Explicitly accept Docker + cri-dockerd on Kubernetes ≥ 1.24 (dockershim is gone).
    #[serde(default)]
    pub cri_dockerd: bool,
    /// Where containerd comes from on Linux: "package" (distribution, default) or "release"
    /// (upstream tarball with checksum).
    pub containerd_source: Option<String>,
    /// Pause (sandbox) image pinned in the runtime config.
    pub sandbox_image: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Versions {
    /// containerd release (e.g. "1.7.24").
    pub containerd: Option<String>,
    /// flannel release (e.g. "v0.26.2").
    pub flannel: Option<String>,
    /// Calico release (e.g. "v3.29.1").
    pub calico: Option<String>,
    /// CNI plugins release (e.g. "v1.6.1").
    pub cni_plugins: Option<String>,
    /// crictl release; unset: not installed on Windows.
    pub crictl: Option<String>,
    /// cri-dockerd release (Docker runtime only).
    pub cri_dockerd: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Artifacts {
    /// Base URL of a mirror laid out like the upstream release sites; replaces them all.
    pub mirror: Option<String>,
    /// Extra or overriding SHA-256 checksums, by artifact file name.
    #[serde(default)]
    pub sha256: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Proxy {
    pub http: Option<String>,
    pub https: Option<String>,
    /// Hosts and CIDRs that bypass the proxy. kwin adds the pod and service CIDRs and the
    /// hosts' addresses.
    #[serde(default)]
    pub no_proxy: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    #[serde(default)]
    pub linux: Connection,
    #[serde(default)]
    pub windows: Connection,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    Ssh,
    Local,
    Winrm,
    SshPowershell,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WinrmAuth {
    Ntlm,
    Basic,
    Kerberos,
}

/// How to reach a host. Every field is optional here; `[defaults.<os>]`, the inventory and
/// built-in defaults fill the gaps.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Connection {
    /// linux: "ssh" (default) | "local"; windows: "winrm" (default) | "ssh-powershell".
    pub transport: Option<TransportKind>,
    pub port: Option<u16>,
    pub user: Option<String>,
    /// SSH private key file; when absent, ssh-agent is used.
    pub private_key: Option<String>,
    /// Environment variable holding the private key's passphrase.
    pub private_key_passphrase_env: Option<String>,
    /// Environment variable holding the password (SSH password auth or WinRM).
    pub password_env: Option<String>,
    /// File holding the password (first line).
    pub password_file: Option<String>,
    /// Refused: passwords never go in the plan text. Use password_env or password_file.
    #[schemars(skip)]
    pub password: Option<toml::Value>,
    /// Run as root through `sudo -n` (Linux, non-root users).
    #[serde(rename = "become")]
    pub become_root: Option<bool>,
    /// WinRM over HTTPS (port 5986). Default true.
    pub https: Option<bool>,
    /// WinRM authentication: "ntlm" (default) | "basic" (HTTPS only) | "kerberos".
    pub auth: Option<WinrmAuth>,
    /// WinRM HTTPS: pinned SHA-256 fingerprint of the server certificate (hex, colons optional).
    pub cert_fingerprint: Option<String>,
    /// WinRM HTTPS: CA bundle (PEM) to verify the server certificate.
    pub ca_file: Option<String>,
    /// WinRM HTTPS: skip certificate verification. Unsafe; warned about on every run.
    pub insecure: Option<bool>,
    /// Seconds to wait for a connection. Default 10.
    pub connect_timeout: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Os {
    Linux,
    Windows,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    ControlPlane,
    Worker,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Host {
    /// Unique name; also the Kubernetes node name (lowercase RFC 1123).
    pub name: String,
    /// IP address or DNS name kwin connects to.
    pub address: Option<String>,
    /// "linux" | "windows".
    pub os: Option<Os>,
    /// "control-plane" | "worker". The first control plane in file order runs `kubeadm init`.
    pub role: Option<Role>,
    /// Address the node advertises to the cluster, if not `address`.
    pub node_ip: Option<String>,
    /// Windows: network interface for the pod network (default: the one routing to the
    /// control plane).
    pub interface: Option<String>,
    /// Extra node labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Extra node taints, `key=value:Effect`.
    #[serde(default)]
    pub taints: Vec<String>,
    /// Pinned SSH host key fingerprint, `SHA256:...` as `ssh-keygen -lf` prints it.
    pub host_key: Option<String>,
    /// Connection overrides.
    #[serde(flatten)]
    pub connection: Connection,
}

/// Which hosts a user task runs on. Empty: every host.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Selector {
    #[serde(default)]
    pub hosts: Vec<String>,
    #[serde(default)]
    pub roles: Vec<Role>,
    pub os: Option<Os>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UserTask {
    /// Unique task name.
    pub name: String,
    /// Module name, e.g. "file", "command", "sysctl".
    pub module: String,
    /// Hosts to run on.
    #[serde(default)]
    pub on: Selector,
    /// Tasks or recipe steps this task runs after (same host), or `host:task` (any host).
    #[serde(default)]
    pub after: Vec<String>,
    /// Module parameters (see each module's documentation).
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, serde_json::Value>")]
    pub params: BTreeMap<String, toml::Value>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Hosts worked on at once. Default 32.
    pub parallelism: Option<usize>,
    /// Seconds one remote step may take. Default 600.
    pub step_timeout: Option<u64>,
    /// Retries of a step after a connection failure. Default 3.
    pub retries: Option<u32>,
    /// Seconds before the first retry (doubling each time). Default 2.
    pub retry_delay: Option<u64>,
    /// Allow reboots (Windows Containers feature). Default true.
    pub allow_reboot: Option<bool>,
}
