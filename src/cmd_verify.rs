//! `kwin verify` (and the last step of `kwin apply`): deploy the test workloads on the cluster
//! and check nodes, pod and Service networking, DNS, NodePort and egress.
//!
//! Everything runs as `kubectl` on the first control plane (its `/etc/kubernetes/admin.conf`),
//! over the same transport as `apply`: host keys checked the same way, every remote command
//! and its output in `.kwin/logs/<run-id>/<host>.log`, scrubbed, and every result an event
//! (`check` rows, then `verify_summary`) rendered by `output.rs` — a table, or JSON lines.
//! The workloads, scripts and parsers are `kwin_modules::kube::verify`; this file only runs
//! them in order:
//!
//! 1. nodes: each plan host registered, Ready, with the right labels and taint;
//! 2. workloads: a stale namespace of an earlier run is waited for (or removed), then the
//!    manifest is applied;
//! 3. pods: polled until Ready or `--timeout` (the failure names every pod not ready, and why);
//! 4. network checks whose pods are ready (the others are skipped, saying which pod is not);
//! 5. cleanup: the namespace is deleted — also after a failure or Ctrl-C — unless
//!    `--keep-workloads`.
//!
//! Exit 0 only when every check passed.

use crate::{OutputFormat, RunArgs};
use kwin_engine::event::{CheckResult, Event, EventSink, Mode};
use kwin_engine::exec::conn::{Backoff, Conn, LogStdout};
use kwin_engine::exec::logs::HostLog;
use kwin_engine::plan::model::{Os, Role};
use kwin_engine::plan::LoadedPlan;
use kwin_engine::secret::Scrubber;
use kwin_engine::transport::Output;
use kwin_modules::kube::verify::{self as v, Expect, ExpectedNode, PodState, Verdict, Workloads};
use kwin_modules::kube::ADMIN_CONF;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Options of a verification (flags of `kwin verify`; `kwin apply` uses the defaults).
#[derive(clap::Args, Debug, Clone)]
pub struct VerifyArgs {
    /// How long to wait for the test pods to be ready (e.g. 90s, 15m).
    #[arg(long, default_value = "15m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// URL the egress checks fetch from inside the pods (curl / Invoke-WebRequest; any HTTP
    /// answer passes).
    #[arg(long, default_value = v::EXTERNAL_URL, value_parser = parse_url)]
    pub external_url: String,
    /// Namespace of the test workloads.
    #[arg(long, default_value = v::NAMESPACE, value_parser = parse_namespace)]
    pub namespace: String,
    /// Leave the test workloads in place afterwards (for a look with kubectl).
    #[arg(long)]
    pub keep_workloads: bool,
}

impl Default for VerifyArgs {
    fn default() -> Self {
        VerifyArgs {
            timeout: Duration::from_secs(15 * 60),
            external_url: v::EXTERNAL_URL.to_string(),
            namespace: v::NAMESPACE.to_string(),
            keep_workloads: false,
        }
    }
}

/// A namespace name (RFC 1123 label).
fn parse_namespace(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!(
            "`{s}` is not a namespace name (lowercase letters, digits and `-`, at most 63)"
        ))
    }
}

/// An http(s) URL without whitespace.
fn parse_url(s: &str) -> Result<String, String> {
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"));
    match rest {
        Some(r) if !r.is_empty() && !s.chars().any(char::is_whitespace) => Ok(s.to_string()),
        _ => Err(format!("`{s}` is not an http:// or https:// URL")),
    }
}

/// `90`, `90s`, `15m`, `1h30m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    kwin_modules::kube::duration_secs(s)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("`{s}` is not a duration (e.g. 90s, 15m, 1h30m)"))
}

/// `kwin verify plan.toml`.
pub fn verify(run: RunArgs, args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let Some(prepared) = crate::prepare::reported(crate::prepare::prepare(&run.plan), run.output)
    else {
        return Ok(ExitCode::from(1));
    };
    run_verify(&prepared.plan, &run, &args)
}

/// Verify the cluster of a loaded plan (also called by `kwin apply`).
pub fn run_verify(plan: &LoadedPlan, run: &RunArgs, args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let Some(cluster) = &plan.file.cluster else {
        if run.output == OutputFormat::Human {
            println!("verify: the plan has no [cluster]: nothing to verify");
        }
        return Ok(ExitCode::SUCCESS);
    };
    let Some(cp) = crate::control_plane::first(plan) else {
        anyhow::bail!("the plan has no control plane to run the checks from");
    };
    let crate::control_plane::ControlPlane {
        made,
        scrubber,
        state_dir,
        ..
    } = crate::control_plane::transport(plan, cp, run)?;
    let settings = &plan.file.settings;
    let run_id = kwin_engine::exec::state::new_run_id();
    for e in kwin_engine::exec::retention::prune(
        &state_dir,
        &crate::cmd_run::retention(settings),
        &run_id,
    ) {
        eprintln!("warning: {e}");
    }
    let (log, log_err) = HostLog::open(
        &state_dir.join("logs").join(&run_id),
        &cp.name,
        scrubber.clone(),
    );
    let conn = Conn::new(cp.name.clone(), made.transport.clone(), log);

    let expected: Vec<ExpectedNode> = plan
        .hosts
        .iter()
        .filter(|h| h.role.is_some())
        .map(|h| ExpectedNode {
            name: h.name.clone(),
            windows: h.os == Os::Windows,
            windows_taint: cluster.windows_taint.unwrap_or(true),
        })
        .collect();
    let ctx = Ctx {
        conn,
        host: cp.name.clone(),
        kubeconfig: ADMIN_CONF.to_string(),
        args: args.clone(),
        dns_domain: cluster
            .dns_domain
            .clone()
            .unwrap_or_else(|| kwin_engine::plan::effective::defaults::DNS_DOMAIN.into()),
        linux_workers: plan
            .hosts
            .iter()
            .any(|h| h.os == Os::Linux && h.role == Some(Role::Worker)),
        retries: settings.retries.unwrap_or(3),
        retry_delay: Duration::from_secs(settings.retry_delay.unwrap_or(2)),
        expected,
        rows: Vec::new(),
        scrubber: scrubber.clone(),
    };

    let (sink, rx) = EventSink::channel();
    if let Some(w) = log_err {
        sink.send(Event::Warning {
            host: Some(cp.name.clone()),
            message: w,
        });
    }
    let tty = std::io::stdout().is_terminal();
    let format = run.output;
    let renderer =
        std::thread::spawn(move || crate::output::render(rx, format, Mode::Apply, tty, "verify"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (rows, interrupted) = runtime.block_on(ctx.go(&sink));
    runtime.shutdown_timeout(Duration::from_secs(1));
    drop(sink);
    let _ = renderer.join();
    if let Some(k) = made.recorded_host_key() {
        eprintln!("note: {k}");
    }
    Ok(if interrupted {
        ExitCode::from(130)
    } else if rows.iter().all(|r| r.result == CheckResult::Pass) && !rows.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[derive(Debug, Clone)]
struct Row {
    result: CheckResult,
}

struct Ctx {
    conn: Conn,
    host: String,
    kubeconfig: String,
    args: VerifyArgs,
    dns_domain: String,
    linux_workers: bool,
    retries: u32,
    retry_delay: Duration,
    expected: Vec<ExpectedNode>,
    rows: Vec<Row>,
    /// The run's scrubber (connection secrets), also the host log's.
    scrubber: Scrubber,
}

/// Per remote command: kubectl's own timeouts are shorter.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);
/// Between two looks at the pods.
const POLL: Duration = Duration::from_secs(3);

impl Ctx {
    fn check(&mut self, sink: &EventSink, name: &str, from: &str, to: &str, v: Verdict) {
        let scrub = |s: &str| self.scrubber.scrub(s);
        sink.send(Event::Check {
            name: name.to_string(),
            from: scrub(from),
            to: scrub(to),
            result: v.result,
            detail: scrub(&v.detail),
        });
        self.rows.push(Row { result: v.result });
    }

    fn phase(&self, sink: &EventSink, what: &str) {
        sink.send(Event::TaskStarted {
            host: self.host.clone(),
            task: what.to_string(),
        });
    }

    /// Run a script on the control plane (retried after a lost connection: every verify
    /// script is read-only or idempotent).
    async fn sh(&self, what: &str, script: &str) -> Result<Output, String> {
        self.conn
            .run_idempotent(
                what,
                script,
                RUN_TIMEOUT,
                Backoff::new(self.retries, self.retry_delay),
                LogStdout::Yes,
            )
            .await
            .map_err(|e| e.to_string())
    }

    async fn go(mut self, sink: &EventSink) -> (Vec<Row>, bool) {
        let start = Instant::now();
        let t = Instant::now();
        let connected = self
            .conn
            .connect_retrying(Backoff::new(self.retries, self.retry_delay))
            .await;
        let interrupted = match connected {
            Err(e) => {
                let host = self.host.clone();
                self.check(sink, "connect", "kwin", &host, Verdict::fail(e.to_string()));
                false
            }
            Ok(()) => {
                sink.send(Event::HostConnected {
                    host: self.host.clone(),
                    duration_ms: t.elapsed().as_millis() as u64,
                });
                self.verify_connected(sink).await
            }
        };
        self.conn.close().await;
        let count = |r: CheckResult| self.rows.iter().filter(|x| x.result == r).count();
        sink.send(Event::VerifySummary {
            checks: self.rows.len(),
            passed: count(CheckResult::Pass),
            failed: count(CheckResult::Fail),
            skipped: count(CheckResult::Skip),
            duration_ms: start.elapsed().as_millis() as u64,
        });
        (self.rows, interrupted)
    }

    /// Nodes, then (if the API answers) the workloads and the checks, then cleanup.
    /// Returns whether Ctrl-C interrupted it.
    async fn verify_connected(&mut self, sink: &EventSink) -> bool {
        self.phase(sink, "nodes");
        let nodes_json = match self.nodes(sink).await {
            Some(j) => j,
            None => return false,
        };
        let workloads = Workloads {
            namespace: self.args.namespace.clone(),
            windows: self.expected.iter().any(|n| n.windows),
            windows_build: v::windows_build(
                &nodes_json,
                &self
                    .expected
                    .iter()
                    .filter(|n| n.windows)
                    .map(|n| n.name.clone())
                    .collect::<Vec<_>>(),
            ),
            linux_on_control_plane: !self.linux_workers,
        };
        let mut deployed = false;
        let interrupted = tokio::select! {
            _ = self.workloads_and_checks(sink, &workloads, &mut deployed) => false,
            r = tokio::signal::ctrl_c() => {
                if r.is_ok() {
                    sink.send(Event::Interrupted {});
                    // As in apply: a second Ctrl-C leaves at once (without the cleanup).
                    tokio::spawn(async {
                        if tokio::signal::ctrl_c().await.is_ok() {
                            std::process::exit(130);
                        }
                    });
                }
                true
            }
        };
        if deployed {
            self.cleanup(sink).await;
        }
        interrupted
    }

    async fn nodes(&mut self, sink: &EventSink) -> Option<String> {
        let host = self.host.clone();
        let kc = self.kubeconfig.clone();
        let script = format!(
            "[ -r {q} ] || {{ printf '%s\\n' {msg} >&2; exit 1; }}\n{}",
            v::get_json(&kc, "nodes", None),
            q = kwin_engine::quote::sh_quote(&kc),
            msg = kwin_engine::quote::sh_quote(&format!(
                "{kc} does not exist: is this host a control plane that ran kubeadm init?"
            )),
        );
        let out = self.sh("verify nodes", &script).await;
        let json = match out {
            Ok(o) if o.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
            Ok(o) => {
                let why = String::from_utf8_lossy(&o.stderr).trim().to_string();
                self.check(
                    sink,
                    "api server",
                    &host,
                    "kubectl get nodes",
                    Verdict::fail(why),
                );
                return None;
            }
            Err(e) => {
                self.check(
                    sink,
                    "api server",
                    &host,
                    "kubectl get nodes",
                    Verdict::fail(e),
                );
                return None;
            }
        };
        match v::check_nodes(&self.expected, &json) {
            Ok(checks) => {
                for c in checks {
                    self.check(sink, "node", "-", &c.node, c.verdict);
                }
                Some(json)
            }
            Err(e) => {
                self.check(
                    sink,
                    "api server",
                    &host,
                    "kubectl get nodes",
                    Verdict::fail(e),
                );
                None
            }
        }
    }

    async fn namespace_state(&self) -> Result<String, String> {
        let o = self
            .sh(
                "verify namespace",
                &v::namespace_state(&self.kubeconfig, &self.args.namespace),
            )
            .await?;
        if !o.success() {
            return Err(String::from_utf8_lossy(&o.stderr).trim().to_string());
        }
        Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
    }

    /// Deploy, wait, check. `deployed` turns true as soon as something may have been created.
    async fn workloads_and_checks(&mut self, sink: &EventSink, w: &Workloads, deployed: &mut bool) {
        let deadline = Instant::now() + self.args.timeout;
        let ns = self.args.namespace.clone();
        let host = self.host.clone();
        let target = format!("namespace {ns}");
        self.phase(sink, "deploy workloads");
        // A namespace left by an earlier run (still terminating, or kept) goes first.
        loop {
            match self.namespace_state().await {
                Ok(s) if s == "absent" => break,
                Ok(s) => {
                    if s == "active" {
                        *deployed = true;
                        let _ = self
                            .sh("verify delete", &v::delete_namespace(&self.kubeconfig, &ns))
                            .await;
                    }
                    if Instant::now() >= deadline {
                        self.check(
                            sink,
                            "workloads",
                            &host,
                            &target,
                            Verdict::fail(format!(
                                "timed out after {}s waiting for the namespace {ns} of an earlier run to be deleted",
                                self.args.timeout.as_secs()
                            )),
                        );
                        return;
                    }
                    tokio::time::sleep(POLL).await;
                }
                Err(e) => {
                    self.check(sink, "workloads", &host, &target, Verdict::fail(e));
                    return;
                }
            }
        }
        *deployed = true;
        match self
            .sh("verify apply", &v::apply(&self.kubeconfig, &w.manifest()))
            .await
        {
            Ok(o) if o.success() => {}
            Ok(o) => {
                let why = String::from_utf8_lossy(&o.stderr).trim().to_string();
                self.check(sink, "workloads", &host, &target, Verdict::fail(why));
                return;
            }
            Err(e) => {
                self.check(sink, "workloads", &host, &target, Verdict::fail(e));
                return;
            }
        }
        self.phase(
            sink,
            &format!(
                "wait up to {} for pods {}",
                human_secs(self.args.timeout),
                w.pods().join(", ")
            ),
        );
        let pods = self.wait_pods(sink, w, deadline).await;
        self.phase(sink, "network checks");
        self.network_checks(sink, w, &pods).await;
    }

    /// Poll the pods until all are ready or the deadline passes; one `pods ready` row.
    async fn wait_pods(
        &mut self,
        sink: &EventSink,
        w: &Workloads,
        deadline: Instant,
    ) -> BTreeMap<String, PodState> {
        let ns = self.args.namespace.clone();
        let host = self.host.clone();
        let names = w.pods();
        let target = format!("pods in {ns}");
        let mut last_err: Option<String>;
        let mut last: Vec<PodState> = Vec::new();
        loop {
            match self
                .sh(
                    "verify pods",
                    &v::get_json(&self.kubeconfig, "pods", Some(&ns)),
                )
                .await
            {
                Ok(o) if o.success() => {
                    match v::pod_states(&String::from_utf8_lossy(&o.stdout), &names) {
                        Ok(states) => {
                            last_err = None;
                            last = states;
                        }
                        Err(e) => last_err = Some(e),
                    }
                }
                Ok(o) => last_err = Some(String::from_utf8_lossy(&o.stderr).trim().to_string()),
                Err(e) => last_err = Some(e),
            }
            let all_ready = !last.is_empty() && last.iter().all(|p| p.ready);
            if all_ready {
                let placed: Vec<String> = last
                    .iter()
                    .map(|p| format!("{} on {}", p.name, p.node.as_deref().unwrap_or("?")))
                    .collect();
                self.check(
                    sink,
                    "pods ready",
                    &host,
                    &target,
                    Verdict::pass(placed.join(", ")),
                );
                break;
            }
            if Instant::now() >= deadline {
                let mut msg = format!(
                    "timed out after {} waiting for pods to be ready: ",
                    human_secs(self.args.timeout)
                );
                if last.is_empty() {
                    msg.push_str(&format!(
                        "{} (could not read them: {})",
                        names.join(", "),
                        last_err.unwrap_or_else(|| "no answer".into())
                    ));
                } else {
                    let not: Vec<String> = last
                        .iter()
                        .filter(|p| !p.ready)
                        .map(|p| format!("{} ({})", p.name, p.why))
                        .collect();
                    msg.push_str(&not.join("; "));
                }
                self.check(sink, "pods ready", &host, &target, Verdict::fail(msg));
                break;
            }
            tokio::time::sleep(POLL).await;
        }
        last.into_iter().map(|p| (p.name.clone(), p)).collect()
    }

    async fn run_check(&self, what: &str, script: &str) -> (String, String, i32) {
        match self.sh(what, script).await {
            Ok(o) => (
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
                o.exit,
            ),
            Err(e) => (String::new(), e, -1),
        }
    }

    async fn network_checks(
        &mut self,
        sink: &EventSink,
        w: &Workloads,
        pods: &BTreeMap<String, PodState>,
    ) {
        let ns = self.args.namespace.clone();
        let kc = self.kubeconfig.clone();
        let host = self.host.clone();
        let svcs = match self
            .sh("verify services", &v::get_json(&kc, "services", Some(&ns)))
            .await
        {
            Ok(o) if o.success() => {
                v::services(&String::from_utf8_lossy(&o.stdout)).unwrap_or_default()
            }
            _ => Vec::new(),
        };
        let svc = |name: &str| svcs.iter().find(|s| s.name == name).cloned();
        let ready = |name: &str| pods.get(name).filter(|p| p.ready);
        let not_ready = |names: &[&str]| -> Option<Verdict> {
            names
                .iter()
                .find(|n| ready(n).is_none())
                .map(|n| Verdict::skip(format!("pod {n} is not ready")))
        };
        let on = |name: &str| -> String {
            match pods.get(name).and_then(|p| p.node.clone()) {
                Some(node) => format!("{name} ({node})"),
                None => name.to_string(),
            }
        };
        let domain = self.dns_domain.clone();
        let fqdn = |name: &str| format!("{name}.{ns}.svc.{domain}");

        // Pod → pod (by pod IP), Linux → Linux, Linux → Windows, Windows → Linux.
        let mut pairs = vec![(v::CLIENT, v::LINUX_WEB)];
        if w.windows {
            pairs.push((v::CLIENT, v::WIN_WEB));
            pairs.push((v::WIN_WEB, v::LINUX_WEB));
        }
        for (from, to) in pairs {
            let verdict = match not_ready(&[from, to]) {
                Some(skip) => skip,
                None => match ready(to).and_then(|p| p.pod_ip.clone()) {
                    None => Verdict::fail(format!("pod {to} has no IP")),
                    Some(ip) => {
                        self.http_from(from, &v::http_url(&ip, 80), Expect::Success)
                            .await
                    }
                },
            };
            self.check(sink, "pod → pod", &on(from), &on(to), verdict);
        }
        // Pod → Service ClusterIP.
        let mut svc_pairs = vec![(v::CLIENT, v::LINUX_WEB)];
        if w.windows {
            svc_pairs.push((v::CLIENT, v::WIN_WEB));
            svc_pairs.push((v::WIN_WEB, v::LINUX_WEB));
        }
        for (from, to) in svc_pairs {
            let to_text = format!("service {to}");
            let verdict = match not_ready(&[from, to]) {
                Some(skip) => skip,
                None => match svc(to).and_then(|s| s.cluster_ip) {
                    None => Verdict::fail(format!("service {to} has no ClusterIP")),
                    Some(ip) => {
                        self.http_from(from, &v::http_url(&ip, 80), Expect::Success)
                            .await
                    }
                },
            };
            self.check(sink, "pod → service", &on(from), &to_text, verdict);
        }
        // DNS: the Service's name resolves to its ClusterIP (Linux), and a Windows pod reaches
        // a Service by name.
        let dns_target = if w.windows { v::WIN_WEB } else { v::LINUX_WEB };
        let verdict = match not_ready(&[v::CLIENT]) {
            Some(skip) => skip,
            None => match svc(dns_target).and_then(|s| s.cluster_ip) {
                None => Verdict::fail(format!("service {dns_target} has no ClusterIP")),
                Some(ip) => {
                    let (o, e, x) = self
                        .run_check(
                            "verify check",
                            &v::pod_nslookup(&kc, &ns, v::CLIENT, &fqdn(dns_target)),
                        )
                        .await;
                    v::parse_nslookup(&o, &e, x, &ip)
                }
            },
        };
        self.check(sink, "dns", &on(v::CLIENT), &fqdn(dns_target), verdict);
        if w.windows {
            let verdict = match not_ready(&[v::WIN_WEB, v::LINUX_WEB]) {
                Some(skip) => skip,
                None => {
                    let url = format!("http://{}/", fqdn(v::LINUX_WEB));
                    self.http_from(v::WIN_WEB, &url, Expect::Success).await
                }
            };
            self.check(sink, "dns", &on(v::WIN_WEB), &fqdn(v::LINUX_WEB), verdict);
        }
        // NodePort, from the control plane host (outside the pod network), to the node that
        // runs the pod (externalTrafficPolicy: Local).
        let mut np = vec![v::LINUX_WEB];
        if w.windows {
            np.push(v::WIN_WEB);
        }
        for name in np {
            let (to_text, verdict) = match not_ready(&[name]) {
                Some(skip) => (format!("service {name} NodePort"), skip),
                None => {
                    let node_ip = ready(name).and_then(|p| p.host_ip.clone());
                    let port = svc(name).and_then(|s| s.node_port);
                    match (node_ip, port) {
                        (Some(ip), Some(port)) => {
                            let url = v::http_url(&ip, port);
                            let (o, e, x) =
                                self.run_check("verify check", &v::host_curl(&url)).await;
                            (
                                format!("{}:{port} ({name})", ip),
                                v::parse_curl(&o, &e, x, Expect::Success),
                            )
                        }
                        _ => (
                            format!("service {name} NodePort"),
                            Verdict::fail(format!("no node IP or NodePort for {name}")),
                        ),
                    }
                }
            };
            self.check(sink, "nodeport", &host, &to_text, verdict);
        }
        // Egress: curl (never ping: ICMP out of the overlay does not work on Windows).
        let url = self.args.external_url.clone();
        let mut egress = vec![v::CLIENT];
        if w.windows {
            egress.push(v::WIN_WEB);
        }
        for from in egress {
            let verdict = match not_ready(&[from]) {
                Some(skip) => skip,
                None => self.http_from(from, &url, Expect::AnyAnswer).await,
            };
            self.check(sink, "egress", &on(from), &url, verdict);
        }
    }

    /// Fetch `url` from inside pod `from` (curl on Linux, Invoke-WebRequest on Windows).
    async fn http_from(&self, from: &str, url: &str, expect: Expect) -> Verdict {
        let ns = &self.args.namespace;
        if from == v::WIN_WEB {
            let (o, e, x) = self
                .run_check(
                    "verify check",
                    &v::pod_powershell_http(&self.kubeconfig, ns, from, url),
                )
                .await;
            v::parse_ps_http(&o, &e, x, expect)
        } else {
            let (o, e, x) = self
                .run_check(
                    "verify check",
                    &v::pod_curl(&self.kubeconfig, ns, from, url),
                )
                .await;
            v::parse_curl(&o, &e, x, expect)
        }
    }

    async fn cleanup(&mut self, sink: &EventSink) {
        let ns = self.args.namespace.clone();
        let host = self.host.clone();
        let target = format!("namespace {ns}");
        if self.args.keep_workloads {
            sink.send(Event::Warning {
                host: None,
                message: format!("the test workloads stay in namespace {ns} (--keep-workloads); remove them with `kubectl delete namespace {ns}`"),
            });
            return;
        }
        self.phase(sink, "cleanup");
        let verdict = match self
            .sh(
                "verify cleanup",
                &v::delete_namespace(&self.kubeconfig, &ns),
            )
            .await
        {
            Ok(o) if o.success() => Verdict::pass("deleted"),
            Ok(o) => Verdict::fail(format!(
                "not deleted: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => Verdict::fail(format!("not deleted: {e}")),
        };
        self.check(sink, "cleanup", &host, &target, verdict);
    }
}

fn human_secs(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 && s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("").is_err());
        assert_eq!(human_secs(Duration::from_secs(900)), "15m");
        assert_eq!(human_secs(Duration::from_secs(8)), "8s");
        assert!(parse_namespace("kwin-verify").is_ok());
        assert!(parse_namespace("Kwin").is_err());
        assert!(parse_namespace("a;b").is_err());
        assert!(parse_namespace("-a").is_err());
        assert!(parse_url("https://example.com/x").is_ok());
        assert!(parse_url("ftp://example.com").is_err());
        assert!(parse_url("https://a b").is_err());
    }
}
