//! `kwin plan`, `kwin apply`, `kwin apply --check`, and the run of `kwin reset` and
//! `kwin verify`: the pipeline's run phases ([`pipeline::run`]; `pipeline/mod.rs` lists them
//! and which command runs which), rendered as one stage, then the upgrade gate's
//! diagnostics. The gate and verify are `kwin-modules`' ([`Cluster`]).

use crate::args::{Recipes, RunArgs, VerifyArgs};
use crate::drive::{self, Render};
use crate::output::Output;
use kwin_engine::pipeline::{self, ChecksumMode, Command, Outcome, Prepared};
use kwin_modules::kube::cluster::Cluster;

pub fn plan(run: &RunArgs, detailed_exitcode: bool, out: &Output) -> anyhow::Result<Outcome> {
    let req = run.request(Recipes::Build, ChecksumMode::Fetch, false);
    let Some(p) = drive::ready(out, drive::prepare(&req)?) else {
        return Ok(Outcome::Failed);
    };
    let command = Command::Plan { detailed_exitcode };
    run_prepared(out, run, &p, command, "plan", &VerifyArgs::default())
}

pub fn apply(run: &RunArgs, check: bool, no_verify: bool, out: &Output) -> anyhow::Result<Outcome> {
    let (command, what) = if check {
        (
            Command::Plan {
                detailed_exitcode: false,
            },
            "plan",
        )
    } else {
        (Command::Apply, "apply")
    };
    let req = run.request(Recipes::Build, ChecksumMode::Fetch, no_verify);
    let Some(p) = drive::ready(out, drive::prepare(&req)?) else {
        return Ok(Outcome::Failed);
    };
    run_prepared(out, run, &p, command, what, &VerifyArgs::default())
}

/// The run phases of `command` on a prepared plan, rendered as the run `what`; what the
/// upgrade gate said is printed after it.
pub fn run_prepared(
    out: &Output,
    run: &RunArgs,
    p: &Prepared,
    command: Command,
    what: &'static str,
    verify: &VerifyArgs,
) -> anyhow::Result<Outcome> {
    let cluster = Cluster {
        verify: verify.options(),
    };
    let (outcome, gate) = drive::stage(out, Render::Run(command.mode(), what), |ctl| async {
        let ran = pipeline::run(p, &run.flags(), ctl, &cluster, command).await?;
        Ok(((ran.outcome, ran.gate), ran.notes))
    })?;
    if let Some(d) = gate {
        out.diagnostics(&d);
    }
    Ok(outcome)
}
