//! `kwin modules` and `kwin doc MODULE` through the binary: the list per OS, a module's
//! parameters and examples, the examples as printed validating as a plan, and an unknown
//! module refused like any other usage error, with the closest name.

use kwin_engine::module::Registry;
use kwin_engine::transport::Shell;
use kwin_testkit::kwin;
use std::collections::BTreeSet;

/// The names `kwin modules` lists under `header`, up to the next blank line.
fn section<'a>(text: &'a str, header: &str) -> BTreeSet<&'a str> {
    text.split(header)
        .nth(1)
        .unwrap_or_else(|| panic!("no `{header}` in:\n{text}"))
        .split("\n\n")
        .next()
        .unwrap_or("")
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect()
}

#[test]
fn modules_lists_each_os_modules_one_line_each() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = kwin!(dir.path(), &["modules"]);
    assert_eq!(run.code, 0, "{run}");
    for (header, shell) in [
        ("Linux hosts:", Shell::Posix),
        ("Windows hosts:", Shell::PowerShell),
    ] {
        let want: BTreeSet<&str> = kwin_modules::rows()
            .filter(|(_, r)| r.shells.contains(&shell))
            .map(|(_, r)| r.name)
            .collect();
        assert_eq!(section(&run.stdout, header), want, "{header}\n{run}");
    }
    // One line per module, with its row's doc.
    let sysctl = run
        .stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some("sysctl"))
        .unwrap_or_else(|| panic!("no sysctl line:\n{run}"));
    let row = kwin_modules::row_for("sysctl", Shell::Posix).expect("sysctl row");
    assert!(sysctl.ends_with(row.doc), "{sysctl}");
    assert!(!section(&run.stdout, "Linux hosts:").contains("firewall_rule"));
}

#[test]
fn doc_prints_parameters_and_examples() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = kwin!(dir.path(), &["doc", "kube_wait"]);
    assert_eq!(run.code, 0, "{run}");
    let params = kwin_modules::Builtin
        .params_schema("kube_wait", Shell::Posix)
        .expect("schema");
    let props = params["properties"].as_object().expect("properties");
    assert!(!props.is_empty());
    for (name, p) in props {
        let desc = p["description"].as_str().expect("a description");
        let first = desc
            .split_whitespace()
            .take(4)
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            run.stdout.contains(&format!("  {name}  ")),
            "parameter {name} missing:\n{run}"
        );
        assert!(run.stdout.contains(&first), "{name}: `{first}`:\n{run}");
    }
    assert!(run.stdout.contains("condition  string, required"), "{run}");
    assert!(run.stdout.contains("module = \"kube_wait\""), "{run}");
}

/// Every module's examples, as `kwin doc` prints them, make a plan `kwin validate` accepts.
#[test]
fn printed_examples_validate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut plan = String::from(
        "[[hosts]]\nname = \"cp1\"\naddress = \"192.168.56.10\"\nos = \"linux\"\n\
         role = \"control-plane\"\nuser = \"root\"\npassword_env = \"KWIN_EXAMPLE_PASSWORD\"\n\n\
         [[hosts]]\nname = \"lw1\"\naddress = \"192.168.56.11\"\nos = \"linux\"\n\
         role = \"worker\"\nuser = \"root\"\npassword_env = \"KWIN_EXAMPLE_PASSWORD\"\n\n\
         [[hosts]]\nname = \"ww1\"\naddress = \"192.168.56.21\"\nos = \"windows\"\n\
         role = \"worker\"\nuser = \"Administrator\"\npassword_env = \"KWIN_EXAMPLE_PASSWORD\"\n\n",
    );
    let mut count = 0;
    for name in kwin_modules::Builtin.names() {
        let run = kwin!(dir.path(), &["doc", name]);
        assert_eq!(run.code, 0, "{run}");
        let examples = run
            .stdout
            .split("\nExamples:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("{name}: no examples:\n{run}"));
        let text: String = examples
            .lines()
            .map(|l| l.strip_prefix("  ").unwrap_or(l))
            .collect::<Vec<_>>()
            .join("\n");
        count += text.matches("[[tasks]]").count();
        assert!(
            text.contains(&format!("module = \"{name}\"")),
            "{name}:\n{run}"
        );
        plan.push_str(&text);
        plan.push('\n');
    }
    assert!(count >= kwin_modules::Builtin.names().len());
    std::fs::write(dir.path().join("plan.toml"), &plan).expect("write plan");
    let run = kwin!(dir.path(), &["validate", "plan.toml"]);
    assert_eq!(run.code, 0, "{plan}\n{run}");
    assert!(run.stdout.contains("ok (0 warnings)"), "{run}");
}

/// An unknown module is a usage error: the exit code clap gives a bad argument, the closest
/// module named, nothing on stdout.
#[test]
fn doc_of_an_unknown_module_is_a_usage_error_with_did_you_mean() {
    let dir = tempfile::tempdir().expect("tempdir");
    let usage = kwin!(dir.path(), &["validate", "--no-such-flag"]);
    assert_ne!(usage.code, 0, "{usage}");
    let run = kwin!(dir.path(), &["doc", "line_infile"]);
    assert_eq!(run.code, usage.code, "{run}");
    assert!(run.stdout.is_empty(), "{run}");
    assert!(run.stderr.contains("unknown module `line_infile`"), "{run}");
    assert!(run.stderr.contains("did you mean `line_in_file`"), "{run}");
    let run = kwin!(dir.path(), &["doc"]);
    assert_eq!(run.code, usage.code, "{run}");
}
