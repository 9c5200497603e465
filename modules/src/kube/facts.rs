//! Typed facts of the Kubernetes modules and their pure parsers.
//!
//! Every fact script prints a first line `kwin: <state> [detail]`, then data, and exits 0
//! when it could answer; a non-zero exit is a fact error carrying the script's stderr. The
//! scripts themselves are built by the modules (they carry the module's params); a fact here
//! is the script plus the parser of its answer.

use kwin_engine::fact::{Fact, FactError, FactOutput};
use kwin_engine::transport::Shell;
use sha2::{Digest, Sha256};

/// The `kwin: <state>` header and the lines after it.
pub(super) fn header(out: &FactOutput) -> Result<(String, Vec<String>), FactError> {
    if out.exit != 0 {
        return Err(FactError::Command {
            exit: out.exit,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let text = out.stdout_str()?.replace("\r\n", "\n");
    let mut lines = text.lines().skip_while(|l| l.trim().is_empty());
    let first = lines.next().unwrap_or_default();
    let state = first
        .strip_prefix("kwin: ")
        .ok_or_else(|| FactError::Parse(format!("expected a `kwin:` header, got {first:?}")))?;
    Ok((
        state.trim().to_string(),
        lines.map(str::to_string).collect(),
    ))
}

/// Short stable hash of a script, for fact keys of facts that carry content.
pub fn script_key(prefix: &str, script: &str) -> String {
    let h = hex::encode(Sha256::digest(script.as_bytes()));
    format!("{prefix}:{}", &h[..16])
}

/// Why the API server cannot be asked (yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoCluster {
    NoKubectl,
    NoKubeconfig,
}

impl NoCluster {
    pub(super) fn from_state(state: &str) -> Option<Self> {
        match state {
            "no-kubectl" => Some(NoCluster::NoKubectl),
            "no-kubeconfig" => Some(NoCluster::NoKubeconfig),
            _ => None,
        }
    }
    pub fn describe(&self, kubeconfig: &str) -> String {
        match self {
            NoCluster::NoKubectl => "kubectl is not installed yet".into(),
            NoCluster::NoKubeconfig => {
                format!("{kubeconfig} does not exist yet (the cluster is not initialised)")
            }
        }
    }
}

// ------------------------------------------------------------------------- kube_apply

/// `kubectl diff --server-side` of a manifest (kube_apply).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffFact {
    pub script: String,
}

/// The answer of [`DiffFact`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffState {
    NoCluster(NoCluster),
    /// The manifest is not on the host yet (URL not fetched, large content not uploaded, or
    /// the `path` missing).
    NotStaged(String),
    /// A patch's target object is not in the manifest.
    TargetMissing(String),
    /// The live objects equal the manifest applied by kwin's field manager.
    Same,
    /// They differ: the normalised diff.
    Differs(ObjectDiff),
    /// The diff could not be computed because something the manifest needs does not exist
    /// yet (its namespace, the CRD of a kind); the apply creates it or an earlier task does.
    Pending(String),
}

/// A normalised `kubectl diff` output.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObjectDiff {
    /// Objects that differ, as kubectl names them (`apps.v1.DaemonSet.kube-flannel.kube-flannel-ds`).
    pub objects: Vec<String>,
    /// How many of them do not exist yet.
    pub new: usize,
    /// The unified diff, temporary paths and timestamps removed.
    pub text: String,
}

impl Fact for DiffFact {
    type Output = DiffState;
    fn key(&self) -> String {
        script_key("kube.diff", &self.script)
    }
    fn command(&self, shell: Shell) -> String {
        match shell {
            Shell::Posix => self.script.clone(),
            Shell::PowerShell => "Write-Error 'kube_apply runs on a POSIX control plane'".into(),
        }
    }
    fn parse(&self, out: &FactOutput) -> Result<DiffState, FactError> {
        parse_diff(out)
    }
}

/// Parse a [`DiffFact`] answer.
pub fn parse_diff(out: &FactOutput) -> Result<DiffState, FactError> {
    let (state, lines) = header(out)?;
    if let Some(nc) = NoCluster::from_state(&state) {
        return Ok(DiffState::NoCluster(nc));
    }
    let (word, detail) = state.split_once(' ').unwrap_or((state.as_str(), ""));
    match word {
        "not-staged" => Ok(DiffState::NotStaged(detail.to_string())),
        "target-missing" => Ok(DiffState::TargetMissing(detail.to_string())),
        "diff" => {
            let rc: i32 = detail
                .trim()
                .parse()
                .map_err(|_| FactError::Parse(format!("bad diff exit code {detail:?}")))?;
            match rc {
                0 => Ok(DiffState::Same),
                1 => Ok(DiffState::Differs(normalize_diff(&lines))),
                _ => {
                    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
                    match pending_reason(&stderr) {
                        Some(why) => Ok(DiffState::Pending(why)),
                        None => Err(FactError::Command { exit: rc, stderr }),
                    }
                }
            }
        }
        _ => Err(FactError::Parse(format!("unknown state `{state}`"))),
    }
}

/// kubectl's message when a namespace or a kind does not exist yet, as a reason.
fn pending_reason(stderr: &str) -> Option<String> {
    for line in stderr.lines() {
        // Error from server (NotFound): namespaces "kube-flannel" not found
        if let Some(rest) = line.split("namespaces \"").nth(1) {
            if let Some((ns, tail)) = rest.split_once('"') {
                if tail.trim_start().starts_with("not found") {
                    return Some(format!("namespace {ns} does not exist yet"));
                }
            }
        }
        // ... no matches for kind "Installation" in version "operator.tigera.io/v1"
        if let Some(rest) = line.split("no matches for kind \"").nth(1) {
            let kind = rest.split('"').next().unwrap_or_default();
            let version = rest
                .split("in version \"")
                .nth(1)
                .and_then(|v| v.split('"').next())
                .unwrap_or_default();
            return Some(format!(
                "kind {kind} ({version}) is not served yet (its CustomResourceDefinition is not installed)"
            ));
        }
        // kubectl with a discovery cache from before the CRD went away (or from another
        // API server that had it): Error from server (NotFound): the server could not find
        // the requested resource (patch installations.operator.tigera.io default)
        if let Some(rest) = line.split("could not find the requested resource (").nth(1) {
            let resource = rest.split_whitespace().nth(1).unwrap_or("this resource");
            return Some(format!(
                "kind {resource} is not served yet (its CustomResourceDefinition is not installed)"
            ));
        }
    }
    None
}

/// Turn kubectl's `diff -u -N /tmp/LIVE-123/x /tmp/MERGED-456/x` output into a stable unified
/// diff with `live/x` and `merged/x` headers, and count the objects.
pub fn normalize_diff(lines: &[String]) -> ObjectDiff {
    let mut d = ObjectDiff::default();
    let mut last_minus_was_header = false;
    for line in lines {
        if line.starts_with("diff -u -N ") {
            let object = line
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .trim()
                .to_string();
            d.objects.push(object);
            last_minus_was_header = false;
            continue;
        }
        if let Some(rest) = line.strip_prefix("--- ") {
            d.text.push_str(&format!("--- live/{}\n", object_of(rest)));
            continue;
        }
        if let Some(rest) = line.strip_prefix("+++ ") {
            d.text
                .push_str(&format!("+++ merged/{}\n", object_of(rest)));
            last_minus_was_header = true;
            continue;
        }
        if last_minus_was_header && line.starts_with("@@ -0,0 ") {
            d.new += 1;
        }
        last_minus_was_header = false;
        d.text.push_str(line);
        d.text.push('\n');
    }
    d
}

/// `/tmp/LIVE-123/apps.v1.DaemonSet.ns.name\t2026-...` → `apps.v1.DaemonSet.ns.name`.
fn object_of(header: &str) -> &str {
    let path = header.split('\t').next().unwrap_or_default();
    path.rsplit('/').next().unwrap_or(path).trim()
}

// -------------------------------------------------------------------------- kube_wait

/// Whether the awaited objects are ready (kube_wait).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitFact {
    pub script: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitState {
    NoCluster(NoCluster),
    /// One entry per awaited name: `None` when ready, else what is not.
    Checked(Vec<(String, Option<String>)>),
}

impl WaitState {
    /// The not-ready entries' details.
    pub fn pending(&self) -> Vec<String> {
        match self {
            WaitState::NoCluster(_) => Vec::new(),
            WaitState::Checked(v) => v.iter().filter_map(|(_, d)| d.clone()).collect(),
        }
    }
}

impl Fact for WaitFact {
    type Output = WaitState;
    fn key(&self) -> String {
        script_key("kube.wait", &self.script)
    }
    fn command(&self, shell: Shell) -> String {
        match shell {
            Shell::Posix => self.script.clone(),
            Shell::PowerShell => "Write-Error 'kube_wait runs on a POSIX control plane'".into(),
        }
    }
    fn parse(&self, out: &FactOutput) -> Result<WaitState, FactError> {
        parse_wait(out)
    }
}

/// Parse a [`WaitFact`] answer: `ok NAME` / `no NAME DETAIL` lines after `kwin: checked`.
pub fn parse_wait(out: &FactOutput) -> Result<WaitState, FactError> {
    let (state, lines) = header(out)?;
    if let Some(nc) = NoCluster::from_state(&state) {
        return Ok(WaitState::NoCluster(nc));
    }
    if state != "checked" {
        return Err(FactError::Parse(format!("unknown state `{state}`")));
    }
    let mut items = Vec::new();
    for line in lines.iter().filter(|l| !l.trim().is_empty()) {
        let mut parts = line.splitn(3, ' ');
        let (word, name, detail) = (
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default().to_string(),
            parts.next().unwrap_or_default().trim().to_string(),
        );
        match word {
            "ok" => items.push((name, None)),
            "no" => items.push((name, Some(detail))),
            _ => return Err(FactError::Parse(format!("unexpected line {line:?}"))),
        }
    }
    Ok(WaitState::Checked(items))
}

// ----------------------------------------------------------------------- kubeadm_init

/// Whether this node runs an initialised, healthy control plane (kubeadm_init).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitFact {
    pub kubeconfig: String,
    pub script: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitState {
    /// Nothing of a control plane here.
    Absent,
    /// The admin kubeconfig exists and `/readyz` answers ok.
    Healthy,
    /// The admin kubeconfig exists but the API server does not answer: what it said.
    Unhealthy(String),
    /// No admin kubeconfig, but this file of an earlier kubeadm run exists.
    Leftover(String),
}

impl Fact for InitFact {
    type Output = InitState;
    fn key(&self) -> String {
        format!("kube.init:{}", self.kubeconfig)
    }
    fn command(&self, shell: Shell) -> String {
        match shell {
            Shell::Posix => self.script.clone(),
            Shell::PowerShell => "Write-Error 'kubeadm_init runs on a POSIX host'".into(),
        }
    }
    fn parse(&self, out: &FactOutput) -> Result<InitState, FactError> {
        parse_init(out)
    }
}

pub fn parse_init(out: &FactOutput) -> Result<InitState, FactError> {
    let (state, lines) = header(out)?;
    let (word, detail) = state.split_once(' ').unwrap_or((state.as_str(), ""));
    match word {
        "absent" => Ok(InitState::Absent),
        "healthy" => Ok(InitState::Healthy),
        "unhealthy" => Ok(InitState::Unhealthy(
            lines
                .iter()
                .map(|l| l.trim())
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join("; "),
        )),
        "leftover" => Ok(InitState::Leftover(detail.to_string())),
        _ => Err(FactError::Parse(format!("unknown state `{state}`"))),
    }
}

// ----------------------------------------------------------------------- kubeadm_join

/// Whether this node joined a cluster (kubeadm_join), on Linux or Windows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinFact {
    pub marker: String,
    pub script: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JoinState {
    Joined,
    /// Not joined; files an earlier, failed `kubeadm join` left (its preflight refuses them).
    NotJoined {
        leftovers: Vec<String>,
    },
}

impl Fact for JoinFact {
    type Output = JoinState;
    fn key(&self) -> String {
        format!("kube.join:{}", self.marker.to_ascii_lowercase())
    }
    fn command(&self, _shell: Shell) -> String {
        self.script.clone()
    }
    fn parse(&self, out: &FactOutput) -> Result<JoinState, FactError> {
        parse_join(out)
    }
}

pub fn parse_join(out: &FactOutput) -> Result<JoinState, FactError> {
    let (state, lines) = header(out)?;
    match state.as_str() {
        "joined" => Ok(JoinState::Joined),
        "not-joined" => Ok(JoinState::NotJoined {
            leftovers: lines
                .iter()
                .filter_map(|l| l.trim().strip_prefix("leftover "))
                .map(str::to_string)
                .collect(),
        }),
        _ => Err(FactError::Parse(format!("unknown state `{state}`"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(stdout: &str, stderr: &str, exit: i32) -> FactOutput {
        FactOutput {
            stdout: stdout.as_bytes().to_vec(),
            stderr: stderr.as_bytes().to_vec(),
            exit,
        }
    }

    /// Captured from kubectl 1.32 against kube-apiserver 1.20 (lab/apiserver).
    const CAPTURED_DIFF: &str = "kwin: diff 1\n\
diff -u -N /tmp/LIVE-2495480362/v1.ConfigMap.kube-flannel.kube-flannel-cfg /tmp/MERGED-4117861299/v1.ConfigMap.kube-flannel.kube-flannel-cfg\n\
--- /tmp/LIVE-2495480362/v1.ConfigMap.kube-flannel.kube-flannel-cfg\t2026-11-22 03:34:43.978400247 +0000\n\
+++ /tmp/MERGED-4117861299/v1.ConfigMap.kube-flannel.kube-flannel-cfg\t2026-11-22 03:34:43.982400247 +0000\n\
@@ -1,7 +1,7 @@\n\
 apiVersion: v1\n\
 data:\n\
   net-conf.json: '{\"Network\": \"10.244.0.0/16\", \"Backend\": {\"Type\": \"vxlan\", \"VNI\":\n\
-    4096, \"Port\": 4789}}'\n\
+    4097, \"Port\": 4789}}'\n\
 kind: ConfigMap\n\
diff -u -N /tmp/LIVE-1/v1.Namespace..new-ns /tmp/MERGED-2/v1.Namespace..new-ns\n\
--- /tmp/LIVE-1/v1.Namespace..new-ns\t2026-11-22 03:34:43.978400247 +0000\n\
+++ /tmp/MERGED-2/v1.Namespace..new-ns\t2026-11-22 03:34:43.982400247 +0000\n\
@@ -0,0 +1,4 @@\n\
+apiVersion: v1\n\
+kind: Namespace\n";

    #[test]
    fn diff_is_normalised() {
        let st = parse_diff(&out(CAPTURED_DIFF, "", 0)).expect("parse");
        let DiffState::Differs(d) = st else {
            panic!("{st:?}")
        };
        assert_eq!(
            d.objects,
            [
                "v1.ConfigMap.kube-flannel.kube-flannel-cfg",
                "v1.Namespace..new-ns"
            ]
        );
        assert_eq!(d.new, 1);
        assert!(d
            .text
            .starts_with("--- live/v1.ConfigMap.kube-flannel.kube-flannel-cfg\n+++ merged/"));
        assert!(!d.text.contains("/tmp/"), "{}", d.text);
        assert!(d.text.contains("+    4097"));
    }

    #[test]
    fn diff_states() {
        assert_eq!(
            parse_diff(&out("kwin: diff 0\n", "", 0)),
            Ok(DiffState::Same)
        );
        assert_eq!(
            parse_diff(&out("kwin: no-kubeconfig\n", "", 0)),
            Ok(DiffState::NoCluster(NoCluster::NoKubeconfig))
        );
        assert_eq!(
            parse_diff(&out(
                "kwin: diff 2\n",
                "Error from server (NotFound): namespaces \"kube-flannel\" not found\n",
                0
            )),
            Ok(DiffState::Pending(
                "namespace kube-flannel does not exist yet".into()
            ))
        );
        let crd = parse_diff(&out("kwin: diff 1\r\n", "", 0));
        assert!(matches!(crd, Ok(DiffState::Differs(_))), "{crd:?}");
        let stale = parse_diff(&out(
            "kwin: diff 2\n",
            "Error from server (NotFound): the server could not find the requested resource (patch installations.operator.tigera.io default)\n",
            0,
        ));
        assert_eq!(
            stale,
            Ok(DiffState::Pending(
                "kind installations.operator.tigera.io is not served yet (its CustomResourceDefinition is not installed)".into()
            ))
        );
        let st = parse_diff(&out(
            "kwin: diff 2\n",
            "error: resource mapping not found for name: \"default\" namespace: \"\" from \"m.yaml\": no matches for kind \"Installation\" in version \"operator.tigera.io/v1\"\nensure CRDs are installed first\n",
            0,
        ));
        assert!(
            matches!(&st, Ok(DiffState::Pending(w)) if w.contains("Installation (operator.tigera.io/v1)")),
            "{st:?}"
        );
        let err = parse_diff(&out("kwin: diff 2\n", "error: Unauthorized\n", 0));
        assert_eq!(
            err,
            Err(FactError::Command {
                exit: 2,
                stderr: "error: Unauthorized".into()
            })
        );
        assert!(parse_diff(&out("garbage\n", "", 0)).is_err());
        assert!(parse_diff(&out("", "boom", 3)).is_err());
    }

    #[test]
    fn wait_lines() {
        let st = parse_wait(&out(
            "kwin: checked\nok cp1\nno lw1 node lw1 NotReady: KubeletNotReady: runtime network not ready\n",
            "",
            0,
        ))
        .expect("parse");
        assert_eq!(
            st.pending(),
            ["node lw1 NotReady: KubeletNotReady: runtime network not ready"]
        );
        assert!(parse_wait(&out("kwin: checked\nmaybe x\n", "", 0)).is_err());
    }

    #[test]
    fn init_and_join_states() {
        assert_eq!(
            parse_init(&out("kwin: unhealthy\nconnection refused\n\n", "", 0)),
            Ok(InitState::Unhealthy("connection refused".into()))
        );
        assert_eq!(
            parse_init(&out(
                "kwin: leftover /etc/kubernetes/manifests/kube-apiserver.yaml\n",
                "",
                0
            )),
            Ok(InitState::Leftover(
                "/etc/kubernetes/manifests/kube-apiserver.yaml".into()
            ))
        );
        assert_eq!(
            parse_join(&out(
                "kwin: not-joined\r\nleftover C:\\etc\\kubernetes\\pki\\ca.crt\r\n",
                "",
                0
            )),
            Ok(JoinState::NotJoined {
                leftovers: vec!["C:\\etc\\kubernetes\\pki\\ca.crt".into()]
            })
        );
    }
}
