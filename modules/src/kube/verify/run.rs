//! The verify runner: the workloads, scripts and parsers of this module, in order, over a
//! [`Remote`] (the first control plane as the pipeline's session reaches it).
//!
//! 1. connect; nodes: each plan host registered, Ready, with the right labels and taint;
//! 2. workloads: a stale namespace of an earlier run is waited for (or removed), then the
//!    manifest is applied;
//! 3. pods: polled until Ready or the timeout (the failure names every pod not ready, and
//!    why);
//! 4. network checks whose pods are ready (the others are skipped, saying which pod is not);
//! 5. cleanup: the namespace is deleted — also after a failure or Ctrl-C — unless
//!    `keep_workloads`.
//!
//! Every result is an event: one `check` per row (texts scrubbed), a `task_started` per phase,
//! `interrupted` after Ctrl-C, and `verify_finished` last. Ctrl-C stops the checks where they
//! are ([`RunKind::Check`] scripts and waits return [`Interrupted`]); the cleanup is a
//! [`RunKind::Cleanup`] script, which still runs.

use super::{
    apply, check_nodes, delete_namespace, get_json, host_curl, http_url, namespace_state,
    parse_curl, parse_nslookup, pod_curl, pod_nslookup, pod_states, services, windows_build,
    Expect, ExpectedNode, PodState, Verdict, Workloads, CLIENT, LINUX_WEB, WIN_WEB,
};
use crate::kube::ADMIN_CONF;
use kwin_engine::event::{CheckCounts, CheckResult, Event};
use kwin_engine::pipeline::remote::{Interrupted, Remote, RemoteError, RunKind};
use kwin_engine::plan::effective::Effective;
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Output;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// What to verify and how.
#[derive(Debug, Clone)]
pub struct VerifySpec {
    /// The admin kubeconfig on the control plane.
    pub kubeconfig: String,
    /// How long to wait for the test pods to be ready.
    pub timeout: Duration,
    /// URL the egress checks fetch from inside the pods.
    pub external_url: String,
    /// Namespace of the test workloads.
    pub namespace: String,
    /// Leave the test workloads in place afterwards.
    pub keep_workloads: bool,
    /// The cluster's DNS domain (`cluster.dns_domain`).
    pub dns_domain: String,
    /// Whether the plan has Linux workers (else the Linux pods run on the control plane).
    pub linux_workers: bool,
    /// Every node the plan expects.
    pub expected: Vec<ExpectedNode>,
}

/// The options of a verification (the flags of `kwin verify`).
#[derive(Debug, Clone)]
pub struct VerifyOptions {
    pub timeout: Duration,
    /// The egress URL of `--external-url`; `None`: the plan's `cluster.verify_egress_url`.
    pub external_url: Option<String>,
    pub namespace: String,
    pub keep_workloads: bool,
}

impl VerifySpec {
    /// What to verify of the plan whose effective values are `eff`, from its first control
    /// plane (kubeadm's admin kubeconfig there); `None` without `[cluster]`.
    pub fn for_plan(eff: &Effective, opts: VerifyOptions) -> Option<VerifySpec> {
        let c = eff.cluster.as_ref()?;
        Some(VerifySpec {
            kubeconfig: ADMIN_CONF.to_string(),
            timeout: opts.timeout,
            external_url: opts
                .external_url
                .unwrap_or_else(|| c.verify_egress_url.clone()),
            namespace: opts.namespace,
            keep_workloads: opts.keep_workloads,
            dns_domain: c.dns_domain.clone(),
            linux_workers: eff.has_linux_workers(),
            expected: eff
                .hosts
                .iter()
                .filter(|h| h.role.is_some())
                .map(|h| ExpectedNode {
                    name: h.name.clone(),
                    windows: h.os == "windows",
                    windows_taint: c.windows_taint,
                })
                .collect(),
        })
    }
}

/// How a verification ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// The result of every row, in order.
    pub results: Vec<CheckResult>,
    /// Ctrl-C stopped it.
    pub interrupted: bool,
}

impl VerifyReport {
    /// Every check ran and passed.
    pub fn passed(&self) -> bool {
        !self.interrupted
            && !self.results.is_empty()
            && self.results.iter().all(|r| *r == CheckResult::Pass)
    }
}

/// Per remote command: kubectl's own timeouts are shorter.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(120);
/// Between two looks at the pods.
pub const POLL: Duration = Duration::from_secs(3);

/// Verify the cluster from the host `r` reaches. Emits every row and the summary.
pub async fn verify(r: &dyn Remote, spec: &VerifySpec) -> VerifyReport {
    let mut v = Runner {
        r,
        spec,
        host: r.host().to_string(),
        results: Vec::new(),
    };
    let start = r.now();
    let t = r.now();
    let interrupted = match r.connect().await {
        Err(_) if r.interrupted() => true,
        Err(e) => {
            let host = v.host.clone();
            v.check("connect", "kwin", &host, Verdict::fail(e));
            false
        }
        Ok(()) => {
            r.emit(Event::HostConnected {
                host: v.host.clone(),
                duration_ms: ms(r.now().saturating_duration_since(t)),
            });
            v.connected().await
        }
    };
    r.close().await;
    let count = |x: CheckResult| v.results.iter().filter(|y| **y == x).count();
    r.emit(Event::VerifyFinished {
        counts: CheckCounts {
            checks: v.results.len(),
            passed: count(CheckResult::Pass),
            failed: count(CheckResult::Fail),
            skipped: count(CheckResult::Skip),
        },
        duration_ms: ms(r.now().saturating_duration_since(start)),
    });
    VerifyReport {
        results: v.results,
        interrupted,
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn human_secs(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 && s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn stderr_line(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).trim().to_string()
}

struct Runner<'a> {
    r: &'a dyn Remote,
    spec: &'a VerifySpec,
    host: String,
    results: Vec<CheckResult>,
}

impl Runner<'_> {
    fn check(&mut self, name: &str, from: &str, to: &str, v: Verdict) {
        self.r.emit(Event::Check {
            name: name.to_string(),
            from: self.r.scrub(from),
            to: self.r.scrub(to),
            result: v.result,
            detail: self.r.scrub(&v.detail),
        });
        self.results.push(v.result);
    }

    fn phase(&self, what: &str) {
        self.r.emit(Event::TaskStarted {
            host: self.host.clone(),
            task: what.to_string(),
        });
    }

    /// Run a check script; `Ok(Err(..))` is the script's failure to run, `Err` Ctrl-C.
    async fn sh(&self, what: &str, script: &str) -> Result<Result<Output, String>, Interrupted> {
        match self.r.run(what, script, RUN_TIMEOUT, RunKind::Check).await {
            Ok(o) => Ok(Ok(o)),
            Err(RemoteError::Failed(e)) => Ok(Err(e)),
            Err(RemoteError::Interrupted) => Err(Interrupted),
        }
    }

    /// Nodes, then (if the API answers) the workloads and the checks, then cleanup.
    /// Returns whether Ctrl-C interrupted it.
    async fn connected(&mut self) -> bool {
        self.phase("nodes");
        let nodes_json = match self.nodes().await {
            Ok(Some(j)) => j,
            Ok(None) => return false,
            Err(Interrupted) => {
                self.r.emit(Event::Interrupted {});
                return true;
            }
        };
        let windows: Vec<String> = self
            .spec
            .expected
            .iter()
            .filter(|n| n.windows)
            .map(|n| n.name.clone())
            .collect();
        let workloads = Workloads {
            namespace: self.spec.namespace.clone(),
            windows: !windows.is_empty(),
            windows_build: windows_build(&nodes_json, &windows),
            linux_on_control_plane: !self.spec.linux_workers,
        };
        let mut deployed = false;
        let interrupted = self
            .workloads_and_checks(&workloads, &mut deployed)
            .await
            .is_err();
        if interrupted {
            self.r.emit(Event::Interrupted {});
        }
        if deployed {
            self.cleanup().await;
        }
        interrupted
    }

    async fn nodes(&mut self) -> Result<Option<String>, Interrupted> {
        let host = self.host.clone();
        let kc = self.spec.kubeconfig.clone();
        let script = format!(
            "[ -r {q} ] || {{ printf '%s\\n' {msg} >&2; exit 1; }}\n{}",
            get_json(&kc, "nodes", None),
            q = sh_quote(&kc),
            msg = sh_quote(&format!(
                "{kc} does not exist: is this host a control plane that ran kubeadm init?"
            )),
        );
        let json = match self.sh("verify nodes", &script).await? {
            Ok(o) if o.success() => text(&o.stdout),
            Ok(o) => {
                let why = stderr_line(&o);
                self.check("api server", &host, "kubectl get nodes", Verdict::fail(why));
                return Ok(None);
            }
            Err(e) => {
                self.check("api server", &host, "kubectl get nodes", Verdict::fail(e));
                return Ok(None);
            }
        };
        match check_nodes(&self.spec.expected, &json) {
            Ok(checks) => {
                for c in checks {
                    self.check("node", "-", &c.node, c.verdict);
                }
                Ok(Some(json))
            }
            Err(e) => {
                self.check("api server", &host, "kubectl get nodes", Verdict::fail(e));
                Ok(None)
            }
        }
    }

    async fn namespace_state(&self) -> Result<Result<String, String>, Interrupted> {
        let script = namespace_state(&self.spec.kubeconfig, &self.spec.namespace);
        Ok(match self.sh("verify namespace", &script).await? {
            Ok(o) if o.success() => Ok(text(&o.stdout).trim().to_string()),
            Ok(o) => Err(stderr_line(&o)),
            Err(e) => Err(e),
        })
    }

    /// Deploy, wait, check. `deployed` turns true as soon as something may have been created.
    async fn workloads_and_checks(
        &mut self,
        w: &Workloads,
        deployed: &mut bool,
    ) -> Result<(), Interrupted> {
        let timeout = self.spec.timeout;
        let deadline = self.r.now() + timeout;
        let ns = self.spec.namespace.clone();
        let kc = self.spec.kubeconfig.clone();
        let host = self.host.clone();
        let target = format!("namespace {ns}");
        self.phase("deploy workloads");
        // A namespace left by an earlier run (still terminating, or kept) goes first.
        loop {
            match self.namespace_state().await? {
                Ok(s) if s == "absent" => break,
                Ok(s) => {
                    if s == "active" {
                        *deployed = true;
                        let _ = self
                            .sh("verify delete", &delete_namespace(&kc, &ns))
                            .await?;
                    }
                    if self.r.now() >= deadline {
                        self.check(
                            "workloads",
                            &host,
                            &target,
                            Verdict::fail(format!(
                                "timed out after {}s waiting for the namespace {ns} of an earlier run to be deleted",
                                timeout.as_secs()
                            )),
                        );
                        return Ok(());
                    }
                    self.r.sleep(POLL).await?;
                }
                Err(e) => {
                    self.check("workloads", &host, &target, Verdict::fail(e));
                    return Ok(());
                }
            }
        }
        *deployed = true;
        match self.sh("verify apply", &apply(&kc, &w.manifest())).await? {
            Ok(o) if o.success() => {}
            Ok(o) => {
                let why = stderr_line(&o);
                self.check("workloads", &host, &target, Verdict::fail(why));
                return Ok(());
            }
            Err(e) => {
                self.check("workloads", &host, &target, Verdict::fail(e));
                return Ok(());
            }
        }
        self.phase(&format!(
            "wait up to {} for pods {}",
            human_secs(timeout),
            w.pods().join(", ")
        ));
        let pods = self.wait_pods(w, deadline).await?;
        self.phase("network checks");
        self.network_checks(w, &pods).await
    }

    /// Poll the pods until all are ready or the deadline passes; one `pods ready` row.
    async fn wait_pods(
        &mut self,
        w: &Workloads,
        deadline: Instant,
    ) -> Result<BTreeMap<String, PodState>, Interrupted> {
        let ns = self.spec.namespace.clone();
        let host = self.host.clone();
        let names = w.pods();
        let target = format!("pods in {ns}");
        let mut last_err: Option<String>;
        let mut last: Vec<PodState> = Vec::new();
        loop {
            let script = get_json(&self.spec.kubeconfig, "pods", Some(&ns));
            match self.sh("verify pods", &script).await? {
                Ok(o) if o.success() => match pod_states(&text(&o.stdout), &names) {
                    Ok(states) => {
                        last_err = None;
                        last = states;
                    }
                    Err(e) => last_err = Some(e),
                },
                Ok(o) => last_err = Some(stderr_line(&o)),
                Err(e) => last_err = Some(e),
            }
            let all_ready = !last.is_empty() && last.iter().all(|p| p.ready);
            if all_ready {
                let placed: Vec<String> = last
                    .iter()
                    .map(|p| format!("{} on {}", p.name, p.node.as_deref().unwrap_or("?")))
                    .collect();
                self.check(
                    "pods ready",
                    &host,
                    &target,
                    Verdict::pass(placed.join(", ")),
                );
                break;
            }
            if self.r.now() >= deadline {
                let mut msg = format!(
                    "timed out after {} waiting for pods to be ready: ",
                    human_secs(self.spec.timeout)
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
                self.check("pods ready", &host, &target, Verdict::fail(msg));
                break;
            }
            self.r.sleep(POLL).await?;
        }
        Ok(last.into_iter().map(|p| (p.name.clone(), p)).collect())
    }

    /// stdout, stderr and exit code of a check script (exit -1 and the error when it did not
    /// run).
    async fn run_check(
        &self,
        what: &str,
        script: &str,
    ) -> Result<(String, String, i32), Interrupted> {
        Ok(match self.sh(what, script).await? {
            Ok(o) => (text(&o.stdout), text(&o.stderr), o.exit),
            Err(e) => (String::new(), e, -1),
        })
    }

    async fn network_checks(
        &mut self,
        w: &Workloads,
        pods: &BTreeMap<String, PodState>,
    ) -> Result<(), Interrupted> {
        let ns = self.spec.namespace.clone();
        let kc = self.spec.kubeconfig.clone();
        let host = self.host.clone();
        let svcs = match self
            .sh("verify services", &get_json(&kc, "services", Some(&ns)))
            .await?
        {
            Ok(o) if o.success() => services(&text(&o.stdout)).unwrap_or_default(),
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
        let domain = self.spec.dns_domain.clone();
        let fqdn = |name: &str| format!("{name}.{ns}.svc.{domain}");

        // Pod → pod (by pod IP), Linux → Linux, Linux → Windows, Windows → Linux.
        let mut pairs = vec![(CLIENT, LINUX_WEB)];
        if w.windows {
            pairs.push((CLIENT, WIN_WEB));
            pairs.push((WIN_WEB, LINUX_WEB));
        }
        for (from, to) in pairs {
            let verdict = match not_ready(&[from, to]) {
                Some(skip) => skip,
                None => match ready(to).and_then(|p| p.pod_ip.clone()) {
                    None => Verdict::fail(format!("pod {to} has no IP")),
                    Some(ip) => {
                        self.http_from(from, &http_url(&ip, 80), Expect::Success)
                            .await?
                    }
                },
            };
            self.check("pod → pod", &on(from), &on(to), verdict);
        }
        // Pod → Service ClusterIP.
        let mut svc_pairs = vec![(CLIENT, LINUX_WEB)];
        if w.windows {
            svc_pairs.push((CLIENT, WIN_WEB));
            svc_pairs.push((WIN_WEB, LINUX_WEB));
        }
        for (from, to) in svc_pairs {
            let to_text = format!("service {to}");
            let verdict = match not_ready(&[from, to]) {
                Some(skip) => skip,
                None => match svc(to).and_then(|s| s.cluster_ip) {
                    None => Verdict::fail(format!("service {to} has no ClusterIP")),
                    Some(ip) => {
                        self.http_from(from, &http_url(&ip, 80), Expect::Success)
                            .await?
                    }
                },
            };
            self.check("pod → service", &on(from), &to_text, verdict);
        }
        // DNS: the Service's name resolves to its ClusterIP (Linux), and a Windows pod reaches
        // a Service by name.
        let dns_target = if w.windows { WIN_WEB } else { LINUX_WEB };
        let verdict = match not_ready(&[CLIENT]) {
            Some(skip) => skip,
            None => match svc(dns_target).and_then(|s| s.cluster_ip) {
                None => Verdict::fail(format!("service {dns_target} has no ClusterIP")),
                Some(ip) => {
                    let (o, e, x) = self
                        .run_check(
                            "verify check",
                            &pod_nslookup(&kc, &ns, CLIENT, &fqdn(dns_target)),
                        )
                        .await?;
                    parse_nslookup(&o, &e, x, &ip)
                }
            },
        };
        self.check("dns", &on(CLIENT), &fqdn(dns_target), verdict);
        if w.windows {
            let verdict = match not_ready(&[WIN_WEB, LINUX_WEB]) {
                Some(skip) => skip,
                None => {
                    let url = format!("http://{}/", fqdn(LINUX_WEB));
                    self.http_from(WIN_WEB, &url, Expect::Success).await?
                }
            };
            self.check("dns", &on(WIN_WEB), &fqdn(LINUX_WEB), verdict);
        }
        // NodePort, from the control plane host (outside the pod network), to the node that
        // runs the pod (externalTrafficPolicy: Local).
        let mut np = vec![LINUX_WEB];
        if w.windows {
            np.push(WIN_WEB);
        }
        for name in np {
            let (to_text, verdict) = match not_ready(&[name]) {
                Some(skip) => (format!("service {name} NodePort"), skip),
                None => {
                    let node_ip = ready(name).and_then(|p| p.host_ip.clone());
                    let port = svc(name).and_then(|s| s.node_port);
                    match (node_ip, port) {
                        (Some(ip), Some(port)) => {
                            let url = http_url(&ip, port);
                            let (o, e, x) =
                                self.run_check("verify check", &host_curl(&url)).await?;
                            (
                                format!("{}:{port} ({name})", ip),
                                parse_curl(&o, &e, x, Expect::Success),
                            )
                        }
                        _ => (
                            format!("service {name} NodePort"),
                            Verdict::fail(format!("no node IP or NodePort for {name}")),
                        ),
                    }
                }
            };
            self.check("nodeport", &host, &to_text, verdict);
        }
        // Egress: curl (never ping: ICMP out of the overlay does not work on Windows).
        let url = self.spec.external_url.clone();
        let mut egress = vec![CLIENT];
        if w.windows {
            egress.push(WIN_WEB);
        }
        for from in egress {
            let verdict = match not_ready(&[from]) {
                Some(skip) => skip,
                None => self.http_from(from, &url, Expect::AnyAnswer).await?,
            };
            self.check("egress", &on(from), &url, verdict);
        }
        Ok(())
    }

    /// Fetch `url` from inside pod `from` (curl, in the Linux and the Windows image alike).
    async fn http_from(
        &self,
        from: &str,
        url: &str,
        expect: Expect,
    ) -> Result<Verdict, Interrupted> {
        let (ns, kc) = (&self.spec.namespace, &self.spec.kubeconfig);
        let script = pod_curl(kc, ns, from, url, from == WIN_WEB);
        let (o, e, x) = self.run_check("verify check", &script).await?;
        Ok(parse_curl(&o, &e, x, expect))
    }

    /// Delete the namespace (a `Cleanup` script: it runs after Ctrl-C too).
    async fn cleanup(&mut self) {
        let ns = self.spec.namespace.clone();
        let host = self.host.clone();
        let target = format!("namespace {ns}");
        if self.spec.keep_workloads {
            self.r.emit(Event::Warning {
                host: None,
                message: format!("the test workloads stay in namespace {ns} (--keep-workloads); remove them with `kubectl delete namespace {ns}`"),
            });
            return;
        }
        self.phase("cleanup");
        let script = delete_namespace(&self.spec.kubeconfig, &ns);
        let verdict = match self
            .r
            .run("verify cleanup", &script, RUN_TIMEOUT, RunKind::Cleanup)
            .await
        {
            Ok(o) if o.success() => Verdict::pass("deleted"),
            Ok(o) => Verdict::fail(format!("not deleted: {}", stderr_line(&o))),
            Err(e) => Verdict::fail(format!("not deleted: {e}")),
        };
        self.check("cleanup", &host, &target, verdict);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_read_as_minutes_or_seconds() {
        assert_eq!(human_secs(Duration::from_secs(900)), "15m");
        assert_eq!(human_secs(Duration::from_secs(8)), "8s");
        assert_eq!(human_secs(Duration::from_secs(90)), "90s");
    }
}
