//! The run phases of every command are the pipeline's (`kwin_engine::pipeline::run`; the
//! list in `engine/src/pipeline/mod.rs`): the gate before anything runs, then the lock, the
//! executor, and verify after a clean apply only. Checked over local hosts with a gate and a
//! verify that record when they were asked and answer as each case needs; the order is read
//! from the one event stream of the run.

use async_trait::async_trait;
use kwin_engine::diag::{Diagnostic, Diagnostics};
use kwin_engine::event::{Event, EventSink, Mode, Outcome};
use kwin_engine::exec::Cancel;
use kwin_engine::pipeline::{
    self, ChecksumMode, ClusterSteps, Command, Ctl, Flags, Gate, Prepared, Ran, Remote,
};
use kwin_modules::recipes::{request, Recipes};
use std::path::Path;

/// A gate that answers `gate` and a verify that answers `verified`; each says in the event
/// stream that it was asked, and on which host.
struct Recording {
    gate: Gate,
    verified: Outcome,
}

fn said(remote: &dyn Remote, what: String) {
    remote.emit(Event::Warning {
        host: None,
        message: what,
    });
}

#[async_trait]
impl ClusterSteps for Recording {
    async fn gate(&self, remote: &dyn Remote, _p: &Prepared, mode: Mode) -> Gate {
        said(remote, format!("gate {mode:?} on {}", remote.host()));
        self.gate.clone()
    }
    async fn verify(&self, remote: &dyn Remote, _p: &Prepared) -> Outcome {
        said(remote, format!("verify on {}", remote.host()));
        self.verified
    }
}

/// A plan of a cluster on two local hosts; `task` adds a `[[tasks]]` entry.
fn plan(dir: &Path, verify: bool, task: &str) {
    let text = format!(
        "[cluster]\nname = \"lab\"\nkubernetes_version = \"1.37.2\"\nverify = {verify}\n\n\
         [cni]\nplugin = \"flannel\"\n\n\
         [[hosts]]\nname = \"cp1\"\nnode_ip = \"10.0.0.1\"\nos = \"linux\"\ntransport = \"local\"\nrole = \"control-plane\"\n\n\
         [[hosts]]\nname = \"lw1\"\nnode_ip = \"10.0.0.2\"\nos = \"linux\"\ntransport = \"local\"\nrole = \"worker\"\n\n{task}"
    );
    std::fs::write(dir.join("plan.toml"), text).expect("plan");
}

/// What a command's run did: how it ended, and the stream's events, each as a short word
/// (`gate Apply on cp1`, `run_started`, `run_finished`, `verify_started`, `verify on cp1`).
fn run(
    dir: &Path,
    steps: &Recording,
    command: Command,
    no_verify: bool,
    limit: &[&str],
) -> (Ran, Vec<String>) {
    let path = dir.join("plan.toml");
    let mut req = request(&path, Recipes::Build, ChecksumMode::Known, no_verify);
    // The plan's own tasks only: no recipe runs on this machine.
    req.recipes = &[];
    req.recipe_steps = &[];
    req.limit = limit.iter().map(|s| s.to_string()).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let p = runtime
        .block_on(pipeline::prepare(&req))
        .unwrap_or_else(|d| panic!("the plan does not prepare:\n{d}"));
    let (events, mut rx) = EventSink::channel();
    let (_canceller, cancel): (_, Cancel) = Cancel::pair();
    let ran = runtime
        .block_on(pipeline::run(
            &p,
            &Flags::default(),
            Ctl { events, cancel },
            steps,
            command,
        ))
        .expect("the run");
    let mut seen = Vec::new();
    while let Ok(e) = rx.try_recv() {
        match e {
            Event::Warning { message, .. } => seen.push(message),
            Event::RunStarted { .. } => seen.push("run_started".into()),
            Event::RunFinished { .. } => seen.push("run_finished".into()),
            Event::VerifyStarted { host } => seen.push(format!("verify_started {host}")),
            _ => {}
        }
    }
    (ran, seen)
}

fn going(verified: Outcome) -> Recording {
    Recording {
        gate: Gate::Go,
        verified,
    }
}

#[test]
fn apply_gates_runs_then_verifies_in_one_stream() {
    let dir = tempfile::tempdir().expect("tempdir");
    plan(dir.path(), true, "");
    let (ran, seen) = run(
        dir.path(),
        &going(Outcome::Failed),
        Command::Apply,
        false,
        &[],
    );
    assert_eq!(
        seen,
        [
            "gate Apply on cp1",
            "run_started",
            "run_finished",
            "verify_started cp1",
            "verify on cp1"
        ]
    );
    // Verify's outcome is the command's.
    assert_eq!(ran.outcome, Outcome::Failed);
    // One session: one folder of host logs, the gate's and verify's beside the run's.
    let runs: Vec<_> = std::fs::read_dir(dir.path().join(".kwin/logs"))
        .expect("logs")
        .filter_map(Result::ok)
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let logs = runs[0].path();
    for log in ["cp1.gate.log", "cp1.verify.log", "cp1.log", "lw1.log"] {
        assert!(logs.join(log).exists(), "{log} in {}", logs.display());
    }
}

#[test]
fn a_failed_run_and_no_verify_are_not_verified() {
    let dir = tempfile::tempdir().expect("tempdir");
    let failing = "[[tasks]]\nname = \"fails\"\nmodule = \"command\"\non = { hosts = [\"lw1\"] }\nparams = { run = \"exit 3\", creates = \"/nonexistent/kwin-never\" }\n";
    plan(dir.path(), true, failing);
    let (ran, seen) = run(
        dir.path(),
        &going(Outcome::Success),
        Command::Apply,
        false,
        &[],
    );
    assert_eq!(ran.outcome, Outcome::Failed);
    assert_eq!(seen, ["gate Apply on cp1", "run_started", "run_finished"]);
    // `--no-verify`, and `cluster.verify = false`: a clean run, no verify.
    plan(dir.path(), true, "");
    let (ran, seen) = run(
        dir.path(),
        &going(Outcome::Failed),
        Command::Apply,
        true,
        &[],
    );
    assert_eq!((ran.outcome, seen.len()), (Outcome::Success, 3), "{seen:?}");
    plan(dir.path(), false, "");
    let (ran, seen) = run(
        dir.path(),
        &going(Outcome::Failed),
        Command::Apply,
        false,
        &[],
    );
    assert_eq!((ran.outcome, seen.len()), (Outcome::Success, 3), "{seen:?}");
}

#[test]
fn a_gate_that_stops_ends_the_command_before_any_host_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    plan(dir.path(), true, "");
    let mut why = Diagnostics::default();
    why.push(Diagnostic::error("upgrade-refused", "refused".to_string()));
    let steps = Recording {
        gate: Gate::Stop(Outcome::Failed, Some(why)),
        verified: Outcome::Success,
    };
    let (ran, seen) = run(dir.path(), &steps, Command::Apply, false, &[]);
    assert_eq!(seen, ["gate Apply on cp1"]);
    assert_eq!(ran.outcome, Outcome::Failed);
    assert_eq!(ran.gate.map(|d| d.0[0].code), Some("upgrade-refused"));
    // A warning of the gate goes on, and comes back with the run's end.
    let mut w = Diagnostics::default();
    w.push(Diagnostic::warning(
        "upgrade-unchecked",
        "unchecked".to_string(),
    ));
    let steps = Recording {
        gate: Gate::Warn(w),
        verified: Outcome::Success,
    };
    let command = Command::Plan {
        detailed_exitcode: true,
    };
    let (ran, seen) = run(dir.path(), &steps, command, false, &[]);
    assert_eq!(seen, ["gate Plan on cp1", "run_started", "run_finished"]);
    assert_eq!(ran.outcome, Outcome::Success);
    assert_eq!(ran.gate.map(|d| d.0[0].code), Some("upgrade-unchecked"));
}

#[test]
fn each_command_runs_its_phases_of_the_list() {
    let dir = tempfile::tempdir().expect("tempdir");
    plan(dir.path(), true, "");
    let steps = going(Outcome::Success);
    let plan_mode = Command::Plan {
        detailed_exitcode: false,
    };
    let (_, seen) = run(dir.path(), &steps, plan_mode, false, &[]);
    assert_eq!(seen, ["gate Plan on cp1", "run_started", "run_finished"]);
    let (_, seen) = run(dir.path(), &steps, Command::Reset, false, &[]);
    assert_eq!(seen, ["run_started", "run_finished"]);
    let (ran, seen) = run(dir.path(), &steps, Command::Verify, false, &[]);
    assert_eq!(seen, ["verify_started cp1", "verify on cp1"]);
    assert_eq!(ran.outcome, Outcome::Success);
    // `--limit` that leaves the first control plane out: no gate, nothing reaches it.
    let (_, seen) = run(dir.path(), &steps, Command::Apply, false, &["lw1"]);
    assert_eq!(seen[..2], ["run_started", "run_finished"]);
}
