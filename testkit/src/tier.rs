//! Test tiers.
//!
//! Tier 1 (`cargo test --workspace`) needs nothing but this machine: pure tests, the local
//! shell, the strict mock transport. Tier 2, the lab, needs root (network and mount
//! namespaces, private sshd, busybox, `unshare`) and the lab's peers: the WinRM stand-in's
//! Python environment and the Kubernetes API tier (`lab/apiserver/build.sh`). A lab test is
//! written inside [`lab_test!`]: it is `#[ignore = "lab: ..."]`, so tier 1 lists it as
//! ignored instead of passing it, and `cargo test --workspace -- --include-ignored`, as root,
//! runs every tier. A lab test that runs without root, or without a peer it needs, fails: it
//! never passes without having run.
//!
//! The machine-wide lab lock (`/tmp/kwin-e2e.lock`) is taken by whoever runs the tests
//! (`flock /tmp/kwin-e2e.lock cargo test ...`), never here: a second `flock` from inside
//! the tests would wait for the first forever.

/// The reason every lab test is ignored with (what `cargo test` shows for it).
pub const LAB: &str =
    "lab: needs root and the lab peers (run as root: cargo test --workspace -- --include-ignored)";

/// The start of every lab test: fail unless this process is root.
pub fn enter_lab() {
    lab_check(crate::host::is_root());
}

fn lab_check(root: bool) {
    assert!(
        root,
        "this lab test needs root (network and mount namespaces, private sshd): run \
         `cargo test --workspace -- --include-ignored` as root; without root, \
         `cargo test --workspace` lists it as ignored"
    );
}

/// Fail unless `program` is on `PATH`: a lab peer this test needs.
pub fn require_command(program: &str, install: &str) {
    assert!(
        crate::host::has_command(program),
        "this lab test needs `{program}` ({install})"
    );
}

/// Lab tests: each function inside gets `#[ignore = "lab: ..."]` and starts with
/// [`enter_lab`]. Attributes (`#[test]`, `#[tokio::test(...)]`, docs) pass through.
///
/// ```ignore
/// kwin_testkit::lab_test! {
///     /// What it proves.
///     #[test]
///     fn apply_converges() { /* ... */ }
///
///     #[tokio::test(flavor = "multi_thread")]
///     async fn reboot_mid_plan() { /* ... */ }
/// }
/// ```
#[macro_export]
macro_rules! lab_test {
    () => {};
    ($(#[$m:meta])* async fn $name:ident() $(-> $ret:ty)? $body:block $($rest:tt)*) => {
        $(#[$m])*
        #[ignore = "lab: needs root and the lab peers (run as root: cargo test --workspace -- --include-ignored)"]
        async fn $name() $(-> $ret)? {
            $crate::tier::enter_lab();
            $body
        }
        $crate::lab_test! { $($rest)* }
    };
    ($(#[$m:meta])* fn $name:ident() $(-> $ret:ty)? $body:block $($rest:tt)*) => {
        $(#[$m])*
        #[ignore = "lab: needs root and the lab peers (run as root: cargo test --workspace -- --include-ignored)"]
        fn $name() $(-> $ret)? {
            $crate::tier::enter_lab();
            $body
        }
        $crate::lab_test! { $($rest)* }
    };
}

#[cfg(test)]
mod tests {
    /// The attribute the macro writes is the one [`super::LAB`] documents.
    #[test]
    fn the_macro_says_what_lab_says() {
        let src = include_str!("tier.rs");
        let attr = format!("#[ignore = \"{}\"]", super::LAB);
        assert_eq!(src.matches(attr.as_str()).count(), 2, "{attr}");
    }

    /// README's test command is the one `.ci/run` runs, and the one the lab tests' ignore
    /// reason names: every tier, so CI cannot leave the lab out.
    #[test]
    fn readme_ci_and_the_ignore_reason_give_one_test_command() {
        let root = crate::host::workspace();
        let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
        let tests = readme
            .split("\n## Tests\n")
            .nth(1)
            .expect("README has a `## Tests` section");
        let readme_cmd = tests
            .split("```sh\n")
            .nth(1)
            .and_then(|b| b.split("```").next())
            .map(str::trim)
            .expect("a sh block in README's Tests");
        assert_eq!(readme_cmd, "cargo test --workspace -- --include-ignored");
        let ci = std::fs::read_to_string(root.join(".ci/run")).expect(".ci/run");
        let ci_cmds: Vec<&str> = ci
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("cargo test"))
            .collect();
        assert_eq!(
            ci_cmds,
            [readme_cmd],
            ".ci/run runs README's test command, once"
        );
        assert!(super::LAB.contains(readme_cmd), "{}", super::LAB);
    }

    /// Without root, a lab test fails (it does not pass without running).
    #[test]
    fn a_lab_test_without_root_fails() {
        assert!(std::panic::catch_unwind(|| super::lab_check(false)).is_err());
        super::lab_check(true);
    }
}
