//! A login the host refuses after authentication: the account's shell is `nologin`, so sshd
//! accepts the key and the shell prints "This account is currently not available." instead
//! of running kwin's script. kwin names that cause (the host's own words, the host, the
//! host log) rather than a failure to parse fact output.
//!
//! Lab 2 (`KWIN_LAB_ID=2`); needs root (lab hosts), like every lab test.

use kwin_testkit::{kwin, lab::Lab};

const LAB_ID: &str = "2";

kwin_testkit::lab_test! {
#[test]
fn a_refused_login_is_named_with_the_hosts_words_and_the_log() {
    let lab = Lab::up(LAB_ID, 1);
    // The lab's kwuser keeps its key; only its login shell changes.
    lab.ssh("h1", "usermod -s /usr/sbin/nologin kwuser");

    let plan = r#"inventory = "x"

[settings]
retries = 0

[[hosts]]
name = "h1"
os = "linux"
user = "kwuser"

[[tasks]]
name = "motd"
module = "file"
on = { os = "linux" }
params = { path = "/etc/kwin-refused", content = "x\n" }
"#;
    let dir = lab.plan_dir(plan);
    let r = kwin!(dir.path(), &["apply", "plan.toml", "--output", "json"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let host = r.host("h1");
    let error = host["error"].as_str().unwrap_or_default().to_string();
    assert!(
        error.contains("This account is currently not available."),
        "the host's words are not in the error: {error}"
    );
    assert!(
        !error.contains("cannot parse fact output"),
        "the refusal is reported as a parse failure: {error}"
    );
    let log = dir
        .path()
        .join(".kwin/logs")
        .join(r.run_id())
        .join("h1.log");
    assert!(
        error.contains(&log.display().to_string()) || error.contains(".kwin/logs/"),
        "the error does not name the host log ({}): {error}",
        log.display()
    );
    assert!(log.exists(), "no host log at {}", log.display());
    eprintln!("error: {error}");
}
}
