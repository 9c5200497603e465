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
//! text holds none of them. Needs root (lab hosts); the WinRM part also the stand-in's venv.

mod common;

use std::path::{Path, PathBuf};
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

/// `secret` and the forms it takes when quoted for sh, PowerShell and JSON.
fn forms(secret: &str) -> Vec<String> {
    let mut v = vec![secret.to_string()];
    let sh = kwin_engine::quote::sh_quote(secret);
    v.push(sh.trim_matches('\'').to_string());
    let ps = kwin_engine::quote::ps_quote(secret);
    v.push(ps[1..ps.len() - 1].to_string());
    let js = serde_json::to_string(secret).unwrap_or_default();
    v.push(js[1..js.len() - 1].to_string());
    v.sort();
    v.dedup();
    v
}

fn walk(p: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let path = e.path();
            if path.is_dir() {
                v.extend(walk(&path));
            } else {
                v.push(path);
            }
        }
    }
    v
}

/// Where each secret form shows up in `texts` (name, text).
fn leaks(secrets: &[(&str, String)], texts: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (what, s) in secrets {
        for f in forms(s) {
            for (name, text) in texts {
                if text.contains(&f) {
                    found.push(format!("{what} ({f:?}) in {name}"));
                }
            }
        }
    }
    found
}

struct StandIn {
    child: std::process::Child,
    port: String,
    _state: tempfile::TempDir,
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The WinRM stand-in on 127.0.0.1 (HTTP + NTLM) with `password`, or `None` if its venv
/// cannot be set up here.
fn stand_in(password: &str) -> Option<StandIn> {
    use std::io::BufRead;
    let venv = common::repo().join("target/winrm-venv");
    let ok = Command::new("bash")
        .arg(common::repo().join("lab/winrm-stand-in/setup.sh"))
        .env("KWIN_WINRM_VENV", &venv)
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("WinRM part skipped: the stand-in's venv cannot be set up");
        return None;
    }
    let state = tempfile::tempdir().expect("tmp");
    let mut child = Command::new(venv.join("bin/python"))
        .arg(common::repo().join("lab/winrm-stand-in/server.py"))
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
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("stand-in");
    let stdout = child.stdout.take().expect("stdout");
    let mut ready = String::new();
    for l in std::io::BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
    {
        if l.starts_with("winrm-stand-in ready") {
            ready = l;
            break;
        }
    }
    let port = ready
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http="))
        .and_then(|a| a.rsplit_once(':').map(|(_, p)| p.to_string()))
        .expect("stand-in ready line");
    Some(StandIn {
        child,
        port,
        _state: state,
    })
}

#[test]
fn passphrase_password_and_echoed_secrets_never_show() {
    let _turn = LAB.lock().unwrap_or_else(|p| p.into_inner());
    let passphrase = made_up("pp-");
    // Characters that sh, PowerShell and JSON treat specially.
    let password = made_up("Pw'\"$`\\;-");
    std::env::set_var("KWIN_LAB_ID", LAB_ID);
    std::env::set_var("KWIN_LAB_KEY_PASSPHRASE", &passphrase);
    let Some(lab) = common::lab(2) else { return };
    let lab_dir = lab.inventory.parent().expect("lab dir").to_path_buf();
    let win = stand_in(&password);

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
    let dir = common::plan_dir(&lab, &plan);
    let plan_text = std::fs::read_to_string(dir.path().join("plan.toml")).expect("plan");

    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_kwin"))
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
