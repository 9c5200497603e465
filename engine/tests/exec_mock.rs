//! Executor tests against the strict mock transport, with small modules defined here.
//!
//! The mock answers most scripts by running them with a real `/bin/sh` (so kwin's markers and
//! exit codes are real), and every round trip must be expected: a script nobody expected
//! fails the test. Host state lives in a temp dir per test.

use kwin_engine::event::{Counts, Event, EventSink, Mode, TaskStatus};
use kwin_engine::exec::{execute, Cancel, HostHandle, Run, RunOptions};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::graph::TaskGraph;
use kwin_engine::module::build::Modules;
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, RebootSpec, Registry, Step, Touches,
};
use kwin_engine::quote::sh_quote;
use kwin_engine::secret::Scrubber;
use kwin_engine::task::{Origin, Task, TaskId};
use kwin_engine::transport::mock::{Expect, MockTransport};
use kwin_engine::transport::{Shell, Transport, TransportError};
use kwin_testkit::exec::{file_content, file_fact, param, task, Outcome, TaskExt};
use kwin_testkit::kwin::walk;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

// ----- test modules ------------------------------------------------------------------------

/// A file with exact content. `reads_all`: declares no `reads` (the default, "anything").
/// `touches`: what its change says it touches (default: its path).
#[derive(Debug)]
struct TFile {
    path: String,
    content: String,
    reads_all: bool,
    touches: Option<String>,
}

impl Module for TFile {
    fn facts(&self, _shell: Shell) -> Vec<FactQuery> {
        vec![file_fact(&self.path)]
    }
    fn reads(&self) -> Vec<String> {
        if self.reads_all {
            vec!["*".into()]
        } else {
            vec![self.path.clone()]
        }
    }
    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let (action, reason, diff) = match file_content(facts, &self.path)? {
            Some(c) if c == self.content => return Ok(Plan::noop("content matches")),
            Some(c) => (
                Action::Update,
                "content differs",
                Some(format!("-{c}\n+{}\n", self.content)),
            ),
            None => (
                Action::Create,
                "missing",
                Some(format!("+{}\n", self.content)),
            ),
        };
        Ok(Plan::Change(Change {
            action,
            reason: reason.into(),
            diff,
            steps: vec![Step::Run(format!(
                "printf '%s' {} > {}",
                sh_quote(&self.content),
                sh_quote(&self.path)
            ))],
            touches: Touches::Resources(vec![self
                .touches
                .clone()
                .unwrap_or_else(|| self.path.clone())]),
        }))
    }
}

/// Always plans a change that does nothing: never converges.
#[derive(Debug)]
struct TBad {
    path: String,
}

impl Module for TBad {
    fn facts(&self, _shell: Shell) -> Vec<FactQuery> {
        vec![file_fact(&self.path)]
    }
    fn reads(&self) -> Vec<String> {
        vec![self.path.clone()]
    }
    fn plan(&self, _facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        Ok(Plan::Change(Change {
            action: Action::Run,
            reason: "always".into(),
            diff: None,
            steps: vec![Step::Run("true".into())],
            touches: Touches::Resources(vec![self.path.clone()]),
        }))
    }
}

/// Reads nothing, changes `path` (as a command with `changes` would).
#[derive(Debug)]
struct TTouch {
    path: String,
}

impl Module for TTouch {
    fn facts(&self, _shell: Shell) -> Vec<FactQuery> {
        Vec::new()
    }
    fn plan(&self, _facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        Ok(Plan::Change(Change {
            action: Action::Run,
            reason: "always".into(),
            diff: None,
            steps: vec![Step::Run("echo touching".into())],
            touches: Touches::Resources(vec![self.path.clone()]),
        }))
    }
}

/// A directory: reads its path, creates it (touching the path itself, not what is under it).
#[derive(Debug)]
struct TDir {
    path: String,
}

impl Module for TDir {
    fn facts(&self, _shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery {
            key: format!("dir:{}", self.path),
            command: format!(
                "test -d {} && echo dir || echo absent",
                sh_quote(&self.path)
            ),
            path: None,
        }]
    }
    fn reads(&self) -> Vec<String> {
        vec![self.path.clone()]
    }
    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let key = format!("dir:{}", self.path);
        let out =
            facts
                .raw(&key)
                .ok_or(ModuleError::Fact(kwin_engine::fact::FactError::Missing(
                    key,
                )))?;
        if String::from_utf8_lossy(&out.stdout).trim() == "dir" {
            return Ok(Plan::noop("exists"));
        }
        Ok(Plan::Change(Change {
            action: Action::Create,
            reason: "missing".into(),
            diff: None,
            steps: vec![Step::Run(format!("mkdir -p {}", sh_quote(&self.path)))],
            touches: Touches::Paths(vec![self.path.clone()]),
        }))
    }
}

/// A step that kills the whole script (not just its own subshell).
#[derive(Debug)]
struct TKill;

impl Module for TKill {
    fn facts(&self, _shell: Shell) -> Vec<FactQuery> {
        Vec::new()
    }
    fn plan(&self, _facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        Ok(Plan::Change(Change {
            action: Action::Run,
            reason: "always".into(),
            diff: None,
            steps: vec![Step::Run("kill -9 $$".into())],
            touches: Touches::Resources(vec!["/nowhere".into()]),
        }))
    }
}

/// A command that fails.
#[derive(Debug)]
struct TFail;

impl Module for TFail {
    fn facts(&self, _shell: Shell) -> Vec<FactQuery> {
        Vec::new()
    }
    fn plan(&self, _facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        Ok(Plan::Change(Change {
            action: Action::Run,
            reason: "always".into(),
            diff: None,
            steps: vec![Step::Run("echo boom >&2; exit 3".into())],
            touches: Touches::Anything,
        }))
    }
}

/// Creates `path`; outputs a token.
#[derive(Debug)]
struct TProducer {
    path: String,
}

const TOKEN: &str = "s3cret-token-42";

impl Module for TProducer {
    fn facts(&self, _shell: Shell) -> Vec<FactQuery> {
        vec![file_fact(&self.path)]
    }
    fn reads(&self) -> Vec<String> {
        vec![self.path.clone()]
    }
    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        if file_content(facts, &self.path)?.is_some() {
            return Ok(Plan::noop("initialized"));
        }
        Ok(Plan::Change(Change {
            action: Action::Run,
            reason: "not initialized".into(),
            diff: None,
            steps: vec![Step::Run(format!("echo init > {}", sh_quote(&self.path)))],
            touches: Touches::Resources(vec![self.path.clone()]),
        }))
    }
    fn output(&self, _shell: Shell) -> Option<String> {
        Some(format!("echo token={TOKEN}; echo other=value"))
    }
}

/// Writes the `token` input to `path`; asks for it only when `path` is missing.
#[derive(Debug)]
struct TConsumer {
    path: String,
}

impl Module for TConsumer {
    fn facts(&self, _shell: Shell) -> Vec<FactQuery> {
        vec![file_fact(&self.path)]
    }
    fn reads(&self) -> Vec<String> {
        vec![self.path.clone()]
    }
    fn plan(&self, facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        if file_content(facts, &self.path)?.is_some() {
            return Ok(Plan::noop("joined"));
        }
        let token = ctx.inputs.get("token")?;
        Ok(Plan::Change(Change {
            action: Action::Run,
            reason: "not joined".into(),
            diff: Some(format!("+joined with {}\n", token.expose())),
            steps: vec![Step::Run(format!(
                "printf '%s' {} > {}",
                sh_quote(token.expose()),
                sh_quote(&self.path)
            ))],
            touches: Touches::Resources(vec![self.path.clone()]),
        }))
    }
}

/// Changes nothing; its output `set` says whether `path` exists, read from its facts.
#[derive(Debug)]
struct TFlag {
    path: String,
}

impl Module for TFlag {
    fn facts(&self, _shell: Shell) -> Vec<FactQuery> {
        vec![file_fact(&self.path)]
    }
    fn reads(&self) -> Vec<String> {
        vec![self.path.clone()]
    }
    fn plan(&self, _facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        Ok(Plan::noop("reads only"))
    }
    fn fact_outputs(&self, facts: &Facts) -> Option<std::collections::BTreeMap<String, String>> {
        let set = file_content(facts, &self.path).ok()?.is_some();
        Some([("set".to_string(), set.to_string())].into_iter().collect())
    }
}

/// Creates `path` while its input `set` is `true`.
#[derive(Debug)]
struct TWhenSet {
    path: String,
}

impl Module for TWhenSet {
    fn facts(&self, _shell: Shell) -> Vec<FactQuery> {
        vec![file_fact(&self.path)]
    }
    fn reads(&self) -> Vec<String> {
        vec![self.path.clone()]
    }
    fn plan(&self, facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        if ctx.inputs.get("set")?.expose() != "true" {
            return Ok(Plan::noop("not asked"));
        }
        if file_content(facts, &self.path)?.is_some() {
            return Ok(Plan::noop("done"));
        }
        Ok(Plan::Change(Change {
            action: Action::Create,
            reason: "asked".into(),
            diff: None,
            steps: vec![Step::Run(format!("echo done > {}", sh_quote(&self.path)))],
            touches: Touches::Resources(vec![self.path.clone()]),
        }))
    }
}

/// Reboots once: the marker file appears "because of" the reboot.
#[derive(Debug)]
struct TRebootOnce {
    marker: String,
}

impl Module for TRebootOnce {
    fn facts(&self, _shell: Shell) -> Vec<FactQuery> {
        vec![file_fact(&self.marker)]
    }
    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        if file_content(facts, &self.marker)?.is_some() {
            return Ok(Plan::noop("rebooted"));
        }
        Ok(Plan::Change(Change {
            action: Action::Reboot,
            reason: "feature needs a restart".into(),
            diff: None,
            steps: vec![Step::Reboot(RebootSpec {
                down_timeout_secs: 5,
                up_timeout_secs: 5,
            })],
            touches: Touches::Anything,
        }))
    }
}

/// A file written with a put, then fixed up with a command: a change that does not batch.
#[derive(Debug)]
struct TPut {
    path: String,
}

impl Module for TPut {
    fn facts(&self, _shell: Shell) -> Vec<FactQuery> {
        vec![file_fact(&self.path)]
    }
    fn reads(&self) -> Vec<String> {
        vec![self.path.clone()]
    }
    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        if file_content(facts, &self.path)?.as_deref() == Some("big\n") {
            return Ok(Plan::noop("content matches"));
        }
        Ok(Plan::Change(Change {
            action: Action::Create,
            reason: "missing".into(),
            diff: None,
            steps: vec![
                Step::Put {
                    path: format!("{}.tmp", self.path),
                    content: b"big\n".to_vec(),
                    mode: Some(0o600),
                },
                Step::Run(format!("mv {p}.tmp {p}", p = sh_quote(&self.path))),
            ],
            touches: Touches::Resources(vec![self.path.clone()]),
        }))
    }
}

struct TestRegistry;

impl Registry for TestRegistry {
    fn names(&self) -> Vec<&'static str> {
        vec![
            "file", "file_any", "bad", "fail", "kill", "touch", "producer", "consumer", "reboot",
            "flag", "when_set", "dir",
        ]
    }
    fn build(
        &self,
        name: &str,
        _shell: Shell,
        p: &serde_json::Value,
    ) -> Result<Box<dyn Module>, ParamError> {
        Ok(match name {
            "file" | "file_any" => Box::new(TFile {
                path: param(p, "path"),
                content: param(p, "content"),
                reads_all: name == "file_any",
                touches: p
                    .get("touches")
                    .and_then(|v| v.as_str())
                    .map(str::to_string),
            }),
            "bad" => Box::new(TBad {
                path: param(p, "path"),
            }),
            "fail" => Box::new(TFail),
            "dir" => Box::new(TDir {
                path: param(p, "path"),
            }),
            "kill" => Box::new(TKill),
            "touch" => Box::new(TTouch {
                path: param(p, "path"),
            }),
            "producer" => Box::new(TProducer {
                path: param(p, "path"),
            }),
            "consumer" => Box::new(TConsumer {
                path: param(p, "path"),
            }),
            "put" => Box::new(TPut {
                path: param(p, "path"),
            }),
            "reboot" => Box::new(TRebootOnce {
                marker: param(p, "path"),
            }),
            "flag" => Box::new(TFlag {
                path: param(p, "path"),
            }),
            "when_set" => Box::new(TWhenSet {
                path: param(p, "path"),
            }),
            _ => return Err(ParamError::new(format!("unknown module `{name}`"))),
        })
    }
}

// ----- harness -----------------------------------------------------------------------------

fn file(host: &str, name: &str, path: &Path, content: &str) -> Task {
    task(
        host,
        name,
        "file",
        json!({"path": path.display().to_string(), "content": content}),
    )
}

fn opts(mode: Mode, state: &Path) -> RunOptions {
    let mut o = RunOptions::new(mode, state.to_path_buf());
    o.retries = 2;
    o.retry_delay = Duration::from_millis(5);
    o.step_timeout = Duration::from_secs(20);
    o.reboot_poll = Duration::from_millis(5);
    o
}

fn modules(graph: &TaskGraph, hosts: &[HostHandle]) -> Modules {
    kwin_testkit::exec::modules(graph, hosts, &TestRegistry)
}

async fn run_with(
    tasks: Vec<Task>,
    hosts: &[(&str, Arc<dyn Transport>)],
    o: RunOptions,
    scrubber: Scrubber,
) -> Outcome {
    kwin_testkit::exec::run(tasks, hosts, o, scrubber, &TestRegistry).await
}

async fn run(
    tasks: Vec<Task>,
    hosts: &[(&str, &MockTransport)],
    mode: Mode,
    state: &Path,
) -> Outcome {
    let hosts: Vec<(&str, Arc<dyn Transport>)> = hosts
        .iter()
        .map(|(n, m)| (*n, Arc::new((*m).clone()) as Arc<dyn Transport>))
        .collect();
    run_with(
        tasks,
        &hosts,
        opts(mode, &state.join(".kwin")),
        Scrubber::new(),
    )
    .await
}

fn mock(name: &str) -> MockTransport {
    MockTransport::new(name, Shell::Posix)
}

fn probe() -> Expect {
    Expect::run("probe").contains("@@kwin").sh()
}

/// The step text that writes `content`.
fn w(content: &str) -> String {
    format!("printf '%s' {} >", sh_quote(content))
}

fn summary(o: &Outcome) -> (usize, usize, usize, usize) {
    (
        o.summary.counts.ok,
        o.summary.counts.changed,
        o.summary.counts.failed,
        o.summary.counts.skipped,
    )
}

// ----- tests -------------------------------------------------------------------------------

#[tokio::test]
async fn warm_run_is_one_round_trip_per_host() {
    let d = tempfile::tempdir().expect("tmp");
    let (a, b, c) = (d.path().join("a"), d.path().join("b"), d.path().join("c"));
    for p in [&a, &b, &c] {
        std::fs::write(p, "x").expect("seed");
    }
    let (h1, h2) = (mock("h1"), mock("h2"));
    for m in [&h1, &h2] {
        // Every fact of the host in the one probe script.
        m.expect(
            probe()
                .contains(format!("cat {}", a.display()))
                .contains(format!("cat {}", b.display()))
                .contains(format!("cat {}", c.display())),
        );
    }
    let tasks = vec![
        file("h1", "a", &a, "x"),
        file("h1", "b", &b, "x"),
        file("h1", "c", &c, "x"),
        file("h2", "a", &a, "x"),
        file("h2", "b", &b, "x"),
        file("h2", "c", &c, "x"),
    ];
    let o = run(tasks, &[("h1", &h1), ("h2", &h2)], Mode::Apply, d.path()).await;
    h1.finish().expect("h1");
    h2.finish().expect("h2");
    assert_eq!((h1.runs(), h2.runs()), (1, 1));
    assert_eq!(summary(&o), (6, 0, 0, 0));
    assert!(o.json().ends_with(&format!(
        "{{\"event\":\"run_finished\",\"hosts\":2,\"hosts_reached\":2,\"hosts_failed\":0,\"ok\":6,\"changed\":0,\"would_change\":0,\"failed\":0,\"skipped\":0,\"duration_ms\":{}}}",
        o.summary.duration_ms
    )));
}

#[tokio::test]
async fn cold_run_batches_changes_and_verifies_in_the_same_round_trip() {
    let d = tempfile::tempdir().expect("tmp");
    let (a, b, c) = (d.path().join("a"), d.path().join("b"), d.path().join("c"));
    let h1 = mock("h1");
    h1.expect(probe());
    h1.expect(
        Expect::run("one batch: three changes, each re-read")
            .contains(w("A"))
            .contains(w("B"))
            .contains(w("C"))
            .sh(),
    );
    let tasks = vec![
        file("h1", "a", &a, "A"),
        file("h1", "b", &b, "B"),
        file("h1", "c", &c, "C"),
    ];
    let o = run(tasks, &[("h1", &h1)], Mode::Apply, d.path()).await;
    h1.finish().expect("h1");
    assert_eq!(h1.runs(), 2, "probe + one batch");
    assert_eq!(summary(&o), (0, 3, 0, 0));
    assert_eq!(
        o.status("h1", "a"),
        (TaskStatus::Changed, "create: missing".into())
    );
    // No later change touches what a task reads: every task's facts are re-read once, in the
    // batch's end read, after all steps.
    let batch = &h1.scripts()[1];
    let write_c = batch.find(&w("C")).expect("c");
    let reread_a = batch
        .find(&format!("cat '{}'", a.display()))
        .or_else(|| batch.find(&format!("cat {}", a.display())))
        .expect("re-read of a");
    assert!(reread_a > write_c, "a is re-read in the end read");

    // Second run: nothing to do, one round trip.
    let h1 = mock("h1");
    h1.expect(probe());
    let tasks = vec![
        file("h1", "a", &a, "A"),
        file("h1", "b", &b, "B"),
        file("h1", "c", &c, "C"),
    ];
    let o = run(tasks, &[("h1", &h1)], Mode::Apply, d.path()).await;
    h1.finish().expect("h1 warm");
    assert_eq!(h1.runs(), 1);
    assert_eq!(summary(&o), (3, 0, 0, 0));
}

/// A task that waits for a command of its host (an explicit edge) is not sent in the same
/// script as the command, even when it reads nothing the command touches; an independent
/// task is.
#[tokio::test]
async fn a_task_after_a_command_starts_in_a_later_script() {
    let d = tempfile::tempdir().expect("tmp");
    let (p, a, b) = (d.path().join("p"), d.path().join("a"), d.path().join("b"));
    let h1 = mock("h1");
    h1.expect(probe());
    h1.expect(
        Expect::run("the command and the independent file")
            .contains(w("A"))
            .sh(),
    );
    h1.expect(
        Expect::run("the file that waits for the command")
            .contains(w("B"))
            .sh(),
    );
    let producer = Task::new(
        TaskId::new("h1", "cmd"),
        "producer",
        serde_json::json!({ "path": p.display().to_string() }),
    )
    .with_origin(Origin::User { index: 0 });
    let tasks = vec![
        producer,
        file("h1", "a", &a, "A"),
        file("h1", "b", &b, "B").after("h1", "cmd"),
    ];
    let o = run(tasks, &[("h1", &h1)], Mode::Apply, d.path()).await;
    h1.finish().expect("h1");
    assert_eq!(h1.runs(), 3, "probe + two batches");
    assert_eq!(summary(&o), (0, 3, 0, 0), "{}", o.json());
    assert!(!h1.scripts()[1].contains(&w("B")));
}

/// A later step kills the batch's script before its end read: the tasks that ran before it
/// are read again in a round trip of their own and reported as changed, not failed.
#[tokio::test]
async fn a_killed_batch_still_verifies_the_tasks_that_ran() {
    let d = tempfile::tempdir().expect("tmp");
    let a = d.path().join("a");
    let h1 = mock("h1");
    h1.expect(probe());
    h1.expect(
        Expect::run("one batch")
            .contains(w("A"))
            .contains("kill -9")
            .sh(),
    );
    h1.expect(Expect::run("re-probe").contains("@@kwin").sh());
    let kill = Task::new(TaskId::new("h1", "kill"), "kill", serde_json::json!({}))
        .with_origin(Origin::User { index: 0 });
    let tasks = vec![file("h1", "a", &a, "A"), kill];
    let o = run(tasks, &[("h1", &h1)], Mode::Apply, d.path()).await;
    h1.finish().expect("h1");
    assert_eq!(o.status("h1", "a").0, TaskStatus::Changed, "{}", o.json());
    assert_eq!(o.status("h1", "kill").0, TaskStatus::Failed);
}

/// A later change of the same batch that touches what an earlier task reads: the earlier
/// task's facts are re-read right after its own steps, before the later change runs.
#[tokio::test]
async fn a_task_is_verified_before_a_later_change_touches_its_facts() {
    let d = tempfile::tempdir().expect("tmp");
    let a = d.path().join("a");
    let h1 = mock("h1");
    h1.expect(probe());
    h1.expect(
        Expect::run("one batch")
            .contains(w("A1"))
            .contains("echo touching")
            .sh(),
    );
    let touch = Task::new(
        TaskId::new("h1", "touch"),
        "touch",
        serde_json::json!({ "path": a.display().to_string() }),
    )
    .with_origin(Origin::User { index: 0 });
    let tasks = vec![file("h1", "a1", &a, "A1"), touch];
    let o = run(tasks, &[("h1", &h1)], Mode::Apply, d.path()).await;
    h1.finish().expect("h1");
    assert_eq!(h1.runs(), 2, "probe + one batch");
    // (`touch` plans a change every time, so it is reported as not converging.)
    assert_eq!(o.status("h1", "a1").0, TaskStatus::Changed);
    let batch = &h1.scripts()[1];
    let write_a1 = batch.find(&w("A1")).expect("a1");
    let write_a2 = batch.find("echo touching").expect("touch");
    let reread_a = batch[write_a1..]
        .find(&format!("cat '{}'", a.display()))
        .or_else(|| batch[write_a1..].find(&format!("cat {}", a.display())))
        .expect("re-read of a")
        + write_a1;
    assert!(
        reread_a < write_a2,
        "a1 is verified before the later change runs"
    );
}

#[tokio::test]
async fn a_module_that_does_not_converge_is_reported() {
    let d = tempfile::tempdir().expect("tmp");
    let h1 = mock("h1");
    h1.expect(probe());
    h1.expect(Expect::run("batch").contains("true").sh());
    let tasks = vec![
        task(
            "h1",
            "liar",
            "bad",
            json!({"path": d.path().join("x").display().to_string()}),
        ),
        file("h1", "after", &d.path().join("y"), "y"),
    ];
    let o = run(tasks, &[("h1", &h1)], Mode::Apply, d.path()).await;
    h1.finish().expect("h1");
    let (st, msg) = o.status("h1", "liar");
    assert_eq!(st, TaskStatus::Failed);
    assert!(msg.contains("did not converge"), "{msg}");
    assert!(msg.contains("bug in module `bad`"), "{msg}");
    // The failure stops the host: the later task (batched after it) did not count as done.
    let (st, msg) = o.status("h1", "after");
    assert_eq!((st, msg.as_str()), (TaskStatus::Skipped, "h1/liar failed"));
}

#[tokio::test]
async fn failure_skips_dependents_across_hosts_but_not_unrelated_hosts() {
    let d = tempfile::tempdir().expect("tmp");
    let (h1, h2, h3) = (mock("h1"), mock("h2"), mock("h3"));
    h1.expect(probe());
    h1.expect(
        Expect::run("batch stops at the failure")
            .contains("exit 3")
            .sh(),
    );
    h2.expect(probe());
    h2.expect(Expect::run("h2 independent work").contains(w("h2")).sh());
    h3.expect(probe());
    h3.expect(Expect::run("h3 work").contains(w("h3")).sh());
    let tasks = vec![
        file("h1", "before", &d.path().join("h1-before"), "b"),
        task("h1", "init", "fail", json!({})),
        file("h1", "later", &d.path().join("h1-later"), "l"),
        file("h2", "own", &d.path().join("h2-own"), "h2"),
        file("h2", "join", &d.path().join("h2-join"), "j").after("h1", "init"),
        file("h2", "after-join", &d.path().join("h2-after"), "k").after("h2", "join"),
        file("h3", "own", &d.path().join("h3-own"), "h3"),
    ];
    let o = run(
        tasks,
        &[("h1", &h1), ("h2", &h2), ("h3", &h3)],
        Mode::Apply,
        d.path(),
    )
    .await;
    for m in [&h1, &h2, &h3] {
        m.finish().expect("mock");
    }
    assert_eq!(o.status("h1", "before").0, TaskStatus::Changed);
    let (st, msg) = o.status("h1", "init");
    assert_eq!(st, TaskStatus::Failed);
    assert_eq!(msg, "exit code 3: boom");
    assert_eq!(
        o.status("h1", "later"),
        (TaskStatus::Skipped, "h1/init failed".into())
    );
    assert_eq!(
        o.status("h2", "join"),
        (TaskStatus::Skipped, "h1/init failed".into())
    );
    assert_eq!(
        o.status("h2", "after-join"),
        (TaskStatus::Skipped, "h1/init failed".into())
    );
    assert_eq!(o.status("h2", "own").0, TaskStatus::Changed);
    assert_eq!(o.status("h3", "own").0, TaskStatus::Changed);
    assert_eq!(summary(&o), (0, 3, 1, 3));
    assert!(!d.path().join("h1-later").exists());
    assert!(!d.path().join("h2-join").exists());
}

#[tokio::test]
async fn inputs_across_hosts_read_the_producer_output_once() {
    let d = tempfile::tempdir().expect("tmp");
    let (cp, w1, w2) = (mock("cp"), mock("w1"), mock("w2"));
    cp.expect(probe());
    // Slow enough that both workers were probed before it changed anything.
    cp.expect(
        Expect::run("init")
            .contains("echo init")
            .delay(Duration::from_millis(500))
            .sh(),
    );
    cp.expect(Expect::run("output, once").contains("echo token=").sh());
    for w in [&w1, &w2] {
        w.expect(probe());
        // The producer changed another host after this one was probed: re-read first.
        w.expect(
            Expect::run("re-probe")
                .contains("@@kwin")
                .excludes(TOKEN)
                .sh(),
        );
        w.expect(Expect::run("join").contains(TOKEN).sh());
    }
    let consumer = |h: &str| {
        task(
            h,
            "join",
            "consumer",
            json!({"path": d.path().join(format!("{h}-joined")).display().to_string()}),
        )
        .input("token", "cp", "init", "token")
    };
    let tasks = vec![
        task(
            "cp",
            "init",
            "producer",
            json!({"path": d.path().join("cp-init").display().to_string()}),
        ),
        consumer("w1"),
        consumer("w2"),
    ];
    let o = run(
        tasks,
        &[("cp", &cp), ("w1", &w1), ("w2", &w2)],
        Mode::Apply,
        d.path(),
    )
    .await;
    for m in [&cp, &w1, &w2] {
        m.finish().expect("mock");
    }
    assert_eq!(cp.runs(), 3);
    assert_eq!(summary(&o), (0, 3, 0, 0));
    assert_eq!(
        std::fs::read_to_string(d.path().join("w2-joined")).expect("joined"),
        TOKEN
    );
    // The token never shows: not in events (the diff carried it), not in the logs.
    let json = o.json();
    assert!(!json.contains(TOKEN), "{json}");
    assert!(json.contains("+joined with ***"), "{json}");
    let state = d.path().join(".kwin");
    assert!(state.join("logs").exists());
    for entry in walk(&state) {
        let text = std::fs::read_to_string(&entry).unwrap_or_default();
        assert!(!text.contains(TOKEN), "{} leaks the token", entry.display());
    }

    // Second run: everything converged; consumers never ask; the output is never read.
    let (cp, w1, w2) = (mock("cp"), mock("w1"), mock("w2"));
    for m in [&cp, &w1, &w2] {
        m.expect(probe());
    }
    let tasks = vec![
        task(
            "cp",
            "init",
            "producer",
            json!({"path": d.path().join("cp-init").display().to_string()}),
        ),
        consumer("w1"),
        consumer("w2"),
    ];
    let o = run(
        tasks,
        &[("cp", &cp), ("w1", &w1), ("w2", &w2)],
        Mode::Apply,
        d.path(),
    )
    .await;
    for m in [&cp, &w1, &w2] {
        m.finish().expect("mock warm");
        assert_eq!(m.runs(), 1);
    }
    assert_eq!(summary(&o), (3, 0, 0, 0));
}

/// Outputs a task reads from its own facts (`Module::fact_outputs`) reach a consumer on
/// another host with no output script, in `apply` and in `plan` alike: a warm run stays one
/// probe per host, and `kwin plan` knows what the consumer will do.
#[tokio::test]
async fn fact_outputs_cost_no_round_trip_and_are_known_to_plan() {
    let d = tempfile::tempdir().expect("tmp");
    let flag = d.path().join("flag");
    let done = d.path().join("w1-done");
    let tasks = || {
        vec![
            task(
                "cp",
                "flag",
                "flag",
                json!({"path": flag.display().to_string()}),
            ),
            task(
                "w1",
                "act",
                "when_set",
                json!({"path": done.display().to_string()}),
            )
            .input("set", "cp", "flag", "set"),
        ]
    };
    // Not set: the consumer is a no-op, in plan and apply; one probe per host, no output.
    for mode in [Mode::Plan, Mode::Apply] {
        let (cp, w1) = (mock("cp"), mock("w1"));
        cp.expect(probe());
        w1.expect(probe());
        let o = run(tasks(), &[("cp", &cp), ("w1", &w1)], mode, d.path()).await;
        for m in [&cp, &w1] {
            m.finish().expect("one probe, no output script");
            assert_eq!(m.runs(), 1);
        }
        assert_eq!(summary(&o), (2, 0, 0, 0), "{mode:?}");
        assert_eq!(o.status("w1", "act").1, "not asked");
    }
    // Set: plan knows the consumer would change (not "known after apply"); apply does it.
    std::fs::write(&flag, "x").expect("flag");
    let (cp, w1) = (mock("cp"), mock("w1"));
    cp.expect(probe());
    w1.expect(probe());
    let o = run(tasks(), &[("cp", &cp), ("w1", &w1)], Mode::Plan, d.path()).await;
    for m in [&cp, &w1] {
        m.finish().expect("plan");
    }
    assert_eq!(o.summary.counts.would_change, 1);
    assert!(
        o.status("w1", "act").1.contains("asked"),
        "{:?}",
        o.status("w1", "act")
    );
    let (cp, w1) = (mock("cp"), mock("w1"));
    cp.expect(probe());
    w1.expect(probe());
    w1.expect(Expect::run("act").contains("echo done").sh());
    let o = run(tasks(), &[("cp", &cp), ("w1", &w1)], Mode::Apply, d.path()).await;
    for m in [&cp, &w1] {
        m.finish().expect("apply");
    }
    assert_eq!(summary(&o), (1, 1, 0, 0));
    assert!(done.exists());
}

#[tokio::test]
async fn reprobe_only_when_touches_overlap_reads() {
    let d = tempfile::tempdir().expect("tmp");
    let (a, b) = (d.path().join("a"), d.path().join("b"));

    // No overlap: a, b, then a file elsewhere: one batch.
    let h1 = mock("h1");
    h1.expect(probe());
    h1.expect(
        Expect::run("one batch")
            .contains(w("X"))
            .contains(w("C"))
            .sh(),
    );
    let tasks = vec![
        file("h1", "a", &a, "X"),
        file("h1", "b", &b, "B"),
        file("h1", "c", &d.path().join("c"), "C"),
    ];
    run(tasks, &[("h1", &h1)], Mode::Apply, d.path()).await;
    h1.finish().expect("no overlap");
    assert_eq!(h1.runs(), 2);

    // Overlap: a later task writes `a` again. The batch with the first write is sent when the
    // later task is reached, and its script re-reads `a` for it at the end; the later task
    // then plans against the fresh content (X → Y, not missing → Y).
    std::fs::remove_file(&a).expect("rm");
    let h1 = mock("h1");
    h1.expect(probe());
    h1.expect(
        Expect::run("batch 1 + re-read of a for the later task")
            .contains(w("X"))
            .contains(w("B2"))
            .excludes(w("Y"))
            .sh(),
    );
    h1.expect(
        Expect::run("batch 2")
            .contains(w("Y"))
            .excludes(w("X"))
            .sh(),
    );
    let tasks = vec![
        file("h1", "a", &a, "X"),
        file("h1", "b", &b, "B2"),
        file("h1", "a-again", &a, "Y"),
    ];
    let o = run(tasks, &[("h1", &h1)], Mode::Apply, d.path()).await;
    h1.finish().expect("overlap");
    assert_eq!(h1.runs(), 3);
    assert_eq!(
        o.status("h1", "a-again"),
        (TaskStatus::Changed, "update: content differs".into())
    );
    let diff = o
        .events
        .iter()
        .find_map(|e| match e {
            Event::TaskPlanned { task, diff, .. } if task == "a-again" => diff.clone(),
            _ => None,
        })
        .expect("planned");
    assert_eq!(diff, "-X\n+Y\n");

    // A module that reads "anything" is re-read after any change on its host.
    let h1 = mock("h1");
    h1.expect(probe());
    h1.expect(
        Expect::run("batch 1 with the re-read")
            .contains(w("B3"))
            .sh(),
    );
    let tasks = vec![
        file("h1", "b", &b, "B3"),
        task(
            "h1",
            "any",
            "file_any",
            json!({"path": d.path().join("c").display().to_string(), "content": "C"}),
        ),
    ];
    let o = run(tasks, &[("h1", &h1)], Mode::Apply, d.path()).await;
    h1.finish().expect("reads anything");
    assert_eq!(summary(&o), (1, 1, 0, 0));
    assert!(
        h1.scripts()[1].contains(&format!("cat '{}'", d.path().join("c").display()))
            || h1.scripts()[1].contains(&format!("cat {}", d.path().join("c").display()))
    );
}

/// A batch's end read brings back the facts of a later task only when no task between may
/// change them first (one that reads what it reads): those would be read again for nothing
/// (on a control plane, every Kubernetes task after a change read the API server twice) and
/// would hold back the publication of the batch's tasks. They are read where they are
/// needed: here in the end read of the batch of the task between, with no extra round trip.
#[tokio::test]
async fn a_later_task_is_not_reread_while_a_task_before_it_reads_the_same() {
    let d = tempfile::tempdir().expect("tmp");
    let (a, c, e) = (d.path().join("a"), d.path().join("c"), d.path().join("e"));
    let any = |name: &str, path: &Path, content: &str| {
        task(
            "h1",
            name,
            "file_any",
            json!({"path": path.display().to_string(), "content": content}),
        )
    };
    let cat = |p: &Path| format!("cat {}", sh_quote(&p.display().to_string()));
    let h1 = mock("h1");
    h1.expect(probe());
    h1.expect(
        Expect::run("a, and the facts of c, which c needs next; not e's")
            .contains(w("A"))
            .contains(cat(&c))
            .excludes(cat(&e))
            .sh(),
    );
    h1.expect(
        Expect::run("c, and the facts of e")
            .contains(w("C"))
            .contains(cat(&e))
            .excludes(w("E"))
            .sh(),
    );
    h1.expect(Expect::run("e").contains(w("E")).sh());
    let tasks = vec![
        file("h1", "a", &a, "A"),
        any("c", &c, "C"),
        any("e", &e, "E"),
    ];
    let o = run(tasks, &[("h1", &h1)], Mode::Apply, d.path()).await;
    h1.finish().expect("h1");
    assert_eq!(
        h1.runs(),
        4,
        "probe + three batches, no re-probe of its own"
    );
    assert_eq!(summary(&o), (0, 3, 0, 0));

    // A batch sent because the host is about to wait for another host reads every stale later
    // task: the host would stand idle, and what it reads now is not on its path afterwards.
    for p in [&a, &c, &e] {
        let _ = std::fs::remove_file(p);
    }
    let (h1, h2) = (mock("h1"), mock("h2"));
    h1.expect(probe());
    h1.expect(
        Expect::run("a, before waiting for h2: the facts of c and of e")
            .contains(w("A"))
            .contains(cat(&c))
            .contains(cat(&e))
            .sh(),
    );
    h1.expect(
        Expect::run("c, and e's facts again (c may have changed them)")
            .contains(w("C"))
            .contains(cat(&e))
            .sh(),
    );
    h1.expect(Expect::run("e").contains(w("E")).sh());
    // x is as it should be (a change there would make h1 read c's facts again), and h2 takes
    // a while to find out: h1 reaches c long before x is done, and waits.
    std::fs::write(d.path().join("x"), "X").expect("seed x");
    h2.expect(probe().delay(Duration::from_millis(500)));
    let tasks = vec![
        file("h1", "a", &a, "A"),
        any("c", &c, "C").after("h2", "x"),
        any("e", &e, "E").after("h1", "c"),
        file("h2", "x", &d.path().join("x"), "X"),
    ];
    let o = run(tasks, &[("h1", &h1), ("h2", &h2)], Mode::Apply, d.path()).await;
    h1.finish().expect("h1, waiting");
    h2.finish().expect("h2");
    assert_eq!(summary(&o), (1, 3, 0, 0));
}

/// Reading the same resource, not merely a path above it, holds facts back: the task of a
/// directory does not hold back the facts of a file in it (creating or chmod-ing a directory
/// leaves its files as they are), so they come in the same end read, not one round trip later.
#[tokio::test]
async fn a_file_is_read_ahead_behind_the_task_of_its_directory() {
    let d = tempfile::tempdir().expect("tmp");
    let (a, dir) = (d.path().join("a"), d.path().join("dir"));
    let f = dir.join("f");
    let cat = |p: &Path| format!("cat {}", sh_quote(&p.display().to_string()));
    let h1 = mock("h1");
    h1.expect(probe());
    h1.expect(
        Expect::run("a, the facts of dir (next) and of dir/f")
            .contains(w("A"))
            .contains(format!("test -d {}", sh_quote(&dir.display().to_string())))
            .contains(cat(&f))
            .sh(),
    );
    h1.expect(
        Expect::run("dir and f")
            .contains("mkdir -p")
            .contains(w("F"))
            .sh(),
    );
    // `a` says its change touches everything under the test's directory.
    let touch = task(
        "h1",
        "a",
        "file",
        json!({"path": a.display().to_string(), "content": "A",
        "touches": d.path().display().to_string()}),
    );
    let tasks = vec![
        touch,
        task(
            "h1",
            "dir",
            "dir",
            json!({"path": dir.display().to_string()}),
        ),
        file("h1", "f", &f, "F"),
    ];
    let o = run(tasks, &[("h1", &h1)], Mode::Apply, d.path()).await;
    h1.finish().expect("h1");
    assert_eq!(h1.runs(), 3, "probe + two batches, no re-probe");
    assert_eq!(o.status("h1", "dir").0, TaskStatus::Changed);
    assert_eq!(o.status("h1", "f").0, TaskStatus::Changed);
}

#[tokio::test]
async fn lost_connection_during_a_batch_reprobes_instead_of_rerunning() {
    let d = tempfile::tempdir().expect("tmp");
    let a = d.path().join("a");
    let h1 = mock("h1");
    h1.expect(probe());
    // The batch runs on the host, but the answer never arrives.
    h1.expect(
        Expect::run("batch, answer lost")
            .contains(w("A"))
            .with(|script| {
                let out = std::process::Command::new("/bin/sh")
                    .arg("-c")
                    .arg(script)
                    .output()
                    .map_err(|e| TransportError::Local(e.to_string()))?;
                let _ = out;
                Err(TransportError::ConnectionLost("reset by peer".into()))
            }),
    );
    // The first connect works; the reconnect after the loss is refused once (a reconnect
    // is retried, refused or not), then works.
    h1.ok_connects(1);
    h1.fail_connects(1, || TransportError::Connect {
        address: "h1:22".into(),
        reason: "refused".into(),
        kind: kwin_engine::transport::ConnectKind::Refused,
    });
    h1.expect(
        Expect::run("re-probe after reconnect")
            .excludes(w("A"))
            .sh(),
    );
    let o = run(
        vec![file("h1", "a", &a, "A")],
        &[("h1", &h1)],
        Mode::Apply,
        d.path(),
    )
    .await;
    h1.finish().expect("h1");
    assert_eq!(o.status("h1", "a").0, TaskStatus::Changed);
    assert_eq!(h1.connects(), 3, "first connect, one refused, one ok");
    assert_eq!(h1.runs(), 2 + 1);
}

/// A refused port on the first connection: the host is up and nothing listens there, so it
/// fails at once, not after `retries` like a host that does not answer.
#[tokio::test]
async fn a_refused_first_connection_is_not_retried() {
    let d = tempfile::tempdir().expect("tmp");
    let h1 = mock("h1");
    h1.fail_connects(3, || TransportError::Connect {
        address: "10.0.0.1:22".into(),
        reason: "connection refused".into(),
        kind: kwin_engine::transport::ConnectKind::Refused,
    });
    let o = run(
        vec![file("h1", "a", &d.path().join("a"), "a")],
        &[("h1", &h1)],
        Mode::Apply,
        d.path(),
    )
    .await;
    assert_eq!(h1.connects(), 1, "tried once");
    assert!(
        o.host_error("h1").is_some_and(
            |e| e.contains("connection refused") && e.contains("settings.wait_for_hosts")
        ),
        "{:?}",
        o.host_error("h1")
    );
}

/// With `settings.wait_for_hosts` a host that refuses, then does not answer, then answers
/// is tried until it does (within the wait), whatever its retries.
#[tokio::test]
async fn a_host_still_starting_is_waited_for() {
    let d = tempfile::tempdir().expect("tmp");
    let h1 = mock("h1");
    h1.fail_connects(3, || TransportError::Connect {
        address: "10.0.0.1:22".into(),
        reason: "connection refused".into(),
        kind: kwin_engine::transport::ConnectKind::Refused,
    });
    h1.fail_connects(3, || TransportError::Connect {
        address: "10.0.0.1:22".into(),
        reason: "no answer within 10s".into(),
        kind: kwin_engine::transport::ConnectKind::NoAnswer,
    });
    h1.expect(probe());
    h1.expect(Expect::run("converge").sh());
    let hosts: Vec<(&str, Arc<dyn Transport>)> =
        vec![("h1", Arc::new(h1.clone()) as Arc<dyn Transport>)];
    let mut o = opts(Mode::Apply, &d.path().join(".kwin"));
    o.retries = 0;
    o.retry_delay = Duration::from_millis(1);
    o.wait_for_hosts = Duration::from_secs(60);
    let out = run_with(
        vec![file("h1", "a", &d.path().join("a"), "a")],
        &hosts,
        o,
        Scrubber::new(),
    )
    .await;
    h1.finish().expect("h1");
    assert_eq!(
        h1.connects(),
        7,
        "six failures waited through, then connected"
    );
    assert_eq!(out.status("h1", "a").0, TaskStatus::Changed);
}

#[tokio::test]
async fn unreachable_host_fails_alone_with_the_transport_message() {
    let d = tempfile::tempdir().expect("tmp");
    let (h1, h2) = (mock("h1"), mock("h2"));
    h1.fail_connects(3, || TransportError::Connect {
        address: "10.0.0.1:22".into(),
        reason: "no route to host".into(),
        kind: kwin_engine::transport::ConnectKind::Unreachable,
    });
    h2.expect(probe());
    h2.expect(Expect::run("h2 converges").sh());
    let tasks = vec![
        file("h1", "a", &d.path().join("h1-a"), "a"),
        file("h2", "a", &d.path().join("h2-a"), "a"),
        file("h2", "b", &d.path().join("h2-b"), "b").after("h1", "a"),
    ];
    let o = run(tasks, &[("h1", &h1), ("h2", &h2)], Mode::Apply, d.path()).await;
    h1.finish().expect("h1");
    h2.finish().expect("h2");
    assert_eq!(h1.connects(), 3, "one try and two retries");
    assert_eq!(
        o.host_error("h1").as_deref(),
        Some("cannot connect to 10.0.0.1:22: no route to host; to wait for a host that is still starting, set settings.wait_for_hosts (e.g. \"10m\")")
    );
    assert_eq!(
        o.status("h1", "a"),
        (TaskStatus::Skipped, "host h1 failed".into())
    );
    assert_eq!(
        o.status("h2", "b"),
        (TaskStatus::Skipped, "host h1 failed".into())
    );
    assert_eq!(o.status("h2", "a").0, TaskStatus::Changed);
    // The unreachable host is a failed host, apart from the (no) failed tasks: its task
    // and the one waiting for it are skipped.
    assert_eq!(summary(&o), (0, 1, 0, 2));
    assert_eq!((o.summary.hosts_failed, o.summary.hosts_reached), (1, 1));
}

#[tokio::test]
async fn plan_mode_probes_once_and_changes_nothing() {
    let d = tempfile::tempdir().expect("tmp");
    let a = d.path().join("a");
    std::fs::write(&a, "old").expect("seed");
    let h1 = mock("h1");
    h1.expect(probe());
    let tasks = vec![
        file("h1", "a", &a, "new"),
        file("h1", "b", &d.path().join("b"), "b"),
        task(
            "h1",
            "join",
            "consumer",
            json!({"path": d.path().join("j").display().to_string()}),
        )
        .input("token", "h1", "b", "token"),
    ];
    let o = run(tasks, &[("h1", &h1)], Mode::Plan, d.path()).await;
    h1.finish().expect("h1");
    assert_eq!(h1.runs(), 1);
    assert_eq!(std::fs::read_to_string(&a).expect("a"), "old");
    // A plan changes nothing: what it would change is `would_change`.
    assert_eq!(summary(&o), (0, 0, 0, 0));
    assert_eq!(o.summary.counts.would_change, 3);
    let (_, msg) = o.status("h1", "join");
    assert_eq!(msg, "needs `token` from h1/b (known after apply)");
}

#[tokio::test]
async fn reboot_waits_down_then_up_with_a_new_boot_id_and_reprobes() {
    let d = tempfile::tempdir().expect("tmp");
    let marker = d.path().join("rebooted");
    let h1 = mock("h1");
    h1.expect(probe());
    let m = marker.clone();
    h1.expect(
        Expect::run("trigger")
            .contains("boot_id")
            .contains("reboot")
            .with(move |_| {
                std::fs::write(&m, "yes").map_err(|e| TransportError::Local(e.to_string()))?;
                Ok(kwin_engine::transport::Output {
                    stdout: b"boot-1\n".to_vec(),
                    ..Default::default()
                })
            }),
    );
    // Down: the first connect after the trigger fails; up: one more failure, then it
    // answers with a new id. (The run's first connect works.)
    h1.ok_connects(1);
    h1.fail_connects(1, || TransportError::Connect {
        address: "h1:22".into(),
        reason: "refused".into(),
        kind: kwin_engine::transport::ConnectKind::Refused,
    });
    h1.fail_connects(1, || TransportError::Connect {
        address: "h1:22".into(),
        reason: "refused".into(),
        kind: kwin_engine::transport::ConnectKind::Refused,
    });
    h1.expect(
        Expect::run("boot id")
            .contains("boot_id")
            .stdout("boot-2\n"),
    );
    h1.expect(Expect::run("re-probe").contains("@@kwin").sh());
    let tasks = vec![task(
        "h1",
        "containers",
        "reboot",
        json!({"path": marker.display().to_string()}),
    )];
    let o = run(tasks, &[("h1", &h1)], Mode::Apply, d.path()).await;
    h1.finish().expect("h1");
    assert_eq!(
        o.status("h1", "containers"),
        (
            TaskStatus::Changed,
            "reboot: feature needs a restart".into()
        )
    );
}

#[tokio::test]
async fn reboot_refused_when_not_allowed() {
    let d = tempfile::tempdir().expect("tmp");
    let h1 = mock("h1");
    h1.expect(probe());
    let tasks = vec![task(
        "h1",
        "containers",
        "reboot",
        json!({"path": d.path().join("m").display().to_string()}),
    )];
    let mut o = opts(Mode::Apply, d.path());
    o.allow_reboot = false;
    let out = run_with(
        tasks,
        &[("h1", Arc::new(h1.clone()) as Arc<dyn Transport>)],
        o,
        Scrubber::new(),
    )
    .await;
    h1.finish().expect("h1");
    let (st, msg) = out.status("h1", "containers");
    assert_eq!(st, TaskStatus::Failed);
    assert!(msg.contains("allow_reboot"), "{msg}");
}

#[tokio::test]
async fn journal_and_logs_are_written_privately() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().expect("tmp");
    let state = d.path().join(".kwin");
    let h1 = mock("h1");
    h1.expect(probe());
    h1.expect(Expect::run("batch").sh());
    let o = opts(Mode::Apply, &state);
    let run_id = o.run_id.clone();
    let out = run_with(
        vec![file("h1", "a", &d.path().join("a"), "A")],
        &[("h1", Arc::new(h1.clone()) as Arc<dyn Transport>)],
        o,
        Scrubber::new(),
    )
    .await;
    h1.finish().expect("h1");
    assert_eq!(out.summary.counts.changed, 1);
    let journal = state.join("runs").join(format!("{run_id}.json"));
    let j: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&journal).expect("journal")).expect("json");
    assert_eq!(j["hosts"]["h1"]["tasks"][0]["status"], "changed");
    assert_eq!(j["summary"]["changed"], 1);
    let log = state.join("logs").join(&run_id).join("h1.log");
    let text = std::fs::read_to_string(&log).expect("log");
    let runs = text
        .lines()
        .filter(|l| l.starts_with("[+") && l.contains("] run #") && l.contains(" bytes, timeout"))
        .count();
    assert_eq!(runs, 2, "{text}");
    for p in [&state, &state.join("runs")] {
        assert_eq!(
            std::fs::metadata(p).expect("m").permissions().mode() & 0o777,
            0o700
        );
    }
    for p in [&journal, &log] {
        assert_eq!(
            std::fs::metadata(p).expect("m").permissions().mode() & 0o777,
            0o600
        );
    }
}

#[tokio::test]
async fn local_transport_converges_then_reports_no_changes() {
    use kwin_engine::transport::local::LocalTransport;
    let d = tempfile::tempdir().expect("tmp");
    let tasks = || {
        vec![
            file("local", "a", &d.path().join("a"), "alpha\n"),
            file("local", "b", &d.path().join("b"), "beta"),
            file("local", "a2", &d.path().join("a"), "alpha\n"),
        ]
    };
    let local: Arc<dyn Transport> = Arc::new(LocalTransport { become_root: false });
    let first = run_with(
        tasks(),
        &[("local", local.clone())],
        opts(Mode::Apply, d.path()),
        Scrubber::new(),
    )
    .await;
    assert_eq!(summary(&first), (1, 2, 0, 0));
    let second = run_with(
        tasks(),
        &[("local", local)],
        opts(Mode::Apply, d.path()),
        Scrubber::new(),
    )
    .await;
    assert_eq!(summary(&second), (3, 0, 0, 0));
}

#[tokio::test]
async fn parallelism_one_still_finishes_cross_host_waits() {
    let d = tempfile::tempdir().expect("tmp");
    let (h1, h2) = (mock("h1"), mock("h2"));
    // h2's task waits on h1's; h2 must give its permit back while it waits.
    h2.expect(probe());
    h2.expect(Expect::run("re-probe").sh());
    h2.expect(Expect::run("h2").sh());
    h1.expect(probe());
    h1.expect(Expect::run("h1").sh());
    let tasks = vec![
        file("h2", "b", &d.path().join("b"), "b").after("h1", "a"),
        file("h1", "a", &d.path().join("a"), "a"),
    ];
    let mut o = opts(Mode::Apply, d.path());
    o.parallelism = 1;
    let out = tokio::time::timeout(
        Duration::from_secs(20),
        run_with(
            tasks,
            &[
                ("h2", Arc::new(h2.clone()) as Arc<dyn Transport>),
                ("h1", Arc::new(h1.clone()) as Arc<dyn Transport>),
            ],
            o,
            Scrubber::new(),
        ),
    )
    .await
    .expect("no deadlock");
    h1.finish().expect("h1");
    h2.finish().expect("h2");
    assert_eq!(summary(&out), (0, 2, 0, 0));
}

#[tokio::test]
async fn cancel_lets_running_steps_finish_and_skips_the_rest() {
    let d = tempfile::tempdir().expect("tmp");
    let (h1, h2) = (mock("h1"), mock("h2"));
    h1.expect(probe());
    // c depends on nothing, so it is ordered before b and shares a's batch.
    h1.expect(
        Expect::run("a and c, sent before waiting on h2")
            .contains(w("a"))
            .contains(w("c"))
            .sh(),
    );
    h2.expect(probe());
    h2.expect(
        Expect::run("slow step, running when Ctrl-C comes")
            .delay(Duration::from_millis(600))
            .sh(),
    );
    let tasks = vec![
        file("h1", "a", &d.path().join("a"), "a"),
        file("h1", "b", &d.path().join("b"), "b").after("h2", "x"),
        file("h1", "c", &d.path().join("c"), "c"),
        file("h2", "x", &d.path().join("x"), "x"),
        file("h2", "y", &d.path().join("y"), "y").after("h1", "b"),
    ];
    let graph = TaskGraph::build(tasks).expect("graph");
    let (sink, mut rx) = EventSink::channel();
    let (canceller, cancel) = Cancel::pair();
    let hosts = vec![
        HostHandle {
            name: "h1".into(),
            transport: Arc::new(h1.clone()),
        },
        HostHandle {
            name: "h2".into(),
            transport: Arc::new(h2.clone()),
        },
    ];
    let run = execute(Run {
        modules: modules(&graph, &hosts),
        scope: kwin_engine::graph::scope::Scope::all(),
        graph: Arc::new(graph),
        hosts,
        options: opts(Mode::Apply, &d.path().join(".kwin")),
        scrubber: Scrubber::new(),
        events: sink,
        cancel,
    });
    // Ctrl-C once h1's first batch was sent and h2's slow step is running (each host's
    // probe and one script).
    let stop = async {
        while h1.runs() < 2 || h2.runs() < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        canceller.cancel();
    };
    let (summary, ()) = tokio::join!(run, stop);
    let mut events = Vec::new();
    while let Ok(e) = rx.try_recv() {
        events.push(e);
    }
    let o = Outcome { summary, events };
    h1.finish().expect("h1");
    h2.finish().expect("h2");
    assert!(o.summary.interrupted);
    assert_eq!(o.status("h1", "a").0, TaskStatus::Changed);
    // The step that was running finished and counts.
    assert_eq!(o.status("h2", "x").0, TaskStatus::Changed);
    for (h, t) in [("h1", "b"), ("h2", "y")] {
        assert_eq!(o.status(h, t), (TaskStatus::Skipped, "interrupted".into()));
    }
    let n = o.events.len();
    assert!(matches!(o.events[n - 2], Event::Interrupted {}));
    assert!(matches!(
        o.events[n - 1],
        Event::RunFinished {
            counts: Counts {
                changed: 3,
                skipped: 2,
                ..
            },
            ..
        }
    ));
    assert!(!d.path().join("b").exists());
}

#[tokio::test]
async fn a_change_with_a_put_sends_the_batch_first_and_runs_alone() {
    let d = tempfile::tempdir().expect("tmp");
    let big = d.path().join("big");
    let h1 = mock("h1");
    h1.expect(probe());
    h1.expect(
        Expect::run("the batch queued before it")
            .contains(w("a"))
            .sh(),
    );
    let tmp = format!("{}.tmp", big.display());
    let t2 = tmp.clone();
    h1.expect(Expect::put("put", tmp.as_str()).with(move |_| {
        std::fs::write(&t2, "big\n").map_err(|e| TransportError::Local(e.to_string()))?;
        Ok(Default::default())
    }));
    // The run step carries the re-read that verifies the change.
    h1.expect(
        Expect::run("the run step, verified in the same script")
            .contains("mv ")
            .contains(format!("cat {}", big.display()))
            .excludes(w("c"))
            .sh(),
    );
    h1.expect(Expect::run("the next batch").contains(w("c")).sh());
    let tasks = vec![
        file("h1", "a", &d.path().join("a"), "a"),
        task(
            "h1",
            "big",
            "put",
            json!({"path": big.display().to_string()}),
        ),
        file("h1", "c", &d.path().join("c"), "c"),
    ];
    let o = run(tasks, &[("h1", &h1)], Mode::Apply, d.path()).await;
    h1.finish().expect("h1");
    assert_eq!(summary(&o), (0, 3, 0, 0));
    assert_eq!(std::fs::read_to_string(&big).expect("big"), "big\n");
}

/// A delegated step that fails (a drain on the first control plane for a worker) stops only
/// what depends on it: a delegated step after it on the same host is skipped even when it
/// plans no change (it was planned while the failing step waited in the batch), and so is the
/// worker's own work after that step; the first control plane's unrelated work goes on.
#[tokio::test]
async fn a_failed_delegated_step_skips_its_dependents_even_when_they_plan_no_change() {
    let d = tempfile::tempdir().expect("tmp");
    let (same, own, up) = (
        d.path().join("same"),
        d.path().join("own"),
        d.path().join("up"),
    );
    std::fs::write(&same, "S").expect("write");
    let (h1, h2) = (mock("h1"), mock("h2"));
    h1.expect(probe());
    h1.expect(Expect::run("the drain fails").contains("exit 3").sh());
    // The drain touches anything: what comes after it is read again.
    h1.expect(Expect::run("re-read").contains("cat ").sh());
    h1.expect(Expect::run("h1's own work").contains(w("O")).sh());
    h2.expect(probe());
    let mut drain = task("h1", "drain@h2", "fail", json!({}));
    drain.on_behalf_of = Some("h2".into());
    let mut after = file("h1", "runtime@h2", &same, "S");
    after.on_behalf_of = Some("h2".into());
    after.order = vec![TaskId::new("h1", "drain@h2")];
    let mut upgrade = file("h2", "upgrade", &up, "U");
    upgrade.order = vec![TaskId::new("h1", "runtime@h2")];
    let tasks = vec![drain, after, upgrade, file("h1", "own", &own, "O")];
    let o = run(tasks, &[("h1", &h1), ("h2", &h2)], Mode::Apply, d.path()).await;
    for m in [&h1, &h2] {
        m.finish().expect("mock");
    }
    assert_eq!(o.status("h1", "drain@h2").0, TaskStatus::Failed);
    assert_eq!(
        o.status("h1", "runtime@h2"),
        (TaskStatus::Skipped, "h1/drain@h2 failed".into()),
        "{}",
        o.json()
    );
    assert_eq!(
        o.status("h2", "upgrade"),
        (TaskStatus::Skipped, "h1/drain@h2 failed".into())
    );
    assert_eq!(o.status("h1", "own").0, TaskStatus::Changed);
    assert!(!up.exists());
}
