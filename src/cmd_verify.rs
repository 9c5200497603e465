//! `kwin verify` (and the last stage of `kwin apply`): the test workloads deployed from the
//! first control plane and every check run (`kwin_modules::kube::verify`), over a session's
//! connection to that host: host keys checked as for apply, every command and its output in
//! `.kwin/logs/<run-id>/<host>.log`, scrubbed. Exit 0 only when every check passed.

use crate::args::{Recipes, RunArgs, VerifyArgs};
use crate::drive::{self, Render};
use crate::output::Output;
use kwin_engine::event::Mode;
use kwin_engine::pipeline::{ChecksumMode, Outcome, Prepared, Session};
use kwin_modules::kube::verify::{self, VerifyOptions, VerifySpec};

pub fn verify(run: &RunArgs, args: &VerifyArgs, out: &Output) -> anyhow::Result<Outcome> {
    let req = run.request(Recipes::Build, ChecksumMode::Known, false);
    let Some(p) = drive::ready(out, drive::prepare(&req)?) else {
        return Ok(Outcome::Failed);
    };
    verify_prepared(out, run, &p, args)
}

/// Verify the cluster of a prepared plan.
pub fn verify_prepared(
    out: &Output,
    run: &RunArgs,
    p: &Prepared,
    args: &VerifyArgs,
) -> anyhow::Result<Outcome> {
    let opts = VerifyOptions {
        timeout: args.timeout,
        external_url: args.external_url.clone(),
        namespace: args.namespace.clone(),
        keep_workloads: args.keep_workloads,
    };
    let Some(mut spec) = VerifySpec::for_plan(&p.eff, opts) else {
        out.nothing_to_do("verify");
        return Ok(Outcome::Success);
    };
    // `--limit`: only the chosen nodes are checked (from the first control plane, which
    // runs kubectl either way).
    spec.expected.retain(|n| p.plan.chosen(&n.name));
    let Some(cp) = p.eff.first_control_plane(&p.plan) else {
        anyhow::bail!("the plan has no control plane to run the checks from");
    };
    let outcome = drive::stage(out, Render::Run(Mode::Apply, "verify"), |ctl| async move {
        let mut s = Session::open(p, &run.flags(), Mode::Apply, ctl)?;
        let report = verify::verify(&s.remote(cp), &spec).await;
        let outcome = match (report.interrupted, report.passed()) {
            (true, _) => Outcome::Interrupted,
            (false, true) => Outcome::Success,
            (false, false) => Outcome::Failed,
        };
        Ok((outcome, s.notes()))
    })?;
    Ok(outcome)
}
