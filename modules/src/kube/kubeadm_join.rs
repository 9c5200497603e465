//! `kubeadm_join`: a Linux or Windows node joins the cluster (`kubeadm join --config`).
//!
//! Parameters: the fields of [`KubeadmJoinParams`],
//! shown by `kwin doc kubeadm_join` and in docs/modules.md.
//!
//! Inputs (from `kube_join_data`, secrets): `token`, `ca_cert_hash`, `api_endpoint`, and
//! `certificate_key` for control planes. They are asked for only when the node is not joined.
//!
//! No-op when `creates` exists. Changes: writes a JoinConfiguration (rendered by
//! `kwin_engine::plan::kubeadm`, the owner of kubeadm's configuration for init and join; API
//! version picked from `kubeadm version`: v1beta4 from 1.31, v1beta3 from 1.22, else v1beta2) to a private temporary
//! file, runs `kubeadm join --config` and removes the file. The token appears only in that
//! script, never in the plan's reason or diff. Files of an earlier failed join (which kubeadm's
//! preflight refuses) fail the task with the advice to run `kubeadm reset -f`.
//!
//! ```toml
//! [[tasks]]
//! name = "join"
//! module = "kubeadm_join"
//! on = { roles = ["worker"] }
//! inputs = { token = "@first_control_plane:join-data.token", ca_cert_hash = "@first_control_plane:join-data.ca_cert_hash", api_endpoint = "@first_control_plane:join-data.api_endpoint" }
//! params = { node_name = "{{ host.name }}", cri_socket = "unix:///run/containerd/containerd.sock" }
//! ```

use super::facts::{JoinFact, JoinState};
use super::node::node_name_param;
use crate::paths::{posix_abs_line, windows_abs};
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::plan::kubeadm::{self, ApiVersion};
use kwin_engine::plan::syntax::{self, Taint};
use kwin_engine::quote::{ps_quote, sh_quote};
use kwin_engine::transport::Shell;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KubeadmJoinParams {
    /// The Node's name.
    node_name: String,
    /// The runtime's socket, e.g. `unix:///run/containerd/containerd.sock`,
    /// `npipe:////./pipe/containerd-containerd` (default: kubeadm's detection).
    cri_socket: Option<String>,
    /// The kubelet's `--node-ip`.
    node_ip: Option<String>,
    /// The kubelet's `--node-labels`.
    labels: Option<BTreeMap<String, String>>,
    /// `key=value:Effect` or `key:Effect`, registered with the node; with `control_plane`
    /// the control-plane taint is kept.
    taints: Option<Vec<String>>,
    /// Join as another control plane (needs the `certificate_key` input).
    #[serde(default)]
    control_plane: bool,
    /// Control planes: the API server's advertise address.
    advertise_address: Option<String>,
    /// Present means joined (default `/etc/kubernetes/kubelet.conf`, on Windows
    /// `C:\etc\kubernetes\kubelet.conf`).
    creates: Option<String>,
    /// The kubeadm binary (default `kubeadm`, on Windows `C:\k\kubeadm.exe`).
    kubeadm: Option<String>,
    /// Preflight checks to ignore.
    #[serde(default)]
    ignore_preflight_errors: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct KubeadmJoin {
    shell: Shell,
    node_name: String,
    cri_socket: Option<String>,
    node_ip: Option<String>,
    labels: BTreeMap<String, String>,
    taints: Vec<Taint>,
    control_plane: bool,
    advertise_address: Option<String>,
    creates: String,
    kubeadm: String,
    ignore_preflight_errors: Vec<String>,
}

/// The join inputs (secrets) as plain strings, for the step script only.
#[derive(Debug, Clone)]
pub struct JoinInputs {
    pub token: String,
    pub ca_cert_hash: String,
    pub api_endpoint: String,
    pub certificate_key: Option<String>,
}

/// A name kubeadm's `--ignore-preflight-errors` takes (`Swap`, `SystemVerification`,
/// `FileAvailable--etc-kubernetes-kubelet.conf`, `all`).
pub(crate) fn is_check_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._/".contains(c))
}

/// A taint through the plan's one taint parser ([`Taint::parse`]).
fn parse_taint(i: usize, t: &str) -> Result<Taint, ParamError> {
    Taint::parse(t).map_err(|why| {
        ParamError::at(
            format!("taints.{i}"),
            format!("`{t}` is not key=value:Effect or key:Effect: {why}"),
        )
    })
}

/// Is `s` a safe value for a config field / flag (no line breaks, no quotes of any kind)?
fn plain(field: &str, s: &str) -> Result<(), ParamError> {
    if s.is_empty() || s.contains(['\n', '\r', '\0', '"', '\'', '`', '$']) {
        return Err(ParamError::at(field, format!("`{s}` is not a valid value")));
    }
    Ok(())
}

impl Described for KubeadmJoin {
    const NAME: &'static str = "kubeadm_join";
    const DOC: &'static str =
        "kubeadm join with a generated JoinConfiguration, once, on Linux and Windows nodes";
    type Params = KubeadmJoinParams;

    fn from_params(p: KubeadmJoinParams, shell: Shell) -> Result<Self, ParamError> {
        node_name_param("node_name", &p.node_name)?;
        for (f, v) in [
            ("cri_socket", &p.cri_socket),
            ("node_ip", &p.node_ip),
            ("advertise_address", &p.advertise_address),
        ] {
            if let Some(v) = v {
                plain(f, v)?;
            }
        }
        let labels = p.labels.unwrap_or_default();
        for (k, v) in &labels {
            if let Err(why) = syntax::label_key(k).and_then(|()| syntax::label_value(v)) {
                return Err(ParamError::at(
                    format!("labels.{k}"),
                    format!("`{k}={v}` is not a valid node label: {why}"),
                ));
            }
        }
        let taints = p
            .taints
            .unwrap_or_default()
            .iter()
            .enumerate()
            .map(|(i, t)| parse_taint(i, t))
            .collect::<Result<Vec<_>, _>>()?;
        let windows = shell == Shell::PowerShell;
        let creates = p.creates.unwrap_or_else(|| {
            if windows {
                "C:\\etc\\kubernetes\\kubelet.conf".into()
            } else {
                "/etc/kubernetes/kubelet.conf".into()
            }
        });
        let kubeadm = p.kubeadm.unwrap_or_else(|| {
            if windows {
                "C:\\k\\kubeadm.exe".into()
            } else {
                "kubeadm".into()
            }
        });
        if windows {
            windows_abs("creates", &creates)?;
            windows_abs("kubeadm", &kubeadm)?;
            if p.control_plane {
                return Err(ParamError::at(
                    "control_plane",
                    "Windows nodes cannot be control planes",
                ));
            }
        } else {
            posix_abs_line("creates", &creates)?;
            plain("kubeadm", &kubeadm)?;
        }
        for (i, e) in p.ignore_preflight_errors.iter().enumerate() {
            if !is_check_name(e) {
                return Err(ParamError::at(
                    format!("ignore_preflight_errors.{i}"),
                    format!("`{e}` is not a preflight check name"),
                ));
            }
        }
        Ok(KubeadmJoin {
            shell,
            node_name: p.node_name,
            cri_socket: p.cri_socket,
            node_ip: p.node_ip,
            labels,
            taints,
            control_plane: p.control_plane,
            advertise_address: p.advertise_address,
            creates,
            kubeadm,
            ignore_preflight_errors: p.ignore_preflight_errors,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![FactSample::kube(JoinFact {
            marker: "/etc/kubernetes/kubelet.conf".into(),
            script: "true".into(),
        })]
    }
}

impl KubeadmJoin {
    /// Files a failed `kubeadm join` leaves, which its preflight refuses.
    fn leftovers(&self) -> &'static [&'static str] {
        match self.shell {
            Shell::Posix => &[
                "/etc/kubernetes/pki/ca.crt",
                "/etc/kubernetes/bootstrap-kubelet.conf",
                "/etc/kubernetes/manifests/kube-apiserver.yaml",
            ],
            Shell::PowerShell => &[
                "C:\\etc\\kubernetes\\pki\\ca.crt",
                "C:\\etc\\kubernetes\\bootstrap-kubelet.conf",
            ],
        }
    }

    fn fact(&self) -> JoinFact {
        let script = match self.shell {
            Shell::Posix => format!(
                "if [ -e {c} ]; then echo 'kwin: joined'; exit 0; fi\n\
                 echo 'kwin: not-joined'\n\
                 for f in {l}; do [ -e \"$f\" ] && echo \"leftover $f\"; done\n\
                 exit 0\n",
                c = sh_quote(&self.creates),
                l = self
                    .leftovers()
                    .iter()
                    .map(|f| sh_quote(f))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            Shell::PowerShell => format!(
                "if (Test-Path -LiteralPath {c}) {{ 'kwin: joined' }} else {{\n\
                 \x20 'kwin: not-joined'\n\
                 \x20 foreach ($f in @({l})) {{ if (Test-Path -LiteralPath $f) {{ 'leftover ' + $f }} }}\n\
                 }}",
                c = ps_quote(&self.creates),
                l = self
                    .leftovers()
                    .iter()
                    .map(|f| ps_quote(f))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        JoinFact {
            marker: self.creates.clone(),
            script,
        }
    }

    /// The node's registration, as kubeadm's configuration has it (`plan::kubeadm`, the
    /// renderer `kubeadm init`'s configuration comes from too).
    fn node(&self) -> kubeadm::Node {
        kubeadm::Node {
            name: self.node_name.clone(),
            cri_socket: self.cri_socket.clone(),
            node_ip: self.node_ip.clone(),
            labels: self.labels.clone(),
            taints: self.taints.clone(),
            control_plane: self.control_plane,
            advertise_address: self.advertise_address.clone(),
            ignore_preflight_errors: self.ignore_preflight_errors.clone(),
        }
    }

    /// The JoinConfiguration for kubeadm's config API `api`, as JSON (which kubeadm reads
    /// as YAML). Holds the token: only for the step script.
    pub fn join_config(&self, api: ApiVersion, inputs: &JoinInputs) -> String {
        let discovery = kubeadm::Discovery {
            api_endpoint: &inputs.api_endpoint,
            token: &inputs.token,
            ca_cert_hash: &inputs.ca_cert_hash,
            certificate_key: inputs.certificate_key.as_deref(),
        };
        kubeadm::join_config(&self.node(), api, &discovery)
    }

    /// The join step for this node's shell.
    pub fn join_script(&self, inputs: &JoinInputs) -> String {
        let (v4, v3, v2) = (
            self.join_config(ApiVersion::V1beta4, inputs),
            self.join_config(ApiVersion::V1beta3, inputs),
            self.join_config(ApiVersion::V1beta2, inputs),
        );
        match self.shell {
            Shell::Posix => {
                let k = sh_quote(&self.kubeadm);
                format!(
                    "umask 077\n\
                     d=$(mktemp -d) || exit 1\n\
                     trap 'rm -rf \"$d\"' EXIT\n\
                     v=$({k} version -o short 2>/dev/null)\n\
                     minor=$(printf '%s' \"$v\" | sed -n 's/^v1\\.\\([0-9][0-9]*\\)\\..*/\\1/p')\n\
                     [ -n \"$minor\" ] || {{ echo \"cannot tell the kubeadm version (kubeadm version -o short: $v)\" >&2; exit 1; }}\n\
                     if [ \"$minor\" -ge 31 ]; then\n\
                     cat > \"$d/join.yaml\" <<'KWIN_JOIN_CONFIG'\n{v4}KWIN_JOIN_CONFIG\n\
                     elif [ \"$minor\" -ge 22 ]; then\n\
                     cat > \"$d/join.yaml\" <<'KWIN_JOIN_CONFIG'\n{v3}KWIN_JOIN_CONFIG\n\
                     else\n\
                     cat > \"$d/join.yaml\" <<'KWIN_JOIN_CONFIG'\n{v2}KWIN_JOIN_CONFIG\n\
                     fi\n\
                     {k} join --config \"$d/join.yaml\"\n"
                )
            }
            Shell::PowerShell => {
                let k = ps_quote(&self.kubeadm);
                format!(
                    "$ErrorActionPreference = 'Stop'\n\
                     $ProgressPreference = 'SilentlyContinue'\n\
                     $kubeadm = {k}\n\
                     $ErrorActionPreference = 'Continue'\n\
                     $ver = [string](& $kubeadm version -o short 2>$null)\n\
                     $rc = $LASTEXITCODE\n\
                     $ErrorActionPreference = 'Stop'\n\
                     if ($rc -ne 0 -or $ver -notmatch '^v1\\.(\\d+)\\.') {{ throw \"cannot tell the kubeadm version ($kubeadm version -o short: $ver)\" }}\n\
                     $minor = [int]$Matches[1]\n\
                     if ($minor -ge 31) {{\n\
                     $text = @'\n{v4}'@\n\
                     }} elseif ($minor -ge 22) {{\n\
                     $text = @'\n{v3}'@\n\
                     }} else {{\n\
                     $text = @'\n{v2}'@\n\
                     }}\n\
                     $cfg = Join-Path $env:TEMP ('kwin-join-' + [guid]::NewGuid().ToString('N') + '.yaml')\n\
                     try {{\n\
                     \x20 [IO.File]::WriteAllText($cfg, $text)\n\
                     \x20 $ErrorActionPreference = 'Continue'\n\
                     \x20 & $kubeadm join --config $cfg 2>&1 | ForEach-Object {{ [string]$_ }}\n\
                     \x20 $rc = $LASTEXITCODE\n\
                     \x20 $ErrorActionPreference = 'Stop'\n\
                     \x20 if ($rc -ne 0) {{ throw \"kubeadm join failed with exit code $rc\" }}\n\
                     }} finally {{\n\
                     \x20 Remove-Item -LiteralPath $cfg -Force -ErrorAction SilentlyContinue\n\
                     }}\n"
                )
            }
        }
    }

    /// What the join does, for the plan: no secret in it.
    fn describe(&self) -> String {
        let mut s = format!(
            "+ node {} joins as {}\n",
            self.node_name,
            if self.control_plane {
                "a control plane"
            } else {
                "a worker"
            }
        );
        if let Some(c) = &self.cri_socket {
            s.push_str(&format!("+ cri socket: {c}\n"));
        }
        if let Some(ip) = &self.node_ip {
            s.push_str(&format!("+ node ip: {ip}\n"));
        }
        if !self.labels.is_empty() {
            s.push_str(&format!(
                "+ labels: {}\n",
                self.labels
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        if !self.taints.is_empty() {
            s.push_str(&format!(
                "+ taints: {}\n",
                self.taints
                    .iter()
                    .map(Taint::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        s
    }
}

/// Join inputs are secrets, checked so that nothing but a token, a hash, an endpoint and a
/// key can reach the join configuration.
fn inputs(ctx: &Ctx<'_>, control_plane: bool) -> Result<JoinInputs, ModuleError> {
    let get = |name: &str| ctx.inputs.get(name).map(|s| s.expose().to_string());
    let token = get("token")?;
    let ca_cert_hash = get("ca_cert_hash")?;
    let api_endpoint = get("api_endpoint")?;
    let certificate_key = if control_plane {
        Some(get("certificate_key")?)
    } else {
        None
    };
    let token_ok = token.len() == 23
        && token.as_bytes()[6] == b'.'
        && token
            .bytes()
            .enumerate()
            .all(|(i, b)| i == 6 || b.is_ascii_lowercase() || b.is_ascii_digit());
    if !token_ok {
        return Err(ModuleError::Precondition(
            "input `token` is not a bootstrap token (abcdef.0123456789abcdef)".into(),
        ));
    }
    let hash_ok = ca_cert_hash
        .strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()));
    if !hash_ok {
        return Err(ModuleError::Precondition(
            "input `ca_cert_hash` is not sha256:<64 hex digits>".into(),
        ));
    }
    if api_endpoint.is_empty()
        || !api_endpoint
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
    {
        return Err(ModuleError::Precondition(
            "input `api_endpoint` is not host:port".into(),
        ));
    }
    if let Some(k) = &certificate_key {
        if k.len() != 64 || !k.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ModuleError::Precondition(
                "input `certificate_key` is not 64 hex digits".into(),
            ));
        }
    }
    Ok(JoinInputs {
        token,
        ca_cert_hash,
        api_endpoint,
        certificate_key,
    })
}

impl Module for KubeadmJoin {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&self.fact(), shell)]
    }

    fn reads(&self) -> Vec<String> {
        let mut r = vec![self.creates.clone()];
        r.extend(self.leftovers().iter().map(|s| s.to_string()));
        r
    }

    fn plan(&self, facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        match facts.get(&self.fact())? {
            JoinState::Joined => Ok(Plan::noop(format!("joined ({} exists)", self.creates))),
            JoinState::NotJoined { leftovers } if !leftovers.is_empty() => {
                Err(ModuleError::Precondition(format!(
                    "not joined, but an earlier kubeadm join left {}; run `kubeadm reset -f` on this node and apply again",
                    leftovers.join(", ")
                )))
            }
            JoinState::NotJoined { .. } => {
                let inputs = inputs(ctx, self.control_plane)?;
                Ok(Plan::Change(Change {
                    action: Action::Create,
                    reason: "not joined".into(),
                    diff: Some(self.describe()),
                    steps: vec![Step::Run(self.join_script(&inputs))],
                    touches: Touches::Anything,
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn inputs() -> JoinInputs {
        JoinInputs {
            token: "abcdef.0123456789abcdef".into(),
            ca_cert_hash: format!("sha256:{}", "a".repeat(64)),
            api_endpoint: "10.0.0.10:6443".into(),
            certificate_key: Some("b".repeat(64)),
        }
    }

    #[test]
    fn config_versions_differ_in_kubelet_args_only() {
        let m = KubeadmJoin::from_json(
            &json!({"node_name": "cp2", "node_ip": "10.0.0.12", "labels": {"a": "b"},
                    "taints": ["dedicated=infra:NoSchedule"], "control_plane": true,
                    "advertise_address": "10.0.0.12"}),
            Shell::Posix,
        )
        .expect("build");
        let v4: Value =
            serde_json::from_str(&m.join_config(ApiVersion::V1beta4, &inputs())).expect("json");
        let v3: Value =
            serde_json::from_str(&m.join_config(ApiVersion::V1beta3, &inputs())).expect("json");
        assert_eq!(
            v4["nodeRegistration"]["kubeletExtraArgs"],
            json!([{"name": "node-ip", "value": "10.0.0.12"}, {"name": "node-labels", "value": "a=b"}])
        );
        assert_eq!(
            v3["nodeRegistration"]["kubeletExtraArgs"],
            json!({"node-ip": "10.0.0.12", "node-labels": "a=b"})
        );
        assert_eq!(
            v3["nodeRegistration"]["taints"][0]["key"],
            "node-role.kubernetes.io/control-plane"
        );
        assert_eq!(v3["controlPlane"]["certificateKey"], "b".repeat(64));
        assert_eq!(
            v3["discovery"]["bootstrapToken"]["token"],
            "abcdef.0123456789abcdef"
        );
    }

    #[test]
    fn bad_params() {
        let e = |p: Value| {
            KubeadmJoin::from_json(&p, Shell::Posix)
                .expect_err("must fail")
                .to_string()
        };
        assert!(e(json!({"node_name": "LW1"})).contains("node name"));
        assert!(e(json!({"node_name": "lw1", "taints": ["a=b:Sometimes"]})).contains("Effect"));
        assert!(e(json!({"node_name": "lw1", "labels": {"a": "b,c=d"}})).contains("label"));
        assert!(KubeadmJoin::from_json(
            &json!({"node_name": "ww1", "control_plane": true}),
            Shell::PowerShell
        )
        .is_err());
    }
}
