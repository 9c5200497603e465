//! The cluster's address plan: pod/service CIDRs, DNS service IP and pod network settings
//! parsed (defaults from `effective::defaults`), and the CIDR arithmetic the validation rules
//! use. [`super::effective::Effective`] reads the parsed values from here.
//!
//! Rules (Kubernetes "adding Windows nodes" address plan): the pod CIDR must hold
//! `nodes + nodes × max_pods_per_node` addresses and one /24 per node (kubeadm's default node
//! CIDR mask for IPv4); the DNS service IP lies inside the service CIDR; the pod CIDR, the
//! service CIDR and the hosts' addresses do not overlap.

use super::effective::defaults;
use super::model::{Cluster, Cni, CniBackend, CniPlugin};
use ipnet::Ipv4Net;
use std::net::{IpAddr, Ipv4Addr};

/// The per-node pod subnet prefix (kube-controller-manager `--node-cidr-mask-size` for IPv4,
/// as kubeadm sets it).
pub const NODE_CIDR_PREFIX: u8 = 24;
/// The largest service CIDR kube-apiserver accepts for IPv4 is a /12.
pub const MIN_SERVICE_PREFIX: u8 = 12;

/// The effective address plan of `[cluster]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNet {
    pub pod_cidr: Ipv4Net,
    pub service_cidr: Ipv4Net,
    pub dns_service_ip: Ipv4Addr,
    pub max_pods_per_node: u32,
    pub dns_domain: String,
}

/// One field of `[cluster]` that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetError {
    /// The key under `cluster`, e.g. `pod_cidr`.
    pub field: &'static str,
    pub message: String,
    pub hint: Option<String>,
}

impl ClusterNet {
    /// The effective values of `cluster` with defaults applied; every field that does not
    /// parse is an error. Cross-field rules (overlaps, sizes) are checked by validation.
    pub fn from_cluster(c: &Cluster) -> Result<ClusterNet, Vec<NetError>> {
        let mut errors = Vec::new();
        let mut cidr = |field: &'static str, value: Option<&str>, default: &str| {
            let v = value.unwrap_or(default);
            match parse_cidr(v) {
                Ok(n) => Some(n),
                Err((message, hint)) => {
                    errors.push(NetError {
                        field,
                        message,
                        hint,
                    });
                    None
                }
            }
        };
        let pod = cidr("pod_cidr", c.pod_cidr.as_deref(), defaults::POD_CIDR);
        let service = cidr(
            "service_cidr",
            c.service_cidr.as_deref(),
            defaults::SERVICE_CIDR,
        );
        let dns = match (&c.dns_service_ip, service) {
            (Some(s), _) => match s.parse::<IpAddr>() {
                Ok(IpAddr::V4(ip)) => Some(ip),
                Ok(IpAddr::V6(_)) => {
                    errors.push(NetError {
                        field: "dns_service_ip",
                        message: format!("\"{s}\" is IPv6; kwin builds IPv4 clusters"),
                        hint: None,
                    });
                    None
                }
                Err(_) => {
                    errors.push(NetError {
                        field: "dns_service_ip",
                        message: format!("\"{s}\" is not an IPv4 address"),
                        hint: None,
                    });
                    None
                }
            },
            (None, Some(svc)) => Some(default_dns_ip(&svc)),
            (None, None) => None,
        };
        match (pod, service, dns) {
            (Some(pod_cidr), Some(service_cidr), Some(dns_service_ip)) if errors.is_empty() => {
                Ok(ClusterNet {
                    pod_cidr,
                    service_cidr,
                    dns_service_ip,
                    max_pods_per_node: c.max_pods_per_node.unwrap_or(defaults::MAX_PODS_PER_NODE),
                    dns_domain: c
                        .dns_domain
                        .clone()
                        .unwrap_or_else(|| defaults::DNS_DOMAIN.to_string()),
                })
            }
            _ => Err(errors),
        }
    }

    /// Addresses the pod CIDR must hold for `nodes` nodes: `nodes + nodes × max_pods`.
    pub fn pod_addresses_needed(&self, nodes: u64) -> u64 {
        nodes + nodes * u64::from(self.max_pods_per_node)
    }

    /// How many per-node /24 blocks the pod CIDR holds (0 if it is smaller than a /24).
    pub fn node_blocks(&self) -> u64 {
        blocks(&self.pod_cidr, NODE_CIDR_PREFIX)
    }

    /// The `kubernetes` Service's ClusterIP: the first address of the service CIDR.
    pub fn api_service_ip(&self) -> Ipv4Addr {
        nth(&self.service_cidr, 1)
    }
}

/// Parse an IPv4 CIDR. Errors: (message, hint).
pub fn parse_cidr(s: &str) -> Result<Ipv4Net, (String, Option<String>)> {
    if !s.contains('/') {
        return Err((
            format!("\"{s}\" is not a CIDR (no /prefix)"),
            Some("write it as address/prefix, e.g. \"10.244.0.0/16\"".into()),
        ));
    }
    match s.parse::<ipnet::IpNet>() {
        Ok(ipnet::IpNet::V4(n)) => {
            if n.trunc() != n {
                Err((
                    format!("\"{s}\" has host bits set"),
                    Some(format!("did you mean \"{}\"?", n.trunc())),
                ))
            } else {
                Ok(n)
            }
        }
        Ok(ipnet::IpNet::V6(_)) => {
            Err((format!("\"{s}\" is IPv6; kwin builds IPv4 clusters"), None))
        }
        Err(_) => Err((format!("\"{s}\" is not a valid IPv4 CIDR"), None)),
    }
}

/// The default cluster DNS address: the .10 address of the service CIDR (10.96.0.10 for
/// 10.96.0.0/12).
pub fn default_dns_ip(service: &Ipv4Net) -> Ipv4Addr {
    nth(service, 10)
}

/// The `n`th address of `net` (not checked to lie inside it).
pub fn nth(net: &Ipv4Net, n: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(net.network()).wrapping_add(n))
}

/// Number of addresses in `net`.
pub fn size(net: &Ipv4Net) -> u64 {
    1u64 << (32 - u32::from(net.prefix_len()))
}

/// How many subnets of length `prefix` fit in `net`.
pub fn blocks(net: &Ipv4Net, prefix: u8) -> u64 {
    if net.prefix_len() > prefix {
        0
    } else {
        1u64 << (prefix - net.prefix_len())
    }
}

/// Whether two networks share any address.
pub fn overlaps(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// Why `ip` cannot be the cluster DNS address in `service`, if it cannot.
pub fn dns_ip_problem(ip: Ipv4Addr, service: &Ipv4Net) -> Option<String> {
    if !service.contains(&ip) {
        return Some(format!("{ip} is outside service_cidr {service}"));
    }
    if ip == service.network() {
        return Some(format!("{ip} is the network address of {service}"));
    }
    if ip == service.broadcast() {
        return Some(format!("{ip} is the broadcast address of {service}"));
    }
    if ip == nth(service, 1) {
        return Some(format!(
            "{ip} is the first address of {service}, which the `kubernetes` API Service takes"
        ));
    }
    None
}

/// The effective `[cni]` settings with defaults applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CniSettings {
    pub plugin: CniPlugin,
    pub backend: CniBackend,
    /// VXLAN network identifier (flannel vxlan, Calico: [`CniSettings::uses_vni`]).
    pub vni: u32,
    /// VXLAN UDP port.
    pub port: u16,
}

impl CniSettings {
    pub fn from_cni(c: &Cni) -> CniSettings {
        CniSettings {
            plugin: c.plugin,
            backend: c.backend.unwrap_or(CniBackend::Vxlan),
            vni: c.vni.unwrap_or(defaults::VXLAN_VNI),
            port: c.port.unwrap_or(defaults::VXLAN_PORT),
        }
    }

    /// Whether pod traffic between nodes is encapsulated (an overlay network).
    pub fn is_overlay(&self) -> bool {
        self.backend != CniBackend::HostGw
    }

    /// Whether the pod network reads `vni`: every VXLAN network kwin builds does. flannel's
    /// vxlan backend takes it as net-conf.json `Backend.VNI` (recipe cni-flannel); Calico's
    /// Felix as FelixConfiguration `vxlanVNI` (recipe cni-calico renders it for every Calico
    /// backend, the VXLAN pool kwin makes), which the operator also gives Calico's Windows
    /// dataplane (tigera/operator@40788b9b pkg/controller/installation/windows_controller.go:
    /// `VXLANVNI: *felixConfiguration.Spec.VXLANVNI`, rendered as `VXLAN_VNI` by
    /// pkg/render/windows.go). Only flannel host-gw has no VXLAN to read it.
    pub fn uses_vni(&self) -> bool {
        self.is_overlay()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> Ipv4Net {
        s.parse().expect("test CIDR")
    }

    fn cluster() -> Cluster {
        Cluster {
            name: "c".into(),
            kubernetes_version: "1.31.4".into(),
            pod_cidr: None,
            service_cidr: None,
            dns_service_ip: None,
            max_pods_per_node: None,
            control_plane_endpoint: None,
            api_server_sans: Vec::new(),
            dns_domain: None,
            windows_taint: None,
            windows_runtime_classes: None,
            windows_pending_reboot: None,
            allow_cgroup_v1: None,
            kube_proxy_conntrack_max_per_core: None,
            verify: None,
            verify_egress_url: None,
        }
    }

    #[test]
    fn defaults_follow_the_address_plan() {
        let n = ClusterNet::from_cluster(&cluster()).expect("defaults parse");
        assert_eq!(n.pod_cidr, net("10.244.0.0/16"));
        assert_eq!(n.service_cidr, net("10.96.0.0/12"));
        assert_eq!(n.dns_service_ip, Ipv4Addr::new(10, 96, 0, 10));
        assert_eq!(n.max_pods_per_node, 110);
        assert_eq!(n.api_service_ip(), Ipv4Addr::new(10, 96, 0, 1));
        let mut c = cluster();
        c.service_cidr = Some("172.20.0.0/16".into());
        let n = ClusterNet::from_cluster(&c).expect("parses");
        assert_eq!(n.dns_service_ip, Ipv4Addr::new(172, 20, 0, 10));
    }

    #[test]
    fn bad_fields_are_each_reported() {
        let mut c = cluster();
        c.pod_cidr = Some("10.244.1.0/16".into());
        c.service_cidr = Some("fd00::/108".into());
        c.dns_service_ip = Some("x".into());
        let errs = ClusterNet::from_cluster(&c).expect_err("bad");
        let fields: Vec<&str> = errs.iter().map(|e| e.field).collect();
        assert_eq!(fields, ["pod_cidr", "service_cidr", "dns_service_ip"]);
        assert_eq!(
            errs[0].hint.as_deref(),
            Some("did you mean \"10.244.0.0/16\"?")
        );
        assert!(parse_cidr("10.244.0.0").is_err());
    }

    #[test]
    fn cidr_sizes_blocks_and_overlaps_are_computed() {
        // The seed's example: 5 nodes × 100 pods need 505 addresses.
        let mut c = cluster();
        c.max_pods_per_node = Some(100);
        let n = ClusterNet::from_cluster(&c).expect("parses");
        assert_eq!(n.pod_addresses_needed(5), 505);
        assert_eq!(n.node_blocks(), 256);
        assert_eq!(size(&net("10.244.0.0/16")), 65536);
        assert_eq!(blocks(&net("10.244.0.0/23"), 24), 2);
        assert_eq!(blocks(&net("10.244.0.0/25"), 24), 0);
        assert!(overlaps(&net("10.0.0.0/8"), &net("10.96.0.0/12")));
        assert!(overlaps(&net("10.96.0.0/12"), &net("10.0.0.0/8")));
        assert!(!overlaps(&net("10.244.0.0/16"), &net("10.96.0.0/12")));
        assert!(overlaps(&net("10.1.2.3/32"), &net("10.1.0.0/16")));
    }

    #[test]
    fn the_dns_service_ip_must_be_a_usable_service_address() {
        let svc = net("10.96.0.0/12");
        assert_eq!(dns_ip_problem(Ipv4Addr::new(10, 96, 0, 10), &svc), None);
        assert!(dns_ip_problem(Ipv4Addr::new(10, 96, 0, 0), &svc)
            .expect("network")
            .contains("network address"));
        assert!(dns_ip_problem(Ipv4Addr::new(10, 111, 255, 255), &svc)
            .expect("broadcast")
            .contains("broadcast"));
        assert!(dns_ip_problem(Ipv4Addr::new(10, 96, 0, 1), &svc)
            .expect("api")
            .contains("kubernetes"));
        assert!(dns_ip_problem(Ipv4Addr::new(10, 112, 0, 10), &svc)
            .expect("outside")
            .contains("outside"));
    }
}
