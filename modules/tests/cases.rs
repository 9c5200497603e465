//! Data-driven module cases: `tests/cases/<module>/<case>.json`.
//!
//! Each case gives a module's params, the raw answers of its facts (as a probe would return
//! them) and what planning must produce:
//!
//! ```json
//! { "params": { "path": "/etc/motd", "content": "hi\n" },
//!   "facts": { "file.content:/etc/motd": { "stdout": "type=absent\n", "exit": 0 } },
//!   "expect": { "action": "create", "steps_contain": ["base64 -d"], "diff_contains": ["+hi"] } }
//! ```
//!
//! `expect` is `"noop"`, `{ "noop": "<why contains>" }`, `{ "error": "<message contains>",
//! "path"?: "<param path>" }`, or a change: `action`, and optionally `reason` (contains),
//! `steps_contain` / `steps_not_contain` (in the joined step scripts), `diff_contains`,
//! `touches` (list of resources, or `"anything"`), `steps` (number of steps), `writes` (file
//! contents the steps write: each must equal one embedded base64 payload or `put` step).
//!
//! The harness fails a case whose fact keys differ from what the module asks for, and checks
//! that every fact command and every step script parses with `sh -n`.

use kwin_engine::fact::{FactOutput, Facts};
use kwin_engine::module::{Ctx, Inputs, Plan, Registry, Step, Touches};
use kwin_engine::transport::Shell;
use kwin_modules::Builtin;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn case_files() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases");
    let mut out = Vec::new();
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .expect("tests/cases exists")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let module = dir
            .file_name()
            .and_then(|n| n.to_str())
            .expect("module dir name")
            .to_string();
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .expect("read module dir")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("json"))
            .collect();
        files.sort();
        for f in files {
            out.push((module.clone(), f));
        }
    }
    out
}

fn sh_parses(script: &str) -> Result<(), String> {
    let out = std::process::Command::new("/bin/sh")
        .arg("-n")
        .arg("-c")
        .arg(script)
        .output()
        .map_err(|e| format!("cannot run /bin/sh: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "sh -n rejects the script: {}\n{script}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Contents a script writes: its `base64 -d <<'KWIN_B64'` here-documents and its
/// `printf 'FORMAT' >"$t"` writes.
fn embedded_payloads(script: &str) -> Result<Vec<Vec<u8>>, String> {
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
    // Content written by the `printf` builtin: `printf 'FORMAT' >&9`, FORMAT of plain
    // characters and `\ooo` escapes (`script::printf_format`).
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

fn strs(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|x| x.as_str().expect("list of strings").to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn run_case(module: &str, case: &Value) -> Result<(), String> {
    let obj = case.as_object().ok_or("case is not an object")?;
    for k in obj.keys() {
        if !["params", "facts", "expect", "comment"].contains(&k.as_str()) {
            return Err(format!("unknown case field `{k}`"));
        }
    }
    let params = obj
        .get("params")
        .cloned()
        .unwrap_or(Value::Object(Default::default()));
    let expect = obj.get("expect").ok_or("case has no `expect`")?;
    let want_error = expect.get("error").and_then(Value::as_str);
    let built = Builtin.build(module, Shell::Posix, &params);
    let m = match built {
        Err(e) => {
            return match want_error {
                Some(w) if e.message.contains(w) => {
                    match expect.get("path").and_then(Value::as_str) {
                        Some(p) if e.path.as_deref() != Some(p) => Err(format!(
                            "param error at {:?}, expected at `{p}`: {e}",
                            e.path
                        )),
                        _ => Ok(()),
                    }
                }
                _ => Err(format!(
                    "building the module failed: {e} (path {:?})",
                    e.path
                )),
            };
        }
        Ok(m) => m,
    };

    // Fact keys must be exactly those the module asks for.
    let queries = m.facts(Shell::Posix);
    let asked: BTreeSet<String> = queries.iter().map(|q| q.key.clone()).collect();
    let given_map = obj
        .get("facts")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let given: BTreeSet<String> = given_map.keys().cloned().collect();
    if asked != given {
        return Err(format!(
            "fact keys differ: module asks {asked:?}, case gives {given:?}"
        ));
    }
    for q in &queries {
        sh_parses(&q.command).map_err(|e| format!("fact `{}`: {e}", q.key))?;
    }
    let mut facts = Facts::new();
    for (k, v) in given_map {
        let stdout = v.get("stdout").and_then(Value::as_str).unwrap_or("");
        let stderr = v.get("stderr").and_then(Value::as_str).unwrap_or("");
        let exit = v.get("exit").and_then(Value::as_i64).unwrap_or(0) as i32;
        facts.insert(
            k,
            FactOutput {
                stdout: stdout.as_bytes().to_vec(),
                stderr: stderr.as_bytes().to_vec(),
                exit,
            },
        );
    }
    let inputs = Inputs::new();
    let ctx = Ctx {
        shell: Shell::Posix,
        host: "case",
        inputs: &inputs,
        nonce: "0123456789abcdef0123456789abcdef",
    };
    let plan = m.plan(&facts, &ctx);
    let plan = match (plan, want_error) {
        (Err(e), Some(w)) if e.to_string().contains(w) => return Ok(()),
        (Err(e), _) => return Err(format!("plan failed: {e}")),
        (Ok(p), Some(w)) => return Err(format!("expected error containing `{w}`, got {p:?}")),
        (Ok(p), None) => p,
    };
    match (expect, &plan) {
        (Value::String(s), Plan::NoOp { .. }) if s == "noop" => Ok(()),
        (Value::Object(o), Plan::NoOp { why, .. }) if o.contains_key("noop") => {
            let w = o["noop"].as_str().unwrap_or("");
            if why.contains(w) {
                Ok(())
            } else {
                Err(format!("noop why `{why}` does not contain `{w}`"))
            }
        }
        (Value::Object(o), Plan::Change(c)) if o.contains_key("action") => {
            let action = c.action.to_string();
            if o["action"].as_str() != Some(action.as_str()) {
                return Err(format!("action is {action}, expected {}", o["action"]));
            }
            if let Some(r) = o.get("reason").and_then(Value::as_str) {
                if !c.reason.contains(r) {
                    return Err(format!("reason `{}` does not contain `{r}`", c.reason));
                }
            }
            let mut joined = String::new();
            let mut written: Vec<Vec<u8>> = Vec::new();
            for s in &c.steps {
                match s {
                    Step::Run(script) => {
                        sh_parses(script)?;
                        joined.push_str(script);
                        joined.push('\n');
                        written.extend(embedded_payloads(script)?);
                    }
                    Step::Put { path, content, .. } => {
                        joined.push_str(&format!("<put {path}>\n"));
                        written.push(content.clone());
                    }
                    Step::Reboot(_) => joined.push_str("<reboot>\n"),
                }
            }
            if let Some(n) = o.get("steps").and_then(Value::as_u64) {
                if c.steps.len() as u64 != n {
                    return Err(format!("{} steps, expected {n}", c.steps.len()));
                }
            }
            for want in strs(o.get("steps_contain")) {
                if !joined.contains(&want) {
                    return Err(format!("steps do not contain `{want}`:\n{joined}"));
                }
            }
            for bad in strs(o.get("steps_not_contain")) {
                if joined.contains(&bad) {
                    return Err(format!("steps contain `{bad}`:\n{joined}"));
                }
            }
            for want in strs(o.get("writes")) {
                if !written.iter().any(|w| w == want.as_bytes()) {
                    let got: Vec<String> = written
                        .iter()
                        .map(|w| String::from_utf8_lossy(w).into_owned())
                        .collect();
                    return Err(format!("steps do not write {want:?}; they write {got:?}"));
                }
            }
            let diff = c.diff.clone().unwrap_or_default();
            for want in strs(o.get("diff_contains")) {
                if !diff.contains(&want) {
                    return Err(format!("diff does not contain `{want}`:\n{diff}"));
                }
            }
            for bad in strs(o.get("diff_not_contains")) {
                if diff.contains(&bad) {
                    return Err(format!("diff contains `{bad}`:\n{diff}"));
                }
            }
            match (o.get("touches"), &c.touches) {
                (None, _) => {}
                (Some(Value::String(s)), Touches::Anything) if s == "anything" => {}
                (Some(Value::Array(_)), Touches::Resources(r)) => {
                    let want = strs(o.get("touches"));
                    if &want != r {
                        return Err(format!("touches {r:?}, expected {want:?}"));
                    }
                }
                // `{"paths": [...]}`: these paths themselves, not what is under them.
                (Some(Value::Object(t)), Touches::Paths(r)) if t.contains_key("paths") => {
                    let want = strs(t.get("paths"));
                    if &want != r {
                        return Err(format!("touches paths {r:?}, expected {want:?}"));
                    }
                }
                (Some(w), t) => return Err(format!("touches {t:?}, expected {w}")),
            }
            for k in o.keys() {
                let known = [
                    "action",
                    "reason",
                    "steps",
                    "steps_contain",
                    "steps_not_contain",
                    "diff_contains",
                    "diff_not_contains",
                    "touches",
                    "writes",
                ];
                if !known.contains(&k.as_str()) {
                    return Err(format!("unknown expect field `{k}`"));
                }
            }
            Ok(())
        }
        (e, p) => Err(format!("expected {e}, got {p:?}")),
    }
}

#[test]
fn module_cases() {
    let files = case_files();
    let mut failures = Vec::new();
    let mut per_module = std::collections::BTreeMap::<String, usize>::new();
    for (module, path) in &files {
        *per_module.entry(module.clone()).or_default() += 1;
        let text = std::fs::read_to_string(path).expect("read case");
        let result = serde_json::from_str::<Value>(&text)
            .map_err(|e| format!("bad JSON: {e}"))
            .and_then(|case| run_case(module, &case));
        if let Err(e) = result {
            failures.push(format!("{}: {e}", path.display()));
        }
    }
    let names = Builtin.names();
    for m in per_module.keys() {
        assert!(
            names.contains(&m.as_str()),
            "cases for unknown module `{m}`"
        );
    }
    for m in kwin_modules::linux::MODULES.iter().map(|r| &r.name) {
        assert!(
            per_module.get(*m).copied().unwrap_or(0) >= 5,
            "module `{m}` has fewer than 5 cases"
        );
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n\n{}",
        failures.len(),
        files.len(),
        failures.join("\n\n")
    );
}

/// The harness itself must reject a case whose facts the module did not ask for.
#[test]
fn harness_rejects_unrequested_fact_keys() {
    let case = serde_json::json!({
        "params": { "path": "/etc/motd", "content": "hi\n" },
        "facts": {
            "file.content:/etc/motd": { "stdout": "type=absent\n" },
            "file.meta:/etc/other": { "stdout": "type=absent\n" }
        },
        "expect": { "action": "create" }
    });
    let err = run_case("file", &case).expect_err("must fail");
    assert!(err.contains("fact keys differ"), "{err}");
    let ok = serde_json::json!({
        "params": { "path": "/etc/motd", "content": "hi\n" },
        "facts": { "file.content:/etc/motd": { "stdout": "type=absent\n" } },
        "expect": { "action": "update" }
    });
    assert!(run_case("file", &ok).is_err(), "a wrong action must fail");
}

/// Every Linux module documents an example task (a ```toml block in its `//!` header), and
/// the example builds: the docs cannot drift from the params.
#[test]
fn documented_examples_build() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/linux");
    for name in kwin_modules::linux::MODULES.iter().map(|r| &r.name) {
        let path = dir.join(format!("{name}.rs"));
        let src = std::fs::read_to_string(&path).expect("module source");
        let doc: Vec<&str> = src
            .lines()
            .filter_map(|l| l.strip_prefix("//!"))
            .map(|l| l.strip_prefix(' ').unwrap_or(l))
            .collect();
        let start = doc
            .iter()
            .position(|l| *l == "```toml")
            .unwrap_or_else(|| panic!("{name}: no ```toml example in the module docs"));
        let len = doc[start + 1..]
            .iter()
            .position(|l| *l == "```")
            .unwrap_or_else(|| panic!("{name}: unterminated example"));
        let text = doc[start + 1..start + 1 + len].join("\n");
        let plan: toml::Value = toml::from_str(&text)
            .unwrap_or_else(|e| panic!("{name}: example is not TOML: {e}\n{text}"));
        let tasks = plan
            .get("tasks")
            .and_then(|t| t.as_array())
            .unwrap_or_else(|| panic!("{name}: example has no [[tasks]]"));
        for task in tasks {
            assert_eq!(
                task.get("module").and_then(|m| m.as_str()),
                Some(*name),
                "{name}: example uses another module"
            );
            let params = serde_json::to_value(
                task.get("params")
                    .cloned()
                    .unwrap_or(toml::Value::Table(Default::default())),
            )
            .expect("params as JSON");
            if let Err(e) = Builtin.build(name, Shell::Posix, &params) {
                panic!("{name}: the documented example does not build: {e}");
            }
        }
        assert!(
            src.contains("//! | name | type | default | meaning |"),
            "{name}: no parameter table in the module docs"
        );
    }
}
