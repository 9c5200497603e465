//! `kwin exec plan.toml [--limit …] -- CMD …` and `kwin facts plan.toml [--limit …]`: the
//! operator's look at the hosts over the plan's pinned connections (host keys verified as
//! for apply), logged in `.kwin/logs/<run-id>/` and scrubbed like a run.
//!
//! `exec` joins the words after `--` with spaces and gives the line to each chosen host's
//! shell as is (`sh` on Linux, PowerShell on Windows), like `ssh host CMD`; exit 1 when a
//! host could not run it or it exited non-zero. `facts` connects and probes only: per host,
//! what the host is (`fact::HostFact`, in the same probe) and every fact the plan's tasks
//! read there. Neither takes the lock.

use crate::args::{Recipes, RunArgs};
use crate::drive::{self, Render};
use crate::output::Output;
use kwin_engine::event::Mode;
use kwin_engine::event::Outcome;
use kwin_engine::pipeline::{self, ChecksumMode, Session};

pub fn exec(run: &RunArgs, command: &[String], out: &Output) -> anyhow::Result<Outcome> {
    let req = run.request(Recipes::Build, ChecksumMode::Known, false);
    let Some(p) = drive::ready(out, drive::prepare(&req)?) else {
        return Ok(Outcome::Failed);
    };
    let line = command.join(" ");
    let hosts: Vec<_> = p
        .plan
        .hosts
        .iter()
        .filter(|h| p.plan.chosen(&h.name))
        .collect();
    let outcome = drive::stage(out, Render::Run(Mode::Apply, "exec"), |ctl| async {
        let mut s = Session::open(&p, &run.flags(), Mode::Apply, ctl)?;
        let r = pipeline::exec(&mut s, &hosts, &line).await;
        let outcome = if r.interrupted {
            Outcome::Interrupted
        } else if r.failed > 0 {
            Outcome::Failed
        } else {
            Outcome::Success
        };
        Ok((outcome, s.notes()))
    })?;
    Ok(outcome)
}

pub fn facts(run: &RunArgs, out: &Output) -> anyhow::Result<Outcome> {
    let req = run.request(Recipes::Build, ChecksumMode::Fetch, false);
    let Some(p) = drive::ready(out, drive::prepare(&req)?) else {
        return Ok(Outcome::Failed);
    };
    let outcome = drive::stage(out, Render::Run(Mode::Plan, "facts"), |ctl| async {
        let mut s = Session::open(&p, &run.flags(), Mode::Plan, ctl)?;
        let summary = pipeline::facts(&mut s, &p).await?;
        Ok((Outcome::of(&summary, false), s.notes()))
    })?;
    Ok(outcome)
}
