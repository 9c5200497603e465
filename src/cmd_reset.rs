//! `kwin reset plan.toml [--yes]`: take the plan's cluster down again.
//!
//! The plan is loaded and validated as for `apply`, then expanded with the reset recipes
//! (`plans/reset-*.toml`, [`kwin_modules::recipes::RESET_RECIPES`]) instead of the build
//! recipes, without the plan's own `[[tasks]]`, and run by the same pipeline as `apply` —
//! same output, JSON events, logs, journal, scrubbing and host-key checks. The recipes drain
//! and delete the joined nodes, `kubeadm reset -f` the Linux nodes (workers first, the first
//! control plane last) and clean what kubeadm leaves, and remove the Windows services, HNS
//! networks and state. Every step is guarded, so a second reset reports 0 changed. Only the
//! plan's hosts are touched.
//!
//! Asks for the cluster name on the terminal unless `--yes`; without a terminal and without
//! `--yes` it refuses.
//!
//! `--limit` resets the chosen nodes only: the drain runs on the first control plane for them
//! alone (`reset-drain`'s `acts_for_chosen`), nothing else there changes, and the prompt
//! names only them. Choosing the first control plane while other nodes stay is refused
//! (`plan::limit::reset_refusal`).

use crate::args::{Recipes, RunArgs};
use crate::output::Output;
use kwin_engine::event::Outcome;
use kwin_engine::pipeline::{ChecksumMode, Command};

pub fn reset(run: &RunArgs, yes: bool, out: &Output) -> anyhow::Result<Outcome> {
    let req = run.request(Recipes::Reset, ChecksumMode::Known, false);
    let Some(p) = crate::drive::ready(out, crate::drive::prepare(&req)?) else {
        return Ok(Outcome::Failed);
    };
    let Some(cluster) = &p.eff.cluster else {
        out.nothing_to_do("reset");
        return Ok(Outcome::Success);
    };
    let name = &cluster.name;
    if let Some(refusal) = kwin_engine::plan::limit::reset_refusal(&p.plan) {
        anyhow::bail!("{refusal}");
    }
    if !yes {
        let hosts: Vec<&str> = p
            .plan
            .nodes()
            .filter(|h| p.plan.chosen(&h.name))
            .map(|h| h.name.as_str())
            .collect();
        let what = if p.plan.limit.is_some() {
            format!("This removes {} from cluster `{name}`", hosts.join(", "))
        } else {
            format!(
                "This takes cluster `{name}` down on {} ({})",
                crate::output::plural(hosts.len(), "host"),
                hosts.join(", ")
            )
        };
        let prompt = format!(
            "{what}: nodes drained and deleted, kubeadm reset, \
             CNI configuration and state removed, Windows services, HNS networks and C:\\k removed.\n\
             Type the cluster name to confirm: "
        );
        let Some(answer) = out.confirm(&prompt)? else {
            anyhow::bail!(
                "refusing to reset cluster `{name}` without confirmation: there is no terminal to ask on; run `kwin reset` with --yes to confirm"
            );
        };
        if answer.trim() != name {
            anyhow::bail!("reset cancelled: `{}` is not `{name}`", answer.trim());
        }
    }
    let none = crate::args::VerifyArgs::default();
    crate::cmd_run::run_prepared(out, run, &p, Command::Reset, "reset", &none)
}
