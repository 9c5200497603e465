//! Hostile values in a plan: quotes, `$()`, backticks, newlines, `;`, globs, PowerShell `$` and
//! backtick sequences. Each is either refused by validation, at the line where it is written,
//! or reaches the host literally — never run as code.
//!
//! - Fields that become names, addresses, labels, taints or pins are refused
//!   (in process, `kwin_engine::plan::validate::load_and_validate_str`).
//! - User task values (file path and content, command guards and text) are applied to a real
//!   lab host over SSH, read back with the system ssh client and compared byte for byte; a
//!   marker file that any injection would create must not exist; the second apply changes
//!   nothing. Needs root (lab hosts); without root that part says so and passes.

use kwin_testkit::{
    kwin,
    lab::{lab, Lab},
};
use std::sync::Mutex;

/// Lab tests of this binary share one lab id and take turns.
static LAB: Mutex<()> = Mutex::new(());
const LAB_ID: &str = "4";

/// Strings that mean something to sh or PowerShell. `PWNED` marks what an injection would do.
const HOSTILE: &[&str] = &[
    "it's",
    "$(touch /tmp/kwin-pwned)",
    "`touch /tmp/kwin-pwned`",
    "a;touch /tmp/kwin-pwned;b",
    "a && touch /tmp/kwin-pwned",
    "a | touch /tmp/kwin-pwned",
    "line1\ntouch /tmp/kwin-pwned",
    "${IFS}PWNED",
    "$HOME",
    "'; touch /tmp/kwin-pwned; '",
    "\"; touch /tmp/kwin-pwned; \"",
    "$(Write-Output PWNED)",
    "`$PWNED `n",
    "'' + $PWNED + ''",
    "\u{2019}; PWNED; \u{2018}",
    "*",
    "-rf",
];

fn steps() -> Vec<String> {
    kwin_modules::recipes::step_names()
}

fn check(text: &str) -> kwin_engine::diag::Diagnostics {
    use kwin_engine::module::Registry;
    let modules = kwin_modules::Builtin.names();
    let steps = steps();
    let known = kwin_engine::plan::validate::Names {
        modules: &modules,
        recipe_steps: &steps,
    };
    kwin_engine::plan::validate::load_and_validate_str(
        std::path::Path::new("plan.toml"),
        text,
        known,
    )
    .diags
}

/// A one-line TOML basic string holding `s` exactly.
fn toml_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Line (1-based) of the first line of `text` containing `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("{needle:?} not in plan:\n{text}"))
}

#[test]
fn hostile_host_fields_are_refused_at_their_line() {
    let mut problems = Vec::new();
    for (i, h) in HOSTILE.iter().enumerate() {
        // Each field on its own marked line, so the diagnostic's line can be checked.
        for (field, value, extra) in [
            ("name", format!("{h}h{i}"), ""),
            ("address", format!("{h}10.0.0.1"), ""),
            ("node_ip", format!("{h}10.0.0.1"), ""),
            ("host_key", format!("SHA256:{h}"), ""),
            ("labels", String::new(), "label-key"),
            ("labels", String::new(), "label-value"),
            ("taints", String::new(), "taint"),
        ] {
            let line = match extra {
                "label-key" => format!(
                    "labels = {{ {} = \"x\" }} # HOSTILE",
                    toml_str(&format!("{h}a"))
                ),
                "label-value" => format!(
                    "labels = {{ team = {} }} # HOSTILE",
                    toml_str(&format!("{h}a"))
                ),
                "taint" => format!(
                    "taints = [{}] # HOSTILE",
                    toml_str(&format!("{h}k=v:NoSchedule"))
                ),
                _ => format!("{field} = {} # HOSTILE", toml_str(&value)),
            };
            let mut plan = String::from("[[hosts]]\n");
            if field != "name" {
                plan.push_str("name = \"h1\"\n");
            }
            if field != "address" {
                plan.push_str("address = \"10.0.0.1\"\n");
            }
            plan.push_str("os = \"linux\"\n");
            plan.push_str(&line);
            plan.push('\n');
            let d = check(&plan);
            let want = line_of(&plan, "# HOSTILE");
            let at_line = d
                .errors()
                .any(|e| e.location.as_ref().is_some_and(|l| l.line == want));
            if !at_line {
                problems.push(format!(
                    "{field}{} = {value:?} / {h:?}: not refused at line {want}: {}",
                    if extra.is_empty() { "" } else { " " },
                    d.to_string().trim()
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn hostile_module_names_are_refused() {
    // Task names never reach a script (batches mark tasks by index), and environment variable
    // names only reach getenv; module names pick code, so anything unknown is refused.
    for h in HOSTILE {
        let task = format!("name = \"t\"\nmodule = {}", toml_str(&format!("file{h}")));
        let plan = format!(
            "[[hosts]]\nname = \"h1\"\naddress = \"10.0.0.1\"\nos = \"linux\"\n\n[[tasks]]\n{task} # HOSTILE\nparams = {{ path = \"/etc/x\", content = \"x\" }}\n"
        );
        let d = check(&plan);
        assert!(
            d.errors().any(|e| e.location.is_some()),
            "module {h:?} accepted:\n{plan}\n{d}"
        );
    }
}

/// Hostile file names under one directory on the host (NUL cannot be in a file name).
fn hostile_paths() -> Vec<String> {
    let mut v: Vec<String> = HOSTILE
        .iter()
        .enumerate()
        .map(|(i, h)| format!("/tmp/kwin-hostile/{i:02} {}", h.replace('/', "_")))
        .collect();
    v.push("/tmp/kwin-hostile/ünï ✓ 한국어".into());
    v.push("/tmp/kwin-hostile/trailing space ".into());
    v.push("/tmp/kwin-hostile/.hidden\r".into());
    v
}

/// Hostile file contents (the whole HOSTILE list, heredoc terminators, CR, NUL, no newline).
fn hostile_contents() -> Vec<String> {
    let mut v: Vec<String> = HOSTILE.iter().map(|s| s.to_string()).collect();
    v.push(HOSTILE.join("\n"));
    v.push("EOF\nKWIN_EOF\n'EOF'\n\"EOF\"\n".into());
    v.push("crlf\r\nline\r\n".into());
    v.push("nul\0inside\0".into());
    v.push(String::new());
    v.push("no newline at the end".into());
    v.push("\u{feff}bom and \u{202e}rtl".into());
    v
}

fn lab_plan() -> String {
    let mut p = String::from(
        "inventory = \"LAB\"\n\n[settings]\nstep_timeout = 120\nretries = 1\nretry_delay = 1\n\n\
         [defaults.linux]\nconnect_timeout = 5\n\n[[hosts]]\nname = \"h1\"\nos = \"linux\"\n\n\
         [[tasks]]\nname = \"dir\"\nmodule = \"directory\"\nparams = { path = \"/tmp/kwin-hostile\" }\n",
    );
    let paths = hostile_paths();
    let contents = hostile_contents();
    for (i, path) in paths.iter().enumerate() {
        let content = &contents[i % contents.len()];
        p.push_str(&format!(
            "\n[[tasks]]\nname = \"f{i}\"\nmodule = \"file\"\nafter = [\"dir\"]\nparams = {{ path = {}, content = {} }}\n",
            toml_str(path),
            toml_str(content)
        ));
    }
    // The command module: the text is shell by design, so it runs as written; what it is
    // given as data (guards' paths) must stay data.
    for (i, h) in HOSTILE.iter().enumerate().take(8) {
        let out = format!("/tmp/kwin-hostile/cmd {i} {}", h.replace('/', "_"));
        let run = format!(
            "printf '%s' {} > {}",
            kwin_engine::quote::sh_quote(h),
            kwin_engine::quote::sh_quote(&out)
        );
        p.push_str(&format!(
            "\n[[tasks]]\nname = \"c{i}\"\nmodule = \"command\"\nafter = [\"dir\"]\nparams = {{ run = {}, creates = {} }}\n",
            toml_str(&run),
            toml_str(&out)
        ));
    }
    p
}

/// Every file under /tmp/kwin-hostile on `host`: (name bytes, content bytes).
fn read_back(lab: &Lab, host: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    use base64::Engine;
    let listing = lab.ssh(
        host,
        "cd /tmp/kwin-hostile && for f in * .[!.]*; do [ -f \"$f\" ] || continue; \
         printf '%s' \"$f\" | base64 -w0; printf ' '; base64 -w0 < \"$f\"; printf '\\n'; done",
    );
    let b64 = base64::engine::general_purpose::STANDARD;
    listing
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (n, c) = l.split_once(' ').unwrap_or((l, ""));
            (
                b64.decode(n).expect("name base64"),
                b64.decode(c).expect("content base64"),
            )
        })
        .collect()
}

kwin_testkit::lab_test! {
#[test]
fn hostile_task_values_reach_the_host_literally() {
    let _turn = LAB.lock().unwrap_or_else(|p| p.into_inner());
    std::env::set_var("KWIN_LAB_ID", LAB_ID);
    let lab = lab(1);
    let text = lab_plan().replace("inventory = \"LAB\"", "inventory = \"x\"");
    let dir = lab.plan_dir(&text);
    let r = kwin!(dir.path(), &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(r.code, 0, "{r}");

    // No injection ran: the marker does not exist, no PWNED anywhere.
    assert_eq!(
        lab.ssh(
            "h1",
            "test -e /tmp/kwin-pwned && echo PRESENT || echo absent"
        ),
        "absent\n",
        "an injected command ran on the host"
    );

    let mut want: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let contents = hostile_contents();
    for (i, path) in hostile_paths().iter().enumerate() {
        let name = path.trim_start_matches("/tmp/kwin-hostile/");
        want.push((
            name.as_bytes().to_vec(),
            contents[i % contents.len()].as_bytes().to_vec(),
        ));
    }
    for (i, h) in HOSTILE.iter().enumerate().take(8) {
        want.push((
            format!("cmd {i} {}", h.replace('/', "_")).into_bytes(),
            h.as_bytes().to_vec(),
        ));
    }
    want.sort();
    let mut got = read_back(&lab, "h1");
    got.sort();
    let show = |v: &[(Vec<u8>, Vec<u8>)]| -> String {
        v.iter()
            .map(|(n, c)| {
                format!(
                    "{:?} => {:?}",
                    String::from_utf8_lossy(n),
                    String::from_utf8_lossy(c)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        got == want,
        "files on the host differ from the plan\n--- want\n{}\n--- got\n{}",
        show(&want),
        show(&got)
    );

    // Idempotent with hostile names too: nothing to change the second time.
    let again = kwin!(dir.path(), &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(again.code, 0, "{again}");
    assert_eq!(again.summary()["changed"], 0, "{again}");
}
}

/// Byte ranges of every PowerShell string-literal token tree-sitter finds in `script`, or
/// the syntax errors.
fn ps_literal_ranges(script: &str) -> Result<Vec<std::ops::Range<usize>>, String> {
    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&tree_sitter_powershell::LANGUAGE.into())
        .map_err(|e| e.to_string())?;
    let tree = parser.parse(script, None).ok_or("tree-sitter gave up")?;
    let (mut lits, mut errors) = (Vec::new(), Vec::new());
    let mut cursor = tree.walk();
    let mut stack = vec![tree.root_node()];
    while let Some(n) = stack.pop() {
        if n.is_error() || n.is_missing() {
            errors.push(format!("{} at byte {}", n.kind(), n.start_byte()));
        }
        if matches!(
            n.kind(),
            "verbatim_string_characters" | "verbatim_here_string_characters"
        ) {
            lits.push(n.byte_range());
            continue;
        }
        for c in n.children(&mut cursor) {
            stack.push(c);
        }
    }
    if errors.is_empty() {
        Ok(lits)
    } else {
        Err(errors.join(", "))
    }
}

#[test]
fn hostile_values_stay_inside_powershell_string_literals() {
    // Every Windows module that takes text, with hostile text around a marker: each module
    // either refuses the parameters, or every script it sends (facts and steps, planned
    // against a host where nothing exists yet) parses, and the marker appears only inside
    // single-quoted (verbatim) literals — never as code, a variable or a subexpression.
    use kwin_engine::fact::{FactOutput, Facts};
    use kwin_engine::module::{Ctx, Inputs, Plan, Registry};
    use kwin_engine::transport::Shell;
    let mut checked = 0;
    let mut problems = Vec::new();
    for h in HOSTILE {
        let v = format!("{h}PWNED{h}");
        let cases = [
            (
                "file",
                serde_json::json!({"path": format!("C:\\k\\{v}"), "content": v}),
            ),
            (
                "directory",
                serde_json::json!({"path": format!("C:\\k\\{v}")}),
            ),
            (
                "env_var",
                serde_json::json!({"name": "KWIN_TEST", "value": v}),
            ),
            ("env_var", serde_json::json!({"name": v, "value": "x"})),
            (
                "registry_value",
                serde_json::json!({"path": format!("HKLM:\\SOFTWARE\\{v}"), "name": v, "value": v}),
            ),
            (
                "path_entry",
                serde_json::json!({"path": format!("C:\\k\\{v}")}),
            ),
            (
                "firewall_rule",
                serde_json::json!({"name": v, "protocol": "udp", "local_port": 4789}),
            ),
            (
                "download",
                serde_json::json!({"url": format!("https://example.invalid/{v}"), "dest": format!("C:\\k\\{v}")}),
            ),
            (
                "command",
                serde_json::json!({"run": "Write-Output ok", "creates": format!("C:\\k\\{v}")}),
            ),
        ];
        for (module, params) in cases {
            let m = match kwin_modules::Builtin.build(module, Shell::PowerShell, &params) {
                Ok(m) => m,
                Err(_) => continue, // refused: fine
            };
            let queries = m.facts(Shell::PowerShell);
            let mut scripts: Vec<(String, String)> = queries
                .iter()
                .map(|q| (format!("{module} fact {}", q.key), q.command.clone()))
                .collect();
            let mut facts = Facts::new();
            for q in &queries {
                facts.insert(
                    q.key.clone(),
                    FactOutput {
                        stdout: br#"{"exists":false,"found":false,"value":null}"#.to_vec(),
                        stderr: Vec::new(),
                        exit: 0,
                    },
                );
            }
            let inputs = Inputs::new();
            let ctx = Ctx {
                shell: Shell::PowerShell,
                host: "w1",
                inputs: &inputs,
                nonce: "0123456789abcdef0123456789abcdef",
            };
            if let Ok(Plan::Change(c)) = m.plan(&facts, &ctx) {
                for (i, s) in c.steps.iter().enumerate() {
                    if let Some(script) = s.script() {
                        scripts.push((format!("{module} step {i}"), script.to_string()));
                    }
                }
            }
            for (what, script) in scripts {
                checked += 1;
                match ps_literal_ranges(&script) {
                    Err(e) => problems.push(format!("{what} with {h:?}: syntax errors {e}")),
                    Ok(lits) => {
                        for (at, _) in script.match_indices("PWNED") {
                            if !lits.iter().any(|r| r.start < at && at + 5 < r.end) {
                                problems.push(format!(
                                    "{what} with {h:?}: the value is code at byte {at}:\n{script}"
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} scripts checked");
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}
