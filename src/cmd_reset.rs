//! `kwin reset plan.toml [--yes]`: take the plan's cluster down again.
//!
//! The plan is loaded and validated as for `apply`, then expanded with the reset recipes
//! (`plans/reset-*.toml`, [`kwin_modules::recipes::RESET_RECIPES`]) instead of the build
//! recipes, without the plan's own `[[tasks]]`, and the task graph is walked by the same
//! executor as `apply` — same output, JSON events, logs, journal, scrubbing and host-key
//! checks. The recipes drain and delete the joined nodes, `kubeadm reset -f` the Linux nodes
//! (workers first, the first control plane last) and clean what kubeadm leaves, and remove the
//! Windows services, HNS networks and state. Every step is guarded, so a second reset reports
//! 0 changed. Only the plan's hosts are touched.
//!
//! Asks for the cluster name on the terminal unless `--yes`; without a terminal and without
//! `--yes` it refuses.

use crate::prepare::{prepare_with, Checksums, UserTasks};
use crate::{OutputFormat, RunArgs};
use kwin_engine::event::Mode;
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

pub fn reset(run: RunArgs, yes: bool) -> anyhow::Result<ExitCode> {
    let prepared = prepare_with(
        &run.plan,
        kwin_modules::recipes::RESET_RECIPES,
        UserTasks::Leave,
        false,
        Checksums::Known,
    );
    let Some(prepared) = crate::prepare::reported(prepared, run.output) else {
        return Ok(ExitCode::from(1));
    };
    let plan = prepared.plan;
    let Some(modules) = prepared.modules else {
        anyhow::bail!("reset needs every checksum of its recipes known, and one is not: run `kwin plan` first");
    };
    let Some(cluster) = &plan.file.cluster else {
        if run.output == OutputFormat::Human {
            println!("reset: the plan has no [cluster]: nothing to reset");
        }
        return Ok(ExitCode::SUCCESS);
    };
    let name = cluster.name.clone();
    if !yes {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            anyhow::bail!(
                "refusing to reset cluster `{name}` without confirmation: there is no terminal to ask on; run `kwin reset` with --yes to confirm"
            );
        }
        let hosts: Vec<&str> = plan
            .hosts
            .iter()
            .filter(|h| h.role.is_some())
            .map(|h| h.name.as_str())
            .collect();
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "This takes cluster `{name}` down on {} hosts ({}): nodes drained and deleted, kubeadm reset, \
             CNI configuration and state removed, Windows services, HNS networks and C:\\k removed.\n\
             Type the cluster name to confirm: ",
            hosts.len(),
            hosts.join(", ")
        );
        let _ = err.flush();
        drop(err);
        let mut answer = String::new();
        stdin.lock().read_line(&mut answer)?;
        if answer.trim() != name {
            anyhow::bail!("reset cancelled: `{}` is not `{name}`", answer.trim());
        }
    }
    crate::cmd_run::run_graph(
        &run,
        Mode::Apply,
        false,
        plan,
        prepared.graph,
        modules,
        "reset",
    )
    .map(|(code, _)| code)
}
