//! Proxy values: what reaches systemd units is exactly what the plan says, and proxy
//! credentials are secrets.
//!
//! - The runtime recipes' proxy drop-ins, rendered from a plan whose proxy values hold quotes,
//!   backslashes, `%` and line breaks, are read by the real systemd (`systemd-analyze verify`,
//!   which loads the unit with its drop-ins and dumps what it parsed): every variable has
//!   exactly the value the plan gave, and no other setting (`ExecStartPre=`) appears. A value
//!   systemd cannot hold (a line break) stops the expansion instead. (`kwin validate` refuses
//!   such values at their line too: tests/plans/bad/proxy-*.toml.)
//! - `proxy.credentials_file`: `kwin plan` (a local host, nothing changed) shows and logs no
//!   form of the password, the file holding it is written 0600, and the units reference it
//!   with `EnvironmentFile=` (an `Environment=` value is readable by any local user over
//!   D-Bus, systemd.exec(5)).

use std::path::Path;
use std::process::Command;

fn systemd_analyze() -> &'static str {
    let p = "/usr/bin/systemd-analyze";
    assert!(
        Path::new(p).exists(),
        "{p} is missing: install systemd (the test reads units with the real systemd)"
    );
    p
}

/// Every task of the plan `text`, loaded without validation (the expansion itself is what is
/// under test).
fn expand(text: &str) -> Result<Vec<kwin_engine::task::Task>, String> {
    let plan = kwin_engine::plan::load_str(Path::new("/lab/plan.toml"), text)
        .map_err(|d| d.to_string())?;
    kwin_engine::expand::expand(&plan, kwin_modules::recipes::RECIPES).map_err(|d| d.to_string())
}

fn plan_text(runtime: &str, http: &str, https: &str, no_proxy: &[&str]) -> String {
    let q = |s: &str| serde_json::to_string(s).expect("json string");
    let list: Vec<String> = no_proxy.iter().map(|s| q(s)).collect();
    format!(
        r#"
[cluster]
name = "lab"
kubernetes_version = "1.31.4"
[cni]
plugin = "flannel"
[runtime]
linux = "{runtime}"
cri_dockerd = true
[proxy]
http = {}
https = {}
no_proxy = [{}]
[[hosts]]
name = "cp1"
address = "192.168.56.10"
os = "linux"
role = "control-plane"
"#,
        q(http),
        q(https),
        list.join(", ")
    )
}

/// What systemd parsed from `unit` with the drop-in `content`: its `Environment:` values and
/// the names of its `Exec*` settings.
fn systemd_reads(unit: &str, content: &str) -> (Vec<String>, Vec<String>) {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(
        dir.path().join(unit),
        "[Unit]\nDescription=kwin test\n[Service]\nExecStart=/bin/true\n",
    )
    .expect("unit");
    let d = dir.path().join(format!("{unit}.d"));
    std::fs::create_dir(&d).expect("drop-in dir");
    std::fs::write(d.join("http-proxy.conf"), content).expect("drop-in");
    let out = Command::new(systemd_analyze())
        .args(["verify", "--man=no", "--generators=no"])
        .arg(dir.path().join(unit))
        .env("SYSTEMD_LOG_LEVEL", "debug")
        .output()
        .expect("systemd-analyze");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let env = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Environment: "))
        .map(str::to_string)
        .collect();
    let exec = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("-> "))
        .filter(|l| l.starts_with("Exec"))
        .map(|l| l.trim_end_matches(':').to_string())
        .collect();
    (env, exec)
}

fn drop_in(tasks: &[kwin_engine::task::Task], id: &str) -> String {
    let t = tasks
        .iter()
        .find(|t| t.id.to_string() == id)
        .unwrap_or_else(|| panic!("no task {id}"));
    t.params["content"].as_str().expect("content").to_string()
}

#[test]
fn proxy_values_reach_systemd_exactly() {
    let http = r#"http://proxy.lab:3128/a"b%hc\d'e"#;
    let https = "http://proxy.lab:3129/%%n";
    let no_proxy = [".lab", "10.0.0.0/8", "%H"];
    for (runtime, task, unit) in [
        ("containerd", "cp1/containerd-proxy", "containerd.service"),
        ("docker", "cp1/docker-proxy", "docker.service"),
    ] {
        let tasks = expand(&plan_text(runtime, http, https, &no_proxy)).expect("expand");
        let (env, exec) = systemd_reads(unit, &drop_in(&tasks, task));
        assert!(
            env.contains(&format!("HTTP_PROXY={http}")),
            "{runtime}: {env:?}"
        );
        assert!(
            env.contains(&format!("HTTPS_PROXY={https}")),
            "{runtime}: {env:?}"
        );
        let np = env
            .iter()
            .find(|e| e.starts_with("NO_PROXY="))
            .unwrap_or_else(|| panic!("{runtime}: no NO_PROXY in {env:?}"));
        assert!(np.starts_with("NO_PROXY=.lab,10.0.0.0/8,%H,"), "{np}");
        assert_eq!(env.len(), 3, "{runtime}: {env:?}");
        assert_eq!(exec, vec!["ExecStart".to_string()], "{runtime}");
    }
}

#[test]
fn a_line_break_in_a_proxy_value_adds_no_setting() {
    let http =
        "http://proxy.lab:3128/\"\nExecStartPre=/bin/touch /tmp/kwin-pwned\nEnvironment=\"X=y";
    match expand(&plan_text("containerd", http, "http://proxy.lab:3128", &[])) {
        // The expansion refuses the value (with the recipe step) ...
        Err(e) => assert!(e.contains("control character"), "{e}"),
        // ... or systemd reads it as one value and nothing else.
        Ok(tasks) => {
            let (env, exec) = systemd_reads(
                "containerd.service",
                &drop_in(&tasks, "cp1/containerd-proxy"),
            );
            assert_eq!(exec, vec!["ExecStart".to_string()], "{env:?}");
        }
    }
}

/// All text under `dir` (logs, journals).
fn tree_text(dir: &Path) -> String {
    let mut out = String::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.push_str(&tree_text(&p));
            } else if let Ok(b) = std::fs::read(&p) {
                out.push_str(&String::from_utf8_lossy(&b));
            }
        }
    }
    out
}

#[test]
fn proxy_credentials_are_secrets_and_stay_root_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tmp");
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    // A password with characters the URL must percent-encode.
    let password = format!("Pr0xy@P:ss/{n:x}");
    let encoded = password
        .replace('@', "%40")
        .replace(':', "%3A")
        .replace('/', "%2F");
    std::fs::create_dir(dir.path().join("secrets")).expect("mkdir");
    let cred = dir.path().join("secrets/proxy");
    std::fs::write(&cred, format!("kwin-proxy:{password}\n")).expect("write");
    std::fs::set_permissions(&cred, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    // One local host: `kwin plan` only reads (facts), nothing changes on this machine.
    let text = r#"
[cluster]
name = "lab"
kubernetes_version = "1.31.4"
[cni]
plugin = "flannel"
[proxy]
http = "http://proxy.lab:3128"
https = "http://proxy.lab:3129"
credentials_file = "secrets/proxy"
[[hosts]]
name = "cp1"
address = "127.0.0.1"
os = "linux"
role = "control-plane"
transport = "local"
"#;
    let plan = dir.path().join("plan.toml");
    std::fs::write(&plan, text).expect("plan");
    assert!(!text.contains(&password));

    // The recipes: the URLs with credentials go only to the 0600 environment file, which the
    // runtime's drop-in references.
    let loaded = kwin_engine::plan::load(&plan).expect("load");
    let tasks =
        kwin_engine::expand::expand(&loaded, kwin_modules::recipes::RECIPES).expect("expand");
    let env = tasks
        .iter()
        .find(|t| t.id.to_string() == "cp1/proxy-credentials")
        .expect("proxy-credentials task");
    assert_eq!(env.params["mode"], "0600");
    assert_eq!(env.params["path"], "/etc/kwin/proxy.env");
    let content = env.params["content"].as_str().expect("content");
    assert!(
        content.contains(&format!(
            "HTTP_PROXY='http://kwin-proxy:{encoded}@proxy.lab:3128'"
        )) || content.contains(&format!(
            "HTTP_PROXY=http://kwin-proxy:{encoded}@proxy.lab:3128"
        )),
        "{content}"
    );
    let dropin = drop_in(&tasks, "cp1/containerd-proxy");
    assert!(
        dropin.contains("EnvironmentFile=/etc/kwin/proxy.env"),
        "{dropin}"
    );
    assert!(
        !dropin.contains(&encoded) && !dropin.contains("kwin-proxy"),
        "{dropin}"
    );
    let (env_vars, _) = systemd_reads("containerd.service", &dropin);
    assert!(
        env_vars.iter().all(|e| !e.contains("kwin-proxy")),
        "{env_vars:?}"
    );

    // What kwin prints and writes: no form of the password.
    let mut all = String::new();
    for args in [
        vec!["validate", "plan.toml"],
        vec!["plan", "plan.toml"],
        vec!["plan", "plan.toml", "--output", "json"],
    ] {
        let out = kwin_testkit::kwin!(".")
            .command()
            .args(&args)
            .current_dir(dir.path())
            .output()
            .expect("kwin");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // `plan` may report tasks it cannot plan on this machine (no systemd here); it ran
        // when it printed its summary.
        if args[0] == "validate" {
            assert!(out.status.success(), "kwin {args:?}: {text}");
        } else {
            assert!(
                text.contains("proxy-credentials") && out.status.code().is_some_and(|c| c <= 1),
                "kwin {args:?}: {text}"
            );
        }
        all.push_str(&text);
    }
    all.push_str(&tree_text(&dir.path().join(".kwin")));
    assert!(
        all.contains("proxy-credentials") && all.contains("/etc/kwin/proxy.env"),
        "the plan does not show the credentials file: {all}"
    );
    for form in [
        password.clone(),
        encoded.clone(),
        format!("kwin-proxy:{password}"),
        format!("kwin-proxy:{encoded}"),
    ] {
        assert!(
            !all.contains(&form),
            "`{form}` shows in kwin's output or logs"
        );
    }
}
