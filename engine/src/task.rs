//! Tasks: module instances bound to one host, the nodes of the task graph.
//!
//! A task is produced by expansion (`expand`) from a recipe step or a user `[[tasks]]` entry.
//! Its dependencies are already resolved to [`TaskId`]s, kept apart by where they come from so
//! the graph can tell them apart (`kwin graph` prints each kind differently):
//!
//! - `order`: recipe order (a step follows the previous step of its recipe, a recipe's first step
//!   follows the recipes it `requires`);
//! - `after`: an explicit `after` entry (recipe step or user task);
//! - `inputs`: values read from another task's outputs (a data edge);
//! - `serial`: the last tasks of a `serial` recipe's previous batch of hosts (its first step
//!   on this host waits for them).
//!
//! A recipe step with `delegate` becomes a task of the host it runs on (`cp1/drain@lw1`) that
//! belongs to another host (`on_behalf_of`); a step with a guard (`if_exists` /
//! `unless_exists`) carries it in `guard`, and the build phase wraps its module so the guard's
//! path is read in the same probe.

use crate::diag::Location;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// `host/task`, unique in a run.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct TaskId {
    pub host: String,
    pub name: String,
}

impl TaskId {
    pub fn new(host: impl Into<String>, name: impl Into<String>) -> Self {
        TaskId {
            host: host.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.host, self.name)
    }
}

/// Where a task comes from, for diagnostics.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Origin {
    /// A step of a built-in recipe in plans/.
    Recipe { recipe: String, step: String },
    /// The plan's `[[tasks]]` entry at this index.
    User { index: usize },
}

/// A named value this task reads from another task's outputs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InputRef {
    pub from: TaskId,
    /// Output key in the producer's `key=value` output.
    pub key: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Task {
    pub id: TaskId,
    pub module: String,
    /// Module params after templating (a JSON object). Shared by every host's task of the
    /// same user task or recipe step when the template does not read `host`.
    #[serde(serialize_with = "shared_value")]
    pub params: Arc<serde_json::Value>,
    pub origin: Origin,
    /// Where the task is defined: the plan's `[[tasks]]` entry or the recipe step.
    pub location: Option<Location>,
    /// Recipe order: the previous step of the recipe, or the last steps of required recipes.
    pub order: Vec<TaskId>,
    /// Explicit `after` dependencies (resolved ids; may be on other hosts).
    pub after: Vec<TaskId>,
    /// Data dependencies: input name → producer output.
    pub inputs: BTreeMap<String, InputRef>,
    /// `sensitive = true`: what the task writes and reads shows as hashes only (diffs,
    /// events, journal, logs). Modules may be sensitive on their own too
    /// ([`crate::module::Module::sensitive`]).
    pub sensitive: bool,
    /// The step acts for the chosen hosts (`--limit`) from its own host: reset's drain on
    /// the first control plane drains and deletes only the chosen nodes (its template reads
    /// `host.chosen` of each). Such a task runs, and may change its host, whenever a host it
    /// acts for is chosen (`graph::scope`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub acts_for_chosen: bool,
    /// `serial` recipes: the tasks of the previous batch this task waits for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub serial: Vec<TaskId>,
    /// A delegated step: the host the task belongs to (its template context, its place in
    /// that host's step order); `id.host` is where it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_behalf_of: Option<String>,
    /// A step guard: the task is a no-op unless the path's existence is as wanted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guard: Option<Guard>,
}

/// A path guard on a recipe step: `if_exists` (`exists = true`) or `unless_exists`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Guard {
    pub path: String,
    /// Whether the path must exist for the task to do anything.
    pub exists: bool,
}

impl Task {
    /// A task without dependencies.
    pub fn new(
        id: TaskId,
        module: impl Into<String>,
        params: impl Into<Arc<serde_json::Value>>,
    ) -> Self {
        Task {
            id,
            module: module.into(),
            params: params.into(),
            origin: Origin::User { index: 0 },
            location: None,
            order: Vec::new(),
            after: Vec::new(),
            inputs: BTreeMap::new(),
            sensitive: false,
            acts_for_chosen: false,
            serial: Vec::new(),
            on_behalf_of: None,
            guard: None,
        }
    }

    pub fn with_origin(mut self, origin: Origin) -> Self {
        self.origin = origin;
        self
    }
}

fn shared_value<S: serde::Serializer>(v: &Arc<serde_json::Value>, s: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(v.as_ref(), s)
}
