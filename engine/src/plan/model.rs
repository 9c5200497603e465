//! The plan file as typed data (what `plan.toml` may say), with defaults.
//!
//! This is the single source of the plan format: serde reads it, `kwin schema` prints its
//! JSON Schema (doc comments become descriptions, `extend("default" = ..)` the defaults
//! editors show), and the structural pass of `load.rs` walks that schema to report every
//! unknown key and wrong type at once. Loading fills in defaults from `[defaults.*]` and the
//! inventory and resolves each host's connection; `validate.rs` checks rules across fields.

use super::effective::defaults;
pub use crate::transport::spec::WinrmAuth;
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
    /// Where artifacts come from (mirror, checksums).
    #[serde(default)]
    pub artifacts: Artifacts,
    /// HTTP(S) proxy for hosts behind one (machine-wide on Windows, for the runtime and
    /// package manager on Linux).
    pub proxy: Option<Proxy>,
    /// Connection defaults per OS; any host may override.
    #[serde(default)]
    pub defaults: Defaults,
    /// Engine settings: timeouts, retries, parallelism.
    #[serde(default)]
    pub settings: Settings,
    /// How a running cluster is upgraded when `cluster.kubernetes_version` changes: workers at
    /// once, drain timeout, forced drains.
    #[serde(default)]
    pub upgrade: Upgrade,
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
    /// Variables, by name: values given when kwin runs (`--var name=value`, the environment's
    /// `KWIN_VAR_<name>`) or their default, used as `{{ var.name }}` in `[[hosts]]` and
    /// `[defaults.*]` values and in `[[tasks]]` params.
    #[serde(default)]
    pub variables: BTreeMap<String, Variable>,
}

/// `[variables.<name>]`: one value the plan leaves to whoever runs it.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Variable {
    /// "string", "integer" or "boolean": a given value that is not one is an error.
    #[serde(rename = "type")]
    pub kind: VarType,
    /// The value when neither `--var` nor `KWIN_VAR_<name>` gives one; without it the
    /// variable must be given wherever it is used.
    #[schemars(with = "Option<serde_json::Value>")]
    pub default: Option<toml::Value>,
    /// What the value is (for whoever runs the plan).
    pub description: Option<String>,
    /// The value is a secret: kwin scrubs it from everything it shows or logs. Default false.
    #[serde(default)]
    #[schemars(extend("default" = false))]
    pub sensitive: bool,
}

/// `variables.<name>.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VarType {
    String,
    Integer,
    Boolean,
}

/// `[cluster]`: the Kubernetes cluster kwin builds with kubeadm.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Cluster {
    /// Cluster name (lowercase letters, digits and `-`); the kubeadm clusterName, the
    /// kubeconfig context and the file name `kwin kubeconfig` writes.
    pub name: String,
    /// Kubernetes version, full `x.y.z` (e.g. "1.37.2"), a release of a minor kwin knows
    /// (1.29 to 1.37; docs/versions.md). kubeadm, kubelet, kubectl and the Windows
    /// kubelet/kube-proxy binaries are all installed at exactly this version. An end-of-life
    /// minor is a warning.
    pub kubernetes_version: String,
    /// Pod (cluster) CIDR, IPv4. Each node gets a /24 from it. Default 10.244.0.0/16.
    #[schemars(extend("default" = defaults::POD_CIDR))]
    pub pod_cidr: Option<String>,
    /// Service CIDR, IPv4, /12 or smaller. Default 10.96.0.0/12.
    #[schemars(extend("default" = defaults::SERVICE_CIDR))]
    pub service_cidr: Option<String>,
    /// Cluster DNS service IP, inside service_cidr. Default: the .10 address of service_cidr.
    #[schemars(extend("default" = defaults::DNS_SERVICE_IP))]
    pub dns_service_ip: Option<String>,
    /// Maximum pods per node (kubelet maxPods), at most 254 (one /24 per node). Default 110.
    #[schemars(extend("default" = defaults::MAX_PODS_PER_NODE))]
    pub max_pods_per_node: Option<u32>,
    /// Stable address (`host` or `host:port`, an IP or DNS name) in front of the API servers.
    /// Required with more than one control plane. Default: the first control plane's
    /// address, port 6443.
    pub control_plane_endpoint: Option<String>,
    /// Extra names and addresses the API server's certificate is valid for, besides those
    /// kubeadm always gives it (each control plane's node name and node IP,
    /// control_plane_endpoint, the kubernetes Service's names and IP): the address a CI
    /// runner or a laptop reaches the API server on when it is not the nodes' own (a public
    /// IP, a load balancer's name), for `kwin kubeconfig --address`. IP addresses or
    /// lowercase DNS names (`*.` wildcards allowed). kubeadm writes the certificate when the
    /// first control plane is set up: set them before the first apply.
    #[serde(default)]
    pub api_server_sans: Vec<String>,
    /// Cluster DNS domain. Default cluster.local.
    #[schemars(extend("default" = defaults::DNS_DOMAIN))]
    pub dns_domain: Option<String>,
    /// Register Windows nodes with the taint `os=windows:NoSchedule`, so that only pods that
    /// tolerate it (Windows workloads) are scheduled there. Default true.
    #[schemars(extend("default" = defaults::WINDOWS_TAINT))]
    pub windows_taint: Option<bool>,
    /// Create the RuntimeClasses `windows-2019`, `windows-2022` and `windows-2025`, each
    /// carrying the nodeSelector of its Windows Server build (`node.kubernetes.io/windows-build`)
    /// and, with `windows_taint`, the toleration. Default false.
    #[schemars(extend("default" = defaults::WINDOWS_RUNTIME_CLASSES))]
    pub windows_runtime_classes: Option<bool>,
    /// Deploy test workloads after apply and check connectivity (`kwin verify`). Default true.
    #[schemars(extend("default" = defaults::VERIFY))]
    pub verify: Option<bool>,
    /// URL the egress checks of `kwin verify` fetch from inside the test pods (curl; any
    /// HTTP answer passes): somewhere the nodes may reach, e.g. an address of the site's own
    /// network when the cluster has no internet. `kwin verify --external-url` wins.
    #[schemars(extend("default" = defaults::VERIFY_EGRESS_URL))]
    pub verify_egress_url: Option<String>,
    /// What kwin does when Windows waits for a reboot on a Windows worker that has joined
    /// (Windows Update, servicing): `report` (default) names the host and the reasons in a
    /// warning at the end of the apply and restarts nothing; `drain` drains the node from the
    /// first control plane, restarts it and uncordons it once Ready, one Windows node at a
    /// time after every upgrade wave. Before the join kwin restarts a node only for the
    /// Containers feature it installed.
    #[schemars(extend("default" = "report"))]
    pub windows_pending_reboot: Option<PendingReboot>,
    /// Let Linux nodes on cgroup v1 run Kubernetes 1.35 and later: the kubelet is configured
    /// with `failCgroupV1: false` and kubeadm skips its SystemVerification preflight check
    /// (kubernetes/kubernetes#134298, CHANGELOG-1.35). Without it `kwin plan` refuses a
    /// cgroup v1 host on those minors. Default false.
    #[schemars(extend("default" = defaults::ALLOW_CGROUP_V1))]
    pub allow_cgroup_v1: Option<bool>,
    /// kube-proxy's `conntrack.maxPerCore` (KubeProxyConfiguration): connections tracked per
    /// CPU, which kube-proxy raises the host's `nf_conntrack_max` to. `0` leaves the host's
    /// limit alone: for nodes that may not write it (inside a container or a network namespace
    /// other than the host's, where kube-proxy 1.36 and older fail to start with
    /// `open /proc/sys/net/netfilter/nf_conntrack_max: permission denied`; kind sets 0 for
    /// this, kubernetes-sigs/kind pkg/cluster/internal/kubeadm/config.go). Unset: kube-proxy's
    /// default (32768).
    pub kube_proxy_conntrack_max_per_core: Option<u32>,
}

/// `cluster.windows_pending_reboot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PendingReboot {
    /// Warn, naming the host and why; restart nothing.
    #[default]
    Report,
    /// Drain the node, restart it, uncordon it once Ready, one node at a time (recipe
    /// windows-reboot).
    Drain,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CniPlugin {
    /// flannel: the kube-flannel manifest on Linux, flanneld on Windows.
    Flannel,
    /// Calico, installed by the tigera-operator (Windows nodes through HostProcess pods).
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

/// `[cni]`: the pod network.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Cni {
    /// "flannel" or "calico".
    pub plugin: CniPlugin,
    /// flannel: "vxlan" (default) or "host-gw"; calico: "vxlan" (default); without Windows
    /// hosts calico also takes "ipip" and "vxlan-cross-subnet".
    #[schemars(extend("default" = "vxlan"))]
    pub backend: Option<CniBackend>,
    /// VXLAN network identifier: flannel vxlan's `Backend.VNI`, Calico's Felix `vxlanVNI`
    /// (unused by host-gw). Default 4096 (the only VNI Windows flannel supports).
    #[schemars(extend("default" = defaults::VXLAN_VNI), range(min = 1, max = 16_777_215))]
    pub vni: Option<u32>,
    /// VXLAN UDP port. Default 4789 (the only port Windows flannel supports).
    #[schemars(extend("default" = defaults::VXLAN_PORT), range(min = 1))]
    pub port: Option<u16>,
    /// Offline labs: a local copy of the upstream manifest (flannel kube-flannel.yml or the
    /// tigera-operator manifest) instead of the pinned URL. Relative to the plan file.
    pub manifest_file: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeKind {
    /// containerd (with the CRI plugin).
    #[default]
    Containerd,
    /// Docker Engine; on Kubernetes 1.24 and later through cri-dockerd. Linux only.
    Docker,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ContainerdSource {
    /// The distribution's package (Debian/Ubuntu `containerd`, RHEL family from the Docker
    /// repository).
    #[default]
    Package,
    /// The upstream release tarball of `versions.containerd`, checksum verified.
    Release,
}

/// `[runtime]`: the container runtime per OS.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Runtime {
    /// Runtime on Linux nodes: "containerd" (default) or "docker" (needs `cri_dockerd = true`
    /// on Kubernetes 1.24 and later).
    #[serde(default)]
    pub linux: RuntimeKind,
    /// Runtime on Windows nodes: "containerd" (default). "docker" is refused: see the
    /// validation rules.
    #[serde(default)]
    pub windows: RuntimeKind,
    /// Accept Docker through cri-dockerd on Kubernetes 1.24 and later (dockershim was removed
    /// from the kubelet in 1.24). Default false.
    #[serde(default)]
    pub cri_dockerd: bool,
    /// Where containerd comes from on Linux: "package" or "release". Default: "release" with
    /// Kubernetes 1.36 and later (they support containerd 2.x only, and the distributions'
    /// own packages are 1.x), else "package".
    pub containerd_source: Option<ContainerdSource>,
    /// Pause (sandbox) image pinned in the runtime config, e.g. "registry.k8s.io/pause:3.10".
    /// Default: the one kubeadm uses for the Kubernetes minor (kwin's version table).
    pub sandbox_image: Option<String>,
    /// cgroup driver of containerd's runc (`SystemdCgroup`) and the kubelet
    /// (`cgroupDriver`) on Linux nodes: "systemd" (default) or "cgroupfs" (hosts without
    /// systemd).
    #[schemars(extend("default" = defaults::CGROUP_DRIVER))]
    pub cgroup_driver: Option<CgroupDriver>,
    /// containerd on Linux keeps containers' OOM score adjustment at or above its own
    /// (`restrict_oom_score_adj` of containerd's CRI runtime plugin): for nodes where
    /// containerd may not lower it (no CAP_SYS_RESOURCE: nodes inside containers or
    /// unprivileged LXC), where runc otherwise fails every pod sandbox with "failed to update
    /// /proc/self/oom_score_adj: Permission denied". Default false.
    #[serde(default)]
    pub restrict_oom_score_adj: bool,
}

/// `runtime.cgroup_driver`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CgroupDriver {
    /// systemd manages the cgroups (hosts booted with systemd).
    Systemd,
    /// The runtime and the kubelet write cgroupfs themselves (hosts without systemd).
    Cgroupfs,
}

/// `[versions]`: component versions. Unset: the version pinned by this kwin release.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Versions {
    /// containerd release (e.g. "2.3.7"), inside the support matrix for the Kubernetes minor.
    pub containerd: Option<String>,
    /// flannel release (e.g. "v0.28.10").
    pub flannel: Option<String>,
    /// Calico release (e.g. "v3.32.1").
    pub calico: Option<String>,
    /// runc release installed with containerd's release (`runtime.containerd_source =
    /// "release"`), e.g. "1.5.3".
    pub runc: Option<String>,
    /// CNI plugins release (e.g. "v1.10.0").
    pub cni_plugins: Option<String>,
    /// crictl release; unset: not installed on Windows.
    pub crictl: Option<String>,
    /// cri-dockerd release (Docker runtime only).
    pub cri_dockerd: Option<String>,
}

/// `[artifacts]`: where downloads come from.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Artifacts {
    /// Base URL (http or https) of a mirror laid out like the upstream release sites;
    /// replaces them all.
    pub mirror: Option<String>,
    /// Extra or overriding SHA-256 checksums (64 hex digits), by artifact file name.
    #[serde(default)]
    pub sha256: BTreeMap<String, String>,
    /// Extra or overriding OpenPGP fingerprints (40 hex digits) of signing keys, by key file
    /// name (`"Release.key"`).
    #[serde(default)]
    pub openpgp: BTreeMap<String, String>,
    /// Container registry mirrors, by upstream registry host (`"registry.k8s.io"`,
    /// `"docker.io"`, `"ghcr.io"`, `"quay.io"`, `"mcr.microsoft.com"`, `"host:port"`, or
    /// `"_default"` for every registry without an entry of its own): one mirror URL or a list,
    /// tried in order before the registry itself. containerd's registry host files
    /// (`hosts.toml`) on every node.
    #[serde(default)]
    pub registry_mirrors: BTreeMap<String, OneOrMany>,
}

/// A string, or a list of strings.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    /// The values, in order.
    pub fn to_vec(&self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// `[proxy]`: an HTTP(S) proxy the hosts reach the internet through.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Proxy {
    /// Proxy URL for http, e.g. "http://proxy.example.com:3128".
    pub http: Option<String>,
    /// Proxy URL for https.
    pub https: Option<String>,
    /// Hosts, domains and CIDRs that bypass the proxy. kwin adds the pod and service CIDRs,
    /// the cluster domain and the hosts' addresses.
    #[serde(default)]
    pub no_proxy: Vec<String>,
    /// Environment variable holding the proxy credentials, `user:password` (never in the
    /// plan text; refused with Windows hosts).
    pub credentials_env: Option<String>,
    /// File whose first line is the proxy credentials, `user:password`, relative to the plan.
    pub credentials_file: Option<String>,
}

/// `[defaults.linux]` and `[defaults.windows]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// Connection settings every Linux host starts from.
    #[serde(default)]
    pub linux: Connection,
    /// Connection settings every Windows host starts from.
    #[serde(default)]
    pub windows: Connection,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    /// SSH with a POSIX shell (Linux).
    Ssh,
    /// Run on this machine (Linux; tests and running on the host itself).
    Local,
    /// WinRM (Windows).
    Winrm,
    /// OpenSSH for Windows with PowerShell.
    SshPowershell,
}

/// How to reach a host. Every field is optional here; `[defaults.<os>]`, the inventory and
/// built-in defaults fill the gaps.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Connection {
    /// linux: "ssh" (default) | "local"; windows: "winrm" (default) | "ssh-powershell".
    pub transport: Option<TransportKind>,
    /// Port. Default: 22 (ssh), 5986 (WinRM HTTPS), 5985 (WinRM HTTP).
    #[schemars(range(min = 1))]
    pub port: Option<u16>,
    /// User to log in as. Default: root (Linux), Administrator (Windows).
    pub user: Option<String>,
    /// SSH private key file; when absent, ssh-agent is used.
    pub private_key: Option<String>,
    /// Environment variable holding the private key's passphrase.
    pub private_key_passphrase_env: Option<String>,
    /// Environment variable holding the password (SSH password auth or WinRM).
    pub password_env: Option<String>,
    /// File holding the password (first line), relative to the plan file.
    pub password_file: Option<String>,
    /// Refused: passwords never go in the plan text. Use password_env or password_file.
    #[schemars(skip)]
    #[serde(skip_serializing)]
    pub password: Option<toml::Value>,
    /// Run as root through `sudo -n` (Linux). Default: true for a user other than root.
    #[serde(rename = "become")]
    pub become_root: Option<bool>,
    /// WinRM over HTTPS (port 5986). Default true.
    pub https: Option<bool>,
    /// WinRM authentication: "ntlm" (default) | "basic" (HTTPS only) | "kerberos".
    pub auth: Option<WinrmAuth>,
    /// WinRM HTTPS: pinned SHA-256 fingerprint of the server certificate (64 hex digits,
    /// colons optional).
    pub cert_fingerprint: Option<String>,
    /// WinRM HTTPS: CA bundle (PEM) to verify the server certificate.
    pub ca_file: Option<String>,
    /// WinRM HTTPS: skip certificate verification. Unsafe; warned about.
    pub insecure: Option<bool>,
    /// Time to wait for a connection: seconds, or a duration like "30s", "2m". Default 10
    /// seconds.
    #[serde(default, deserialize_with = "duration_opt")]
    #[schemars(with = "Option<Duration>", extend("default" = 10))]
    pub connect_timeout: Option<u64>,
    /// SSH: the jump host to go through (OpenSSH's `ProxyJump`): the name of another host
    /// of the plan (its own connection settings and pinned key), or `[user@]host[:port]`
    /// (resolved through `~/.ssh/config`), or "none" (not even `~/.ssh/config`'s). One jump
    /// at most. Default: what `~/.ssh/config` says for the address.
    pub proxy_jump: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Os {
    Linux,
    Windows,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Runs the Kubernetes control plane (Linux only). The first in file order runs
    /// `kubeadm init`, the others join as control planes.
    ControlPlane,
    /// Joins as a worker node.
    Worker,
}

/// `[[hosts]]`: one machine.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Host {
    /// Unique name; also the Kubernetes node name (lowercase RFC 1123, at most 63
    /// characters).
    pub name: String,
    /// IP address or DNS name kwin connects to.
    pub address: Option<String>,
    /// "linux" | "windows".
    pub os: Option<Os>,
    /// "control-plane" | "worker". Required with `[cluster]`.
    pub role: Option<Role>,
    /// IP address the node advertises to the cluster (kubelet --node-ip), if not `address`.
    pub node_ip: Option<String>,
    /// Network interface for the pod network (flannel `--iface`, the Windows HNS network
    /// adapter). Default: the one routing to the control plane.
    pub interface: Option<String>,
    /// Extra node labels, registered by the kubelet. Keys in the kubernetes.io and k8s.io
    /// namespaces are limited to those a kubelet may set on itself.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Extra node taints, `key=value:Effect` or `key:Effect` (Effect: NoSchedule,
    /// PreferNoSchedule or NoExecute).
    #[serde(default)]
    pub taints: Vec<String>,
    /// Pinned SSH host key fingerprint, `SHA256:` and 43 base64 characters, as
    /// `ssh-keygen -lf` prints it.
    pub host_key: Option<String>,
    /// Connection overrides (same keys as `[defaults.<os>]`).
    #[serde(flatten)]
    pub connection: Connection,
}

/// Which hosts a user task runs on. Every given condition must hold; empty: every host.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Selector {
    /// Host names.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// Roles: "control-plane", "worker".
    #[serde(default)]
    pub roles: Vec<Role>,
    /// "linux" or "windows".
    pub os: Option<Os>,
}

/// `[[tasks]]`: one of the user's own steps.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UserTask {
    /// Unique task name (no `/` or `:`).
    pub name: String,
    /// Module name, e.g. "file", "command", "sysctl".
    pub module: String,
    /// Hosts to run on.
    #[serde(default)]
    pub on: Selector,
    /// Tasks or recipe steps this task runs after (same host), or `host:task` (any host).
    #[serde(default)]
    pub after: Vec<String>,
    /// Secret values read from other tasks' outputs, by input name: `host:task.output`,
    /// `@first_control_plane:task.output`, `@all:task.output` or `task.output` (same host);
    /// without `.output`, the output named like the input. Each is also an `after` edge.
    #[serde(default)]
    pub inputs: BTreeMap<String, String>,
    /// Module parameters (see each module's documentation).
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, serde_json::Value>")]
    pub params: BTreeMap<String, toml::Value>,
    /// Keep what the task writes and reads out of diffs, events, the journal and logs: they
    /// show `sha256:… (sensitive)` instead (Terraform's `sensitive`, Ansible's `no_log`).
    /// Default false; file writes whose mode gives group and others no read access are
    /// sensitive anyway.
    #[serde(default)]
    #[schemars(extend("default" = false))]
    pub sensitive: bool,
}

/// `[upgrade]`: how kwin upgrades a running cluster to a new `kubernetes_version` (see
/// docs/upgrading.md).
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Upgrade {
    /// Workers upgraded at once (drained, upgraded, uncordoned together), in plan order.
    /// Default 1.
    #[schemars(extend("default" = defaults::upgrade::MAX_UNAVAILABLE), range(min = 1))]
    pub max_unavailable: Option<usize>,
    /// How long `kubectl drain` may take per node (PodDisruptionBudgets honoured); a drain
    /// that does not finish stops that node's upgrade naming the pods that block it. Seconds,
    /// or a duration like "90s", "5m". Default 5 minutes.
    #[serde(default, deserialize_with = "duration_opt")]
    #[schemars(with = "Option<Duration>", extend("default" = defaults::upgrade::DRAIN_TIMEOUT_SECS))]
    pub drain_timeout: Option<u64>,
    /// Let a drain delete pods that no controller recreates (`kubectl drain --force`); they
    /// are gone for good. Default false: such pods stop the drain and are named.
    #[schemars(extend("default" = defaults::upgrade::FORCE_DRAIN))]
    pub force_drain: Option<bool>,
}

/// `[settings]`: how the engine runs.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Hosts worked on at once. Default 32.
    #[schemars(extend("default" = defaults::settings::PARALLELISM), range(min = 1))]
    pub parallelism: Option<usize>,
    /// Time one remote step may take: seconds, or a duration like "90s", "10m", "1h30m".
    /// Default 600 seconds.
    #[serde(default, deserialize_with = "duration_opt")]
    #[schemars(with = "Option<Duration>", extend("default" = defaults::settings::STEP_TIMEOUT_SECS))]
    pub step_timeout: Option<u64>,
    /// Retries of a step after a connection failure. Default 3.
    #[schemars(extend("default" = defaults::settings::RETRIES))]
    pub retries: Option<u32>,
    /// Time before the first retry (doubling each time): seconds, or a duration like "5s".
    /// Default 2 seconds.
    #[serde(default, deserialize_with = "duration_opt")]
    #[schemars(with = "Option<DurationOrZero>", extend("default" = defaults::settings::RETRY_DELAY_SECS))]
    pub retry_delay: Option<u64>,
    /// How long to keep trying to reach a host that does not answer yet (a cloud VM still
    /// booting, a Windows VM still running its preparation script): every connect failure,
    /// a refused port too, is tried again until then, and told as it goes. Seconds, or a
    /// duration like "10m". Default 0: a host that refuses fails at once, one that does not
    /// answer after `retries`.
    #[serde(default, deserialize_with = "duration_opt")]
    #[schemars(with = "Option<DurationOrZero>", extend("default" = defaults::settings::WAIT_FOR_HOSTS_SECS))]
    pub wait_for_hosts: Option<u64>,
    /// Allow reboots (the Windows Containers feature needs one). Default true.
    #[schemars(extend("default" = defaults::settings::ALLOW_REBOOT))]
    pub allow_reboot: Option<bool>,
    /// MiB of step output a run keeps in memory and writes to its logs, all hosts together;
    /// past it, each step keeps only the last 4 KiB of its output (with a warning). Default 64.
    #[schemars(extend("default" = defaults::settings::OUTPUT_BUDGET_MIB), range(min = 1))]
    pub output_budget_mib: Option<u64>,
    /// Runs whose logs (`.kwin/logs/<run>`) and journal (`.kwin/runs/<run>.json`) are kept;
    /// older ones are deleted when a run starts. Default 50.
    #[schemars(extend("default" = defaults::settings::KEEP_RUNS), range(min = 1))]
    pub keep_runs: Option<usize>,
    /// MiB that `.kwin/logs` and `.kwin/runs` may hold together; the oldest runs are deleted
    /// when a run starts until they fit. Default 1024.
    #[schemars(extend("default" = defaults::settings::LOGS_LIMIT_MIB), range(min = 1))]
    pub logs_limit_mib: Option<u64>,
}

/// A duration key's schema: seconds (an integer, at least 1) or a string in the grammar of the
/// CLI's `--timeout` (`plan::syntax::duration_secs`: "90s", "10m", "1h30m"). The structural
/// pass reads `x-kwin-duration` and reports a string outside the grammar (`bad-duration`).
pub struct Duration;

/// [`Duration`] that may be zero.
pub struct DurationOrZero;

fn duration_schema(min: u64) -> schemars::Schema {
    schemars::json_schema!({
        "type": ["integer", "string"],
        "minimum": min,
        "pattern": "^\\s*([0-9]+[hms]?)+\\s*$",
        "x-kwin-duration": true,
    })
}

impl JsonSchema for Duration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        duration_schema(1)
    }
}

impl JsonSchema for DurationOrZero {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "DurationOrZero".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        duration_schema(0)
    }
}

/// Seconds from an integer or a duration string (see [`Duration`]).
fn duration_opt<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Secs(u64),
        Text(String),
    }
    match Option::<Raw>::deserialize(d)? {
        None => Ok(None),
        Some(Raw::Secs(n)) => Ok(Some(n)),
        Some(Raw::Text(t)) => super::syntax::duration_secs(&t).map(Some).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "\"{t}\" is not a duration (e.g. 90, \"90s\", \"10m\", \"1h30m\")"
            ))
        }),
    }
}
