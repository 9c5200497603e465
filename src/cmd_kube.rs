//! `kwin kubeconfig`, `kwin verify`, `kwin reset`.

use crate::RunArgs;
use std::path::PathBuf;
use std::process::ExitCode;

pub fn kubeconfig(run: RunArgs, out: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    crate::cmd_kubeconfig::kubeconfig(run, out)
}

pub fn verify(run: RunArgs) -> anyhow::Result<ExitCode> {
    let _ = run;
    anyhow::bail!("`kwin verify` is not available in this build")
}

pub fn reset(run: RunArgs, yes: bool) -> anyhow::Result<ExitCode> {
    let _ = (run, yes);
    anyhow::bail!("`kwin reset` is not available in this build")
}
