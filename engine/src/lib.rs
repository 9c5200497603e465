//! kwin-engine: plan model and validation, effective values, templates, task graph, executor,
//! transports, events, and the pipeline every command runs. It knows the plan's Kubernetes
//! vocabulary as data (the `[cluster]` model, its defaults, the version and flag table) and
//! runs no Kubernetes logic: modules, recipes and the verify runner live in `kwin-modules`.
//!
//! Architecture and invariants: see ARCHITECTURE.md at the repository root.

pub mod checksums;
pub mod diag;
pub mod event;
pub mod exec;
pub mod expand;
pub mod fact;
pub mod fs;
pub mod graph;
pub mod module;
pub mod net;
pub mod pipeline;
pub mod plan;
pub mod quote;
pub mod secret;
pub mod shell;
pub mod task;
pub mod template;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
pub mod transport;
