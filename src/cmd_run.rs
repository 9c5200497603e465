//! `kwin plan`, `kwin apply`, `kwin apply --check` (and the run of `kwin reset`).
//!
//! Prepare (missing checksums fetched), then the run: the upgrade gate (plan, apply, with a
//! `[cluster]`: the cluster's versions read on the first control plane and checked against the
//! version skew policy, `kwin_modules::kube::upgrade::gate`; a refusal stops the run before any
//! host changes), the lock (apply), a transport per host, the executor. After a clean apply of a plan whose `cluster.verify` is on (the default) and
//! without `--no-verify`: `kwin verify`.

use crate::args::{Recipes, RunArgs, VerifyArgs};
use crate::drive::{self, Render};
use crate::output::Output;
use kwin_engine::diag::Diagnostics;
use kwin_engine::event::Mode;
use kwin_engine::pipeline::{self, ChecksumMode, Outcome, Prepared, Session};
use kwin_modules::kube::upgrade::gate::{self, GateError, GateSpec};
use kwin_modules::kube::upgrade::skew::Verdict;

pub fn plan(run: &RunArgs, detailed_exitcode: bool, out: &Output) -> anyhow::Result<Outcome> {
    let req = run.request(Recipes::Build, ChecksumMode::Fetch, false);
    let Some(p) = drive::ready(out, drive::prepare(&req)?) else {
        return Ok(Outcome::Failed);
    };
    let outcome = run_prepared(out, run, &p, Mode::Plan, detailed_exitcode, "plan", true)?;
    Ok(outcome)
}

pub fn apply(run: &RunArgs, check: bool, no_verify: bool, out: &Output) -> anyhow::Result<Outcome> {
    let (mode, what) = if check {
        (Mode::Plan, "plan")
    } else {
        (Mode::Apply, "apply")
    };
    let req = run.request(Recipes::Build, ChecksumMode::Fetch, no_verify);
    let Some(p) = drive::ready(out, drive::prepare(&req)?) else {
        return Ok(Outcome::Failed);
    };
    let outcome = run_prepared(out, run, &p, mode, false, what, true)?;
    let verify = p.eff.cluster.as_ref().is_some_and(|c| c.verify);
    if mode == Mode::Apply && outcome == Outcome::Success && verify {
        return crate::cmd_verify::verify_prepared(out, run, &p, &VerifyArgs::default());
    }
    Ok(outcome)
}

/// Phases 6–8 of a prepared plan, rendered as the run `what`; with `gate` (plan, apply) the
/// upgrade gate first.
pub fn run_prepared(
    out: &Output,
    run: &RunArgs,
    p: &Prepared,
    mode: Mode,
    detailed_exitcode: bool,
    what: &'static str,
    gate: bool,
) -> anyhow::Result<Outcome> {
    let (outcome, refused) = drive::stage(out, Render::Run(mode, what), |ctl| async move {
        let mut s = Session::open(p, &run.flags(), mode, ctl)?;
        let mut warned = None;
        if gate {
            match upgrade_gate(&mut s, p).await {
                Gate::Go => {}
                Gate::Warn(w) => warned = Some(w),
                Gate::Stop(outcome, d) => return Ok(((outcome, d), s.notes())),
            }
        }
        let summary = pipeline::run(&mut s, p).await?;
        Ok((
            (Outcome::of(&summary, detailed_exitcode), warned),
            s.notes(),
        ))
    })?;
    if let Some(d) = refused {
        out.diagnostics(&d);
    }
    Ok(outcome)
}

/// What the upgrade gate says of a run.
enum Gate {
    Go,
    /// Go on, and print these warnings with the run's end.
    Warn(Diagnostics),
    /// End the command so, with the diagnostics that say why.
    Stop(Outcome, Option<Diagnostics>),
}

/// The upgrade gate of a plan with a `[cluster]`.
async fn upgrade_gate(s: &mut Session, p: &Prepared) -> Gate {
    let (Some(spec), Some(cp)) = (
        GateSpec::for_plan(&p.eff, &p.plan),
        p.eff.first_control_plane(&p.plan),
    ) else {
        return Gate::Go;
    };
    // `--limit` that neither chooses nor needs the control plane (hosts without a role):
    // nothing of the cluster runs, and no host outside the run is connected to.
    if !p.scope.has_host(&cp.name) {
        return Gate::Go;
    }
    let remote = s.remote_logged(cp, &format!("{}.gate", cp.name));
    match gate::check(&remote, &spec).await {
        Ok(Verdict::Upgrade(u)) => {
            kwin_engine::pipeline::Remote::emit(&remote, gate::section(&spec, &u));
            Gate::Go
        }
        Ok(_) => Gate::Go,
        Err(GateError::Interrupted) => Gate::Stop(Outcome::Interrupted, None),
        // A plan changes nothing: say so and plan the other hosts (the first control plane
        // fails as a host of the run).
        Err(GateError::Unreachable(why)) if s.mode() == Mode::Plan => {
            let mut d = Diagnostics::default();
            d.push(gate::unreachable_warning(&why, &p.plan, &cp.name));
            Gate::Warn(d)
        }
        Err(e) => Gate::Stop(
            Outcome::Failed,
            Some(gate::error_diagnostics(&e, &p.plan, &cp.name)),
        ),
    }
}
