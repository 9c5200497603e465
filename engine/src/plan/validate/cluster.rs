//! Rules about the cluster: roles, the address plan, the pod network, the runtime,
//! component versions, the artifact mirror and the proxy.

use super::pass::V;
use crate::diag::Diagnostic;
use crate::plan::model::{CniBackend, CniPlugin, Os, Role, RuntimeKind};
use crate::plan::net::{self, ClusterNet, CniSettings};
use crate::plan::spans::PlanPath;
use crate::plan::support::{self, Status};
use crate::plan::syntax;
use crate::plan::versions;
use std::net::{IpAddr, Ipv4Addr};

/// Kubernetes removed dockershim from the kubelet in this version.
const DOCKERSHIM_REMOVED: (u64, u64) = (1, 24);

pub(super) fn check(v: &mut V<'_>) {
    versions(v);
    artifacts_and_proxy(v);
    let Some(cluster) = v.plan.file.cluster.as_ref() else {
        without_cluster(v);
        return;
    };
    if let Err(why) = syntax::dns_label(&cluster.name) {
        v.at(
            "cluster.name",
            Diagnostic::error(
                "bad-name",
                format!("cluster name \"{}\" is not valid: {why}", cluster.name),
            )
            .with_hint("use lowercase letters, digits and `-`, e.g. \"lab\""),
        );
    }
    if let Some(d) = &cluster.dns_domain {
        if let Err(why) = syntax::dns_name(d) {
            v.at(
                "cluster.dns_domain",
                Diagnostic::error(
                    "bad-dns-domain",
                    format!("dns_domain \"{d}\" is not valid: {why}"),
                ),
            );
        }
    }
    kubernetes_version(v);
    api_server_sans(v);
    roles(v);
    if let Some(net) = address_plan(v) {
        hosts_outside_cidrs(v, &net);
        endpoint(v, Some(&net));
    } else {
        endpoint(v, None);
    }
    cni(v);
    runtime(v);
    pending_reboot(v);
}

/// `windows_pending_reboot = "drain"` restarts joined Windows nodes (drained first): it needs
/// the reboots `settings.allow_reboot = false` forbids.
fn pending_reboot(v: &mut V<'_>) {
    let drain = v
        .plan
        .file
        .cluster
        .as_ref()
        .and_then(|c| c.windows_pending_reboot)
        == Some(crate::plan::model::PendingReboot::Drain);
    if drain && v.plan.file.settings.allow_reboot == Some(false) {
        v.at(
            "settings.allow_reboot",
            Diagnostic::error(
                "windows-reboot-not-allowed",
                "cluster.windows_pending_reboot = \"drain\" restarts joined Windows nodes after draining them, but settings.allow_reboot = false forbids every reboot",
            )
            .with_hint("set allow_reboot = true, or windows_pending_reboot = \"report\" (kwin then only names the nodes that wait for a reboot)"),
        );
    }
}

fn without_cluster(v: &mut V<'_>) {
    if v.has("cni") {
        v.at_key(
            "cni",
            Diagnostic::warning("cni-unused", "[cni] is ignored without [cluster]")
                .with_hint("add [cluster] to build a cluster, or remove [cni]"),
        );
    }
}

fn kubernetes_version(v: &mut V<'_>) {
    let Some(cluster) = v.plan.file.cluster.as_ref() else {
        return;
    };
    let version = match syntax::version(&cluster.kubernetes_version, false) {
        Ok(ver) => ver,
        Err(why) => {
            v.at(
                "cluster.kubernetes_version",
                Diagnostic::error(
                    "bad-version",
                    format!(
                        "kubernetes_version \"{}\" is not valid: {why}",
                        cluster.kubernetes_version
                    ),
                )
                .with_hint(format!(
                    "kwin accepts a full version without `v` of a minor from {} to {}, e.g. \"{}.0\" (https://kubernetes.io/releases lists each minor's patch releases)",
                    versions::oldest(),
                    versions::newest(),
                    versions::newest(),
                )),
            );
            return;
        }
    };
    if version.major != 1 {
        v.at(
            "cluster.kubernetes_version",
            Diagnostic::error(
                "bad-version",
                format!("kubernetes_version {version}: Kubernetes releases are 1.x"),
            ),
        );
        return;
    }
    // kwin knows the minors of its version table (plan/versions.toml): their kubelet,
    // kube-proxy and kubeadm flags and kubeadm's pause image.
    let minor = versions::Version(vec![version.major, version.minor]);
    let (oldest, newest) = (versions::oldest(), versions::newest());
    let range = format!("kwin supports Kubernetes {oldest} to {newest}: the minors whose kubelet, kube-proxy and kubeadm flags and pause image its version table holds");
    if minor < oldest && v.plan.has_windows() {
        v.at(
            "cluster.kubernetes_version",
            Diagnostic::error(
                "k8s-version-windows",
                format!("Kubernetes {version} is too old for kwin's Windows nodes"),
            )
            .with_hint(format!("{range}; Windows nodes need {oldest} or later")),
        );
    } else if minor < oldest {
        v.at(
            "cluster.kubernetes_version",
            Diagnostic::error(
                "k8s-version-unknown",
                format!(
                    "Kubernetes {version} is older than the oldest minor kwin knows ({oldest})"
                ),
            )
            .with_hint(range),
        );
    } else if minor > newest {
        v.at(
            "cluster.kubernetes_version",
            Diagnostic::error(
                "k8s-version-unknown",
                format!(
                    "Kubernetes {version} is newer than the newest minor kwin knows ({newest})"
                ),
            )
            .with_hint(format!(
                "{range}; a newer kubelet may refuse a flag kwin passes (1.35 refused --pod-infra-container-image): use {newest}.x, or a kwin release that knows {}.{}",
                version.major, version.minor
            )),
        );
    } else {
        released(v, &version, &minor);
    }
}

/// A known minor: the patch must have been released, and an end-of-life minor warns
/// (`plan/support.rs`, the matrix's dates against today).
fn released(v: &mut V<'_>, version: &semver::Version, minor: &versions::Version) {
    let full = versions::Version(vec![version.major, version.minor, version.patch]);
    if let Err(latest) = support::patch_released(&full) {
        v.at(
            "cluster.kubernetes_version",
            Diagnostic::error(
                "k8s-version-unreleased",
                format!("Kubernetes {version} was never released: {minor} has {minor}.0 to {latest}"),
            )
            .with_hint(format!(
                "use \"{latest}\", the newest {minor} patch (kwin's support matrix, checked {}; docs/versions.md); a patch released since needs a kwin that knows it",
                versions::table().matrix.checked
            )),
        );
        return;
    }
    let today = support::Day::today();
    if let Some(Status::EndOfLife { since }) = support::status(minor, today) {
        let supported = support::supported_minors(today);
        let newest = support::newest_release();
        v.at(
            "cluster.kubernetes_version",
            Diagnostic::warning(
                "k8s-end-of-life",
                format!("Kubernetes {minor} reached its end of life on {since}: upstream publishes no more fixes for it"),
            )
            .with_hint(if supported.is_empty() {
                format!("every minor kwin knows has reached its end of life: use a kwin release that knows newer ones ({newest} is the newest this one knows)")
            } else {
                format!(
                    "upstream supports {}: upgrade one minor at a time (kubeadm's rule), up to {newest}",
                    supported.join(", ")
                )
            }),
        );
    }
}

/// Whether another host of the plan is reached through host `name` (`proxy_jump`).
fn is_jump_host(plan: &crate::plan::LoadedPlan, name: &str) -> bool {
    use crate::transport::spec::{ConnSpec, ProxyJump};
    plan.hosts.iter().any(|h| {
        matches!(&h.conn, ConnSpec::Ssh(s)
            if matches!(&s.proxy_jump, Some(ProxyJump::Host { name: n, .. }) if n == name))
    })
}

fn roles(v: &mut V<'_>) {
    let plan = v.plan;
    let mut control_planes = 0;
    // Hosts or roles cut out as wrong were reported already; do not add "no control plane".
    let mut missing_role_cut = v.pruned.contains("hosts");
    for (i, h) in plan.file.hosts.iter().enumerate() {
        let os = plan.hosts.get(i).map(|rh| rh.os);
        match h.role {
            None if v.pruned.contains(&format!("hosts[{i}].role")) => missing_role_cut = true,
            // A jump host (bastion) other hosts are reached through need not be a node.
            None if is_jump_host(plan, &h.name) => {}
            None => v.at(
                &format!("hosts[{i}].name"),
                Diagnostic::error(
                    "host-role",
                    format!("host `{}` has no role", h.name),
                )
                .with_hint("with [cluster] every host is a node, except a jump host other hosts name in proxy_jump: add role = \"control-plane\" or role = \"worker\""),
            ),
            Some(Role::ControlPlane) => {
                control_planes += 1;
                if os == Some(Os::Windows) {
                    v.at(
                        &format!("hosts[{i}].role"),
                        Diagnostic::error(
                            "windows-control-plane",
                            format!("Windows host `{}` cannot be a control plane", h.name),
                        )
                        .with_hint("the Kubernetes control plane runs on Linux only; make it a worker"),
                    );
                } else if control_planes == 2
                    && plan
                        .file
                        .cluster
                        .as_ref()
                        .is_some_and(|c| c.control_plane_endpoint.is_none())
                {
                    v.at(
                        &format!("hosts[{i}].role"),
                        Diagnostic::error(
                            "control-plane-endpoint",
                            format!(
                                "`{}` is a second control plane, but [cluster] has no control_plane_endpoint",
                                h.name
                            ),
                        )
                        .with_hint("several control planes need a stable address in front of them (a load balancer or DNS name): set cluster.control_plane_endpoint"),
                    );
                }
            }
            Some(Role::Worker) => {}
        }
    }
    if control_planes == 0 && !missing_role_cut {
        v.at_key(
            "cluster",
            Diagnostic::error("no-control-plane", "the cluster has no control plane")
                .with_hint("give one Linux host role = \"control-plane\"; the first in file order runs kubeadm init"),
        );
    }
}

/// The address plan rules; the parsed plan if it parses.
fn address_plan(v: &mut V<'_>) -> Option<ClusterNet> {
    let cluster = v.plan.file.cluster.as_ref()?;
    let net = match ClusterNet::from_cluster(cluster) {
        Ok(n) => n,
        Err(errors) => {
            for e in errors {
                let summary = format!("{}: {}", e.field, e.message);
                let mut d = if e.field == "dns_service_ip" {
                    Diagnostic::error("bad-dns-ip", summary)
                } else {
                    Diagnostic::error("bad-cidr", summary)
                };
                if let Some(h) = e.hint {
                    d = d.with_hint(h);
                }
                v.at(&format!("cluster.{}", e.field), d);
            }
            return None;
        }
    };
    let at_or_cluster = |v: &V<'_>, field: &str| {
        let p = format!("cluster.{field}");
        if v.has(&p) {
            p
        } else {
            "cluster".to_string()
        }
    };
    let svc_path = at_or_cluster(v, "service_cidr");
    let pod_path = at_or_cluster(v, "pod_cidr");
    if net.service_cidr.prefix_len() < net::MIN_SERVICE_PREFIX {
        v.at(
            &svc_path,
            Diagnostic::error(
                "service-cidr-size",
                format!(
                    "service_cidr {} is too large: kube-apiserver accepts at most a /{} for IPv4",
                    net.service_cidr,
                    net::MIN_SERVICE_PREFIX
                ),
            ),
        );
    }
    if net::overlaps(&net.pod_cidr, &net.service_cidr) {
        v.at(
            &svc_path,
            Diagnostic::error(
                "cidr-overlap",
                format!(
                    "service_cidr {} overlaps pod_cidr {}",
                    net.service_cidr, net.pod_cidr
                ),
            )
            .with_hint("pods and services need separate address ranges (defaults: 10.244.0.0/16 and 10.96.0.0/12)"),
        );
    }
    if let Some(why) = net::dns_ip_problem(net.dns_service_ip, &net.service_cidr) {
        if v.has("cluster.dns_service_ip") {
            v.at(
                "cluster.dns_service_ip",
                Diagnostic::error("bad-dns-ip", format!("dns_service_ip {why}"))
                    .with_hint("pick an address inside service_cidr, e.g. its .10 address"),
            );
        } else {
            v.at(
                &svc_path,
                Diagnostic::error(
                    "bad-dns-ip",
                    format!("the default dns_service_ip (the .10 address) does not fit: {why}"),
                )
                .with_hint("make service_cidr larger or set dns_service_ip"),
            );
        }
    }
    let max_pods = net.max_pods_per_node;
    let max_path = at_or_cluster(v, "max_pods_per_node");
    if max_pods == 0 {
        v.at(
            &max_path,
            Diagnostic::error("max-pods", "max_pods_per_node must be at least 1"),
        );
    } else if max_pods > 254 {
        v.at(
            &max_path,
            Diagnostic::error(
                "max-pods",
                format!("max_pods_per_node {max_pods} does not fit a node's /24 pod subnet (at most 254)"),
            ),
        );
    } else if max_pods > 110 && v.plan.has_windows() {
        v.at(
            &max_path,
            Diagnostic::warning(
                "max-pods-windows",
                format!("max_pods_per_node {max_pods} is above 110 in a cluster with Windows nodes"),
            )
            .with_hint("110 is the kubelet default and the most pods per node Kubernetes supports; every Windows pod also costs its own HNS endpoint and pause container, so stay at 110 or below unless you measured your Windows nodes"),
        );
    }
    let nodes = v.plan.nodes().count() as u64;
    let size = net::size(&net.pod_cidr);
    let needed = net.pod_addresses_needed(nodes);
    if net.pod_cidr.prefix_len() > net::NODE_CIDR_PREFIX {
        v.at(
            &pod_path,
            Diagnostic::error(
                "pod-cidr-size",
                format!(
                    "pod_cidr {} is smaller than the /{} every node gets from it",
                    net.pod_cidr,
                    net::NODE_CIDR_PREFIX
                ),
            )
            .with_hint("use a /16 (the default 10.244.0.0/16) or at least one /24 per node"),
        );
    } else if nodes > 0 && needed > size {
        v.at(
            &pod_path,
            Diagnostic::error(
                "pod-cidr-size",
                format!(
                    "pod_cidr {} has {size} addresses; {} with up to {max_pods} pods each {} {needed}",
                    net.pod_cidr,
                    count(nodes, "node"),
                    if nodes == 1 { "needs" } else { "need" }
                ),
            )
            .with_hint("the minimum is (nodes) + (nodes × max_pods_per_node) addresses: make pod_cidr larger"),
        );
    } else if net.node_blocks() < nodes {
        v.at(
            &pod_path,
            Diagnostic::error(
                "pod-cidr-blocks",
                format!(
                    "pod_cidr {} holds {} /{} node subnets, but the cluster has {}",
                    net.pod_cidr,
                    net.node_blocks(),
                    net::NODE_CIDR_PREFIX,
                    count(nodes, "node")
                ),
            )
            .with_hint("every node gets a /24 from pod_cidr: make it larger"),
        );
    }
    Some(net)
}

/// "1 node", "3 nodes".
fn count(n: u64, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

fn hosts_outside_cidrs(v: &mut V<'_>, net: &ClusterNet) {
    let plan = v.plan;
    for (i, h) in plan.file.hosts.iter().enumerate() {
        for (key, value) in [("address", &h.address), ("node_ip", &h.node_ip)] {
            let Some(Ok(IpAddr::V4(ip))) = value.as_deref().map(str::parse::<IpAddr>) else {
                continue;
            };
            if let Some(what) = cidr_holding(net, ip) {
                v.at(
                    &format!("hosts[{i}].{key}"),
                    Diagnostic::error(
                        "cidr-overlap",
                        format!("host `{}` {key} {ip} lies inside {what}", h.name),
                    )
                    .with_hint("the pod and service CIDRs must not overlap the hosts' network: pick other CIDRs"),
                );
            }
        }
    }
}

fn cidr_holding(net: &ClusterNet, ip: Ipv4Addr) -> Option<String> {
    if net.pod_cidr.contains(&ip) {
        Some(format!("pod_cidr {}", net.pod_cidr))
    } else if net.service_cidr.contains(&ip) {
        Some(format!("service_cidr {}", net.service_cidr))
    } else {
        None
    }
}

/// `cluster.api_server_sans`: each an IP address or a DNS name kubeadm puts in the
/// certificate (it leaves anything else out with only a log line).
fn api_server_sans(v: &mut V<'_>) {
    let Some(c) = v.plan.file.cluster.as_ref() else {
        return;
    };
    for (i, san) in c.api_server_sans.iter().enumerate() {
        if let Err(why) = syntax::cert_san(san) {
            v.at(
                &format!("cluster.api_server_sans[{i}]"),
                Diagnostic::error(
                    "bad-api-server-san",
                    format!("api_server_sans \"{san}\" is not valid: {why}"),
                )
                .with_hint("write an IP address (\"203.0.113.10\") or a lowercase DNS name (\"api.lab.example.com\", \"*.lab.example.com\")"),
            );
        }
    }
}

fn endpoint(v: &mut V<'_>, net: Option<&ClusterNet>) {
    let Some(ep) = v
        .plan
        .file
        .cluster
        .as_ref()
        .and_then(|c| c.control_plane_endpoint.clone())
    else {
        return;
    };
    match syntax::endpoint(&ep) {
        Err(why) => v.at(
            "cluster.control_plane_endpoint",
            Diagnostic::error(
                "bad-endpoint",
                format!("control_plane_endpoint \"{ep}\" is not valid: {why}"),
            )
            .with_hint("write `host` or `host:port`, e.g. \"k8s-api.lab:6443\""),
        ),
        Ok((host, _)) => {
            if let (Some(net), Ok(IpAddr::V4(ip))) = (net, host.parse::<IpAddr>()) {
                if let Some(what) = cidr_holding(net, ip) {
                    v.at(
                        "cluster.control_plane_endpoint",
                        Diagnostic::error(
                            "cidr-overlap",
                            format!("control_plane_endpoint {ip} lies inside {what}"),
                        ),
                    );
                }
            }
        }
    }
}

fn cni(v: &mut V<'_>) {
    let Some(c) = v.plan.file.cni.as_ref() else {
        if !v.pruned.contains("cni") {
            v.at_key(
                "cluster",
                Diagnostic::error(
                    "cni-missing",
                    "[cluster] needs a pod network: [cni] is missing",
                )
                .with_hint("add [cni] with plugin = \"flannel\" or plugin = \"calico\""),
            );
        }
        return;
    };
    let s = CniSettings::from_cni(c);
    let windows = v.plan.has_windows();
    let backend_path = if v.has("cni.backend") {
        "cni.backend"
    } else {
        "cni.plugin"
    };
    match (s.plugin, s.backend) {
        (CniPlugin::Flannel, CniBackend::Ipip | CniBackend::VxlanCrossSubnet) => v.at(
            backend_path,
            Diagnostic::error(
                "cni-backend",
                format!("flannel has no `{}` backend", backend_name(s.backend)),
            )
            .with_hint("flannel backends: \"vxlan\" (Linux and Windows) or \"host-gw\" (Linux only)"),
        ),
        // No upstream flannel setup runs host-gw (l2bridge) on Windows with containerd: the
        // HostProcess manifests sig-windows-tools shipped (hostprocess/flannel, 2021-2025) were
        // VXLAN overlay only, and its one host-gw manifest (kubeadm/flannel/flannel-host-gw.yml)
        // was the Docker-era rancher/wins layout, removed in ee59f5d (2023), whose l2bridge
        // setup made an Overlay network and left the bridge's host endpoint and routes to
        // scripts for dockershim. Refused rather than rendered half right.
        (CniPlugin::Flannel, CniBackend::HostGw) if windows => v.at(
            backend_path,
            Diagnostic::error(
                "flannel-windows-host-gw",
                "flannel host-gw does not work with Windows nodes: no upstream flannel host-gw (l2bridge) setup exists for Windows on containerd",
            )
            .with_hint("use backend = \"vxlan\" (VNI 4096, UDP 4789), the overlay Windows flannel supports, or keep host-gw for a Linux-only cluster"),
        ),
        (CniPlugin::Calico, CniBackend::HostGw) => v.at(
            backend_path,
            Diagnostic::error("cni-backend", "Calico has no `host-gw` backend")
                .with_hint("use backend = \"vxlan\""),
        ),
        (CniPlugin::Calico, CniBackend::Ipip) if windows => v.at(
            backend_path,
            Diagnostic::error(
                "calico-windows",
                "Calico IP-in-IP does not work with Windows nodes: Windows does not support IP-in-IP encapsulation",
            )
            .with_hint("use backend = \"vxlan\" (IP pool ipipMode: Never, vxlanMode: Always)"),
        ),
        (CniPlugin::Calico, CniBackend::VxlanCrossSubnet) if windows => v.at(
            backend_path,
            Diagnostic::error(
                "calico-windows",
                "Calico VXLAN cross-subnet mode does not work with Windows nodes: Calico for Windows does not support cross-subnet",
            )
            .with_hint("use backend = \"vxlan\" (vxlanMode: Always)"),
        ),
        _ => {}
    }
    let flannel_vxlan = s.plugin == CniPlugin::Flannel && s.backend == CniBackend::Vxlan;
    if c.vni.is_some() && !s.uses_vni() {
        v.at_key(
            "cni.vni",
            Diagnostic::warning(
                "cni-unused",
                "`vni` is the VXLAN network identifier; the host-gw backend does not use it",
            ),
        );
    }
    if c.port.is_some() && !s.is_overlay() {
        v.at_key(
            "cni.port",
            Diagnostic::warning(
                "cni-unused",
                "`port` is the VXLAN port; the host-gw backend does not use it",
            ),
        );
    }
    if flannel_vxlan && windows {
        let why = "Linux and Windows flannel interoperate only with VNI 4096 and UDP port 4789 (Kubernetes docs, \"Adding Windows nodes\")";
        if s.vni != crate::plan::effective::defaults::VXLAN_VNI {
            v.at(
                "cni.vni",
                Diagnostic::error(
                    "flannel-windows-vxlan",
                    format!(
                        "flannel vxlan with Windows nodes needs vni = 4096, not {}",
                        s.vni
                    ),
                )
                .with_hint(why),
            );
        }
        if s.port != crate::plan::effective::defaults::VXLAN_PORT {
            v.at(
                "cni.port",
                Diagnostic::error(
                    "flannel-windows-vxlan",
                    format!(
                        "flannel vxlan with Windows nodes needs port = 4789, not {}",
                        s.port
                    ),
                )
                .with_hint(why),
            );
        }
    }
    if s.is_overlay() {
        windows_2022_overlay(v);
    }
}

fn backend_name(b: CniBackend) -> &'static str {
    match b {
        CniBackend::Vxlan => "vxlan",
        CniBackend::HostGw => "host-gw",
        CniBackend::Ipip => "ipip",
        CniBackend::VxlanCrossSubnet => "vxlan-cross-subnet",
    }
}

/// Windows Server 2022 (build 10.0.20348) on an overlay network has a known NodePort issue;
/// warn where the plan says a node runs that build.
fn windows_2022_overlay(v: &mut V<'_>) {
    let plan = v.plan;
    for (i, h) in plan.file.hosts.iter().enumerate() {
        let Some(build) = h.labels.get("node.kubernetes.io/windows-build") else {
            continue;
        };
        if plan.hosts.get(i).map(|rh| rh.os) != Some(Os::Windows)
            || !build.starts_with("10.0.20348")
        {
            continue;
        }
        let path = PlanPath::root()
            .key("hosts")
            .index(i)
            .key("labels")
            .key("node.kubernetes.io/windows-build")
            .to_string();
        v.at(
            &path,
            Diagnostic::warning(
                "windows-nodeport",
                format!(
                    "`{}` runs Windows Server 2022 on an overlay network: NodePort Services that reach its pods need `externalTrafficPolicy: Local`",
                    h.name
                ),
            )
            .with_hint("a known Windows Server 2022 overlay issue (Kubernetes docs, \"Networking on Windows\"): set externalTrafficPolicy: Local on those Services (flannel's host-gw backend avoids the overlay, but kwin refuses it with Windows nodes: flannel-windows-host-gw)"),
        );
    }
}

fn runtime(v: &mut V<'_>) {
    let plan = v.plan;
    let rt = &plan.file.runtime;
    if let Some(img) = &rt.sandbox_image {
        if let Err(e) = syntax::image_reference(img) {
            v.at(
                "runtime.sandbox_image",
                Diagnostic::error("image-reference", e).with_hint(
                    "an image reference as a registry takes it, e.g. registry.k8s.io/pause:3.10",
                ),
            );
        }
    }
    if rt.windows == RuntimeKind::Docker {
        v.at(
            "runtime.windows",
            Diagnostic::error("docker-windows", "kwin does not run Docker on Windows nodes")
                .with_hint("Docker EE for Windows Server is discontinued, Kubernetes 1.24 removed dockershim (Docker would need cri-dockerd), and the HostProcess pods kwin runs the Windows CNI and kube-proxy in need containerd: use windows = \"containerd\""),
        );
    }
    if rt.linux == RuntimeKind::Docker && !rt.cri_dockerd {
        if let Some(ver) = plan.kubernetes_version() {
            if (ver.major, ver.minor) >= DOCKERSHIM_REMOVED {
                v.at(
                    "runtime.linux",
                    Diagnostic::error(
                        "docker-cri-dockerd",
                        format!("Docker on Kubernetes {ver} needs cri-dockerd: the kubelet has no dockershim since 1.24"),
                    )
                    .with_hint("set runtime.cri_dockerd = true to install cri-dockerd, or use linux = \"containerd\""),
                );
            }
        }
    }
    if rt.linux != RuntimeKind::Docker {
        if rt.cri_dockerd {
            v.at_key(
                "runtime.cri_dockerd",
                Diagnostic::warning(
                    "runtime-unused",
                    "`cri_dockerd` only matters with runtime.linux = \"docker\"",
                ),
            );
        }
        if v.has("versions.cri_dockerd") {
            v.at_key(
                "versions.cri_dockerd",
                Diagnostic::warning(
                    "runtime-unused",
                    "`versions.cri_dockerd` only matters with runtime.linux = \"docker\"",
                ),
            );
        }
    }
}

fn versions(v: &mut V<'_>) {
    let vs = &v.plan.file.versions;
    for (key, val) in [
        ("containerd", &vs.containerd),
        ("flannel", &vs.flannel),
        ("calico", &vs.calico),
        ("runc", &vs.runc),
        ("cni_plugins", &vs.cni_plugins),
        ("crictl", &vs.crictl),
        ("cri_dockerd", &vs.cri_dockerd),
    ] {
        if let Some(s) = val {
            if let Err(why) = syntax::version(s, true) {
                v.at(
                    &format!("versions.{key}"),
                    Diagnostic::error(
                        "bad-version",
                        format!("versions.{key} \"{s}\" is not valid: {why}"),
                    )
                    .with_hint("write a release version such as \"1.7.24\" or \"v0.26.2\""),
                );
            }
        }
    }
    let plugin = v.plan.file.cni.as_ref().map(|c| c.plugin);
    for (key, needs) in [
        ("flannel", CniPlugin::Flannel),
        ("calico", CniPlugin::Calico),
    ] {
        let path = format!("versions.{key}");
        if v.has(&path) && plugin.is_some_and(|p| p != needs) {
            v.at_key(
                &path,
                Diagnostic::warning(
                    "version-unused",
                    format!("versions.{key} is set, but the pod network is not {key}"),
                ),
            );
        }
    }
}

fn artifacts_and_proxy(v: &mut V<'_>) {
    let f = &v.plan.file;
    if let Some(u) = f
        .cluster
        .as_ref()
        .and_then(|c| c.verify_egress_url.as_ref())
    {
        if let Err(why) = syntax::http_url(u) {
            v.at(
                "cluster.verify_egress_url",
                Diagnostic::error(
                    "bad-url",
                    format!(
                        "cluster.verify_egress_url \"{}\" is not valid: {why}",
                        syntax::url_without_userinfo(u)
                    ),
                ),
            );
        }
    }
    if let Some(m) = &f.artifacts.mirror {
        if let Err(why) = syntax::http_url(m) {
            v.at(
                "artifacts.mirror",
                Diagnostic::error(
                    "bad-url",
                    format!(
                        "artifacts.mirror \"{}\" is not valid: {why}",
                        syntax::url_without_userinfo(m)
                    ),
                ),
            );
        } else if syntax::url_userinfo(m).is_some() {
            v.at(
                "artifacts.mirror",
                Diagnostic::error(
                    "bad-url",
                    "artifacts.mirror holds credentials (`user@` / `user:password@`): they would reach every host's scripts and kwin's logs",
                )
                .with_hint("serve the mirror without credentials, or restrict it by network"),
            );
        }
    }
    for (registry, urls) in &f.artifacts.registry_mirrors {
        let path = PlanPath::root()
            .key("artifacts")
            .key("registry_mirrors")
            .key(registry)
            .to_string();
        if registry != "_default" && syntax::endpoint(registry).is_err() {
            v.at(
                &path,
                Diagnostic::error(
                    "registry-mirror",
                    format!(
                        "`{registry}` is not a registry host (a host name or IP address with an optional `:port`, as an image reference starts, or `_default`)"
                    ),
                )
                .with_hint("e.g. \"registry.k8s.io\", \"docker.io\", \"ghcr.io\", \"myregistry.example.com:5000\""),
            );
        }
        let urls = urls.to_vec();
        if urls.is_empty() {
            v.at(
                &path,
                Diagnostic::error(
                    "registry-mirror",
                    format!("the mirrors of `{registry}` are an empty list"),
                )
                .with_hint("name at least one mirror URL, or remove the entry"),
            );
        }
        for u in &urls {
            if let Err(why) = syntax::http_url(u) {
                v.at(
                    &path,
                    Diagnostic::error(
                        "registry-mirror",
                        format!(
                            "mirror \"{}\" of `{registry}` is not valid: {why}",
                            syntax::url_without_userinfo(u)
                        ),
                    ),
                );
            } else if syntax::url_userinfo(u).is_some() {
                v.at(
                    &path,
                    Diagnostic::error(
                        "registry-mirror",
                        format!("mirror of `{registry}` holds credentials (`user@` / `user:password@`): they would be written into every node's containerd configuration"),
                    )
                    .with_hint("give pull credentials to the pods (imagePullSecrets), not to the mirror URL"),
                );
            }
        }
    }
    for (name, sum) in &f.artifacts.sha256 {
        if let Err(why) = syntax::sha256_hex(sum) {
            let path = PlanPath::root()
                .key("artifacts")
                .key("sha256")
                .key(name)
                .to_string();
            v.at(
                &path,
                Diagnostic::error(
                    "bad-checksum",
                    format!("checksum of `{name}` is not valid: {why}"),
                ),
            );
        }
    }
    for (name, fp) in &f.artifacts.openpgp {
        if syntax::normalize_fingerprint(fp).is_none() {
            let path = PlanPath::root()
                .key("artifacts")
                .key("openpgp")
                .key(name)
                .to_string();
            v.at(
                &path,
                Diagnostic::error(
                    "bad-checksum",
                    format!(
                        "fingerprint of `{name}` is not an OpenPGP fingerprint (40 hex digits)"
                    ),
                ),
            );
        }
    }
    if let Some(p) = &f.proxy {
        for (key, val) in [("http", &p.http), ("https", &p.https)] {
            let Some(u) = val else { continue };
            let shown = syntax::url_without_userinfo(u);
            if let Err(why) = syntax::http_url(u) {
                v.at(
                    &format!("proxy.{key}"),
                    Diagnostic::error(
                        "bad-url",
                        format!(
                            "proxy.{key} \"{}\" is not valid: {why}",
                            shown.escape_debug()
                        ),
                    ),
                );
            } else if syntax::url_userinfo(u).is_some() {
                v.at(
                    &format!("proxy.{key}"),
                    Diagnostic::error(
                        "proxy-credentials",
                        format!(
                            "proxy.{key} \"{shown}\" holds credentials: plan text is shown, logged and written readable to every user"
                        ),
                    )
                    .with_hint("put `user:password` in an environment variable or a file and name it: proxy.credentials_env = \"KWIN_PROXY_CREDENTIALS\" or proxy.credentials_file = \"secrets/proxy\""),
                );
            }
        }
        for (i, e) in p.no_proxy.iter().enumerate() {
            if let Err(why) = syntax::no_proxy_entry(e) {
                let path = PlanPath::root()
                    .key("proxy")
                    .key("no_proxy")
                    .index(i)
                    .to_string();
                v.at(
                    &path,
                    Diagnostic::error(
                        "bad-no-proxy",
                        format!(
                            "proxy.no_proxy entry \"{}\" is not valid: {why}",
                            e.escape_debug()
                        ),
                    ),
                );
            }
        }
        let cred_key = match (&p.credentials_env, &p.credentials_file) {
            (Some(_), Some(_)) => {
                v.at(
                    "proxy.credentials_file",
                    Diagnostic::error(
                        "proxy-credentials",
                        "give proxy.credentials_env or proxy.credentials_file, not both",
                    ),
                );
                Some("proxy.credentials_env")
            }
            (Some(var), None) => {
                if var.is_empty() || var.contains(['=', ' ', '\t', '\0']) {
                    v.at(
                        "proxy.credentials_env",
                        Diagnostic::error(
                            "bad-env-var",
                            format!(
                                "`credentials_env` = \"{var}\" is not an environment variable name"
                            ),
                        ),
                    );
                }
                Some("proxy.credentials_env")
            }
            (None, Some(_)) => Some("proxy.credentials_file"),
            (None, None) => None,
        };
        if let Some(key) = cred_key {
            if p.http.is_none() && p.https.is_none() {
                v.at(
                    key,
                    Diagnostic::error(
                        "proxy-credentials",
                        "proxy credentials without proxy.http or proxy.https",
                    ),
                );
            }
            if v.plan.file.cluster.is_some()
                && v.plan
                    .hosts
                    .iter()
                    .any(|h| h.os == crate::plan::Os::Windows)
            {
                v.at(
                    key,
                    Diagnostic::error(
                        "proxy-credentials",
                        "proxy credentials with Windows hosts: kwin sets the proxy on Windows as machine environment variables, which every local user can read",
                    )
                    .with_hint("give the Windows hosts a proxy that needs no credentials (e.g. one that authorises by address)"),
                );
            }
        }
    }
}
