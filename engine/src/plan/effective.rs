//! Effective values: what the plan says, else kwin's default — decided ONCE, here.
//!
//! [`Effective::build`] runs after validation, on a plan without errors, and yields every value
//! the rest of kwin needs with defaults applied: the cluster's address plan and endpoint, the
//! pod network, runtimes, component versions, proxy (its credentials read once, from the
//! environment or the file the plan names), artifact sources, the Windows constants, the
//! executor's settings, and per host its node IP, role and CRI socket. Every fallible value is
//! parsed by the function validation used (`ClusterNet::from_cluster`, `syntax::version`,
//! `syntax::endpoint`), so a failure here is an `internal` diagnostic ("a bug in kwin"), never
//! a second code for a rule validation already reports. The one error a valid plan can meet is
//! `proxy-credentials`: the credentials are read here, not at validation.
//!
//! Readers: the template context (`expand/context.rs` serializes the parts below, so recipes
//! see exactly these values), the executor's options ([`SettingsEff`]), the run's scrubber
//! ([`Effective::secrets`]), and the commands (`kwin kubeconfig`'s endpoint, verify's DNS
//! domain, taint and expected nodes, apply's `verify`). The defaults themselves are in
//! [`defaults`].

pub mod defaults;

use super::net::{ClusterNet, CniSettings};
use super::vars::VarValue;
use super::{support, syntax, versions, LoadedPlan, ResolvedHost};
use super::{
    CgroupDriver, CniBackend, CniPlugin, ContainerdSource, Os, PendingReboot, Role, RuntimeKind,
};
use crate::diag::{Diagnostic, Diagnostics};
use crate::secret::Secret;
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

/// Every effective value of a plan. Serializes to what templates see (secrets included, as
/// the recipes write them to root-only files); `Debug` shows secrets as `***`.
#[derive(Debug, Clone, Serialize)]
pub struct Effective {
    /// With `[cluster]`: `cluster`, `cni`, `runtime`, `versions`, `proxy`, `artifacts`,
    /// `windows` are all `Some`; without it all `None`.
    pub cluster: Option<ClusterEff>,
    pub cni: Option<CniEff>,
    pub runtime: Option<RuntimeEff>,
    pub versions: Option<VersionsEff>,
    pub proxy: Option<ProxyEff>,
    pub artifacts: Option<ArtifactsEff>,
    pub windows: Option<WindowsEff>,
    /// `[upgrade]` (with `[cluster]` only).
    pub upgrade: Option<UpgradeEff>,
    pub settings: SettingsEff,
    /// Every host, in plan order.
    pub hosts: Vec<HostEff>,
    pub first_control_plane: Option<FirstControlPlaneEff>,
    /// The plan's variables that have a value (`plan/vars.rs`), typed as declared: the
    /// template context's `var`.
    pub vars: VarsEff,
    /// Index in `plan.hosts` of the first control plane.
    #[serde(skip)]
    first_cp: Option<usize>,
    /// The proxy credentials in every form they take in rendered files, read once.
    #[serde(skip)]
    secrets: Vec<Secret>,
}

/// `cluster`: effective cluster settings.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterEff {
    pub name: String,
    /// "1.31.4".
    pub kubernetes_version: String,
    /// "1.31" (package repository, version pins).
    pub minor: String,
    /// 31: the minor version as a number, for comparisons in templates.
    pub minor_version: u32,
    pub pod_cidr: String,
    pub service_cidr: String,
    /// The plan's, else the .10 address of the service CIDR (kubeadm's rule).
    pub dns_service_ip: String,
    pub max_pods_per_node: u32,
    /// `host:port` of the API server(s): the plan's value, else the first control plane's
    /// node IP (or address) and port 6443.
    pub control_plane_endpoint: String,
    /// Host part of `control_plane_endpoint`.
    pub api_server_host: String,
    /// Port part of `control_plane_endpoint`.
    pub api_server_port: u16,
    /// `cluster.api_server_sans`: extra names of the API server's certificate
    /// (kubeadm's ClusterConfiguration `apiServer.certSANs`).
    pub api_server_sans: Vec<String>,
    pub dns_domain: String,
    /// Deploy the verification workloads (default true).
    pub verify: bool,
    /// What the egress checks of `kwin verify` fetch from inside the pods.
    pub verify_egress_url: String,
    pub control_planes: usize,
    pub windows_workers: usize,
    pub linux_workers: usize,
    pub has_windows: bool,
    /// Lifetime of the bootstrap token workers join with.
    pub token_ttl: String,
    /// Register Windows nodes with the taint `os=windows:NoSchedule` (default true).
    pub windows_taint: bool,
    /// Create the RuntimeClasses of Windows Server builds (default false).
    pub windows_runtime_classes: bool,
    /// What to do about a reboot Windows waits for on a joined Windows worker: "report" or
    /// "drain".
    pub windows_pending_reboot: String,
    /// Nodes on cgroup v1 may run the kubelet (its `failCgroupV1: false`, kubeadm's
    /// SystemVerification preflight skipped): the plan's, default false.
    pub allow_cgroup_v1: bool,
    /// The kubelet refuses cgroup v1 by default from Kubernetes 1.35 (`failCgroupV1`,
    /// kubernetes/kubernetes#134298): true when this cluster's minor does.
    pub kubelet_fails_cgroup_v1: bool,
    /// The Linux distributions kwin supports on its nodes (the support matrix's), for the
    /// `node_check` step.
    pub linux_distributions: Vec<DistroEff>,
    /// kubeadm preflight checks kubeadm init and join skip on Linux nodes:
    /// `SystemVerification` when the plan allows cgroup v1 on a minor whose kubeadm fails it
    /// there (kubernetes/kubernetes CHANGELOG-1.35, #134744; as minikube does,
    /// kubernetes/minikube@eb25dbc703701fa38c3f65c89a1896baa375e5ed
    /// pkg/minikube/bootstrapper/kubeadm/kubeadm.go), else none.
    pub preflight_ignore: Vec<String>,
    /// The kubelet's `cgroupDriver`: `runtime.cgroup_driver` (read by the kubeadm
    /// configuration, `plan/kubeadm.rs`, whose template function sees `cluster`).
    pub kubelet_cgroup_driver: String,
    /// `cluster.kube_proxy_conntrack_max_per_core`: kube-proxy's `conntrack.maxPerCore` when
    /// the plan sets it (a KubeProxyConfiguration in the kubeadm configuration), else none.
    pub kube_proxy_conntrack_max_per_core: Option<u32>,
}

/// A Linux distribution of the support matrix: os-release `ID`, `VERSION_ID`, its name.
#[derive(Debug, Clone, Serialize)]
pub struct DistroEff {
    pub id: String,
    pub version: String,
    pub name: String,
}

/// `cni`: pod network.
#[derive(Debug, Clone, Serialize)]
pub struct CniEff {
    /// "flannel" | "calico".
    pub plugin: String,
    /// "vxlan" | "host-gw" | "ipip" | "vxlan-cross-subnet".
    pub backend: String,
    pub vni: u32,
    pub port: u16,
    /// Absolute path of the plan's local manifest copy, or none.
    pub manifest_file: Option<String>,
}

/// `runtime`: container runtimes.
#[derive(Debug, Clone, Serialize)]
pub struct RuntimeEff {
    /// "containerd" | "docker".
    pub linux: String,
    pub windows: String,
    pub cri_dockerd: bool,
    /// "package" | "release": the plan's, else "release" for a minor the distributions'
    /// containerd 1.x packages cannot serve (1.36 and later), else "package".
    pub containerd_source: String,
    /// The plan's, else kubeadm's pause image for the cluster's minor.
    pub sandbox_image: String,
    /// "systemd" | "cgroupfs": containerd's runc `SystemdCgroup` and the kubelet's
    /// `cgroupDriver` on Linux nodes.
    pub cgroup_driver: String,
    /// `runtime.restrict_oom_score_adj`: containerd's CRI `restrict_oom_score_adj` on Linux.
    pub restrict_oom_score_adj: bool,
    /// The version of containerd's configuration file kwin writes on Linux nodes: that of
    /// the containerd kwin installs (release source: 4 for 2.3+, 3 for 2.1/2.2,
    /// `plan/containerd.rs`), 2 for a distribution's 1.x package (containerd 2.x reads every
    /// one of them; 1.x only 2).
    pub containerd_config_linux: u32,
    /// The same for Windows nodes, which always run `versions.containerd`.
    pub containerd_config_windows: u32,
    /// containerd's configuration file per OS (`plan/containerd.rs`), what the recipes
    /// write to `/etc/containerd/config.toml` and `C:\Program Files\containerd\config.toml`.
    pub containerd_config: ContainerdConfigEff,
}

/// `runtime.containerd_config`: the file's text for Linux and for Windows nodes.
#[derive(Debug, Clone, Serialize)]
pub struct ContainerdConfigEff {
    pub linux: String,
    pub windows: String,
}

/// `versions`: component versions (the plan's, else kwin's pins).
#[derive(Debug, Clone, Serialize)]
pub struct VersionsEff {
    pub kubernetes: String,
    pub containerd: String,
    pub runc: String,
    pub flannel: String,
    pub calico: String,
    pub cni_plugins: String,
    pub crictl: Option<String>,
    pub cri_dockerd: String,
}

/// `proxy`: HTTP(S) proxy; `enabled` is false without `[proxy]`.
#[derive(Debug, Clone, Serialize)]
pub struct ProxyEff {
    pub enabled: bool,
    /// The URLs as the plan writes them (never with credentials).
    pub http: Option<String>,
    pub https: Option<String>,
    /// The plan's list plus localhost, the pod and service CIDRs, the cluster domain, every
    /// host's address and node IP (every control plane's among them) and the control-plane
    /// endpoint's host.
    pub no_proxy: Vec<String>,
    /// Whether the plan names proxy credentials (`credentials_env` / `credentials_file`).
    pub credentials: bool,
    /// With credentials: `http` / `https` with `user:password@` in them (percent-encoded). A
    /// secret: recipes write it only to `env_file`, mode 0600.
    #[serde(serialize_with = "exposed")]
    pub http_auth: Option<Secret>,
    #[serde(serialize_with = "exposed")]
    pub https_auth: Option<Secret>,
    /// The root-only environment file for the URLs with credentials (`/etc/kwin/proxy.env`).
    pub env_file: String,
}

/// `artifacts`: where downloads come from. With a mirror every base is `<mirror>/<site>`.
#[derive(Debug, Clone, Serialize)]
pub struct ArtifactsEff {
    pub mirror: Option<String>,
    /// https://github.com
    pub github: String,
    /// https://raw.githubusercontent.com
    pub github_raw: String,
    /// https://dl.k8s.io
    pub dl_k8s: String,
    /// https://pkgs.k8s.io
    pub pkgs_k8s: String,
    /// SHA-256 checksums by artifact file name (the plan's overrides).
    pub sha256: BTreeMap<String, String>,
    /// Container registry mirrors by upstream registry host (`artifacts.registry_mirrors`),
    /// each a list of endpoint URLs in order.
    pub registry_mirrors: BTreeMap<String, Vec<String>>,
}

/// `windows` (with `[cluster]`): [`defaults::windows`], and the support matrix's Windows
/// Server releases as this cluster sees them.
#[derive(Debug, Clone, Serialize)]
pub struct WindowsEff {
    pub cni_bin_dir: &'static str,
    pub cni_conf_dir: &'static str,
    pub host_process_image: &'static str,
    pub flannel_cni_plugin: &'static str,
    pub sdn_cni: &'static str,
    /// Every Windows Server release of the support matrix with its verdict for this plan's
    /// pod network (`support::windows_server_verdict`): what windows-worker's `windows-build`
    /// step compares each host's probed build with.
    pub server_releases: Vec<WindowsServerEff>,
}

/// A Windows Server release of the support matrix for the `hotfix` module's `releases`:
/// `build` (`10.0.26100`), `name` (`2025`); `refuse` or `warn`: what is wrong with a node
/// that runs it in this cluster and the fix, in the words validation gives for a
/// `node.kubernetes.io/windows-build` label (neither: supported).
#[derive(Debug, Clone, Serialize)]
pub struct WindowsServerEff {
    pub build: String,
    pub name: String,
    pub refuse: Option<String>,
    pub warn: Option<String>,
}

/// `var`: the plan's variables that have a value. Serializes as the map of values (what
/// templates see); `Debug` names the variables only, so a sensitive value never shows.
#[derive(Clone, Default, Serialize)]
#[serde(transparent)]
pub struct VarsEff(pub BTreeMap<String, VarValue>);

impl std::fmt::Debug for VarsEff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// `[upgrade]` with defaults: the template context's `upgrade`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct UpgradeEff {
    /// Workers drained and upgraded at once (a `serial` recipe's batch size).
    pub max_unavailable: usize,
    /// `kubectl drain --timeout` per node, seconds.
    pub drain_timeout: u64,
    pub force_drain: bool,
}

impl UpgradeEff {
    /// `[upgrade]` with kwin's defaults where it says nothing.
    pub fn from_upgrade(u: &super::Upgrade) -> UpgradeEff {
        use defaults::upgrade as d;
        UpgradeEff {
            max_unavailable: u.max_unavailable.unwrap_or(d::MAX_UNAVAILABLE).max(1),
            drain_timeout: u.drain_timeout.unwrap_or(d::DRAIN_TIMEOUT_SECS),
            force_drain: u.force_drain.unwrap_or(d::FORCE_DRAIN),
        }
    }
}

/// `[settings]` with defaults: the executor's knobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SettingsEff {
    pub parallelism: usize,
    pub step_timeout_secs: u64,
    pub retries: u32,
    pub retry_delay_secs: u64,
    /// How long a first connection keeps trying a host that does not answer yet.
    pub wait_for_hosts_secs: u64,
    pub allow_reboot: bool,
    /// Bytes of step output one run keeps, all hosts together.
    pub output_budget_bytes: u64,
    /// Old runs whose logs and journals are kept.
    pub keep_runs: usize,
    /// Bytes `.kwin/logs` and `.kwin/runs` may hold together.
    pub logs_limit_bytes: u64,
}

/// `host` (and each item of `hosts`).
#[derive(Debug, Clone, Serialize)]
pub struct HostEff {
    pub name: String,
    pub address: String,
    /// "linux" | "windows".
    pub os: &'static str,
    /// "control-plane" | "worker" | none.
    pub role: Option<&'static str>,
    /// The address the node advertises: the plan's node_ip, else the address if it is an IP.
    pub node_ip: Option<String>,
    pub interface: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<String>,
    pub is_control_plane: bool,
    pub is_first_control_plane: bool,
    /// `--limit` chose the host (every host without `--limit`): what a step acting for
    /// other nodes (reset's drain) acts on.
    pub chosen: bool,
    /// CRI endpoint of the host's runtime (with `[cluster]`), e.g.
    /// `unix:///run/containerd/containerd.sock` or `npipe:////./pipe/containerd-containerd`.
    pub cri_socket: Option<String>,
}

/// `first_control_plane`.
#[derive(Debug, Clone, Serialize)]
pub struct FirstControlPlaneEff {
    pub name: String,
    pub address: String,
    pub node_ip: Option<String>,
}

/// The versions components follow (none without `[cluster]`): Kubernetes for kubelet,
/// kube-proxy and kubeadm, the flannel and containerd releases for flanneld and containerd.
/// The flag table (`plan/versions.toml`) is keyed by them.
#[derive(Debug, Clone, Default)]
pub struct ComponentVersions {
    pub kubernetes: Option<String>,
    pub flannel: Option<String>,
    pub containerd: Option<String>,
}

impl ComponentVersions {
    /// The version `component` runs at in this plan.
    pub fn of(&self, component: &str) -> Result<String, String> {
        let by = versions::versioned_by(component)
            .ok_or_else(|| format!("unknown component `{component}` in kwin's flag table"))?;
        let v = match by {
            "kubernetes" => &self.kubernetes,
            "flannel" => &self.flannel,
            "containerd" => &self.containerd,
            other => {
                return Err(format!(
                    "versions.toml versions {component} by `{other}`, which kwin does not know (a bug in kwin)"
                ))
            }
        };
        v.clone()
            .ok_or_else(|| format!("{component} flags need the plan's [cluster] (its versions)"))
    }
}

fn exposed<S: Serializer>(v: &Option<Secret>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(secret) => s.serialize_some(secret.expose()),
        None => s.serialize_none(),
    }
}

/// A value validation accepted but this module cannot use: a bug in kwin.
fn internal(what: &str, why: impl std::fmt::Display) -> Diagnostic {
    Diagnostic::error(
        "internal",
        format!("{what}: {why} (validation accepted it: this is a bug in kwin)"),
    )
}

impl SettingsEff {
    /// `[settings]` with kwin's defaults where it says nothing.
    pub fn from_settings(s: &super::Settings) -> SettingsEff {
        use defaults::settings as d;
        SettingsEff {
            parallelism: s.parallelism.unwrap_or(d::PARALLELISM),
            step_timeout_secs: s.step_timeout.unwrap_or(d::STEP_TIMEOUT_SECS),
            retries: s.retries.unwrap_or(d::RETRIES),
            retry_delay_secs: s.retry_delay.unwrap_or(d::RETRY_DELAY_SECS),
            wait_for_hosts_secs: s.wait_for_hosts.unwrap_or(d::WAIT_FOR_HOSTS_SECS),
            allow_reboot: s.allow_reboot.unwrap_or(d::ALLOW_REBOOT),
            output_budget_bytes: s
                .output_budget_mib
                .unwrap_or(d::OUTPUT_BUDGET_MIB)
                .saturating_mul(1 << 20),
            keep_runs: s.keep_runs.unwrap_or(d::KEEP_RUNS),
            logs_limit_bytes: s
                .logs_limit_mib
                .unwrap_or(d::LOGS_LIMIT_MIB)
                .saturating_mul(1 << 20),
        }
    }

    pub fn step_timeout(&self) -> Duration {
        Duration::from_secs(self.step_timeout_secs)
    }

    pub fn retry_delay(&self) -> Duration {
        Duration::from_secs(self.retry_delay_secs)
    }

    pub fn wait_for_hosts(&self) -> Duration {
        Duration::from_secs(self.wait_for_hosts_secs)
    }
}

impl Default for SettingsEff {
    /// The settings of a plan without `[settings]`.
    fn default() -> Self {
        SettingsEff::from_settings(&super::Settings::default())
    }
}

/// The node IP of `h`: its `node_ip`, else its address when that is an IP address.
pub fn node_ip(h: &ResolvedHost) -> Option<String> {
    h.node_ip
        .clone()
        .or_else(|| h.address.parse::<IpAddr>().ok().map(|_| h.address.clone()))
}

/// `addr:port`, with an IPv6 address in brackets.
pub fn host_port(addr: &str, port: u16) -> String {
    if addr.contains(':') {
        format!("[{addr}]:{port}")
    } else {
        format!("{addr}:{port}")
    }
}

fn role_str(r: Option<Role>) -> Option<&'static str> {
    r.map(|r| match r {
        Role::ControlPlane => "control-plane",
        Role::Worker => "worker",
    })
}

fn os_str(os: Os) -> &'static str {
    match os {
        Os::Linux => "linux",
        Os::Windows => "windows",
    }
}

fn runtime_str(k: RuntimeKind) -> &'static str {
    match k {
        RuntimeKind::Containerd => "containerd",
        RuntimeKind::Docker => "docker",
    }
}

fn backend_str(b: CniBackend) -> &'static str {
    match b {
        CniBackend::Vxlan => "vxlan",
        CniBackend::HostGw => "host-gw",
        CniBackend::Ipip => "ipip",
        CniBackend::VxlanCrossSubnet => "vxlan-cross-subnet",
    }
}

fn config_version(containerd: &str) -> u32 {
    super::containerd::config_version(containerd)
}

/// The CRI endpoint of a runtime on an OS.
fn cri_socket(os: Os, runtime: RuntimeKind) -> &'static str {
    match (os, runtime) {
        (Os::Linux, RuntimeKind::Containerd) => "unix:///run/containerd/containerd.sock",
        (Os::Linux, RuntimeKind::Docker) => "unix:///run/cri-dockerd.sock",
        (Os::Windows, RuntimeKind::Containerd) => "npipe:////./pipe/containerd-containerd",
        (Os::Windows, RuntimeKind::Docker) => "npipe:////./pipe/cri-dockerd",
    }
}

fn push_unique(v: &mut Vec<String>, s: &str) {
    if !s.is_empty() && !v.iter().any(|x| x == s) {
        v.push(s.to_string());
    }
}

impl Effective {
    /// The effective values of `plan`, which validated without errors. Errors: `internal`
    /// (validation let through what this cannot use) and `proxy-credentials` (they cannot be
    /// read).
    pub fn build(plan: &LoadedPlan) -> Result<Effective, Diagnostics> {
        let mut diags = Diagnostics::default();
        let file = &plan.file;
        let first_cp = plan
            .hosts
            .iter()
            .position(|h| h.role == Some(Role::ControlPlane));
        let with_cluster = file.cluster.is_some();
        let hosts: Vec<HostEff> = plan
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| HostEff {
                name: h.name.clone(),
                address: h.address.clone(),
                os: os_str(h.os),
                role: role_str(h.role),
                node_ip: node_ip(h),
                interface: h.interface.clone(),
                labels: h.labels.clone(),
                taints: h.taints.clone(),
                is_control_plane: h.role == Some(Role::ControlPlane),
                is_first_control_plane: Some(i) == first_cp,
                chosen: plan.chosen(&h.name),
                cri_socket: with_cluster.then(|| {
                    let runtime = match h.os {
                        Os::Linux => file.runtime.linux,
                        Os::Windows => file.runtime.windows,
                    };
                    cri_socket(h.os, runtime).to_string()
                }),
            })
            .collect();
        let first_control_plane = first_cp.map(|i| FirstControlPlaneEff {
            name: hosts[i].name.clone(),
            address: hosts[i].address.clone(),
            node_ip: hosts[i].node_ip.clone(),
        });
        let mut eff = Effective {
            cluster: None,
            cni: None,
            runtime: None,
            versions: None,
            proxy: None,
            artifacts: None,
            windows: None,
            upgrade: None,
            settings: SettingsEff::from_settings(&file.settings),
            hosts,
            first_control_plane,
            vars: VarsEff(plan.vars.clone()),
            first_cp,
            secrets: Vec::new(),
        };
        // The values of variables marked `sensitive` are secrets.
        eff.secrets = plan.sensitive_values();

        let Some(c) = &file.cluster else {
            // Nothing renders the proxy credentials without [cluster]; the scrubber still
            // learns them if they can be read.
            if let Some((src, _)) = plan.proxy_credentials() {
                if let Ok(creds) = super::proxy::ProxyCredentials::read(&src) {
                    eff.secrets.extend(creds.secrets());
                }
            }
            return Ok(eff);
        };

        let cgroup_v1_allowed = c.allow_cgroup_v1.unwrap_or(defaults::ALLOW_CGROUP_V1);
        let net = ClusterNet::from_cluster(c).map_err(|errors| {
            Diagnostics(
                errors
                    .into_iter()
                    .map(|e| internal(&format!("cluster.{}", e.field), e.message))
                    .collect(),
            )
        })?;
        let version = syntax::version(&c.kubernetes_version, false)
            .map_err(|e| Diagnostics(vec![internal("cluster.kubernetes_version", e)]))?;
        let kubernetes_version = c.kubernetes_version.clone();
        let (endpoint, api_server_host, api_server_port) =
            match (&c.control_plane_endpoint, &eff.first_control_plane) {
                (Some(ep), _) => match syntax::endpoint(ep) {
                    Ok((host, port)) => {
                        (ep.clone(), host, port.unwrap_or(defaults::API_SERVER_PORT))
                    }
                    Err(e) => {
                        diags.push(internal("cluster.control_plane_endpoint", e));
                        (String::new(), String::new(), defaults::API_SERVER_PORT)
                    }
                },
                (None, Some(f)) => {
                    let host = f.node_ip.clone().unwrap_or_else(|| f.address.clone());
                    (
                        host_port(&host, defaults::API_SERVER_PORT),
                        host,
                        defaults::API_SERVER_PORT,
                    )
                }
                (None, None) => {
                    diags.push(internal("cluster", "there is no control plane"));
                    (String::new(), String::new(), defaults::API_SERVER_PORT)
                }
            };
        let count = |os: Os, role: Role| {
            plan.hosts
                .iter()
                .filter(|h| h.os == os && h.role == Some(role))
                .count()
        };
        let windows_workers = count(Os::Windows, Role::Worker);
        let cluster = ClusterEff {
            name: c.name.clone(),
            minor: format!("{}.{}", version.major, version.minor),
            minor_version: u32::try_from(version.minor).unwrap_or(u32::MAX),
            kubernetes_version,
            pod_cidr: net.pod_cidr.to_string(),
            service_cidr: net.service_cidr.to_string(),
            dns_service_ip: net.dns_service_ip.to_string(),
            max_pods_per_node: net.max_pods_per_node,
            control_plane_endpoint: endpoint,
            api_server_host,
            api_server_port,
            api_server_sans: c.api_server_sans.clone(),
            dns_domain: net.dns_domain.clone(),
            verify: c.verify.unwrap_or(defaults::VERIFY),
            verify_egress_url: c
                .verify_egress_url
                .clone()
                .unwrap_or_else(|| defaults::VERIFY_EGRESS_URL.to_string()),
            windows_pending_reboot: match c.windows_pending_reboot.unwrap_or_default() {
                PendingReboot::Report => "report".into(),
                PendingReboot::Drain => "drain".into(),
            },
            control_planes: plan
                .hosts
                .iter()
                .filter(|h| h.role == Some(Role::ControlPlane))
                .count(),
            windows_workers,
            linux_workers: count(Os::Linux, Role::Worker),
            has_windows: windows_workers > 0,
            token_ttl: defaults::TOKEN_TTL.into(),
            windows_taint: c.windows_taint.unwrap_or(defaults::WINDOWS_TAINT),
            windows_runtime_classes: c
                .windows_runtime_classes
                .unwrap_or(defaults::WINDOWS_RUNTIME_CLASSES),
            allow_cgroup_v1: c.allow_cgroup_v1.unwrap_or(defaults::ALLOW_CGROUP_V1),
            kubelet_fails_cgroup_v1: support::kubelet_refuses_cgroup_v1(&versions::Version(vec![
                version.major,
                version.minor,
            ])),
            preflight_ignore: Vec::new(),
            kube_proxy_conntrack_max_per_core: c.kube_proxy_conntrack_max_per_core,
            kubelet_cgroup_driver: match file.runtime.cgroup_driver {
                Some(CgroupDriver::Cgroupfs) => "cgroupfs".into(),
                Some(CgroupDriver::Systemd) => "systemd".into(),
                None => defaults::CGROUP_DRIVER.into(),
            },
            linux_distributions: versions::table()
                .matrix
                .linux
                .iter()
                .map(|d| DistroEff {
                    id: d.id.clone(),
                    version: d.version.clone(),
                    name: d.name.clone(),
                })
                .collect(),
        };

        let mut cluster = cluster;
        if cgroup_v1_allowed && cluster.kubelet_fails_cgroup_v1 {
            cluster.preflight_ignore = vec!["SystemVerification".to_string()];
        }
        let cni = match &file.cni {
            Some(n) => {
                let s = CniSettings::from_cni(n);
                CniEff {
                    plugin: match s.plugin {
                        CniPlugin::Flannel => "flannel",
                        CniPlugin::Calico => "calico",
                    }
                    .into(),
                    backend: backend_str(s.backend).into(),
                    vni: s.vni,
                    port: s.port,
                    manifest_file: n
                        .manifest_file
                        .as_deref()
                        .map(|p| plan.resolve_path(p).display().to_string()),
                }
            }
            None => {
                diags.push(internal("cni", "[cluster] has no [cni]"));
                return Err(diags);
            }
        };

        let v = &file.versions;
        let pins = support::pins();
        let p = |x: &Option<String>, pin: &str| x.clone().unwrap_or_else(|| pin.to_string());
        let versions = VersionsEff {
            kubernetes: format!("v{}", cluster.kubernetes_version),
            containerd: p(&v.containerd, &pins.containerd),
            runc: p(&v.runc, &pins.runc),
            flannel: p(&v.flannel, &pins.flannel),
            calico: p(&v.calico, &pins.calico),
            cni_plugins: p(&v.cni_plugins, &pins.cni_plugins),
            crictl: v.crictl.clone(),
            cri_dockerd: p(&v.cri_dockerd, &pins.cri_dockerd),
        };

        let r = &file.runtime;
        let minor = versions::Version(vec![version.major, version.minor]);
        let source = r
            .containerd_source
            .unwrap_or(if support::package_containerd_fits(&minor) {
                ContainerdSource::Package
            } else {
                ContainerdSource::Release
            });
        let pinned_config = config_version(&versions.containerd);
        let runtime = RuntimeEff {
            linux: runtime_str(r.linux).into(),
            windows: runtime_str(r.windows).into(),
            cri_dockerd: r.cri_dockerd,
            containerd_source: match source {
                ContainerdSource::Package => "package".into(),
                ContainerdSource::Release => "release".into(),
            },
            sandbox_image: r
                .sandbox_image
                .clone()
                .unwrap_or_else(|| versions::pause_image(&cluster.kubernetes_version)),
            cgroup_driver: match r.cgroup_driver {
                Some(CgroupDriver::Systemd) => "systemd".into(),
                Some(CgroupDriver::Cgroupfs) => "cgroupfs".into(),
                None => defaults::CGROUP_DRIVER.into(),
            },
            restrict_oom_score_adj: r.restrict_oom_score_adj,
            containerd_config_linux: match source {
                ContainerdSource::Package => 2,
                ContainerdSource::Release => pinned_config,
            },
            containerd_config_windows: pinned_config,
            containerd_config: ContainerdConfigEff {
                linux: String::new(),
                windows: String::new(),
            },
        };
        let render = |node, version| {
            super::containerd::render(
                node,
                &super::containerd::Inputs {
                    version,
                    sandbox_image: &runtime.sandbox_image,
                    cgroup_driver: &runtime.cgroup_driver,
                    restrict_oom_score_adj: runtime.restrict_oom_score_adj,
                    windows_cni_bin_dir: defaults::windows::CNI_BIN_DIR,
                    windows_cni_conf_dir: defaults::windows::CNI_CONF_DIR,
                },
            )
        };
        let containerd_config = ContainerdConfigEff {
            linux: render(
                super::containerd::Node::Linux,
                runtime.containerd_config_linux,
            ),
            windows: render(
                super::containerd::Node::Windows,
                runtime.containerd_config_windows,
            ),
        };
        let runtime = RuntimeEff {
            containerd_config,
            ..runtime
        };

        let proxy = match &file.proxy {
            Some(px) => {
                let mut no_proxy = Vec::new();
                for s in &px.no_proxy {
                    push_unique(&mut no_proxy, s);
                }
                for s in [
                    "localhost",
                    "127.0.0.1",
                    &cluster.pod_cidr,
                    &cluster.service_cidr,
                    ".svc",
                    &format!(".{}", cluster.dns_domain),
                ] {
                    push_unique(&mut no_proxy, s);
                }
                for h in &plan.hosts {
                    push_unique(&mut no_proxy, &h.address);
                    if let Some(ip) = &h.node_ip {
                        push_unique(&mut no_proxy, ip);
                    }
                }
                // The control-plane endpoint's host (a load balancer's name or address in an
                // HA plan): kubeadm join, the kubelet and, on Windows, every HostProcess pod
                // (its environment block is CreateEnvironmentBlock's for the container's token,
                // the machine variables among them: hcsshim internal/jobcontainers/env.go,
                // defaultEnvBlock) talk to the API server through it, never through the
                // proxy. After the hosts,
                // so a plan whose endpoint is the first control plane's address keeps its list.
                push_unique(&mut no_proxy, &cluster.api_server_host);
                // Read like every secret: from the environment or a file the plan names.
                let creds = plan.proxy_credentials().and_then(|(src, key)| {
                    super::proxy::ProxyCredentials::read(&src)
                        .map_err(|e| {
                            diags.push(
                                Diagnostic::error(
                                    "proxy-credentials",
                                    format!("cannot read the proxy credentials: {e}"),
                                )
                                .at(plan.loc(key)),
                            )
                        })
                        .ok()
                });
                let auth = |u: &Option<String>| {
                    u.as_ref()
                        .and_then(|u| creds.as_ref().map(|c| c.url_with(u)))
                };
                let proxy = ProxyEff {
                    enabled: px.http.is_some() || px.https.is_some(),
                    http: px.http.clone(),
                    https: px.https.clone(),
                    no_proxy,
                    credentials: creds.is_some(),
                    http_auth: auth(&px.http),
                    https_auth: auth(&px.https),
                    env_file: super::proxy::ENV_FILE.to_string(),
                };
                if let Some(c) = &creds {
                    eff.secrets.extend(c.secrets());
                }
                proxy
            }
            None => ProxyEff {
                enabled: false,
                http: None,
                https: None,
                no_proxy: Vec::new(),
                credentials: false,
                http_auth: None,
                https_auth: None,
                env_file: super::proxy::ENV_FILE.to_string(),
            },
        };

        let a = &file.artifacts;
        let base = |site: &str| match &a.mirror {
            Some(m) => format!("{}/{site}", m.trim_end_matches('/')),
            None => format!("https://{site}"),
        };
        let artifacts = ArtifactsEff {
            mirror: a.mirror.clone(),
            github: base("github.com"),
            github_raw: base("raw.githubusercontent.com"),
            dl_k8s: base("dl.k8s.io"),
            pkgs_k8s: base("pkgs.k8s.io"),
            sha256: a.sha256.clone(),
            registry_mirrors: a
                .registry_mirrors
                .iter()
                .map(|(k, v)| {
                    let urls = v
                        .to_vec()
                        .iter()
                        .map(|u| u.trim_end_matches('/').to_string())
                        .collect();
                    (k.clone(), urls)
                })
                .collect(),
        };

        if diags.has_errors() {
            return Err(diags);
        }
        eff.cluster = Some(cluster);
        eff.cni = Some(cni);
        eff.runtime = Some(runtime);
        eff.versions = Some(versions);
        eff.proxy = Some(proxy);
        eff.artifacts = Some(artifacts);
        eff.windows = Some(WindowsEff {
            cni_bin_dir: defaults::windows::CNI_BIN_DIR,
            cni_conf_dir: defaults::windows::CNI_CONF_DIR,
            host_process_image: defaults::windows::HOST_PROCESS_IMAGE,
            flannel_cni_plugin: defaults::windows::FLANNEL_CNI_PLUGIN,
            sdn_cni: defaults::windows::SDN_CNI,
            server_releases: {
                let calico = file.cni.as_ref().map(|c| c.plugin) == Some(CniPlugin::Calico);
                versions::table()
                    .matrix
                    .windows_server
                    .iter()
                    .map(|w| {
                        let verdict = support::windows_server_verdict(w, calico)
                            .map(|v| (v.refused, format!("{}: {}", v.what, v.fix)));
                        WindowsServerEff {
                            build: w.build.clone(),
                            name: w.name.clone(),
                            refuse: verdict
                                .as_ref()
                                .filter(|(refused, _)| *refused)
                                .map(|(_, t)| t.clone()),
                            warn: verdict.filter(|(refused, _)| !*refused).map(|(_, t)| t),
                        }
                    })
                    .collect()
            },
        });
        eff.upgrade = Some(UpgradeEff::from_upgrade(&file.upgrade));
        Ok(eff)
    }

    /// The versions the flag table is keyed by, for `flag()` / `flag_supported()`.
    pub fn component_versions(&self) -> ComponentVersions {
        match (&self.cluster, &self.versions) {
            (Some(c), Some(v)) => ComponentVersions {
                kubernetes: Some(c.kubernetes_version.clone()),
                flannel: Some(v.flannel.clone()),
                containerd: Some(v.containerd.clone()),
            },
            _ => ComponentVersions::default(),
        }
    }

    /// Secrets the plan names beyond connections (the proxy credentials, in every form they
    /// take in rendered files, and the values of variables marked `sensitive`), for the run's
    /// scrubber.
    pub fn secrets(&self) -> &[Secret] {
        &self.secrets
    }

    /// Index in `plan.hosts` of the first control plane (the host that runs `kubeadm init`).
    pub fn first_control_plane_index(&self) -> Option<usize> {
        self.first_cp
    }

    /// The host that runs `kubeadm init`.
    pub fn first_control_plane<'p>(&self, plan: &'p LoadedPlan) -> Option<&'p ResolvedHost> {
        self.first_cp.and_then(|i| plan.hosts.get(i))
    }

    /// The names and addresses the API server's certificate holds, as kubeadm makes it: each
    /// control plane's node name and advertise address (its node IP, else its address),
    /// `kubernetes`, `kubernetes.default`, `kubernetes.default.svc`,
    /// `kubernetes.default.svc.<dns_domain>`, the kubernetes Service's IP (the first address
    /// of the service CIDR), the host of `control_plane_endpoint`, and `api_server_sans`
    /// (kubernetes/kubernetes `cmd/kubeadm/app/util/pkiutil/pki_helpers.go`,
    /// `GetAPIServerAltNames`, v1.37.2). Empty without `[cluster]`.
    pub fn api_server_cert_names(&self) -> Vec<String> {
        let Some(c) = &self.cluster else {
            return Vec::new();
        };
        let mut names: Vec<String> = self
            .hosts
            .iter()
            .filter(|h| h.is_control_plane)
            .flat_map(|h| {
                [
                    h.name.clone(),
                    h.node_ip.clone().unwrap_or_else(|| h.address.clone()),
                ]
            })
            .collect();
        names.extend(
            ["kubernetes", "kubernetes.default", "kubernetes.default.svc"].map(String::from),
        );
        names.push(format!("kubernetes.default.svc.{}", c.dns_domain));
        if let Ok(net) = c.service_cidr.parse::<ipnet::Ipv4Net>() {
            names.push(super::net::nth(&net, 1).to_string());
        }
        names.push(c.api_server_host.clone());
        names.extend(c.api_server_sans.iter().cloned());
        names
    }

    /// Whether the API server's certificate names `host` ([`Effective::api_server_cert_names`];
    /// a `*.` wildcard stands for one label).
    pub fn api_server_cert_covers(&self, host: &str) -> bool {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        self.api_server_cert_names().iter().any(|n| {
            let n = n.to_ascii_lowercase();
            match n.strip_prefix("*.") {
                Some(rest) => host
                    .split_once('.')
                    .is_some_and(|(first, tail)| !first.is_empty() && tail == rest),
                None => match (n.parse::<IpAddr>(), host.parse::<IpAddr>()) {
                    (Ok(a), Ok(b)) => a == b,
                    _ => n == host,
                },
            }
        })
    }

    /// Whether any Linux host is a worker (else the verify workloads run on the control
    /// plane).
    pub fn has_linux_workers(&self) -> bool {
        self.cluster.as_ref().is_some_and(|c| c.linux_workers > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> LoadedPlan {
        crate::plan::load_str(std::path::Path::new("/lab/plan.toml"), text).expect("plan loads")
    }

    const CLUSTER: &str = r#"
[cluster]
name = "lab"
kubernetes_version = "1.31.4"
service_cidr = "10.100.0.0/16"
[cni]
plugin = "flannel"
[[hosts]]
name = "cp1"
address = "192.168.1.10"
os = "linux"
role = "control-plane"
transport = "local"
[[hosts]]
name = "w1"
address = "w1.lab"
os = "linux"
role = "worker"
transport = "local"
"#;

    #[test]
    fn defaults_fill_the_gaps_and_the_dns_address_follows_the_service_cidr() {
        let e = Effective::build(&plan(CLUSTER)).expect("effective");
        let c = e.cluster.as_ref().expect("cluster");
        assert_eq!(c.dns_service_ip, "10.100.0.10");
        assert_eq!(c.pod_cidr, defaults::POD_CIDR);
        assert_eq!(c.minor, "1.31");
        assert_eq!(c.minor_version, 31);
        assert_eq!(c.control_plane_endpoint, "192.168.1.10:6443");
        assert_eq!(
            (c.api_server_host.as_str(), c.api_server_port),
            ("192.168.1.10", 6443)
        );
        assert_eq!(c.linux_workers, 1);
        assert!(e.has_linux_workers());
        assert_eq!(e.cni.as_ref().map(|n| n.vni), Some(defaults::VXLAN_VNI));
        assert_eq!(e.first_control_plane_index(), Some(0));
        assert_eq!(e.hosts[1].node_ip, None, "a DNS name is no node IP");
        assert_eq!(e.settings, SettingsEff::default());
        assert_eq!(e.settings.retries, defaults::settings::RETRIES);
        assert!(e.secrets().is_empty());
    }

    /// What the API server's certificate names, as kubeadm makes it (pki_helpers.go,
    /// GetAPIServerAltNames), and `api_server_sans` with a wildcard.
    #[test]
    fn the_api_server_certificate_names_what_kubeadm_and_the_plan_give_it() {
        let e = Effective::build(&plan(CLUSTER)).expect("effective");
        for covered in [
            "cp1",
            "192.168.1.10",
            "kubernetes.default.svc.cluster.local",
            "10.100.0.1",
        ] {
            assert!(e.api_server_cert_covers(covered), "{covered}");
        }
        for not in ["w1", "w1.lab", "203.0.113.10", "api.lab.example.com"] {
            assert!(!e.api_server_cert_covers(not), "{not}");
        }
        let text = CLUSTER.replace(
            "service_cidr = \"10.100.0.0/16\"",
            "api_server_sans = [\"203.0.113.10\", \"*.lab.example.com\"]",
        );
        let e = Effective::build(&plan(&text)).expect("effective");
        assert!(e.api_server_cert_covers("203.0.113.10"));
        assert!(e.api_server_cert_covers("api.lab.example.com"));
        assert!(
            !e.api_server_cert_covers("lab.example.com"),
            "a wildcard is one label"
        );
        assert!(
            !e.api_server_cert_covers("a.b.lab.example.com"),
            "a wildcard is one label"
        );
    }

    #[test]
    fn a_given_endpoint_is_split_as_validation_reads_it() {
        let text = CLUSTER.replace(
            "service_cidr = \"10.100.0.0/16\"",
            "control_plane_endpoint = \"[fd00::1]:8443\"",
        );
        let e = Effective::build(&plan(&text)).expect("effective");
        let c = e.cluster.expect("cluster");
        assert_eq!(c.control_plane_endpoint, "[fd00::1]:8443");
        assert_eq!(
            (c.api_server_host.as_str(), c.api_server_port),
            ("fd00::1", 8443)
        );
        let text = CLUSTER.replace(
            "service_cidr = \"10.100.0.0/16\"",
            "control_plane_endpoint = \"api.lab\"",
        );
        let c = Effective::build(&plan(&text)).expect("effective").cluster;
        let c = c.expect("cluster");
        assert_eq!(
            (c.api_server_host.as_str(), c.api_server_port),
            ("api.lab", 6443)
        );
    }

    #[test]
    fn no_proxy_names_the_endpoint_host_and_every_control_plane() {
        let text = format!(
            "{}[[hosts]]\nname = \"cp2\"\naddress = \"192.168.1.11\"\nnode_ip = \"10.0.0.11\"\nos = \"linux\"\nrole = \"control-plane\"\ntransport = \"local\"\n\
             [proxy]\nhttps = \"http://proxy:3128\"\nno_proxy = [\".corp\"]\n",
            CLUSTER.replace(
                "service_cidr = \"10.100.0.0/16\"",
                "control_plane_endpoint = \"api.lab:6443\"",
            )
        );
        let e = Effective::build(&plan(&text)).expect("effective");
        let px = e.proxy.as_ref().expect("proxy");
        for want in [
            ".corp",
            "api.lab",
            "192.168.1.10",
            "192.168.1.11",
            "10.0.0.11",
        ] {
            assert!(
                px.no_proxy.iter().any(|x| x == want),
                "{want} missing from {:?}",
                px.no_proxy
            );
        }
        // An endpoint that is a host's address is named once.
        let text = format!("{CLUSTER}[proxy]\nhttps = \"http://proxy:3128\"\n");
        let e = Effective::build(&plan(&text)).expect("effective");
        let px = e.proxy.as_ref().expect("proxy");
        assert_eq!(
            px.no_proxy.iter().filter(|x| *x == "192.168.1.10").count(),
            1,
            "{:?}",
            px.no_proxy
        );
    }

    #[test]
    fn what_validation_refuses_is_an_internal_error_not_a_new_code() {
        let text = CLUSTER.replace("10.100.0.0/16", "nope");
        let d = Effective::build(&plan(&text)).expect_err("bad CIDR");
        assert!(d.0.iter().all(|d| d.code == "internal"), "{d}");
        let text = CLUSTER.replace("[cni]\nplugin = \"flannel\"\n", "");
        let d = Effective::build(&plan(&text)).expect_err("no cni");
        assert!(d.0.iter().all(|d| d.code == "internal"), "{d}");
    }

    #[test]
    fn proxy_credentials_are_read_once_and_never_debug_printed() {
        let dir = tempfile::tempdir().expect("tmp");
        let creds = dir.path().join("creds");
        std::fs::write(&creds, "alice:s3cret-pass\n").expect("write");
        let text = format!(
            "{CLUSTER}[proxy]\nhttp = \"http://proxy:3128\"\ncredentials_file = \"{}\"\n",
            creds.display()
        );
        let e = Effective::build(&plan(&text)).expect("effective");
        let px = e.proxy.as_ref().expect("proxy");
        assert_eq!(
            px.http_auth.as_ref().map(Secret::expose),
            Some("http://alice:s3cret-pass@proxy:3128")
        );
        assert!(!format!("{e:?}").contains("s3cret-pass"));
        let json = serde_json::to_string(&e).expect("json");
        assert!(
            json.contains("http://alice:s3cret-pass@proxy:3128"),
            "{json}"
        );
        assert!(e.secrets().iter().any(|s| s.expose() == "s3cret-pass"));
        std::fs::remove_file(&creds).expect("rm");
        let d = Effective::build(&plan(&text)).expect_err("unreadable");
        assert_eq!(d.0[0].code, "proxy-credentials");
    }

    #[test]
    fn without_a_cluster_only_hosts_and_settings_are_effective() {
        let e = Effective::build(&plan(
            "[settings]\nretries = 7\n[[hosts]]\nname = \"a\"\nos = \"linux\"\ntransport = \"local\"\n",
        ))
        .expect("effective");
        assert!(e.cluster.is_none() && e.cni.is_none() && e.proxy.is_none());
        assert_eq!(e.settings.retries, 7);
        assert_eq!(e.hosts[0].cri_socket, None);
        assert!(e.first_control_plane.is_none());
    }

    #[test]
    fn variables_reach_the_context_and_sensitive_ones_the_scrubber_only() {
        let text = format!(
            "{CLUSTER}\n[variables.token]\ntype = \"string\"\ndefault = \"s3cret-token-value\"\nsensitive = true\n\
             [variables.site]\ntype = \"string\"\ndefault = \"berlin\"\n"
        );
        let e = Effective::build(&plan(&text)).expect("effective");
        let json = serde_json::to_value(&e).expect("serializes");
        assert_eq!(json["vars"]["token"], "s3cret-token-value");
        assert_eq!(json["vars"]["site"], "berlin");
        let secrets: Vec<&str> = e.secrets().iter().map(|s| s.expose()).collect();
        assert_eq!(secrets, ["s3cret-token-value"]);
        assert!(!format!("{e:?}").contains("s3cret-token-value"));
    }
}
