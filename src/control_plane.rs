//! The first control plane of a plan, reached the way the executor reaches every host: the
//! plan's `.kwin/` (0700), its `known_hosts`, `--accept-new-host-keys`, and a scrubber that
//! knows the host's connection secrets. Used by `kwin kubeconfig` and `kwin verify`.

use crate::RunArgs;
use kwin_engine::exec::connect::{connection_secrets, transport_for, ConnectOptions, Made};
use kwin_engine::plan::{LoadedPlan, ResolvedHost, Role};
use kwin_engine::secret::Scrubber;
use std::path::PathBuf;

pub struct ControlPlane {
    pub made: Made,
    pub scrubber: Scrubber,
    pub state_dir: PathBuf,
}

/// The plan's first host with `role = "control-plane"`, or `None`.
pub fn first(plan: &LoadedPlan) -> Option<&ResolvedHost> {
    plan.hosts
        .iter()
        .find(|h| h.role == Some(Role::ControlPlane))
}

/// A transport (not yet connected) to `host`, with the state directory made private.
pub fn transport(
    plan: &LoadedPlan,
    host: &ResolvedHost,
    run: &RunArgs,
) -> anyhow::Result<ControlPlane> {
    let state_dir = plan.base_dir.join(".kwin");
    kwin_engine::exec::state::private_dir(&state_dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", state_dir.display()))?;
    let scrubber = Scrubber::new();
    for s in plan.plan_secrets() {
        scrubber.add(&s);
    }
    for s in connection_secrets(host) {
        scrubber.add(&s);
    }
    let opts = ConnectOptions {
        accept_new_host_keys: run.accept_new_host_keys,
        known_hosts: state_dir.join("known_hosts"),
    };
    let made = transport_for(host, &opts, &scrubber);
    Ok(ControlPlane {
        made,
        scrubber,
        state_dir,
    })
}
