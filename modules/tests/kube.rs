//! Kubernetes modules: data-driven cases (params + inputs + captured facts → noop / change /
//! error), a syntax check of every script they produce (`sh -n` for POSIX, tree-sitter for
//! PowerShell), and the rule that no input (join token, CA hash, certificate key) ever shows
//! in a plan's reason or diff.
//!
//! Each case is `tests/kube_cases/<module>/<case>.json` (folders starting with `_` hold
//! fixtures):
//! ```json
//! { "shell": "posix" | "powershell",          (default posix)
//!   "params": {...},
//!   "inputs": { "token": "..." },              (optional)
//!   "facts": { "<fact key, or its prefix before the first `:`>": { "stdout": "...", "stderr": "...", "exit": 0 } },
//!   "expect": "noop" | { "change": { "action": "update", "reason_contains": [...], "steps_contain": [...],
//!                                      "steps_lack": [...], "diff_contains": [...] } }
//!            | { "error": "text" } | { "param_error": "text" },
//!   "output_contains": [...] }                 (optional: the module's output script)
//! ```
//! The facts given must be exactly the facts the module asks for.

use kwin_engine::fact::{FactOutput, Facts};
use kwin_engine::module::{Ctx, Inputs, Plan, Registry, Step};
use kwin_engine::secret::Secret;
use kwin_engine::transport::Shell;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

mod ps_syntax;
use ps_syntax::ps_syntax_errors;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    #[serde(default)]
    shell: Option<String>,
    params: serde_json::Value,
    #[serde(default)]
    inputs: BTreeMap<String, String>,
    #[serde(default)]
    facts: BTreeMap<String, CaseFact>,
    expect: Expect,
    #[serde(default)]
    output_contains: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFact {
    #[serde(default)]
    stdout: String,
    #[serde(default)]
    stderr: String,
    #[serde(default)]
    exit: i32,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum ExpectObj {
    Change {
        action: String,
        #[serde(default)]
        reason_contains: Vec<String>,
        #[serde(default)]
        steps_contain: Vec<String>,
        #[serde(default)]
        steps_lack: Vec<String>,
        #[serde(default)]
        diff_contains: Vec<String>,
    },
    Error(String),
    ParamError(String),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Expect {
    Word(String),
    Obj(ExpectObj),
}

/// `sh -n` of `script` inside a subshell, as the engine runs it: the error text, if any.
fn sh_syntax_error(script: &str) -> Option<String> {
    let out = std::process::Command::new("/bin/sh")
        .arg("-n")
        .arg("-c")
        .arg(format!("(\n{script}\n)"))
        .output()
        .expect("run /bin/sh");
    (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
}

fn check_script(shell: Shell, what: &str, script: &str) -> Result<(), String> {
    match shell {
        Shell::Posix => match sh_syntax_error(script) {
            None => Ok(()),
            Some(e) => Err(format!("{what}: sh -n: {e}\n--- script ---\n{script}")),
        },
        Shell::PowerShell => {
            let errs = ps_syntax_errors(script);
            if errs.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "{what}: PowerShell syntax errors:\n{}\n--- script ---\n{script}",
                    errs.join("\n")
                ))
            }
        }
    }
}

fn run_case(module: &str, path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let case: Case = serde_json::from_str(&text).map_err(|e| format!("bad case file: {e}"))?;
    let shell = match case.shell.as_deref() {
        None | Some("posix") => Shell::Posix,
        Some("powershell") => Shell::PowerShell,
        Some(s) => return Err(format!("unknown shell {s}")),
    };
    let built = kwin_modules::Builtin.build(module, shell, &case.params);
    let m = match (built, &case.expect) {
        (Err(e), Expect::Obj(ExpectObj::ParamError(want))) => {
            return if e.to_string().contains(want.as_str()) {
                Ok(())
            } else {
                Err(format!("param error `{e}` lacks `{want}`"))
            };
        }
        (Err(e), _) => return Err(format!("params rejected: {e}")),
        (Ok(_), Expect::Obj(ExpectObj::ParamError(want))) => {
            return Err(format!("params accepted, expected error `{want}`"))
        }
        (Ok(m), _) => m,
    };
    let queries = m.facts(shell);
    for q in &queries {
        check_script(shell, &format!("fact {}", q.key), &q.command)?;
    }
    // A case names a fact by its key or by the key's prefix (keys of facts that carry
    // content end in a hash of their script).
    let mut facts = Facts::new();
    let mut used = Vec::new();
    for q in &queries {
        let prefix = q.key.split(':').next().unwrap_or_default();
        let (name, f) = case
            .facts
            .get_key_value(&q.key)
            .or_else(|| case.facts.get_key_value(prefix))
            .ok_or_else(|| format!("the module asks for fact `{}`; the case lacks it", q.key))?;
        used.push(name.clone());
        facts.insert(
            q.key.clone(),
            FactOutput {
                stdout: f.stdout.clone().into_bytes(),
                stderr: f.stderr.clone().into_bytes(),
                exit: f.exit,
            },
        );
    }
    if let Some(extra) = case.facts.keys().find(|k| !used.contains(k)) {
        return Err(format!(
            "the case gives fact `{extra}` the module does not ask for"
        ));
    }
    let mut inputs = Inputs::new();
    for (k, v) in &case.inputs {
        inputs.insert(k.clone(), Secret::new(v.clone()));
    }
    let ctx = Ctx {
        shell,
        host: "lw1",
        inputs: &inputs,
        nonce: "0123456789abcdef0123456789abcdef",
    };
    if !case.output_contains.is_empty() {
        let script = m.output(shell).ok_or("the module has no output script")?;
        check_script(shell, "output", &script)?;
        for want in &case.output_contains {
            if !script.contains(want.as_str()) {
                return Err(format!("output script lacks `{want}`:\n{script}"));
            }
        }
    }
    let plan = m.plan(&facts, &ctx);
    match (&case.expect, plan) {
        (Expect::Word(w), Ok(Plan::NoOp { .. })) if w == "noop" => Ok(()),
        (
            Expect::Obj(ExpectObj::Change {
                action,
                reason_contains,
                steps_contain,
                steps_lack,
                diff_contains,
            }),
            Ok(Plan::Change(c)),
        ) => {
            if &c.action.to_string() != action {
                return Err(format!("action {} != {action} ({})", c.action, c.reason));
            }
            let mut all = String::new();
            for s in &c.steps {
                match s {
                    Step::Run(script) => {
                        check_script(shell, "step", script)?;
                        all.push_str(script);
                    }
                    Step::Put { path, .. } => all.push_str(&format!("<put {path}>")),
                    Step::Reboot(_) => all.push_str("<reboot>"),
                }
            }
            let diff = c.diff.clone().unwrap_or_default();
            // Inputs are secrets: never in what a plan shows.
            for v in case.inputs.values() {
                if c.reason.contains(v.as_str()) || diff.contains(v.as_str()) {
                    return Err(format!("an input value shows in the plan: {c:?}"));
                }
            }
            for want in reason_contains {
                if !c.reason.contains(want.as_str()) {
                    return Err(format!("reason `{}` lacks `{want}`", c.reason));
                }
            }
            for want in steps_contain {
                if !all.contains(want.as_str()) {
                    return Err(format!("steps lack `{want}`:\n{all}"));
                }
            }
            for unwanted in steps_lack {
                if all.contains(unwanted.as_str()) {
                    return Err(format!("steps contain `{unwanted}`:\n{all}"));
                }
            }
            for want in diff_contains {
                if !diff.contains(want.as_str()) {
                    return Err(format!("diff lacks `{want}`:\n{diff}"));
                }
            }
            Ok(())
        }
        (Expect::Obj(ExpectObj::Error(want)), Err(e)) if e.to_string().contains(want.as_str()) => {
            Ok(())
        }
        (_, got) => Err(format!("unexpected plan: {got:?}")),
    }
}

fn case_dirs() -> Vec<std::path::PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kube_cases");
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .expect("cases dir")
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
    dirs
}

#[test]
fn kube_cases() {
    let mut failures = Vec::new();
    let mut count = 0;
    for dir in case_dirs() {
        let module = dir
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .expect("module dir")
            .flatten()
            .map(|e| e.path())
            .filter(|f| f.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        for f in files {
            count += 1;
            if let Err(e) = run_case(&module, &f) {
                failures.push(format!("{}: {e}", f.display()));
            }
        }
    }
    assert!(count >= 40, "only {count} cases found");
    assert!(
        failures.is_empty(),
        "{} of {count} cases failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn every_kube_module_has_cases() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kube_cases");
    for name in kwin_modules::kube::MODULES.iter().map(|r| r.name) {
        assert!(root.join(name).is_dir(), "no cases for module `{name}`");
    }
}

#[test]
fn syntax_checks_can_fail() {
    assert!(!ps_syntax_errors("$t = @'\nno end").is_empty());
    assert!(sh_syntax_error("if true; then echo").is_some());
    assert!(sh_syntax_error("echo ok").is_none());
}
