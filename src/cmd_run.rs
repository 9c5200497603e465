//! `kwin plan` and `kwin apply`.

use crate::RunArgs;
use std::process::ExitCode;

pub fn plan(run: RunArgs, detailed_exitcode: bool) -> anyhow::Result<ExitCode> {
    let _ = (run, detailed_exitcode);
    anyhow::bail!("`kwin plan` is not available in this build")
}

pub fn apply(run: RunArgs, check: bool, no_verify: bool) -> anyhow::Result<ExitCode> {
    let _ = (run, check, no_verify);
    anyhow::bail!("`kwin apply` is not available in this build")
}
