//! Tasks: module instances bound to one host, the nodes of the task graph.

use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

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
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
    /// Module params after templating (a JSON object).
    pub params: serde_json::Value,
    pub origin: Origin,
    /// Explicit and recipe-order dependencies (resolved ids; may be on other hosts).
    pub after: Vec<TaskId>,
    /// Data dependencies: input name → producer output.
    pub inputs: BTreeMap<String, InputRef>,
}
