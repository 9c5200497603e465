//! Unit tests of the validation rules with a small module registry.

use super::*;
use crate::fact::{FactQuery, Facts};
use crate::module::ModuleError;
use crate::module::{Ctx, Module, ParamError, Plan};
use crate::transport::Shell;
use std::path::Path;

/// A registry with `file` (both shells; needs a string `path`) and `apt` (Linux only).
struct TestRegistry;

#[derive(Debug)]
struct Nop;

impl Module for Nop {
    fn facts(&self, _shell: Shell) -> Vec<FactQuery> {
        Vec::new()
    }
    fn plan(&self, _facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        Ok(Plan::noop("test"))
    }
}

impl Registry for TestRegistry {
    fn names(&self) -> Vec<&'static str> {
        vec!["apt", "file"]
    }
    fn build(
        &self,
        name: &str,
        shell: Shell,
        params: &serde_json::Value,
    ) -> Result<Box<dyn Module>, ParamError> {
        match (name, shell) {
            ("file", _) => match params.get("path") {
                Some(serde_json::Value::String(_)) => Ok(Box::new(Nop)),
                Some(_) => Err(ParamError::at("path", "expected a string")),
                None => Err(ParamError::new("missing parameter `path`")),
            },
            ("apt", Shell::Posix) => Ok(Box::new(Nop)),
            ("apt", Shell::PowerShell) => Err(ParamError::new(
                "module `apt` is not available on Windows hosts",
            )),
            _ => Err(ParamError::new(format!("unknown module `{name}`"))),
        }
    }
}

const HOSTS: &str = r#"
[[hosts]]
name = "cp1"
address = "192.168.56.10"
os = "linux"
role = "control-plane"

[[hosts]]
name = "ww1"
address = "192.168.56.21"
os = "windows"
role = "worker"
password_env = "PW"
"#;

const CLUSTER: &str = r#"
[cluster]
name = "lab"
kubernetes_version = "1.31.4"

[cni]
plugin = "flannel"
"#;

/// (line, code) of every diagnostic of `text`.
fn codes(text: &str) -> Vec<(usize, &'static str)> {
    crate::plan::check_str(Path::new("t.toml"), text, &TestRegistry, &[])
        .0
        .iter()
        .map(|d| (d.location.as_ref().map_or(0, |l| l.line), d.code))
        .collect()
}

fn only_codes(text: &str) -> Vec<&'static str> {
    codes(text).into_iter().map(|(_, c)| c).collect()
}

#[test]
fn a_good_cluster_is_clean() {
    assert_eq!(codes(&format!("{CLUSTER}{HOSTS}")), []);
}

#[test]
fn task_params_are_checked_per_shell() {
    let text = format!(
        "{HOSTS}\n[[tasks]]\nname = \"motd\"\nmodule = \"file\"\nparams = {{ path = 5 }}\n\n\
         [[tasks]]\nname = \"pkgs\"\nmodule = \"apt\"\n\n\
         [[tasks]]\nname = \"x\"\nmodule = \"fiel\"\n"
    );
    let got = codes(&text);
    // params.path: one error although two shells build the module.
    assert_eq!(
        got.iter().filter(|(_, c)| *c == "task-params").count(),
        2,
        "{got:?}"
    );
    let fiel_line = text
        .lines()
        .position(|l| l.contains("\"fiel\""))
        .map(|n| n + 1);
    assert!(
        got.contains(&(fiel_line.unwrap_or(0), "unknown-module")),
        "{got:?}"
    );
    let d = crate::plan::check_str(Path::new("t.toml"), &text, &TestRegistry, &[]);
    let unknown =
        d.0.iter()
            .find(|d| d.code == "unknown-module")
            .expect("reported");
    assert_eq!(unknown.hint.as_deref(), Some("did you mean `file`?"));
    let apt =
        d.0.iter()
            .find(|d| d.summary.contains("`apt`"))
            .expect("reported");
    assert!(apt.summary.contains("on Windows hosts"), "{apt:?}");
}

#[test]
fn selectors_and_after() {
    let text = format!(
        "{HOSTS}\n[[tasks]]\nname = \"a\"\nmodule = \"file\"\nparams = {{ path = \"/x\" }}\non = {{ hosts = [\"cp2\"] }}\n\n\
         [[tasks]]\nname = \"b\"\nmodule = \"file\"\nparams = {{ path = \"/x\" }}\non = {{ os = \"linux\", roles = [\"worker\"] }}\n\n\
         [[tasks]]\nname = \"c\"\nmodule = \"file\"\nparams = {{ path = \"/x\" }}\nafter = [\"nope\", \"c\", \"cp9:a\", \"b\"]\n"
    );
    let got = only_codes(&text);
    assert_eq!(
        got,
        [
            "selector-host",
            "selector-empty",
            "task-after",
            "task-after",
            "task-after",
            "task-after"
        ],
        "{got:?}"
    );
}

#[test]
fn rules_skip_what_was_cut_out() {
    // A role with a wrong value is reported once, not again as "no role" / "no control plane".
    let text = format!("{CLUSTER}\n[[hosts]]\nname = \"cp1\"\naddress = \"10.1.0.1\"\nos = \"linux\"\nrole = \"master\"\n");
    assert_eq!(only_codes(&text), ["unknown-value"]);
    // Without that care, a missing role is reported.
    let text =
        format!("{CLUSTER}\n[[hosts]]\nname = \"cp1\"\naddress = \"10.1.0.1\"\nos = \"linux\"\n");
    assert_eq!(only_codes(&text), ["no-control-plane", "host-role"]);
}

#[test]
fn plan_accessors_give_effective_values() {
    let text = format!("{CLUSTER}{HOSTS}");
    let plan = crate::plan::load_str(Path::new("t.toml"), &text).expect("loads");
    let net = plan.cluster_net().expect("net");
    assert_eq!(net.dns_service_ip.to_string(), "10.96.0.10");
    assert_eq!(net.pod_cidr.to_string(), "10.244.0.0/16");
    let cni = plan.cni_settings().expect("cni");
    assert_eq!((cni.vni, cni.port), (4096, 4789));
    assert_eq!(
        plan.first_control_plane().map(|h| h.name.as_str()),
        Some("cp1")
    );
    assert_eq!(plan.kubernetes_version().map(|v| v.minor), Some(31));
    assert!(plan.has_windows());
    assert_eq!(plan.nodes().count(), 2);
}

#[test]
fn a_plan_with_only_tasks_is_clean() {
    let text = "[[hosts]]\nname = \"web1\"\naddress = \"192.168.56.30\"\nos = \"linux\"\n\n\
                [[tasks]]\nname = \"motd\"\nmodule = \"file\"\nparams = { path = \"/etc/motd\" }\n";
    assert_eq!(codes(text), []);
    let plan = crate::plan::load_str(Path::new("t.toml"), text).expect("loads");
    assert!(plan.cluster_net().is_none());
    assert!(plan.first_control_plane().is_none());
}

#[test]
fn param_errors_point_at_the_param() {
    let text = "[[hosts]]\nname = \"web1\"\naddress = \"192.168.56.30\"\nos = \"linux\"\n\n\
                [[tasks]]\nname = \"motd\"\nmodule = \"file\"\nparams = { path = 5 }\n";
    let d = crate::plan::check_str(Path::new("t.toml"), text, &TestRegistry, &[]);
    let e = d.0.first().expect("one error");
    assert_eq!(e.code, "task-params");
    let loc = e.location.as_ref().expect("located");
    // `params = { path = 5 }` on line 9: the 5.
    assert_eq!((loc.line, loc.col), (9, 19));
    assert!(
        e.summary.contains("params.path: expected a string"),
        "{e:?}"
    );
}
