//! Kubernetes modules: kubeadm steps, manifests applied from the control plane, waits.

use kwin_engine::module::{Module, ParamError};
use kwin_engine::transport::Shell;

/// Kubernetes module names.
pub const NAMES: &[&str] = &[];

/// Build a Kubernetes module, or `None` if `name` is not one.
pub fn build(
    name: &str,
    shell: Shell,
    params: &serde_json::Value,
) -> Option<Result<Box<dyn Module>, ParamError>> {
    let _ = (name, shell, params);
    None
}
