//! The support matrix's Windows Server rules on the build each Windows host reports, as the
//! recipes render them: windows-worker's `windows-build` step (the `hotfix` module with the
//! matrix's releases, `windows.server_releases`) refuses a release the cluster cannot run
//! (Calico on Windows Server 2025) and warns about one Kubernetes no longer lists (2019), at
//! `kwin plan` and `kwin apply`, though the plan carries no `node.kubernetes.io/windows-build`
//! label: what validation says of such a label, said of the probed build, naming the host,
//! its build and the fix.

mod kube_common;

use kube_common::{expand, plan_text, task};
use kwin_engine::fact::{FactOutput, Facts};
use kwin_engine::module::{Ctx, Inputs, ModuleError, Plan, Registry};
use kwin_engine::transport::Shell;
use kwin_modules::Builtin;

/// Plan ww1's `windows-build` step of `plan` (examples/<plan>) on a host that reports
/// `build`.`ubr`.
fn windows_build(plan: &str, build: u32, ubr: u32) -> Result<Plan, ModuleError> {
    let rel = format!("examples/{plan}");
    let tasks = expand(&rel, &plan_text(&rel, &[]));
    let t = task(&tasks, "ww1", "windows-build");
    let m = Builtin
        .build(&t.module, Shell::PowerShell, &t.params)
        .unwrap_or_else(|e| panic!("{}: {e}", t.module));
    let mut facts = Facts::new();
    for q in m.facts(Shell::PowerShell) {
        facts.insert(
            q.key.clone(),
            FactOutput {
                stdout: format!(
                    r#"{{"product":"Windows Server","major":10,"minor":0,"build":{build},"ubr":{ubr},"hotfixes":[]}}"#
                )
                .into_bytes(),
                ..FactOutput::default()
            },
        );
    }
    let inputs = Inputs::new();
    m.plan(
        &facts,
        &Ctx {
            shell: Shell::PowerShell,
            host: "ww1",
            inputs: &inputs,
            nonce: "0123456789abcdef0123456789abcdef",
        },
    )
}

#[test]
fn calico_refuses_a_host_that_reports_windows_server_2025() {
    match windows_build("calico.toml", 26100, 1742) {
        Err(ModuleError::Precondition(m)) => {
            assert!(
                m.contains("`ww1` (build 10.0.26100.1742) runs Windows Server 2025, which Calico does not support"),
                "{m}"
            );
            assert!(
                m.contains("use flannel (plugin = \"flannel\") for this cluster, or Windows Server 2022 for this node"),
                "{m}"
            );
        }
        other => panic!("Calico on 2025 passed: {other:?}"),
    }
    // flannel runs there; 2022 runs Calico.
    assert!(matches!(
        windows_build("flannel.toml", 26100, 1742),
        Ok(Plan::NoOp { warning: None, .. })
    ));
    assert!(matches!(
        windows_build("calico.toml", 20348, 2700),
        Ok(Plan::NoOp { warning: None, .. })
    ));
}

#[test]
fn a_host_that_reports_windows_server_2019_gets_the_matrix_warning() {
    for plan in ["flannel.toml", "calico.toml"] {
        match windows_build(plan, 17763, 6054) {
            Ok(Plan::NoOp {
                warning: Some(w), ..
            }) => {
                assert!(
                    w.contains("`ww1` (build 10.0.17763.6054) runs Windows Server 2019, which current Kubernetes releases no longer list: use Windows Server 2022 or 2025 for this node"),
                    "{plan}: {w}"
                );
            }
            other => panic!("{plan}: 2019 without a warning: {other:?}"),
        }
    }
}

#[test]
fn a_build_the_matrix_does_not_know_is_named_in_a_warning() {
    match windows_build("flannel.toml", 25398, 1189) {
        Ok(Plan::NoOp {
            warning: Some(w), ..
        }) => assert!(w.contains("`ww1` runs build 10.0.25398.1189"), "{w}"),
        other => panic!("an unknown build passed silently: {other:?}"),
    }
}
