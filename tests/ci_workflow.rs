//! The CI example run, not only read: examples/ci/github-actions.yml's own steps, in order,
//! as GitHub Actions runs them (`bash --noprofile --norc -eo pipefail`, the workflow's, job's
//! and step's `env`, `$GITHUB_ENV` and `$GITHUB_PATH` carried to later steps, a failed step
//! skipping every later one but those with `if: always()`), with the steps that provision the
//! cloud replaced by named lab steps and every other step run verbatim, with its jq checks.
//! Any drift between the workflow and the binary fails here.
//!
//! | workflow step | replaced by |
//! |---|---|
//! | `uses: actions/checkout`, `azure/login` | nothing: the tree is this checkout, there is no cloud |
//! | `Build kwin` | the kwin under test on `$GITHUB_PATH` |
//! | `Create the VMs` | lab step `create-vms` |
//! | `Read host identities over the cloud's run-command channel` | lab step `read-identities` |
//! | `uses: actions/upload-artifact` | lab step `keep-logs`: the paths it keeps exist |
//! | `Delete the VMs` | lab step `delete-vms` |
//!
//! The lab steps are a [`Lab`]: [`Offline`] (tier 1, no host) gives addresses from the
//! documentation ranges and identities in the form the cloud gives them, so the steps up to
//! `kwin validate` run verbatim and every step that reaches a host is reported as needing the
//! lab cluster ([`REACHES_HOSTS`]). A lab with hosts that run kubeadm (the real cluster lab
//! being rebuilt) implements the same four steps to run every step: see
//! [`needs_of_the_cluster_lab`].
//!
//! Besides, every event a jq filter of the workflow selects, and every field it reads of it,
//! is one the binary emits (`kwin schema --events`): a filter on an event kwin does not emit
//! can never pass (the example once waited for `verify_summary`; kwin says `verify_finished`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const WORKFLOW: &str = "examples/ci/github-actions.yml";

/// One step of the workflow's job.
#[derive(Debug, Clone)]
struct Step {
    name: String,
    run: Option<String>,
    uses: Option<String>,
    env: BTreeMap<String, String>,
    always: bool,
}

/// The workflow: its top-level `env`, and its one job's `env` and steps.
struct Workflow {
    env: BTreeMap<String, String>,
    steps: Vec<Step>,
}

fn yaml_to_json(text: &str) -> serde_json::Value {
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
        stdin.write_all(text.as_bytes()).expect("write");
    }
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{WORKFLOW} is not valid YAML: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

fn strings(v: &serde_json::Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let s = match v {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (k.clone(), s)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn workflow() -> Workflow {
    let text = std::fs::read_to_string(root().join(WORKFLOW)).expect("workflow");
    let wf = yaml_to_json(&text);
    let jobs = wf["jobs"].as_object().expect("jobs");
    assert_eq!(jobs.len(), 1, "one job");
    let job = jobs.values().next().expect("the job");
    let mut env = strings(&wf["env"]);
    env.extend(strings(&job["env"]));
    let steps = job["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| Step {
            name: s["name"]
                .as_str()
                .or(s["uses"].as_str())
                .unwrap_or("?")
                .to_string(),
            run: s["run"].as_str().map(str::to_string),
            uses: s["uses"].as_str().map(str::to_string),
            env: strings(&s["env"]),
            always: s["if"].as_str().is_some_and(|c| c.contains("always()")),
        })
        .collect();
    Workflow { env, steps }
}

/// What the runner does with a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// Nothing to do here (no cloud, the tree is this checkout).
    Skip,
    /// The lab step of that name instead.
    Lab(&'static str),
    /// The step's `run:` as it is written.
    Verbatim,
}

fn action(s: &Step) -> Action {
    if let Some(uses) = &s.uses {
        return if uses.starts_with("actions/upload-artifact") {
            Action::Lab("keep-logs")
        } else {
            Action::Skip
        };
    }
    match s.name.as_str() {
        "Build kwin" => Action::Lab("build"),
        "Create the VMs" => Action::Lab("create-vms"),
        "Read host identities over the cloud's run-command channel" => {
            Action::Lab("read-identities")
        }
        "Delete the VMs" => Action::Lab("delete-vms"),
        _ => Action::Verbatim,
    }
}

/// The kwin commands that reach hosts: a step running one needs hosts to run on.
const REACHES_HOSTS: [&str; 7] = [
    "kwin apply",
    "kwin plan",
    "kwin verify",
    "kwin reset",
    "kwin kubeconfig",
    "kwin exec",
    "kwin facts",
];

fn reaches_hosts(script: &str) -> bool {
    REACHES_HOSTS.iter().any(|c| script.contains(c))
}

/// What stands in for the cloud: the workflow's provisioning steps, by name.
trait Lab {
    /// Whether it has hosts kwin can build the cluster on (else the steps that reach hosts
    /// are reported, not run).
    fn has_hosts(&self) -> bool;
    /// `create-vms`, `read-identities`, `keep-logs`, `delete-vms`: `Err` fails the step.
    fn step(&self, name: &str, run: &mut Run) -> Result<(), String>;
}

/// Tier 1: no host. Addresses from the documentation ranges, identities in the form the
/// cloud gives them (what `read-identities` writes to `$GITHUB_ENV` on Azure).
struct Offline;

impl Lab for Offline {
    fn has_hosts(&self) -> bool {
        false
    }
    fn step(&self, name: &str, run: &mut Run) -> Result<(), String> {
        match name {
            // The runner's key the workflow makes with the VMs (the plan's default key).
            "create-vms" => {
                let ssh = run.home().join(".ssh");
                std::fs::create_dir_all(&ssh).map_err(|e| e.to_string())?;
                let out = Command::new("ssh-keygen")
                    .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                    .arg(ssh.join("kwin_lab"))
                    .output()
                    .map_err(|e| e.to_string())?;
                out.status
                    .success()
                    .then_some(())
                    .ok_or_else(|| String::from_utf8_lossy(&out.stderr).into_owned())
            }
            "delete-vms" => Ok(()),
            "read-identities" => {
                let fp = |seed: u8| {
                    (0..32)
                        .map(|i| format!("{:02x}", seed.wrapping_mul(31).wrapping_add(i)))
                        .collect::<Vec<_>>()
                        .join(":")
                };
                let mut lines = Vec::new();
                for (i, vm) in ["cp1", "lw1", "ww1", "ww2"].iter().enumerate() {
                    lines.push(format!("KWIN_VAR_{vm}_public=203.0.113.{}", 10 + i));
                    lines.push(format!("KWIN_VAR_{vm}_private=10.10.1.{}", 4 + i));
                }
                lines.push(
                    "KWIN_VAR_cp1_host_key=SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s"
                        .into(),
                );
                lines.push(
                    "KWIN_VAR_lw1_host_key=SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU"
                        .into(),
                );
                lines.push(format!("KWIN_VAR_ww1_cert={}", fp(1)));
                lines.push(format!("KWIN_VAR_ww2_cert={}", fp(2)));
                run.github_env(&lines.join("\n"));
                Ok(())
            }
            // Nothing ran that writes logs.
            "keep-logs" => Ok(()),
            other => Err(format!("no lab step `{other}`")),
        }
    }
}

/// What a lab with hosts must give the four named steps to run the whole workflow here.
fn needs_of_the_cluster_lab() -> [(&'static str, &'static str); 4] {
    [
        (
            "create-vms",
            "the runner's key ~/.ssh/kwin_lab authorized on two Linux node hosts (cp1, lw1) that run kubeadm, the kubelet and containerd, and two Windows hosts (ww1, ww2) behind WinRM over HTTPS, each reachable from the runner at a public address and from each other at a private one",
        ),
        (
            "read-identities",
            "KWIN_VAR_<vm>_public, _private, the Linux hosts' ed25519 host key fingerprints (_host_key) and the WinRM certificates' SHA-256 fingerprints in prepare-windows.ps1's colon form (_cert), appended to $GITHUB_ENV",
        ),
        (
            "keep-logs",
            "nothing beyond checking that lab/.kwin/logs, lab/.kwin/runs and lab/.kwin/checksums.toml exist",
        ),
        ("delete-vms", "the hosts torn down"),
    ]
}

/// One run of the workflow: its working tree, `$GITHUB_ENV`, `$GITHUB_PATH`, and what each
/// step did.
struct Run {
    dir: tempfile::TempDir,
    env_file: PathBuf,
    path_file: PathBuf,
    /// (step, what happened).
    log: Vec<(String, String)>,
}

impl Run {
    fn new() -> Run {
        let dir = tempfile::tempdir().expect("tempdir");
        // The checkout: the files the workflow reads, copied (kwin writes lab/ beside them).
        for rel in [
            "examples/ci/cluster.toml",
            "examples/real-vms/prepare-windows.ps1",
        ] {
            let to = dir.path().join(rel);
            std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
            std::fs::copy(root().join(rel), &to).expect("copy");
        }
        let env_file = dir.path().join(".github_env");
        let path_file = dir.path().join(".github_path");
        std::fs::write(&env_file, "").expect("GITHUB_ENV");
        std::fs::write(&path_file, "").expect("GITHUB_PATH");
        Run {
            dir,
            env_file,
            path_file,
            log: Vec::new(),
        }
    }

    /// The runner's home (its `~/.ssh`).
    fn home(&self) -> PathBuf {
        self.dir.path().join(".home")
    }

    fn github_env(&self, lines: &str) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.env_file)
            .expect("GITHUB_ENV");
        writeln!(f, "{lines}").expect("write");
    }

    fn github_path(&self, dir: &Path) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.path_file)
            .expect("GITHUB_PATH");
        writeln!(f, "{}", dir.display()).expect("write");
    }

    /// `$GITHUB_ENV` as set so far (`NAME=value` lines; no multi-line values here).
    fn carried_env(&self) -> BTreeMap<String, String> {
        std::fs::read_to_string(&self.env_file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn path(&self) -> String {
        let mut dirs: Vec<String> = std::fs::read_to_string(&self.path_file)
            .unwrap_or_default()
            .lines()
            .rev()
            .map(str::to_string)
            .collect();
        dirs.push(std::env::var("PATH").unwrap_or_default());
        dirs.join(":")
    }
}

/// `${{ … }}` as GitHub fills it in: secrets, `github.run_id`, `env.X`.
fn expressions(text: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("${{") {
        out.push_str(&rest[..i]);
        let Some(j) = rest[i..].find("}}") else {
            break;
        };
        let expr = rest[i + 3..i + j].trim();
        let value = match expr {
            "github.run_id" => "4242".to_string(),
            "secrets.KWIN_WINDOWS_PASSWORD" => "Test-Passw0rd-for-CI".to_string(),
            e if e.starts_with("secrets.") => "test-secret".to_string(),
            e => match e.strip_prefix("env.") {
                Some(name) => env.get(name).cloned().unwrap_or_default(),
                None => panic!("the runner does not know the expression `{e}`"),
            },
        };
        out.push_str(&value);
        rest = &rest[i + j + 2..];
    }
    out.push_str(rest);
    out
}

/// How a step ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Passed,
    Failed(String),
    Skipped(String),
    /// It reaches hosts, and the lab has none: what it would run.
    NeedsHosts,
}

/// Run `wf` with `lab` standing in for the cloud, as GitHub Actions runs a job.
fn run_workflow(wf: &Workflow, lab: &dyn Lab, kwin: &Path) -> (Run, Vec<(Step, Outcome)>) {
    let mut run = Run::new();
    let mut failed = false;
    let mut done = Vec::new();
    for step in &wf.steps {
        if failed && !step.always {
            done.push((
                step.clone(),
                Outcome::Skipped("an earlier step failed".into()),
            ));
            continue;
        }
        let outcome = match action(step) {
            Action::Skip => Outcome::Skipped("no cloud here".into()),
            Action::Lab("build") => {
                run.github_path(kwin.parent().expect("kwin's directory"));
                Outcome::Passed
            }
            Action::Lab(name) => match lab.step(name, &mut run) {
                Ok(()) => Outcome::Passed,
                Err(e) => Outcome::Failed(format!("lab step {name}: {e}")),
            },
            Action::Verbatim => {
                let script = step.run.clone().unwrap_or_default();
                if reaches_hosts(&script) && !lab.has_hosts() {
                    Outcome::NeedsHosts
                } else {
                    verbatim(&run, wf, step, &script)
                }
            }
        };
        failed |= matches!(outcome, Outcome::Failed(_));
        run.log.push((step.name.clone(), format!("{outcome:?}")));
        done.push((step.clone(), outcome));
    }
    (run, done)
}

/// A step's `run:` under bash as GitHub Actions runs it.
fn verbatim(run: &Run, wf: &Workflow, step: &Step, script: &str) -> Outcome {
    let mut env = wf.env.clone();
    env.extend(run.carried_env());
    let env_now = env.clone();
    for (k, v) in &step.env {
        env.insert(k.clone(), expressions(v, &env_now));
    }
    let env: BTreeMap<String, String> = env
        .into_iter()
        .map(|(k, v)| {
            let v = expressions(&v, &env_now);
            (k, v)
        })
        .collect();
    let file = run.dir.path().join(".step.sh");
    std::fs::write(&file, expressions(script, &env)).expect("step script");
    let out = Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail"])
        .arg(&file)
        .current_dir(run.dir.path())
        .env_clear()
        .envs(&env)
        .env("PATH", run.path())
        .env("HOME", run.home())
        .env("GITHUB_ENV", &run.env_file)
        .env("GITHUB_PATH", &run.path_file)
        .output()
        .expect("bash");
    if out.status.success() {
        Outcome::Passed
    } else {
        Outcome::Failed(format!(
            "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn kwin_bin() -> PathBuf {
    PathBuf::from(
        std::env::var("KWIN_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_kwin").into()),
    )
}

/// Tier 1: every step that needs no host runs verbatim and passes (the plan is copied and
/// validated with the variables the identities step sets); the steps that reach hosts are
/// exactly those the lab cluster must run, each named.
#[test]
fn the_workflow_runs_up_to_the_steps_that_need_the_lab_cluster() {
    let wf = workflow();
    let (run, done) = run_workflow(&wf, &Offline, &kwin_bin());
    let report: Vec<String> = done
        .iter()
        .map(|(s, o)| format!("{}: {o:?}", s.name))
        .collect();
    for (s, o) in &done {
        assert!(
            !matches!(o, Outcome::Failed(_)),
            "step `{}` failed:\n{o:?}\nall steps:\n{}",
            s.name,
            report.join("\n")
        );
    }
    let outcome = |name: &str| {
        done.iter()
            .find(|(s, _)| s.name == name)
            .map(|(_, o)| o.clone())
            .unwrap_or_else(|| panic!("the workflow has no step `{name}`"))
    };
    assert_eq!(outcome("Write and validate the plan"), Outcome::Passed);
    assert!(run.dir.path().join("lab/plan.toml").is_file());
    // What needs the lab cluster, by name: apply (twice), verify, kubectl from the runner,
    // reset.
    let needs: Vec<&str> = done
        .iter()
        .filter(|(_, o)| *o == Outcome::NeedsHosts)
        .map(|(s, _)| s.name.as_str())
        .collect();
    assert_eq!(
        needs,
        [
            "Apply (verifies the cluster at the end)",
            "Apply again (must change nothing)",
            "Verify",
            "Use the cluster from the runner",
            "Reset",
        ],
        "{}",
        report.join("\n")
    );
    // Every lab step the workflow uses has its needs written down.
    let named: Vec<&str> = needs_of_the_cluster_lab().iter().map(|(n, _)| *n).collect();
    for (s, _) in &done {
        if let Action::Lab(name) = action(s) {
            assert!(name == "build" || named.contains(&name), "{name}");
        }
    }
}

/// The events of `kwin schema --events`: name → the fields it has.
fn event_fields() -> BTreeMap<String, Vec<String>> {
    let r = kwin_testkit::kwin!(".", &["schema", "--events"]);
    assert_eq!(r.code, 0, "{r}");
    let schema: serde_json::Value = serde_json::from_str(&r.stdout).expect("schema");
    let defs = &schema["$defs"];
    let props = |v: &serde_json::Value| -> Vec<String> {
        let mut out: Vec<String> = v["properties"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        if let Some(r) = v["$ref"].as_str().and_then(|r| r.strip_prefix("#/$defs/")) {
            out.extend(
                defs[r]["properties"]
                    .as_object()
                    .map(|m| m.keys().cloned().collect::<Vec<_>>())
                    .unwrap_or_default(),
            );
        }
        out
    };
    schema["oneOf"]
        .as_array()
        .expect("oneOf")
        .iter()
        .filter_map(|b| {
            let name = b["properties"]["event"]["const"].as_str()?.to_string();
            Some((name, props(b)))
        })
        .collect()
}

/// The jq programs of a script: the single-quoted argument after `jq` and its flags.
fn jq_programs(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in script.lines() {
        let Some(i) = line.find("jq ") else {
            continue;
        };
        let rest = &line[i..];
        if let Some(a) = rest.find('\'') {
            if let Some(b) = rest[a + 1..].find('\'') {
                out.push(rest[a + 1..a + 1 + b].to_string());
            }
        }
    }
    out
}

/// `.event == "x"` in a jq program: the events it selects.
fn selected_events(program: &str) -> Vec<String> {
    program
        .split(".event == \"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .map(str::to_string)
        .collect()
}

/// The fields a jq program reads besides `event`: `.name` not followed by `(`.
fn read_fields(program: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = program.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'.' && b.get(i + 1).is_some_and(|c| c.is_ascii_lowercase()) {
            let start = i + 1;
            let mut j = start;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                j += 1;
            }
            let name = &program[start..j];
            if name != "event" {
                out.push(name.to_string());
            }
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// Every jq filter of the workflow selects events kwin emits and reads fields they have.
#[test]
fn the_workflow_s_jq_checks_read_what_kwin_emits() {
    let events = event_fields();
    assert!(events.contains_key("summary") && events.contains_key("verify_finished"));
    let wf = workflow();
    let mut checked = 0;
    for step in &wf.steps {
        for program in jq_programs(step.run.as_deref().unwrap_or("")) {
            let selected = selected_events(&program);
            if selected.is_empty() {
                continue;
            }
            for ev in &selected {
                let Some(fields) = events.get(ev) else {
                    panic!(
                        "step `{}`: jq selects event `{ev}`, which kwin never emits (its events: {})",
                        step.name,
                        events.keys().cloned().collect::<Vec<_>>().join(", ")
                    );
                };
                for f in read_fields(&program) {
                    assert!(
                        fields.contains(&f),
                        "step `{}`: jq reads `.{f}` of `{ev}`, which has no such field ({})",
                        step.name,
                        fields.join(", ")
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 3, "the workflow's checks were not found");
}
