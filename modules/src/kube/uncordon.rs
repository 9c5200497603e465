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
//! status it writes), in a status its kubelet posted after kwin cordoned it: the Ready
//! condition's `lastHeartbeatTime` later than the time in kwin's mark (`upgrade
//! 2026-11-25T03:15:00Z`, written by `kube_drain` with the cordon; a mark without a time
//! counts from this step's start). A Ready from before the cordon proves nothing: after a
//! restart (recipe windows-reboot) the Node still shows the Ready its kubelet posted before
//! it went down until the node lifecycle controller marks it Unknown (40 s without a Lease
//! renewal) or the restarted kubelet posts again. The kubelet stamps the heartbeat on every
//! status it posts, at once when the status changed (a restarted kubelet, a new version) and
//! else every `nodeStatusReportFrequency`, 5m by default (kubernetes/kubernetes v1.28.0
//! pkg/kubelet/kubelet_node_status.go `tryUpdateNodeStatus`: `changed ||
//! kl.clock.Since(kl.lastStatusReportTime) >= kl.nodeStatusReportFrequency`;
//! KubeletConfiguration reference, `nodeStatusReportFrequency`, default "5m"), so a node whose
//! kubelet did not restart is uncordoned within that period. The Lease's `renewTime` is not
//! proof enough: a restarted kubelet may renew its Lease before it posts its first status.
//! The heartbeat is the node's clock and the mark the control plane's: their clocks must
//! agree (a node clock behind the control plane's delays the uncordon, and its timeout says
//! so). Then it removes `spec.unschedulable` and the mark in one merge patch. A timeout names
//! what the node reports instead.
//!
//! ```toml
//! [[tasks]]
//! name = "uncordon-lw1"
//! module = "kube_uncordon"
//! on = { hosts = ["cp1"] }
//! params = { node = "lw1", until = { kubelet = "1.32.5", containerd = "1.7.27" }, timeout = "5m" }
//! ```

use super::drain::{uncordon_patch, Until, Want};
use super::node::{node_param, NodeFact, NodeState, CORDON_MARK};
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
        "uncordons a Node kwin cordoned, once it is Ready at a given kubelet (and container runtime) version in a status posted after the cordon";
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

    /// Wait for Ready at the versions, posted after kwin's cordon, then one patch.
    pub fn script(&self) -> String {
        let k = kubectl(&self.kubeconfig);
        let n = sh_quote(&self.node);
        // One `|`-separated row: each condition field in a range of its own, so a Node
        // without a Ready condition still gives five fields.
        let jp = sh_quote(&format!(
            r#"{{.status.nodeInfo.kubeletVersion}}{{"|"}}{{range .status.conditions[?(@.type=="Ready")]}}{{.status}}{{end}}{{"|"}}{{range .status.conditions[?(@.type=="Ready")]}}{{.lastHeartbeatTime}}{{end}}{{"|"}}{{.status.nodeInfo.containerRuntimeVersion}}{{"|"}}{{.metadata.annotations.{}}}"#,
            CORDON_MARK.replace('.', "\\.")
        ));
        let (runtime_ok, runtime_want) = match &self.want.runtime {
            Some(rt) => (
                format!(" && [ \"${{4:-}}\" = {} ]", sh_quote(rt)),
                format!(" and runtime {rt}"),
            ),
            None => (String::new(), String::new()),
        };
        format!(
            "{TEMP_DIR}k() {{ {k} --request-timeout=30s \"$@\"; }}\n\
             digits() {{ printf '%s' \"$1\" | tr -dc 0-9; }}\n\
             start=$(date -u +%Y%m%d%H%M%S)\n\
             deadline=$(( $(date +%s) + {t} ))\n\
             set -f; IFS='|'\n\
             while :; do\n\
             \x20 row=$(k get node {n} -o jsonpath={jp} 2> \"$d/err\") || row='unknown|unknown'\n\
             \x20 set -- $row\n\
             \x20 cordoned=${{5##* }}; c=$(digits \"$cordoned\")\n\
             \x20 if [ ${{#c}} -ne 14 ]; then c=$start; cordoned=\"this step's start\"; fi\n\
             \x20 h=$(digits \"${{3:-}}\")\n\
             \x20 fresh=0; if [ ${{#h}} -eq 14 ] && [ \"$h\" -gt \"$c\" ]; then fresh=1; fi\n\
             \x20 if [ \"${{1:-}} ${{2:-}} $fresh\" = {want} ]{runtime_ok}; then break; fi\n\
             \x20 if [ \"$(date +%s)\" -ge \"$deadline\" ]; then\n\
             \x20   printf 'timed out after %ss waiting for %s to be Ready at kubelet %s%s, in a status its kubelet posted after kwin cordoned it (%s): it reports kubelet %s, Ready=%s, runtime %s, last Ready heartbeat %s\\n' {t} {n} {v} {rw} \"$cordoned\" \"${{1:-none}}\" \"${{2:-unknown}}\" \"${{4:-none}}\" \"${{3:-none}}\" >&2\n\
             \x20   if [ $fresh = 0 ] && [ \"${{2:-}}\" = True ]; then\n\
             \x20     printf '%s\\n' {stale} >&2\n\
             \x20   fi\n\
             \x20   cat \"$d/err\" >&2\n\
             \x20   exit 1\n\
             \x20 fi\n\
             \x20 sleep 3\n\
             done\n\
             k patch node {n} --type=merge -p {patch} >/dev/null || exit 1\n",
            t = self.timeout_secs,
            want = sh_quote(&format!("{} True 1", self.want.kubelet)),
            v = sh_quote(&self.want.kubelet),
            rw = sh_quote(&runtime_want),
            stale = sh_quote(STALE_HINT),
            patch = sh_quote(&uncordon_patch()),
        )
    }
}

/// Why a Ready Node is not uncordoned yet, when its Ready is older than kwin's cordon.
const STALE_HINT: &str =
    "  its Ready condition is older than kwin's cordon (a status from before the \
     node restarted, or a kubelet that has not posted since): kwin waits for a newer one; a \
     kubelet posts an unchanged status every nodeStatusReportFrequency (5m by default), and \
     the heartbeat is stamped by the node's clock, the cordon by the control plane's: check \
     that they agree";

/// The time in kwin's mark (`upgrade 2026-11-25T03:15:00Z`): what the drain wrote.
fn cordon_time(mark: &str) -> Option<&str> {
    let t = mark.rsplit(' ').next()?;
    (t.len() == 20 && t.ends_with('Z') && t.as_bytes().get(10) == Some(&b'T')).then_some(t)
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
        let after = match cordon_time(mark) {
            Some(t) => format!("after {t}"),
            None => "after this step starts".to_string(),
        };
        Ok(Plan::Change(Change {
            action: Action::Run,
            reason: format!(
                "{} is cordoned by kwin ({mark}): uncordon once it is Ready at {}, in a status posted {after} (now {}{}{})",
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
