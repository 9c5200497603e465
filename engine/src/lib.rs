//! kwin-engine: plan model and validation, task graph, executor, transports, templates,
//! events. Knows nothing of Kubernetes: that lives in `kwin-modules` and the recipes.
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
