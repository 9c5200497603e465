//! Many hosts, few open files allowed: kwin holds files open per host while it runs (the
//! host's connection, its log), so a run on a few hundred hosts needs more than the soft
//! limit most sessions start with (1024). kwin raises its soft limit to the hard one when it
//! starts (`src/drive.rs`); here 40 lab hosts (lab 19) under a soft limit of 64.
#![allow(clippy::print_stderr)]

use kwin_testkit::lab::Lab;
use std::process::Command;

const HOSTS: usize = 40;

kwin_testkit::lab_test! {
#[test]
fn forty_hosts_under_a_soft_limit_of_64_open_files() {
    kwin_testkit::tier::require_command("prlimit", "util-linux");
    let lab = Lab::up("19", HOSTS);
    let mut plan = format!(
        "inventory = \"\"\n\n[settings]\nparallelism = {HOSTS}\n\n"
    );
    for i in 1..=HOSTS {
        plan.push_str(&format!("[[hosts]]\nname = \"h{i}\"\nos = \"linux\"\n\n"));
    }
    plan.push_str(
        "[[tasks]]\nname = \"motd\"\nmodule = \"file\"\nparams = { path = \"/etc/motd\", content = \"many hosts\\n\" }\n",
    );
    let dir = lab.plan_dir(&plan);
    let bin = std::env::var("KWIN_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_kwin").to_string());
    for (run, changed) in [("cold", HOSTS), ("warm", 0)] {
        let out = Command::new("prlimit")
            .args(["--nofile=64:4096", "--"])
            .arg(&bin)
            .args(["apply", "plan.toml", "--output", "json"])
            .current_dir(dir.path())
            .output()
            .expect("run kwin under prlimit");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let sum = kwin_testkit::kwin::summary(&stdout);
        assert_eq!(
            (
                out.status.code(),
                sum["hosts_failed"].as_u64(),
                sum["changed"].as_u64()
            ),
            (Some(0), Some(0), Some(changed as u64)),
            "{run}:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
}
