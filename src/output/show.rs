//! `kwin show [plan.toml]`: the last run of that plan, read from its journal
//! (`.kwin/runs/<run-id>.json` next to the plan, the newest whose plan is this file;
//! `exec::journal::last_of`), written by `exec::journal` from the events
//! the run showed): the same table and last line the run printed, every failure, and its
//! host logs' folder; with `--output json` the same as events (`host_finished`, `task_finished`
//! of the failures, `run_finished`, `logs`) and the summary.

use super::{human::Human, json::Json, sink::Sink, Output};
use crate::args::OutputFormat;
use kwin_engine::event::{Counts, Event, Mode, Outcome, TaskStatus};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};

fn status(v: &Value) -> Option<TaskStatus> {
    Some(match v.as_str()? {
        "ok" => TaskStatus::Ok,
        "changed" => TaskStatus::Changed,
        "would_change" => TaskStatus::WouldChange,
        "failed" => TaskStatus::Failed,
        "skipped" => TaskStatus::Skipped,
        _ => return None,
    })
}

fn num(v: &Value) -> usize {
    v.as_u64().unwrap_or(0) as usize
}

/// The events that tell `journal`'s run again.
fn events(j: &Value, state_dir: &Path) -> (Mode, Vec<Event>) {
    let mode = if j["mode"] == "plan" {
        Mode::Plan
    } else {
        Mode::Apply
    };
    let run_id = j["run_id"].as_str().unwrap_or_default().to_string();
    let mut v = Vec::new();
    let mut total = Counts::default();
    let (mut reached, mut failed_hosts) = (0, 0);
    let hosts = j["hosts"].as_object().cloned().unwrap_or_default();
    for (host, h) in &hosts {
        let mut counts = Counts::default();
        for t in h["tasks"].as_array().into_iter().flatten() {
            let Some(st) = status(&t["status"]) else {
                continue;
            };
            counts.add(st);
            if st == TaskStatus::Failed {
                v.push(Event::TaskFinished {
                    host: host.clone(),
                    task: t["task"].as_str().unwrap_or_default().to_string(),
                    status: st,
                    message: t["message"].as_str().map(str::to_string),
                    duration_ms: t["duration_ms"].as_u64().unwrap_or(0),
                });
            }
        }
        reached += usize::from(!h["connected_ms"].is_null());
        let error = h["error"].as_str().map(str::to_string);
        failed_hosts += usize::from(error.is_some());
        total += counts;
        v.push(Event::HostFinished {
            host: host.clone(),
            counts,
            duration_ms: h["duration_ms"].as_u64().unwrap_or(0),
            error,
        });
    }
    let s = &j["summary"];
    v.push(Event::RunFinished {
        hosts: if s.is_null() {
            hosts.len()
        } else {
            num(&s["hosts"])
        },
        hosts_reached: s["hosts_reached"].as_u64().map_or(reached, |n| n as usize),
        hosts_failed: s["hosts_failed"]
            .as_u64()
            .map_or(failed_hosts, |n| n as usize),
        counts: total,
        duration_ms: j["duration_ms"].as_u64().unwrap_or(0),
    });
    if j["interrupted"] == true {
        v.insert(0, Event::Interrupted {});
    }
    v.push(Event::Logs {
        dir: state_dir.join("logs").join(&run_id).display().to_string(),
        run_id,
    });
    (mode, v)
}

/// Print the last run of `plan` (its `.kwin/` beside it).
pub fn show(plan: &Path, out: &Output) -> anyhow::Result<Outcome> {
    let base = match plan.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let base = std::path::absolute(&base).unwrap_or(base);
    let state_dir = base.join(".kwin");
    // The newest run of this plan: the directory's other plans keep theirs there too.
    let Some((_, j)) = kwin_engine::exec::journal::last_of(&state_dir, plan) else {
        anyhow::bail!(
            "no run of {} recorded in {}: run `kwin plan` or `kwin apply` first",
            plan.display(),
            state_dir.join("runs").display()
        );
    };
    let (mode, events) = events(&j, &state_dir);
    let what = match mode {
        Mode::Plan => "plan",
        Mode::Apply => "apply",
    };
    let mut sink: Box<dyn Sink> = match out.format {
        OutputFormat::Json => Box::new(Json),
        OutputFormat::Human => {
            let head = format!(
                "run {} ({what} of {}), started {}",
                j["run_id"].as_str().unwrap_or("?"),
                j["plan"].as_str().unwrap_or("?"),
                j["started"].as_str().unwrap_or("?"),
            );
            let _ = writeln!(std::io::stdout().lock(), "{}", super::terminal(&head));
            Box::new(Human::new(mode, false, what))
        }
    };
    for e in events {
        out.tally().record(&e);
        if out.format == OutputFormat::Human && matches!(e, Event::Logs { .. }) {
            continue;
        }
        sink.event(e);
    }
    sink.end();
    Ok(Outcome::Success)
}
