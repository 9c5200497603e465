//! Example plans that name files of kwin's repository (`../target/lab/hosts.toml`,
//! `../modules/tests/…`) say so at their top, and a copy of one outside the checkout fails
//! validation with a hint naming the cause, at every such path.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every example plan (examples/ and below) with the `"../…"` paths it names.
fn examples_pointing_outside() -> Vec<(PathBuf, Vec<String>)> {
    let mut out = Vec::new();
    let mut dirs = vec![root().join("examples")];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).expect("examples").flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "toml") {
                let text = std::fs::read_to_string(&p).expect("read");
                let paths: Vec<String> = text
                    .split('"')
                    .skip(1)
                    .step_by(2)
                    .filter(|s| s.starts_with("../"))
                    .map(str::to_string)
                    .collect();
                if !paths.is_empty() {
                    out.push((p, paths));
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn examples_that_point_into_the_repository_say_so_at_the_top() {
    let found = examples_pointing_outside();
    assert!(found.len() >= 3, "{found:?}");
    for (p, paths) in &found {
        let text = std::fs::read_to_string(p).expect("read");
        let top: String = text.lines().take(5).collect::<Vec<_>>().join("\n");
        assert!(
            top.contains("Runs from kwin's repository only"),
            "{}: names {paths:?} but its first lines do not say it runs from the repository only:\n{top}",
            p.display()
        );
    }
}

fn validate_copy(plan: &Path) -> (i32, String) {
    let dir = tempfile::tempdir().expect("tmp");
    let copy = dir.path().join(plan.file_name().expect("name"));
    std::fs::copy(plan, &copy).expect("copy");
    let r = kwin_testkit::kwin!(dir.path())
        .args(["validate".as_ref(), copy.as_os_str()])
        .run();
    (r.code, r.out())
}

#[test]
fn a_copy_elsewhere_fails_with_a_hint_at_each_path_into_the_checkout() {
    for (plan, paths) in examples_pointing_outside() {
        let (code, out) = validate_copy(&plan);
        assert_eq!(code, 1, "{}: {out}", plan.display());
        for p in &paths {
            let hint = format!("hint: `{p}` points into a kwin checkout");
            assert!(
                out.contains(&hint),
                "{}: no hint for {p}:\n{out}",
                plan.display()
            );
        }
    }
}

/// A path leaving the plan's directory for somewhere that is not a kwin checkout gets the
/// general hint; a missing file next to the plan keeps the usual one.
#[test]
fn other_missing_paths_get_the_general_hints() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(
        dir.path().join("plan.toml"),
        "inventory = \"../../elsewhere/hosts.toml\"\n\n[cni]\nplugin = \"flannel\"\nmanifest_file = \"flannel.yml\"\n\n[[hosts]]\nname = \"h1\"\naddress = \"192.0.2.1\"\nos = \"linux\"\n",
    )
    .expect("write");
    let r = kwin_testkit::kwin!(dir.path(), ["validate", "plan.toml"]);
    assert_eq!(r.code, 1, "{r}");
    let out = r.out();
    assert!(
        out.contains("hint: `../../elsewhere/hosts.toml` leaves the plan's directory"),
        "{r}"
    );
    assert!(
        out.contains("hint: relative paths resolve against the plan's directory"),
        "{r}"
    );
    assert!(!out.contains("kwin checkout"), "{r}");
}
