//! `kwin reset`.
use crate::RunArgs;
use std::process::ExitCode;

pub fn reset(run: RunArgs, yes: bool) -> anyhow::Result<ExitCode> {
    let _ = (run, yes);
    anyhow::bail!("not yet")
}
