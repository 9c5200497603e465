//! `kube_drain`: cordon a Node and evict its pods before something disruptive happens on it
//! (a kubelet upgrade: "In-place minor version kubelet upgrades are not supported", version
//! skew policy, kubernetes/website `content/en/releases/version-skew-policy.md` @ `01bc0975`;
//! a container runtime upgrade, which restarts the runtime under the node's pods; a restart
//! of the node), unless the node already runs what it is drained for.
//!
//! Parameters: the fields of [`KubeDrainParams`], shown by `kwin doc kube_drain` and in
//! docs/modules.md. Runs on the first control plane with its admin kubeconfig.
//!
//! No-op when the cluster is not initialised, the Node is not registered, the input named by
//! `only_if` is not `true`, or the Node already reports kubelet `until.kubelet` and (when
//! given) container runtime `containerd://<until.containerd>` (its upgrade is done; if kwin's
//! cordon is still on it, `kube_uncordon` removes it), or it is cordoned and has no pod a
//! drain would evict (it is drained: what this step leaves, so it converges). Changes: when
//! the node is schedulable, one merge patch sets
//! `spec.unschedulable` and kwin's mark `kwin.dev/cordoned` (an administrator's cordon is left
//! unmarked, so kwin never uncordons it); then `kubectl drain --ignore-daemonsets
//! --delete-emptydir-data --timeout` (`--force` with `force = true`), which honours
//! PodDisruptionBudgets through the eviction API. When the drain cannot finish, the error
//! names the pods that block it (kubectl's messages, `k8s.io/kubectl/pkg/drain/filters.go`:
//! pods without a controller, pods whose PodDisruptionBudget refuses the eviction), and
//! kwin's cordon is taken back in one patch: the one this step set (nothing on the node
//! changed yet), and the one an earlier run left with its mark (a run killed during its
//! drain: the node still runs its old kubelet, so the next apply drains it again before
//! anything on it changes). An administrator's cordon stays.
//!
//! ```toml
//! [[tasks]]
//! name = "drain-lw1"
//! module = "kube_drain"
//! on = { hosts = ["cp1"] }
//! params = { node = "lw1", until = { kubelet = "1.32.5", containerd = "1.7.27" }, timeout = "5m" }
//! ```

use super::node::{node_param, v_prefixed, NodeFact, NodeInfo, NodeState, CORDON_MARK};
use super::script::{kubectl, TEMP_DIR};
use super::{parse_duration, ADMIN_CONF, API_RESOURCE};
use crate::paths::posix_abs_line;
use crate::shared::only_if::OnlyIf;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;
use serde::Deserialize;

/// What the node must run for its drain to be unnecessary.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Until {
    /// The kubelet version (`"1.32.5"` or `"v1.32.5"`) the node reports once its upgrade is
    /// done.
    pub kubelet: String,
    /// The containerd version (`"1.7.27"` or `"v1.7.27"`) the node reports once its runtime
    /// upgrade is done: its `containerRuntimeVersion` is then `containerd://1.7.27` (the
    /// kubelet writes `<runtime name>://<version>` from the runtime's CRI `Version`). Unset:
    /// the runtime is not checked.
    pub containerd: Option<String>,
}

/// [`Until`], checked: the versions as the API server reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Want {
    /// `v1.32.5`.
    pub kubelet: String,
    /// `containerd://1.7.27`, when the runtime is checked.
    pub runtime: Option<String>,
}

impl Want {
    pub(super) fn of(until: &Until) -> Result<Want, ParamError> {
        kube_version("until.kubelet", &until.kubelet)?;
        let runtime = match &until.containerd {
            Some(c) => Some(containerd_runtime(c)?),
            None => None,
        };
        Ok(Want {
            kubelet: v_prefixed(&until.kubelet),
            runtime,
        })
    }

    /// What differs from `node`, e.g. `kubelet v1.31.4, not v1.32.5` (empty: nothing).
    pub(super) fn differences(&self, node: &NodeInfo) -> Vec<String> {
        let mut d = Vec::new();
        if node.kubelet != self.kubelet {
            d.push(format!("kubelet {}, not {}", node.kubelet, self.kubelet));
        }
        if let Some(rt) = &self.runtime {
            if &node.runtime != rt {
                let want = match (node.runtime.split_once("://"), rt.split_once("://")) {
                    (Some((a, _)), Some((b, v))) if a == b => v.to_string(),
                    _ => runtime_words(rt),
                };
                d.push(format!("{}, not {want}", runtime_words(&node.runtime)));
            }
        }
        d
    }

    /// `kubelet v1.32.5 and containerd 1.7.27`.
    pub(super) fn describe(&self) -> String {
        match &self.runtime {
            Some(rt) => format!("kubelet {} and {}", self.kubelet, runtime_words(rt)),
            None => format!("kubelet {}", self.kubelet),
        }
    }
}

/// `containerd://1.7.27` for `1.7.27` / `v1.7.27`: what a kubelet reports for a containerd
/// whose CRI `Version` answers `RuntimeName` "containerd" and `RuntimeVersion` its build
/// version — `v1.7.27` for a release, the tag (containerd/containerd
/// `pkg/cri/server/version.go` and the Makefile's `VERSION` from `git describe` @ v1.7.24)
/// — as `fmt.Sprintf("%s://%s", runtimeType, version.String())`
/// (kubernetes/kubernetes `pkg/kubelet/nodestatus/setters.go` `VersionInfo` @ 00267ac8),
/// the version parsed by `utilversion.ParseSemantic`, which drops the `v`
/// (`pkg/kubelet/kuberuntime/kuberuntime_manager.go` `Version` / `newRuntimeVersion`
/// @ 83f7b41c).
pub(super) fn containerd_runtime(v: &str) -> Result<String, ParamError> {
    let bare = v.strip_prefix('v').unwrap_or(v);
    match semver::Version::parse(bare) {
        Ok(_) => Ok(format!("containerd://{bare}")),
        Err(_) => Err(ParamError::at(
            "until.containerd",
            format!("`{v}` is not a release version like \"1.7.27\""),
        )),
    }
}

/// `containerd 1.7.24` for `containerd://1.7.24`; other runtimes as reported.
pub(super) fn runtime_words(reported: &str) -> String {
    match reported.split_once("://") {
        Some((name, v)) if !name.is_empty() => format!("{name} {v}"),
        _ if reported.is_empty() => "no container runtime version".to_string(),
        _ => reported.to_string(),
    }
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KubeDrainParams {
    /// The Node.
    node: String,
    /// The node is drained until it reports these versions; then the step is a no-op. Give
    /// `until`, `only_if`, or both.
    until: Option<Until>,
    /// The name of one of the task's `inputs`: the node is drained only while that input is
    /// `true` (another task decides, e.g. a Windows node's pending reboot: `inputs = {
    /// reboot_pending = "reboot.pending" }`, `only_if = "reboot_pending"`).
    only_if: Option<String>,
    /// `kubectl drain --timeout` (default `"5m"`); a drain that does not finish fails naming
    /// the pods that block it.
    #[schemars(with = "Option<super::DurationParam>")]
    timeout: Option<serde_json::Value>,
    /// Also delete pods that no controller recreates (`kubectl drain --force`; default
    /// false: such pods stop the drain and are named).
    #[serde(default)]
    force: bool,
    /// Why kwin cordons, recorded in the node's `kwin.dev/cordoned` annotation (lowercase
    /// letters and `-`; default `upgrade`).
    reason: Option<String>,
    /// The cluster (default `/etc/kubernetes/admin.conf`).
    kubeconfig: Option<String>,
}

#[derive(Debug, Clone)]
pub struct KubeDrain {
    node: String,
    want: Option<Want>,
    only_if: Option<OnlyIf>,
    timeout_secs: u64,
    force: bool,
    reason: String,
    kubeconfig: String,
}

impl Described for KubeDrain {
    const NAME: &'static str = "kube_drain";
    const DOC: &'static str =
        "cordons and drains a Node from the first control plane until it runs a given kubelet and container runtime, or while an input asks for it";
    type Params = KubeDrainParams;

    fn from_params(p: KubeDrainParams, _shell: Shell) -> Result<Self, ParamError> {
        let kubeconfig = p.kubeconfig.unwrap_or_else(|| ADMIN_CONF.to_string());
        posix_abs_line("kubeconfig", &kubeconfig)?;
        node_param(&p.node)?;
        let want = p.until.as_ref().map(Want::of).transpose()?;
        let only_if = OnlyIf::parse(p.only_if)?;
        if want.is_none() && only_if.is_none() {
            return Err(ParamError::new(
                "give `until` (the versions the node must report), `only_if` (an input that asks for the drain), or both",
            ));
        }
        let timeout_secs = match &p.timeout {
            Some(v) => parse_duration("timeout", v)?.max(1),
            None => 300,
        };
        let reason = p.reason.unwrap_or_else(|| "upgrade".into());
        if reason.is_empty() || !reason.chars().all(|c| c.is_ascii_lowercase() || c == '-') {
            return Err(ParamError::at(
                "reason",
                format!("`{reason}`: lowercase letters and `-` only"),
            ));
        }
        Ok(KubeDrain {
            node: p.node,
            want,
            only_if,
            timeout_secs,
            force: p.force,
            reason,
            kubeconfig,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![FactSample::kube(NodeFact::new("n1", ADMIN_CONF))]
    }
}

/// A release version `1.32.5` / `v1.32.5`.
pub(super) fn kube_version(field: &str, v: &str) -> Result<(), ParamError> {
    let bare = v.strip_prefix('v').unwrap_or(v);
    let parts: Vec<&str> = bare.split('.').collect();
    if parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.parse::<u64>().is_ok())
    {
        Ok(())
    } else {
        Err(ParamError::at(
            field,
            format!("`{v}` is not a release version like \"1.32.5\""),
        ))
    }
}

/// The merge patch that takes kwin's cordon back: unschedulable and the mark, together.
pub(super) fn uncordon_patch() -> String {
    format!(
        r#"{{"spec":{{"unschedulable":null}},"metadata":{{"annotations":{{"{CORDON_MARK}":null}}}}}}"#
    )
}

impl KubeDrain {
    fn fact(&self) -> NodeFact {
        NodeFact::new(&self.node, &self.kubeconfig)
    }

    /// Cordon + mark (when schedulable), drain; on failure the blocking pods on stderr and
    /// kwin's cordon taken back: the one this script set, or one an earlier run left with
    /// kwin's mark.
    pub fn script(&self) -> String {
        let k = kubectl(&self.kubeconfig);
        let n = sh_quote(&self.node);
        let state = sh_quote(&format!(
            "jsonpath={{.spec.unschedulable}}|{{.metadata.annotations.{}}}",
            CORDON_MARK.replace('.', "\\.")
        ));
        let force = if self.force { " --force" } else { "" };
        let blocked = sh_quote(&format!(
            "drain of {} stopped before it finished ({}s):",
            self.node, self.timeout_secs
        ));
        format!(
            "{TEMP_DIR}k() {{ {k} --request-timeout=30s \"$@\"; }}\n\
             marked=0; earlier=0\n\
             state=$(k get node {n} -o {state}) || exit 1\n\
             if [ \"${{state%%|*}}\" != true ]; then\n\
             \x20 now=$(date -u +%Y-%m-%dT%H:%M:%SZ)\n\
             \x20 k patch node {n} --type=merge -p \"{{\\\"spec\\\":{{\\\"unschedulable\\\":true}},\\\"metadata\\\":{{\\\"annotations\\\":{{\\\"{mark}\\\":\\\"{reason} $now\\\"}}}}}}\" >/dev/null || exit 1\n\
             \x20 marked=1\n\
             elif [ -n \"${{state#*|}}\" ]; then\n\
             \x20 earlier=1\n\
             fi\n\
             if ! {k} drain {n} --ignore-daemonsets --delete-emptydir-data --timeout={t}s{force} > \"$d/out\" 2> \"$d/err\"; then\n\
             \x20 printf '%s\\n' {blocked} >&2\n\
             \x20 awk '\n\
             \x20   /^cannot delete / {{ sub(/, continuing command.*/, \"\"); sub(/^cannot delete cannot delete /, \"cannot delete \"); if (!($0 in seen)) {{ seen[$0] = 1; print \"  \" $0 }}; found = 1; next }}\n\
             \x20   /disruption budget/ && match($0, /pods\\/\"[^\"]*\" -n \"[^\"]*\"/) {{\n\
             \x20     s = substr($0, RSTART, RLENGTH); split(s, q, \"\\\"\"); p = q[4] \"/\" q[2]\n\
             \x20     if (!(p in seen)) {{ seen[p] = 1; print \"  \" p \": its PodDisruptionBudget does not allow evicting it now\"; found = 1 }}\n\
             \x20     next\n\
             \x20   }}\n\
             \x20   {{ last[NR % 5] = $0 }}\n\
             \x20   END {{ if (!found) for (i = NR - 4; i <= NR; i++) if (i > 0 && last[i % 5] != \"\") print \"  \" last[i % 5] }}\n\
             \x20 ' \"$d/err\" >&2\n\
             \x20 if grep -q 'Pods that declare no controller' \"$d/err\"; then\n\
             \x20   printf '%s\\n' '  (force = true deletes pods that no controller recreates)' >&2\n\
             \x20 fi\n\
             \x20 if [ $marked = 1 ]; then\n\
             \x20   k patch node {n} --type=merge -p {unpatch} >/dev/null &&\n\
             \x20     printf '%s\\n' {back} >&2\n\
             \x20 elif [ $earlier = 1 ]; then\n\
             \x20   k patch node {n} --type=merge -p {unpatch} >/dev/null &&\n\
             \x20     printf '%s\\n' {back_earlier} >&2\n\
             \x20 fi\n\
             \x20 exit 1\n\
             fi\n",
            mark = CORDON_MARK,
            reason = self.reason,
            t = self.timeout_secs,
            unpatch = sh_quote(&uncordon_patch()),
            back = sh_quote(&format!(
                "{} is uncordoned again: nothing on it was changed",
                self.node
            )),
            back_earlier = sh_quote(&format!(
                "{} is uncordoned again (kwin cordoned it in an earlier run): it still runs its \
                 old kubelet, and the next apply drains it again first",
                self.node
            )),
        )
    }
}

impl Module for KubeDrain {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&self.fact(), shell)]
    }

    fn reads(&self) -> Vec<String> {
        vec![API_RESOURCE.to_string(), self.kubeconfig.clone()]
    }

    fn plan(&self, facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let node = match facts.get(&self.fact())? {
            NodeState::NoCluster(nc) => {
                return Ok(Plan::noop(format!(
                    "nothing to drain: {}",
                    nc.describe(&self.kubeconfig)
                )))
            }
            NodeState::Absent => {
                return Ok(Plan::noop(format!(
                    "node {} is not registered: nothing to drain",
                    self.node
                )))
            }
            NodeState::Node(n) => n,
        };
        // Why the node needs draining: what it runs that is not what it should, or the input
        // that asks for it.
        let mut why = Vec::new();
        if let Some(only) = &self.only_if {
            let name = only.name();
            if !only.asks(ctx)? {
                return Ok(Plan::noop(format!(
                    "input `{name}` does not ask for a drain of {}",
                    self.node
                )));
            }
            why.push(format!("input `{name}` asks for a drain of {}", self.node));
        }
        if let Some(want) = &self.want {
            let differs = want.differences(&node);
            if differs.is_empty() {
                return Ok(Plan::noop(format!(
                    "{} already runs {}",
                    self.node,
                    want.describe()
                )));
            }
            why.push(format!("{} runs {}", self.node, differs.join(", and ")));
        }
        let evicted = node.evicted();
        // Drained: cordoned, nothing left that a drain would evict. What a drain leaves (a
        // kwin-cordoned node) is this state, so the step converges, and a resumed upgrade
        // goes on from here.
        if node.unschedulable && evicted.is_empty() {
            let by = if node.mark.is_some() {
                "kwin"
            } else {
                "someone else"
            };
            return Ok(Plan::noop(format!(
                "{} is cordoned by {by} and has no pod to evict: drained",
                self.node
            )));
        }
        let cordon = if node.unschedulable {
            if node.mark.is_some() {
                "cordoned by kwin earlier: draining again".to_string()
            } else {
                "cordoned by someone else: drained, and left cordoned".to_string()
            }
        } else {
            "cordon".to_string()
        };
        let mut diff = format!("node {}: {cordon}\n", self.node);
        for (pod, owner) in &evicted {
            let owner = if owner.is_empty() {
                "no controller"
            } else {
                owner.as_str()
            };
            diff.push_str(&format!("- evict {pod} ({owner})\n"));
        }
        Ok(Plan::Change(Change {
            action: Action::Run,
            reason: format!("{}: drain {} pod(s) first", why.join("; "), evicted.len()),
            diff: Some(diff),
            steps: vec![Step::Run(self.script())],
            touches: Touches::Resources(vec![API_RESOURCE.to_string()]),
        }))
    }
}
