//! The run phases that talk to the cluster rather than to the hosts: the upgrade *gate*
//! before anything changes, and *verify* after a clean apply. The engine knows no
//! Kubernetes policy or check (they are `kwin-modules`': the version skew policy, the verify
//! runner), so it reaches them through [`ClusterSteps`], which `kwin-modules` implements
//! (`kwin_modules::kube::cluster::Cluster`) and the command hands to [`super::run`]. When each runs,
//! on which host, with which log, is the pipeline's (the list in `pipeline/mod.rs`).

use super::{Prepared, Remote};
use crate::diag::Diagnostics;
use crate::event::{Mode, Outcome};
use async_trait::async_trait;

/// What the upgrade gate says of a run.
#[derive(Debug, Clone)]
pub enum Gate {
    /// Go on.
    Go,
    /// Go on; these warnings are printed with the run's end.
    Warn(Diagnostics),
    /// End the command so, before any host changes, with the diagnostics that say why.
    Stop(Outcome, Option<Diagnostics>),
}

/// The cluster's side of a run.
#[async_trait]
pub trait ClusterSteps: Send + Sync {
    /// The upgrade gate of `p`, a plan with `[cluster]`, run in `mode`: read what the
    /// cluster runs over `remote` (the first control plane, logged as `<host>.gate`) and
    /// check it against the plan. Called only when the first control plane is part of the
    /// run.
    async fn gate(&self, remote: &dyn Remote, p: &Prepared, mode: Mode) -> Gate;

    /// Verify the cluster of `p`, a plan with `[cluster]`, over `remote` (the first control
    /// plane): `Success` only when every check passed, `Interrupted` after Ctrl-C.
    async fn verify(&self, remote: &dyn Remote, p: &Prepared) -> Outcome;
}
