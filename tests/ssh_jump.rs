//! Reaching a host through a jump host (OpenSSH's `ProxyJump`), against real sshd hosts.
//!
//! Two lab hosts: h2 refuses the controller (an iptables REJECT in h2's namespace for the
//! controller's address) and is reachable only from h1, over a veth between their two
//! namespaces (h1 routes h2's address over it). kwin reaches h2:
//! - through the plan host h1 (`proxy_jump = "h1"`, h1's pinned host key), converging a file;
//!   h1 refusing kwin's key, or unable to reach the host behind it, is named as the jump
//!   host on the way (by its plan name);
//! - through an address (`proxy_jump = "root@<h1>"`): h1's key unknown is refused with its
//!   fingerprint, recorded with `--accept-new-host-keys`; a pinned key of h1 that differs is
//!   refused with both fingerprints;
//! - through `ProxyJump` in `~/.ssh/config` (kwin reads `$HOME/.ssh`, which the test sets);
//!   a chain of two jumps there is refused, saying so.
//!
//! Lab 7 (`KWIN_LAB_ID=7`); needs root (lab hosts), like every lab test.

use kwin_testkit::{kwin, kwin::Run, lab::Lab};
use std::path::Path;
use std::process::Command;

const LAB_ID: &str = "7";
/// Lab 7's addresses: 10.<213+7>.0.0/16; host i on the /30 at 4*i.
const H1: &str = "10.220.0.6";
const H2: &str = "10.220.0.10";
/// The controller's side of h2's veth: the address h2 refuses.
const H2_PEER: &str = "10.220.0.9";

fn sh(cmd: &str) {
    let out = Command::new("sh")
        .args(["-c", cmd])
        .output()
        .expect("sh runs");
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// kwin with `$HOME` at `home` (its OpenSSH files) and no ssh-agent.
fn kwin(dir: &Path, home: &Path, args: &[&str]) -> Run {
    kwin!(dir)
        .args(args)
        .env("HOME", home)
        .env_remove("SSH_AUTH_SOCK")
        .run()
}

fn host_error(r: &Run, host: &str) -> String {
    r.host(host)["error"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The inventory's pinned host keys of h1 and h2.
fn host_keys(inventory: &Path) -> (String, String) {
    let text = std::fs::read_to_string(inventory).expect("inventory");
    let v: toml::Value = toml::from_str(&text).expect("inventory is TOML");
    let key = |name: &str| {
        v["hosts"]
            .as_array()
            .and_then(|hs| hs.iter().find(|h| h["name"].as_str() == Some(name)))
            .and_then(|h| h["host_key"].as_str())
            .unwrap_or_else(|| panic!("no host_key for {name} in {}", inventory.display()))
            .to_string()
    };
    (key("h1"), key("h2"))
}

fn plan(h2_extra: &str, h1_extra: Option<&str>, content: &str) -> String {
    let h1 = match h1_extra {
        Some(extra) => format!("[[hosts]]\nname = \"h1\"\nos = \"linux\"\n{extra}\n\n"),
        None => String::new(),
    };
    format!(
        r#"inventory = "x"

[settings]
retries = 0

{h1}[[hosts]]
name = "h2"
os = "linux"
connect_timeout = 5
{h2_extra}

[[tasks]]
name = "behind"
module = "file"
on = {{ hosts = ["h2"] }}
params = {{ path = "/etc/kwin-behind-jump", content = "{content}\n" }}
"#
    )
}

kwin_testkit::lab_test! {
#[test]
fn a_host_behind_a_jump_host() {
    let lab = Lab::up(LAB_ID, 2);
    let ns = |h: &str| format!("kwin{LAB_ID}-{h}");
    // h1 <-> h2 directly; h1 routes h2's address there; h2 refuses the controller.
    sh(&format!(
        "set -e\n\
         ip link add kwj{LAB_ID}a type veth peer name kwj{LAB_ID}b\n\
         ip link set kwj{LAB_ID}a netns {n1}\n\
         ip link set kwj{LAB_ID}b netns {n2}\n\
         ip -n {n1} addr add 10.220.255.1/30 dev kwj{LAB_ID}a\n\
         ip -n {n2} addr add 10.220.255.2/30 dev kwj{LAB_ID}b\n\
         ip -n {n1} link set kwj{LAB_ID}a up\n\
         ip -n {n2} link set kwj{LAB_ID}b up\n\
         ip -n {n1} route add {H2}/32 via 10.220.255.2\n\
         ip netns exec {n2} iptables -w -I INPUT -p tcp --dport 22 -s {H2_PEER} -j REJECT --reject-with tcp-reset\n",
        n1 = ns("h1"),
        n2 = ns("h2"),
    ));
    let (h1_key, h2_key) = host_keys(&lab.inventory);
    let lab_dir = lab.inventory.parent().expect("lab dir").to_path_buf();
    let empty_home = tempfile::tempdir().expect("tmp");

    // Direct: refused (so every success below went through h1).
    let dir = lab.plan_dir(&plan("", None, "direct"));
    let r = kwin(
        dir.path(),
        empty_home.path(),
        &["apply", "plan.toml", "--output", "json"],
    );
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let e = host_error(&r, "h2");
    assert!(e.contains("connection refused"), "{e}");

    // Through the plan host h1 (its pinned key): converges, then changes nothing.
    let dir = lab.plan_dir(&plan("proxy_jump = \"h1\"", Some(""), "through h1"));
    let r = kwin(
        dir.path(),
        empty_home.path(),
        &["apply", "plan.toml", "--output", "json"],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.task("h2", "behind")["status"], "changed", "{}", r.stdout);
    let again = kwin(
        dir.path(),
        empty_home.path(),
        &["apply", "plan.toml", "--output", "json"],
    );
    assert_eq!(again.code, 0, "{}\n{}", again.stdout, again.stderr);
    assert_eq!(
        again.task("h2", "behind")["status"],
        "ok",
        "{}",
        again.stdout
    );
    let seen = Command::new("ssh")
        .arg("-F")
        .arg(&lab.ssh_config)
        .args(["-J", "h1", "h2", "cat /etc/kwin-behind-jump"])
        .output()
        .expect("ssh -J");
    assert_eq!(String::from_utf8_lossy(&seen.stdout), "through h1\n");

    // h1 pinned to another key: h2 is refused too, naming the jump host and both keys.
    let dir = lab.plan_dir(&plan(
            "proxy_jump = \"h1\"",
            Some(&format!("host_key = \"{h2_key}\"")),
            "never",
        ),
    );
    let r = kwin(
        dir.path(),
        empty_home.path(),
        &["apply", "plan.toml", "--output", "json"],
    );
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let e = host_error(&r, "h2");
    assert!(
        e.contains("host key mismatch") && e.contains("jump host") && e.contains(&h1_key),
        "{e}"
    );

    // h1 refuses kwin's login (a key it does not know): h2's error says it was the jump
    // host h1, by name, on the way to h2.
    let stranger = empty_home.path().join("stranger");
    kwin_testkit::sshd::keygen(&stranger, "");
    let dir = lab.plan_dir(&plan(
        "proxy_jump = \"h1\"",
        Some(&format!("private_key = \"{}\"", stranger.display())),
        "never",
    ));
    let r = kwin(
        dir.path(),
        empty_home.path(),
        &["apply", "plan.toml", "--output", "json"],
    );
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let e = host_error(&r, "h2");
    assert!(
        e.contains("authentication failed")
            && e.contains(&format!("jump host h1 ({H1}:22) on the way to h2 ({H2}:22)")),
        "{e}"
    );

    // h1 is reached, but cannot reach the host behind it (an address it has no route to):
    // the jump host is named as the one that could not go on.
    let dir = lab.plan_dir(&plan(
        "proxy_jump = \"h1\"\naddress = \"10.220.254.9\"",
        Some(""),
        "never",
    ));
    let r = kwin(
        dir.path(),
        empty_home.path(),
        &["apply", "plan.toml", "--output", "json"],
    );
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let e = host_error(&r, "h2");
    assert!(
        e.contains(&format!(
            "jump host h1 ({H1}:22) on the way to h2 (10.220.254.9:22) could not open a connection to it"
        )),
        "{e}"
    );

    // Through an address: h1's key is in no known_hosts, so it is refused with its
    // fingerprint; with --accept-new-host-keys it is recorded and h2 converges.
    let dir = lab.plan_dir(&plan(
            &format!("proxy_jump = \"root@{H1}:22\""),
            None,
            "by address",
        ),
    );
    let r = kwin(
        dir.path(),
        empty_home.path(),
        &["apply", "plan.toml", "--output", "json"],
    );
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let e = host_error(&r, "h2");
    assert!(
        e.contains("is unknown") && e.contains("jump host") && e.contains(&h1_key),
        "{e}"
    );
    let r = kwin(
        dir.path(),
        empty_home.path(),
        &[
            "apply",
            "plan.toml",
            "--output",
            "json",
            "--accept-new-host-keys",
        ],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.task("h2", "behind")["status"], "changed", "{}", r.stdout);
    let known = std::fs::read_to_string(dir.path().join(".kwin/known_hosts")).unwrap_or_default();
    assert!(known.starts_with(&format!("{H1} ssh-ed25519 ")), "{known}");

    // ProxyJump from ~/.ssh/config (the plan's address is the alias).
    let home = tempfile::tempdir().expect("tmp");
    let ssh = home.path().join(".ssh");
    std::fs::create_dir_all(&ssh).expect("mkdir");
    std::fs::copy(lab_dir.join("known_hosts"), ssh.join("known_hosts")).expect("known_hosts");
    let config = |jumpbox_extra: &str| {
        format!(
            "Host h2-private\n  HostName {H2}\n  ProxyJump jumpbox\n\
             Host jumpbox\n  HostName {H1}\n  User root\n  IdentityFile {}\n{jumpbox_extra}",
            lab_dir.join("id_ed25519").display()
        )
    };
    std::fs::write(ssh.join("config"), config("")).expect("config");
    let dir = lab.plan_dir(&plan("address = \"h2-private\"", None, "from ssh config"),
    );
    let r = kwin(
        dir.path(),
        home.path(),
        &["apply", "plan.toml", "--output", "json"],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.task("h2", "behind")["status"], "changed", "{}", r.stdout);

    // A second jump (the jump host's own ProxyJump) is refused, saying why.
    std::fs::write(ssh.join("config"), config("  ProxyJump h1\n")).expect("config");
    let r = kwin(
        dir.path(),
        home.path(),
        &["apply", "plan.toml", "--output", "json"],
    );
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let e = host_error(&r, "h2");
    assert!(e.contains("one jump host"), "{e}");
}
}
