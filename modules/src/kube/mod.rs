//! Kubernetes modules: kubeadm steps on the nodes, and objects applied and awaited from the
//! first control plane with `kubectl --kubeconfig <admin.conf>`.
//!
//! Each module's one line, parameters and examples: `kwin modules`, `kwin doc`,
//! docs/modules.md. A module exists when it has a row in `crate::registry::KUBE`.
//!
//! Facts print a first line `kwin: <state>` followed by data, and are parsed by pure functions
//! in [`facts`]; a fact that cannot answer exits non-zero. Every fact and step that talks to
//! the API server takes the kubeconfig path from the task's params (`kubeconfig`, default
//! `/etc/kubernetes/admin.conf`), so the same scripts run against any cluster. Plan-provided
//! text reaches scripts only through `sh_quote`/`ps_quote` or as base64 inside a quoted
//! here-document.

use kwin_engine::module::ParamError;

pub mod cluster;
pub mod facts;
mod script;
pub mod upgrade;
pub mod verify;

pub mod apply;
pub mod delete;
pub mod drain;
pub mod join_data;
pub mod kubeadm_init;
pub mod kubeadm_join;
pub mod kubeadm_upgrade;
pub mod kubeconfig;
pub mod kubelet_restart;
pub mod node;
pub mod uncordon;
pub mod wait;

/// The admin kubeconfig kubeadm writes on a control plane.
pub const ADMIN_CONF: &str = "/etc/kubernetes/admin.conf";

/// The resource every fact that reads the API server declares, and every change that writes
/// to it touches (see `Module::reads`): a later Kubernetes task re-probes after an earlier one
/// on the same host changed the cluster.
pub const API_RESOURCE: &str = "kube:api";

/// The schema of a duration parameter (`ttl`, `timeout`, ...; read by `parse_duration`): text
/// like `"5m"`, `"90s"`, `"1h30m"`, or a number of seconds.
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum DurationParam {
    Text(String),
    Seconds(u64),
}

/// Seconds in a duration like `"5m"`, `"90s"`, `"1h30m"` or `"90"`: the plan's and the CLI's
/// one grammar.
pub use kwin_engine::plan::syntax::duration_secs;

/// Duration params like `"5m"`, `"90s"`, `"1h30m"`, or a number of seconds.
pub(crate) fn parse_duration(field: &str, v: &serde_json::Value) -> Result<u64, ParamError> {
    let bad = || {
        ParamError::at(
            field,
            format!("`{v}` is not a duration (e.g. \"90s\", \"5m\", \"1h30m\")"),
        )
    };
    if let Some(n) = v.as_u64() {
        return Ok(n);
    }
    duration_secs(v.as_str().ok_or_else(bad)?).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kwin_engine::transport::Shell;

    #[test]
    fn durations() {
        let d = |s: &str| parse_duration("t", &serde_json::json!(s));
        assert_eq!(d("5m"), Ok(300));
        assert_eq!(d("1h30m"), Ok(5400));
        assert_eq!(d("90s"), Ok(90));
        assert_eq!(d("45"), Ok(45));
        assert_eq!(parse_duration("t", &serde_json::json!(7)), Ok(7));
        assert!(d("5 minutes").is_err());
        assert!(d("").is_err());
        assert!(d("m").is_err());
    }

    #[test]
    fn only_join_speaks_powershell() {
        use crate::row_for;
        assert!(row_for("kube_apply", Shell::PowerShell).is_none());
        assert!(row_for("kubeadm_join", Shell::PowerShell).is_some());
        assert!(row_for("nope", Shell::Posix).is_none());
    }
}
