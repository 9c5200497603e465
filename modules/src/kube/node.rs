//! The fact `kube_drain` and `kube_uncordon` read: one Node as the API server has it (its
//! kubelet and runtime versions, Ready, cordon, kwin's mark) and the pods bound to it.
//!
//! kwin's memory of what it cordoned is the Node annotation [`CORDON_MARK`], set in the same
//! merge patch that sets `spec.unschedulable` and removed in the same patch that clears it:
//! one object, one write each way, in etcd, so it outlives the process and the controller
//! machine. A node an administrator cordoned carries no mark, and kwin never uncordons it.

use super::facts::{header, script_key, NoCluster};
use super::script::{cluster_guard, kubectl, TEMP_DIR};
use kwin_engine::fact::{Fact, FactError, FactOutput};
use kwin_engine::module::ParamError;
use kwin_engine::plan::syntax;
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;

pub use super::upgrade::cluster::CORDON_MARK;

/// The Node `name` and its pods, read with `kubeconfig`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFact {
    pub script: String,
}

impl NodeFact {
    pub fn new(name: &str, kubeconfig: &str) -> NodeFact {
        let k = kubectl(kubeconfig);
        let n = sh_quote(name);
        let mark = CORDON_MARK.replace('.', "\\.");
        let node_jp = sh_quote(&format!(
            r#"{{.status.nodeInfo.kubeletVersion}}{{"\t"}}{{.status.nodeInfo.containerRuntimeVersion}}{{"\t"}}{{.spec.unschedulable}}{{"\t"}}{{range .status.conditions[?(@.type=="Ready")]}}{{.status}}{{end}}{{"\t"}}{{.metadata.annotations.{mark}}}{{"\n"}}"#
        ));
        let pods_jp = sh_quote(
            r#"{range .items[*]}{.metadata.namespace}/{.metadata.name}{"\t"}{.metadata.ownerReferences[0].kind}{"\n"}{end}"#,
        );
        let selector = sh_quote(&format!("spec.nodeName={name}"));
        NodeFact {
            script: format!(
                "{guard}{TEMP_DIR}\
                 if ! {k} get node {n} -o jsonpath={node_jp} > \"$d/node\" 2> \"$d/err\"; then\n\
                 \x20 if grep -q 'NotFound' \"$d/err\"; then echo 'kwin: absent'; exit 0; fi\n\
                 \x20 cat \"$d/err\" >&2; exit 1\n\
                 fi\n\
                 echo 'kwin: node'\n\
                 cat \"$d/node\"\n\
                 {k} get pods --all-namespaces --field-selector {selector} -o jsonpath={pods_jp} || exit 1\n",
                guard = cluster_guard(kubeconfig),
            ),
        }
    }
}

/// What [`NodeFact`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeState {
    NoCluster(NoCluster),
    /// No Node of that name is registered.
    Absent,
    Node(NodeInfo),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// As reported: `v1.32.5`.
    pub kubelet: String,
    /// As reported: `containerd://1.7.24`.
    pub runtime: String,
    pub unschedulable: bool,
    pub ready: bool,
    /// kwin's [`CORDON_MARK`], when kwin cordoned the node and has not uncordoned it.
    pub mark: Option<String>,
    /// `namespace/name` and the kind of the pod's first owner (empty: no owner).
    pub pods: Vec<(String, String)>,
}

impl NodeInfo {
    /// The pods a drain evicts: all but the DaemonSets' (kubectl drain `--ignore-daemonsets`)
    /// and the kubelet's mirror pods (owner kind `Node`), which drain never deletes.
    pub fn evicted(&self) -> Vec<&(String, String)> {
        self.pods
            .iter()
            .filter(|(_, kind)| kind != "DaemonSet" && kind != "Node")
            .collect()
    }
}

impl Fact for NodeFact {
    type Output = NodeState;
    fn key(&self) -> String {
        script_key("kube.node", &self.script)
    }
    fn command(&self, shell: Shell) -> String {
        match shell {
            Shell::Posix => self.script.clone(),
            Shell::PowerShell => {
                "Write-Error 'kube_drain and kube_uncordon run on a POSIX control plane'".into()
            }
        }
    }
    fn parse(&self, out: &FactOutput) -> Result<NodeState, FactError> {
        parse_node(out)
    }
}

/// Parse a [`NodeFact`] answer.
pub fn parse_node(out: &FactOutput) -> Result<NodeState, FactError> {
    let (state, lines) = header(out)?;
    if let Some(nc) = NoCluster::from_state(&state) {
        return Ok(NodeState::NoCluster(nc));
    }
    match state.as_str() {
        "absent" => return Ok(NodeState::Absent),
        "node" => {}
        _ => return Err(FactError::Parse(format!("unknown state `{state}`"))),
    }
    let mut lines = lines.into_iter();
    let first = lines
        .next()
        .ok_or_else(|| FactError::Parse("no node line".into()))?;
    let f: Vec<&str> = first.split('\t').collect();
    let [kubelet, runtime, unschedulable, ready, mark] = f[..] else {
        return Err(FactError::Parse(format!("unexpected node line {first:?}")));
    };
    let pods = lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| match l.split_once('\t') {
            Some((p, k)) => (p.to_string(), k.trim().to_string()),
            None => (l.trim().to_string(), String::new()),
        })
        .collect();
    Ok(NodeState::Node(NodeInfo {
        kubelet: kubelet.to_string(),
        runtime: runtime.to_string(),
        unschedulable: unschedulable == "true",
        ready: ready == "True",
        mark: (!mark.trim().is_empty()).then(|| mark.trim().to_string()),
        pods,
    }))
}

/// `v1.32.5` for `1.32.5` or `v1.32.5`: how the API server reports a kubelet.
pub fn v_prefixed(version: &str) -> String {
    format!("v{}", version.trim_start_matches('v'))
}

/// The `node` parameter: a Node name as the plan's host names are ([`syntax::node_name`],
/// the one check), else the param error every module gives.
pub fn node_param(node: &str) -> Result<(), ParamError> {
    node_name_param("node", node)
}

/// `value` of parameter `field` is a Node name ([`syntax::node_name`]).
pub fn node_name_param(field: &str, value: &str) -> Result<(), ParamError> {
    syntax::node_name(value)
        .map_err(|why| ParamError::at(field, format!("`{value}` is not a Node name: {why}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(s: &str) -> FactOutput {
        FactOutput {
            exit: 0,
            stdout: s.as_bytes().to_vec(),
            stderr: Vec::new(),
        }
    }

    #[test]
    fn node_lines() {
        let s = parse_node(&out(
            "kwin: node\nv1.31.4\tcontainerd://1.7.24\ttrue\tTrue\tupgrade 2026-11-25T03:15:00Z\nkube-system/kube-proxy-x\tDaemonSet\ndefault/web-1\tReplicaSet\ndefault/bare\t\nkube-system/kube-apiserver-cp1\tNode\n",
        ))
        .expect("parses");
        let NodeState::Node(n) = s else {
            panic!("{s:?}")
        };
        assert_eq!(n.kubelet, "v1.31.4");
        assert!(n.unschedulable && n.ready);
        assert_eq!(n.mark.as_deref(), Some("upgrade 2026-11-25T03:15:00Z"));
        let evicted: Vec<&str> = n.evicted().iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(evicted, ["default/web-1", "default/bare"]);
        let s = parse_node(&out("kwin: node\nv1.31.4\t\t\tFalse\t\n")).expect("parses");
        assert!(matches!(
            s,
            NodeState::Node(NodeInfo {
                unschedulable: false,
                ready: false,
                mark: None,
                ..
            })
        ));
        assert_eq!(parse_node(&out("kwin: absent\n")), Ok(NodeState::Absent));
        assert!(parse_node(&out("kwin: node\nv1.31.4\n")).is_err());
        assert!(parse_node(&out("kwin: what\n")).is_err());
    }

    #[test]
    fn a_version_gets_one_v_prefix_as_the_api_server_reports_kubelets() {
        assert_eq!(v_prefixed("1.32.5"), "v1.32.5");
        assert_eq!(v_prefixed("v1.32.5"), "v1.32.5");
    }
}
