//! `kubelet_restart`: restart a node's kubelet when the installed binary is not the version
//! the Node reports — after a kubelet package upgrade.
//!
//! The kubelet package's scriptlets only reload systemd (kubernetes/release
//! `cmd/krel/templates/latest/kubelet/kubelet.spec` @ `02ab6db0`: `%systemd_postun`, no
//! restart), so after an upgrade the old kubelet keeps running until restarted. Comparing
//! the installed binary with what the Node reports (rather than restarting after the package
//! step changed) is what makes an interrupted upgrade resume: the next apply still restarts.
//!
//! Parameters: the fields of [`KubeletRestartParams`], shown by `kwin doc kubelet_restart`
//! and in docs/modules.md. POSIX hosts with systemd.
//!
//! No-op when the node is not joined (no kubelet kubeconfig), kubelet is not installed, or
//! the Node already reports the installed version. Changes: `systemctl daemon-reload`,
//! `systemctl restart kubelet`, then waits (up to `timeout`) until the Node reports the
//! installed version, naming what it reports if it does not.
//!
//! ```toml
//! [[tasks]]
//! name = "kubelet-restart"
//! module = "kubelet_restart"
//! on = { hosts = ["lw1"] }
//! params = { node = "lw1" }
//! ```

use super::facts::{header, script_key};
use super::kubeadm_upgrade::KUBELET_CONF;
use super::node::{node_param, v_prefixed};
use super::parse_duration;
use super::script::TEMP_DIR;
use crate::paths::posix_abs_line;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{Fact, FactError, FactOutput, FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KubeletRestartParams {
    /// This host's Node name.
    node: String,
    /// The kubelet's kubeconfig (default `/etc/kubernetes/kubelet.conf`), used to read the
    /// Node.
    kubelet_kubeconfig: Option<String>,
    /// How long to wait for the Node to report the new version (default `"2m"`).
    #[schemars(with = "Option<super::DurationParam>")]
    timeout: Option<serde_json::Value>,
}

#[derive(Debug, Clone)]
pub struct KubeletRestart {
    node: String,
    kubelet_kubeconfig: String,
    timeout_secs: u64,
}

impl Described for KubeletRestart {
    const NAME: &'static str = "kubelet_restart";
    const DOC: &'static str =
        "restarts the kubelet when the installed binary is not the version its Node reports";
    type Params = KubeletRestartParams;

    fn from_params(p: KubeletRestartParams, _shell: Shell) -> Result<Self, ParamError> {
        node_param(&p.node)?;
        let kubelet_kubeconfig = p
            .kubelet_kubeconfig
            .unwrap_or_else(|| KUBELET_CONF.to_string());
        posix_abs_line("kubelet_kubeconfig", &kubelet_kubeconfig)?;
        let timeout_secs = match &p.timeout {
            Some(v) => parse_duration("timeout", v)?.max(1),
            None => 120,
        };
        Ok(KubeletRestart {
            node: p.node,
            kubelet_kubeconfig,
            timeout_secs,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![FactSample::kube(RunningFact::new("n1", KUBELET_CONF))]
    }
}

/// The installed kubelet's version and the Node's. The API server may be away for a moment
/// right after a kubelet restart (a kubelet of a new minor restarts the static pods whose
/// spec hash it computes differently, kube-apiserver's among them): the Node is asked again
/// for up to a minute before it counts as unreadable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningFact {
    pub script: String,
}

impl RunningFact {
    pub fn new(node: &str, kubelet_kubeconfig: &str) -> RunningFact {
        let kc = sh_quote(kubelet_kubeconfig);
        RunningFact {
            script: format!(
                "command -v kubelet >/dev/null 2>&1 || {{ echo 'kwin: no-kubelet'; exit 0; }}\n\
                 [ -r {kc} ] || {{ echo 'kwin: not-joined'; exit 0; }}\n\
                 set -- $(kubelet --version 2>/dev/null)\n\
                 echo \"kwin: installed ${{2:-unknown}}\"\n\
                 if command -v kubectl >/dev/null 2>&1; then\n\
                 \x20 i=0\n\
                 \x20 until kubectl --kubeconfig {kc} --request-timeout=20s get node {n} -o 'jsonpath={{.status.nodeInfo.kubeletVersion}}' 2>/dev/null; do\n\
                 \x20   i=$((i + 1)); [ \"$i\" -ge 30 ] && break; sleep 2\n\
                 \x20 done\n\
                 fi\n\
                 echo\n",
                n = sh_quote(node)
            ),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Running {
    NoKubelet,
    NotJoined,
    /// The installed version (`v1.32.5`) and the Node's (`None`: could not be read).
    Versions(String, Option<String>),
}

impl Fact for RunningFact {
    type Output = Running;
    fn key(&self) -> String {
        script_key("kube.kubelet", &self.script)
    }
    fn command(&self, shell: Shell) -> String {
        match shell {
            Shell::Posix => self.script.clone(),
            Shell::PowerShell => "Write-Error 'kubelet_restart runs on POSIX nodes'".into(),
        }
    }
    fn parse(&self, out: &FactOutput) -> Result<Running, FactError> {
        parse_running(out)
    }
}

/// Parse a [`RunningFact`] answer.
pub fn parse_running(out: &FactOutput) -> Result<Running, FactError> {
    let (state, lines) = header(out)?;
    match state.as_str() {
        "no-kubelet" => return Ok(Running::NoKubelet),
        "not-joined" => return Ok(Running::NotJoined),
        _ => {}
    }
    let installed = state
        .strip_prefix("installed ")
        .map(str::trim)
        .filter(|v| v.starts_with('v') && *v != "unknown")
        .ok_or_else(|| FactError::Parse(format!("unexpected state `{state}`")))?;
    let node = lines
        .iter()
        .map(|l| l.trim())
        .find(|l| !l.is_empty())
        .map(v_prefixed);
    Ok(Running::Versions(installed.to_string(), node))
}

impl KubeletRestart {
    fn fact(&self) -> RunningFact {
        RunningFact::new(&self.node, &self.kubelet_kubeconfig)
    }

    fn script(&self, installed: &str) -> String {
        let kc = sh_quote(&self.kubelet_kubeconfig);
        let n = sh_quote(&self.node);
        format!(
            "{TEMP_DIR}systemctl daemon-reload || exit 1\n\
             systemctl restart kubelet || exit 1\n\
             deadline=$(( $(date +%s) + {t} ))\n\
             while :; do\n\
             \x20 v=$(kubectl --kubeconfig {kc} --request-timeout=10s get node {n} -o 'jsonpath={{.status.nodeInfo.kubeletVersion}}' 2> \"$d/err\")\n\
             \x20 [ \"$v\" = {want} ] && break\n\
             \x20 if [ \"$(date +%s)\" -ge \"$deadline\" ]; then\n\
             \x20   printf 'kubelet restarted, but after %ss node %s reports kubelet %s, not %s\\n' {t} {n} \"${{v:-(nothing)}}\" {want} >&2\n\
             \x20   cat \"$d/err\" >&2\n\
             \x20   exit 1\n\
             \x20 fi\n\
             \x20 sleep 2\n\
             done\n",
            t = self.timeout_secs,
            want = sh_quote(installed),
        )
    }
}

impl Module for KubeletRestart {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&self.fact(), shell)]
    }

    fn reads(&self) -> Vec<String> {
        vec![
            super::API_RESOURCE.to_string(),
            "package:kubelet".to_string(),
            "service:kubelet".to_string(),
        ]
    }

    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let (installed, node) = match facts.get(&self.fact())? {
            Running::NoKubelet => return Ok(Plan::noop("kubelet is not installed")),
            Running::NotJoined => {
                return Ok(Plan::noop(format!(
                    "{} is not joined ({} does not exist)",
                    self.node, self.kubelet_kubeconfig
                )))
            }
            Running::Versions(i, n) => (i, n),
        };
        if node.as_deref() == Some(installed.as_str()) {
            return Ok(Plan::noop(format!(
                "{} runs the installed kubelet {installed}",
                self.node
            )));
        }
        Ok(Plan::Change(Change {
            action: Action::Run,
            reason: format!(
                "kubelet {installed} is installed, {} reports {}: restart",
                self.node,
                node.as_deref().unwrap_or("(nothing)")
            ),
            diff: None,
            steps: vec![Step::Run(self.script(&installed))],
            touches: Touches::Resources(vec![
                "service:kubelet".to_string(),
                super::API_RESOURCE.to_string(),
            ]),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `kubelet --version` prints `Kubernetes v1.32.5` (kubernetes/kubernetes
    /// `staging/src/k8s.io/component-base/version/verflag`): the fact script through the real
    /// sh, with kubelet and kubectl as shell functions.
    #[test]
    fn the_fact_script_reads_both_versions() {
        let conf = std::env::temp_dir().join(format!("kwin-kubelet-conf-{}", std::process::id()));
        std::fs::write(&conf, "apiVersion: v1\n").expect("write");
        let script = RunningFact::new("lw1", &conf.display().to_string()).script;
        let run = |prefix: &str| {
            let out = std::process::Command::new("/bin/sh")
                .arg("-c")
                .arg(format!("{prefix}\n{script}"))
                .output()
                .expect("sh");
            parse_running(&FactOutput {
                exit: out.status.code().unwrap_or(-1),
                stdout: out.stdout,
                stderr: out.stderr,
            })
        };
        assert_eq!(
            run("kubelet() { echo 'Kubernetes v1.32.5'; }\nkubectl() { printf v1.31.4; }"),
            Ok(Running::Versions("v1.32.5".into(), Some("v1.31.4".into())))
        );
        assert_eq!(
            run("kubelet() { echo 'Kubernetes v1.32.5'; }\nkubectl() { return 1; }"),
            Ok(Running::Versions("v1.32.5".into(), None))
        );
        let _ = std::fs::remove_file(&conf);
    }
}
