//! `kwin kubeconfig`, `kwin verify`, `kwin reset`.

use crate::RunArgs;
use std::path::PathBuf;
use std::process::ExitCode;

pub fn kubeconfig(run: RunArgs, out: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    crate::cmd_kubeconfig::kubeconfig(run, out)
}

pub fn verify(run: RunArgs, args: crate::cmd_verify::VerifyArgs) -> anyhow::Result<ExitCode> {
    crate::cmd_verify::verify(run, args)
}

pub fn reset(run: RunArgs, yes: bool) -> anyhow::Result<ExitCode> {
    crate::cmd_reset::reset(run, yes)
}
