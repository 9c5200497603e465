//! Every script `kwin verify` and `kwin reset` can send parses: the reset recipes expanded
//! for the example plans (PowerShell on Windows hosts through tree-sitter-powershell, POSIX sh
//! through `sh -n`), the modules' fact scripts for those tasks, and verify's kubectl scripts
//! and the PowerShell it runs inside the Windows pod.

use kwin_engine::module::Registry;
use kwin_engine::plan::model::Os;
use kwin_engine::transport::Shell;
use kwin_modules::kube::verify as v;
use kwin_modules::Builtin;
use kwin_testkit::scripts::ps_syntax_errors;
use std::path::Path;

fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn sh_n(what: &str, script: &str) {
    let out = std::process::Command::new("sh")
        .args(["-n", "-c", script])
        .output()
        .expect("sh -n");
    assert!(
        out.status.success(),
        "{what}: sh -n: {}\n{script}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn ps_ok(what: &str, script: &str) {
    let errs = ps_syntax_errors(script);
    assert!(errs.is_empty(), "{what}: {errs:?}\n{script}");
}

#[test]
fn reset_recipes_generate_clean_scripts() {
    for example in ["examples/flannel.toml", "examples/calico.toml"] {
        let mut plan = kwin_engine::plan::load(&root().join(example))
            .unwrap_or_else(|d| panic!("{example}: {d}"));
        plan.file.tasks.clear();
        let tasks = kwin_engine::expand::expand(&plan, kwin_modules::recipes::RESET_RECIPES)
            .unwrap_or_else(|d| panic!("{example}: {d}"));
        let mut windows_tasks = 0;
        for t in &tasks {
            let host = plan
                .hosts
                .iter()
                .find(|h| h.name == t.id.host)
                .expect("host of the plan");
            let shell = match host.os {
                Os::Windows => Shell::PowerShell,
                Os::Linux => Shell::Posix,
            };
            let what = format!("{example} {}", t.id);
            for key in ["run", "onlyif", "unless"] {
                if let Some(s) = t.params.get(key).and_then(|v| v.as_str()) {
                    match shell {
                        Shell::PowerShell => ps_ok(&format!("{what} {key}"), s),
                        Shell::Posix => sh_n(&format!("{what} {key}"), s),
                    }
                }
            }
            let m = Builtin
                .build(&t.module, shell, &t.params)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            for q in m.facts(shell) {
                match shell {
                    Shell::PowerShell => ps_ok(&format!("{what} fact {}", q.key), &q.command),
                    Shell::Posix => sh_n(&format!("{what} fact {}", q.key), &q.command),
                }
            }
            if shell == Shell::PowerShell {
                windows_tasks += 1;
            }
        }
        assert!(
            windows_tasks >= 7,
            "{example}: {windows_tasks} Windows tasks"
        );
    }
}

#[test]
fn verify_scripts_parse() {
    let kc = "/etc/kubernetes/admin.conf";
    let ns = "kwin-verify";
    let w = v::Workloads {
        namespace: ns.into(),
        windows: true,
        windows_build: Some("10.0.17763".into()),
        linux_on_control_plane: false,
    };
    for (what, s) in [
        ("get nodes", v::get_json(kc, "nodes", None)),
        ("get pods", v::get_json(kc, "pods", Some(ns))),
        ("namespace state", v::namespace_state(kc, ns)),
        ("apply", v::apply(kc, &w.manifest())),
        ("delete", v::delete_namespace(kc, ns)),
        (
            "curl",
            v::pod_curl(kc, ns, v::CLIENT, "http://10.244.1.5:80/", false),
        ),
        (
            "curl from Windows",
            v::pod_curl(kc, ns, v::WIN_WEB, "https://example.com/it's", true),
        ),
        (
            "nslookup",
            v::pod_nslookup(kc, ns, v::CLIENT, "linux-web.kwin-verify.svc.cluster.local"),
        ),
        ("host curl", v::host_curl("http://10.0.0.21:31080/")),
    ] {
        sh_n(what, &s);
    }
}
