//! `kube_uncordon`: take kwin's cordon off a Node once it runs what it was drained for.
//!
//! Parameters: the fields of [`KubeUncordonParams`], shown by `kwin doc kube_uncordon` and in
//! docs/modules.md. Runs on the first control plane with its admin kubeconfig.
//!
//! No-op when the Node carries no `kwin.dev/cordoned` mark: kwin uncordons only what it
//! cordoned (a node an administrator cordoned stays cordoned). Changes: waits until the Node
//! is Ready and reports kubelet `until.kubelet` (a kubelet restarted at the new version posts
//! it; a Ready from the old kubelet does not count) and, when given, container runtime
//! `containerd://<until.containerd>` (the kubelet asks the runtime its version for every node
//! status it writes), then removes `spec.unschedulable` and the mark in one merge patch. A
//! timeout names what the node reports instead.
//!
//! ```toml
//! [[tasks]]
//! name = "uncordon-lw1"
//! module = "kube_uncordon"
//! on = { hosts = ["cp1"] }
//! params = { node = "lw1", until = { kubelet = "1.32.5", containerd = "1.7.27" }, timeout = "5m" }
//! ```

use super::drain::{uncordon_patch, Until, Want};
use super::node::{node_param, NodeFact, NodeState};
use super::script::{kubectl, TEMP_DIR};
use super::{parse_duration, ADMIN_CONF, API_RESOURCE};
use crate::paths::posix_abs_line;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KubeUncordonParams {
    /// The Node.
    node: String,
    /// What the node must report before it is uncordoned.
    until: Until,
    /// How long to wait for it (default `"5m"`).
    #[schemars(with = "Option<super::DurationParam>")]
    timeout: Option<serde_json::Value>,
    /// The cluster (default `/etc/kubernetes/admin.conf`).
    kubeconfig: Option<String>,
}

#[derive(Debug, Clone)]
pub struct KubeUncordon {
    node: String,
    want: Want,
    timeout_secs: u64,
    kubeconfig: String,
}

impl Described for KubeUncordon {
    const NAME: &'static str = "kube_uncordon";
    const DOC: &'static str =
        "uncordons a Node kwin cordoned, once it is Ready at a given kubelet (and container runtime) version";
    type Params = KubeUncordonParams;

    fn from_params(p: KubeUncordonParams, _shell: Shell) -> Result<Self, ParamError> {
        let kubeconfig = p.kubeconfig.unwrap_or_else(|| ADMIN_CONF.to_string());
        posix_abs_line("kubeconfig", &kubeconfig)?;
        node_param(&p.node)?;
        let want = Want::of(&p.until)?;
        let timeout_secs = match &p.timeout {
            Some(v) => parse_duration("timeout", v)?.max(1),
            None => 300,
        };
        Ok(KubeUncordon {
            node: p.node,
            want,
            timeout_secs,
            kubeconfig,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![FactSample::kube(NodeFact::new("n1", ADMIN_CONF))]
    }
}

impl KubeUncordon {
    fn fact(&self) -> NodeFact {
        NodeFact::new(&self.node, &self.kubeconfig)
    }

    /// Wait for Ready at the versions, then one patch.
    pub fn script(&self) -> String {
        let k = kubectl(&self.kubeconfig);
        let n = sh_quote(&self.node);
        // The runtime last: an empty one (a Node no kubelet has posted yet) shifts nothing.
        let jp = sh_quote(
            r#"{.status.nodeInfo.kubeletVersion}{" "}{range .status.conditions[?(@.type=="Ready")]}{.status}{end}{" "}{.status.nodeInfo.containerRuntimeVersion}"#,
        );
        let (runtime_ok, runtime_want) = match &self.want.runtime {
            Some(rt) => (
                format!(" && [ \"${{3:-}}\" = {} ]", sh_quote(rt)),
                format!(" and runtime {rt}"),
            ),
            None => (String::new(), String::new()),
        };
        format!(
            "{TEMP_DIR}k() {{ {k} --request-timeout=30s \"$@\"; }}\n\
             deadline=$(( $(date +%s) + {t} ))\n\
             while :; do\n\
             \x20 row=$(k get node {n} -o jsonpath={jp} 2> \"$d/err\") || row=\"unknown unknown\"\n\
             \x20 set -- $row\n\
             \x20 if [ \"${{1:-}} ${{2:-}}\" = {want} ]{runtime_ok}; then break; fi\n\
             \x20 if [ \"$(date +%s)\" -ge \"$deadline\" ]; then\n\
             \x20   printf 'timed out after %ss waiting for %s to be Ready at kubelet %s%s: it reports kubelet %s, Ready=%s, runtime %s\\n' {t} {n} {v} {rw} \"${{1:-none}}\" \"${{2:-unknown}}\" \"${{3:-none}}\" >&2\n\
             \x20   cat \"$d/err\" >&2\n\
             \x20   exit 1\n\
             \x20 fi\n\
             \x20 sleep 3\n\
             done\n\
             k patch node {n} --type=merge -p {patch} >/dev/null || exit 1\n",
            t = self.timeout_secs,
            want = sh_quote(&format!("{} True", self.want.kubelet)),
            v = sh_quote(&self.want.kubelet),
            rw = sh_quote(&runtime_want),
            patch = sh_quote(&uncordon_patch()),
        )
    }
}

impl Module for KubeUncordon {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&self.fact(), shell)]
    }

    fn reads(&self) -> Vec<String> {
        vec![API_RESOURCE.to_string(), self.kubeconfig.clone()]
    }

    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let node = match facts.get(&self.fact())? {
            NodeState::NoCluster(nc) => {
                return Ok(Plan::noop(format!(
                    "nothing to uncordon: {}",
                    nc.describe(&self.kubeconfig)
                )))
            }
            NodeState::Absent => {
                return Ok(Plan::noop(format!(
                    "node {} is not registered: nothing to uncordon",
                    self.node
                )))
            }
            NodeState::Node(n) => n,
        };
        let Some(mark) = &node.mark else {
            return Ok(Plan::noop(if node.unschedulable {
                format!("{} is cordoned, but not by kwin: left as it is", self.node)
            } else {
                format!("{} is schedulable", self.node)
            }));
        };
        Ok(Plan::Change(Change {
            action: Action::Run,
            reason: format!(
                "{} is cordoned by kwin ({mark}): uncordon once it is Ready at {} (now {}{}{})",
                self.node,
                self.want.describe(),
                node.kubelet,
                match &self.want.runtime {
                    Some(_) => format!(", {}", super::drain::runtime_words(&node.runtime)),
                    None => String::new(),
                },
                if node.ready { ", Ready" } else { ", not Ready" }
            ),
            diff: Some(format!("node {}: uncordon\n", self.node)),
            steps: vec![Step::Run(self.script())],
            touches: Touches::Resources(vec![API_RESOURCE.to_string()]),
        }))
    }
}
