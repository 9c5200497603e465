//! Plan variables from the command line, through the binary: `--var NAME=VALUE` on every
//! command that reads a plan, over `KWIN_VAR_<NAME>`, over the declared default; a variable
//! without a value reported at the line that uses it; a value of the wrong type naming where
//! it came from; a `--var` the plan does not declare naming the ones it does.

use kwin_testkit::kwin;
use std::path::Path;

/// Two variables: `addr` with a default, `port` without; `port` used on line 11.
const PLAN: &str = r#"[variables.addr]
type = "string"
default = "192.0.2.10"

[variables.port]
type = "integer"

[[hosts]]
name = "h1"
address = "{{ var.addr }}"
port = "{{ var.port }}"
os = "linux"

[[tasks]]
name = "motd"
module = "file"
params = { path = "/tmp/motd", content = "{{ var.addr }}\n" }
"#;

fn plan_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("plan.toml"), PLAN).expect("write");
    dir
}

/// `kwin ARGS` in `dir` with no `KWIN_VAR_*` of the test's own environment, plus `env`.
fn run(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> kwin_testkit::kwin::Run {
    let mut k = kwin!(dir).args(args);
    for (key, _) in std::env::vars() {
        if key.starts_with("KWIN_VAR_") {
            k = k.env_remove(key);
        }
    }
    for (key, value) in env {
        k = k.env(key, value);
    }
    k.run()
}

#[test]
fn a_missing_variable_is_reported_at_the_line_that_uses_it() {
    let dir = plan_dir();
    let r = run(dir.path(), &["validate", "plan.toml"], &[]);
    assert_eq!(r.code, 1, "{r}");
    assert!(
        r.out()
            .contains("plan.toml:11:8: error[variable-missing]: variable `port` has no value"),
        "{r}"
    );
    assert!(r.out().contains("--var port=VALUE"), "{r}");
    // given, the same plan is valid, for every command that only reads it
    for cmd in ["validate", "graph"] {
        let r = run(dir.path(), &[cmd, "plan.toml", "--var", "port=22"], &[]);
        assert_eq!(r.code, 0, "{cmd}: {r}");
    }
}

#[test]
fn var_wins_over_the_environment_which_wins_over_the_default() {
    let dir = plan_dir();
    let d = dir.path();
    // --var beats KWIN_VAR_: the environment's bad value is never read ...
    let r = run(
        d,
        &["validate", "plan.toml", "--var", "port=22"],
        &[("KWIN_VAR_port", "twenty-two")],
    );
    assert_eq!(r.code, 0, "{r}");
    // ... and a bad --var is the one reported, though the environment's is good.
    let r = run(
        d,
        &["validate", "plan.toml", "--var", "port=twenty-two"],
        &[("KWIN_VAR_port", "22")],
    );
    assert_eq!(r.code, 1, "{r}");
    assert!(
        r.out().contains("but --var port=… gives \"twenty-two\""),
        "{r}"
    );
    // KWIN_VAR_ beats the default: a bad default is not read when the environment gives one
    let r = run(
        d,
        &["validate", "plan.toml", "--var", "port=22"],
        &[("KWIN_VAR_addr", "not an address!")],
    );
    assert_eq!(
        r.code, 1,
        "the environment's address is the one checked: {r}"
    );
    assert!(r.out().contains("error[bad-address]"), "{r}");
    let r = run(
        d,
        &[
            "validate",
            "plan.toml",
            "--var",
            "port=22",
            "--var",
            "addr=192.0.2.11",
        ],
        &[("KWIN_VAR_addr", "not an address!")],
    );
    assert_eq!(r.code, 0, "--var over the environment: {r}");
    // of two --var for one name, the last one
    let r = run(
        d,
        &[
            "validate",
            "plan.toml",
            "--var",
            "port=x",
            "--var",
            "port=22",
        ],
        &[],
    );
    assert_eq!(r.code, 0, "{r}");
}

#[test]
fn a_value_of_the_wrong_type_names_where_it_came_from() {
    let dir = plan_dir();
    let r = run(
        dir.path(),
        &["validate", "plan.toml"],
        &[("KWIN_VAR_port", "22x")],
    );
    assert_eq!(r.code, 1, "{r}");
    assert!(
        r.out().contains(
            "error[variable-type]: variable `port` is an integer, but KWIN_VAR_port gives \"22x\""
        ),
        "{r}"
    );
}

#[test]
fn an_undeclared_var_names_the_declared_ones() {
    let dir = plan_dir();
    let r = run(
        dir.path(),
        &[
            "validate",
            "plan.toml",
            "--var",
            "prot=22",
            "--var",
            "port=22",
        ],
        &[],
    );
    assert_eq!(r.code, 1, "{r}");
    let out = r.out();
    assert!(
        out.contains(
            "error[variable-undeclared]: --var prot: the plan declares no variable `prot`"
        ),
        "{r}"
    );
    assert!(out.contains("did you mean `port`?"), "{r}");
    assert!(out.contains("declared: addr, port"), "{r}");
}

/// `--var` is accepted by every command that reads a plan, and checked before any host is
/// contacted (here: an undeclared one, so nothing runs).
#[test]
fn every_command_that_reads_a_plan_takes_var() {
    let dir = plan_dir();
    for cmd in [
        "validate",
        "graph",
        "plan",
        "apply",
        "verify",
        "reset",
        "kubeconfig",
        "checksums",
    ] {
        let mut args = vec![cmd, "plan.toml", "--var", "nope=1", "--var", "port=22"];
        if cmd == "reset" {
            args.push("--yes");
        }
        let r = run(dir.path(), &args, &[]);
        assert_ne!(r.code, 0, "{cmd}: {r}");
        assert!(
            r.out().contains("the plan declares no variable `nope`"),
            "{cmd}: {r}"
        );
    }
    // and a malformed one is a usage error
    let r = run(dir.path(), &["validate", "plan.toml", "--var", "port"], &[]);
    assert_ne!(r.code, 0, "{r}");
    assert!(r.stderr.contains("is not NAME=VALUE"), "{r}");
}
