//! Every PowerShell script kwin can send to a Windows host, collected from the code and its
//! data rather than from a hand-kept list, so scripts added later are covered when they land:
//!
//! - every Windows module driven through each of its cases in `tests/windows_cases/` (fact
//!   scripts and step scripts), and every Kubernetes module case with `"shell": "powershell"`
//!   in `tests/kube_cases/` (facts, steps, output script);
//! - the recipes (apply and reset) expanded for `examples/flannel.toml` and
//!   `examples/calico.toml`: every task on a Windows host is built for PowerShell, and its
//!   fact scripts, its `run` / `onlyif` / `unless` text, its output script and its step
//!   scripts (planned against a fresh host: for each fact kind, the answer a `create` case of
//!   `tests/windows_cases/` gives) are collected;
//! - the start scripts the same recipes ship in ConfigMaps for Windows HostProcess pods (every
//!   ConfigMap `*.ps1` entry of every `kube_apply` manifest): Windows nodes run them with
//!   Windows PowerShell;
//! - the engine's own PowerShell: the probe batch, the executor's apply batch
//!   (`powershell_batch_sample`), the reboot trigger and boot-id scripts, the WinRM run
//!   wrapper, upload and download scripts, and the ssh-powershell bootstrap;
//! - what `kwin verify` runs in its Windows pod (the web server, the HTTP probe);
//! - `examples/real-vms/prepare-windows.ps1`, which users run on Windows Server as given.
//!
//! The engine's scripts are reached through the functions the engine exports for exactly
//! this purpose; a new engine-side PowerShell generator must be added below (the only part
//! that is a list).

#![allow(dead_code)]

use kwin_engine::fact::{FactOutput, Facts};
use kwin_engine::module::{Ctx, Inputs, Module, Plan, Registry};
use kwin_engine::plan::model::Os;
use kwin_engine::secret::Secret;
use kwin_engine::transport::Shell;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One script and where it came from (for messages).
#[derive(Debug, Clone)]
pub struct Script {
    pub origin: String,
    pub text: String,
    /// Line ranges (1-based, inclusive) holding a case author's own command text (the
    /// `command` module's `run` / `onlyif` / `unless` in its cases): not kwin's to vouch for.
    pub user_lines: Vec<(usize, usize)>,
}

impl Script {
    pub fn new(origin: impl Into<String>, text: impl Into<String>) -> Self {
        Script {
            origin: origin.into(),
            text: text.into(),
            user_lines: Vec::new(),
        }
    }

    /// Mark where each of `texts` occurs in the script as user text.
    fn with_user_text(mut self, texts: &[String]) -> Self {
        for t in texts.iter().filter(|t| !t.is_empty()) {
            let mut from = 0;
            while let Some(pos) = self.text[from..].find(t.as_str()) {
                let start = from + pos;
                let first = self.text[..start].matches('\n').count() + 1;
                let last = first + t.matches('\n').count();
                self.user_lines.push((first, last));
                from = start + t.len();
            }
        }
        self
    }

    pub fn is_user_line(&self, line: usize) -> bool {
        self.user_lines
            .iter()
            .any(|(a, b)| (*a..=*b).contains(&line))
    }
}

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

#[derive(Deserialize)]
struct Case {
    #[serde(default)]
    shell: Option<String>,
    params: serde_json::Value,
    #[serde(default)]
    inputs: BTreeMap<String, String>,
    #[serde(default)]
    facts: BTreeMap<String, CaseFact>,
    expect: serde_json::Value,
}

#[derive(Deserialize, Clone)]
pub struct CaseFact {
    #[serde(default)]
    stdout: String,
    #[serde(default)]
    stderr: String,
    #[serde(default)]
    exit: i32,
}

impl CaseFact {
    fn output(&self) -> FactOutput {
        FactOutput {
            stdout: self.stdout.clone().into_bytes(),
            stderr: self.stderr.clone().into_bytes(),
            exit: self.exit,
        }
    }
}

/// `(module, case file)` of every case under `tests/<dir>/`, sorted.
fn cases(dir: &str) -> Vec<(String, PathBuf)> {
    let root = tests_dir().join(dir);
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .flatten()
        .map(|d| d.path())
        .filter(|p| {
            p.is_dir()
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('_'))
        })
        .collect();
    dirs.sort();
    for d in dirs {
        let module = d
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let mut files: Vec<PathBuf> = std::fs::read_dir(&d)
            .expect("module dir")
            .flatten()
            .map(|e| e.path())
            .filter(|f| f.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        out.extend(files.into_iter().map(|f| (module.clone(), f)));
    }
    out
}

fn read_case(path: &Path) -> Case {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Facts for `queries` from a case: by exact key, else by the key's prefix before `:`.
fn case_facts(m: &dyn Module, shell: Shell, given: &BTreeMap<String, CaseFact>) -> Option<Facts> {
    let mut facts = Facts::new();
    for q in m.facts(shell) {
        let prefix = q.key.split(':').next().unwrap_or_default().to_string();
        let f = given.get(&q.key).or_else(|| given.get(&prefix))?;
        facts.insert(q.key.clone(), f.output());
    }
    Some(facts)
}

/// Fact scripts, step scripts and the output script of `m` planned against `facts`.
fn module_scripts(
    origin: &str,
    m: &dyn Module,
    facts: Option<&Facts>,
    inputs: &Inputs,
    user: &[String],
    out: &mut Vec<Script>,
) {
    for q in m.facts(Shell::PowerShell) {
        out.push(Script::new(format!("{origin}: fact {}", q.key), q.command).with_user_text(user));
    }
    if let Some(o) = m.output(Shell::PowerShell) {
        out.push(Script::new(format!("{origin}: output"), o).with_user_text(user));
    }
    let Some(facts) = facts else { return };
    let ctx = Ctx {
        shell: Shell::PowerShell,
        host: "ww1",
        inputs,
        nonce: "0123456789abcdef0123456789abcdef",
    };
    if let Ok(Plan::Change(c)) = m.plan(facts, &ctx) {
        for (i, s) in c.steps.iter().enumerate() {
            if let Some(script) = s.script() {
                out.push(
                    Script::new(format!("{origin}: step {i}"), script.to_string())
                        .with_user_text(user),
                );
            }
        }
    }
}

/// Windows module cases and PowerShell kube module cases.
pub fn module_case_scripts() -> Vec<Script> {
    let mut out = Vec::new();
    for (dir, default_shell) in [("windows_cases", "powershell"), ("kube_cases", "posix")] {
        for (module, path) in cases(dir) {
            let case = read_case(&path);
            let shell = case.shell.as_deref().unwrap_or(default_shell);
            if shell != "powershell" {
                continue;
            }
            let Ok(m) = kwin_modules::Builtin.build(&module, Shell::PowerShell, &case.params)
            else {
                continue; // a param_error case: no script
            };
            let mut inputs = Inputs::new();
            for (k, v) in &case.inputs {
                inputs.insert(k.clone(), Secret::new(v.clone()));
            }
            let facts = case_facts(m.as_ref(), Shell::PowerShell, &case.facts);
            let origin = path
                .strip_prefix(workspace())
                .unwrap_or(&path)
                .display()
                .to_string();
            // The `command` module's cases carry their author's own command text.
            let user: Vec<String> = if module == "command" {
                ["run", "onlyif", "unless"]
                    .iter()
                    .filter_map(|k| case.params.get(*k).and_then(|v| v.as_str()))
                    .map(str::to_string)
                    .collect()
            } else {
                Vec::new()
            };
            module_scripts(
                &origin,
                m.as_ref(),
                facts.as_ref(),
                &inputs,
                &user,
                &mut out,
            );
        }
    }
    out
}

/// Every kube module case's scripts (facts, steps, output), in the case's shell (POSIX or
/// PowerShell), for checks that are not about PowerShell (command-line flags).
pub fn kube_case_scripts_all_shells() -> Vec<Script> {
    let mut out = Vec::new();
    for (module, path) in cases("kube_cases") {
        let case = read_case(&path);
        let shell = match case.shell.as_deref() {
            Some("powershell") => Shell::PowerShell,
            _ => Shell::Posix,
        };
        let Ok(m) = kwin_modules::Builtin.build(&module, shell, &case.params) else {
            continue;
        };
        let mut inputs = Inputs::new();
        for (k, v) in &case.inputs {
            inputs.insert(k.clone(), Secret::new(v.clone()));
        }
        let origin = path
            .strip_prefix(workspace())
            .unwrap_or(&path)
            .display()
            .to_string();
        for q in m.facts(shell) {
            out.push(Script::new(
                format!("{origin}: fact {}", q.key),
                q.command.clone(),
            ));
        }
        if let Some(o) = m.output(shell) {
            out.push(Script::new(format!("{origin}: output"), o));
        }
        let Some(facts) = case_facts(m.as_ref(), shell, &case.facts) else {
            continue;
        };
        let ctx = Ctx {
            shell,
            host: "h1",
            inputs: &inputs,
            nonce: "0123456789abcdef0123456789abcdef",
        };
        if let Ok(Plan::Change(c)) = m.plan(&facts, &ctx) {
            for (i, s) in c.steps.iter().enumerate() {
                if let Some(script) = s.script() {
                    out.push(Script::new(
                        format!("{origin}: step {i}"),
                        script.to_string(),
                    ));
                }
            }
        }
    }
    out
}

/// For each fact kind (the key's prefix before `:`), the answer a fresh host gives: taken
/// from the first `create` case of `tests/windows_cases/` that asks for it.
pub fn fresh_host_answers() -> BTreeMap<String, CaseFact> {
    let mut out = BTreeMap::new();
    for (_, path) in cases("windows_cases") {
        let case = read_case(&path);
        let create = case
            .expect
            .get("change")
            .and_then(|c| c.get("action"))
            .and_then(|a| a.as_str())
            == Some("create");
        if !create {
            continue;
        }
        for (k, f) in &case.facts {
            let prefix = k.split(':').next().unwrap_or_default().to_string();
            out.entry(prefix).or_insert_with(|| f.clone());
        }
    }
    out
}

/// Placeholder values for a task's inputs (join token, CA hash, ...): scripts are checked
/// with some value in them, never a real secret.
fn placeholder_inputs(t: &kwin_engine::task::Task) -> Inputs {
    let mut inputs = Inputs::new();
    for name in t.inputs.keys() {
        let v = match name.as_str() {
            "ca_cert_hash" => format!("sha256:{}", "ab".repeat(32)),
            "api_endpoint" => "10.0.0.10:6443".to_string(),
            "token" => "abcdef.0123456789abcdef".to_string(),
            _ => "placeholder".to_string(),
        };
        inputs.insert(name.clone(), Secret::new(v));
    }
    inputs
}

/// A loaded example plan, with its Kubernetes version replaced when `version` is given.
pub fn example_plan(rel: &str, version: Option<&str>) -> kwin_engine::plan::LoadedPlan {
    let path = workspace().join(rel);
    let mut text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{rel}: {e}"));
    if let Some(v) = version {
        let mut doc: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let cluster = doc
            .get_mut("cluster")
            .and_then(|c| c.as_table_mut())
            .unwrap_or_else(|| panic!("{rel}: no [cluster]"));
        cluster.insert("kubernetes_version".into(), toml::Value::String(v.into()));
        text = toml::to_string(&doc).expect("toml");
    }
    kwin_engine::plan::load_str(&path, &text).unwrap_or_else(|d| panic!("{rel}: {d}"))
}

/// Tasks of `plan` from `recipes`, with a stand-in checksum for every artifact the plan does
/// not pin (expansion leaves a missing checksum empty; `kwin plan` would fetch it).
pub fn expand_with_sums(
    plan: &kwin_engine::plan::LoadedPlan,
    recipes: &[(&str, &str)],
) -> Result<Vec<kwin_engine::task::Task>, kwin_engine::diag::Diagnostics> {
    use kwin_engine::checksums::Checksums;
    let first = Checksums::new(plan.file.artifacts.sha256.clone(), Default::default());
    kwin_engine::expand::expand_with(plan, recipes, &first)?;
    let mut pins = plan.file.artifacts.sha256.clone();
    for w in first.wanted() {
        pins.entry(w.file).or_insert_with(|| "0".repeat(64));
    }
    kwin_engine::expand::expand_with(plan, recipes, &Checksums::new(pins, Default::default()))
}

pub const EXAMPLES: &[&str] = &["examples/flannel.toml", "examples/calico.toml"];

/// The scripts of every Windows task the recipes (apply and reset) give the example plans.
pub fn recipe_scripts() -> Vec<Script> {
    let fresh = fresh_host_answers();
    let mut out = Vec::new();
    for example in EXAMPLES {
        for (set_name, recipes) in [
            ("apply", kwin_modules::recipes::RECIPES),
            ("reset", kwin_modules::recipes::RESET_RECIPES),
        ] {
            let plan = example_plan(example, None);
            let tasks = expand_with_sums(&plan, recipes)
                .unwrap_or_else(|d| panic!("{example} ({set_name}): {d}"));
            for t in &tasks {
                let Some(host) = plan.hosts.iter().find(|h| h.name == t.id.host) else {
                    continue;
                };
                if host.os != Os::Windows {
                    continue;
                }
                let origin = format!("{example} ({set_name}) {}", t.id);
                for key in ["run", "onlyif", "unless"] {
                    if let Some(s) = t.params.get(key).and_then(|v| v.as_str()) {
                        out.push(Script::new(format!("{origin}: {key}"), s));
                    }
                }
                let m = kwin_modules::Builtin
                    .build(&t.module, Shell::PowerShell, &t.params)
                    .unwrap_or_else(|e| panic!("{origin}: {e}"));
                let facts = case_facts(m.as_ref(), Shell::PowerShell, &fresh);
                module_scripts(
                    &origin,
                    m.as_ref(),
                    facts.as_ref(),
                    &placeholder_inputs(t),
                    &[],
                    &mut out,
                );
            }
        }
    }
    out
}

/// The PowerShell start scripts the recipes ship in ConfigMaps (`*.ps1` data entries of the
/// `kube_apply` manifests) for the example plans: what HostProcess pods run on Windows nodes.
pub fn configmap_scripts() -> Vec<Script> {
    let mut out = Vec::new();
    for example in EXAMPLES {
        let plan = example_plan(example, None);
        let tasks = expand_with_sums(&plan, kwin_modules::recipes::RECIPES)
            .unwrap_or_else(|d| panic!("{example}: {d}"));
        for t in tasks.iter().filter(|t| t.module == "kube_apply") {
            let Some(manifest) = t.params.get("manifest").and_then(|v| v.as_str()) else {
                continue;
            };
            for doc in serde_yaml_ng::Deserializer::from_str(manifest) {
                let v = serde_json::Value::deserialize(doc)
                    .unwrap_or_else(|e| panic!("{example} {}: {e}", t.id));
                if v["kind"] != "ConfigMap" {
                    continue;
                }
                let Some(data) = v["data"].as_object() else {
                    continue;
                };
                for (key, text) in data {
                    if let (true, Some(text)) = (key.ends_with(".ps1"), text.as_str()) {
                        out.push(Script::new(
                            format!(
                                "{example} (apply) {}: ConfigMap {}/{} {key}",
                                t.id,
                                v["metadata"]["namespace"].as_str().unwrap_or(""),
                                v["metadata"]["name"].as_str().unwrap_or("")
                            ),
                            text,
                        ));
                    }
                }
            }
        }
    }
    out
}

/// Every PowerShell template file of the recipes (`plans/<recipe>/<name>.ps1.j2`), read whole:
/// rendered on its own, in the context of each example plan's first control plane (where
/// the recipes that include them render them).
pub fn template_file_scripts() -> Vec<Script> {
    use kwin_engine::expand::recipe::{source_kind, template_name, SourceKind};
    let mut out = Vec::new();
    for example in EXAMPLES {
        let plan = example_plan(example, None);
        let cp = plan
            .hosts
            .iter()
            .position(|h| h.role == Some(kwin_engine::plan::Role::ControlPlane))
            .unwrap_or_else(|| panic!("{example}: no control plane"));
        let sums = kwin_engine::checksums::Checksums::new(Default::default(), Default::default());
        for (file, _) in kwin_modules::recipes::RECIPES
            .iter()
            .filter(|(f, _)| source_kind(f) == SourceKind::Template && f.ends_with(".ps1.j2"))
        {
            let name = template_name(file);
            let text = kwin_engine::expand::render_file(
                &plan,
                kwin_modules::recipes::RECIPES,
                &sums,
                name,
                cp,
            )
            .unwrap_or_else(|d| panic!("{file} ({example}): {d}"));
            out.push(Script::new(format!("{file} ({example})"), text));
        }
    }
    out
}

/// The engine's own PowerShell.
pub fn engine_scripts() -> Vec<Script> {
    use kwin_engine::exec::reboot::{boot_id_script, trigger_script};
    use kwin_engine::fact::{batch_script, FactQuery};
    use kwin_engine::transport::winrm::scripts;
    let q = |k: &str, c: &str| FactQuery {
        key: k.into(),
        command: c.into(),
        path: None,
    };
    let s = |origin: &str, text: String| Script::new(origin, text);
    vec![
        s(
            "engine: probe batch",
            batch_script(
                Shell::PowerShell,
                &[
                    q("a", "ConvertTo-Json -Compress -InputObject @{ a = 1 }"),
                    q("b", "Get-Service -Name 'x' | Out-Null"),
                ],
                "0123abcd",
            ),
        ),
        s(
            "engine: host facts (kwin facts)",
            batch_script(
                Shell::PowerShell,
                &[FactQuery::of(
                    &kwin_engine::fact::HostFact,
                    Shell::PowerShell,
                )],
                "0123abcd",
            ),
        ),
        s(
            "engine: apply batch",
            kwin_engine::testing::powershell_batch_sample(),
        ),
        s("engine: reboot trigger", trigger_script(Shell::PowerShell)),
        s(
            "engine: boot id",
            boot_id_script(Shell::PowerShell).to_string(),
        ),
        s(
            "engine: winrm run wrapper",
            scripts::powershell_run_wrapper("Write-Output 'x'"),
        ),
        s(
            "engine: winrm upload",
            scripts::powershell_upload_script("C:\\k\\it's a file.txt", &"0".repeat(64), "n0nce"),
        ),
        s(
            "engine: winrm get",
            scripts::powershell_get_script("C:\\k\\a b.txt"),
        ),
        s(
            "engine: ssh-powershell bootstrap",
            kwin_engine::transport::ssh::powershell_bootstrap().to_string(),
        ),
    ]
}

/// `examples/real-vms/prepare-windows.ps1`.
pub fn example_scripts() -> Vec<Script> {
    let rel = "examples/real-vms/prepare-windows.ps1";
    vec![Script::new(
        rel,
        std::fs::read_to_string(workspace().join(rel)).unwrap_or_else(|e| panic!("{e}")),
    )]
}

/// Everything above.
pub fn all() -> Vec<Script> {
    let mut v = module_case_scripts();
    v.extend(recipe_scripts());
    v.extend(configmap_scripts());
    v.extend(template_file_scripts());
    v.extend(engine_scripts());
    v.extend(example_scripts());
    v
}
