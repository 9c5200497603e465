//! `kwin verify` (also the last phase of `kwin apply`): the test workloads deployed from the
//! first control plane and every check run (`kwin_modules::kube::verify`), over a session's
//! connection to that host: host keys checked as for apply, every command and its output in
//! `.kwin/logs/<run-id>/<host>.log`, scrubbed. Exit 0 only when every check passed.

use crate::args::{Recipes, RunArgs, VerifyArgs};
use crate::drive;
use crate::output::Output;
use kwin_engine::pipeline::{ChecksumMode, Command, Outcome};

pub fn verify(run: &RunArgs, args: &VerifyArgs, out: &Output) -> anyhow::Result<Outcome> {
    let req = run.request(Recipes::Build, ChecksumMode::Known, false);
    let Some(p) = drive::ready(out, drive::prepare(&req)?) else {
        return Ok(Outcome::Failed);
    };
    if p.eff.cluster.is_none() {
        out.nothing_to_do("verify");
        return Ok(Outcome::Success);
    }
    crate::cmd_run::run_prepared(out, run, &p, Command::Verify, "verify", args)
}
