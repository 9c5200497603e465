//! Unit tests of the validation rules.

use super::*;
use std::path::Path;

/// The module names tasks may use in these tests.
const MODULES: &[&str] = &["apt", "file"];

fn known() -> Names<'static> {
    Names {
        modules: MODULES,
        recipe_steps: &[],
    }
}

fn check_str(text: &str) -> Diagnostics {
    load_and_validate_str(Path::new("t.toml"), text, known()).diags
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
kubernetes_version = "1.37.2"

[cni]
plugin = "flannel"
"#;

/// (line, code) of every diagnostic of `text`.
fn codes(text: &str) -> Vec<(usize, &'static str)> {
    check_str(text)
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
fn unknown_modules_are_named_with_a_suggestion() {
    let text = format!(
        "{HOSTS}\n[[tasks]]\nname = \"motd\"\nmodule = \"file\"\nparams = {{ path = 5 }}\n\n\
         [[tasks]]\nname = \"x\"\nmodule = \"fiel\"\n"
    );
    let got = codes(&text);
    // Params are the build phase's (module::build): validation builds no module.
    let fiel_line = text
        .lines()
        .position(|l| l.contains("\"fiel\""))
        .map(|n| n + 1);
    assert_eq!(got, [(fiel_line.unwrap_or(0), "unknown-module")], "{got:?}");
    let d = check_str(&text);
    let unknown =
        d.0.iter()
            .find(|d| d.code == "unknown-module")
            .expect("reported");
    assert_eq!(unknown.hint.as_deref(), Some("did you mean `file`?"));
}

#[test]
fn selectors_and_afters_that_name_nothing_are_reported() {
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
    assert_eq!(plan.kubernetes_version().map(|v| v.minor), Some(37));
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

/// Recipes for the reference test: `kubeadm-init` on the first control plane, `kubeadm-join`
/// on workers.
const REF_RECIPES: &[(&str, &str)] = &[(
    "plans/t.toml",
    r#"
recipe = "t"
applies = {}
[[steps]]
name = "kubeadm-init"
module = "file"
when = "{{ host.is_first_control_plane }}"
[[steps]]
name = "kubeadm-join"
module = "file"
when = "{{ not host.is_control_plane }}"
"#,
)];

/// One grammar (`plan::refs`), one set of plan-level rules: a reference of the plan's
/// `[[tasks]]` is accepted by validation exactly when expansion accepts it. (Whether a recipe
/// step runs on a named host — `cp1:kubeadm-join` — depends on its `when`, which only
/// expansion evaluates; validation leaves that to it.)
#[test]
fn validation_and_expansion_accept_the_same_references() {
    let steps: Vec<String> = crate::expand::RecipeSet::parse(REF_RECIPES)
        .expect("recipes")
        .step_names
        .into_iter()
        .collect();
    let known = Names {
        modules: MODULES,
        recipe_steps: &steps,
    };
    let cases = [
        "motd",
        "cp1:motd",
        "@first_control_plane:kubeadm-init",
        "@all:kubeadm-join",
        "@workers:x",
        ":x",
        "cp1:",
        "a.b",
        "nohost:motd",
        // The task itself; a task of the plan that does not run where it is waited for.
        "probe",
        "ww1:motd",
        "@first_control_plane:motd",
        "kubeadm-init",
        "@all:nothing",
    ];
    let mut disagree = Vec::new();
    for r in cases {
        let text = format!(
            "{CLUSTER}{HOSTS}\n[[tasks]]\nname = \"motd\"\nmodule = \"file\"\non = {{ hosts = [\"cp1\"] }}\n\n\
             [[tasks]]\nname = \"probe\"\nmodule = \"file\"\non = {{ hosts = [\"cp1\"] }}\nafter = [{r:?}]\n"
        );
        let checked = load_and_validate_str(Path::new("t.toml"), &text, known);
        let validate_ok = !checked.diags.0.iter().any(|d| d.code == "task-after");
        let others: Vec<&crate::diag::Diagnostic> = checked
            .diags
            .errors()
            .filter(|d| d.code != "task-after")
            .collect();
        assert!(others.is_empty(), "{r}: {others:?}");
        let plan = checked.plan.expect("loads");
        let expand_ok = match crate::expand::expand(&plan, REF_RECIPES) {
            Ok(_) => true,
            Err(d) => {
                let other: Vec<_> = d.errors().filter(|d| d.code != "task-after").collect();
                assert!(other.is_empty(), "{r}: expansion: {other:?}");
                false
            }
        };
        if validate_ok != expand_ok {
            disagree.push(format!(
                "{r}: validation {}, expansion {}",
                if validate_ok { "accepts" } else { "refuses" },
                if expand_ok { "accepts" } else { "refuses" }
            ));
        }
    }
    assert!(disagree.is_empty(), "{disagree:#?}");
}

/// Calico VXLAN reads `vni` (cni-calico renders it as FelixConfiguration `vxlanVNI`, which
/// the operator hands to Calico's Windows dataplane too): no "ignored" warning there, while
/// flannel host-gw, which has no VXLAN, still gets one.
#[test]
fn vni_is_unused_only_where_no_vxlan_reads_it() {
    let calico = CLUSTER.replace("plugin = \"flannel\"", "plugin = \"calico\"\nvni = 5000");
    assert_eq!(only_codes(&format!("{calico}{HOSTS}")), Vec::<&str>::new());
    let linux_cp = &HOSTS[..HOSTS
        .find("[[hosts]]\nname = \"ww1\"")
        .unwrap_or(HOSTS.len())];
    let host_gw = CLUSTER.replace(
        "plugin = \"flannel\"",
        "plugin = \"flannel\"\nbackend = \"host-gw\"\nvni = 5000",
    );
    assert_eq!(only_codes(&format!("{host_gw}{linux_cp}")), ["cni-unused"]);
}

/// The plan of `CLUSTER` + `HOSTS` with `from` replaced by `to`.
fn with(from: &str, to: &str) -> String {
    let text = format!("{CLUSTER}{HOSTS}");
    assert!(text.contains(from), "{from}");
    text.replacen(from, to, 1)
}

#[test]
fn a_patch_never_released_is_refused_with_the_ones_that_exist() {
    let d = check_str(&with("1.37.2", "1.37.99"));
    let e = d.0.iter().find(|d| d.code == "k8s-version-unreleased");
    let e = e.unwrap_or_else(|| panic!("{d}"));
    assert!(e.summary.contains("1.37.0 to 1.37.2"), "{e:?}");
    assert!(
        e.hint.as_deref().unwrap_or("").contains("\"1.37.2\""),
        "{e:?}"
    );
    assert_eq!(only_codes(&with("1.37.2", "1.36.5")), Vec::<&str>::new());
}

#[test]
fn an_end_of_life_minor_warns_and_names_the_supported_ones() {
    let d = check_str(&with("1.37.2", "1.31.4"));
    let w = d.0.iter().find(|d| d.code == "k8s-end-of-life");
    let w = w.unwrap_or_else(|| panic!("{d}"));
    assert_eq!(w.severity, crate::diag::Severity::Warning);
    assert!(w.summary.contains("2025-10-28"), "{w:?}");
    assert!(!d.has_errors(), "{d}");
}

#[test]
fn containerd_1_x_is_refused_from_1_36_with_the_fix() {
    // Windows runs versions.containerd.
    let text = format!("{}\n[versions]\ncontainerd = \"1.7.29\"\n", with("", ""));
    let d = check_str(&text);
    let e = d.0.iter().find(|d| d.code == "containerd-version");
    let e = e.unwrap_or_else(|| panic!("{d}"));
    assert!(e.summary.contains("2.4.0+, 2.3.0+"), "{e:?}");
    // The distribution's package cannot serve 1.36+.
    let text = format!(
        "{}\n[runtime]\ncontainerd_source = \"package\"\n",
        with("", "")
    );
    assert_eq!(only_codes(&text), ["containerd-package"]);
    // ... but can 1.35 (its row lists 1.7.28+).
    let text = text.replace("1.37.2", "1.35.8");
    assert_eq!(only_codes(&text), Vec::<&str>::new());
}

#[test]
fn calico_is_refused_with_windows_server_2025_and_old_calico_from_1_36() {
    let text = with("plugin = \"flannel\"", "plugin = \"calico\"")
        + "labels = { \"node.kubernetes.io/windows-build\" = \"10.0.26100\" }\n";
    assert_eq!(only_codes(&text), ["calico-windows-server"]);
    let text = text.replace("10.0.26100", "10.0.20348");
    assert!(!only_codes(&text).contains(&"calico-windows-server"));
    let text = format!(
        "{}\n[versions]\ncalico = \"v3.29.7\"\n",
        with("plugin = \"flannel\"", "plugin = \"calico\"")
    );
    assert_eq!(only_codes(&text), ["component-version"]);
}

#[test]
fn docker_is_refused_from_1_36_naming_the_cri_dockerd_issues() {
    let text = format!(
        "{}\n[runtime]\nlinux = \"docker\"\ncri_dockerd = true\n",
        with("", "")
    );
    let d = check_str(&text);
    let e = d.0.iter().find(|d| d.code == "docker-kubernetes");
    let e = e.unwrap_or_else(|| panic!("{d}"));
    assert!(
        e.summary.contains("#560") && e.summary.contains("#569"),
        "{e:?}"
    );
    assert_eq!(
        only_codes(&text.replace("1.37.2", "1.35.8")),
        Vec::<&str>::new()
    );
}

#[test]
fn a_plans_runc_is_checked_against_the_matrix() {
    let text = format!("{}\n[versions]\nrunc = \"1.1.15\"\n", with("", ""));
    assert_eq!(only_codes(&text), ["component-version"]);
    let text = text.replace("1.1.15", "1.4.4");
    assert_eq!(only_codes(&text), Vec::<&str>::new());
}
