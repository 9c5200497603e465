//! The plan: loading `plan.toml` into a typed model, resolving each host's connection, and
//! validating every rule the domain imposes.
//!
//! Flow: [`load`] reads the file (syntax errors, unknown keys, wrong types → diagnostics with
//! line and column, see `structure.rs`), merges the inventory and `[defaults.*]` into each
//! host, and produces a [`LoadedPlan`] (`loaded.rs`); `validate` checks cross-field rules.
//! Both report all problems at once; [`validate::load_and_validate`] reads the file once,
//! loads it as far as it goes and validates that, returning the plan with every diagnostic.
//! Nothing here touches a host or reads a secret's value. References between tasks
//! (`after`, `inputs`) have one grammar, `refs.rs`, used by validation and expansion.
//!
//! Every effective value (the plan's, else kwin's default from `effective/defaults.rs`) is
//! decided once, after validation, by [`effective::Effective::build`]; every later phase
//! reads that. Validation itself reads the few it needs through [`LoadedPlan::cluster_net`]
//! and [`LoadedPlan::cni_settings`], which take their defaults from the same module.
//! `versions.rs` is the support matrix (Kubernetes minors, pause images, every flag the
//! recipes render); `kubeadm.rs` renders kubeadm's configuration, the only place that does.
//!
//! Connection specs (`SshSpec`, `WinrmSpec`, `ConnSpec`, `SecretSource`, `WinrmAuth`) belong
//! to the layer below (`transport::spec`); they are re-exported here.

pub mod containerd;
pub mod effective;
pub mod kubeadm;
pub mod limit;
pub mod load;
pub mod loaded;
pub mod model;
pub mod net;
pub mod proxy;
pub mod refs;
pub mod schema;
pub mod spans;
pub mod starter;
pub mod structure;
pub mod support;
pub mod syntax;
pub mod validate;
pub mod vars;
pub mod versions;

pub use crate::transport::spec::{
    ConnSpec, JumpAddress, ProxyJump, SecretSource, SshSpec, WinrmAuth, WinrmSpec,
};
pub use load::{load, load_str};
pub use loaded::{resolve_path, LoadedPlan, ResolvedHost};
pub use model::*;
pub use net::{ClusterNet, CniSettings};
