//! A join-token-like task output never shows. A producer task on one host hands a secret to
//! consumer tasks on other hosts (the way `kube_join_data` hands its token to joining nodes);
//! the consumers put it into their scripts, quoted, and their hosts echo it back. The run is
//! the real executor over real shells (`LocalTransport`), with small modules defined here.
//! The token holds characters that quoting changes (`'`, `$`, `"`, `\`), so the check also
//! covers the forms a secret takes inside a logged script.
//!
//! Searched: every event (as `--output json` prints them), the host logs and the run journal.

use kwin_engine::event::{EventSink, Mode};
use kwin_engine::exec::{execute, Cancel, HostHandle, Run, RunOptions};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::graph::TaskGraph;
use kwin_engine::module::build::instantiate;
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Registry, Step, Touches,
};
use kwin_engine::quote::{ps_quote, sh_quote};
use kwin_engine::secret::Scrubber;
use kwin_engine::task::{InputRef, Origin, Task, TaskId};
use kwin_engine::transport::local::LocalTransport;
use kwin_engine::transport::{Shell, Transport};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

fn file_fact(path: &str) -> FactQuery {
    FactQuery {
        key: format!("file:{path}"),
        command: format!("cat {} 2>/dev/null", sh_quote(path)),
        path: None,
    }
}

fn exists(facts: &Facts, path: &str) -> Result<bool, ModuleError> {
    let key = format!("file:{path}");
    let out = facts
        .raw(&key)
        .ok_or(ModuleError::Fact(kwin_engine::fact::FactError::Missing(
            key,
        )))?;
    Ok(out.exit == 0)
}

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
        if exists(facts, &self.path)? {
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
        if exists(facts, &self.path)? {
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

fn param(p: &serde_json::Value, k: &str) -> String {
    p.get(k)
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_string()
}

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

fn walk(p: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let path = e.path();
            if path.is_dir() {
                v.extend(walk(&path));
            } else {
                v.push(path);
            }
        }
    }
    v
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

    let input = |t: Task| {
        let mut t = t;
        t.inputs.insert(
            "token".into(),
            InputRef {
                from: TaskId::new("cp", "join-data"),
                key: "token".into(),
            },
        );
        t
    };
    let task = |host: &str, name: &str, module: &str, params: serde_json::Value| {
        Task::new(TaskId::new(host, name), module, params).with_origin(Origin::User { index: 0 })
    };
    let tasks = vec![
        task(
            "cp",
            "join-data",
            "producer",
            json!({"path": at("cp-init"), "token_file": token_file.display().to_string()}),
        ),
        input(task(
            "w1",
            "join",
            "consumer",
            json!({"path": at("w1-joined")}),
        )),
        input(task(
            "w2",
            "join",
            "consumer",
            json!({"path": at("w2-joined")}),
        )),
        input(task("w3", "join", "failing", json!({}))),
    ];
    let graph = TaskGraph::build(tasks).expect("graph");
    let hosts: Vec<HostHandle> = ["cp", "w1", "w2", "w3"]
        .iter()
        .map(|h| HostHandle {
            name: h.to_string(),
            transport: Arc::new(LocalTransport { become_root: false }) as Arc<dyn Transport>,
        })
        .collect();
    let state = d.path().join(".kwin");
    let mut options = RunOptions::new(Mode::Apply, state.clone());
    options.retries = 0;
    options.step_timeout = Duration::from_secs(30);
    let (sink, mut rx) = EventSink::channel();
    let (_canceller, cancel) = Cancel::pair();
    let modules =
        instantiate(&graph, &|_| Shell::Posix, &Modules).unwrap_or_else(|e| panic!("build: {e:?}"));
    let summary = execute(Run {
        graph: Arc::new(graph),
        modules,
        hosts,
        options,
        scrubber: Scrubber::new(),
        events: sink,
        cancel,
    })
    .await;
    let mut events = Vec::new();
    while let Ok(e) = rx.try_recv() {
        events.push(serde_json::to_string(&e).expect("json"));
    }
    let events = events.join("\n");

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

    let mut forms = vec![token.clone()];
    for q in [sh_quote(&token), ps_quote(&token)] {
        forms.push(q.trim_matches('\'').to_string());
    }
    let js = serde_json::to_string(&token).expect("json");
    forms.push(js.trim_matches('"').to_string());
    let mut texts = vec![("events".to_string(), events)];
    let files = walk(&state);
    assert!(files.iter().any(|f| f.to_string_lossy().contains("/logs/")));
    for f in files {
        texts.push((
            f.display().to_string(),
            String::from_utf8_lossy(&std::fs::read(&f).unwrap_or_default()).into_owned(),
        ));
    }
    let mut leaks = Vec::new();
    for f in &forms {
        for (name, text) in &texts {
            if text.contains(f.as_str()) {
                let at = text.find(f.as_str()).unwrap_or(0);
                let ctx: String = text[at.saturating_sub(60)..].chars().take(140).collect();
                leaks.push(format!("{f:?} in {name}: ...{ctx}..."));
            }
        }
    }
    assert!(leaks.is_empty(), "the token leaked:\n{}", leaks.join("\n"));
}
