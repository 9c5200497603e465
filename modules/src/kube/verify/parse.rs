//! Parsers of what the verify scripts print (`kubectl get -o json`, curl, nslookup,
//! PowerShell's `Invoke-WebRequest`) into check results with their evidence. Pure: unit
//! tests run on captured output.

use kwin_engine::event::CheckResult;
use serde_json::Value;

/// A check's outcome and its evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub result: CheckResult,
    pub detail: String,
}

impl Verdict {
    pub fn pass(detail: impl Into<String>) -> Self {
        Verdict {
            result: CheckResult::Pass,
            detail: detail.into(),
        }
    }
    pub fn fail(detail: impl Into<String>) -> Self {
        Verdict {
            result: CheckResult::Fail,
            detail: detail.into(),
        }
    }
    pub fn skip(detail: impl Into<String>) -> Self {
        Verdict {
            result: CheckResult::Skip,
            detail: detail.into(),
        }
    }
}

/// What an HTTP check accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// A 2xx answer (our own web servers).
    Success,
    /// Any HTTP answer (an external site may redirect or refuse; it answered).
    AnyAnswer,
}

/// The most telling line of a failed command's stderr: curl's own error, else kubectl's.
fn error_line(stderr: &str, exit: i32) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let pick = lines
        .iter()
        .find(|l| l.starts_with("curl: ("))
        .or_else(|| {
            lines
                .iter()
                .find(|l| !l.starts_with("command terminated with exit code"))
        })
        .or_else(|| lines.first());
    match pick {
        Some(l) => clip(l),
        None => format!("exit code {exit}, no output"),
    }
}

fn clip(s: &str) -> String {
    const MAX: usize = 300;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

fn judge_status(code: u16, from: &str, expect: Expect) -> Verdict {
    let ok = match expect {
        Expect::Success => (200..300).contains(&code),
        Expect::AnyAnswer => code > 0,
    };
    let text = format!("HTTP {code}{from}");
    if ok {
        Verdict::pass(text)
    } else {
        Verdict::fail(text)
    }
}

/// The result of [`pod_curl`] / [`host_curl`]: stdout `CODE IP:PORT` (curl's `-w`), stderr
/// curl's error (`curl: (28) Connection timed out after 10001 milliseconds`) and kubectl's.
pub fn parse_curl(stdout: &str, stderr: &str, exit: i32, expect: Expect) -> Verdict {
    let line = stdout.lines().map(str::trim).rfind(|l| !l.is_empty());
    let parsed = line.and_then(|l| {
        let mut it = l.split_whitespace();
        let code: u16 = it.next()?.parse().ok()?;
        Some((code, it.next().unwrap_or("").to_string()))
    });
    match parsed {
        Some((code, remote)) if code > 0 => {
            let from = if remote.is_empty() || remote == ":0" || remote.starts_with(':') {
                String::new()
            } else {
                format!(" from {remote}")
            };
            judge_status(code, &from, expect)
        }
        _ => Verdict::fail(error_line(stderr, exit)),
    }
}

/// The result of [`pod_nslookup`] (bind's or busybox's nslookup): passes when `want` is among
/// the addresses given for the name.
pub fn parse_nslookup(stdout: &str, stderr: &str, exit: i32, want: &str) -> Verdict {
    let mut in_answer = false;
    let mut addrs: Vec<String> = Vec::new();
    for l in stdout.lines().map(str::trim) {
        if l.starts_with("Name:") {
            in_answer = true;
            continue;
        }
        if in_answer {
            if let Some(a) = l.strip_prefix("Address:").or_else(|| {
                // busybox: "Address 1: 10.96.0.1 kubernetes.default..."
                l.strip_prefix("Address ")
                    .and_then(|r| r.split_once(':').map(|(_, a)| a))
            }) {
                if let Some(ip) = a.split_whitespace().next() {
                    addrs.push(ip.to_string());
                }
            }
        }
    }
    if addrs.iter().any(|a| a == want) {
        return Verdict::pass(format!("resolves to {want}"));
    }
    if !addrs.is_empty() {
        return Verdict::fail(format!(
            "resolves to {}, not the Service's {want}",
            addrs.join(", ")
        ));
    }
    let why = stdout
        .lines()
        .chain(stderr.lines())
        .map(str::trim)
        .find(|l| l.starts_with("**") || l.starts_with(";;"))
        .map(|l| clip(l.trim_start_matches("** ").trim_start_matches(";; ")))
        .unwrap_or_else(|| error_line(stderr, exit));
    Verdict::fail(why)
}

// --------------------------------------------------------------------------- nodes

/// A node the plan expects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedNode {
    pub name: String,
    pub windows: bool,
    /// Windows node registered with `os=windows:NoSchedule` (`cluster.windows_taint`).
    pub windows_taint: bool,
}

/// One node check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeCheck {
    pub node: String,
    pub verdict: Verdict,
}

fn items(json: &str) -> Result<Vec<Value>, String> {
    let v: Value =
        serde_json::from_str(json).map_err(|e| format!("kubectl printed no JSON list ({e})"))?;
    v.get("items")
        .and_then(Value::as_array)
        .cloned()
        .ok_or_else(|| "kubectl printed no JSON list (no `items`)".to_string())
}

fn name_of(item: &Value) -> &str {
    item.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn label<'a>(item: &'a Value, key: &str) -> Option<&'a str> {
    item.pointer("/metadata/labels")
        .and_then(|l| l.get(key))
        .and_then(Value::as_str)
}

fn condition<'a>(item: &'a Value, kind: &str) -> Option<&'a Value> {
    item.pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
        })
}

fn field<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Check every expected node in `kubectl get nodes -o json`: registered, Ready, the right
/// `kubernetes.io/os`; Windows nodes also `node.kubernetes.io/windows-build` and (when the
/// plan asks for it) the taint `os=windows:NoSchedule`.
pub fn check_nodes(expected: &[ExpectedNode], nodes_json: &str) -> Result<Vec<NodeCheck>, String> {
    let nodes = items(nodes_json)?;
    Ok(expected
        .iter()
        .map(|e| {
            let verdict = match nodes.iter().find(|n| name_of(n) == e.name) {
                None => Verdict::fail("not registered with the API server"),
                Some(n) => check_node(e, n),
            };
            NodeCheck {
                node: e.name.clone(),
                verdict,
            }
        })
        .collect())
}

fn check_node(e: &ExpectedNode, n: &Value) -> Verdict {
    let mut problems = Vec::new();
    let mut facts = Vec::new();
    match condition(n, "Ready") {
        Some(c) if field(c, "status") == "True" => facts.push("Ready".to_string()),
        Some(c) => {
            let mut why = format!("NotReady (Ready={}", field(c, "status"));
            if !field(c, "reason").is_empty() {
                why.push_str(&format!(": {}", field(c, "reason")));
            }
            if !field(c, "message").is_empty() {
                why.push_str(&format!(": {}", clip(field(c, "message"))));
            }
            why.push(')');
            problems.push(why);
        }
        None => problems.push("NotReady (no Ready condition reported)".to_string()),
    }
    let want_os = if e.windows { "windows" } else { "linux" };
    match label(n, "kubernetes.io/os") {
        Some(os) if os == want_os => facts.push(format!("kubernetes.io/os={os}")),
        Some(os) => problems.push(format!("kubernetes.io/os={os}, expected {want_os}")),
        None => problems.push(format!("no label kubernetes.io/os (expected {want_os})")),
    }
    if e.windows {
        match label(n, "node.kubernetes.io/windows-build") {
            Some(b) if !b.is_empty() => facts.push(format!("windows-build={b}")),
            _ => problems.push("no label node.kubernetes.io/windows-build".to_string()),
        }
        let tainted = n
            .pointer("/spec/taints")
            .and_then(Value::as_array)
            .is_some_and(|ts| {
                ts.iter().any(|t| {
                    field(t, "key") == "os"
                        && field(t, "value") == "windows"
                        && field(t, "effect") == "NoSchedule"
                })
            });
        match (e.windows_taint, tainted) {
            (true, true) => facts.push("taint os=windows:NoSchedule".to_string()),
            (true, false) => problems.push("no taint os=windows:NoSchedule".to_string()),
            _ => {}
        }
    }
    if problems.is_empty() {
        Verdict::pass(facts.join(", "))
    } else {
        Verdict::fail(problems.join("; "))
    }
}

/// `node.kubernetes.io/windows-build` of the first of `names` that has one.
pub fn windows_build(nodes_json: &str, names: &[String]) -> Option<String> {
    let nodes = items(nodes_json).ok()?;
    names.iter().find_map(|want| {
        nodes
            .iter()
            .find(|n| name_of(n) == want)
            .and_then(|n| label(n, "node.kubernetes.io/windows-build"))
            .filter(|b| !b.is_empty())
            .map(str::to_string)
    })
}

// --------------------------------------------------------------------------- pods, services

/// One awaited pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodState {
    pub name: String,
    pub ready: bool,
    pub node: Option<String>,
    pub pod_ip: Option<String>,
    pub host_ip: Option<String>,
    /// Why it is not ready: `not created`, `not scheduled: 0/3 nodes are available: ...`,
    /// `ImagePullBackOff: ...`, `Pending`.
    pub why: String,
}

/// The state of each pod in `names` from `kubectl get pods -o json`.
pub fn pod_states(pods_json: &str, names: &[&str]) -> Result<Vec<PodState>, String> {
    let pods = items(pods_json)?;
    Ok(names
        .iter()
        .map(|want| match pods.iter().find(|p| name_of(p) == *want) {
            None => PodState {
                name: want.to_string(),
                ready: false,
                node: None,
                pod_ip: None,
                host_ip: None,
                why: "not created".into(),
            },
            Some(p) => pod_state(p),
        })
        .collect())
}

fn opt(v: &Value, ptr: &str) -> Option<String> {
    v.pointer(ptr)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn pod_state(p: &Value) -> PodState {
    let ready = condition(p, "Ready").is_some_and(|c| field(c, "status") == "True");
    let node = opt(p, "/spec/nodeName");
    let phase = opt(p, "/status/phase").unwrap_or_else(|| "Pending".into());
    let why = if ready {
        String::new()
    } else if node.is_none() {
        match condition(p, "PodScheduled") {
            Some(c) if field(c, "status") == "False" && !field(c, "message").is_empty() => {
                format!("not scheduled: {}", clip(field(c, "message")))
            }
            _ => "not scheduled: no node assigned yet".to_string(),
        }
    } else {
        let waiting = p
            .pointer("/status/containerStatuses")
            .and_then(Value::as_array)
            .and_then(|cs| {
                cs.iter().find_map(|c| {
                    c.pointer("/state/waiting")
                        .or_else(|| c.pointer("/state/terminated"))
                })
            });
        match waiting {
            Some(w) if !field(w, "reason").is_empty() => {
                let mut s = field(w, "reason").to_string();
                if !field(w, "message").is_empty() {
                    s.push_str(&format!(": {}", clip(field(w, "message"))));
                }
                s
            }
            _ => match condition(p, "Ready") {
                Some(c) if !field(c, "message").is_empty() => {
                    format!("{phase}: {}", clip(field(c, "message")))
                }
                _ => phase,
            },
        }
    };
    PodState {
        name: name_of(p).to_string(),
        ready,
        node,
        pod_ip: opt(p, "/status/podIP"),
        host_ip: opt(p, "/status/hostIP"),
        why,
    }
}

/// A Service's addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceInfo {
    pub name: String,
    pub cluster_ip: Option<String>,
    pub node_port: Option<u16>,
}

/// Every Service in `kubectl get services -o json`.
pub fn services(json: &str) -> Result<Vec<ServiceInfo>, String> {
    Ok(items(json)?
        .iter()
        .map(|s| ServiceInfo {
            name: name_of(s).to_string(),
            cluster_ip: opt(s, "/spec/clusterIP").filter(|ip| ip != "None"),
            node_port: s
                .pointer("/spec/ports/0/nodePort")
                .and_then(Value::as_u64)
                .and_then(|p| u16::try_from(p).ok()),
        })
        .collect())
}

/// `http://IP:PORT/` (IPv6 in brackets).
pub fn http_url(ip: &str, port: u16) -> String {
    if ip.contains(':') {
        format!("http://[{ip}]:{port}/")
    } else {
        format!("http://{ip}:{port}/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pass(v: &Verdict) -> bool {
        v.result == CheckResult::Pass
    }

    // ------------------------------------------------------------------ curl (kubectl exec)

    #[test]
    fn curl_answers_and_failures() {
        let ok = parse_curl("200 10.244.1.5:80\n", "", 0, Expect::Success);
        assert!(pass(&ok), "{ok:?}");
        assert_eq!(ok.detail, "HTTP 200 from 10.244.1.5:80");
        // The server answered, with an error: fails for our web servers, passes for egress.
        let e503 = parse_curl("503 10.96.12.7:80\n", "", 0, Expect::Success);
        assert_eq!(e503, Verdict::fail("HTTP 503 from 10.96.12.7:80"));
        assert!(pass(&parse_curl(
            "301 18.65.3.12:443\n",
            "",
            0,
            Expect::AnyAnswer
        )));
        let refused = parse_curl(
            "000 :0\n",
            "curl: (7) Failed to connect to 10.244.1.5 port 80 after 1 ms: Couldn't connect to server\ncommand terminated with exit code 7\n",
            7,
            Expect::Success,
        );
        assert_eq!(
            refused,
            Verdict::fail(
                "curl: (7) Failed to connect to 10.244.1.5 port 80 after 1 ms: Couldn't connect to server"
            )
        );
        let timeout = parse_curl(
            "000 :0\n",
            "curl: (28) Connection timed out after 10002 milliseconds\ncommand terminated with exit code 28\n",
            28,
            Expect::AnyAnswer,
        );
        assert_eq!(
            timeout,
            Verdict::fail("curl: (28) Connection timed out after 10002 milliseconds")
        );
        let dns = parse_curl(
            "000 :0\n",
            "curl: (6) Could not resolve host: kubernetes.io\ncommand terminated with exit code 6\n",
            6,
            Expect::AnyAnswer,
        );
        assert_eq!(dns.result, CheckResult::Fail);
        assert!(dns.detail.contains("Could not resolve host"));
        let no_pod = parse_curl(
            "",
            "Error from server (NotFound): pods \"client\" not found\n",
            1,
            Expect::Success,
        );
        assert_eq!(
            no_pod,
            Verdict::fail("Error from server (NotFound): pods \"client\" not found")
        );
        let nothing = parse_curl("", "", 255, Expect::Success);
        assert_eq!(nothing, Verdict::fail("exit code 255, no output"));
    }

    // ------------------------------------------------------------------------- nslookup

    const BIND_OK: &str = "Server:\t\t10.96.0.10\nAddress:\t10.96.0.10#53\n\nName:\twin-web.kwin-verify.svc.cluster.local\nAddress: 10.101.147.244\n\n";
    const BUSYBOX_OK: &str = "Server:\t\t10.96.0.10\nAddress:\t10.96.0.10:53\n\n\nName:\twin-web.kwin-verify.svc.cluster.local\nAddress: 10.101.147.244\n\n";
    const BUSYBOX_OLD: &str = "Server:    10.96.0.10\nAddress 1: 10.96.0.10 kube-dns.kube-system.svc.cluster.local\n\nName:      win-web.kwin-verify.svc.cluster.local\nAddress 1: 10.101.147.244 win-web.kwin-verify.svc.cluster.local\n";

    #[test]
    fn nslookup_formats() {
        for out in [BIND_OK, BUSYBOX_OK, BUSYBOX_OLD] {
            assert_eq!(
                parse_nslookup(out, "", 0, "10.101.147.244"),
                Verdict::pass("resolves to 10.101.147.244"),
                "{out}"
            );
            // The server's own address never counts as the answer.
            assert_eq!(
                parse_nslookup(out, "", 0, "10.96.0.10").result,
                CheckResult::Fail
            );
        }
        assert_eq!(
            parse_nslookup(BIND_OK, "", 0, "10.96.5.5"),
            Verdict::fail("resolves to 10.101.147.244, not the Service's 10.96.5.5")
        );
        let nx = parse_nslookup(
            "Server:\t\t10.96.0.10\nAddress:\t10.96.0.10#53\n\n** server can't find win-web.kwin-verify.svc.cluster.local: NXDOMAIN\n\n",
            "command terminated with exit code 1\n",
            1,
            "10.101.147.244",
        );
        assert_eq!(
            nx,
            Verdict::fail("server can't find win-web.kwin-verify.svc.cluster.local: NXDOMAIN")
        );
        let timeout = parse_nslookup(
            ";; connection timed out; no servers could be reached\n\n",
            "command terminated with exit code 1\n",
            1,
            "10.101.147.244",
        );
        assert_eq!(
            timeout,
            Verdict::fail("connection timed out; no servers could be reached")
        );
    }

    // ---------------------------------------------------------------------------- nodes

    fn expected() -> Vec<ExpectedNode> {
        vec![
            ExpectedNode {
                name: "cp1".into(),
                windows: false,
                windows_taint: true,
            },
            ExpectedNode {
                name: "ww1".into(),
                windows: true,
                windows_taint: true,
            },
        ]
    }

    fn node(name: &str, labels: Value, taints: Value, ready: &str) -> Value {
        serde_json::json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {"podCIDR": "10.244.1.0/24", "taints": taints},
            "status": {"conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {"type": "Ready", "status": ready, "reason": if ready == "True" { "KubeletReady" } else { "KubeletNotReady" },
                 "message": if ready == "True" { "kubelet is posting ready status" } else { "container runtime network not ready: NetworkReady=false" }}
            ]}
        })
    }

    fn list(items: Vec<Value>) -> String {
        serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}).to_string()
    }

    #[test]
    fn nodes_ready_with_labels_and_taint() {
        let good = list(vec![
            node(
                "cp1",
                serde_json::json!({"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}),
                serde_json::json!([{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]),
                "True",
            ),
            node(
                "ww1",
                serde_json::json!({"kubernetes.io/os": "windows", "node.kubernetes.io/windows-build": "10.0.20348"}),
                serde_json::json!([{"key": "os", "value": "windows", "effect": "NoSchedule"}]),
                "True",
            ),
        ]);
        let rows = check_nodes(&expected(), &good).expect("parse");
        assert!(rows.iter().all(|r| pass(&r.verdict)), "{rows:?}");
        assert_eq!(
            rows[1].verdict.detail,
            "Ready, kubernetes.io/os=windows, windows-build=10.0.20348, taint os=windows:NoSchedule"
        );
        assert_eq!(
            windows_build(&good, &["ww1".to_string()]).as_deref(),
            Some("10.0.20348")
        );
    }

    #[test]
    fn each_node_problem_fails_its_row() {
        let bad = list(vec![node(
            "ww1",
            serde_json::json!({"kubernetes.io/os": "linux"}),
            serde_json::json!([{"key": "os", "value": "windows", "effect": "PreferNoSchedule"}]),
            "False",
        )]);
        let rows = check_nodes(&expected(), &bad).expect("parse");
        assert_eq!(
            rows[0].verdict,
            Verdict::fail("not registered with the API server")
        );
        let d = &rows[1].verdict;
        assert_eq!(d.result, CheckResult::Fail);
        for want in [
            "NotReady (Ready=False: KubeletNotReady: container runtime network not ready",
            "kubernetes.io/os=linux, expected windows",
            "no label node.kubernetes.io/windows-build",
            "no taint os=windows:NoSchedule",
        ] {
            assert!(d.detail.contains(want), "{want} missing: {}", d.detail);
        }
        // Without `windows_taint` the taint is not asked for.
        let mut e = expected();
        e[1].windows_taint = false;
        let rows = check_nodes(&e, &bad).expect("parse");
        assert!(!rows[1].verdict.detail.contains("taint"));
        assert!(check_nodes(&e, "error: You must be logged in").is_err());
        assert!(check_nodes(&e, "{\"kind\": \"Status\"}").is_err());
    }

    // ----------------------------------------------------------------------------- pods

    #[test]
    fn pod_states_say_why_not_ready() {
        let pods = list(vec![
            serde_json::json!({"metadata": {"name": "win-web"}, "spec": {"nodeName": "ww1"},
              "status": {"phase": "Pending", "hostIP": "10.0.0.21",
                "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": "containers with unready status: [windowswebserver]"},
                               {"type": "PodScheduled", "status": "True"}],
                "containerStatuses": [{"name": "windowswebserver", "ready": false,
                  "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image \"mcr.microsoft.com/windows/servercore:ltsc2019\""}}}]}}),
            serde_json::json!({"metadata": {"name": "client"}, "spec": {},
              "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/3 nodes are available: 1 node(s) had untolerated taint {os: windows}, 2 node(s) didn't match Pod's node affinity/selector."}]}}),
            serde_json::json!({"metadata": {"name": "linux-web"}, "spec": {"nodeName": "lw1"},
              "status": {"phase": "Running", "podIP": "10.244.1.7", "hostIP": "10.0.0.11",
                "conditions": [{"type": "Ready", "status": "True"}]}}),
        ]);
        let s = pod_states(&pods, &["win-web", "linux-web", "client", "missing"]).expect("parse");
        assert!(!s[0].ready);
        assert_eq!(
            s[0].why,
            "ImagePullBackOff: Back-off pulling image \"mcr.microsoft.com/windows/servercore:ltsc2019\""
        );
        assert!(s[1].ready);
        assert_eq!(s[1].pod_ip.as_deref(), Some("10.244.1.7"));
        assert_eq!(s[1].host_ip.as_deref(), Some("10.0.0.11"));
        assert!(s[2]
            .why
            .starts_with("not scheduled: 0/3 nodes are available"));
        assert_eq!(s[3].why, "not created");
    }

    #[test]
    fn services_and_urls() {
        let svcs = list(vec![serde_json::json!({"metadata": {"name": "win-web"},
            "spec": {"type": "NodePort", "clusterIP": "10.101.147.244",
                     "ports": [{"port": 80, "targetPort": 80, "nodePort": 31080, "protocol": "TCP"}]}})]);
        let s = services(&svcs).expect("parse");
        assert_eq!(s[0].cluster_ip.as_deref(), Some("10.101.147.244"));
        assert_eq!(s[0].node_port, Some(31080));
        assert_eq!(http_url("10.0.0.21", 31080), "http://10.0.0.21:31080/");
        assert_eq!(http_url("fd00::5", 80), "http://[fd00::5]:80/");
    }
}
