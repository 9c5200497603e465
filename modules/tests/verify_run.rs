//! The verify runner's flow over a strict scripted [`Remote`]: every script the runner sends
//! must be the next one the test expects (by its log name and kind), answered with captured
//! kubectl / curl / nslookup output; anything else fails the test. The scripts sent are kept:
//! a check passes on the runner's reading of an answer, so the tests also check what each
//! check asked for (the pod, Service and node addresses it took from the earlier answers).
//! Waits advance a virtual clock, so timeouts are tested without waiting. Texts pass the
//! engine's real scrubber. What the runner emits is checked as events.

use async_trait::async_trait;
use kwin_engine::event::{CheckResult, Event};
use kwin_engine::pipeline::remote::{Interrupted, Remote, RemoteError, RunKind};
use kwin_engine::secret::{Scrubber, Secret};
use kwin_engine::transport::Output;
use kwin_modules::kube::verify::{
    delete_namespace, host_curl, pod_curl, pod_nslookup, verify, ExpectedNode, VerifyReport,
    VerifySpec,
};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What the scripted host answers to the next script.
enum Answer {
    Ok(&'static str),
    OkOwned(String),
    Exit(i32, &'static str),
    /// Ctrl-C while it runs.
    Interrupt,
}

struct Scripted {
    /// (the `what` the runner must log the script as, its kind, the answer), in order.
    script: Mutex<VecDeque<(&'static str, RunKind, Answer)>>,
    /// Which waits (0-based, counted) are interrupted by Ctrl-C.
    interrupt_sleep: Option<usize>,
    sleeps: Mutex<usize>,
    events: Mutex<Vec<Event>>,
    /// Every script the runner sent: (its log name, its text).
    sent: Mutex<Vec<(String, String)>>,
    /// The session's scrubber, knowing [`SECRET`].
    scrubber: Scrubber,
    start: Instant,
    clock: Mutex<Duration>,
    cancelled: Mutex<bool>,
    connect: Result<(), String>,
}

impl Scripted {
    fn new(script: Vec<(&'static str, RunKind, Answer)>) -> Scripted {
        Scripted {
            script: Mutex::new(script.into()),
            interrupt_sleep: None,
            sleeps: Mutex::new(0),
            events: Mutex::new(Vec::new()),
            sent: Mutex::new(Vec::new()),
            scrubber: {
                let s = Scrubber::new();
                s.add(&Secret::new(SECRET));
                s
            },
            start: Instant::now(),
            clock: Mutex::new(Duration::ZERO),
            cancelled: Mutex::new(false),
            connect: Ok(()),
        }
    }

    fn events(&self) -> Vec<Event> {
        self.events.lock().expect("events").clone()
    }

    /// The texts of the scripts the runner sent as `what`, in order.
    fn sent(&self, what: &str) -> Vec<String> {
        self.sent
            .lock()
            .expect("sent")
            .iter()
            .filter(|(w, _)| w == what)
            .map(|(_, s)| s.clone())
            .collect()
    }

    fn left(&self) -> Vec<&'static str> {
        self.script
            .lock()
            .expect("script")
            .iter()
            .map(|(w, _, _)| *w)
            .collect()
    }
}

#[async_trait]
impl Remote for Scripted {
    fn host(&self) -> &str {
        "cp1"
    }
    async fn connect(&self) -> Result<(), String> {
        self.connect.clone()
    }
    async fn run(
        &self,
        what: &str,
        script: &str,
        _timeout: Duration,
        kind: RunKind,
    ) -> Result<Output, RemoteError> {
        if *self.cancelled.lock().expect("cancel") && kind != RunKind::Cleanup {
            return Err(RemoteError::Interrupted);
        }
        self.sent
            .lock()
            .expect("sent")
            .push((what.to_string(), script.to_string()));
        let next = self.script.lock().expect("script").pop_front();
        let Some((want, want_kind, answer)) = next else {
            panic!("unexpected script `{what}` ({kind:?}): nothing more was expected\n{script}");
        };
        assert_eq!(
            (what, kind),
            (want, want_kind),
            "the runner sent another script than expected:\n{script}"
        );
        let out = |stdout: &str, exit: i32, stderr: &str| Output {
            stdout: stdout.as_bytes().to_vec(),
            stderr: stderr.as_bytes().to_vec(),
            exit,
        };
        match answer {
            Answer::Ok(s) => Ok(out(s, 0, "")),
            Answer::OkOwned(s) => Ok(out(&s, 0, "")),
            Answer::Exit(code, stderr) => Ok(out("", code, stderr)),
            Answer::Interrupt => {
                *self.cancelled.lock().expect("cancel") = true;
                Err(RemoteError::Interrupted)
            }
        }
    }
    fn emit(&self, e: Event) {
        self.events.lock().expect("events").push(e);
    }
    fn scrub(&self, text: &str) -> String {
        self.scrubber.scrub(text)
    }
    async fn sleep(&self, d: Duration) -> Result<(), Interrupted> {
        let mut n = self.sleeps.lock().expect("sleeps");
        let this = *n;
        *n += 1;
        if Some(this) == self.interrupt_sleep {
            *self.cancelled.lock().expect("cancel") = true;
            return Err(Interrupted);
        }
        *self.clock.lock().expect("clock") += d;
        Ok(())
    }
    fn now(&self) -> Instant {
        self.start + *self.clock.lock().expect("clock")
    }
    fn interrupted(&self) -> bool {
        *self.cancelled.lock().expect("cancel")
    }
    async fn close(&self) {}
}

/// A secret of the session (a host's password).
const SECRET: &str = "s3cret-pass";

fn spec(timeout: Duration) -> VerifySpec {
    VerifySpec {
        kubeconfig: "/etc/kubernetes/admin.conf".into(),
        timeout,
        external_url: "https://kubernetes.io/".into(),
        namespace: "kwin-verify".into(),
        keep_workloads: false,
        dns_domain: "cluster.local".into(),
        linux_workers: true,
        expected: ["cp1", "lw1"]
            .iter()
            .map(|n| ExpectedNode {
                name: n.to_string(),
                windows: false,
                windows_taint: true,
            })
            .collect(),
    }
}

fn list(items: Vec<Value>) -> String {
    json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

fn nodes() -> String {
    let node = |name: &str| {
        json!({"metadata": {"name": name, "labels": {"kubernetes.io/os": "linux"}},
               "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}})
    };
    list(vec![node("cp1"), node("lw1")])
}

fn pods(ready: bool) -> String {
    let status = if ready { "True" } else { "False" };
    let pod = |name: &str, ip: &str| {
        json!({"metadata": {"name": name}, "spec": {"nodeName": "lw1"},
               "status": {"phase": "Running", "podIP": ip, "hostIP": "10.0.0.11",
                          "conditions": [{"type": "Ready", "status": status, "reason": "ContainersNotReady"}]}})
    };
    list(vec![
        pod("linux-web", "10.244.1.7"),
        pod("client", "10.244.1.8"),
    ])
}

fn services() -> String {
    list(vec![json!({"metadata": {"name": "linux-web"},
        "spec": {"type": "NodePort", "clusterIP": "10.101.147.244",
                 "ports": [{"port": 80, "nodePort": 31080}]}})])
}

const NSLOOKUP: &str = "Server:\t\t10.96.0.10\nAddress:\t10.96.0.10#53\n\nName:\tlinux-web.kwin-verify.svc.cluster.local\nAddress: 10.101.147.244\n\n";

use RunKind::{Check, Cleanup};

/// Up to the pods: connect, nodes, no namespace left from an earlier run, apply.
fn deploy() -> Vec<(&'static str, RunKind, Answer)> {
    vec![
        ("verify nodes", Check, Answer::OkOwned(nodes())),
        ("verify namespace", Check, Answer::Ok("absent\n")),
        (
            "verify apply",
            Check,
            Answer::Ok("namespace/kwin-verify serverside-applied\n"),
        ),
    ]
}

fn run(r: &Scripted, spec: &VerifySpec) -> VerifyReport {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(verify(r, spec))
}

/// (check name, result) of every row, in order.
fn rows(events: &[Event]) -> Vec<(String, CheckResult)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Check { name, result, .. } => Some((name.clone(), *result)),
            _ => None,
        })
        .collect()
}

fn ends_with_summary(events: &[Event], checks: usize) {
    match events.last() {
        Some(Event::VerifyFinished { counts, .. }) => assert_eq!(counts.checks, checks),
        other => panic!("the last event is {other:?}, not verify_finished"),
    }
}

#[test]
fn a_healthy_linux_cluster_passes_every_check_and_the_namespace_is_deleted() {
    let mut script = deploy();
    script.extend([
        ("verify pods", Check, Answer::OkOwned(pods(true))),
        ("verify services", Check, Answer::OkOwned(services())),
        ("verify check", Check, Answer::Ok("200 10.244.1.7:80\n")), // pod → pod
        ("verify check", Check, Answer::Ok("200 10.101.147.244:80\n")), // pod → service
        ("verify check", Check, Answer::Ok(NSLOOKUP)),              // dns
        ("verify check", Check, Answer::Ok("200 10.0.0.11:31080\n")), // nodeport
        ("verify check", Check, Answer::Ok("301 18.65.3.12:443\n")), // egress
        (
            "verify cleanup",
            Cleanup,
            Answer::Ok("namespace \"kwin-verify\" deleted\n"),
        ),
    ]);
    let r = Scripted::new(script);
    let report = run(&r, &spec(Duration::from_secs(60)));
    let events = r.events();
    assert!(r.left().is_empty(), "not sent: {:?}", r.left());
    assert!(report.passed(), "{report:?}\n{events:#?}");
    let names: Vec<String> = rows(&events).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "node",
            "node",
            "pods ready",
            "pod → pod",
            "pod → service",
            "dns",
            "nodeport",
            "egress",
            "cleanup"
        ]
    );
    ends_with_summary(&events, 9);
    // Each check asked for what the earlier answers named: linux-web's pod IP, the
    // Service's ClusterIP and name, the NodePort on the node that runs the pod, the egress
    // URL; and the namespace deleted is the one deployed.
    let s = spec(Duration::from_secs(60));
    let (kc, ns) = (s.kubeconfig.as_str(), s.namespace.as_str());
    assert_eq!(
        r.sent("verify check"),
        [
            pod_curl(kc, ns, "client", "http://10.244.1.7:80/", false),
            pod_curl(kc, ns, "client", "http://10.101.147.244:80/", false),
            pod_nslookup(kc, ns, "client", "linux-web.kwin-verify.svc.cluster.local"),
            host_curl("http://10.0.0.11:31080/"),
            pod_curl(kc, ns, "client", "https://kubernetes.io/", false),
        ]
    );
    assert_eq!(r.sent("verify cleanup"), [delete_namespace(kc, ns)]);
}

#[test]
fn interrupted_while_waiting_for_pods_the_namespace_is_deleted() {
    let mut script = deploy();
    script.extend([
        ("verify pods", Check, Answer::OkOwned(pods(false))),
        (
            "verify cleanup",
            Cleanup,
            Answer::Ok("namespace \"kwin-verify\" deleted\n"),
        ),
    ]);
    let mut r = Scripted::new(script);
    r.interrupt_sleep = Some(0);
    let report = run(&r, &spec(Duration::from_secs(900)));
    let events = r.events();
    assert!(r.left().is_empty(), "not sent: {:?}", r.left());
    assert!(report.interrupted && !report.passed(), "{report:?}");
    let interrupted = events
        .iter()
        .position(|e| matches!(e, Event::Interrupted {}))
        .expect("an interrupted event");
    let cleanup = rows(&events)
        .into_iter()
        .find(|(n, _)| n == "cleanup")
        .expect("a cleanup row");
    assert_eq!(cleanup.1, CheckResult::Pass);
    let cleanup_at = events
        .iter()
        .position(|e| matches!(e, Event::Check { name, .. } if name == "cleanup"))
        .expect("cleanup");
    assert!(interrupted < cleanup_at, "{events:#?}");
    ends_with_summary(&events, 3);
}

#[test]
fn interrupted_while_a_check_runs_the_namespace_is_deleted() {
    let mut script = deploy();
    script.extend([
        ("verify pods", Check, Answer::OkOwned(pods(true))),
        ("verify services", Check, Answer::OkOwned(services())),
        ("verify check", Check, Answer::Interrupt),
        ("verify cleanup", Cleanup, Answer::Ok("deleted\n")),
    ]);
    let r = Scripted::new(script);
    let report = run(&r, &spec(Duration::from_secs(60)));
    assert!(r.left().is_empty(), "not sent: {:?}", r.left());
    assert!(report.interrupted);
    let names: Vec<String> = rows(&r.events()).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["node", "node", "pods ready", "cleanup"]);
}

#[test]
fn pods_never_ready_time_out_the_checks_are_skipped_and_the_namespace_is_deleted() {
    let mut script = deploy();
    // 6 s with a look every 3 s: at 0, 3 and 6 s.
    for _ in 0..3 {
        script.push(("verify pods", Check, Answer::OkOwned(pods(false))));
    }
    script.extend([
        ("verify services", Check, Answer::OkOwned(services())),
        ("verify cleanup", Cleanup, Answer::Ok("deleted\n")),
    ]);
    let r = Scripted::new(script);
    let report = run(&r, &spec(Duration::from_secs(6)));
    let events = r.events();
    assert!(r.left().is_empty(), "not sent: {:?}", r.left());
    assert!(!report.interrupted && !report.passed());
    let rows = rows(&events);
    assert_eq!(rows[2], ("pods ready".to_string(), CheckResult::Fail));
    let detail = events
        .iter()
        .find_map(|e| match e {
            Event::Check { name, detail, .. } if name == "pods ready" => Some(detail.clone()),
            _ => None,
        })
        .expect("pods ready row");
    assert!(
        detail.starts_with("timed out after 6s waiting for pods to be ready: linux-web ("),
        "{detail}"
    );
    assert!(rows[3..rows.len() - 1]
        .iter()
        .all(|(_, r)| *r == CheckResult::Skip));
    assert_eq!(rows.last().map(|r| r.1), Some(CheckResult::Pass));
}

#[test]
fn an_api_server_that_does_not_answer_fails_one_row_and_deploys_nothing() {
    let r = Scripted::new(vec![(
        "verify nodes",
        Check,
        Answer::Exit(
            1,
            "The connection to the server 10.0.0.10:6443 was refused - did you specify the right host or port?\n",
        ),
    )]);
    let report = run(&r, &spec(Duration::from_secs(60)));
    let events = r.events();
    assert_eq!(
        rows(&events),
        [("api server".to_string(), CheckResult::Fail)]
    );
    assert!(!report.passed() && !report.interrupted);
    ends_with_summary(&events, 1);
}

#[test]
fn a_host_that_cannot_be_reached_is_one_failed_row_with_its_scrubbed_error() {
    let mut r = Scripted::new(Vec::new());
    r.connect = Err(format!(
        "cannot connect to 10.0.0.10:22: password {SECRET} refused"
    ));
    let report = run(&r, &spec(Duration::from_secs(60)));
    let events = r.events();
    assert!(!report.passed());
    match &events[0] {
        Event::Check {
            name,
            result,
            detail,
            ..
        } => {
            assert_eq!((name.as_str(), *result), ("connect", CheckResult::Fail));
            assert_eq!(
                detail,
                "cannot connect to 10.0.0.10:22: password *** refused"
            );
        }
        other => panic!("{other:?}"),
    }
    ends_with_summary(&events, 1);
}

#[test]
fn kept_workloads_are_not_deleted_and_a_warning_says_how_to() {
    let mut script = deploy();
    script.extend([
        ("verify pods", Check, Answer::OkOwned(pods(true))),
        ("verify services", Check, Answer::OkOwned(services())),
    ]);
    for out in [
        "200 10.244.1.7:80\n",
        "200 10.101.147.244:80\n",
        NSLOOKUP,
        "200 10.0.0.11:31080\n",
        "200 18.65.3.12:443\n",
    ] {
        script.push(("verify check", Check, Answer::Ok(out)));
    }
    let r = Scripted::new(script);
    let mut s = spec(Duration::from_secs(60));
    s.keep_workloads = true;
    let report = run(&r, &s);
    assert!(r.left().is_empty(), "not sent: {:?}", r.left());
    assert!(report.passed(), "{report:?}");
    assert!(r.events().iter().any(|e| matches!(e,
        Event::Warning { message, .. } if message.contains("kubectl delete namespace kwin-verify"))));
}
