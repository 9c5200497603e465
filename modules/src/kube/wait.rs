//! `kube_wait`: wait until objects reach a state (rolled out, a condition true, existing) or
//! the API server is healthy.
//!
//! Parameters: the fields of [`KubeWaitParams`],
//! shown by `kwin doc kube_wait` and in docs/modules.md.
//!
//! No-op when every object is in the state now (one check, no waiting). Changes: watches the
//! objects (`kubectl get --watch`: one list, then the API server's stream of changes) and
//! returns as soon as a change puts the last of them in the state — no check interval in
//! between —, or fails after `timeout` naming each object that is not, and why
//! (`node lw1 NotReady: KubeletNotReady: container runtime network not ready`,
//! `daemonset kube-flannel/kube-flannel-ds: 1 of 2 ready`). A kind the API server does not
//! serve yet (a CRD still being installed) counts as not ready, not as an error: the watch
//! is tried again every `interval`, as after any failed watch. `healthy` asks the API
//! server's `/readyz` every `interval`.
//!
//! ```toml
//! [[tasks]]
//! name = "flannel-ready"
//! module = "kube_wait"
//! on = { hosts = ["cp1"] }
//! params = { kind = "DaemonSet", namespace = "kube-flannel", names = ["kube-flannel-ds"], condition = "rollout", timeout = "5m" }
//! ```

use super::facts::{WaitFact, WaitState};
use super::script::{cluster_guard, die, kubectl, TEMP_DIR};
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
pub struct KubeWaitParams {
    /// `rollout` (DaemonSet, Deployment: every pod updated and available), `exists`,
    /// `healthy` (the API server's `/readyz`; no kind or names), or a condition type that
    /// must be `True` (`Ready`, `Established`, `Available`, ...).
    condition: String,
    /// `Node`, `DaemonSet`, `CustomResourceDefinition`, ...; required unless `condition` is
    /// `healthy`.
    kind: Option<String>,
    /// The objects; required unless `condition` is `healthy`.
    #[serde(default)]
    names: Vec<String>,
    /// For namespaced kinds.
    namespace: Option<String>,
    /// How long the change waits (default `"5m"`); then it fails naming each object that is
    /// not ready, and why.
    #[schemars(with = "Option<super::DurationParam>")]
    timeout: Option<serde_json::Value>,
    /// Time between attempts when the objects cannot be watched (a kind the API server does
    /// not serve yet, an error) and between `healthy` checks (default `"5s"`). A watched
    /// change is seen at once, without waiting for the next attempt.
    #[schemars(with = "Option<super::DurationParam>")]
    interval: Option<serde_json::Value>,
    /// The cluster (default `/etc/kubernetes/admin.conf`).
    kubeconfig: Option<String>,
    /// An object that does not exist counts as in the state (default false): for an add-on
    /// a cluster may run without, such as kubeadm's kube-proxy when its `addon/kube-proxy`
    /// phase was skipped. A kind the API server does not serve still waits.
    #[serde(default)]
    optional: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Check {
    Healthy,
    Exists,
    RolloutDaemonSet,
    RolloutDeployment,
    Condition(String),
}

#[derive(Debug, Clone)]
pub struct KubeWait {
    check: Check,
    kind: String,
    names: Vec<String>,
    namespace: Option<String>,
    timeout_secs: u64,
    interval_secs: u64,
    kubeconfig: String,
    optional: bool,
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_')
}

impl Described for KubeWait {
    const NAME: &'static str = "kube_wait";
    const DOC: &'static str =
        "waits from the first control plane until objects are rolled out or have a condition";
    type Params = KubeWaitParams;

    fn from_params(p: KubeWaitParams, _shell: Shell) -> Result<Self, ParamError> {
        let kubeconfig = p.kubeconfig.unwrap_or_else(|| ADMIN_CONF.to_string());
        posix_abs_line("kubeconfig", &kubeconfig)?;
        let timeout_secs = match &p.timeout {
            Some(v) => parse_duration("timeout", v)?,
            None => 300,
        };
        let interval_secs = match &p.interval {
            Some(v) => parse_duration("interval", v)?.max(1),
            None => 5,
        };
        let kind = p.kind.clone().unwrap_or_default();
        let check = match p.condition.as_str() {
            "healthy" => {
                if p.kind.is_some() || !p.names.is_empty() {
                    return Err(ParamError::at(
                        "condition",
                        "`healthy` waits for the API server: give no kind or names",
                    ));
                }
                Check::Healthy
            }
            "exists" => Check::Exists,
            "rollout" => match kind.to_ascii_lowercase().as_str() {
                "daemonset" | "daemonsets" | "ds" => Check::RolloutDaemonSet,
                "deployment" | "deployments" | "deploy" => Check::RolloutDeployment,
                _ => {
                    return Err(ParamError::at(
                        "kind",
                        format!("`rollout` applies to DaemonSet and Deployment, not `{kind}`"),
                    ))
                }
            },
            c if !c.is_empty() && c.chars().all(|ch| ch.is_ascii_alphanumeric()) => {
                Check::Condition(c.to_string())
            }
            c => {
                return Err(ParamError::at(
                    "condition",
                    format!("`{c}` is not a condition type (e.g. Ready, Established, Available) or rollout / exists / healthy"),
                ))
            }
        };
        if check != Check::Healthy {
            if !is_name(&kind) {
                return Err(ParamError::at(
                    "kind",
                    "`kind` is required (e.g. Node, DaemonSet)",
                ));
            }
            if p.names.is_empty() {
                return Err(ParamError::at(
                    "names",
                    "`names` lists the objects to wait for",
                ));
            }
            for (i, n) in p.names.iter().enumerate() {
                if !is_name(n) {
                    return Err(ParamError::at(
                        format!("names.{i}"),
                        format!("`{n}` is not a valid object name"),
                    ));
                }
            }
        }
        if let Some(ns) = &p.namespace {
            if !is_name(ns) {
                return Err(ParamError::at(
                    "namespace",
                    format!("`{ns}` is not a valid namespace"),
                ));
            }
        }
        Ok(KubeWait {
            check,
            kind,
            names: p.names,
            namespace: p.namespace,
            timeout_secs,
            interval_secs,
            kubeconfig,
            optional: p.optional,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![FactSample::kube(WaitFact {
            script: "true".into(),
        })]
    }
}

impl KubeWait {
    /// How an object is named in messages: `daemonset kube-flannel/` + name, `node ` + name.
    fn label(&self) -> String {
        let k = self.kind.to_ascii_lowercase();
        match &self.namespace {
            Some(ns) => format!("{k} {ns}/"),
            None => format!("{k} "),
        }
    }

    fn what(&self) -> String {
        match &self.check {
            Check::Healthy => "the API server to be healthy".into(),
            Check::Exists => format!("{} {} to exist", self.kind, self.names.join(", ")),
            Check::RolloutDaemonSet | Check::RolloutDeployment => {
                format!("{} {} to roll out", self.kind, self.names.join(", "))
            }
            Check::Condition(c) => format!("{} {} to be {c}", self.kind, self.names.join(", ")),
        }
    }

    /// One row per object: the jsonpath fields (relative to the object) and the awk code that
    /// turns a row (`$2` the name, `$3`... the fields after it) into `ok NAME` /
    /// `no NAME DETAIL`. No `range` inside: kubectl's watch stops at its first change when a
    /// template ranges over an object's lists (kubernetes/kubectl#913: `GetOptions.watch`
    /// returns nil on a print error, kubernetes/kubectl@5be1f71 pkg/cmd/get/get.go).
    fn row(&self) -> (Vec<String>, String) {
        match &self.check {
            Check::RolloutDaemonSet => rollout(
                [
                    ".status.desiredNumberScheduled",
                    ".status.updatedNumberScheduled",
                    ".status.numberAvailable",
                ],
                "ready",
            ),
            Check::RolloutDeployment => rollout(
                [
                    ".spec.replicas",
                    ".status.updatedReplicas",
                    ".status.availableReplicas",
                ],
                "available",
            ),
            Check::Condition(c) => (
                ["status", "reason", "message"]
                    .iter()
                    .map(|f| format!(r#".status.conditions[?(@.type=="{c}")].{f}"#))
                    .collect(),
                r#"if ($3 == "True") print "ok " $2
    else {
      why = ($4 != "") ? $4 : ("condition " cond " is " (($3 == "") ? "not reported" : $3))
      if ($5 != "") why = why ": " $5
      print "no " $2 " " label $2 " Not" cond ": " why
    }"#
                .into(),
            ),
            Check::Exists => (Vec::new(), r#"print "ok " $2"#.into()),
            Check::Healthy => (Vec::new(), String::new()),
        }
    }

    /// The jsonpath of one object's row: `{prefix}.metadata.name`, then each field, separated
    /// by the unit separator (`\x1f`; tabs would go through kubectl's tab writer).
    fn row_template(&self, prefix: &str) -> String {
        let mut t = format!("{{{prefix}.metadata.name}}");
        for f in self.row().0 {
            t.push_str(&format!("{{\"\\x1f\"}}{{{prefix}{f}}}"));
        }
        t
    }

    /// `kubectl get <kind> [-n ns]`.
    fn get(&self) -> String {
        let ns = self
            .namespace
            .as_ref()
            .map(|n| format!(" -n {}", sh_quote(n)))
            .unwrap_or_default();
        format!(
            "{} get {}{ns}",
            kubectl(&self.kubeconfig),
            sh_quote(&self.kind)
        )
    }

    /// `kw_eval`: reads rows (`TYPE\x1fNAME\x1f...`, the latest row of an object counts, a
    /// `DELETED` row removes it) and prints `ok NAME` / `no NAME DETAIL` per awaited object,
    /// in the order of `names`. `kw_check`: one list of the objects through `kw_eval`;
    /// returns 2 (with kubectl's message in `$d/err`) when the API server gave an unexpected
    /// error.
    fn check_fn(&self) -> String {
        let k = kubectl(&self.kubeconfig);
        if self.check == Check::Healthy {
            return format!(
                "kw_check() {{\n\
                 if {k} --request-timeout=10s get --raw /readyz > \"$d/rows\" 2> \"$d/err\"; then echo 'ok api'\n\
                 else echo \"no api API server not healthy: $(tail -n 1 \"$d/err\")\"; fi\n\
                 }}\n"
            );
        }
        let cond = match &self.check {
            Check::Condition(c) => c.clone(),
            _ => String::new(),
        };
        let list = format!(
            "{{range .items[*]}}-{{\"\\x1f\"}}{}{{\"\\n\"}}{{end}}",
            self.row_template("")
        );
        format!(
            "unserved=''\n\
             kw_eval() {{\n\
             awk -v want={names} -v label={label} -v cond={cond} -v optional={optional} -v unserved=\"$unserved\" '\n\
             BEGIN {{ FS = \"\\037\"; nw = split(want, w, \" \"); for (i = 1; i <= nw; i++) wanted[w[i]] = 1 }}\n\
             ($2 in wanted) {{ if ($1 == \"DELETED\") delete row[$2]; else row[$2] = $0 }}\n\
             END {{\n\
             \x20 for (i = 1; i <= nw; i++) {{\n\
             \x20   if (!(w[i] in row)) {{\n\
             \x20     if (optional && unserved == \"\") print \"ok \" w[i]\n\
             \x20     else print \"no \" w[i] \" \" label w[i] \": \" ((unserved != \"\") ? unserved : \"not found\")\n\
             \x20     continue\n\
             \x20   }}\n\
             \x20   $0 = row[w[i]]\n\
             \x20   {eval}\n\
             \x20 }}\n\
             }}'\n\
             }}\n\
             kw_check() {{\n\
             unserved=''\n\
             if ! {get} -o jsonpath={list} > \"$d/rows\" 2> \"$d/err\"; then\n\
             \x20 if grep -q -e \"doesn't have a resource type\" -e 'could not find the requested resource' -e 'no matches for kind' \"$d/err\"; then\n\
             \x20   : > \"$d/rows\"; unserved=\"kind {kind_text} is not served by the API server yet\"\n\
             \x20 else return 2; fi\n\
             fi\n\
             kw_eval < \"$d/rows\"\n\
             }}\n",
            get = self.get(),
            kind_text = self.kind,
            list = sh_quote(&list),
            names = sh_quote(&self.names.join(" ")),
            label = sh_quote(&self.label()),
            cond = sh_quote(&cond),
            optional = u8::from(self.optional),
            eval = self.row().1,
        )
    }

    fn fact(&self) -> WaitFact {
        WaitFact {
            script: format!(
                "{}{TEMP_DIR}{}kw_check > \"$d/report\"\nrc=$?\n\
                 if [ $rc -ne 0 ]; then cat \"$d/err\" >&2; exit $rc; fi\n\
                 echo 'kwin: checked'\ncat \"$d/report\"\n",
                cluster_guard(&self.kubeconfig),
                self.check_fn()
            ),
        }
    }

    /// What the change prints to stderr when `timeout` runs out: the message naming what was
    /// awaited, then each object that is not ready and why (or kubectl's error).
    fn timed_out(&self) -> String {
        format!(
            "\x20   kw_check > \"$d/report\"; rc=$?\n\
             \x20   if [ $rc -eq 0 ] && ! grep -q '^no ' \"$d/report\"; then exit 0; fi\n\
             \x20   printf '%s\\n' {msg} >&2\n\
             \x20   if [ $rc -ne 0 ]; then cat \"$d/err\" >&2; else sed -n 's/^no [^ ]* /  /p' \"$d/report\" >&2; fi\n\
             \x20   exit 1\n",
            msg = sh_quote(&format!(
                "timed out after {}s waiting for {}:",
                self.timeout_secs,
                self.what()
            )),
        )
    }

    /// The script of the change. Objects: a watch (`kubectl get --watch`: a list, then the
    /// API server's stream of changes from that list's resourceVersion, every object as
    /// `ADDED`/`MODIFIED`/`DELETED` with `--output-watch-events`, kubernetes/kubectl@5be1f71
    /// pkg/cmd/get/get.go), each row judged as it arrives: the wait ends at the first row
    /// after which every object is in the state, with no check interval in between. The watch
    /// is bounded by the time left (`--request-timeout`); one that ends early (the API server
    /// closes watches after a while) starts again, one that fails (a kind not served yet, the
    /// API server not answering) again after `interval`. At `timeout`: one more list, and the
    /// objects that are not in the state, named with why. `healthy` asks `/readyz` every
    /// `interval` (there is nothing to watch).
    pub fn wait_script(&self) -> String {
        let kc = sh_quote(&self.kubeconfig);
        let head = format!(
            "[ -r {kc} ] || {}\n{TEMP_DIR}{}deadline=$(( $(date +%s) + {t} ))\n",
            die(&format!("{} does not exist", self.kubeconfig)),
            self.check_fn(),
            t = self.timeout_secs,
        );
        if self.check == Check::Healthy {
            return format!(
                "{head}while :; do\n\
                 \x20 kw_check > \"$d/report\"; rc=$?\n\
                 \x20 if [ $rc -eq 0 ] && ! grep -q '^no ' \"$d/report\"; then break; fi\n\
                 \x20 if [ \"$(date +%s)\" -ge \"$deadline\" ]; then\n{timed_out}\x20 fi\n\
                 \x20 sleep {i}\n\
                 done\n",
                timed_out = self.timed_out(),
                i = self.interval_secs,
            );
        }
        let watch = format!(
            "{{.type}}{{\"\\x1f\"}}{}{{\"\\n\"}}",
            self.row_template(".object")
        );
        // `optional`: one list before each watch, so an object that is gone (or was never
        // there) ends the wait at once; a watch shows only objects that exist.
        let absent_done = if self.optional {
            "\x20 if kw_check > \"$d/report\" && ! grep -q '^no ' \"$d/report\"; then exit 0; fi\n"
        } else {
            ""
        };
        format!(
            "{head}wp=''\n\
             trap '[ -z \"$wp\" ] || kill \"$wp\" 2>/dev/null; rm -rf \"$d\"' EXIT\n\
             mkfifo \"$d/events\" || exit 1\n\
             while :; do\n\
             \x20 now=$(date +%s)\n\
             \x20 if [ \"$now\" -ge \"$deadline\" ]; then\n{timed_out}\x20 fi\n\
             \x20 : > \"$d/rows\"\n\
             {absent_done}\
             \x20 {get} --watch --output-watch-events --request-timeout=$((deadline - now))s -o jsonpath={watch} > \"$d/events\" 2> \"$d/err\" &\n\
             \x20 wp=$!\n\
             \x20 while IFS= read -r row; do\n\
             \x20   printf '%s\\n' \"$row\" >> \"$d/rows\"\n\
             \x20   kw_eval < \"$d/rows\" > \"$d/report\"\n\
             \x20   if ! grep -q '^no ' \"$d/report\"; then exit 0; fi\n\
             \x20 done < \"$d/events\"\n\
             \x20 wait \"$wp\"; rc=$?; wp=''\n\
             \x20 if [ $rc -ne 0 ] || [ \"$(date +%s)\" -le \"$now\" ]; then sleep {i}; fi\n\
             done\n",
            timed_out = self.timed_out(),
            get = self.get(),
            watch = sh_quote(&watch),
            i = self.interval_secs,
            absent_done = absent_done,
        )
    }
}

impl Module for KubeWait {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&self.fact(), shell)]
    }

    fn reads(&self) -> Vec<String> {
        vec![API_RESOURCE.to_string(), self.kubeconfig.clone()]
    }

    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let state = facts.get(&self.fact())?;
        let reason = match &state {
            WaitState::NoCluster(nc) => {
                format!("cannot check yet: {}", nc.describe(&self.kubeconfig))
            }
            WaitState::Checked(items) => {
                let pending = state.pending();
                if pending.is_empty() {
                    return Ok(Plan::noop(match &self.check {
                        Check::Healthy => "the API server is healthy".to_string(),
                        _ => {
                            format!(
                                "{} of {} {}: {}",
                                items.len(),
                                self.names.len(),
                                self.kind,
                                match &self.check {
                                    Check::Exists => "exist".to_string(),
                                    Check::Condition(c) => c.clone(),
                                    _ => "rolled out".to_string(),
                                }
                            ) + if self.optional {
                                " (or absent: optional)"
                            } else {
                                ""
                            }
                        }
                    }));
                }
                let mut r = pending
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ");
                if pending.len() > 3 {
                    r.push_str(&format!(" and {} more", pending.len() - 3));
                }
                r
            }
        };
        Ok(Plan::Change(Change {
            action: Action::Run,
            reason,
            diff: None,
            steps: vec![Step::Run(self.wait_script())],
            touches: Touches::Resources(vec![API_RESOURCE.to_string()]),
        }))
    }
}

/// A rollout's row: generation, observed generation, then `[wanted, updated, available]`
/// (the kind's own fields), and the awk that says which is short, the last as `available`.
fn rollout(fields: [&str; 3], available: &str) -> (Vec<String>, String) {
    let mut f = vec![
        ".metadata.generation".to_string(),
        ".status.observedGeneration".to_string(),
    ];
    f.extend(fields.iter().map(|s| s.to_string()));
    let awk = format!(
        r#"gen = $3 + 0; obs = $4 + 0; want = $5 + 0; upd = $6 + 0; av = $7 + 0
    if (obs < gen) print "no " $2 " " label $2 ": generation " gen " not observed yet"
    else if (upd < want) print "no " $2 " " label $2 ": " upd " of " want " updated"
    else if (av < want) print "no " $2 " " label $2 ": " av " of " want " {available}"
    else print "ok " $2"#
    );
    (f, awk)
}
