//! The real-VM material in examples/: the CI workflow (examples/ci/github-actions.yml), its plan
//! (examples/ci/cluster.toml, whose cloud-given values are plan variables) and the Windows
//! preparation script (examples/real-vms/prepare-windows.ps1). None of it can run here (no
//! cloud, no Windows); what can be checked is: the workflow is valid YAML whose every `run:`
//! step passes shellcheck, every file it names exists, it sets every variable the plan declares
//! without a default (`KWIN_VAR_<name>`) and fills nothing in with another tool, the plan with
//! its variables given (`--var` and `KWIN_VAR_`) validates clean with kwin and without them
//! names each missing one at its line, and the PowerShell parses.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The workflow as JSON (PyYAML's safe loader: the YAML 1.1 GitHub Actions reads).
fn workflow() -> serde_json::Value {
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 (with PyYAML: apt python3-yaml)");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(read("examples/ci/github-actions.yml").as_bytes())
            .expect("write");
    }
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "the workflow is not valid YAML: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

fn steps(wf: &serde_json::Value) -> Vec<serde_json::Value> {
    let jobs = wf["jobs"].as_object().expect("jobs");
    assert!(!jobs.is_empty());
    jobs.values()
        .flat_map(|j| j["steps"].as_array().cloned().expect("steps"))
        .collect()
}

/// `${{ expr }}` → a plain word, so shellcheck reads what bash would get.
fn without_expressions(script: &str) -> String {
    let mut out = String::new();
    let mut rest = script;
    while let Some(i) = rest.find("${{") {
        out.push_str(&rest[..i]);
        match rest[i..].find("}}") {
            Some(j) => {
                out.push_str("EXPR");
                rest = &rest[i + j + 2..];
            }
            None => {
                rest = &rest[i..];
                break;
            }
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn workflow_is_valid_and_every_run_step_passes_shellcheck() {
    let wf = workflow();
    assert_eq!(wf["name"], "hybrid-lab");
    let steps = steps(&wf);
    let runs: Vec<(String, String)> = steps
        .iter()
        .filter_map(|s| {
            s["run"].as_str().map(|r| {
                (
                    s["name"].as_str().unwrap_or("(unnamed)").to_string(),
                    r.to_string(),
                )
            })
        })
        .collect();
    assert!(runs.len() >= 7, "{} run steps", runs.len());
    let dir = tempfile::tempdir().expect("tmp");
    let mut failures = Vec::new();
    for (i, (name, run)) in runs.iter().enumerate() {
        let path = dir.path().join(format!("step{i}.sh"));
        std::fs::write(&path, format!("#!/bin/bash\n{}", without_expressions(run))).expect("write");
        let out = Command::new("shellcheck")
            .args(["-s", "bash", "-S", "warning", "-f", "gcc"])
            .arg(&path)
            .output()
            .expect("shellcheck (apt shellcheck)");
        if !out.status.success() {
            failures.push(format!(
                "step `{name}`:\n{}",
                String::from_utf8_lossy(&out.stdout)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The cloud resources are deleted whatever happened.
    let last = steps.last().expect("a step");
    assert_eq!(last["if"], "always()");
    assert!(last["run"]
        .as_str()
        .is_some_and(|r| r.contains("az group delete")));
}

#[test]
fn workflow_names_files_that_exist_and_sets_every_plan_variable() {
    let text = read("examples/ci/github-actions.yml");
    for rel in [
        "examples/ci/cluster.toml",
        "examples/real-vms/prepare-windows.ps1",
    ] {
        assert!(text.contains(rel), "the workflow does not use {rel}");
        assert!(root().join(rel).is_file(), "{rel} is missing");
    }
    // The plan is used as written: kwin's variables, no template tool.
    for tool in ["envsubst", "sed -i", "gettext"] {
        assert!(
            !text.contains(tool),
            "the workflow fills the plan in with {tool}"
        );
    }
    let plan = read("examples/ci/cluster.toml");
    assert!(
        !plan.contains("${"),
        "a shell-style placeholder is left in the plan"
    );
    let vars = plan_variables(&plan);
    let needed: Vec<&String> = vars
        .iter()
        .filter(|(_, has_default)| !**has_default)
        .map(|(name, _)| name)
        .collect();
    assert!(needed.len() >= 10, "{vars:?}");
    for v in needed {
        let per_vm = match v.split_once('_') {
            Some((host, suffix)) if ["cp1", "lw1", "ww1", "ww2"].contains(&host) => {
                text.contains(&format!("KWIN_VAR_${{vm}}_{suffix}="))
            }
            _ => false,
        };
        let set = per_vm || text.contains(&format!("KWIN_VAR_{v}="));
        assert!(set, "the workflow never sets KWIN_VAR_{v}");
    }
}

/// The plan's `[variables]`: name → whether it has a default.
fn plan_variables(plan: &str) -> BTreeMap<String, bool> {
    let doc: toml::Table = toml::from_str(plan).expect("the CI plan is TOML");
    doc.get("variables")
        .and_then(|v| v.as_table())
        .expect("[variables]")
        .iter()
        .map(|(k, v)| (k.clone(), v.get("default").is_some()))
        .collect()
}

/// Values a cloud would give: public and private addresses, host keys, certificates.
const VALUES: [(&str, &str); 12] = [
    ("cp1_public", "20.1.2.10"),
    ("cp1_private", "10.10.1.4"),
    (
        "cp1_host_key",
        "SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s",
    ),
    ("lw1_public", "20.1.2.11"),
    ("lw1_private", "10.10.1.5"),
    (
        "lw1_host_key",
        "SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU",
    ),
    ("ww1_public", "20.1.2.21"),
    ("ww1_private", "10.10.1.6"),
    (
        "ww1_cert",
        "6f:3a:1c:0e:98:7b:52:d4:11:aa:09:3e:7c:5d:2b:80:44:91:fe:63:0d:8c:b7:21:5a:e9:34:c6:70:1f:ad:02",
    ),
    ("ww2_public", "20.1.2.22"),
    ("ww2_private", "10.10.1.7"),
    (
        "ww2_cert",
        "a1:04:7e:55:c9:3b:20:8f:6d:e2:91:0c:4b:77:d8:3a:15:62:f0:9e:2c:b4:58:01:ca:6f:93:e7:40:1d:bb:8c",
    ),
];

/// `kwin validate` on a copy of the CI plan, as the workflow runs it: HOME holds the key the
/// `ssh_key` default names; no `KWIN_VAR_*` but `env`.
fn validate_copy(args: &[String], env: &[(String, String)]) -> (bool, String) {
    let dir = tempfile::tempdir().expect("tmp");
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).expect("home");
    std::fs::write(home.join(".ssh/kwin_lab"), "not read by validate").expect("key");
    let path = dir.path().join("plan.toml");
    std::fs::write(&path, read("examples/ci/cluster.toml")).expect("write");
    let mut cmd = kwin_testkit::kwin!(".").command();
    cmd.arg("validate").arg(&path).args(args).env("HOME", &home);
    for (k, _) in std::env::vars() {
        if k.starts_with("KWIN_VAR_") {
            cmd.env_remove(k);
        }
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    let out = cmd.output().expect("kwin");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn plan_with_its_variables_given_validates_clean() {
    // half on the command line, half in the environment, as a job may mix them
    let mut args = Vec::new();
    let mut env = Vec::new();
    for (i, (k, v)) in VALUES.iter().enumerate() {
        if i % 2 == 0 {
            args.push("--var".to_string());
            args.push(format!("{k}={v}"));
        } else {
            env.push((format!("KWIN_VAR_{k}"), v.to_string()));
        }
    }
    let (ok, text) = validate_copy(&args, &env);
    assert!(ok, "{text}");
    assert!(text.contains("ok (0 warnings)"), "{text}");
}

#[test]
fn plan_without_its_variables_names_each_missing_one_at_its_line() {
    let (ok, text) = validate_copy(&[], &[]);
    assert!(!ok, "{text}");
    let plan = read("examples/ci/cluster.toml");
    for (name, _) in VALUES {
        let line = plan
            .lines()
            .position(|l| l.contains(&format!("{{{{ var.{name} }}}}")))
            .unwrap_or_else(|| panic!("the plan does not use {name}"))
            + 1;
        let want = format!("plan.toml:{line}:");
        let missing = format!("error[variable-missing]: variable `{name}` has no value");
        assert!(
            text.lines()
                .any(|l| l.contains(&want) && l.contains(&missing)),
            "no variable-missing for {name} at line {line}:\n{text}"
        );
    }
}

/// The example plans need no pin from their user: kwin hashes an artifact whose upstream
/// publishes no SHA-256 file itself (`kwin plan`, over https). A placeholder pin (one digit
/// repeated) would make a real node refuse the download; a workflow step hashing artifacts
/// would duplicate what kwin does.
#[test]
fn examples_carry_no_placeholder_pins_and_the_workflow_hashes_nothing_itself() {
    let mut files: Vec<String> = std::fs::read_dir(root().join("examples"))
        .expect("examples")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| {
            p.strip_prefix(root())
                .expect("under the root")
                .display()
                .to_string()
        })
        .collect();
    files.push("examples/ci/cluster.toml".into());
    files.sort();
    assert!(files.len() >= 5, "{files:?}");
    let mut problems = Vec::new();
    for rel in &files {
        let text = read(rel);
        let doc: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let pins = doc
            .get("artifacts")
            .and_then(|a| a.get("sha256"))
            .and_then(|t| t.as_table())
            .cloned()
            .unwrap_or_default();
        for (file, v) in &pins {
            let v = v.as_str().unwrap_or("");
            let mut chars = v.chars();
            let first = chars.next();
            if v.contains("${") {
                problems.push(format!(
                    "{rel}: {file} is pinned from a variable the workflow computes"
                ));
            } else if first.is_some_and(|c| chars.all(|x| x == c)) {
                problems.push(format!("{rel}: {file} has the placeholder pin {v}"));
            }
        }
    }
    let workflow = read("examples/ci/github-actions.yml");
    for word in ["sha256sum", "SHA256="] {
        if workflow.contains(word) {
            problems.push(format!(
                "examples/ci/github-actions.yml hashes artifacts itself (`{word}`)"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn windows_preparation_script_parses() {
    let script = read("examples/real-vms/prepare-windows.ps1");
    let errors = kwin_testkit::scripts::ps_syntax_errors(&script);
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(script.contains("kwin-cert-fingerprint: "));
    // and the checker is not blind: a broken copy fails
    let broken = script.replacen("if (-not $cert) {", "if (-not $cert {", 1);
    assert!(!kwin_testkit::scripts::ps_syntax_errors(&broken).is_empty());
}
