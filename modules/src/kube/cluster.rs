//! The cluster's side of a run, as the pipeline calls it
//! ([`kwin_engine::pipeline::ClusterSteps`]): the upgrade gate ([`super::upgrade::gate`]) and
//! the verify runner ([`super::verify`]). The pipeline decides when each runs and over which
//! connection (`engine/src/pipeline/mod.rs`, the list of phases); this says what they find.

use super::upgrade::gate::{self, GateError, GateSpec};
use super::upgrade::skew::Verdict;
use super::verify::{self, VerifyOptions, VerifySpec};
use async_trait::async_trait;
use kwin_engine::diag::Diagnostics;
use kwin_engine::event::{Mode, Outcome};
use kwin_engine::pipeline::{ClusterSteps, Gate, Prepared, Remote};

/// The gate and verify of kwin's commands; `verify` holds `kwin verify`'s options (the
/// defaults after `kwin apply`).
#[derive(Debug, Clone)]
pub struct Cluster {
    pub verify: VerifyOptions,
}

#[async_trait]
impl ClusterSteps for Cluster {
    /// The plan's versions against what the cluster runs: an upgrade is shown (`upgrade`
    /// event) and goes on; a refusal, or a cluster whose versions cannot be read, stops the
    /// run — except under `kwin plan`, which warns that the first control plane could not be
    /// reached and plans the other hosts (it fails as a host of the run).
    async fn gate(&self, remote: &dyn Remote, p: &Prepared, mode: Mode) -> Gate {
        let Some(spec) = GateSpec::for_plan(&p.eff, &p.plan) else {
            return Gate::Go;
        };
        let cp = remote.host();
        match gate::check(remote, &spec).await {
            Ok(Verdict::Upgrade(u)) => {
                remote.emit(gate::section(&spec, &u));
                Gate::Go
            }
            Ok(_) => Gate::Go,
            Err(GateError::Interrupted) => Gate::Stop(Outcome::Interrupted, None),
            Err(GateError::Unreachable(why)) if mode == Mode::Plan => {
                let mut d = Diagnostics::default();
                d.push(gate::unreachable_warning(&why, &p.plan, cp));
                Gate::Warn(d)
            }
            Err(e) => Gate::Stop(
                Outcome::Failed,
                Some(gate::error_diagnostics(&e, &p.plan, cp)),
            ),
        }
    }

    /// Every check of the plan's cluster; under `--limit` only the chosen nodes are
    /// checked (from the first control plane, which runs kubectl either way).
    async fn verify(&self, remote: &dyn Remote, p: &Prepared) -> Outcome {
        let Some(mut spec) = VerifySpec::for_plan(&p.eff, self.verify.clone()) else {
            return Outcome::Success;
        };
        spec.expected.retain(|n| p.plan.chosen(&n.name));
        let report = verify::verify(remote, &spec).await;
        match (report.interrupted, report.passed()) {
            (true, _) => Outcome::Interrupted,
            (false, true) => Outcome::Success,
            (false, false) => Outcome::Failed,
        }
    }
}
