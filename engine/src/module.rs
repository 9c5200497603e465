//! Modules: idempotent steps. The engine's contract with `kwin-modules`.
//!
//! A module instance is built from a task's rendered params by the build phase (`build.rs`),
//! before any host is contacted: the params are walked against the module's params schema
//! first (every unknown key, wrong type or bad value at its plan line), then the module checks
//! what a schema cannot say. `schema.rs` gives `kwin schema` a branch per module. It names the
//! [`FactQuery`]s it needs; [`Module::plan`] is pure: desired state vs the facts →
//! [`Plan::NoOp`] (with why) or [`Plan::Change`] (what, why, a diff, and the steps that carry
//! it out). The engine executes the steps; a module never touches a host itself, so
//! `--check` is simply "plan only".
//!
//! After its steps ran, the engine re-probes the task's facts and plans again: anything but
//! NoOp is reported as "did not converge" — a bug in the module.

pub mod build;
pub mod guard;
pub mod schema;

use crate::fact::{FactError, FactQuery, Facts};
use crate::secret::Secret;
pub use crate::secret::{sensitive_digest, sensitive_hash, SENSITIVE_MARK};
use crate::shell::Shell;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use thiserror::Error;

/// What a change does, for summaries and JSON output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Create,
    Update,
    Delete,
    /// Runs a command whose effect kwin cannot diff (guarded by creates/unless).
    Run,
    /// Restarts a host.
    Reboot,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Action::Create => "create",
            Action::Update => "update",
            Action::Delete => "delete",
            Action::Run => "run",
            Action::Reboot => "reboot",
        };
        f.write_str(s)
    }
}

/// One thing the engine does on the host to carry out a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Run a script in the host's shell. Consecutive `Run` steps of several tasks may be sent
    /// as one script; each must therefore fail with a non-zero exit and not rely on `exit 0`
    /// to skip the rest (the engine wraps each in its own subshell / script block).
    Run(String),
    /// Run a POSIX script in the batch's own shell, without a process of its own: the body of
    /// a shell function the batch calls (stdin from `/dev/null`), where [`Step::Run`] costs a
    /// subshell (a `fork`). Only for scripts that leave that shell as they found it, which
    /// the module proves for each step it marks so:
    ///
    /// - it stops with `return N` (N > 0) on a failure, never `exit` (which would end the
    ///   whole batch) and never `return 0` / `exit 0` to skip the rest;
    /// - it does not `trap`, `exec`, `set` options, change `IFS` or define functions; the
    ///   only shell state it may change is the umask, `set -C` (noclobber) and the working
    ///   directory (`cd -P` into the directory a write is pinned to), which the engine
    ///   restores right after it, whatever it returned;
    /// - every variable it sets is named `__kw_<name>`, never one of the batch's own
    ///   (`__kw_rc`, `__kw_stop`, `__kw_umask`, `__kw_cwd`, `__kw_step`), and it reads none
    ///   it did not set but `$PWD`;
    /// - user text runs only in a process of its own (`/bin/sh -c`), never in this shell.
    ///
    /// On PowerShell hosts it is the same as [`Step::Run`] (a script block costs no process).
    /// `modules/tests/inline_steps.rs` runs every inline step of the module cases against
    /// these rules.
    Inline(String),
    /// Write a file atomically (used for content too large to embed in a script).
    Put {
        path: String,
        content: Vec<u8>,
        mode: Option<u32>,
    },
    /// Restart the host and wait for it to come back with a new boot identity.
    Reboot(RebootSpec),
}

impl Step {
    /// The script of a [`Step::Run`] or [`Step::Inline`] step.
    pub fn script(&self) -> Option<&str> {
        match self {
            Step::Run(s) | Step::Inline(s) => Some(s),
            Step::Put { .. } | Step::Reboot(_) => None,
        }
    }

    /// The script as one shell script runs it standalone (`sh -n`, a test's `sh -c`): an
    /// inline step as the function the batch wraps it in, called once.
    pub fn standalone(&self) -> Option<String> {
        match self {
            Step::Run(s) => Some(s.clone()),
            Step::Inline(s) => Some(format!("__kw_step() {{\n{s}\n}}\n__kw_step </dev/null\n")),
            Step::Put { .. } | Step::Reboot(_) => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RebootSpec {
    /// Seconds to wait for the host to go down.
    pub down_timeout_secs: u64,
    /// Seconds to wait for the host to answer again.
    pub up_timeout_secs: u64,
}

/// Which host state a change may alter. The engine re-probes a later task on the same host
/// only if one of its facts reads something an earlier change touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touches {
    /// Specific resources: paths with everything under them (prefix match on `/`-separated
    /// or `\`-separated segments: writing, replacing or removing a tree) or namespaced names
    /// like `sysctl:net.ipv4.ip_forward`, `service:kubelet`.
    Resources(Vec<String>),
    /// These paths themselves, not what is under them: creating a directory (with its missing
    /// parents, so a read of a parent may change too) or changing its mode or owner leaves
    /// every answer about the paths below it as it was.
    Paths(Vec<String>),
    /// Anything (opaque commands).
    Anything,
}

impl Touches {
    /// Whether a fact reading `resource` may see a different answer after this change.
    pub fn may_affect(&self, reads: &[String]) -> bool {
        match self {
            Touches::Anything => true,
            Touches::Resources(rs) => rs
                .iter()
                .any(|t| reads.iter().any(|r| resource_overlaps(t, r))),
            Touches::Paths(ps) => ps.iter().any(|t| reads.iter().any(|r| path_overlaps(t, r))),
        }
    }
}

impl Touches {
    /// Whether this change, made after a task whose own change was `own`, may disturb that
    /// task's convergence check of `reads`: as [`Touches::may_affect`], except, for a task
    /// that reads only its paths themselves (`paths_only`, [`Module::reads_paths_only`]), a
    /// change strictly below a read path its own change kept as a path (`own` is
    /// [`Touches::Paths`] holding it: the path exists after it, as a directory that change
    /// created or set the mode or owner of). Below such a path a change creates no missing
    /// parent of it and changes nothing the task reads.
    pub fn may_disturb(&self, reads: &[String], own: &Touches, paths_only: bool) -> bool {
        let kept = match own {
            Touches::Paths(ps) if paths_only => ps.as_slice(),
            _ => return self.may_affect(reads),
        };
        let below_kept = |t: &str, r: &str| kept.iter().any(|k| k == r) && is_path_prefix(r, t);
        match self {
            Touches::Anything => true,
            Touches::Resources(rs) => rs.iter().any(|t| {
                reads
                    .iter()
                    .any(|r| resource_overlaps(t, r) && !below_kept(t, r))
            }),
            Touches::Paths(ps) => ps.iter().any(|t| {
                reads
                    .iter()
                    .any(|r| path_overlaps(t, r) && !below_kept(t, r))
            }),
        }
    }
}

/// Whether a change to path `touched` itself (not below it) may change a read of `read`: the
/// same path, an ancestor of it (created as a parent), or everything (`*`).
pub fn path_overlaps(touched: &str, read: &str) -> bool {
    touched == read || read == "*" || touched == "*" || is_path_prefix(read, touched)
}

/// `p` is a proper path prefix of `q` (on `/` or `\\` segment boundaries).
fn is_path_prefix(p: &str, q: &str) -> bool {
    let is_sep = |c: char| c == '/' || c == '\\';
    q.len() > p.len()
        && q.starts_with(p)
        && (p.ends_with(is_sep) || q[p.len()..].starts_with(is_sep))
}

/// Two resources overlap when equal or one is a path prefix of the other.
pub fn resource_overlaps(a: &str, b: &str) -> bool {
    a == b || a == "*" || b == "*" || is_path_prefix(a, b) || is_path_prefix(b, a)
}

/// A planned change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub action: Action,
    /// Why it is needed, in one line: "content differs", "not installed", "missing".
    pub reason: String,
    /// Unified diff (files) or `- old / + new` lines (values), shown by `kwin plan`.
    pub diff: Option<String>,
    pub steps: Vec<Step>,
    pub touches: Touches,
}

impl Change {
    /// The change of a module that makes something exist as wanted: [`Action::Create`]
    /// because it is `missing` when it does not exist, else [`Action::Update`] because of
    /// `differs` ("value differs"). No diff, steps or touches yet: the module adds them
    /// (`Change { diff, steps, touches, ..Change::upsert(exists, "value differs") }`).
    pub fn upsert(exists: bool, differs: &str) -> Change {
        let (action, reason) = if exists {
            (Action::Update, differs)
        } else {
            (Action::Create, "missing")
        };
        Change {
            action,
            reason: reason.to_string(),
            diff: None,
            steps: Vec::new(),
            touches: Touches::Anything,
        }
    }
}

/// The result of planning one task on one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Nothing to do. `warning`: something the user must act on that the module chose not to
    /// act on (e.g. a reboot Windows waits for on a joined node); the engine reports it as a
    /// warning for the host, once per planned task, and it does not fail the run.
    NoOp {
        why: String,
        warning: Option<String>,
    },
    Change(Change),
}

impl Plan {
    pub fn noop(why: impl Into<String>) -> Self {
        Plan::NoOp {
            why: why.into(),
            warning: None,
        }
    }
    /// Nothing to do, but tell the user `warning`.
    pub fn noop_warning(why: impl Into<String>, warning: impl Into<String>) -> Self {
        Plan::NoOp {
            why: why.into(),
            warning: Some(warning.into()),
        }
    }
    pub fn is_noop(&self) -> bool {
        matches!(self, Plan::NoOp { .. })
    }
}

/// Values produced by other tasks (possibly on other hosts), by name. Always secrets: join
/// tokens and certificate hashes are never printed.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    values: BTreeMap<String, Secret>,
}

impl Inputs {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn insert(&mut self, name: impl Into<String>, value: Secret) {
        self.values.insert(name.into(), value);
    }
    /// The input `name`, or [`ModuleError::InputPending`] so the engine resolves it and plans
    /// again. Modules ask only when they need it (an already joined node never asks).
    pub fn get(&self, name: &str) -> Result<&Secret, ModuleError> {
        self.values
            .get(name)
            .ok_or_else(|| ModuleError::InputPending(name.to_string()))
    }
}

/// What a module knows about where it runs.
#[derive(Debug, Clone)]
pub struct Ctx<'a> {
    pub shell: Shell,
    /// The host's plan name.
    pub host: &'a str,
    pub inputs: &'a Inputs,
    /// Random text the engine draws for every `plan` call ([`new_plan_nonce`]). Modules
    /// derive the names of the temporary files their steps create from it, so nobody on the
    /// host can guess a name and plant something there first; tests pass a fixed value, so
    /// the steps of a plan stay a pure function of params, facts and this context.
    pub nonce: &'a str,
}

/// A fresh [`Ctx::nonce`]: 128 random bits as 32 lowercase hex digits.
pub fn new_plan_nonce() -> String {
    crate::fs::new_nonce()
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ModuleError {
    #[error(transparent)]
    Fact(#[from] FactError),
    /// The desired state cannot be reached as asked (e.g. the service module on a host
    /// without systemd). Shown to the user as the task's failure reason.
    #[error("{0}")]
    Unsupported(String),
    /// A precondition on the host is not met (Windows build too old, disk full).
    #[error("{0}")]
    Precondition(String),
    /// The named input is not resolved yet; the engine resolves it and plans again.
    #[error("input `{0}` is not available yet")]
    InputPending(String),
}

/// One idempotent step kind.
pub trait Module: Send + Sync + fmt::Debug {
    /// The facts `plan` will read.
    fn facts(&self, shell: Shell) -> Vec<FactQuery>;
    /// Resources the facts read, for re-probe decisions (see [`Touches`]). Default: anything,
    /// which makes the engine re-probe after every earlier change on the host.
    fn reads(&self) -> Vec<String> {
        vec!["*".to_string()]
    }
    /// Whether the facts read only the paths of [`Module::reads`] themselves (kind, mode,
    /// owner), nothing under them (a read is otherwise a whole subtree). Then, once this
    /// task's own change made such a path exist ([`Touches::Paths`]), a later change below it
    /// cannot disturb its convergence check ([`Touches::may_disturb`]): the check waits for
    /// the batch's end read. Default: no.
    fn reads_paths_only(&self) -> bool {
        false
    }
    /// Pure: desired vs actual.
    fn plan(&self, facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError>;
    /// A script whose stdout (`key=value` lines) are this task's outputs, run after the task
    /// converged and only when another task asks for them. Default: no outputs.
    fn output(&self, _shell: Shell) -> Option<String> {
        None
    }
    /// Outputs read from the task's own facts, with no script: what the probe (or the
    /// convergence re-read) answered, so they cost no round trip and are known to `kwin
    /// plan` too (a task that would change its host has none until it ran). They are not
    /// secrets: they say what the facts, which the host log shows, already say (a module
    /// with a secret output uses [`Module::output`]). Default: none.
    fn fact_outputs(&self, _facts: &Facts) -> Option<BTreeMap<String, String>> {
        None
    }
    /// The keys of this task's outputs (what [`Module::output`] prints, what
    /// [`Module::fact_outputs`] gives), so the build phase checks every consumer's `inputs`
    /// before anything runs (`task-inputs`). `None`: not declared, not checked. Default: no
    /// outputs, unless the module has an output script (then not declared); a module with
    /// outputs declares them.
    fn output_keys(&self, shell: Shell) -> Option<Vec<&'static str>> {
        match self.output(shell) {
            Some(_) => None,
            None => Some(Vec::new()),
        }
    }
    /// The paths this task manages on its host: a path whose whole state it decides (a file's
    /// content, a directory, a download) or part of it (a line of a file). Two tasks of one
    /// host managing the same path, one of them whole, would undo each other on every apply:
    /// the build phase refuses them (`task-conflict`). Default: none.
    fn manages(&self) -> Vec<Managed> {
        Vec::new()
    }
    /// The task asks for `sensitive = true` (called once, before anything else). A module that
    /// writes or reads content then keeps it out of its facts where it can and shows it in
    /// diffs as [`sensitive_hash`]es. Default: nothing (the engine still hides the task's
    /// scripts, answers and output in logs and hashes each line of its diffs).
    fn mark_sensitive(&mut self) {}
    /// Whether this task's content is secret: marked, or by default — a file that is or will
    /// be readable by its owner only (no read access for group and others). `facts`: what
    /// the host has (empty before the probe: then what the params say). Default: `false`.
    fn sensitive(&self, _facts: &Facts) -> bool {
        false
    }
}

/// A path a task manages ([`Module::manages`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Managed {
    /// Its whole state: content, mode, existence.
    Whole(String),
    /// Part of it (a line of a file): several tasks may each manage a part.
    Part(String),
}

impl Managed {
    pub fn path(&self) -> &str {
        match self {
            Managed::Whole(p) | Managed::Part(p) => p,
        }
    }
    pub fn is_whole(&self) -> bool {
        matches!(self, Managed::Whole(_))
    }
}

/// A diff of a sensitive task with every line that could carry content replaced by its
/// [`sensitive_hash`] (keeping a leading `-`, `+` or ` `); unified diff headers (`---`, `+++`,
/// `@@`) and lines already showing a hash stay. For modules that do not render sensitive
/// diffs themselves.
pub fn hash_diff_lines(diff: &str) -> String {
    let mut out = String::with_capacity(diff.len());
    for line in diff.lines() {
        let keep = line.contains(SENSITIVE_MARK)
            || line.starts_with("--- ")
            || line.starts_with("+++ ")
            || line.starts_with("@@");
        if keep {
            out.push_str(line);
        } else {
            let (sign, rest) = match line.chars().next() {
                Some(c @ ('-' | '+' | ' ')) => (Some(c), &line[1..]),
                _ => (None, line),
            };
            let rest = rest
                .strip_prefix(' ')
                .filter(|_| sign.is_some())
                .unwrap_or(rest);
            if let Some(c) = sign {
                out.push(c);
                out.push(' ');
            }
            out.push_str(&sensitive_hash(rest.as_bytes()));
        }
        out.push('\n');
    }
    out
}

/// Error building a module from params, with the path of the offending param if known.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{message}")]
pub struct ParamError {
    /// Dotted path under `params`, e.g. `content` or `rules.0.port`.
    pub path: Option<String>,
    pub message: String,
    /// The params did not deserialize into the module's params type ([`parse_params`]).
    /// After the build phase walked them against that type's schema without a finding, this
    /// means schema and deserializer disagree: a bug in kwin.
    pub shape: bool,
}

impl ParamError {
    pub fn new(message: impl Into<String>) -> Self {
        ParamError {
            path: None,
            message: message.into(),
            shape: false,
        }
    }
    pub fn at(path: impl Into<String>, message: impl Into<String>) -> Self {
        ParamError {
            path: Some(path.into()),
            message: message.into(),
            shape: false,
        }
    }
}

/// What a registry tells of one module (`kwin schema`, the build phase).
#[derive(Debug, Clone, PartialEq)]
pub struct ModuleInfo {
    pub name: &'static str,
    /// One line: what the module manages.
    pub doc: &'static str,
    /// The shells it is built for.
    pub shells: Vec<Shell>,
    /// The JSON Schema of its params, the same for every shell.
    pub params: serde_json::Value,
}

/// Builds modules by name. Implemented by `kwin-modules`; the engine only sees this trait.
pub trait Registry: Send + Sync {
    /// Module names, for did-you-mean and docs.
    fn names(&self) -> Vec<&'static str>;
    /// The JSON Schema of the params of module `name` on a host speaking `shell` (derived from
    /// the module's own parameter type), or `None` if there is no such module there or the
    /// registry does not describe it. Tests walk it to reach every parameter of every module.
    fn params_schema(&self, _name: &str, _shell: Shell) -> Option<serde_json::Value> {
        None
    }
    /// Every module the registry describes, with its params schema. Default: none (a test
    /// registry that only builds).
    fn modules(&self) -> Vec<ModuleInfo> {
        Vec::new()
    }
    /// Build the module `name` for a host speaking `shell` from its params (a JSON object).
    /// Unknown names and modules not available for that shell are errors.
    fn build(
        &self,
        name: &str,
        shell: Shell,
        params: &serde_json::Value,
    ) -> Result<Box<dyn Module>, ParamError>;
}

/// Deserialize module params, mapping serde errors to a [`ParamError`] marked
/// [`ParamError::shape`].
pub fn parse_params<T: serde::de::DeserializeOwned>(
    params: &serde_json::Value,
) -> Result<T, ParamError> {
    serde_json::from_value(params.clone()).map_err(|e| ParamError {
        path: None,
        message: e.to_string(),
        shape: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_below_a_directory_a_task_made_does_not_disturb_its_check() {
        let res = |v: &[&str]| Touches::Resources(v.iter().map(|s| s.to_string()).collect());
        let paths = |v: &[&str]| Touches::Paths(v.iter().map(|s| s.to_string()).collect());
        let reads = ["/srv/conf.d".to_string()];
        let made = paths(&["/srv/conf.d"]);
        // A file written below it: only for a paths-only reader whose change kept the path.
        assert!(!res(&["/srv/conf.d/app.conf"]).may_disturb(&reads, &made, true));
        assert!(res(&["/srv/conf.d/app.conf"]).may_disturb(&reads, &made, false));
        assert!(res(&["/srv/conf.d/app.conf"]).may_disturb(&reads, &res(&["/srv/conf.d"]), true));
        assert!(!paths(&["/srv/conf.d/sub"]).may_disturb(&reads, &made, true));
        // The path itself, an ancestor (a tree removed or replaced), or anything: still.
        for later in [
            res(&["/srv/conf.d"]),
            res(&["/srv"]),
            paths(&["/srv/conf.d"]),
            Touches::Anything,
        ] {
            assert!(later.may_disturb(&reads, &made, true), "{later:?}");
        }
        // Another path than the one made: as may_affect.
        assert!(res(&["/srv/conf.d/x"]).may_disturb(&reads, &paths(&["/srv/other"]), true));
    }

    #[test]
    fn sensitive_diffs_show_hashes_only() {
        let d = "--- /etc/x (current)\n+++ /etc/x (desired)\n@@ -1,2 +1,2 @@\n user=admin\n-password=old\n+password=new\n- 1\n+ sha256:0123456789abcdef… (sensitive)\n";
        let h = hash_diff_lines(d);
        for secret in ["admin", "old", "new"] {
            assert!(!h.contains(secret), "{h}");
        }
        assert!(
            h.starts_with("--- /etc/x (current)\n+++ /etc/x (desired)\n@@ -1,2 +1,2 @@\n  sha256:"),
            "{h}"
        );
        assert!(
            h.contains(&format!("- {}\n", sensitive_hash(b"password=old"))),
            "{h}"
        );
        assert!(h.contains(&format!("- {}\n", sensitive_hash(b"1"))), "{h}");
        assert!(
            h.ends_with("+ sha256:0123456789abcdef… (sensitive)\n"),
            "{h}"
        );
        assert_eq!(hash_diff_lines(&h), h);
    }

    #[test]
    fn overlap_by_path_segments() {
        assert!(resource_overlaps("/etc", "/etc/motd"));
        assert!(resource_overlaps("/etc/motd", "/etc/motd"));
        assert!(!resource_overlaps("/etc/mo", "/etc/motd"));
        assert!(resource_overlaps("C:\\k", "C:\\k\\kubelet.exe"));
        assert!(!resource_overlaps("sysctl:a", "sysctl:b"));
        assert!(Touches::Anything.may_affect(&["/x".into()]));
        assert!(!Touches::Resources(vec!["/a".into()]).may_affect(&["/b".into()]));
    }

    #[test]
    fn a_path_itself_affects_itself_and_its_parents_not_its_children() {
        let mkdir = Touches::Paths(vec!["/srv/bench/conf.d".into()]);
        assert!(mkdir.may_affect(&["/srv/bench/conf.d".into()]));
        assert!(mkdir.may_affect(&["/srv/bench".into()]));
        assert!(mkdir.may_affect(&["*".into()]));
        assert!(!mkdir.may_affect(&["/srv/bench/conf.d/a.conf".into()]));
        assert!(!mkdir.may_affect(&["/srv/bench/conf.dx".into()]));
        assert!(!mkdir.may_affect(&["/srv/other".into()]));
        // Removing the tree affects what is under it.
        let rm = Touches::Resources(vec!["/srv/bench/conf.d".into()]);
        assert!(rm.may_affect(&["/srv/bench/conf.d/a.conf".into()]));
    }
}
