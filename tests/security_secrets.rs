//! Secrets never show: a full apply on lab hosts and the WinRM stand-in with
//!
//! - a private key passphrase (the lab's `id_ed25519_pass`, encrypted with a passphrase made
//!   up for this run, given to kwin through `private_key_passphrase_env`),
//! - a WinRM password (`password_env`, NTLM to the stand-in),
//! - hosts that print those values (a command's stdout and stderr, and a failing command's
//!   error message), as a host would print a join token it was given,
//!
//! and every place kwin writes text is searched for every secret, raw and in the forms it
//! takes when quoted for sh, PowerShell or JSON: stdout and stderr of `kwin plan` and
//! `kwin apply` (human and `--output json`), `.kwin/logs/**` and the run journals. The plan
//! text holds none of them. Lab tests (root for the lab hosts, the stand-in's venv).

use kwin_testkit::kwin::walk;
use kwin_testkit::lab::lab;
use kwin_testkit::scan::leaks;
use kwin_testkit::winrm::{lab_file, python, Server};
use std::process::Command;
use std::sync::Mutex;

static LAB: Mutex<()> = Mutex::new(());
const LAB_ID: &str = "4";

fn made_up(prefix: &str) -> String {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{prefix}{:x}{:x}", n, std::process::id())
}

/// The kit's WinRM stand-in on 127.0.0.1 (HTTP + NTLM) with `password`.
struct StandIn {
    _server: Server,
    port: String,
    _state: tempfile::TempDir,
}

fn stand_in(password: &str) -> StandIn {
    let state = tempfile::tempdir().expect("tmp");
    let mut cmd = Command::new(python());
    cmd.arg(lab_file("server.py"))
        .args(["--http", "127.0.0.1:0", "--user", "Administrator"])
        .args([
            "--password-env",
            "KWIN_SECRETS_WINRM_PASSWORD",
            "--auth",
            "ntlm",
        ])
        .arg("--state")
        .arg(state.path())
        .env("KWIN_SECRETS_WINRM_PASSWORD", password)
        .stderr(std::process::Stdio::null());
    let server = Server::spawn(cmd);
    StandIn {
        port: server.port("http="),
        _server: server,
        _state: state,
    }
}

kwin_testkit::lab_test! {
#[test]
fn passphrase_password_and_echoed_secrets_never_show() {
    let _turn = LAB.lock().unwrap_or_else(|p| p.into_inner());
    let passphrase = made_up("pp-");
    // Characters that sh, PowerShell and JSON treat specially.
    let password = made_up("Pw'\"$`\\;-");
    std::env::set_var("KWIN_LAB_ID", LAB_ID);
    std::env::set_var("KWIN_LAB_KEY_PASSPHRASE", &passphrase);
    let lab = lab(2);
    let lab_dir = lab.inventory.parent().expect("lab dir").to_path_buf();
    let win = Some(stand_in(&password));

    // The hosts know the secrets and print them, as a host prints a token it was handed.
    let secret_file = "/root/kwin-secret";
    for h in ["h1", "h2"] {
        lab.ssh(
            h,
            &format!(
                "printf '%s\\n%s\\n' {} {} > {secret_file}",
                kwin_engine::quote::sh_quote(&passphrase),
                kwin_engine::quote::sh_quote(&password)
            ),
        );
    }
    let work = tempfile::tempdir().expect("tmp");
    let win_secret = work.path().join("secret");
    std::fs::write(&win_secret, format!("{password}\n{passphrase}\n")).expect("write");

    let mut plan = format!(
        r#"inventory = "x"

[settings]
step_timeout = 60
retries = 1
retry_delay = 1

[[hosts]]
name = "h1"
os = "linux"
private_key = "{key}"
private_key_passphrase_env = "KWIN_SECRETS_PASSPHRASE"

[[hosts]]
name = "h2"
os = "linux"

[[tasks]]
name = "echo-secret"
module = "command"
on = {{ os = "linux" }}
params = {{ run = "cat {secret_file}; cat {secret_file} >&2; touch /var/tmp/echoed", creates = "/var/tmp/echoed" }}

[[tasks]]
name = "fail-with-secret"
module = "command"
on = {{ os = "linux" }}
params = {{ run = "echo 'token rejected:' >&2; cat {secret_file} >&2; exit 7", creates = "/var/tmp/never" }}
"#,
        key = lab_dir.join("id_ed25519_pass").display(),
    );
    if let Some(w) = &win {
        plan.push_str(&format!(
            r#"
[[hosts]]
name = "w1"
os = "windows"
address = "127.0.0.1"
port = {port}
https = false
user = "Administrator"
password_env = "KWIN_SECRETS_WINRM_PASSWORD"

[[tasks]]
name = "win-echo-secret"
module = "command"
on = {{ os = "windows" }}
params = {{ run = "cat {ws}; cat {ws} >&2; touch {ws}.done", unless = "test -e {ws}.done" }}
"#,
            port = w.port,
            ws = win_secret.display(),
        ));
    }
    let dir = lab.plan_dir(&plan);
    let plan_text = std::fs::read_to_string(dir.path().join("plan.toml")).expect("plan");

    let run = |args: &[&str]| {
        let o = kwin_testkit::kwin!(".").command()
            .args(args)
            .current_dir(dir.path())
            .env("KWIN_SECRETS_PASSPHRASE", &passphrase)
            .env("KWIN_SECRETS_WINRM_PASSWORD", &password)
            .env("KWIN_WINRM_STAND_IN", "1")
            .output()
            .expect("kwin");
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let mut texts: Vec<(String, String)> = vec![("the plan".into(), plan_text)];
    let (code, out, err) = run(&["plan", "plan.toml", "--output", "json"]);
    assert!(code == 0 || code == 2 || code == 1, "{out}{err}");
    texts.push(("plan --output json stdout".into(), out));
    texts.push(("plan stderr".into(), err));
    let (code, out, err) = run(&["apply", "plan.toml", "--output", "json"]);
    // The failing task fails the run; everything else converged (the passphrase worked).
    assert_eq!(code, 1, "{out}{err}");
    let events: Vec<serde_json::Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let status = |h: &str, t: &str| {
        events
            .iter()
            .find(|e| e["event"] == "task_finished" && e["host"] == h && e["task"] == t)
            .map(|e| (e["status"].clone(), e["message"].clone()))
            .unwrap_or_else(|| panic!("no {h}/{t}:\n{out}"))
    };
    for h in ["h1", "h2"] {
        assert_eq!(status(h, "echo-secret").0, "changed", "{out}{err}");
        let (st, msg) = status(h, "fail-with-secret");
        assert_eq!(st, "failed", "{out}");
        let msg = msg.as_str().unwrap_or_default().to_string();
        assert!(
            msg.contains("exit code 7") && msg.contains("***"),
            "the failure says why, with the secret masked: {msg}"
        );
    }
    if win.is_some() {
        assert_eq!(status("w1", "win-echo-secret").0, "changed", "{out}{err}");
    }
    texts.push(("apply --output json stdout".into(), out));
    texts.push(("apply stderr".into(), err));
    let (_, out, err) = run(&["apply", "plan.toml"]);
    texts.push(("apply (human) stdout".into(), out));
    texts.push(("apply (human) stderr".into(), err));
    let files = walk(&dir.path().join(".kwin"));
    assert!(
        files.iter().any(|f| f.to_string_lossy().contains("/logs/"))
            && files.iter().any(|f| f.to_string_lossy().contains("/runs/")),
        "logs and journals are written: {files:?}"
    );
    for f in files {
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap_or_default()).into_owned();
        texts.push((f.display().to_string(), text));
    }
    let found = leaks(
        &[
            ("key passphrase", passphrase.clone()),
            ("WinRM password", password.clone()),
        ],
        &texts,
    );
    assert!(found.is_empty(), "secrets leaked:\n{}", found.join("\n"));
    // The hosts really did print them (the check above is not vacuous).
    assert!(lab
        .ssh("h1", &format!("cat {secret_file}"))
        .contains(&passphrase));
}
}

/// Where any encoded form of each secret (raw, quoted, `printf`-escaped, base64 of UTF-8 and
/// UTF-16LE, JSON, XML: `kwin_engine::secret::encoded_forms`) shows up in `texts`.
fn encoded_leaks(secrets: &[(&str, String)], texts: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (what, s) in secrets {
        for f in kwin_engine::secret::encoded_forms(s) {
            for (name, text) in texts {
                if text.contains(&f) {
                    found.push(format!("{what} ({f:?}) in {name}"));
                }
            }
        }
    }
    found
}

kwin_testkit::lab_test! {
/// `sensitive`: file contents never show, only hashes. On lab hosts, with
///
/// - a file only root may read (0600) that holds a password, rewritten by a `file` task that
///   sets no mode (sensitive because of the host's mode);
/// - a new file with `mode = "0600"` (sensitive because of the plan's mode);
/// - a world-readable file edited by `line_in_file` with `sensitive = true`;
/// - a `command` with `sensitive = true` whose script and output hold a secret;
/// - a world-readable file that is not sensitive (its diff shows its content: the check
///   below is not vacuous),
///
/// the old and new contents appear in no form anywhere kwin writes (`kwin plan` human and
/// JSON, `kwin apply` human and JSON, `.kwin/logs/**`, the journals): diffs show
/// `sha256:<16 hex>… (sensitive)` of exactly the content written, and the files on the host
/// hold exactly the wanted content.
#[test]
fn sensitive_contents_show_as_hashes_only() {
    let _turn = LAB.lock().unwrap_or_else(|p| p.into_inner());
    std::env::set_var("KWIN_LAB_ID", LAB_ID);
    let lab = lab(1);
    let old_pw = made_up("OldPw'\"$`\\-");
    let new_pw = made_up("NewPw%\\n;");
    let fresh = made_up("Fresh-");
    let api_key = made_up("ApiKey=");
    let cmd_secret = made_up("Cmd");
    let visible = made_up("visible-motd-");
    let q = kwin_engine::quote::sh_quote;
    lab.ssh(
        "h1",
        &format!(
            "rm -rf /root/sens && mkdir -p /root/sens && umask 077 && printf 'user=admin\\npassword=%s\\n' {} > /root/sens/app.conf && chmod 0600 /root/sens/app.conf && umask 022 && printf 'a=1\\n' > /root/sens/public.conf",
            q(&old_pw)
        ),
    );
    let new_app = format!("user=admin\npassword={new_pw}\n");
    let fresh_content = format!("token: {fresh}\n");
    let toml = |s: &str| toml::Value::String(s.to_string()).to_string();
    let plan = format!(
        r#"inventory = "x"

[[hosts]]
name = "h1"
os = "linux"

[[tasks]]
name = "app-conf"
module = "file"
params = {{ path = "/root/sens/app.conf", content = {new_app} }}

[[tasks]]
name = "fresh"
module = "file"
params = {{ path = "/root/sens/fresh.conf", content = {fresh_content}, mode = "0600" }}

[[tasks]]
name = "api-key"
module = "line_in_file"
sensitive = true
params = {{ path = "/root/sens/public.conf", line = {api_line} }}

[[tasks]]
name = "secret-cmd"
module = "command"
sensitive = true
params = {{ run = {cmd}, creates = "/root/sens/cmd.done" }}

[[tasks]]
name = "motd"
module = "file"
params = {{ path = "/root/sens/motd", content = {motd}, mode = "0644" }}
"#,
        new_app = toml(&new_app),
        fresh_content = toml(&fresh_content),
        api_line = toml(&format!("api_key={api_key}")),
        cmd = toml(&format!(
            "echo {s}; echo {s} >&2; echo {s} > /root/sens/cmd.done",
            s = q(&cmd_secret)
        )),
        motd = toml(&format!("{visible}\n")),
    );
    let dir = lab.plan_dir(&plan);
    let run = |args: &[&str]| {
        let o = kwin_testkit::kwin!(".").command()
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("kwin");
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let mut texts: Vec<(String, String)> = Vec::new();
    let (code, out, err) = run(&["plan", "plan.toml"]);
    assert_eq!(code, 0, "{out}{err}");
    // The diffs show the hash of exactly what will be written.
    let short = |s: &str| {
        use sha2::Digest;
        format!(
            "sha256:{}… (sensitive)",
            &hex::encode(sha2::Sha256::digest(s.as_bytes()))[..16]
        )
    };
    for want in [&new_app, &fresh_content] {
        assert!(out.contains(&format!("+ {}", short(want))), "{out}");
    }
    assert!(out.contains(&format!("+{visible}")), "{out}");
    texts.push(("plan stdout".into(), out));
    texts.push(("plan stderr".into(), err));
    let (_, out, err) = run(&["plan", "plan.toml", "--output", "json"]);
    texts.push(("plan --output json stdout".into(), out));
    texts.push(("plan --output json stderr".into(), err));
    let (code, out, err) = run(&["apply", "plan.toml", "--output", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&visible), "{out}");
    texts.push(("apply --output json stdout".into(), out));
    texts.push(("apply --output json stderr".into(), err));
    let (code, out, err) = run(&["apply", "plan.toml"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("0 changed"), "{out}");
    texts.push(("apply again stdout".into(), out));
    texts.push(("apply again stderr".into(), err));
    for f in walk(&dir.path().join(".kwin")) {
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap_or_default()).into_owned();
        texts.push((f.display().to_string(), text));
    }
    // The contents really went to the host.
    assert_eq!(lab.ssh("h1", "cat /root/sens/app.conf"), new_app);
    assert_eq!(lab.ssh("h1", "cat /root/sens/fresh.conf"), fresh_content);
    assert!(lab
        .ssh("h1", "cat /root/sens/public.conf")
        .contains(&format!("api_key={api_key}\n")));
    assert_eq!(lab.ssh("h1", "cat /root/sens/cmd.done").trim(), cmd_secret);
    // The logs recorded each run (the search below is not vacuous).
    assert!(
        texts
            .iter()
            .any(|(n, t)| n.ends_with("h1.log") && t.contains(&visible)),
        "no log shows the public file"
    );
    let found = encoded_leaks(
        &[
            ("the old password", old_pw.clone()),
            ("the new password", new_pw.clone()),
            ("the 0600 file's token", fresh.clone()),
            ("the sensitive line", api_key.clone()),
            ("the sensitive command's secret", cmd_secret.clone()),
        ],
        &texts,
    );
    assert!(
        found.is_empty(),
        "sensitive content leaked:\n{}",
        found.join("\n")
    );
}
}

/// A plan of one `local` host in `dir` whose variable `key` is sensitive: a file gets it as
/// content, a command prints it, a second file's path is it (when `in_path`).
fn sensitive_var_plan(dir: &std::path::Path, in_path: bool) -> std::path::PathBuf {
    let d = dir.display();
    let mut plan = format!(
        r#"[variables.key]
type = "string"
sensitive = true

[[hosts]]
name = "l1"
os = "linux"
transport = "local"

[[tasks]]
name = "key-file"
module = "file"
on = {{ hosts = ["l1"] }}
params = {{ path = "{d}/key.pem", content = "{{{{ var.key }}}}", mode = "0644" }}

[[tasks]]
name = "print"
module = "command"
on = {{ hosts = ["l1"] }}
params = {{ run = "printf '%s\n' {{{{ var.key | sh }}}}; printf 'x' > {d}/printed", creates = "{d}/printed" }}
"#
    );
    if in_path {
        plan.push_str(
            r#"
[[tasks]]
name = "bad-path"
module = "file"
on = { hosts = ["l1"] }
params = { path = "{{ var.key }}", content = "x" }
"#,
        );
    }
    let p = dir.join("plan.toml");
    std::fs::write(&p, plan).expect("plan");
    p
}

/// The values of variables marked `sensitive` never show: a multi-line one in `kwin plan`'s
/// diff (human and JSON, where every line gets a `+`) and in `kwin apply -v` (told a line at
/// a time), one quoted in a diagnostic (`kwin validate`, `kwin plan --output json`); and one
/// shorter than 4 bytes, which could not be masked, is refused. (Before: every one showed.)
#[test]
fn sensitive_variables_never_show() {
    let dir = tempfile::tempdir().expect("tmp");
    let lines = [
        "-----BEGIN PRIVATE KEY-----",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
        "S2V5TGluZVR3b0lzQWxzb1NlY3JldA==",
        "-----END PRIVATE KEY-----",
    ];
    let key = format!("{}\n", lines.join("\n"));
    let shown = |what: &str, r: &kwin_testkit::kwin::Run| {
        let text = format!("{}{}", r.stdout, r.stderr);
        for l in &lines[1..3] {
            assert!(!text.contains(l), "{what} shows a line of the key:\n{text}");
        }
    };
    let run = |args: &[&str], value: &str| {
        kwin_testkit::kwin!(dir.path())
            .args(args)
            .env("KWIN_VAR_key", value)
            .run()
    };
    sensitive_var_plan(dir.path(), false);
    for args in [
        &["plan", "plan.toml"][..],
        &["plan", "plan.toml", "--output", "json"],
    ] {
        let r = run(args, &key);
        assert!(r.stdout.contains("key.pem"), "the plan shows the file: {r}");
        shown(&args.join(" "), &r);
    }
    let r = run(&["apply", "plan.toml", "-v"], &key);
    assert_eq!(r.code, 0, "{r}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("key.pem")).expect("written"),
        key
    );
    shown("apply -v", &r);
    for file in walk(&dir.path().join(".kwin")) {
        let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap_or_default()).into_owned();
        for l in &lines[1..3] {
            assert!(
                !text.contains(l),
                "{} shows a line of the key",
                file.display()
            );
        }
    }

    // Quoted in a diagnostic: a path that is not absolute.
    sensitive_var_plan(dir.path(), true);
    let one_line = "not-an-absolute-path-S3cr3tValue";
    for args in [
        &["validate", "plan.toml"][..],
        &["plan", "plan.toml", "--output", "json"],
    ] {
        let r = run(args, one_line);
        assert_ne!(r.code, 0, "{r}");
        let text = format!("{}{}", r.stdout, r.stderr);
        assert!(text.contains("bad-path"), "the diagnostic is there: {text}");
        assert!(
            !text.contains("S3cr3tValue"),
            "{} quotes the value:\n{text}",
            args[0]
        );
    }

    // Too short to be masked: refused, naming where it came from.
    let r = run(&["validate", "plan.toml"], "abc");
    assert_ne!(r.code, 0, "{r}");
    assert!(
        r.stderr.contains("variable-short") && r.stderr.contains("KWIN_VAR_key"),
        "{r}"
    );
}
