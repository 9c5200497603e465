//! A join-token-like task output never shows. A producer task on one host hands a secret to
//! consumer tasks on other hosts (the way `kube_join_data` hands its token to joining nodes);
//! the consumers put it into their scripts, quoted, and their hosts echo it back. The run is
//! the real executor over real shells (`LocalTransport`), with small modules defined here.
//! The token holds characters that quoting changes (`'`, `$`, `"`, `\`), so the check also
//! covers the forms a secret takes inside a logged script.
//!
//! Searched: every event (as `--output json` prints them), the host logs and the run journal.

use kwin_engine::event::Mode;
use kwin_engine::exec::RunOptions;
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Registry, Step, Touches,
};
use kwin_engine::quote::{ps_quote, sh_quote};
use kwin_engine::secret::Scrubber;
use kwin_engine::transport::local::LocalTransport;
use kwin_engine::transport::{Shell, Transport};
use kwin_testkit::exec::{file_content, file_fact, param, run, task, TaskExt};
use kwin_testkit::scan::{files, leaks};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// Creates `path` once; its output `token` is read from `token_file` on its host.
#[derive(Debug)]
struct Producer {
    path: String,
    token_file: String,
}

impl Module for Producer {
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
        Some(format!(
            "printf 'token=%s\\n' \"$(cat {})\"; echo endpoint=10.0.0.1:6443",
            sh_quote(&self.token_file)
        ))
    }
}

/// "Joins" with the token: writes it to `path` (quoted for sh, as modules do), echoes it on
/// stdout and stderr the way a chatty join command would, and mentions it in its diff.
#[derive(Debug)]
struct Consumer {
    path: String,
}

impl Module for Consumer {
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
            reason: format!("not joined (token {})", token.expose()),
            diff: Some(format!(
                "+join --token {} # ps: {}\n",
                sh_quote(token.expose()),
                ps_quote(token.expose())
            )),
            steps: vec![Step::Run(format!(
                "t={tok}\necho \"joining with $t\"; echo \"token $t accepted\" >&2\nprintf '%s' \"$t\" > {p}",
                tok = sh_quote(token.expose()),
                p = sh_quote(&self.path)
            ))],
            touches: Touches::Resources(vec![self.path.clone()]),
        }))
    }
}

/// A consumer whose join fails, printing the token in its error.
#[derive(Debug)]
struct FailingConsumer;

impl Module for FailingConsumer {
    fn facts(&self, _shell: Shell) -> Vec<FactQuery> {
        Vec::new()
    }
    fn plan(&self, _facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let token = ctx.inputs.get("token")?;
        Ok(Plan::Change(Change {
            action: Action::Run,
            reason: "not joined".into(),
            diff: None,
            steps: vec![Step::Run(format!(
                // A step never calls `exit` itself (steps share one script): a subshell does.
                "(echo error: token {} is invalid >&2; exit 9)",
                sh_quote(token.expose())
            ))],
            touches: Touches::Anything,
        }))
    }
}

struct Modules;

impl Registry for Modules {
    fn names(&self) -> Vec<&'static str> {
        vec!["producer", "consumer", "failing"]
    }
    fn build(
        &self,
        name: &str,
        _shell: Shell,
        p: &serde_json::Value,
    ) -> Result<Box<dyn Module>, ParamError> {
        Ok(match name {
            "producer" => Box::new(Producer {
                path: param(p, "path"),
                token_file: param(p, "token_file"),
            }),
            "consumer" => Box::new(Consumer {
                path: param(p, "path"),
            }),
            "failing" => Box::new(FailingConsumer),
            _ => return Err(ParamError::new(format!("unknown module `{name}`"))),
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_output_secret_never_shows() {
    let d = tempfile::tempdir().expect("tmp");
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|t| t.subsec_nanos())
        .unwrap_or(7);
    // Shaped like a kubeadm token, plus characters that quoting rewrites.
    let token = format!("ab{n:04x}.0123'4567$89\"ab\\cd");
    let token_file = d.path().join("cp-token");
    std::fs::write(&token_file, &token).expect("token file");
    let at = |f: &str| d.path().join(f).display().to_string();

    let tasks = vec![
        task(
            "cp",
            "join-data",
            "producer",
            json!({"path": at("cp-init"), "token_file": token_file.display().to_string()}),
        ),
        task("w1", "join", "consumer", json!({"path": at("w1-joined")})).input(
            "token",
            "cp",
            "join-data",
            "token",
        ),
        task("w2", "join", "consumer", json!({"path": at("w2-joined")})).input(
            "token",
            "cp",
            "join-data",
            "token",
        ),
        task("w3", "join", "failing", json!({})).input("token", "cp", "join-data", "token"),
    ];
    let hosts: Vec<(&str, Arc<dyn Transport>)> = ["cp", "w1", "w2", "w3"]
        .into_iter()
        .map(|h| {
            (
                h,
                Arc::new(LocalTransport { become_root: false }) as Arc<dyn Transport>,
            )
        })
        .collect();
    let state = d.path().join(".kwin");
    let mut options = RunOptions::new(Mode::Apply, state.clone());
    options.retries = 0;
    options.step_timeout = Duration::from_secs(30);
    let out = run(tasks, &hosts, options, Scrubber::new(), &Modules).await;
    let events = out.json();
    let summary = out.summary;

    // It worked: the token reached the consumers' hosts intact; w3's join failed.
    for w in ["w1", "w2"] {
        assert_eq!(
            std::fs::read_to_string(d.path().join(format!("{w}-joined"))).expect("joined"),
            token,
            "{events}"
        );
    }
    assert_eq!(
        (summary.counts.changed, summary.counts.failed),
        (3, 1),
        "{events}"
    );
    assert!(events.contains("exit code 9"), "{events}");

    let mut texts = vec![("events".to_string(), events)];
    let files = files(&state);
    assert!(files.iter().any(|(f, _)| f.contains("/logs/")));
    texts.extend(files);
    let leaks = leaks(&[("the token", token.clone())], &texts);
    assert!(leaks.is_empty(), "the token leaked:\n{}", leaks.join("\n"));
}
