//! kubeadm's configuration as kwin writes it: the one owner of the documents `kubeadm init`
//! and `kubeadm join` read.
//!
//! - `kubeadm init` (recipe control-plane, step `kubeadm-config`): the template function
//!   `kubeadm_init_config(host, cluster)` ([`init_config`]) renders InitConfiguration,
//!   ClusterConfiguration and KubeletConfiguration as YAML into
//!   `/etc/kubernetes/kubeadm-config.yaml`. It holds no secret: the bootstrap token is made
//!   later by `kube_join_data`.
//! - `kubeadm join` (module `kubeadm_join`): [`join_config`] renders the JoinConfiguration,
//!   with the join inputs (secrets), as JSON into the join step's script only.
//! - `kubeadm upgrade` reads no configuration file kwin writes (`kubeadm upgrade apply
//!   <version>` / `kubeadm upgrade node` use the cluster's kubeadm-config ConfigMap).
//!
//! Both documents are built by the functions below from one [`Node`] (the node's
//! registration, shared by init and join) into one [`Doc`] tree, so a field is added once:
//! one line in the function of its document (a KubeletConfiguration setting such as
//! `failCgroupV1` is one `.put("failCgroupV1", Doc::Bool(..))` in [`init_config`]; a node
//! registration setting one line in `Node::registration`, which init and join share; the
//! plan value behind it one field of [`HostArg`] / [`ClusterArg`] and of the `kubeadm_join`
//! params). [`Doc::yaml`] writes kwin's constants bare and
//! every value from the plan JSON-quoted (a YAML string whatever it holds: `"1.30"` stays
//! text); [`Doc::json`] is the same tree as JSON.
//!
//! API versions ([`ApiVersion::for_minor`]): `kubeadm.k8s.io/v1beta4` from 1.31 ("kubeadm
//! Configuration (v1beta4)", kubernetes.io/docs/reference/config-api/kubeadm-config.v1beta4,
//! "v1.31: ... Replace the existing string/string extra argument maps with structured extra
//! arguments", which applies to `NodeRegistrationOptions.KubeletExtraArgs`), v1beta3 from
//! 1.22 ("kubeadm v1.22.x and later no longer support v1beta1 and older APIs, but can be used
//! to migrate v1beta2 to v1beta3", kubernetes.io/docs/reference/config-api/
//! kubeadm-config.v1beta3), v1beta2 before.

use super::syntax::Taint;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The taint kubeadm gives control planes by default (kubeadm's
/// `constants.ControlPlaneTaint`); kwin keeps it when the plan gives a control plane its own
/// taints, since a `taints` list replaces kubeadm's default.
pub const CONTROL_PLANE_TAINT: &str = "node-role.kubernetes.io/control-plane";

/// kubeadm's configuration API version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ApiVersion {
    V1beta2,
    V1beta3,
    V1beta4,
}

impl ApiVersion {
    /// The version kwin writes for kubeadm of Kubernetes minor `minor` (module docs).
    pub fn for_minor(minor: u32) -> ApiVersion {
        match minor {
            31.. => ApiVersion::V1beta4,
            22.. => ApiVersion::V1beta3,
            _ => ApiVersion::V1beta2,
        }
    }

    /// Every version, newest first, with the first minor that reads it: what a join script
    /// that learns the kubeadm version on the host chooses from.
    pub const ALL: [(ApiVersion, u32); 3] = [
        (ApiVersion::V1beta4, 31),
        (ApiVersion::V1beta3, 22),
        (ApiVersion::V1beta2, 0),
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ApiVersion::V1beta2 => "kubeadm.k8s.io/v1beta2",
            ApiVersion::V1beta3 => "kubeadm.k8s.io/v1beta3",
            ApiVersion::V1beta4 => "kubeadm.k8s.io/v1beta4",
        }
    }
}

/// A node's registration with the cluster: `nodeRegistration` of InitConfiguration and
/// JoinConfiguration, and what a control plane advertises.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub cri_socket: Option<String>,
    /// The kubelet's `--node-ip`.
    pub node_ip: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub control_plane: bool,
    /// A control plane's API server address (`localAPIEndpoint.advertiseAddress`; kwin's
    /// recipes give the node IP).
    pub advertise_address: Option<String>,
    /// kubeadm preflight checks to ignore (`nodeRegistration.ignorePreflightErrors`).
    pub ignore_preflight_errors: Vec<String>,
}

impl Node {
    /// The kubelet's extra arguments: `node-ip`, `node-labels`.
    fn kubelet_extra_args(&self) -> Vec<(&'static str, String)> {
        let mut extra = Vec::new();
        if let Some(ip) = &self.node_ip {
            extra.push(("node-ip", ip.clone()));
        }
        if !self.labels.is_empty() {
            let labels: Vec<String> = self
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            extra.push(("node-labels", labels.join(",")));
        }
        extra
    }

    /// `nodeRegistration` for `api`.
    fn registration(&self, api: ApiVersion) -> Doc {
        let mut reg = Doc::map().str("name", &self.name);
        if let Some(s) = &self.cri_socket {
            reg = reg.str("criSocket", s);
        }
        let extra = self.kubelet_extra_args();
        if !extra.is_empty() {
            let args = if api >= ApiVersion::V1beta4 {
                Doc::List(
                    extra
                        .iter()
                        .map(|(k, v)| Doc::map().str("name", k).str("value", v))
                        .collect(),
                )
            } else {
                Doc::Map(
                    extra
                        .iter()
                        .map(|(k, v)| (k.to_string(), Doc::Str(v.clone())))
                        .collect(),
                )
            };
            reg = reg.put("kubeletExtraArgs", args);
        }
        // No taints given: kubeadm's default (none for workers, the control-plane taint for
        // control planes). Given: exactly these, after the control-plane taint on control
        // planes.
        if !self.taints.is_empty() {
            let mut list = Vec::new();
            if self.control_plane {
                list.push(
                    Doc::map()
                        .bare("key", CONTROL_PLANE_TAINT)
                        .bare("effect", "NoSchedule"),
                );
            }
            for t in &self.taints {
                let mut o = Doc::map().str("key", &t.key);
                if let Some(v) = &t.value {
                    o = o.str("value", v);
                }
                list.push(o.str("effect", &t.effect));
            }
            reg = reg.put("taints", Doc::List(list));
        }
        if !self.ignore_preflight_errors.is_empty() {
            reg = reg.put(
                "ignorePreflightErrors",
                Doc::List(
                    self.ignore_preflight_errors
                        .iter()
                        .map(|e| Doc::Str(e.clone()))
                        .collect(),
                ),
            );
        }
        reg
    }
}

/// The cluster-wide settings of `kubeadm init`: ClusterConfiguration and
/// KubeletConfiguration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    pub name: String,
    /// "1.31.4".
    pub kubernetes_version: String,
    pub minor: u32,
    pub control_plane_endpoint: String,
    pub api_server_port: u16,
    /// `cluster.api_server_sans`: ClusterConfiguration `apiServer.certSANs`, the API server
    /// certificate's names besides kubeadm's own (kubeadm-config v1beta2–v1beta4,
    /// `APIServer.CertSANs`; the control planes that join later read it from the cluster's
    /// kubeadm-config, so their certificates name them too).
    pub api_server_sans: Vec<String>,
    pub pod_cidr: String,
    pub service_cidr: String,
    pub dns_domain: String,
    pub dns_service_ip: String,
    pub max_pods_per_node: u32,
    /// The kubelet's `cgroupDriver` ("systemd" | "cgroupfs": the plan's
    /// `runtime.cgroup_driver`).
    pub cgroup_driver: String,
    /// The kubelet's `failCgroupV1`, when kwin sets it: `Some(false)` where the plan allows
    /// cgroup v1 on a minor whose kubelet refuses it by default (kubernetes/kubernetes
    /// #134298; minikube does the same, kubernetes/minikube@eb25dbc7
    /// pkg/minikube/bootstrapper/bsutil/kubeadm.go).
    pub fail_cgroup_v1: Option<bool>,
    /// kube-proxy's `conntrack.maxPerCore`, when the plan sets it: a fourth document,
    /// KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1, the version kubeadm reads:
    /// k8s.io/kubernetes@v1.37.2 cmd/kubeadm/app/componentconfigs/kubeproxy.go).
    pub conntrack_max_per_core: Option<u32>,
}

/// The three documents of `kubeadm init --config` for the first control plane `node`
/// (YAML, documents joined by `---`, ending in a newline).
pub fn init_config(node: &Node, cluster: &Cluster) -> String {
    let api = ApiVersion::for_minor(cluster.minor);
    let mut init = Doc::map()
        .bare("apiVersion", api.as_str())
        .bare("kind", "InitConfiguration")
        .put("nodeRegistration", node.registration(api));
    if let Some(ip) = &node.advertise_address {
        init = init.put(
            "localAPIEndpoint",
            Doc::map()
                .str("advertiseAddress", ip)
                .put("bindPort", Doc::Int(i64::from(cluster.api_server_port))),
        );
    }
    let mut cluster_config = Doc::map()
        .bare("apiVersion", api.as_str())
        .bare("kind", "ClusterConfiguration")
        .str("clusterName", &cluster.name)
        .str(
            "kubernetesVersion",
            &format!("v{}", cluster.kubernetes_version),
        )
        .str("controlPlaneEndpoint", &cluster.control_plane_endpoint);
    if !cluster.api_server_sans.is_empty() {
        let sans = cluster
            .api_server_sans
            .iter()
            .map(|s| Doc::Str(s.clone()))
            .collect();
        cluster_config =
            cluster_config.put("apiServer", Doc::map().put("certSANs", Doc::List(sans)));
    }
    let cluster_config = cluster_config.put(
        "networking",
        Doc::map()
            .str("podSubnet", &cluster.pod_cidr)
            .str("serviceSubnet", &cluster.service_cidr)
            .str("dnsDomain", &cluster.dns_domain),
    );
    let mut kubelet = Doc::map()
        .bare("apiVersion", "kubelet.config.k8s.io/v1beta1")
        .bare("kind", "KubeletConfiguration")
        .str("cgroupDriver", &cluster.cgroup_driver);
    if let Some(fail) = cluster.fail_cgroup_v1 {
        kubelet = kubelet.put("failCgroupV1", Doc::Bool(fail));
    }
    let kubelet = kubelet
        .put("maxPods", Doc::Int(i64::from(cluster.max_pods_per_node)))
        .put(
            "clusterDNS",
            Doc::List(vec![Doc::Str(cluster.dns_service_ip.clone())]),
        )
        .str("clusterDomain", &cluster.dns_domain);
    let mut docs = vec![init, cluster_config, kubelet];
    if let Some(n) = cluster.conntrack_max_per_core {
        docs.push(
            Doc::map()
                .bare("apiVersion", "kubeproxy.config.k8s.io/v1alpha1")
                .bare("kind", "KubeProxyConfiguration")
                .put(
                    "conntrack",
                    Doc::map().put("maxPerCore", Doc::Int(i64::from(n))),
                ),
        );
    }
    docs.iter().map(Doc::yaml).collect::<Vec<_>>().join("---\n")
}

/// What a joining node reads from the first control plane (secrets: only for the join
/// script).
#[derive(Debug, Clone)]
pub struct Discovery<'a> {
    pub api_endpoint: &'a str,
    pub token: &'a str,
    pub ca_cert_hash: &'a str,
    /// Control planes: the key of the uploaded certificates.
    pub certificate_key: Option<&'a str>,
}

/// The JoinConfiguration of `node` for `api`, as JSON (which kubeadm reads as YAML), ending
/// in a newline. Holds the token.
pub fn join_config(node: &Node, api: ApiVersion, discovery: &Discovery<'_>) -> String {
    let mut cfg = Doc::map()
        .bare("apiVersion", api.as_str())
        .bare("kind", "JoinConfiguration")
        .put(
            "discovery",
            Doc::map().put(
                "bootstrapToken",
                Doc::map()
                    .str("apiServerEndpoint", discovery.api_endpoint)
                    .str("token", discovery.token)
                    .put(
                        "caCertHashes",
                        Doc::List(vec![Doc::Str(discovery.ca_cert_hash.to_string())]),
                    ),
            ),
        )
        .put("nodeRegistration", node.registration(api));
    if node.control_plane {
        let mut cp = Doc::map();
        if let Some(a) = &node.advertise_address {
            cp = cp.put("localAPIEndpoint", Doc::map().str("advertiseAddress", a));
        }
        if let Some(k) = discovery.certificate_key {
            cp = cp.str("certificateKey", k);
        }
        cfg = cfg.put("controlPlane", cp);
    }
    let mut s = serde_json::to_string_pretty(&cfg.json()).unwrap_or_default();
    s.push('\n');
    s
}

/// The parts of the template context `kubeadm_init_config(host, cluster)` reads (the
/// `host` and `cluster` variables, `plan::effective`).
#[derive(Debug, Deserialize)]
pub struct HostArg {
    name: String,
    cri_socket: Option<String>,
    node_ip: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    taints: Vec<String>,
    #[serde(default)]
    is_control_plane: bool,
}

/// See [`HostArg`].
#[derive(Debug, Deserialize)]
pub struct ClusterArg {
    name: String,
    kubernetes_version: String,
    minor_version: u32,
    control_plane_endpoint: String,
    api_server_port: u16,
    #[serde(default)]
    api_server_sans: Vec<String>,
    pod_cidr: String,
    service_cidr: String,
    dns_domain: String,
    dns_service_ip: String,
    max_pods_per_node: u32,
    kubelet_cgroup_driver: String,
    #[serde(default)]
    allow_cgroup_v1: bool,
    #[serde(default)]
    kubelet_fails_cgroup_v1: bool,
    #[serde(default)]
    kube_proxy_conntrack_max_per_core: Option<u32>,
}

/// `kubeadm_init_config(host, cluster)`: [`init_config`] of the template context's values.
/// A taint validation let through would be a bug; it is an error here too.
pub fn init_config_of(host: HostArg, cluster: ClusterArg) -> Result<String, String> {
    let taints = host
        .taints
        .iter()
        .map(|t| Taint::parse(t).map_err(|e| format!("taint `{t}`: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let node = Node {
        name: host.name,
        cri_socket: host.cri_socket,
        advertise_address: host.node_ip.clone(),
        node_ip: host.node_ip,
        labels: host.labels,
        taints,
        control_plane: host.is_control_plane,
        ignore_preflight_errors: Vec::new(),
    };
    let cluster = Cluster {
        name: cluster.name,
        kubernetes_version: cluster.kubernetes_version,
        minor: cluster.minor_version,
        control_plane_endpoint: cluster.control_plane_endpoint,
        api_server_port: cluster.api_server_port,
        api_server_sans: cluster.api_server_sans,
        pod_cidr: cluster.pod_cidr,
        service_cidr: cluster.service_cidr,
        dns_domain: cluster.dns_domain,
        dns_service_ip: cluster.dns_service_ip,
        max_pods_per_node: cluster.max_pods_per_node,
        cgroup_driver: cluster.kubelet_cgroup_driver,
        fail_cgroup_v1: (cluster.allow_cgroup_v1 && cluster.kubelet_fails_cgroup_v1)
            .then_some(false),
        conntrack_max_per_core: cluster.kube_proxy_conntrack_max_per_core,
    };
    Ok(init_config(&node, &cluster))
}

/// A configuration document: maps keep their order (the order kubeadm's reference lists
/// the fields in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Doc {
    /// A value from the plan: a JSON-quoted string in YAML.
    Str(String),
    /// A constant of kwin's (API versions, kinds, fixed settings): written as it is.
    Bare(&'static str),
    Int(i64),
    Bool(bool),
    List(Vec<Doc>),
    Map(Vec<(String, Doc)>),
}

impl Doc {
    fn map() -> Doc {
        Doc::Map(Vec::new())
    }

    /// This map with `key: value` added.
    fn put(mut self, key: &str, value: Doc) -> Doc {
        if let Doc::Map(items) = &mut self {
            items.push((key.to_string(), value));
        }
        self
    }

    fn str(self, key: &str, value: &str) -> Doc {
        self.put(key, Doc::Str(value.to_string()))
    }

    fn bare(self, key: &str, value: &'static str) -> Doc {
        self.put(key, Doc::Bare(value))
    }

    /// The document as JSON (keys sorted, as `serde_json` maps are).
    pub fn json(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Doc::Str(s) => Value::String(s.clone()),
            Doc::Bare(s) => Value::String(s.to_string()),
            Doc::Int(n) => Value::from(*n),
            Doc::Bool(b) => Value::Bool(*b),
            Doc::List(items) => Value::Array(items.iter().map(Doc::json).collect()),
            Doc::Map(items) => {
                Value::Object(items.iter().map(|(k, v)| (k.clone(), v.json())).collect())
            }
        }
    }

    /// The document as block YAML, each line ending in a newline. Lists sit two columns in
    /// from their key; keys that are not plain words are quoted.
    pub fn yaml(&self) -> String {
        let mut out = String::new();
        if let Doc::Map(items) = self {
            write_map(&mut out, items, 0, false);
        } else {
            out.push_str(&scalar(self));
            out.push('\n');
        }
        out
    }
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

fn key(k: &str) -> String {
    let plain = k.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && k.chars().all(|c| c.is_ascii_alphanumeric());
    if plain {
        k.to_string()
    } else {
        quote(k)
    }
}

fn scalar(d: &Doc) -> String {
    match d {
        Doc::Str(s) => quote(s),
        Doc::Bare(s) => s.to_string(),
        Doc::Int(n) => n.to_string(),
        Doc::Bool(b) => b.to_string(),
        Doc::List(_) => "[]".into(),
        Doc::Map(_) => "{}".into(),
    }
}

/// `items` at `indent`; `inline`: the first key follows a `- ` already written.
fn write_map(out: &mut String, items: &[(String, Doc)], indent: usize, inline: bool) {
    for (i, (k, v)) in items.iter().enumerate() {
        if !(inline && i == 0) {
            out.push_str(&" ".repeat(indent));
        }
        out.push_str(&key(k));
        out.push(':');
        write_value(out, v, indent);
    }
}

/// The value of a key at `indent`: on the key's line, or the lines below it.
fn write_value(out: &mut String, v: &Doc, indent: usize) {
    match v {
        Doc::Map(items) if !items.is_empty() => {
            out.push('\n');
            write_map(out, items, indent + 2, false);
        }
        Doc::List(items) if !items.is_empty() => {
            out.push('\n');
            for item in items {
                out.push_str(&" ".repeat(indent + 2));
                out.push_str("- ");
                match item {
                    Doc::Map(m) if !m.is_empty() => write_map(out, m, indent + 4, true),
                    other => {
                        out.push_str(&scalar(other));
                        out.push('\n');
                    }
                }
            }
        }
        other => {
            out.push(' ');
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> Node {
        Node {
            name: "cp1".into(),
            cri_socket: Some("unix:///run/containerd/containerd.sock".into()),
            node_ip: Some("10.0.0.10".into()),
            labels: [("example.com/tier".to_string(), "infra".to_string())].into(),
            taints: vec![Taint::parse("dedicated=infra:NoSchedule").expect("taint")],
            control_plane: true,
            advertise_address: Some("10.0.0.10".into()),
            ignore_preflight_errors: Vec::new(),
        }
    }

    fn cluster(minor: u32) -> Cluster {
        Cluster {
            name: "lab".into(),
            kubernetes_version: format!("1.{minor}.2"),
            minor,
            control_plane_endpoint: "10.0.0.10:6443".into(),
            api_server_port: 6443,
            api_server_sans: Vec::new(),
            pod_cidr: "10.244.0.0/16".into(),
            service_cidr: "10.96.0.0/12".into(),
            dns_domain: "cluster.local".into(),
            dns_service_ip: "10.96.0.10".into(),
            max_pods_per_node: 110,
            cgroup_driver: "systemd".into(),
            fail_cgroup_v1: None,
            conntrack_max_per_core: None,
        }
    }

    /// `cluster.kube_proxy_conntrack_max_per_core` is a KubeProxyConfiguration of its own after
    /// the kubelet's; unset, kubeadm's configuration has three documents as before.
    #[test]
    fn kube_proxy_conntrack_is_a_fourth_document_only_when_the_plan_sets_it() {
        let mut c = cluster(36);
        c.conntrack_max_per_core = Some(0);
        let text = init_config(&node(), &c);
        assert!(
            text.ends_with(
                "---\napiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nconntrack:\n  maxPerCore: 0\n"
            ),
            "{text}"
        );
        let plain = init_config(&node(), &cluster(36));
        assert_eq!(
            plain.matches("\n---\n").count() + usize::from(plain.starts_with("---")),
            2,
            "{plain}"
        );
        assert!(!plain.contains("KubeProxyConfiguration"));
    }

    /// `cluster.api_server_sans` are the ClusterConfiguration's `apiServer.certSANs`, each a
    /// string from the plan; none, no `apiServer`.
    #[test]
    fn api_server_sans_are_the_cluster_configuration_s_cert_sans() {
        let mut c = cluster(31);
        c.api_server_sans = vec!["203.0.113.10".into(), "api.lab.example.com".into()];
        let text = init_config(&node(), &c);
        assert!(
            text.contains(
                "controlPlaneEndpoint: \"10.0.0.10:6443\"\napiServer:\n  certSANs:\n    - \"203.0.113.10\"\n    - \"api.lab.example.com\"\nnetworking:"
            ),
            "{text}"
        );
        assert!(!init_config(&node(), &cluster(31)).contains("apiServer"));
    }

    #[test]
    fn api_versions_change_at_1_22_and_1_31() {
        assert_eq!(ApiVersion::for_minor(21), ApiVersion::V1beta2);
        assert_eq!(ApiVersion::for_minor(22), ApiVersion::V1beta3);
        assert_eq!(ApiVersion::for_minor(30), ApiVersion::V1beta3);
        assert_eq!(ApiVersion::for_minor(31), ApiVersion::V1beta4);
        for (api, from) in ApiVersion::ALL {
            assert_eq!(ApiVersion::for_minor(from.max(1)), api);
        }
    }

    #[test]
    fn init_config_writes_the_node_and_the_cluster_as_block_yaml() {
        let text = init_config(&node(), &cluster(31));
        let expected = r#"apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
nodeRegistration:
  name: "cp1"
  criSocket: "unix:///run/containerd/containerd.sock"
  kubeletExtraArgs:
    - name: "node-ip"
      value: "10.0.0.10"
    - name: "node-labels"
      value: "example.com/tier=infra"
  taints:
    - key: node-role.kubernetes.io/control-plane
      effect: NoSchedule
    - key: "dedicated"
      value: "infra"
      effect: "NoSchedule"
localAPIEndpoint:
  advertiseAddress: "10.0.0.10"
  bindPort: 6443
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
clusterName: "lab"
kubernetesVersion: "v1.31.2"
controlPlaneEndpoint: "10.0.0.10:6443"
networking:
  podSubnet: "10.244.0.0/16"
  serviceSubnet: "10.96.0.0/12"
  dnsDomain: "cluster.local"
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: "systemd"
maxPods: 110
clusterDNS:
  - "10.96.0.10"
clusterDomain: "cluster.local"
"#;
        assert_eq!(text, expected);
        let v3 = init_config(&node(), &cluster(30));
        assert!(
            v3.contains("  kubeletExtraArgs:\n    \"node-ip\": \"10.0.0.10\"\n    \"node-labels\": \"example.com/tier=infra\"\n"),
            "{v3}"
        );
    }

    #[test]
    fn init_and_join_register_the_node_alike() {
        let d = Discovery {
            api_endpoint: "10.0.0.10:6443",
            token: "abcdef.0123456789abcdef",
            ca_cert_hash: "sha256:00",
            certificate_key: Some("k"),
        };
        for minor in [30, 31] {
            let api = ApiVersion::for_minor(minor);
            let join: serde_json::Value =
                serde_json::from_str(&join_config(&node(), api, &d)).expect("json");
            assert_eq!(join["nodeRegistration"], node().registration(api).json());
            assert_eq!(join["apiVersion"], api.as_str());
            assert_eq!(
                join["controlPlane"]["localAPIEndpoint"]["advertiseAddress"],
                "10.0.0.10"
            );
        }
    }

    #[test]
    fn plan_values_stay_strings_in_yaml() {
        let d = Doc::map()
            .str("a", "1.30")
            .str("b", "say \"hi\"\n")
            .put("c-d", Doc::Int(3))
            .put("e", Doc::Bool(false));
        assert_eq!(
            d.yaml(),
            "a: \"1.30\"\nb: \"say \\\"hi\\\"\\n\"\n\"c-d\": 3\ne: false\n"
        );
        assert_eq!(d.json()["e"], serde_json::Value::Bool(false));
    }
}
