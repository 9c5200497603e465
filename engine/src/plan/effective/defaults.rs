//! kwin's defaults where the plan says nothing: the ONE place each default value is written.
//!
//! Validation, [`super::Effective`], the executor's options and every command read them from
//! here; the plan's JSON Schema shows them (`model.rs`). A test (`tests/layers.rs`) fails on
//! these literals anywhere else in production code.

/// `cluster.pod_cidr`.
pub const POD_CIDR: &str = "10.244.0.0/16";
/// `cluster.service_cidr`.
pub const SERVICE_CIDR: &str = "10.96.0.0/12";
/// `cluster.dns_service_ip` with the default `SERVICE_CIDR`, as the plan's schema shows it
/// (the value used is always [`crate::plan::net::default_dns_ip`] of the service CIDR; a
/// test holds the two equal).
pub const DNS_SERVICE_IP: &str = "10.96.0.10";
/// `cluster.max_pods_per_node` (the kubelet's default).
pub const MAX_PODS_PER_NODE: u32 = 110;
/// `cluster.dns_domain`.
pub const DNS_DOMAIN: &str = "cluster.local";
/// `cni.vni`: the only VXLAN VNI Windows flannel supports.
pub const VXLAN_VNI: u32 = 4096;
/// `cni.port`: the only VXLAN UDP port Windows supports.
pub const VXLAN_PORT: u16 = 4789;
/// The API server's port when `control_plane_endpoint` names none (kubeadm's
/// `bindPort`).
pub const API_SERVER_PORT: u16 = 6443;
/// Lifetime of the bootstrap token workers join with.
pub const TOKEN_TTL: &str = "2h";
/// `cluster.windows_taint`: Windows nodes register with `os=windows:NoSchedule`.
pub const WINDOWS_TAINT: bool = true;
/// `cluster.windows_runtime_classes`: no RuntimeClasses unless the plan asks for them.
pub const WINDOWS_RUNTIME_CLASSES: bool = false;
/// `cluster.verify`: deploy the verification workloads after a clean apply.
pub const VERIFY: bool = true;
/// `cluster.verify_egress_url`: what the egress checks of `kwin verify` fetch.
pub const VERIFY_EGRESS_URL: &str = "https://kubernetes.io/";
/// `cluster.allow_cgroup_v1`: hosts on cgroup v1 are refused with Kubernetes 1.35 and later.
pub const ALLOW_CGROUP_V1: bool = false;
/// `runtime.cgroup_driver`: the cgroup driver of containerd's runc and the kubelet.
pub const CGROUP_DRIVER: &str = "systemd";
// Component versions (containerd, runc, flannel, Calico, CNI plugins, cri-dockerd) and the
// Kubernetes release `kwin init` writes are the support matrix's: `versions.toml`
// `[matrix.defaults]` and its newest row (`crate::plan::support::{pins, newest_release}`).
// The sandbox image follows kubeadm per minor: `crate::plan::versions::pause_image`.

/// `[settings]`: the executor's knobs.
pub mod settings {
    /// `settings.parallelism`: hosts worked on at once.
    pub const PARALLELISM: usize = 32;
    /// `settings.step_timeout`, seconds.
    pub const STEP_TIMEOUT_SECS: u64 = 600;
    /// `settings.retries` after a lost connection.
    pub const RETRIES: u32 = 3;
    /// `settings.retry_delay`, seconds (doubling).
    pub const RETRY_DELAY_SECS: u64 = 2;
    /// `settings.wait_for_hosts`, seconds (0: do not wait).
    pub const WAIT_FOR_HOSTS_SECS: u64 = 0;
    /// `settings.allow_reboot`.
    pub const ALLOW_REBOOT: bool = true;
    /// `settings.output_budget_mib`.
    pub const OUTPUT_BUDGET_MIB: u64 = 64;
    /// `settings.keep_runs`.
    pub const KEEP_RUNS: usize = 50;
    /// `settings.logs_limit_mib`.
    pub const LOGS_LIMIT_MIB: u64 = 1024;
}

/// `[upgrade]`: how a running cluster is upgraded.
pub mod upgrade {
    /// `upgrade.max_unavailable`: workers upgraded at once.
    pub const MAX_UNAVAILABLE: usize = 1;
    /// `upgrade.drain_timeout`, seconds (kubectl drain --timeout per node).
    pub const DRAIN_TIMEOUT_SECS: u64 = 300;
    /// `upgrade.force_drain`.
    pub const FORCE_DRAIN: bool = false;
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
    /// flannel's CNI plugin for Windows (flannel-io/cni-plugin): the release whose image
    /// flannel v0.28.10's kube-flannel.yml runs on Linux (`ghcr.io/flannel-io/flannel-cni-plugin:
    /// v1.9.1-flannel3`), so both OSes run one plugin release. Each release carries
    /// `cni-plugin-flannel-windows-amd64-<tag>.tgz` and its `.sha256` (scripts/package.sh, built
    /// and uploaded by .github/workflows/release.yml with the image).
    pub const FLANNEL_CNI_PLUGIN: &str = "v1.9.1-flannel3";
    /// microsoft/windows-container-networking (sdnoverlay.exe, the delegate flannel's Windows
    /// CNI configuration names).
    pub const SDN_CNI: &str = "v0.3.1";
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_schema_dns_address_is_the_tenth_of_the_default_service_cidr() {
        let cidr = super::SERVICE_CIDR.parse().expect("default service CIDR");
        assert_eq!(
            crate::plan::net::default_dns_ip(&cidr).to_string(),
            super::DNS_SERVICE_IP
        );
    }
}
