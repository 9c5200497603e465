//! `kwin plan`, `kwin apply`, `kwin apply --check` (and the run of `kwin reset`).
//!
//! Prepare (missing checksums fetched), then the run: the lock (apply), a transport per host,
//! the executor. After a clean apply of a plan whose `cluster.verify` is on (the default) and
//! without `--no-verify`: `kwin verify`.

use crate::args::{request, Recipes, RunArgs, VerifyArgs};
use crate::drive::{self, Render};
use crate::output::Output;
use kwin_engine::event::Mode;
use kwin_engine::pipeline::{self, ChecksumMode, Outcome, Prepared, Session};

pub fn plan(run: &RunArgs, detailed_exitcode: bool, out: &Output) -> anyhow::Result<Outcome> {
    let req = request(&run.plan, Recipes::Build, ChecksumMode::Fetch, false);
    let Some(p) = drive::ready(out, drive::prepare(&req)?) else {
        return Ok(Outcome::Failed);
    };
    let outcome = run_prepared(out, run, &p, Mode::Plan, detailed_exitcode, "plan")?;
    Ok(outcome)
}

pub fn apply(run: &RunArgs, check: bool, no_verify: bool, out: &Output) -> anyhow::Result<Outcome> {
    let (mode, what) = if check {
        (Mode::Plan, "plan")
    } else {
        (Mode::Apply, "apply")
    };
    let req = request(&run.plan, Recipes::Build, ChecksumMode::Fetch, no_verify);
    let Some(p) = drive::ready(out, drive::prepare(&req)?) else {
        return Ok(Outcome::Failed);
    };
    let outcome = run_prepared(out, run, &p, mode, false, what)?;
    let verify = p.eff.cluster.as_ref().is_some_and(|c| c.verify);
    if mode == Mode::Apply && outcome == Outcome::Success && verify {
        return crate::cmd_verify::verify_prepared(out, run, &p, &VerifyArgs::default());
    }
    Ok(outcome)
}

/// Phases 6–8 of a prepared plan, rendered as the run `what`.
pub fn run_prepared(
    out: &Output,
    run: &RunArgs,
    p: &Prepared,
    mode: Mode,
    detailed_exitcode: bool,
    what: &'static str,
) -> anyhow::Result<Outcome> {
    drive::stage(out, Render::Run(mode, what), |ctl| async move {
        let mut s = Session::open(p, &run.flags(), mode, ctl)?;
        let summary = pipeline::run(&mut s, p).await?;
        Ok((Outcome::of(&summary, detailed_exitcode), s.notes()))
    })
}
