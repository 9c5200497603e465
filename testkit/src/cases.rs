//! The one runner of the data-driven module cases.
//!
//! A case is `modules/tests/<dir>/<module>/<case>.json` (`cases/` for Linux modules,
//! `windows_cases/`, `kube_cases/`; folders starting with `_` hold fixtures): a module's
//! params, the raw answers of the facts it asks for (as a probe would return them), and what
//! building and planning must give.
//!
//! ```json
//! { "comment": "why this case exists",               (optional)
//!   "shell": "posix" | "powershell",                  (default: the directory's)
//!   "params": { "path": "/etc/motd", "content": "hi\n" },
//!   "inputs": { "token": "..." },                     (optional: other tasks' outputs)
//!   "facts": { "file.content:/etc/motd": { "stdout": "type=absent\n", "stderr": "", "exit": 0 } },
//!   "expect": ...,
//!   "output_contains": ["..."],                       (optional: the module's output script)
//!   "fact_outputs": { "pending": "true" } }           (optional: outputs read from the facts)
//! ```
//!
//! A fact is named by its key, or by its kind (the key up to the first `:`: keys of facts
//! that carry a script end in its hash). The facts given must be exactly those the module asks
//! for. `expect` is one of
//!
//! - `{ "noop": "<why contains>" }`: a no-op without a warning;
//! - `{ "noop_warning": "<warning contains>" }`: a no-op with a warning;
//! - `{ "change": { "action": "create", ... } }`, with optionally `reason_contains`,
//!   `steps` (how many), `steps_contain`, `steps_in_order` (each after the one before it),
//!   `steps_lack`, `diff_contains`, `diff_lacks`, `touches` (a list of resources, `"anything"`,
//!   or `{ "paths": [...] }`), `writes` (contents the steps write: each an embedded base64
//!   payload, a `printf` to the temporary file, or a `put` step);
//! - `{ "error": "<message contains>" }`: planning fails;
//! - `{ "param_error": { "message": "<contains>", "path": "<param path>" } }`: building
//!   fails (`path` optional).
//!
//! Every fact command, step and output script is checked: `sh -n` for POSIX, for PowerShell
//! tree-sitter-powershell and no `"` inside a native command's argument. Inputs are secrets:
//! none may show in a plan's reason or diff.

use kwin_engine::fact::{FactOutput, Facts};
use kwin_engine::module::{Ctx, Inputs, Module, Plan, Registry, Step, Touches};
use kwin_engine::secret::Secret;
use kwin_engine::transport::Shell;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The plan nonce every case is planned with, so the scripts (and the temporary names derived
/// from it) are the same on every run.
pub const NONCE: &str = "0123456789abcdef0123456789abcdef";

/// One case file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    #[serde(default)]
    pub comment: Option<String>,
    #[serde(default)]
    pub shell: Option<CaseShell>,
    #[serde(default)]
    pub params: serde_json::Value,
    #[serde(default)]
    pub inputs: BTreeMap<String, String>,
    #[serde(default)]
    pub facts: BTreeMap<String, CaseFact>,
    pub expect: Expect,
    #[serde(default)]
    pub output_contains: Vec<String>,
    /// Exactly the outputs the module reads from the case's facts (`Module::fact_outputs`).
    #[serde(default)]
    pub fact_outputs: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CaseShell {
    Posix,
    PowerShell,
}

impl From<CaseShell> for Shell {
    fn from(s: CaseShell) -> Shell {
        match s {
            CaseShell::Posix => Shell::Posix,
            CaseShell::PowerShell => Shell::PowerShell,
        }
    }
}

/// A fact's captured answer.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseFact {
    #[serde(default)]
    pub stdout: String,
    #[serde(default)]
    pub stderr: String,
    #[serde(default)]
    pub exit: i32,
}

impl CaseFact {
    pub fn output(&self) -> FactOutput {
        FactOutput {
            stdout: self.stdout.clone().into_bytes(),
            stderr: self.stderr.clone().into_bytes(),
            exit: self.exit,
        }
    }
}

/// What building and planning must give.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Expect {
    Noop(String),
    NoopWarning(String),
    Change(Box<ExpectChange>),
    Error(String),
    ParamError(ExpectParamError),
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectChange {
    pub action: String,
    #[serde(default)]
    pub reason_contains: Vec<String>,
    #[serde(default)]
    pub steps: Option<usize>,
    #[serde(default)]
    pub steps_contain: Vec<String>,
    #[serde(default)]
    pub steps_in_order: Vec<String>,
    #[serde(default)]
    pub steps_lack: Vec<String>,
    #[serde(default)]
    pub diff_contains: Vec<String>,
    #[serde(default)]
    pub diff_lacks: Vec<String>,
    #[serde(default)]
    pub touches: Option<ExpectTouches>,
    #[serde(default)]
    pub writes: Vec<String>,
    /// `true`: every script step is a `Step::Inline` (no subshell); `false`: none is.
    #[serde(default)]
    pub inline: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ExpectTouches {
    /// `"anything"`.
    Word(String),
    /// Resources (paths with what is under them, or names).
    Resources(Vec<String>),
    /// `{ "paths": [...] }`: these paths themselves.
    Paths { paths: Vec<String> },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectParamError {
    pub message: String,
    #[serde(default)]
    pub path: Option<String>,
}

/// A case file found under a case directory.
#[derive(Debug, Clone)]
pub struct CaseFile {
    pub module: String,
    pub path: PathBuf,
}

/// Every case file under `dir` (`<module>/<case>.json`, sorted; `_`-folders skipped).
pub fn case_files(dir: &Path) -> Vec<CaseFile> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut modules: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.is_dir()
                && !p
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with('_'))
        })
        .collect();
    modules.sort();
    for m in modules {
        let module = m
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let mut files: Vec<PathBuf> = std::fs::read_dir(&m)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("json"))
            .collect();
        files.sort();
        for path in files {
            out.push(CaseFile {
                module: module.clone(),
                path,
            });
        }
    }
    out
}

/// Read a case file.
pub fn read_case(path: &Path) -> Result<Case, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("bad case file: {e}"))
}

/// What running a case produced, for checks across cases (e.g. every PowerShell script's
/// wildcard parameters).
#[derive(Debug, Default)]
pub struct Produced {
    /// (where it came from, script) of every fact, step and output script; an inline step
    /// in its standalone form (`Step::standalone`).
    pub scripts: Vec<(String, String)>,
    /// (where it came from, script) of every `Step::Inline` step, as the module wrote it.
    pub inline_steps: Vec<(String, String)>,
}

/// Where the cases of a family are, and the shell a case runs in when it does not say.
#[derive(Debug, Clone)]
pub struct Suite {
    pub dir: PathBuf,
    pub shell: Shell,
}

impl Suite {
    /// `modules/tests/<name>` of the workspace, cases in `shell` by default.
    pub fn new(name: &str, shell: Shell) -> Suite {
        Suite {
            dir: crate::host::workspace().join("modules/tests").join(name),
            shell,
        }
    }

    /// The Linux modules' cases.
    pub fn linux() -> Suite {
        Suite::new("cases", Shell::Posix)
    }
    /// The Windows modules' cases.
    pub fn windows() -> Suite {
        Suite::new("windows_cases", Shell::PowerShell)
    }
    /// The Kubernetes modules' cases.
    pub fn kube() -> Suite {
        Suite::new("kube_cases", Shell::Posix)
    }
    /// All three.
    pub fn all() -> [Suite; 3] {
        [Suite::linux(), Suite::windows(), Suite::kube()]
    }

    /// Run every case; the failures (`path: why`), the number of cases, and what they produced.
    pub fn run(&self, registry: &dyn Registry) -> (Vec<String>, usize, Produced) {
        let mut failures = Vec::new();
        let mut produced = Produced::default();
        let files = case_files(&self.dir);
        for f in &files {
            let r = read_case(&f.path).and_then(|c| {
                run_case(registry, &f.module, self.shell, &c, &f.path, &mut produced)
            });
            if let Err(e) = r {
                failures.push(format!("{}: {e}", f.path.display()));
            }
        }
        (failures, files.len(), produced)
    }

    /// Run every case and fail the test with every failure.
    pub fn check(&self, registry: &dyn Registry) -> Produced {
        let (failures, count, produced) = self.run(registry);
        assert!(count > 0, "no cases under {}", self.dir.display());
        assert!(
            failures.is_empty(),
            "{} of {count} cases failed:\n\n{}",
            failures.len(),
            failures.join("\n\n")
        );
        produced
    }
}

/// The shell a case runs in: its own, else the suite's.
pub fn case_shell(case: &Case, default: Shell) -> Shell {
    case.shell.map(Shell::from).unwrap_or(default)
}

fn check_script(shell: Shell, what: &str, script: &str) -> Result<(), String> {
    match shell {
        Shell::Posix => crate::scripts::sh_clean(what, script),
        Shell::PowerShell => crate::scripts::ps_clean(what, script),
    }
}

/// Run one case of `module` (its shell: the case's, else `default`).
pub fn run_case(
    registry: &dyn Registry,
    module: &str,
    default: Shell,
    case: &Case,
    file: &Path,
    produced: &mut Produced,
) -> Result<(), String> {
    let shell = case_shell(case, default);
    let from = file.display().to_string();
    let m = match (registry.build(module, shell, &case.params), &case.expect) {
        (Err(e), Expect::ParamError(want)) => {
            if !e.message.contains(want.message.as_str()) {
                return Err(format!("param error `{e}` lacks `{}`", want.message));
            }
            return match &want.path {
                Some(p) if e.path.as_deref() != Some(p.as_str()) => Err(format!(
                    "param error at {:?}, expected at `{p}`: {e}",
                    e.path
                )),
                _ => Ok(()),
            };
        }
        (Err(e), _) => return Err(format!("params rejected: {e} (path {:?})", e.path)),
        (Ok(_), Expect::ParamError(want)) => {
            return Err(format!(
                "params accepted, expected error `{}`",
                want.message
            ))
        }
        (Ok(m), _) => m,
    };
    let queries = m.facts(shell);
    for q in &queries {
        check_script(shell, &format!("fact {}", q.key), &q.command)?;
        produced
            .scripts
            .push((format!("{from}: fact {}", q.key), q.command.clone()));
    }
    let facts = facts_for(m.as_ref(), shell, case)?;
    let mut inputs = Inputs::new();
    for (k, v) in &case.inputs {
        inputs.insert(k.clone(), Secret::new(v.clone()));
    }
    if !case.output_contains.is_empty() {
        let script = m.output(shell).ok_or("the module has no output script")?;
        check_script(shell, "output", &script)?;
        for want in &case.output_contains {
            if !script.contains(want.as_str()) {
                return Err(format!("output script lacks `{want}`:\n{script}"));
            }
        }
        produced.scripts.push((format!("{from}: output"), script));
    }
    if let Some(want) = &case.fact_outputs {
        let got = m.fact_outputs(&facts);
        if got.as_ref() != Some(want) {
            return Err(format!("fact outputs {got:?}, expected {want:?}"));
        }
    }
    let host = match shell {
        Shell::Posix => "lw1",
        Shell::PowerShell => "ww1",
    };
    let ctx = Ctx {
        shell,
        host,
        inputs: &inputs,
        nonce: NONCE,
    };
    match (&case.expect, m.plan(&facts, &ctx)) {
        (Expect::Noop(want), Ok(Plan::NoOp { why, warning: None })) => {
            if why.contains(want.as_str()) {
                Ok(())
            } else {
                Err(format!("no-op because `{why}`, which lacks `{want}`"))
            }
        }
        (
            Expect::NoopWarning(want),
            Ok(Plan::NoOp {
                warning: Some(got), ..
            }),
        ) => {
            if got.contains(want.as_str()) {
                Ok(())
            } else {
                Err(format!("warning `{got}` lacks `{want}`"))
            }
        }
        (Expect::Change(want), Ok(Plan::Change(c))) => {
            check_change(shell, want, &c, case, &from, produced)
        }
        (Expect::Error(want), Err(e)) => {
            if e.to_string().contains(want.as_str()) {
                Ok(())
            } else {
                Err(format!("plan error `{e}` lacks `{want}`"))
            }
        }
        (want, got) => Err(format!("expected {want:?}, got {got:?}")),
    }
}

/// The facts `m` asks for, from the case: each named by its key or its kind; a fact the case
/// gives that the module does not ask for is an error.
fn facts_for(m: &dyn Module, shell: Shell, case: &Case) -> Result<Facts, String> {
    let queries = m.facts(shell);
    let mut facts = Facts::new();
    let mut used: Vec<&str> = Vec::new();
    for q in &queries {
        let kind = q.key.split(':').next().unwrap_or_default();
        let (name, f) = case
            .facts
            .get_key_value(&q.key)
            .or_else(|| case.facts.get_key_value(kind))
            .ok_or_else(|| {
                let asked: Vec<&str> = queries.iter().map(|q| q.key.as_str()).collect();
                let given: Vec<&String> = case.facts.keys().collect();
                format!(
                    "fact keys differ: the module asks for `{}`, the case lacks it (module asks {asked:?}, case gives {given:?})",
                    q.key
                )
            })?;
        used.push(name.as_str());
        facts.insert(q.key.clone(), f.output());
    }
    if let Some(extra) = case.facts.keys().find(|k| !used.contains(&k.as_str())) {
        let asked: Vec<&str> = queries.iter().map(|q| q.key.as_str()).collect();
        return Err(format!(
            "fact keys differ: the case gives `{extra}`, which the module does not ask for (it asks {asked:?})"
        ));
    }
    Ok(facts)
}

fn check_change(
    shell: Shell,
    want: &ExpectChange,
    c: &kwin_engine::module::Change,
    case: &Case,
    from: &str,
    produced: &mut Produced,
) -> Result<(), String> {
    let action = c.action.to_string();
    if action != want.action {
        return Err(format!(
            "action is {action} ({}), expected {}",
            c.reason, want.action
        ));
    }
    let mut all = String::new();
    let mut written: Vec<Vec<u8>> = Vec::new();
    for s in &c.steps {
        match s {
            Step::Run(script) | Step::Inline(script) => {
                let standalone = s.standalone().unwrap_or_default();
                check_script(shell, "step", &standalone)?;
                all.push_str(script);
                all.push('\n');
                written.extend(embedded_payloads(script)?);
                produced.scripts.push((format!("{from}: step"), standalone));
                if matches!(s, Step::Inline(_)) {
                    if shell != Shell::Posix {
                        return Err("an inline step on a PowerShell host".into());
                    }
                    produced
                        .inline_steps
                        .push((format!("{from}: step"), script.clone()));
                }
            }
            Step::Put { path, content, .. } => {
                all.push_str(&format!("<put {path}>\n"));
                written.push(content.clone());
            }
            Step::Reboot(_) => all.push_str("<reboot>\n"),
        }
    }
    let diff = c.diff.clone().unwrap_or_default();
    for v in case.inputs.values() {
        if c.reason.contains(v.as_str()) || diff.contains(v.as_str()) {
            return Err(format!("an input value shows in the plan: {c:?}"));
        }
    }
    for r in &want.reason_contains {
        if !c.reason.contains(r.as_str()) {
            return Err(format!("reason `{}` lacks `{r}`", c.reason));
        }
    }
    if let Some(n) = want.steps {
        if c.steps.len() != n {
            return Err(format!("{} steps, expected {n}", c.steps.len()));
        }
    }
    if let Some(inline) = want.inline {
        let mut scripts = c.steps.iter().filter(|s| s.script().is_some());
        if let Some(other) = scripts.find(|s| matches!(s, Step::Inline(_)) != inline) {
            return Err(format!(
                "a step is {}inline, expected every step {}inline: {other:?}",
                if inline { "not " } else { "" },
                if inline { "" } else { "not " },
            ));
        }
    }
    for w in &want.steps_contain {
        if !all.contains(w.as_str()) {
            return Err(format!("steps lack `{w}`:\n{all}"));
        }
    }
    let mut at = 0;
    for w in &want.steps_in_order {
        match all[at..].find(w.as_str()) {
            Some(i) => at += i + w.len(),
            None => {
                return Err(format!(
                    "steps lack `{w}` after the previous ordered step:\n{all}"
                ))
            }
        }
    }
    for w in &want.steps_lack {
        if all.contains(w.as_str()) {
            return Err(format!("steps contain `{w}`:\n{all}"));
        }
    }
    for w in &want.writes {
        if !written.iter().any(|x| x == w.as_bytes()) {
            let got: Vec<String> = written
                .iter()
                .map(|x| String::from_utf8_lossy(x).into_owned())
                .collect();
            return Err(format!("steps do not write {w:?}; they write {got:?}"));
        }
    }
    for w in &want.diff_contains {
        if !diff.contains(w.as_str()) {
            return Err(format!("diff lacks `{w}`:\n{diff}"));
        }
    }
    for w in &want.diff_lacks {
        if diff.contains(w.as_str()) {
            return Err(format!("diff contains `{w}`:\n{diff}"));
        }
    }
    match (&want.touches, &c.touches) {
        (None, _) => {}
        (Some(ExpectTouches::Word(w)), Touches::Anything) if w == "anything" => {}
        (Some(ExpectTouches::Resources(w)), Touches::Resources(r)) if w == r => {}
        (Some(ExpectTouches::Paths { paths }), Touches::Paths(r)) if paths == r => {}
        (Some(w), t) => return Err(format!("touches {t:?}, expected {w:?}")),
    }
    Ok(())
}

/// Contents a POSIX script writes: its `base64 -d <<'KWIN_B64'` here-documents and its
/// `printf 'FORMAT' >&9` writes (`linux::script::printf_format`).
pub fn embedded_payloads(script: &str) -> Result<Vec<Vec<u8>>, String> {
    use base64::Engine;
    let mut out = Vec::new();
    let mut rest = script;
    while let Some(i) = rest.find("<<'KWIN_B64'\n") {
        let body = &rest[i + "<<'KWIN_B64'\n".len()..];
        let end = if body.starts_with("KWIN_B64\n") {
            0
        } else {
            body.find("\nKWIN_B64\n")
                .ok_or("unterminated here-document")?
        };
        let b64: String = body[..end].split('\n').collect();
        out.push(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|e| format!("bad base64 in script: {e}"))?,
        );
        rest = &body[end..];
    }
    let mut rest = script;
    while let Some(i) = rest.find("printf '") {
        let body = &rest[i + "printf '".len()..];
        let end = body.find('\'').ok_or("unterminated printf format")?;
        if body[end + 1..].starts_with(" >&9") {
            let f = &body.as_bytes()[..end];
            let mut bytes = Vec::new();
            let mut k = 0;
            while k < f.len() {
                if f[k] == b'\\' {
                    let oct = std::str::from_utf8(f.get(k + 1..k + 4).ok_or("short escape")?)
                        .map_err(|_| "bad escape")?;
                    bytes.push(u8::from_str_radix(oct, 8).map_err(|_| "bad octal escape")?);
                    k += 4;
                } else {
                    bytes.push(f[k]);
                    k += 1;
                }
            }
            out.push(bytes);
        }
        rest = &body[end..];
    }
    Ok(out)
}
