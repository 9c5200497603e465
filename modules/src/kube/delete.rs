//! `kube_delete`: named objects that kwin applied are gone — the objects an earlier
//! version of a recipe created and the current one no longer does.
//!
//! Parameters: the fields of [`KubeDeleteParams`], shown by `kwin doc kube_delete` and in
//! docs/modules.md. Runs on the first control plane with its admin kubeconfig.
//!
//! An object is kwin's when its `metadata.managedFields` holds an `Apply` entry of the field
//! manager `field_manager` (default `kwin`, the manager every `kube_apply` applies with):
//! server-side apply records the manager of every object it writes
//! (kubernetes/website `content/en/docs/reference/using-api/server-side-apply.md`, "Field
//! management"), so the name alone never decides. An object of the same name that kwin did
//! not apply is left alone, and the plan says so.
//!
//! No-op when the cluster is not initialised, or every object is absent (or being deleted),
//! or not kwin's. Changes: `kubectl delete` of each object that is kwin's (checked again in
//! the step, right before it), waiting until it is gone (`--timeout=60s`); a DaemonSet's pods
//! go with it (kubectl's default background cascade).
//!
//! ```toml
//! [[tasks]]
//! name = "old-daemonset"
//! module = "kube_delete"
//! on = { hosts = ["cp1"] }
//! params.objects = [{ kind = "DaemonSet", namespace = "kube-system", name = "kube-flannel-ds-windows-amd64" }]
//! ```

use super::facts::{header, script_key, NoCluster};
use super::script::{cluster_guard, kubectl, TEMP_DIR};
use super::{ADMIN_CONF, API_RESOURCE};
use crate::paths::posix_abs_line;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{Fact, FactError, FactOutput, FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KubeDeleteParams {
    /// The objects: `{ kind, name, namespace? }` (`kind` as kubectl takes it: `DaemonSet`,
    /// `ClusterRoleBinding`, `daemonsets.apps`; no `namespace` for cluster-scoped kinds).
    objects: Vec<ObjectParam>,
    /// Delete an object only when this server-side apply field manager applied it (default
    /// `kwin`).
    field_manager: Option<String>,
    /// The cluster (default `/etc/kubernetes/admin.conf`).
    kubeconfig: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ObjectParam {
    kind: String,
    name: String,
    namespace: Option<String>,
}

impl ObjectParam {
    fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }

    /// `KIND NAME [-n NS]`, quoted.
    fn args(&self) -> String {
        let mut s = format!("{} {}", sh_quote(&self.kind), sh_quote(&self.name));
        if let Some(ns) = &self.namespace {
            s.push_str(&format!(" -n {}", sh_quote(ns)));
        }
        s
    }
}

#[derive(Debug, Clone)]
pub struct KubeDelete {
    objects: Vec<ObjectParam>,
    field_manager: String,
    kubeconfig: String,
}

/// Kubernetes names, kinds and managers: letters, digits, `-`, `.` (and `extra`).
fn word(field: &str, v: &str, extra: &[char]) -> Result<(), ParamError> {
    if v.is_empty()
        || v.len() > 253
        || !v
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || extra.contains(&c))
    {
        return Err(ParamError::at(
            field,
            format!("`{v}` is not a valid Kubernetes name"),
        ));
    }
    Ok(())
}

impl Described for KubeDelete {
    const NAME: &'static str = "kube_delete";
    const DOC: &'static str =
        "named Kubernetes objects kwin applied are deleted (others of the same name are left alone)";
    type Params = KubeDeleteParams;

    fn from_params(p: KubeDeleteParams, _shell: Shell) -> Result<Self, ParamError> {
        let kubeconfig = p.kubeconfig.unwrap_or_else(|| ADMIN_CONF.to_string());
        posix_abs_line("kubeconfig", &kubeconfig)?;
        let field_manager = p.field_manager.unwrap_or_else(|| "kwin".to_string());
        word("field_manager", &field_manager, &['_', ':'])?;
        if p.objects.is_empty() {
            return Err(ParamError::at("objects", "name at least one object"));
        }
        for (i, o) in p.objects.iter().enumerate() {
            word(&format!("objects.{i}.kind"), &o.kind, &[])?;
            word(&format!("objects.{i}.name"), &o.name, &[])?;
            if let Some(ns) = &o.namespace {
                word(&format!("objects.{i}.namespace"), ns, &[])?;
            }
        }
        Ok(KubeDelete {
            objects: p.objects,
            field_manager,
            kubeconfig,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![FactSample::kube(ObjectsFact {
            script: "kubectl get ns".into(),
        })]
    }
}

/// The jsonpath of what the fact reads of an object: its deletion timestamp, then every
/// managedFields entry as `manager/operation`.
const OWNERS_JP: &str = r#"{.metadata.deletionTimestamp}{"\t"}{range .metadata.managedFields[*]}{.manager}{"/"}{.operation}{" "}{end}"#;

impl KubeDelete {
    fn fact(&self) -> ObjectsFact {
        let k = kubectl(&self.kubeconfig);
        let mut s = format!(
            "{}{TEMP_DIR}echo 'kwin: objects'\n",
            cluster_guard(&self.kubeconfig)
        );
        for (i, o) in self.objects.iter().enumerate() {
            s.push_str(&format!(
                "if out=$({k} get {args} -o jsonpath={jp} 2> \"$d/err\"); then printf '%s\\tpresent\\t%s\\n' {i} \"$out\"\n\
                 elif grep -q -e NotFound -e \"doesn't have a resource type\" \"$d/err\"; then printf '%s\\tabsent\\n' {i}\n\
                 else cat \"$d/err\" >&2; exit 1; fi\n",
                args = o.args(),
                jp = sh_quote(OWNERS_JP),
            ));
        }
        ObjectsFact { script: s }
    }

    /// Delete each of `objects`, checking right before that the field manager applied it.
    fn script(&self, objects: &[&ObjectParam]) -> String {
        let k = kubectl(&self.kubeconfig);
        let mut s = String::from(TEMP_DIR);
        let jp =
            sh_quote(r#"{range .metadata.managedFields[*]}{.manager}{"/"}{.operation}{" "}{end}"#);
        for o in objects {
            s.push_str(&format!(
                "if owners=$({k} get {args} -o jsonpath={jp} 2> \"$d/err\"); then\n\
                 \x20 case \" $owners \" in\n\
                 \x20   *' '{owner}' '*) {k} delete {args} --ignore-not-found --timeout=60s >/dev/null || exit 1 ;;\n\
                 \x20   *) printf '%s\\n' {not_ours} >&2; exit 1 ;;\n\
                 \x20 esac\n\
                 elif ! grep -q NotFound \"$d/err\"; then cat \"$d/err\" >&2; exit 1; fi\n",
                args = o.args(),
                owner = sh_quote(&format!("{}/Apply", self.field_manager)),
                not_ours = sh_quote(&format!(
                    "{} is no longer applied by {}: left alone",
                    o.describe(),
                    self.field_manager
                )),
            ));
        }
        s
    }
}

/// What each object of a [`KubeDelete`] is, read in one script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectsFact {
    pub script: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectsState {
    NoCluster(NoCluster),
    /// By index of the params' `objects`.
    Objects(Vec<Presence>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presence {
    Absent,
    /// Present; being deleted already (a deletion timestamp) or not, and the
    /// `manager/operation` entries of its managedFields.
    Present {
        deleting: bool,
        owners: Vec<String>,
    },
}

impl Fact for ObjectsFact {
    type Output = ObjectsState;
    fn key(&self) -> String {
        script_key("kube.objects", &self.script)
    }
    fn command(&self, shell: Shell) -> String {
        match shell {
            Shell::Posix => self.script.clone(),
            Shell::PowerShell => "Write-Error 'kube_delete runs on a POSIX control plane'".into(),
        }
    }
    fn parse(&self, out: &FactOutput) -> Result<ObjectsState, FactError> {
        parse_objects(out)
    }
}

/// Parse an [`ObjectsFact`] answer.
pub fn parse_objects(out: &FactOutput) -> Result<ObjectsState, FactError> {
    let (state, lines) = header(out)?;
    if let Some(nc) = NoCluster::from_state(&state) {
        return Ok(ObjectsState::NoCluster(nc));
    }
    if state != "objects" {
        return Err(FactError::Parse(format!("unknown state `{state}`")));
    }
    let mut found = Vec::new();
    for (want, l) in lines.iter().filter(|l| !l.trim().is_empty()).enumerate() {
        let mut f = l.split('\t');
        let i: usize = f
            .next()
            .and_then(|i| i.trim().parse().ok())
            .ok_or_else(|| FactError::Parse(format!("bad object line {l:?}")))?;
        if i != want {
            return Err(FactError::Parse(format!(
                "object {i} answered in place of {want}"
            )));
        }
        found.push(match f.next() {
            Some("absent") => Presence::Absent,
            Some("present") => Presence::Present {
                deleting: f.next().is_some_and(|t| !t.trim().is_empty()),
                owners: f
                    .next()
                    .unwrap_or_default()
                    .split_whitespace()
                    .map(str::to_string)
                    .collect(),
            },
            _ => return Err(FactError::Parse(format!("bad object line {l:?}"))),
        });
    }
    Ok(ObjectsState::Objects(found))
}

impl Module for KubeDelete {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&self.fact(), shell)]
    }

    fn reads(&self) -> Vec<String> {
        vec![API_RESOURCE.to_string(), self.kubeconfig.clone()]
    }

    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let found = match facts.get(&self.fact())? {
            ObjectsState::NoCluster(nc) => {
                return Ok(Plan::noop(format!(
                    "nothing to delete: {}",
                    nc.describe(&self.kubeconfig)
                )))
            }
            ObjectsState::Objects(f) => f,
        };
        if found.len() != self.objects.len() {
            return Err(ModuleError::Fact(FactError::Parse(format!(
                "{} objects answered, {} asked for",
                found.len(),
                self.objects.len()
            ))));
        }
        let ours = format!("{}/Apply", self.field_manager);
        let mut delete = Vec::new();
        let mut left = Vec::new();
        for (o, p) in self.objects.iter().zip(&found) {
            match p {
                Presence::Absent | Presence::Present { deleting: true, .. } => {}
                Presence::Present { owners, .. } if owners.contains(&ours) => delete.push(o),
                Presence::Present { .. } => left.push(o.describe()),
            }
        }
        let left_note = if left.is_empty() {
            String::new()
        } else {
            format!(
                "; not applied by {}, left alone: {}",
                self.field_manager,
                left.join(", ")
            )
        };
        if delete.is_empty() {
            return Ok(Plan::noop(format!(
                "none of the {} object(s) applied by {} exists{left_note}",
                self.objects.len(),
                self.field_manager
            )));
        }
        let diff: String = delete
            .iter()
            .map(|o| format!("- {} (applied by {})\n", o.describe(), self.field_manager))
            .collect();
        Ok(Plan::Change(Change {
            action: Action::Delete,
            reason: format!(
                "{} object(s) applied by {} exist: {}{left_note}",
                delete.len(),
                self.field_manager,
                delete
                    .iter()
                    .map(|o| o.describe())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            diff: Some(diff),
            steps: vec![Step::Run(self.script(&delete))],
            touches: Touches::Resources(vec![API_RESOURCE.to_string()]),
        }))
    }
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
    fn object_lines() {
        assert_eq!(
            parse_objects(&out(
                "kwin: objects\n0\tabsent\n1\tpresent\t\tkwin/Apply kube-controller-manager/Update \n2\tpresent\t2026-11-25T03:15:00Z\tkwin/Apply \n"
            )),
            Ok(ObjectsState::Objects(vec![
                Presence::Absent,
                Presence::Present {
                    deleting: false,
                    owners: vec![
                        "kwin/Apply".into(),
                        "kube-controller-manager/Update".into()
                    ]
                },
                Presence::Present {
                    deleting: true,
                    owners: vec!["kwin/Apply".into()]
                },
            ]))
        );
        assert_eq!(
            parse_objects(&out("kwin: no-kubeconfig\n")),
            Ok(ObjectsState::NoCluster(NoCluster::NoKubeconfig))
        );
        assert!(parse_objects(&out("kwin: objects\n1\tabsent\n")).is_err());
        assert!(parse_objects(&out("kwin: objects\n0\twhat\n")).is_err());
        assert!(parse_objects(&out("kwin: other\n")).is_err());
    }
}
