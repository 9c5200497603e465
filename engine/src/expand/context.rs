//! The template context of recipes and user task params: [`Effective`] serialized, plus the
//! functions that render command-line flags through the version table.
//!
//! Effective values are decided in `plan/effective.rs`, never here. [`TemplateContext::new`]
//! serializes them once; per host only `host` changes, so the context of 1,000 hosts is
//! linear.
//!
//! Variables (see `plan::effective` for every field):
//! `cluster`, `cni`, `runtime`, `versions`, `proxy`, `artifacts`, `windows`, `upgrade` (only
//! with `[cluster]`),
//! `host`, `first_control_plane` (none without a control plane), `hosts` (every host), `var`
//! (the plan's variables that have a value).

use crate::diag::Diagnostics;
pub use crate::plan::effective::ComponentVersions;
use crate::plan::effective::Effective;
use crate::plan::versions;
use crate::plan::LoadedPlan;
use crate::template::Value;

/// The template context and what expansion needs besides it, for one plan.
#[derive(Debug, Clone)]
pub struct RecipeContext {
    ctx: TemplateContext,
    /// Index in `plan.hosts` of the first control plane.
    pub first_control_plane: Option<usize>,
    /// Whether the plan has `[cluster]` (recipes apply only then).
    pub has_cluster: bool,
    /// The versions the flag table is keyed by, for `flag()` / `flag_supported()`.
    pub component_versions: ComponentVersions,
}

impl RecipeContext {
    /// The context of `plan`'s effective values (see [`Effective::build`] for its errors).
    pub fn from_plan(plan: &LoadedPlan) -> Result<RecipeContext, Diagnostics> {
        Ok(RecipeContext::new(&Effective::build(plan)?))
    }

    pub fn new(eff: &Effective) -> RecipeContext {
        RecipeContext {
            ctx: TemplateContext::new(eff),
            first_control_plane: eff.first_control_plane_index(),
            has_cluster: eff.cluster.is_some(),
            component_versions: eff.component_versions(),
        }
    }

    /// The context of the plan's host at index `i` (as in `plan.hosts`).
    pub fn for_host(&self, i: usize) -> Value {
        self.ctx.for_host(i)
    }
}

/// The values templates see, built from [`Effective`](crate::plan::effective::Effective):
/// its parts serialized once, per host only `host` changes. Cheap to clone per host
/// (minijinja values are shared).
#[derive(Debug, Clone)]
pub struct TemplateContext {
    shared: Vec<(&'static str, Value)>,
    hosts: Vec<Value>,
}

impl TemplateContext {
    pub fn new(eff: &Effective) -> TemplateContext {
        let mut shared: Vec<(&'static str, Value)> = vec![(
            "first_control_plane",
            Value::from_serialize(&eff.first_control_plane),
        )];
        if let (Some(cluster), Some(cni), Some(runtime), Some(versions)) =
            (&eff.cluster, &eff.cni, &eff.runtime, &eff.versions)
        {
            shared.push(("cluster", Value::from_serialize(cluster)));
            shared.push(("cni", Value::from_serialize(cni)));
            shared.push(("runtime", Value::from_serialize(runtime)));
            shared.push(("versions", Value::from_serialize(versions)));
            shared.push(("proxy", Value::from_serialize(&eff.proxy)));
            shared.push(("artifacts", Value::from_serialize(&eff.artifacts)));
            shared.push(("windows", Value::from_serialize(&eff.windows)));
            shared.push(("upgrade", Value::from_serialize(eff.upgrade)));
        }
        let hosts: Vec<Value> = eff.hosts.iter().map(Value::from_serialize).collect();
        shared.push(("hosts", Value::from(hosts.clone())));
        // The plan's variables that have a value (`plan/vars.rs`), typed as declared.
        shared.push(("var", Value::from_serialize(&eff.vars)));
        TemplateContext { shared, hosts }
    }

    /// The context of the plan's host at index `i` (as in `plan.hosts`).
    pub fn for_host(&self, i: usize) -> Value {
        let host = self.hosts.get(i).cloned().unwrap_or(Value::from(()));
        Value::from_iter(
            self.shared
                .iter()
                .map(|(k, v)| (*k, v.clone()))
                .chain(std::iter::once(("host", host))),
        )
    }
}

fn template_error(msg: String) -> minijinja::Error {
    minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, msg)
}

/// The text of a flag value: strings as they are, numbers and booleans as minijinja prints
/// them (`false`, `110`).
fn flag_value_text(v: &Value) -> String {
    if let Some(s) = v.as_str() {
        return s.to_string();
    }
    if v.kind() == minijinja::value::ValueKind::Bool {
        // minijinja prints `True`; command lines take `true`.
        return v.is_true().to_string();
    }
    v.to_string()
}

/// `flag(component, '--name', value)` renders one command-line flag (`--name=value`, or
/// `--name` for a flag without a value) after checking it against the flag table
/// (`plan/versions.toml`): a flag the table does not list, a value where the flag takes none
/// (or none where it takes one), and a flag the component's version does not accept are
/// errors naming the upstream source. `flag_supported(component, '--name')` says whether the
/// component's version accepts the flag, so a recipe states per version what it does when a
/// flag is gone (it is an error for a flag the table does not list).
pub fn add_flag_functions(env: &mut minijinja::Environment<'_>, cv: ComponentVersions) {
    let v = cv.clone();
    env.add_function(
        "flag",
        move |component: &str, name: &str, value: Option<Value>| -> Result<String, minijinja::Error> {
            let f = versions::flag(component, name).map_err(template_error)?;
            let ver = v.of(component).map_err(template_error)?;
            match versions::flag_support(component, name, &ver).map_err(template_error)? {
                versions::Support::Removed { removed, source } => {
                    return Err(template_error(format!(
                        "{component} {ver} does not accept {name}: removed in {removed} ({source}); render it only where flag_supported('{component}', '{name}')"
                    )))
                }
                versions::Support::NotYet { added } => {
                    return Err(template_error(format!(
                        "{component} {ver} does not have {name} yet (added in {added}); render it only where flag_supported('{component}', '{name}')"
                    )))
                }
                versions::Support::Accepted { .. } => {}
            }
            let value = value.filter(|x| !x.is_none() && !x.is_undefined());
            match (f.value, value) {
                (true, Some(x)) => Ok(format!("{name}={}", flag_value_text(&x))),
                (true, None) => Err(template_error(format!(
                    "{component} {name} takes a value; flag() was given none"
                ))),
                (false, None) => Ok(name.to_string()),
                (false, Some(x)) => Err(template_error(format!(
                    "{component} {name} takes no value; flag() was given `{x}`"
                ))),
            }
        },
    );
    env.add_function(
        "flag_supported",
        move |component: &str, name: &str| -> Result<bool, minijinja::Error> {
            versions::flag(component, name).map_err(template_error)?;
            let ver = cv.of(component).map_err(template_error)?;
            Ok(matches!(
                versions::flag_support(component, name, &ver).map_err(template_error)?,
                versions::Support::Accepted { .. }
            ))
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> LoadedPlan {
        crate::plan::load_str(std::path::Path::new("/lab/plan.toml"), text).expect("plan loads")
    }

    #[test]
    fn defaults_fill_the_gaps() {
        let p = plan(
            r#"
[cluster]
name = "lab"
kubernetes_version = "1.31.4"
service_cidr = "10.100.0.0/16"
[cni]
plugin = "flannel"
[proxy]
http = "http://proxy:3128"
no_proxy = ["corp.example"]
[[hosts]]
name = "cp1"
address = "192.168.1.10"
os = "linux"
role = "control-plane"
transport = "local"
"#,
        );
        let ctx = RecipeContext::from_plan(&p).expect("context");
        let v = ctx.for_host(0);
        let get = |path: &str| {
            let mut cur = v.clone();
            for part in path.split('.') {
                cur = cur.get_attr(part).expect("attr");
            }
            cur.to_string()
        };
        assert_eq!(get("cluster.dns_service_ip"), "10.100.0.10");
        assert_eq!(get("cluster.pod_cidr"), "10.244.0.0/16");
        assert_eq!(get("cluster.minor"), "1.31");
        assert_eq!(get("cluster.control_plane_endpoint"), "192.168.1.10:6443");
        assert_eq!(get("cni.vni"), "4096");
        assert_eq!(
            get("versions.containerd"),
            crate::plan::support::pins().containerd
        );
        assert_eq!(get("windows.cni_bin_dir"), r"C:\opt\cni\bin");
        assert_eq!(get("windows.cni_conf_dir"), r"C:\etc\cni\net.d");
        assert_eq!(get("host.is_first_control_plane").to_lowercase(), "true");
        assert_eq!(
            get("host.cri_socket"),
            "unix:///run/containerd/containerd.sock"
        );
        let no_proxy = get("proxy.no_proxy");
        for s in [
            "corp.example",
            "10.244.0.0/16",
            ".cluster.local",
            "192.168.1.10",
        ] {
            assert!(no_proxy.contains(s), "{no_proxy}");
        }
    }

    #[test]
    fn without_a_cluster_the_context_has_only_hosts() {
        let p = plan(
            r#"
[[hosts]]
name = "a"
os = "linux"
transport = "local"
"#,
        );
        let ctx = RecipeContext::from_plan(&p).expect("context");
        let v = ctx.for_host(0);
        assert!(v.get_attr("cluster").expect("lookup").is_undefined());
        assert_eq!(
            v.get_attr("host")
                .and_then(|h| h.get_attr("name"))
                .map(|n| n.to_string())
                .ok()
                .as_deref(),
            Some("a")
        );
    }

    #[test]
    fn flag_functions_check_the_version_table() {
        let env_for = |k8s: &str| {
            let mut env = crate::template::environment();
            add_flag_functions(
                &mut env,
                ComponentVersions {
                    kubernetes: Some(k8s.into()),
                    flannel: Some("v0.26.7".into()),
                    containerd: Some("1.7.29".into()),
                },
            );
            env
        };
        let eval = |k8s: &str, expr: &str| {
            let env = env_for(k8s);
            let e = env.compile_expression(expr).expect("compiles");
            e.eval(minijinja::context! {}).map(|v| v.to_string())
        };
        let pod_infra =
            "flag('kubelet', '--pod-infra-container-image', 'registry.k8s.io/pause:3.10')";
        assert_eq!(
            eval("1.34.2", pod_infra).expect("1.34 takes it"),
            "--pod-infra-container-image=registry.k8s.io/pause:3.10"
        );
        let err = eval("1.35.0", pod_infra)
            .expect_err("1.35 refuses it")
            .to_string();
        assert!(
            err.contains("removed in 1.35") && err.contains("#133779"),
            "{err}"
        );
        let supported = "flag_supported('kubelet', '--pod-infra-container-image')";
        assert_eq!(eval("1.34.2", supported).expect("ok"), "True");
        assert_eq!(eval("1.35.0", supported).expect("ok"), "False");
        assert_eq!(
            eval("1.31.4", "flag('kubelet', '--cgroups-per-qos', false)").expect("ok"),
            "--cgroups-per-qos=false"
        );
        assert_eq!(
            eval("1.31.4", "flag('kubelet', '--windows-service')").expect("ok"),
            "--windows-service"
        );
        assert_eq!(
            eval("1.31.4", "flag('kubelet', '--resolv-conf', '')").expect("ok"),
            "--resolv-conf="
        );
        for bad in [
            "flag('kubelet', '--no-such-flag', 'x')",
            "flag('kubelet', '--node-ip')",
            "flag('kubelet', '--node-ip', none)",
            "flag('kubelet', '--windows-service', 'yes')",
            "flag('kubelett', '--node-ip', 'x')",
            "flag_supported('kubelet', '--no-such-flag')",
        ] {
            assert!(eval("1.31.4", bad).is_err(), "{bad} should be refused");
        }
        assert_eq!(
            eval("1.31.4", "flag('flanneld', '--kube-subnet-mgr')").expect("ok"),
            "--kube-subnet-mgr"
        );
        // Without [cluster] there is no version to check against.
        let mut env = crate::template::environment();
        add_flag_functions(&mut env, ComponentVersions::default());
        let e = env
            .compile_expression("flag('kubelet', '--node-ip', 'x')")
            .expect("compiles");
        assert!(e.eval(minijinja::context! {}).is_err());
    }
}
