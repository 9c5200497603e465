//! The template context of recipes and user task params, with every default filled in.
//!
//! [`RecipeContext::from_plan`] is the one place that decides effective values: what the plan
//! says, else kwin's default (pod CIDR, DNS service IP, VXLAN VNI/port, pinned component
//! versions, ...). Shared values are built once; per host only `host` changes, so building the
//! context of 1,000 hosts is linear.
//!
//! Variables (see the structs below for every field):
//! `cluster`, `cni`, `runtime`, `versions`, `proxy`, `artifacts`, `windows` (only with `[cluster]`),
//! `host`, `first_control_plane` (none without a control plane), `hosts` (every host).

use crate::diag::{Diagnostic, Diagnostics};
use crate::plan::versions;
use crate::plan::{CniBackend, CniPlugin, LoadedPlan, Os, ResolvedHost, Role, RuntimeKind};
use crate::template::Value;
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// kwin's defaults where the plan says nothing.
pub mod defaults {
    pub const POD_CIDR: &str = "10.244.0.0/16";
    pub const SERVICE_CIDR: &str = "10.96.0.0/12";
    pub const MAX_PODS_PER_NODE: u32 = 110;
    pub const DNS_DOMAIN: &str = "cluster.local";
    /// The only VXLAN VNI Windows flannel supports.
    pub const VXLAN_VNI: u32 = 4096;
    /// The only VXLAN UDP port Windows supports.
    pub const VXLAN_PORT: u16 = 4789;
    pub const API_SERVER_PORT: u16 = 6443;
    pub const TOKEN_TTL: &str = "2h";
    /// Windows nodes register with `os=windows:NoSchedule`.
    pub const WINDOWS_TAINT: bool = true;
    /// No RuntimeClasses unless the plan asks for them.
    pub const WINDOWS_RUNTIME_CLASSES: bool = false;
    // The sandbox image follows kubeadm per minor: `crate::plan::versions::pause_image`.
}

/// Pinned component versions, written as upstream writes them in release asset names.
pub mod pinned {
    pub const CONTAINERD: &str = "1.7.29";
    pub const RUNC: &str = "1.3.3";
    pub const FLANNEL: &str = "v0.26.7";
    pub const CALICO: &str = "v3.29.7";
    pub const CNI_PLUGINS: &str = "v1.6.2";
    pub const CRI_DOCKERD: &str = "0.3.17";
}

/// `windows`: what Windows nodes of every cluster share, one value for every recipe that names
/// it (the pod network's files on the node, the image the Windows DaemonSets run on).
pub mod windows {
    /// CNI plugin binaries: containerd's `bin_dir`, the CNI plugins' unpack, the flannel and
    /// kube-proxy DaemonSets' scripts, Calico's Installation, reset. The Windows CNIs agree on
    /// it: tigera/operator pkg/render/windows.go `DefaultWindowsCNIDirectories` ("/opt/cni/bin"
    /// on the system drive) and sig-windows-tools hostprocess/flannel/flanneld/
    /// flannel-overlay.yml at 03f99247 (`CNI_BIN_PATH`); projectcalico/calico#6122.
    pub const CNI_BIN_DIR: &str = r"C:\opt\cni\bin";
    /// CNI network configurations: containerd's `conf_dir` (same sources, "/etc/cni/net.d",
    /// `CNI_CONFIG_PATH`).
    pub const CNI_CONF_DIR: &str = r"C:\etc\cni\net.d";
    /// The image of kwin's Windows DaemonSets: Microsoft's empty host-process base image
    /// (microsoft/windows-host-process-containers-base-image README at d7c1101); the
    /// programs they run are release binaries kwin installs on the node.
    pub const HOST_PROCESS_IMAGE: &str =
        "mcr.microsoft.com/oss/kubernetes/windows-host-process-containers-base-image:v1.0.0";
    /// flannel's CNI plugin for Windows (flannel-io/cni-plugin; the version kube-flannel.yml
    /// v0.26.7 runs on Linux).
    pub const FLANNEL_CNI_PLUGIN: &str = "v1.6.2-flannel1";
    /// microsoft/windows-container-networking (sdnoverlay.exe, the delegate flannel's Windows
    /// CNI configuration names).
    pub const SDN_CNI: &str = "v0.3.1";
}

/// `windows` (with `[cluster]`).
#[derive(Debug, Clone, Serialize)]
pub struct WindowsCtx {
    pub cni_bin_dir: &'static str,
    pub cni_conf_dir: &'static str,
    pub host_process_image: &'static str,
    pub flannel_cni_plugin: &'static str,
    pub sdn_cni: &'static str,
}

impl WindowsCtx {
    fn new() -> Self {
        WindowsCtx {
            cni_bin_dir: windows::CNI_BIN_DIR,
            cni_conf_dir: windows::CNI_CONF_DIR,
            host_process_image: windows::HOST_PROCESS_IMAGE,
            flannel_cni_plugin: windows::FLANNEL_CNI_PLUGIN,
            sdn_cni: windows::SDN_CNI,
        }
    }
}

/// `cluster`: effective cluster settings.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterCtx {
    pub name: String,
    /// "1.31.4".
    pub kubernetes_version: String,
    /// "1.31" (package repository, version pins).
    pub minor: String,
    /// 31: the minor version as a number, for comparisons in templates.
    pub minor_version: u32,
    pub pod_cidr: String,
    pub service_cidr: String,
    pub dns_service_ip: String,
    pub max_pods_per_node: u32,
    /// `host:port` of the API server(s): the plan's value, else the first control plane's
    /// node IP (or address) and port 6443.
    pub control_plane_endpoint: String,
    /// Host part of `control_plane_endpoint`.
    pub api_server_host: String,
    /// Port part of `control_plane_endpoint`.
    pub api_server_port: u16,
    pub dns_domain: String,
    /// Deploy the verification workloads (default true).
    pub verify: bool,
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
    /// What to do about a reboot Windows waits for on a joined Windows worker: "report".
    pub windows_pending_reboot: String,
}

/// `cni`: pod network.
#[derive(Debug, Clone, Serialize)]
pub struct CniCtx {
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
pub struct RuntimeCtx {
    /// "containerd" | "docker".
    pub linux: String,
    pub windows: String,
    pub cri_dockerd: bool,
    /// "package" | "release".
    pub containerd_source: String,
    /// The plan's, else kubeadm's pause image for the cluster's minor.
    pub sandbox_image: String,
}

/// `versions`: component versions (the plan's, else kwin's pins).
#[derive(Debug, Clone, Serialize)]
pub struct VersionsCtx {
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
pub struct ProxyCtx {
    pub enabled: bool,
    /// The URLs as the plan writes them (never with credentials).
    pub http: Option<String>,
    pub https: Option<String>,
    /// The plan's list plus localhost, the pod and service CIDRs, the cluster domain and every
    /// host's address.
    pub no_proxy: Vec<String>,
    /// Whether the plan names proxy credentials (`credentials_env` / `credentials_file`).
    pub credentials: bool,
    /// With credentials: `http` / `https` with `user:password@` in them (percent-encoded). A
    /// secret: recipes write it only to `env_file`, mode 0600.
    pub http_auth: Option<String>,
    pub https_auth: Option<String>,
    /// The root-only environment file for the URLs with credentials (`/etc/kwin/proxy.env`).
    pub env_file: String,
}

/// `artifacts`: where downloads come from. With a mirror every base is `<mirror>/<site>`.
#[derive(Debug, Clone, Serialize)]
pub struct ArtifactsCtx {
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
}

/// `host` (and each item of `hosts`).
#[derive(Debug, Clone, Serialize)]
pub struct HostCtx {
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
    /// CRI endpoint of the host's runtime (with `[cluster]`), e.g.
    /// `unix:///run/containerd/containerd.sock` or `npipe:////./pipe/containerd-containerd`.
    pub cri_socket: Option<String>,
}

/// `first_control_plane`.
#[derive(Debug, Clone, Serialize)]
pub struct FirstControlPlaneCtx {
    pub name: String,
    pub address: String,
    pub node_ip: Option<String>,
}

/// The values templates see. Cheap to clone per host (minijinja values are shared).
#[derive(Debug, Clone)]
pub struct RecipeContext {
    shared: Vec<(&'static str, Value)>,
    hosts: Vec<Value>,
    /// Index in `plan.hosts` of the first control plane.
    pub first_control_plane: Option<usize>,
    /// Whether the plan has `[cluster]` (recipes apply only then).
    pub has_cluster: bool,
    /// The versions the flag table is keyed by, for `flag()` / `flag_supported()`.
    pub component_versions: ComponentVersions,
}

/// The versions components follow (none without `[cluster]`): Kubernetes for kubelet,
/// kube-proxy and kubeadm, the flannel and containerd releases for flanneld and containerd.
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

fn template_error(msg: String) -> minijinja::Error {
    minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, msg)
}

/// The text of a flag value: strings as they are, numbers and booleans as minijinja prints
/// them (`false`, `110`).
fn flag_value_text(v: &Value) -> String {
    if let Some(s) = v.as_str() {
        return s.to_string();
    }
    if v.kind() == minijinja::value::ValueKind::Bool {
        // minijinja prints `True`; command lines take `true`.
        return v.is_true().to_string();
    }
    v.to_string()
}

/// `flag(component, '--name', value)` renders one command-line flag (`--name=value`, or
/// `--name` for a flag without a value) after checking it against the flag table
/// (`plan/versions.toml`): a flag the table does not list, a value where the flag takes none
/// (or none where it takes one), and a flag the component's version does not accept are
/// errors naming the upstream source. `flag_supported(component, '--name')` says whether the
/// component's version accepts the flag, so a recipe states per version what it does when a
/// flag is gone (it is an error for a flag the table does not list).
pub fn add_flag_functions(env: &mut minijinja::Environment<'_>, cv: ComponentVersions) {
    let v = cv.clone();
    env.add_function(
        "flag",
        move |component: &str, name: &str, value: Option<Value>| -> Result<String, minijinja::Error> {
            let f = versions::flag(component, name).map_err(template_error)?;
            let ver = v.of(component).map_err(template_error)?;
            match versions::flag_support(component, name, &ver).map_err(template_error)? {
                versions::Support::Removed { removed, source } => {
                    return Err(template_error(format!(
                        "{component} {ver} does not accept {name}: removed in {removed} ({source}); render it only where flag_supported('{component}', '{name}')"
                    )))
                }
                versions::Support::NotYet { added } => {
                    return Err(template_error(format!(
                        "{component} {ver} does not have {name} yet (added in {added}); render it only where flag_supported('{component}', '{name}')"
                    )))
                }
                versions::Support::Accepted { .. } => {}
            }
            let value = value.filter(|x| !x.is_none() && !x.is_undefined());
            match (f.value, value) {
                (true, Some(x)) => Ok(format!("{name}={}", flag_value_text(&x))),
                (true, None) => Err(template_error(format!(
                    "{component} {name} takes a value; flag() was given none"
                ))),
                (false, None) => Ok(name.to_string()),
                (false, Some(x)) => Err(template_error(format!(
                    "{component} {name} takes no value; flag() was given `{x}`"
                ))),
            }
        },
    );
    env.add_function(
        "flag_supported",
        move |component: &str, name: &str| -> Result<bool, minijinja::Error> {
            versions::flag(component, name).map_err(template_error)?;
            let ver = cv.of(component).map_err(template_error)?;
            Ok(matches!(
                versions::flag_support(component, name, &ver).map_err(template_error)?,
                versions::Support::Accepted { .. }
            ))
        },
    );
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

/// The node IP of `h`: its `node_ip`, else its address when that is an IP address.
pub fn node_ip(h: &ResolvedHost) -> Option<String> {
    h.node_ip
        .clone()
        .or_else(|| h.address.parse::<IpAddr>().ok().map(|_| h.address.clone()))
}

/// `addr:port`, bracketing IPv6 addresses.
/// `addr:port`, with an IPv6 address in brackets.
pub fn host_port(addr: &str, port: u16) -> String {
    if addr.contains(':') {
        format!("[{addr}]:{port}")
    } else {
        format!("{addr}:{port}")
    }
}

/// Split `host:port` (or `[v6]:port`, or a bare host: port 6443).
fn split_endpoint(ep: &str) -> (String, u16) {
    let (h, p) = if let Some(rest) = ep.strip_prefix('[') {
        match rest.split_once(']') {
            Some((h, p)) => (h, p.strip_prefix(':')),
            None => (rest, None),
        }
    } else {
        match ep.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (h, Some(p)),
            _ => (ep, None),
        }
    };
    let port = p
        .and_then(|p| p.parse().ok())
        .unwrap_or(defaults::API_SERVER_PORT);
    (h.to_string(), port)
}

/// The `.10` address of `cidr` (kubeadm's rule for the cluster DNS service IP).
fn tenth_address(cidr: &str) -> Option<String> {
    let net: ipnet::IpNet = cidr.parse().ok()?;
    match net.network() {
        IpAddr::V4(a) => Some(std::net::Ipv4Addr::from(u32::from(a).checked_add(10)?).to_string()),
        IpAddr::V6(a) => Some(std::net::Ipv6Addr::from(u128::from(a).checked_add(10)?).to_string()),
    }
}

fn minor_of(version: &str) -> Option<String> {
    let v = version.strip_prefix('v').unwrap_or(version);
    let mut it = v.split('.');
    let (maj, min) = (it.next()?, it.next()?);
    (maj.parse::<u32>().is_ok() && min.parse::<u32>().is_ok()).then(|| format!("{maj}.{min}"))
}

fn push_unique(v: &mut Vec<String>, s: &str) {
    if !s.is_empty() && !v.iter().any(|x| x == s) {
        v.push(s.to_string());
    }
}

impl RecipeContext {
    pub fn from_plan(plan: &LoadedPlan) -> Result<RecipeContext, Diagnostics> {
        let mut diags = Diagnostics::default();
        let file = &plan.file;
        let first_cp = plan
            .hosts
            .iter()
            .position(|h| h.role == Some(Role::ControlPlane));
        let cluster = file.cluster.as_ref();

        let mut shared: Vec<(&'static str, Value)> = Vec::new();
        let mut component_versions = ComponentVersions::default();
        let cri = |h: &ResolvedHost| -> Option<String> {
            cluster?;
            Some(
                match (h.os, runtime_of(h, file)) {
                    (Os::Linux, RuntimeKind::Containerd) => {
                        "unix:///run/containerd/containerd.sock"
                    }
                    (Os::Linux, RuntimeKind::Docker) => "unix:///run/cri-dockerd.sock",
                    (Os::Windows, RuntimeKind::Containerd) => {
                        "npipe:////./pipe/containerd-containerd"
                    }
                    (Os::Windows, RuntimeKind::Docker) => "npipe:////./pipe/cri-dockerd",
                }
                .to_string(),
            )
        };
        let hosts: Vec<HostCtx> = plan
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| HostCtx {
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
                cri_socket: cri(h),
            })
            .collect();

        let first = first_cp.map(|i| {
            let h = &plan.hosts[i];
            FirstControlPlaneCtx {
                name: h.name.clone(),
                address: h.address.clone(),
                node_ip: node_ip(h),
            }
        });
        shared.push(("first_control_plane", Value::from_serialize(&first)));

        if let Some(c) = cluster {
            let pod_cidr = c.pod_cidr.clone().unwrap_or(defaults::POD_CIDR.into());
            let service_cidr = c
                .service_cidr
                .clone()
                .unwrap_or(defaults::SERVICE_CIDR.into());
            let dns_service_ip = match &c.dns_service_ip {
                Some(ip) => ip.clone(),
                None => tenth_address(&service_cidr).unwrap_or_else(|| {
                    diags.push(
                        Diagnostic::error(
                            "cluster-service-cidr",
                            format!("service_cidr `{service_cidr}` is not a CIDR"),
                        )
                        .at(plan.loc("cluster.service_cidr")),
                    );
                    String::new()
                }),
            };
            let minor = minor_of(&c.kubernetes_version).unwrap_or_else(|| {
                diags.push(
                    Diagnostic::error(
                        "cluster-version",
                        format!(
                            "kubernetes_version `{}` is not a version like 1.31.4",
                            c.kubernetes_version
                        ),
                    )
                    .at(plan.loc("cluster.kubernetes_version")),
                );
                String::new()
            });
            let dns_domain = c.dns_domain.clone().unwrap_or(defaults::DNS_DOMAIN.into());
            let endpoint = match (&c.control_plane_endpoint, &first) {
                (Some(ep), _) => ep.clone(),
                (None, Some(f)) => host_port(
                    f.node_ip.as_deref().unwrap_or(&f.address),
                    defaults::API_SERVER_PORT,
                ),
                (None, None) => {
                    diags.push(
                        Diagnostic::error(
                            "cluster-control-plane",
                            "the cluster has no host with role = \"control-plane\"",
                        )
                        .at(plan.loc("cluster")),
                    );
                    String::new()
                }
            };
            let (api_host, api_port) = split_endpoint(&endpoint);
            let count = |os: Os, role: Role| {
                plan.hosts
                    .iter()
                    .filter(|h| h.os == os && h.role == Some(role))
                    .count()
            };
            let windows_workers = count(Os::Windows, Role::Worker);
            let cluster_ctx = ClusterCtx {
                name: c.name.clone(),
                kubernetes_version: c.kubernetes_version.trim_start_matches('v').to_string(),
                minor_version: minor
                    .split('.')
                    .nth(1)
                    .and_then(|m| m.parse().ok())
                    .unwrap_or(0),
                minor,
                pod_cidr: pod_cidr.clone(),
                service_cidr: service_cidr.clone(),
                dns_service_ip,
                max_pods_per_node: c.max_pods_per_node.unwrap_or(defaults::MAX_PODS_PER_NODE),
                control_plane_endpoint: endpoint,
                api_server_host: api_host,
                api_server_port: api_port,
                dns_domain: dns_domain.clone(),
                verify: c.verify.unwrap_or(true),
                windows_pending_reboot: match c.windows_pending_reboot.unwrap_or_default() {
                    crate::plan::model::PendingReboot::Report => "report".into(),
                    crate::plan::model::PendingReboot::Drain => "drain".into(),
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
            };

            let cni = match &file.cni {
                Some(n) => CniCtx {
                    plugin: match n.plugin {
                        CniPlugin::Flannel => "flannel",
                        CniPlugin::Calico => "calico",
                    }
                    .into(),
                    backend: backend_str(n.backend.unwrap_or(CniBackend::Vxlan)).into(),
                    vni: n.vni.unwrap_or(defaults::VXLAN_VNI),
                    port: n.port.unwrap_or(defaults::VXLAN_PORT),
                    manifest_file: n
                        .manifest_file
                        .as_deref()
                        .map(|p| plan.resolve_path(p).display().to_string()),
                },
                None => {
                    diags.push(
                        Diagnostic::error("cluster-cni", "`[cluster]` needs a `[cni]` section")
                            .with_hint("add [cni] with plugin = \"flannel\" or \"calico\"")
                            .at(plan.loc("cluster")),
                    );
                    CniCtx {
                        plugin: String::new(),
                        backend: String::new(),
                        vni: defaults::VXLAN_VNI,
                        port: defaults::VXLAN_PORT,
                        manifest_file: None,
                    }
                }
            };

            let r = &file.runtime;
            let runtime = RuntimeCtx {
                linux: runtime_str(r.linux).into(),
                windows: runtime_str(r.windows).into(),
                cri_dockerd: r.cri_dockerd,
                containerd_source: match r.containerd_source.unwrap_or_default() {
                    crate::plan::ContainerdSource::Package => "package".into(),
                    crate::plan::ContainerdSource::Release => "release".into(),
                },
                sandbox_image: r.sandbox_image.clone().unwrap_or_else(|| {
                    crate::plan::versions::pause_image(&cluster_ctx.kubernetes_version)
                }),
            };

            let v = &file.versions;
            let versions = VersionsCtx {
                kubernetes: format!("v{}", cluster_ctx.kubernetes_version),
                containerd: v.containerd.clone().unwrap_or(pinned::CONTAINERD.into()),
                runc: pinned::RUNC.into(),
                flannel: v.flannel.clone().unwrap_or(pinned::FLANNEL.into()),
                calico: v.calico.clone().unwrap_or(pinned::CALICO.into()),
                cni_plugins: v.cni_plugins.clone().unwrap_or(pinned::CNI_PLUGINS.into()),
                crictl: v.crictl.clone(),
                cri_dockerd: v.cri_dockerd.clone().unwrap_or(pinned::CRI_DOCKERD.into()),
            };

            let proxy = match &file.proxy {
                Some(p) => {
                    let mut no_proxy = Vec::new();
                    for s in &p.no_proxy {
                        push_unique(&mut no_proxy, s);
                    }
                    for s in [
                        "localhost",
                        "127.0.0.1",
                        &pod_cidr,
                        &service_cidr,
                        ".svc",
                        &format!(".{dns_domain}"),
                    ] {
                        push_unique(&mut no_proxy, s);
                    }
                    for h in &plan.hosts {
                        push_unique(&mut no_proxy, &h.address);
                        if let Some(ip) = &h.node_ip {
                            push_unique(&mut no_proxy, ip);
                        }
                    }
                    // Read like every secret: from the environment or a file the plan names.
                    let creds = plan.proxy_credentials().and_then(|(src, key)| {
                        crate::plan::proxy::ProxyCredentials::read(&src)
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
                        u.as_ref().and_then(|u| {
                            creds.as_ref().map(|c| c.url_with(u).expose().to_string())
                        })
                    };
                    ProxyCtx {
                        enabled: p.http.is_some() || p.https.is_some(),
                        http: p.http.clone(),
                        https: p.https.clone(),
                        no_proxy,
                        credentials: creds.is_some(),
                        http_auth: auth(&p.http),
                        https_auth: auth(&p.https),
                        env_file: crate::plan::proxy::ENV_FILE.to_string(),
                    }
                }
                None => ProxyCtx {
                    enabled: false,
                    http: None,
                    https: None,
                    no_proxy: Vec::new(),
                    credentials: false,
                    http_auth: None,
                    https_auth: None,
                    env_file: crate::plan::proxy::ENV_FILE.to_string(),
                },
            };

            let a = &file.artifacts;
            let base = |site: &str| match &a.mirror {
                Some(m) => format!("{}/{site}", m.trim_end_matches('/')),
                None => format!("https://{site}"),
            };
            let artifacts = ArtifactsCtx {
                mirror: a.mirror.clone(),
                github: base("github.com"),
                github_raw: base("raw.githubusercontent.com"),
                dl_k8s: base("dl.k8s.io"),
                pkgs_k8s: base("pkgs.k8s.io"),
                sha256: a.sha256.clone(),
            };

            component_versions = ComponentVersions {
                kubernetes: Some(cluster_ctx.kubernetes_version.clone()),
                flannel: Some(versions.flannel.clone()),
                containerd: Some(versions.containerd.clone()),
            };
            shared.push(("cluster", Value::from_serialize(&cluster_ctx)));
            shared.push(("cni", Value::from_serialize(&cni)));
            shared.push(("runtime", Value::from_serialize(&runtime)));
            shared.push(("versions", Value::from_serialize(&versions)));
            shared.push(("proxy", Value::from_serialize(&proxy)));
            shared.push(("artifacts", Value::from_serialize(&artifacts)));
            shared.push(("windows", Value::from_serialize(WindowsCtx::new())));
        }

        let host_values: Vec<Value> = hosts.iter().map(Value::from_serialize).collect();
        shared.push(("hosts", Value::from(host_values.clone())));

        if diags.has_errors() {
            return Err(diags);
        }
        Ok(RecipeContext {
            shared,
            hosts: host_values,
            first_control_plane: first_cp,
            has_cluster: cluster.is_some(),
            component_versions,
        })
    }

    /// The context of the plan's host at index `i` (as in `plan.hosts`).
    pub fn for_host(&self, i: usize) -> Value {
        let host = self.hosts.get(i).cloned().unwrap_or(Value::from(()));
        Value::from_iter(
            self.shared
                .iter()
                .map(|(k, v)| (*k, v.clone()))
                .chain(std::iter::once(("host", host))),
        )
    }
}

/// The values templates see, built from [`Effective`](crate::plan::effective::Effective):
/// its parts serialized once, per host only `host` changes. Cheap to clone per host
/// (minijinja values are shared).
#[derive(Debug, Clone)]
pub struct TemplateContext {
    shared: Vec<(&'static str, Value)>,
    hosts: Vec<Value>,
}

impl TemplateContext {
    pub fn new(eff: &crate::plan::effective::Effective) -> TemplateContext {
        let mut shared: Vec<(&'static str, Value)> = vec![(
            "first_control_plane",
            Value::from_serialize(&eff.first_control_plane),
        )];
        if let (Some(cluster), Some(cni), Some(runtime), Some(versions)) =
            (&eff.cluster, &eff.cni, &eff.runtime, &eff.versions)
        {
            shared.push(("cluster", Value::from_serialize(cluster)));
            shared.push(("cni", Value::from_serialize(cni)));
            shared.push(("runtime", Value::from_serialize(runtime)));
            shared.push(("versions", Value::from_serialize(versions)));
            shared.push(("proxy", Value::from_serialize(&eff.proxy)));
            shared.push(("artifacts", Value::from_serialize(&eff.artifacts)));
            shared.push(("windows", Value::from_serialize(&eff.windows)));
        }
        let hosts: Vec<Value> = eff.hosts.iter().map(Value::from_serialize).collect();
        shared.push(("hosts", Value::from(hosts.clone())));
        TemplateContext { shared, hosts }
    }

    /// The context of the plan's host at index `i` (as in `plan.hosts`).
    pub fn for_host(&self, i: usize) -> Value {
        let host = self.hosts.get(i).cloned().unwrap_or(Value::from(()));
        Value::from_iter(
            self.shared
                .iter()
                .map(|(k, v)| (*k, v.clone()))
                .chain(std::iter::once(("host", host))),
        )
    }
}

/// The runtime a host uses, by its OS.
fn runtime_of(h: &ResolvedHost, file: &crate::plan::PlanFile) -> RuntimeKind {
    match h.os {
        Os::Linux => file.runtime.linux,
        Os::Windows => file.runtime.windows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_values() {
        assert_eq!(tenth_address("10.96.0.0/12").as_deref(), Some("10.96.0.10"));
        assert_eq!(tenth_address("fd00::/108").as_deref(), Some("fd00::a"));
        assert_eq!(tenth_address("nope"), None);
        assert_eq!(minor_of("1.31.4").as_deref(), Some("1.31"));
        assert_eq!(minor_of("v1.30.0").as_deref(), Some("1.30"));
        assert_eq!(minor_of("latest"), None);
        assert_eq!(split_endpoint("10.0.0.1:6443"), ("10.0.0.1".into(), 6443));
        assert_eq!(split_endpoint("api.lab"), ("api.lab".into(), 6443));
        assert_eq!(split_endpoint("[fd00::1]:8443"), ("fd00::1".into(), 8443));
        assert_eq!(host_port("fd00::1", 6443), "[fd00::1]:6443");
    }

    fn plan(text: &str) -> LoadedPlan {
        crate::plan::load_str(std::path::Path::new("/lab/plan.toml"), text).expect("plan loads")
    }

    #[test]
    fn defaults_fill_the_gaps() {
        let p = plan(
            r#"
[cluster]
name = "lab"
kubernetes_version = "1.31.4"
service_cidr = "10.100.0.0/16"
[cni]
plugin = "flannel"
[proxy]
http = "http://proxy:3128"
no_proxy = ["corp.example"]
[[hosts]]
name = "cp1"
address = "192.168.1.10"
os = "linux"
role = "control-plane"
transport = "local"
"#,
        );
        let ctx = RecipeContext::from_plan(&p).expect("context");
        let v = ctx.for_host(0);
        let get = |path: &str| {
            let mut cur = v.clone();
            for part in path.split('.') {
                cur = cur.get_attr(part).expect("attr");
            }
            cur.to_string()
        };
        assert_eq!(get("cluster.dns_service_ip"), "10.100.0.10");
        assert_eq!(get("cluster.pod_cidr"), "10.244.0.0/16");
        assert_eq!(get("cluster.minor"), "1.31");
        assert_eq!(get("cluster.control_plane_endpoint"), "192.168.1.10:6443");
        assert_eq!(get("cni.vni"), "4096");
        assert_eq!(get("versions.containerd"), pinned::CONTAINERD);
        assert_eq!(get("windows.cni_bin_dir"), r"C:\opt\cni\bin");
        assert_eq!(get("windows.cni_conf_dir"), r"C:\etc\cni\net.d");
        assert_eq!(get("host.is_first_control_plane").to_lowercase(), "true");
        assert_eq!(
            get("host.cri_socket"),
            "unix:///run/containerd/containerd.sock"
        );
        let no_proxy = get("proxy.no_proxy");
        for s in [
            "corp.example",
            "10.244.0.0/16",
            ".cluster.local",
            "192.168.1.10",
        ] {
            assert!(no_proxy.contains(s), "{no_proxy}");
        }
    }

    /// Transitional: the context built from `Effective` is the one `RecipeContext` built, for
    /// every example plan and every good test plan.
    #[test]
    fn effective_gives_the_same_template_context() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        for dir in ["examples", "tests/plans/good"] {
            for e in std::fs::read_dir(root.join(dir)).expect("dir").flatten() {
                if e.path().extension().is_some_and(|x| x == "toml") {
                    files.push(e.path());
                }
            }
        }
        assert!(files.len() > 8, "{files:?}");
        let dir = tempfile::tempdir().expect("tmp");
        let creds = dir.path().join("creds");
        std::fs::write(&creds, "alice:s3cret-pass\n").expect("write");
        let extra = [
            format!(
                "[cluster]\nname = \"x\"\nkubernetes_version = \"1.30.2\"\ncontrol_plane_endpoint = \"[fd00::1]:8443\"\n\
                 dns_service_ip = \"10.96.0.53\"\n[cni]\nplugin = \"calico\"\n[runtime]\nlinux = \"docker\"\ncri_dockerd = true\n\
                 [artifacts]\nmirror = \"https://mirror.lab/\"\n\
                 [proxy]\nhttp = \"http://proxy:3128\"\nhttps = \"http://proxy:3129\"\nno_proxy = [\"corp\"]\ncredentials_file = \"{}\"\n\
                 [[hosts]]\nname = \"cp1\"\naddress = \"cp1.lab\"\nos = \"linux\"\nrole = \"control-plane\"\ntransport = \"local\"\n\
                 [[hosts]]\nname = \"cp2\"\naddress = \"fd00::2\"\nnode_ip = \"10.0.0.2\"\nos = \"linux\"\nrole = \"control-plane\"\ntransport = \"local\"\n",
                creds.display()
            ),
        ];
        let mut plans = Vec::new();
        for f in &files {
            if let Ok(p) = crate::plan::load(f) {
                plans.push((f.display().to_string(), p));
            }
        }
        for (i, text) in extra.iter().enumerate() {
            let p = crate::plan::load_str(&dir.path().join("plan.toml"), text).expect("extra plan");
            plans.push((format!("extra {i}"), p));
        }
        let mut compared = 0;
        for (f, p) in plans {
            let Ok(old) = RecipeContext::from_plan(&p) else {
                continue;
            };
            let eff = crate::plan::effective::Effective::build(&p).expect("effective");
            let new = TemplateContext::new(&eff);
            for i in 0..p.hosts.len() {
                assert_eq!(
                    format!("{:?}", new.for_host(i)),
                    format!("{:?}", old.for_host(i)),
                    "{f} host {i}"
                );
            }
            assert_eq!(
                format!("{:?}", eff.component_versions()),
                format!("{:?}", old.component_versions)
            );
            compared += 1;
        }
        assert!(compared >= 9, "only {compared} plans compared");
    }

    #[test]
    fn without_cluster_only_hosts() {
        let p = plan(
            r#"
[[hosts]]
name = "a"
os = "linux"
transport = "local"
"#,
        );
        let ctx = RecipeContext::from_plan(&p).expect("context");
        let v = ctx.for_host(0);
        assert!(v.get_attr("cluster").expect("lookup").is_undefined());
        assert_eq!(
            v.get_attr("host")
                .and_then(|h| h.get_attr("name"))
                .map(|n| n.to_string())
                .ok()
                .as_deref(),
            Some("a")
        );
    }

    #[test]
    fn flag_functions_check_the_version_table() {
        let env_for = |k8s: &str| {
            let mut env = crate::template::environment();
            add_flag_functions(
                &mut env,
                ComponentVersions {
                    kubernetes: Some(k8s.into()),
                    flannel: Some("v0.26.7".into()),
                    containerd: Some("1.7.29".into()),
                },
            );
            env
        };
        let eval = |k8s: &str, expr: &str| {
            let env = env_for(k8s);
            let e = env.compile_expression(expr).expect("compiles");
            e.eval(minijinja::context! {}).map(|v| v.to_string())
        };
        let pod_infra =
            "flag('kubelet', '--pod-infra-container-image', 'registry.k8s.io/pause:3.10')";
        assert_eq!(
            eval("1.34.2", pod_infra).expect("1.34 takes it"),
            "--pod-infra-container-image=registry.k8s.io/pause:3.10"
        );
        let err = eval("1.35.0", pod_infra)
            .expect_err("1.35 refuses it")
            .to_string();
        assert!(
            err.contains("removed in 1.35") && err.contains("#133779"),
            "{err}"
        );
        let supported = "flag_supported('kubelet', '--pod-infra-container-image')";
        assert_eq!(eval("1.34.2", supported).expect("ok"), "True");
        assert_eq!(eval("1.35.0", supported).expect("ok"), "False");
        assert_eq!(
            eval("1.31.4", "flag('kubelet', '--cgroups-per-qos', false)").expect("ok"),
            "--cgroups-per-qos=false"
        );
        assert_eq!(
            eval("1.31.4", "flag('kubelet', '--windows-service')").expect("ok"),
            "--windows-service"
        );
        assert_eq!(
            eval("1.31.4", "flag('kubelet', '--resolv-conf', '')").expect("ok"),
            "--resolv-conf="
        );
        for bad in [
            "flag('kubelet', '--no-such-flag', 'x')",
            "flag('kubelet', '--node-ip')",
            "flag('kubelet', '--node-ip', none)",
            "flag('kubelet', '--windows-service', 'yes')",
            "flag('kubelett', '--node-ip', 'x')",
            "flag_supported('kubelet', '--no-such-flag')",
        ] {
            assert!(eval("1.31.4", bad).is_err(), "{bad} should be refused");
        }
        assert_eq!(
            eval("1.31.4", "flag('flanneld', '--kube-subnet-mgr')").expect("ok"),
            "--kube-subnet-mgr"
        );
        // Without [cluster] there is no version to check against.
        let mut env = crate::template::environment();
        add_flag_functions(&mut env, ComponentVersions::default());
        let e = env
            .compile_expression("flag('kubelet', '--node-ip', 'x')")
            .expect("compiles");
        assert!(e.eval(minijinja::context! {}).is_err());
    }
}
