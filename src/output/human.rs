//! Human output of a run's events: on a terminal a progress line for the run (its clock keeps
//! running while hosts connect) and one per host (current task, counts, elapsed) with
//! changes, failures, connection retries and (for `plan`) diffs printed above the bars;
//! otherwise (and on `TERM=dumb`) plain lines (`cp1: changed motd (create: missing)`; under
//! `kwin plan` `cp1: create motd (missing)` with the diff indented below; `still running:
//! …` for long tasks). Then the summary table (`failed`: the host's failed tasks, a host
//! that failed as a whole marked `host failed`) and a final line:
//! `apply: 3 hosts, 12 ok, 8 changed, 0 failed, 0 skipped in 1.4s` (plus "(no changes)"
//! when nothing changed and nothing failed; `no host reached` when kwin connected to none).
//! `-v`: every script and its output, indented under `host: what`. `kwin verify`: one row
//! per check, printed as a table.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use kwin_engine::event::{CheckCounts, CheckResult, Counts, Event, Mode, Stream, TaskStatus};
use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

#[derive(Debug, Default, Clone)]
struct HostRow {
    ok: usize,
    changed: usize,
    failed: usize,
    skipped: usize,
    duration_ms: u64,
    error: Option<String>,
    current: Option<String>,
}

/// `1 host`, `2 hosts`.
pub fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

impl super::sink::Sink for Human {
    fn event(&mut self, e: Event) {
        self.handle(e)
    }
    fn end(&mut self) {
        self.end_bars();
    }
}

pub struct Human {
    mode: Mode,
    /// The run's name in the first and last lines: plan, apply, reset.
    what: &'static str,
    /// Tests read the lines here instead of stdout.
    capture: Option<std::cell::RefCell<Vec<String>>>,
    bars: Option<MultiProgress>,
    /// The run's own line: its clock runs from `run_started` on, also while no host has
    /// answered yet.
    run_bar: Option<ProgressBar>,
    host_bars: BTreeMap<String, ProgressBar>,
    rows: BTreeMap<String, HostRow>,
    /// `kwin verify`: one row per check, printed as a table at its summary.
    checks: Vec<CheckRow>,
    /// Warnings about a host, repeated after the summary so a run ends with them.
    host_warnings: Vec<String>,
    /// `-v`: the host, run and stream whose output the last lines were; more of it (the
    /// next lines as they arrive) goes on under the same heading.
    output_of: Option<(String, String, Stream)>,
}

#[derive(Debug, Clone)]
struct CheckRow {
    name: String,
    route: String,
    result: CheckResult,
    detail: String,
}

fn secs(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

/// `1h5m`, `10m`, `1m30s`, `40s`: a wait as a person reads it (whole seconds).
fn span(ms: u64) -> String {
    let s = ms / 1000;
    let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// `kwin facts`: a host's own facts as `key:` / value rows, those the host gave.
fn system_lines(f: &kwin_engine::event::HostSystem) -> Vec<(&'static str, String)> {
    let mut rows = Vec::new();
    let os = match (&f.name, &f.id, &f.version) {
        (Some(n), _, Some(v)) if f.os == "linux" => {
            Some(format!("{n} ({} {v})", f.id.as_deref().unwrap_or("linux")))
        }
        (Some(n), _, _) => Some(n.clone()),
        (None, Some(i), Some(v)) => Some(format!("{i} {v}")),
        (None, Some(i), None) => Some(i.clone()),
        (None, None, _) => None,
    };
    rows.push((
        "os:",
        os.unwrap_or_else(|| format!("{} (it did not say which)", f.os)),
    ));
    if let Some(b) = &f.windows_build {
        rows.push(("build:", b.clone()));
    }
    let kernel: Vec<&str> = [&f.kernel, &f.arch]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect();
    if !kernel.is_empty() {
        rows.push(("kernel:", kernel.join(" ")));
    }
    if let Some(h) = &f.hostname {
        rows.push(("hostname:", h.clone()));
    }
    if let Some(c) = f.cpus {
        rows.push(("cpus:", c.to_string()));
    }
    if let Some(m) = f.memory_bytes {
        rows.push((
            "memory:",
            format!("{:.1} GiB", m as f64 / (1u64 << 30) as f64),
        ));
    }
    if let Some(c) = &f.cgroup {
        rows.push(("cgroup:", c.clone()));
    }
    let addresses: Vec<String> = f
        .addresses
        .iter()
        .map(|a| match &a.interface {
            Some(i) => format!("{} ({i})", a.address),
            None => a.address.clone(),
        })
        .collect();
    rows.push((
        "addresses:",
        if addresses.is_empty() {
            "none besides loopback and link-local".to_string()
        } else {
            addresses.join(", ")
        },
    ));
    rows
}

fn indent(text: &str, by: &str) -> String {
    text.lines()
        .map(|l| format!("{by}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn spinner(pb: &ProgressBar, prefix: &str) {
    let style = ProgressStyle::with_template("{spinner} {prefix:<12} {elapsed:>4} {wide_msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    pb.set_style(style);
    pb.set_prefix(super::terminal(prefix).into_owned());
    pb.enable_steady_tick(Duration::from_millis(120));
}

impl Human {
    /// The human form of a run of `mode` named `what`; progress bars when `tty`.
    pub fn new(mode: Mode, tty: bool, what: &'static str) -> Self {
        let bars = tty.then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stdout()));
        Human {
            mode,
            what,
            capture: None,
            bars,
            run_bar: None,
            host_bars: BTreeMap::new(),
            rows: BTreeMap::new(),
            checks: Vec::new(),
            host_warnings: Vec::new(),
            output_of: None,
        }
    }

    /// Every line this renderer prints, through [`super::terminal`]: host text shows its
    /// control characters as escapes.
    fn line(&self, s: String) {
        let s = super::terminal(&s).into_owned();
        if let Some(c) = &self.capture {
            c.borrow_mut().extend(s.lines().map(str::to_string));
            return;
        }
        match &self.bars {
            Some(mp) => {
                let _ = mp.println(s);
            }
            None => {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{s}");
                let _ = out.flush();
            }
        }
    }

    fn bar(&mut self, host: &str) -> Option<&ProgressBar> {
        let mp = self.bars.as_ref()?;
        if !self.host_bars.contains_key(host) {
            let pb = mp.add(ProgressBar::new_spinner());
            spinner(&pb, host);
            self.host_bars.insert(host.to_string(), pb);
        }
        self.host_bars.get(host)
    }

    fn update_bar(&mut self, host: &str) {
        let row = self.rows.get(host).cloned().unwrap_or_default();
        let verb = self.verb();
        let msg = format!(
            "{} ok, {} {verb}, {} failed, {} skipped{}",
            row.ok,
            row.changed,
            row.failed,
            row.skipped,
            row.current
                .as_deref()
                .map(|c| format!("  [{c}]"))
                .unwrap_or_default()
        );
        if let Some(pb) = self.bar(host) {
            pb.set_message(super::terminal(&msg).into_owned());
        }
    }

    fn verb(&self) -> &'static str {
        match self.mode {
            Mode::Plan => "to change",
            Mode::Apply => "changed",
        }
    }

    /// The progress bars end before a summary: cleared, and lines are plain from here on.
    fn end_bars(&mut self) {
        if let Some(pb) = self.run_bar.take() {
            pb.finish_and_clear();
        }
        for pb in self.host_bars.values() {
            pb.finish_and_clear();
        }
        if let Some(mp) = self.bars.take() {
            let _ = mp.clear();
        }
    }

    fn handle(&mut self, e: Event) {
        let output_of = match &e {
            Event::Output {
                host, what, stream, ..
            } => Some((host.clone(), what.clone(), *stream)),
            _ => None,
        };
        let goes_on = output_of.is_some() && output_of == self.output_of;
        self.output_of = output_of;
        match e {
            Event::RunStarted { hosts, tasks, .. } => {
                let what = self.what;
                let head = match what {
                    "exec" | "facts" => plural(hosts, "host"),
                    _ => format!("{}, {}", plural(hosts, "host"), plural(tasks, "task")),
                };
                self.line(format!("{what}: {head}"));
                if let Some(mp) = &self.bars {
                    let pb = mp.insert(0, ProgressBar::new_spinner());
                    spinner(&pb, what);
                    pb.set_message(super::terminal(&head).into_owned());
                    self.run_bar = Some(pb);
                }
            }
            Event::ConnectRetry {
                host,
                attempt,
                error,
                delay_ms,
                waited_ms: Some(waited),
                wait_ms: Some(wait),
            } => {
                let l = format!(
                    "{host}: waiting for the host to answer, {} of {} (settings.wait_for_hosts), next try in {}: {error}",
                    span(waited),
                    span(wait),
                    span(delay_ms)
                );
                self.line(l);
                if let Some(pb) = self.bar(&host) {
                    pb.set_message(format!(
                        "waiting for the host, {} of {} (attempt {} next)",
                        span(waited),
                        span(wait),
                        attempt + 1
                    ));
                }
            }
            Event::ConnectRetry {
                host,
                attempt,
                error,
                delay_ms,
                ..
            } => {
                let l = format!(
                    "{host}: cannot connect (attempt {attempt}): {error}; retrying in {}",
                    secs(delay_ms)
                );
                self.line(l);
                if let Some(pb) = self.bar(&host) {
                    pb.set_message(format!("connecting (attempt {} next)", attempt + 1));
                }
            }
            Event::Script { host, what, script } => {
                self.line(format!("{host}: {what}: script"));
                self.line(indent(script.trim_end_matches('\n'), "    | "));
            }
            Event::Output {
                host,
                what,
                stream,
                text,
            } => {
                let stream = match stream {
                    Stream::Stdout => "stdout",
                    Stream::Stderr => "stderr",
                };
                if !goes_on {
                    self.line(format!("{host}: {what}: {stream}"));
                }
                let text = text.trim_end_matches(['\n', '\r']);
                self.line(match text {
                    "" => "    >".to_string(),
                    _ => indent(text, "    > "),
                });
            }
            Event::StillRunning {
                host,
                task,
                elapsed_s,
            } => {
                if self.bars.is_none() {
                    self.line(format!("still running: {host} {task} ({elapsed_s}s)"));
                }
            }
            Event::Upgrade {
                from,
                to,
                steps,
                notes,
            } => self.line(upgrade_section(&from, &to, &steps, &notes)),
            Event::Diagnostic(_)
            | Event::Logs { .. }
            | Event::Kubeconfig { .. }
            | Event::VerifyStarted { .. }
            | Event::Summary(_) => {}
            Event::HostConnected { host, .. } | Event::HostProbed { host, .. } => {
                self.rows.entry(host.clone()).or_default();
                self.update_bar(&host);
            }
            Event::HostReadOnly {
                host,
                tasks,
                for_hosts,
                acting,
            } => {
                let mut l = format!("{host}: read only");
                if !tasks.is_empty() {
                    l.push_str(&format!(
                        " ({} for {})",
                        tasks.join(", "),
                        for_hosts.join(", ")
                    ));
                }
                if !acting.is_empty() {
                    l.push_str(&format!(
                        "; runs {} for the chosen hosts",
                        acting.join(", ")
                    ));
                }
                self.line(l);
            }
            Event::ExecResult {
                host,
                exit,
                stdout,
                stderr,
                error,
                duration_ms,
            } => {
                let how = match (exit, &error) {
                    (_, Some(e)) => format!("failed: {e}"),
                    (Some(c), None) => format!("exit {c} in {}", secs(duration_ms)),
                    (None, None) => "no exit status".to_string(),
                };
                let mut block = format!("=== {host}: {how}");
                for text in [&stdout, &stderr] {
                    if !text.is_empty() {
                        block.push('\n');
                        block.push_str(text.trim_end_matches('\n'));
                    }
                }
                self.line(block);
            }
            Event::HostFacts {
                host,
                system,
                system_error,
                facts,
            } => {
                let mut block = format!("{host}:");
                match (&system, &system_error) {
                    (Some(f), _) => {
                        for (key, value) in system_lines(f) {
                            block.push_str(&format!("\n  {key:<10} {value}"));
                        }
                    }
                    (None, e) => block.push_str(&format!(
                        "\n  what the host is could not be read: {}",
                        e.as_deref().unwrap_or("no answer")
                    )),
                }
                let failed = facts.values().filter(|a| a.exit != 0).count();
                block.push_str(&format!(
                    "\n  {:<10} {} for the plan's tasks{} (`--output json` lists each, `-v` shows the probe's output)",
                    "probe:",
                    plural(facts.len(), "answer"),
                    if failed > 0 {
                        format!(", {failed} with a non-zero exit")
                    } else {
                        String::new()
                    }
                ));
                self.line(block);
            }
            Event::TaskStarted { host, task } => {
                // `kwin verify` has few, long phases: say each one also without a terminal.
                if self.what == "verify" && self.bars.is_none() {
                    self.line(format!("{host}: {task}"));
                }
                self.rows.entry(host.clone()).or_default().current = Some(task);
                self.update_bar(&host);
            }
            Event::TaskPlanned {
                host,
                task,
                change,
                action,
                reason,
                diff,
                ..
            } => {
                if self.mode == Mode::Plan && change {
                    let head = match action {
                        Some(a) => format!("{host}: {a} {task} ({reason})"),
                        None => format!("{host}: change {task} ({reason})"),
                    };
                    self.line(head);
                    if let Some(d) = diff.filter(|d| !d.trim().is_empty()) {
                        self.line(indent(d.trim_end_matches('\n'), "    "));
                    }
                }
            }
            Event::TaskFinished {
                host,
                task,
                status,
                message,
                ..
            } => {
                let row = self.rows.entry(host.clone()).or_default();
                row.current = None;
                match status {
                    TaskStatus::Ok => row.ok += 1,
                    TaskStatus::Changed | TaskStatus::WouldChange => row.changed += 1,
                    TaskStatus::Failed => row.failed += 1,
                    TaskStatus::Skipped => row.skipped += 1,
                }
                let msg = message.unwrap_or_default();
                match status {
                    TaskStatus::Changed => self.line(format!("{host}: changed {task} ({msg})")),
                    TaskStatus::Failed => self.line(format!("{host}: failed {task}: {msg}")),
                    // A host that failed as a whole says so once, in its own line.
                    TaskStatus::Skipped if msg == format!("host {host} failed") => {}
                    TaskStatus::Skipped => self.line(format!("{host}: skipped {task} ({msg})")),
                    _ => {}
                }
                self.update_bar(&host);
            }
            Event::HostFinished {
                host,
                counts,
                duration_ms,
                error,
            } => {
                let row = self.rows.entry(host.clone()).or_default();
                row.ok = counts.ok;
                row.changed = counts.changed + counts.would_change;
                row.failed = counts.failed;
                row.skipped = counts.skipped;
                row.duration_ms = duration_ms;
                row.error = error.clone();
                if let Some(err) = &error {
                    self.line(format!("{host}: failed: {err}"));
                }
                let done = match &error {
                    Some(_) => "failed".to_string(),
                    None => format!("done in {}", secs(duration_ms)),
                };
                if let Some(pb) = self.bar(&host) {
                    pb.finish_with_message(done);
                }
            }
            Event::Warning { host, message } => match host {
                Some(h) => {
                    let l = format!("warning: {h}: {message}");
                    self.line(l.clone());
                    self.host_warnings.push(l);
                }
                None => self.line(format!("warning: {message}")),
            },
            Event::Check {
                name,
                from,
                to,
                result,
                detail,
            } => {
                let route = if from == "-" || from.is_empty() {
                    to
                } else {
                    format!("{from} → {to}")
                };
                self.checks.push(CheckRow {
                    name,
                    route,
                    result,
                    detail,
                });
            }
            Event::VerifyFinished {
                counts:
                    CheckCounts {
                        checks,
                        passed,
                        failed,
                        skipped,
                    },
                duration_ms,
            } => {
                self.end_bars();
                self.check_table();
                self.line(format!(
                    "verify: {}, {passed} passed, {failed} failed, {skipped} skipped in {}",
                    plural(checks, "check"),
                    secs(duration_ms)
                ));
            }
            Event::Interrupted {} => {
                self.line("interrupted: no new tasks were started".to_string())
            }
            Event::RunFinished {
                hosts,
                hosts_reached,
                hosts_failed,
                counts,
                duration_ms,
            } => {
                self.end_bars();
                let line = match self.what {
                    // Hosts, not tasks: `exec` ran a command on each (of unknown effect),
                    // `facts` read each.
                    "exec" => format!(
                        "exec: {}, {} ok, {} failed in {}",
                        plural(hosts, "host"),
                        counts.ok,
                        counts.failed,
                        secs(duration_ms)
                    ),
                    "facts" => format!(
                        "facts: {}, {} failed in {}",
                        plural(hosts, "host"),
                        hosts_failed,
                        secs(duration_ms)
                    ),
                    _ => {
                        self.table();
                        self.last_line(hosts, hosts_reached, hosts_failed, counts, duration_ms)
                    }
                };
                self.line(line);
                for w in std::mem::take(&mut self.host_warnings) {
                    self.line(w);
                }
            }
        }
    }

    /// `apply: 3 hosts, 12 ok, 8 changed, 0 failed, 0 skipped in 1.4s`: `failed` counts
    /// tasks, as the table's column; hosts that failed as a whole are counted after the
    /// hosts; a run that reached no host says so, never "(no changes)".
    fn last_line(
        &self,
        hosts: usize,
        reached: usize,
        hosts_failed: usize,
        counts: Counts,
        duration_ms: u64,
    ) -> String {
        let Counts {
            ok,
            changed,
            would_change,
            failed,
            skipped,
        } = counts;
        let changed = match self.mode {
            Mode::Plan => would_change,
            Mode::Apply => changed,
        };
        let head = if hosts > 0 && reached == 0 {
            format!("no host reached ({} failed)", plural(hosts, "host"))
        } else if hosts_failed > 0 {
            format!("{} ({hosts_failed} failed)", plural(hosts, "host"))
        } else {
            plural(hosts, "host")
        };
        let mut last = format!(
            "{}: {head}, {ok} ok, {changed} {}, {failed} failed, {skipped} skipped in {}",
            self.what,
            self.verb(),
            secs(duration_ms)
        );
        if changed == 0 && failed == 0 && hosts_failed == 0 {
            last.push_str(" (no changes)");
        }
        last
    }

    /// `check  from → to  result  detail`, one row per check of `kwin verify`.
    fn check_table(&self) {
        if self.checks.is_empty() {
            return;
        }
        let width = |f: fn(&CheckRow) -> usize, head: &str| {
            self.checks
                .iter()
                .map(f)
                .max()
                .unwrap_or(0)
                .max(head.chars().count())
        };
        let wn = width(|r| r.name.chars().count(), "check");
        let wr = width(|r| r.route.chars().count(), "from → to");
        let pad = |s: &str, w: usize| {
            let n = s.chars().count();
            format!("{s}{}", " ".repeat(w.saturating_sub(n)))
        };
        let mut s = format!(
            "{}  {}  {:<6}  detail",
            pad("check", wn),
            pad("from → to", wr),
            "result"
        );
        for r in &self.checks {
            let result = match r.result {
                CheckResult::Pass => "pass",
                CheckResult::Fail => "FAIL",
                CheckResult::Skip => "skip",
            };
            s.push_str(&format!(
                "\n{}  {}  {:<6}  {}",
                pad(&r.name, wn),
                pad(&r.route, wr),
                result,
                r.detail
            ));
        }
        self.line(s);
    }

    fn table(&self) {
        if self.rows.is_empty() {
            return;
        }
        let w = self.rows.keys().map(|h| h.len()).max().unwrap_or(4).max(4);
        let changed = self.verb();
        let mut s = format!(
            "{:<w$}  {:>5}  {:>9}  {:>6}  {:>7}  {:>7}",
            "host", "ok", changed, "failed", "skipped", "time"
        );
        for (host, r) in &self.rows {
            s.push_str(&format!(
                "\n{:<w$}  {:>5}  {:>9}  {:>6}  {:>7}  {:>7}{}",
                host,
                r.ok,
                r.changed,
                r.failed,
                r.skipped,
                secs(r.duration_ms),
                if r.error.is_some() {
                    "  host failed"
                } else {
                    ""
                }
            ));
        }
        self.line(s);
    }
}

/// `upgrade: v1.31.4 → v1.32.5 (...)` and one aligned row per step, then the notes.
fn upgrade_section(
    from: &str,
    to: &str,
    steps: &[kwin_engine::event::UpgradeStep],
    notes: &[String],
) -> String {
    let mut s = if from == to {
        format!(
            "upgrade: Kubernetes v{to} (unchanged; version skew policy checked), in this order:"
        )
    } else {
        format!("upgrade: v{from} → v{to} (version skew policy checked), in this order:")
    };
    let head = ["step", "node", "part", "now", "then"];
    let cells: Vec<[String; 5]> = steps
        .iter()
        .map(|r| {
            [
                r.step.to_string(),
                r.node.clone(),
                r.part.clone(),
                r.now.clone(),
                r.then.clone(),
            ]
        })
        .collect();
    let width = |i: usize| {
        cells
            .iter()
            .map(|c| c[i].chars().count())
            .chain([head[i].len()])
            .max()
            .unwrap_or(0)
    };
    let w: Vec<usize> = (0..4).map(width).collect();
    let row = |c: [&str; 5]| {
        format!(
            "\n  {:<w0$}  {:<w1$}  {:<w2$}  {:<w3$}  {}",
            c[0],
            c[1],
            c[2],
            c[3],
            c[4],
            w0 = w[0],
            w1 = w[1],
            w2 = w[2],
            w3 = w[3]
        )
    };
    s.push_str(&row(head));
    for c in &cells {
        s.push_str(&row([&c[0], &c[1], &c[2], &c[3], &c[4]]));
    }
    for n in notes {
        s.push_str(&format!("\n  {n}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(mode: Mode, events: Vec<Event>) -> Vec<String> {
        let mut h = Human::new(
            mode,
            false,
            match mode {
                Mode::Plan => "plan",
                Mode::Apply => "apply",
            },
        );
        h.capture = Some(Default::default());
        for e in events {
            h.handle(e);
        }
        h.capture.map(|c| c.into_inner()).unwrap_or_default()
    }

    /// `kwin facts` of a Windows host: its build and kernel, no cgroup; of a host whose
    /// answer could not be read: why.
    #[test]
    fn host_facts_read_as_rows() {
        use kwin_engine::event::{HostAddress, HostSystem};
        let windows = HostSystem {
            os: "windows".into(),
            name: Some("Windows Server 2022 Datacenter".into()),
            id: Some("windows".into()),
            version: Some("10.0.20348".into()),
            kernel: Some("10.0.20348.2227".into()),
            arch: Some("AMD64".into()),
            hostname: Some("WW1".into()),
            cpus: Some(4),
            memory_bytes: Some(16 << 30),
            cgroup: None,
            windows_build: Some("10.0.20348".into()),
            addresses: vec![HostAddress {
                interface: Some("Ethernet".into()),
                address: "10.10.1.6/24".into(),
            }],
        };
        let lines = render(
            Mode::Plan,
            vec![
                Event::HostFacts {
                    host: "ww1".into(),
                    system: Some(windows),
                    system_error: None,
                    facts: Default::default(),
                },
                Event::HostFacts {
                    host: "lw1".into(),
                    system: None,
                    system_error: Some("fact command failed with exit code 1: denied".into()),
                    facts: Default::default(),
                },
            ],
        );
        let text = lines.join("\n");
        assert!(
            text.starts_with("ww1:\n  os:        Windows Server 2022 Datacenter\n  build:     10.0.20348\n  kernel:    10.0.20348.2227 AMD64\n  hostname:  WW1\n  cpus:      4\n  memory:    16.0 GiB\n  addresses: 10.10.1.6/24 (Ethernet)\n  probe:     0 answers for the plan's tasks (`--output json` lists each, `-v` shows the probe's output)\n"),
            "{text}"
        );
        assert!(
            text.contains("\nlw1:\n  what the host is could not be read: fact command failed with exit code 1: denied\n"),
            "{text}"
        );
    }

    fn finished(host: &str, task: &str, status: TaskStatus, msg: &str) -> Event {
        Event::TaskFinished {
            host: host.into(),
            task: task.into(),
            status,
            message: Some(msg.into()),
            duration_ms: 5,
        }
    }

    /// The end of a run of two hosts, all reached; `changed` are `would_change` in plan
    /// mode.
    fn summary(ok: usize, changed: usize, failed: usize, skipped: usize) -> Event {
        finished_run(Mode::Apply, (2, 2, 0), [ok, changed, failed, skipped])
    }

    fn finished_run(
        mode: Mode,
        (hosts, hosts_reached, hosts_failed): (usize, usize, usize),
        [ok, changed, failed, skipped]: [usize; 4],
    ) -> Event {
        let (changed, would_change) = match mode {
            Mode::Apply => (changed, 0),
            Mode::Plan => (0, changed),
        };
        Event::RunFinished {
            hosts,
            hosts_reached,
            hosts_failed,
            counts: Counts {
                ok,
                changed,
                would_change,
                failed,
                skipped,
            },
            duration_ms: 1400,
        }
    }

    /// The upgrade section says when Kubernetes stays where it is (a containerd change only).
    #[test]
    fn an_upgrade_without_a_new_kubernetes_says_so() {
        let row = kwin_engine::event::UpgradeStep {
            step: 1,
            node: "lw1".into(),
            part: "worker".into(),
            now: "containerd 1.7.24".into(),
            then: "drain, containerd 1.7.27 installed, restarted, uncordon".into(),
        };
        let s = upgrade_section("1.31.4", "1.31.4", std::slice::from_ref(&row), &[]);
        assert!(
            s.starts_with("upgrade: Kubernetes v1.31.4 (unchanged; version skew policy checked)"),
            "{s}"
        );
        assert!(
            s.contains("containerd 1.7.24  drain, containerd 1.7.27"),
            "{s}"
        );
        let s = upgrade_section("1.31.4", "1.32.5", &[row], &[]);
        assert!(s.starts_with("upgrade: v1.31.4 → v1.32.5"), "{s}");
    }

    /// `-v`: lines of one script's stream as they arrive go on under one heading; another
    /// stream, host or event starts a new one.
    #[test]
    fn live_output_lines_share_their_heading() {
        let out = |host: &str, stream, text: &str| Event::Output {
            host: host.into(),
            what: "apply slow".into(),
            stream,
            text: text.into(),
        };
        let lines = render(
            Mode::Apply,
            vec![
                out("h1", Stream::Stdout, "first\n"),
                out("h1", Stream::Stdout, "\r\n"),
                out("h1", Stream::Stdout, "second\r\n"),
                out("h2", Stream::Stdout, "other\n"),
                out("h1", Stream::Stderr, "oops\n"),
                out("h1", Stream::Stderr, "more"),
            ],
        );
        assert_eq!(
            lines,
            [
                "h1: apply slow: stdout",
                "    > first",
                "    >",
                "    > second",
                "h2: apply slow: stdout",
                "    > other",
                "h1: apply slow: stderr",
                "    > oops",
                "    > more",
            ]
        );
    }

    #[test]
    fn an_apply_prints_changes_failures_and_a_summary_table() {
        let lines = render(
            Mode::Apply,
            vec![
                finished("cp1", "motd", TaskStatus::Changed, "create: missing"),
                finished("cp1", "sysctl", TaskStatus::Ok, "value matches"),
                finished("cp1", "init", TaskStatus::Failed, "exit code 1: boom"),
                finished("w1", "join", TaskStatus::Skipped, "cp1/init failed"),
                finished("w2", "join", TaskStatus::Skipped, "host w2 failed"),
                Event::HostFinished {
                    host: "w2".into(),
                    counts: Counts {
                        skipped: 1,
                        ..Counts::default()
                    },
                    duration_ms: 10,
                    error: Some("cannot connect to 10.0.0.3:22: refused".into()),
                },
                finished_run(Mode::Apply, (2, 1, 1), [1, 1, 1, 2]),
            ],
        );
        assert_eq!(
            &lines[..4],
            [
                "cp1: changed motd (create: missing)",
                "cp1: failed init: exit code 1: boom",
                "w1: skipped join (cp1/init failed)",
                "w2: failed: cannot connect to 10.0.0.3:22: refused",
            ]
        );
        assert_eq!(
            lines.last().map(String::as_str),
            Some("apply: 2 hosts (1 failed), 1 ok, 1 changed, 1 failed, 2 skipped in 1.4s")
        );
        assert!(lines
            .iter()
            .any(|l| l.starts_with("w2 ") && l.ends_with("host failed")));
    }

    #[test]
    fn host_warnings_are_repeated_after_the_summary() {
        let lines = render(
            Mode::Apply,
            vec![
                Event::Warning {
                    host: Some("ww1".into()),
                    message: "reboot: a reboot is pending (windows-update)".into(),
                },
                finished(
                    "ww1",
                    "reboot",
                    TaskStatus::Ok,
                    "joined: reboot left to you",
                ),
                summary(1, 0, 0, 0),
            ],
        );
        assert_eq!(
            lines[0],
            "warning: ww1: reboot: a reboot is pending (windows-update)"
        );
        assert_eq!(
            lines.last().map(String::as_str),
            Some("warning: ww1: reboot: a reboot is pending (windows-update)")
        );
    }

    #[test]
    fn plan_shows_diffs_and_says_no_changes() {
        let lines = render(
            Mode::Plan,
            vec![
                Event::TaskPlanned {
                    host: "h2".into(),
                    task: "motd".into(),
                    module: "file".into(),
                    change: true,
                    action: Some("update".into()),
                    reason: "content differs".into(),
                    diff: Some("-old\n+new\n".into()),
                },
                finished_run(Mode::Plan, (2, 2, 0), [3, 1, 0, 0]),
            ],
        );
        assert_eq!(
            &lines[..3],
            ["h2: update motd (content differs)", "    -old", "    +new"]
        );
        assert_eq!(
            lines.last().map(String::as_str),
            Some("plan: 2 hosts, 3 ok, 1 to change, 0 failed, 0 skipped in 1.4s")
        );
        let lines = render(Mode::Apply, vec![summary(4, 0, 0, 0)]);
        assert_eq!(
            lines.last().map(String::as_str),
            Some("apply: 2 hosts, 4 ok, 0 changed, 0 failed, 0 skipped in 1.4s (no changes)")
        );
    }

    /// A run that reached no host is no "no changes": it says so; one host is "1 host".
    #[test]
    fn a_run_that_reached_no_host_says_so_and_one_host_is_singular() {
        let lines = render(
            Mode::Plan,
            vec![finished_run(Mode::Plan, (2, 0, 2), [0, 0, 0, 6])],
        );
        assert_eq!(
            lines.last().map(String::as_str),
            Some("plan: no host reached (2 hosts failed), 0 ok, 0 to change, 0 failed, 6 skipped in 1.4s")
        );
        let lines = render(
            Mode::Apply,
            vec![
                Event::RunStarted {
                    run_id: "r".into(),
                    mode: Mode::Apply,
                    hosts: 1,
                    tasks: 1,
                },
                finished_run(Mode::Apply, (1, 1, 0), [1, 0, 0, 0]),
            ],
        );
        assert_eq!(
            lines.first().map(String::as_str),
            Some("apply: 1 host, 1 task")
        );
        assert_eq!(
            lines.last().map(String::as_str),
            Some("apply: 1 host, 1 ok, 0 changed, 0 failed, 0 skipped in 1.4s (no changes)")
        );
    }

    #[test]
    fn verify_checks_print_as_one_table() {
        let check =
            |name: &str, from: &str, to: &str, result: CheckResult, detail: &str| Event::Check {
                name: name.into(),
                from: from.into(),
                to: to.into(),
                result,
                detail: detail.into(),
            };
        let lines = render(
            Mode::Apply,
            vec![
                check("node", "-", "ww1", CheckResult::Pass, "Ready"),
                check(
                    "pod → pod",
                    "client (lw1)",
                    "win-web (ww1)",
                    CheckResult::Fail,
                    "curl: (28) Connection timed out after 10002 milliseconds",
                ),
                check(
                    "egress",
                    "win-web",
                    "https://kubernetes.io/",
                    CheckResult::Skip,
                    "pod win-web is not ready",
                ),
                Event::VerifyFinished {
                    counts: CheckCounts {
                        checks: 3,
                        passed: 1,
                        failed: 1,
                        skipped: 1,
                    },
                    duration_ms: 4200,
                },
            ],
        );
        assert_eq!(
            lines,
            [
                "check      from → to                         result  detail",
                "node       ww1                               pass    Ready",
                "pod → pod  client (lw1) → win-web (ww1)      FAIL    curl: (28) Connection timed out after 10002 milliseconds",
                "egress     win-web → https://kubernetes.io/  skip    pod win-web is not ready",
                "verify: 3 checks, 1 passed, 1 failed, 1 skipped in 4.2s",
            ]
        );
    }
}
