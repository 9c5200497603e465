//! Helpers for tests, never in the release library: compiled for the engine's own unit
//! tests and, through the `test-support` feature, for other crates' tests (`kwin-engine =
//! { features = ["test-support"] }` in their dev-dependencies). Together with
//! `transport::mock` (the strict mock transport).

use crate::exec::batch::{Batch, Item};
use crate::fact::FactQuery;
use crate::shell::{Output, Shell};
use std::io::Write;
use std::process::{Command, Stdio};

/// Run `script` with `/bin/sh -s`, the script on stdin as kwin sends it to a host.
pub fn run_sh(script: &str) -> Output {
    run_in("/bin/sh", script)
}

/// Run `script` with `shell -s` (a POSIX shell: `/bin/sh`, `/bin/dash`, ...), the script on
/// stdin.
pub fn run_in(shell: &str, script: &str) -> Output {
    let mut child = Command::new(shell)
        .arg("-s")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{shell}: {e}"));
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(script.as_bytes())
            .unwrap_or_else(|e| panic!("{shell}: writing the script: {e}"));
    }
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("{shell}: {e}"));
    Output {
        stdout: out.stdout,
        stderr: out.stderr,
        exit: out.status.code().unwrap_or(-1),
    }
}

/// Every PowerShell script shape the executor itself generates (a batch of two steps with
/// their convergence re-probe), for syntax checks by the test suite.
pub fn powershell_batch_sample() -> String {
    let q = |k: &str| FactQuery {
        key: k.into(),
        command: "ConvertTo-Json -Compress -InputObject @{ a = 1 }".into(),
        path: None,
    };
    let items = vec![
        Item {
            steps: vec!["Write-Output 'one'".into()],
            verify: vec![q("a")],
            verify_now: true,
            sensitive: false,
        },
        Item {
            steps: vec!["$x = 1\nif ($x) { 'two' }".into(), "'three'".into()],
            verify: vec![q("b")],
            verify_now: true,
            sensitive: false,
        },
    ];
    Batch::new(Shell::PowerShell, items, vec![q("c")]).script
}
