//! What a running cluster runs: every kube-apiserver's version, the version kubeadm last
//! upgraded the cluster to, and every Node's kubelet. Read with `kubectl` on the first control
//! plane in one script; parsed by [`parse`] (pure, tested on captured `kubectl` JSON).
//!
//! Sources (what kubeadm itself reads):
//! - kube-apiserver versions: the image tag of each `component=kube-apiserver` mirror pod in
//!   kube-system, as kubeadm's `UnupgradedControlPlaneInstances`
//!   (kubernetes/kubernetes `cmd/kubeadm/app/cmd/phases/upgrade/addons.go` @ `88b93957`).
//!   A load-balanced `kubectl version` answers with whichever apiserver it reached, so it is
//!   not used for decisions.
//! - the cluster version: `kubernetesVersion` of the `ClusterConfiguration` in the
//!   kube-system/kubeadm-config ConfigMap, which `kubeadm upgrade apply` rewrites when it
//!   finishes (kubeadm `cmd/kubeadm/app/phases/uploadconfig/uploadconfig.go`).
//! - kubelets: `status.nodeInfo.kubeletVersion` of each Node; container runtimes:
//!   `status.nodeInfo.containerRuntimeVersion` (`containerd://1.7.24`, what the kubelet writes
//!   from the runtime's CRI `Version`).

use semver::Version;
use serde_json::Value;
use std::collections::BTreeMap;

/// The annotation kwin sets on a Node in the same patch that cordons it, and removes in the
/// same patch that uncordons it: kwin uncordons only what it cordoned.
pub const CORDON_MARK: &str = "kwin.dev/cordoned";

/// What the first control plane says about the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterState {
    /// No admin kubeconfig: the cluster is not initialised (a fresh build).
    New,
    /// Initialised, but the API server did not answer: the skew cannot be checked.
    Unreachable(String),
    Running(ClusterFacts),
}

/// The running versions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterFacts {
    /// Node name → the version its kube-apiserver mirror pod runs.
    pub apiservers: BTreeMap<String, Version>,
    /// kubeadm-config's `kubernetesVersion`, when present.
    pub cluster_version: Option<Version>,
    /// Node name → what the Node reports.
    pub nodes: BTreeMap<String, NodeFacts>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFacts {
    /// `None` when the Node reports no kubelet version (created, never posted by a kubelet).
    pub kubelet: Option<Version>,
    /// `containerd://1.7.24`, as the Node reports it (`None`: not reported).
    pub runtime: Option<String>,
    pub ready: bool,
    pub unschedulable: bool,
    /// `kwin.dev/cordoned`, when kwin cordoned the node and has not uncordoned it yet.
    pub kwin_mark: Option<String>,
}

/// The POSIX script that answers [`parse`]: sections behind `kwin: <section>` lines.
/// `kubeconfig` is quoted by the caller's rules: it is passed through `sh_quote`.
pub fn script(kubeconfig: &str) -> String {
    let kc = kwin_engine::quote::sh_quote(kubeconfig);
    format!(
        r#"if [ ! -e {kc} ]; then echo 'kwin: new'; exit 0; fi
k() {{ kubectl --kubeconfig {kc} --request-timeout=20s "$@"; }}
if ! err=$(k get --raw /readyz 2>&1); then echo 'kwin: unreachable'; printf '%s\n' "$err"; exit 0; fi
echo 'kwin: running'
echo 'kwin: apiservers'
k -n kube-system get pods -l component=kube-apiserver -o json || exit 1
echo 'kwin: kubeadm-config'
k -n kube-system get configmap kubeadm-config -o 'jsonpath={{.data.ClusterConfiguration}}' 2>/dev/null
echo
echo 'kwin: nodes'
k get nodes -o json || exit 1
"#
    )
}

/// The sections of [`script`]'s answer.
pub fn parse(stdout: &str) -> Result<ClusterState, String> {
    let text = stdout.replace("\r\n", "\n");
    let mut sections: Vec<(&str, String)> = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("kwin: ") {
            sections.push((name.trim(), String::new()));
        } else if let Some((_, body)) = sections.last_mut() {
            body.push_str(line);
            body.push('\n');
        } else if !line.trim().is_empty() {
            return Err(format!("expected a `kwin:` header, got {line:?}"));
        }
    }
    let get = |name: &str| {
        sections
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, b)| b.as_str())
    };
    match sections.first().map(|(n, _)| *n) {
        Some("new") => return Ok(ClusterState::New),
        Some("unreachable") => {
            return Ok(ClusterState::Unreachable(
                get("unreachable").unwrap_or_default().trim().to_string(),
            ))
        }
        Some("running") => {}
        other => return Err(format!("unexpected cluster state {other:?}")),
    }
    let section = |name: &str| get(name).ok_or_else(|| format!("no `{name}` section"));
    Ok(ClusterState::Running(ClusterFacts {
        apiservers: apiservers(section("apiservers")?)?,
        cluster_version: cluster_version(get("kubeadm-config").unwrap_or_default())?,
        nodes: nodes(section("nodes")?)?,
    }))
}

fn json(text: &str, what: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("{what}: not JSON ({e})"))
}

/// A Kubernetes version as reported (`v1.31.4`, `v1.31.4+k3s1`, `1.31.4`).
pub fn kube_version(s: &str) -> Result<Version, String> {
    let bare = s.trim().trim_start_matches('v');
    Version::parse(bare).map_err(|_| format!("`{s}` is not a Kubernetes version"))
}

/// Node → the tag of its kube-apiserver mirror pod's `kube-apiserver` container.
fn apiservers(text: &str) -> Result<BTreeMap<String, Version>, String> {
    let v = json(text, "kube-apiserver pods")?;
    let mut out = BTreeMap::new();
    for pod in v["items"].as_array().into_iter().flatten() {
        let name = pod["metadata"]["name"].as_str().unwrap_or("?");
        let Some(node) = pod["spec"]["nodeName"].as_str() else {
            continue;
        };
        let container = pod["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["name"] == "kube-apiserver")
            .ok_or_else(|| format!("pod {name} has no kube-apiserver container"))?;
        let image = container["image"].as_str().unwrap_or_default();
        let tag = image
            .rsplit_once(':')
            .map(|(_, t)| t)
            .filter(|t| !t.contains('/'))
            .ok_or_else(|| format!("pod {name}: image `{image}` has no version tag"))?;
        let tag = tag.split('@').next().unwrap_or(tag);
        out.insert(
            node.to_string(),
            kube_version(tag).map_err(|e| format!("pod {name}: {e}"))?,
        );
    }
    Ok(out)
}

/// `kubernetesVersion: v1.31.4` of a ClusterConfiguration (YAML; the key is top level).
fn cluster_version(text: &str) -> Result<Option<Version>, String> {
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("kubernetesVersion:") {
            let v = rest.trim().trim_matches(|c| c == '"' || c == '\'');
            return kube_version(v)
                .map(Some)
                .map_err(|e| format!("kubeadm-config: {e}"));
        }
    }
    Ok(None)
}

fn nodes(text: &str) -> Result<BTreeMap<String, NodeFacts>, String> {
    let v = json(text, "nodes")?;
    let mut out = BTreeMap::new();
    for node in v["items"].as_array().into_iter().flatten() {
        let Some(name) = node["metadata"]["name"].as_str() else {
            continue;
        };
        let kubelet = node["status"]["nodeInfo"]["kubeletVersion"]
            .as_str()
            .filter(|v| !v.is_empty());
        let runtime = node["status"]["nodeInfo"]["containerRuntimeVersion"]
            .as_str()
            .filter(|v| !v.is_empty())
            .map(str::to_string);
        let ready = node["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        out.insert(
            name.to_string(),
            NodeFacts {
                kubelet: kubelet
                    .map(|v| kube_version(v).map_err(|e| format!("node {name}: {e}")))
                    .transpose()?,
                runtime,
                ready,
                unschedulable: node["spec"]["unschedulable"].as_bool().unwrap_or(false),
                kwin_mark: node["metadata"]["annotations"][CORDON_MARK]
                    .as_str()
                    .map(str::to_string),
            },
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(node: &str, image: &str) -> Value {
        serde_json::json!({
            "metadata": {"name": format!("kube-apiserver-{node}")},
            "spec": {"nodeName": node, "containers": [
                {"name": "kube-apiserver", "image": image}
            ]}
        })
    }

    fn node(name: &str, kubelet: &str, ready: bool, unschedulable: bool) -> Value {
        serde_json::json!({
            "metadata": {"name": name, "annotations": {}},
            "spec": {"unschedulable": unschedulable},
            "status": {
                "nodeInfo": {"kubeletVersion": kubelet, "containerRuntimeVersion": "containerd://1.7.24"},
                "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]
            }
        })
    }

    fn answer(pods: &[Value], config: &str, nodes: &[Value]) -> String {
        format!(
            "kwin: running\nkwin: apiservers\n{}\nkwin: kubeadm-config\n{config}\nkwin: nodes\n{}\n",
            serde_json::json!({"items": pods}),
            serde_json::json!({"items": nodes})
        )
    }

    #[test]
    fn a_running_cluster_is_read_from_mirror_pods_kubeadm_config_and_nodes() {
        let out = answer(
            &[
                pod("cp1", "registry.k8s.io/kube-apiserver:v1.31.4"),
                pod("cp2", "my.registry:5000/kube-apiserver:v1.32.5"),
            ],
            "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.31.4\n",
            &[
                node("cp1", "v1.31.4", true, false),
                node("w1", "v1.30.2", false, true),
            ],
        );
        let ClusterState::Running(f) = parse(&out).expect("parses") else {
            panic!("not running")
        };
        assert_eq!(f.apiservers["cp1"], Version::new(1, 31, 4));
        // A registry with a port is not mistaken for the tag.
        assert_eq!(f.apiservers["cp2"], Version::new(1, 32, 5));
        assert_eq!(f.cluster_version, Some(Version::new(1, 31, 4)));
        assert_eq!(f.nodes["w1"].kubelet, Some(Version::new(1, 30, 2)));
        assert_eq!(
            f.nodes["w1"].runtime.as_deref(),
            Some("containerd://1.7.24")
        );
        assert!(f.nodes["cp1"].ready && !f.nodes["w1"].ready);
        assert!(f.nodes["w1"].unschedulable);
    }

    #[test]
    fn new_unreachable_and_broken_answers() {
        assert_eq!(parse("kwin: new\n"), Ok(ClusterState::New));
        assert_eq!(
            parse("kwin: unreachable\nThe connection to the server 10.0.0.1:6443 was refused\n"),
            Ok(ClusterState::Unreachable(
                "The connection to the server 10.0.0.1:6443 was refused".into()
            ))
        );
        assert!(parse("garbage").is_err());
        assert!(parse("kwin: running\nkwin: apiservers\n{not json\n").is_err());
        // A Node no kubelet has posted status for has no version: not an error.
        let bare = answer(
            &[pod("cp1", "registry.k8s.io/kube-apiserver:v1.31.4")],
            "",
            &[serde_json::json!({"metadata": {"name": "n"}, "spec": {}, "status": {}})],
        );
        let Ok(ClusterState::Running(f)) = parse(&bare) else {
            panic!("a bare Node is read")
        };
        assert_eq!(f.nodes["n"].kubelet, None);
        assert_eq!(f.nodes["n"].runtime, None);
        let untagged = answer(&[pod("cp1", "registry.k8s.io/kube-apiserver")], "", &[]);
        assert!(parse(&untagged)
            .expect_err("no tag")
            .contains("no version tag"));
    }

    #[test]
    fn the_script_quotes_the_kubeconfig() {
        let s = script("/tmp/a b'c");
        assert!(s.contains(&kwin_engine::quote::sh_quote("/tmp/a b'c")));
        assert!(!s.contains("/tmp/a b'c "));
    }
}
