//! Shared by the Kubernetes module tests: the example plans (and variants of them) expanded
//! through the real recipes, and the test fixtures.

#![allow(dead_code)]

use kwin_engine::task::Task;
use std::path::{Path, PathBuf};

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// A file in tests/kube_cases/_fixtures.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/kube_cases/_fixtures")
        .join(name)
}

/// The text of a plan file (relative to the workspace root) with `edits` applied: each
/// `(find, replace)` must match exactly once.
pub fn plan_text(rel: &str, edits: &[(&str, &str)]) -> String {
    let path = root().join(rel);
    let mut text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for (find, replace) in edits {
        assert_eq!(
            text.matches(find).count(),
            1,
            "{rel}: `{find}` must occur exactly once"
        );
        text = text.replacen(find, replace, 1);
    }
    text
}

/// Every task of the plan `text` (loaded as if it were the file `rel`), expanded with the
/// built-in recipes.
pub fn expand(rel: &str, text: &str) -> Vec<Task> {
    let plan = kwin_engine::plan::load_str(&root().join(rel), text)
        .unwrap_or_else(|d| panic!("{rel}: {d}"));
    kwin_engine::expand::expand(&plan, kwin_modules::recipes::RECIPES)
        .unwrap_or_else(|d| panic!("{rel}: {d}"))
}

/// The task `host/name`.
pub fn task<'a>(tasks: &'a [Task], host: &str, name: &str) -> &'a Task {
    tasks
        .iter()
        .find(|t| t.id.host == host && t.id.name == name)
        .unwrap_or_else(|| panic!("no task {host}/{name}"))
}
