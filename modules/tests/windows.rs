//! Windows modules: data-driven cases (params + captured facts → noop / change / error), and a
//! PowerShell syntax check (tree-sitter-powershell) of every script the cases produce.
//!
//! Each case is `tests/windows_cases/<module>/<case>.json`:
//! ```json
//! { "params": {...},
//!   "facts": { "<fact key>": { "stdout": "<json the fact printed>", "exit": 0 } },
//!   "expect": "noop" | { "change": { "action": "create", "steps_contain": ["..."], "steps_in_order": ["...", "..."], "steps_lack": ["..."], "diff_contains": ["..."] } }
//!            | { "noop_warning": "text" } | { "error": "text" } | { "param_error": "text" } }
//! ```
//! `"noop"` is a no-op without a warning; `noop_warning` a no-op whose warning contains the text.
//! The facts given must be exactly the facts the module asks for. Fact outputs are in the shape
//! Windows PowerShell 5.1 prints for kwin's fact scripts (`ConvertTo-Json -Compress`).

use kwin_engine::fact::{FactOutput, Facts};
use kwin_engine::module::{Ctx, Inputs, Plan, Step};
use kwin_engine::transport::Shell;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

mod ps_native;
mod ps_syntax;
use ps_native::native_args_with_quotes;
use ps_syntax::ps_syntax_errors;

#[derive(Deserialize)]
struct Case {
    params: serde_json::Value,
    #[serde(default)]
    facts: BTreeMap<String, CaseFact>,
    expect: Expect,
}

#[derive(Deserialize)]
struct CaseFact {
    stdout: String,
    #[serde(default)]
    stderr: String,
    #[serde(default)]
    exit: i32,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum ExpectObj {
    Change {
        action: String,
        #[serde(default)]
        steps_contain: Vec<String>,
        /// Each must appear after the one before it in the steps' text.
        #[serde(default)]
        steps_in_order: Vec<String>,
        #[serde(default)]
        steps_lack: Vec<String>,
        #[serde(default)]
        diff_contains: Vec<String>,
    },
    NoopWarning(String),
    Error(String),
    ParamError(String),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Expect {
    Word(String),
    Obj(ExpectObj),
}

/// The plan nonce every case is planned with, so the scripts (and the temporary names derived
/// from it) are the same on every run.
const CASE_NONCE: &str = "0123456789abcdef0123456789abcdef";

fn assert_ps_clean(what: &str, script: &str) {
    let errs = ps_syntax_errors(script);
    assert!(
        errs.is_empty(),
        "{what}: PowerShell syntax errors:\n{}\n--- script ---\n{script}",
        errs.join("\n")
    );
    // Windows PowerShell 5.1 passes native-command arguments without escaping embedded `"`
    // (see ps_native): no module script may hand one to a native command.
    let quoted = native_args_with_quotes(script);
    assert!(
        quoted.is_empty(),
        "{what}: a `\"` reaches a native command (Windows PowerShell 5.1 does not escape it):\n{}\n--- script ---\n{script}",
        quoted.join("\n")
    );
}

fn run_case(module: &str, path: &Path, scripts: &mut Vec<(String, String)>) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let case: Case = serde_json::from_str(&text).map_err(|e| format!("bad case file: {e}"))?;
    let built = kwin_engine::module::Registry::build(&kwin_modules::Builtin, module, Shell::PowerShell, &case.params);
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
    let queries = m.facts(Shell::PowerShell);
    for q in &queries {
        assert_ps_clean(&format!("fact {}", q.key), &q.command);
        scripts.push((
            format!("{}: fact {}", path.display(), q.key),
            q.command.clone(),
        ));
    }
    let asked: BTreeSet<&str> = queries.iter().map(|q| q.key.as_str()).collect();
    let given: BTreeSet<&str> = case.facts.keys().map(String::as_str).collect();
    if asked != given {
        return Err(format!(
            "fact keys differ: module asks {asked:?}, case gives {given:?}"
        ));
    }
    let mut facts = Facts::new();
    for (k, f) in &case.facts {
        facts.insert(
            k.clone(),
            FactOutput {
                stdout: f.stdout.clone().into_bytes(),
                stderr: f.stderr.clone().into_bytes(),
                exit: f.exit,
            },
        );
    }
    let inputs = Inputs::new();
    let ctx = Ctx {
        shell: Shell::PowerShell,
        host: "ww1",
        inputs: &inputs,
        nonce: CASE_NONCE,
    };
    let plan = m.plan(&facts, &ctx);
    match (&case.expect, plan) {
        (Expect::Word(w), Ok(Plan::NoOp { warning: None, .. })) if w == "noop" => Ok(()),
        (
            Expect::Obj(ExpectObj::NoopWarning(want)),
            Ok(Plan::NoOp {
                warning: Some(got), ..
            }),
        ) if got.contains(want.as_str()) => Ok(()),
        (
            Expect::Obj(ExpectObj::Change {
                action,
                steps_contain,
                steps_in_order,
                steps_lack,
                diff_contains,
            }),
            Ok(Plan::Change(c)),
        ) => {
            if &c.action.to_string() != action {
                return Err(format!("action {} != {action}", c.action));
            }
            let mut all = String::new();
            for s in &c.steps {
                match s {
                    Step::Run(script) => {
                        assert_ps_clean(&format!("{}: step", path.display()), script);
                        all.push_str(script);
                        scripts.push((format!("{}: step", path.display()), script.clone()));
                    }
                    Step::Put { path, .. } => all.push_str(&format!("<put {path}>")),
                    Step::Reboot(_) => all.push_str("<reboot>"),
                }
            }
            for want in steps_contain {
                if !all.contains(want.as_str()) {
                    return Err(format!("steps lack `{want}`:\n{all}"));
                }
            }
            let mut from = 0;
            for want in steps_in_order {
                match all[from..].find(want.as_str()) {
                    Some(i) => from += i + want.len(),
                    None => {
                        return Err(format!(
                            "steps lack `{want}` after the previous ordered step:\n{all}"
                        ))
                    }
                }
            }
            for unwanted in steps_lack {
                if all.contains(unwanted.as_str()) {
                    return Err(format!("steps contain `{unwanted}`:\n{all}"));
                }
            }
            let diff = c.diff.unwrap_or_default();
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

/// Every PowerShell script the cases produce (facts and steps), by where it came from; the
/// failures of cases that did not run.
fn case_scripts() -> (Vec<(String, String)>, Vec<String>, usize) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/windows_cases");
    let mut scripts = Vec::new();
    let mut failures = Vec::new();
    let mut count = 0;
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .expect("cases dir")
        .flatten()
        .collect();
    dirs.sort_by_key(|d| d.path());
    for dir in dirs {
        let module = dir.file_name().to_string_lossy().to_string();
        let mut files: Vec<_> = std::fs::read_dir(dir.path())
            .expect("module dir")
            .flatten()
            .map(|e| e.path())
            .collect();
        files.sort();
        for f in files
            .into_iter()
            .filter(|f| f.extension().is_some_and(|e| e == "json"))
        {
            count += 1;
            if let Err(e) = run_case(&module, &f, &mut scripts) {
                failures.push(format!("{}: {e}", f.display()));
            }
        }
    }
    (scripts, failures, count)
}

#[test]
fn windows_cases() {
    let (_, failures, count) = case_scripts();
    assert!(count >= 40, "only {count} cases found");
    assert!(
        failures.is_empty(),
        "{} of {count} cases failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn every_windows_module_has_cases() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/windows_cases");
    for name in kwin_modules::windows::MODULES.iter().map(|r| r.name) {
        assert!(
            root.join(name).is_dir(),
            "no cases for windows module `{name}`"
        );
    }
}

#[test]
fn probe_batch_wrapper_is_valid_powershell() {
    use kwin_engine::fact::{batch_script, FactQuery};
    let qs = vec![
        FactQuery {
            key: "a".into(),
            command: "ConvertTo-Json -Compress -InputObject @{ a = 1 }".into(),
            path: None,
        },
        FactQuery {
            key: "b".into(),
            command: "Get-Service -Name 'x' | Out-Null\n'done'".into(),
            path: None,
        },
    ];
    assert_ps_clean("batch", &batch_script(Shell::PowerShell, &qs, "0123abcd"));
}

#[test]
fn engine_powershell_scripts_are_valid_powershell() {
    use kwin_engine::exec::reboot::{boot_id_script, trigger_script};
    use kwin_engine::transport::winrm::scripts;
    assert_ps_clean("reboot trigger", &trigger_script(Shell::PowerShell));
    assert_ps_clean("boot id", boot_id_script(Shell::PowerShell));
    assert_ps_clean(
        "winrm run wrapper",
        &scripts::powershell_run_wrapper("Write-Output 'x'\n\nexit 3"),
    );
    assert_ps_clean(
        "winrm upload",
        &scripts::powershell_upload_script("C:\\k\\it's.txt", "0123", "abcd"),
    );
    assert_ps_clean(
        "winrm get",
        &scripts::powershell_get_script("C:\\k\\a b.txt"),
    );
}

/// No script a case produces gives a plan value to a parameter that reads it as a wildcard
/// pattern (`ps_syntax::wildcards` has the table and its sources): a firewall rule named
/// `kwin-*` must remove that rule, not every rule whose name starts with `kwin-`.
#[test]
fn no_plan_value_reaches_a_wildcard_parameter() {
    use ps_syntax::wildcards::wildcard_violations;
    let (scripts, _, _) = case_scripts();
    assert!(scripts.len() > 50, "{} scripts", scripts.len());
    let mut bad = Vec::new();
    for (what, script) in &scripts {
        for v in wildcard_violations(script) {
            bad.push(format!("{what}: {v}"));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn wildcard_checker_catches_patterns() {
    use ps_syntax::wildcards::wildcard_violations;
    // The check itself must be able to fail.
    assert_eq!(
        wildcard_violations("Remove-NetFirewallRule -Name 'kwin-*'").len(),
        1
    );
    assert_eq!(
        wildcard_violations("$n = 'a[1]'\nStop-Service -Name $n -Force").len(),
        1
    );
    assert_eq!(wildcard_violations("Stop-Service -Name $unknown").len(), 1);
    assert_eq!(
        wildcard_violations("Move-Item -Path $t -Destination $p -Force").len(),
        2
    );
    assert!(wildcard_violations(
        "Remove-NetFirewallRule -Name ([WildcardPattern]::Escape('kwin-*'))\n\
         Remove-ItemProperty -LiteralPath 'HKLM:\\x' -Name 'a*'\n\
         Move-Item -LiteralPath $t -Destination $p -Force\n\
         $n = 'kubelet'\nStop-Service -Name $n -Force"
    )
    .is_empty());
}

#[test]
fn native_quote_checker_catches_quotes() {
    // The check itself must be able to fail, and must not flag what 5.1 passes intact.
    for bad in [
        "$o = & sc.exe create 'kubelet' binPath= '\"C:\\k\\kubelet.exe\" --v=2' start= auto",
        "sc.exe failure kubelet \"a`\"b\"",
        "& tar.exe -xzf \"C:\\a\"\"b.tgz\"",
        "icacls.exe C:\\x --a=\"b\"c",
    ] {
        assert!(
            !native_args_with_quotes(bad).is_empty(),
            "not caught: {bad}"
        );
    }
    for good in [
        "& tar.exe -xzf 'C:\\Program Files\\a.tgz' -C \"C:\\x\"",
        "sc.exe failure 'kubelet' reset= 0 actions= restart/10000",
        "New-Service -Name 'k' -BinaryPathName '\"C:\\k\\k.exe\" --v=2'",
        "throw \"sc.exe failed: $o\"",
    ] {
        assert!(native_args_with_quotes(good).is_empty(), "flagged: {good}");
    }
}

#[test]
fn syntax_checker_catches_errors() {
    // The check itself must be able to fail.
    assert!(!ps_syntax_errors("if ($x { 'unclosed'").is_empty());
    assert!(!ps_syntax_errors("$a = @{ b = ").is_empty());
    assert!(ps_syntax_errors("$a = @{ b = 1 }\nWrite-Output $a.b").is_empty());
}
