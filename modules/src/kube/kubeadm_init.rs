//! `kubeadm_init`: the first control plane, initialised by `kubeadm init --config`.
//!
//! Parameters: the fields of [`KubeadmInitParams`],
//! shown by `kwin doc kubeadm_init` and in docs/modules.md.
//!
//! No-op when the admin kubeconfig exists and the API server answers `/readyz` (retried for
//! `health_timeout`, e.g. right after a reboot). Changes: `kubeadm init --config <config> [--upload-certs]
//! --skip-token-print --skip-certificate-key-print`; on failure, the last lines of the log
//! (tokens and keys masked) are the task's error.
//!
//! Never re-initialises: an admin kubeconfig whose API server does not answer, or files of an
//! earlier `kubeadm init` / `kubeadm join` without an admin kubeconfig, fail the task and say
//! what to do instead (look at the kubelet and static pods, or `kubeadm reset -f`).
//!
//! ```toml
//! [[tasks]]
//! name = "init"
//! module = "kubeadm_init"
//! on = { hosts = ["cp1"] }
//! params = { config = "/etc/kubernetes/kubeadm-config.yaml", upload_certs = false }
//! ```

use super::facts::{InitFact, InitState};
use super::script::kubectl;
use super::{parse_duration, ADMIN_CONF};
use crate::paths::posix_abs_line;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KubeadmInitParams {
    /// Absolute path of the kubeadm configuration (the recipe writes it with `file`).
    config: String,
    /// `--upload-certs`: store the control-plane certificates for other control planes to
    /// join.
    #[serde(default)]
    upload_certs: bool,
    /// The admin kubeconfig `kubeadm init` writes: present means initialised (default
    /// `/etc/kubernetes/admin.conf`).
    creates: Option<String>,
    /// Preflight checks to ignore (e.g. `NumCPU` on small lab VMs).
    #[serde(default)]
    ignore_preflight_errors: Vec<String>,
    /// Where kubeadm's output goes (default `/var/log/kwin/kubeadm-init.log`; root only, it
    /// names the bootstrap token).
    log: Option<String>,
    /// How long an existing API server may take to answer `/readyz` (default `"30s"`).
    #[schemars(with = "Option<super::DurationParam>")]
    health_timeout: Option<serde_json::Value>,
}

#[derive(Debug, Clone)]
pub struct KubeadmInit {
    config: String,
    upload_certs: bool,
    kubeconfig: String,
    ignore_preflight_errors: Vec<String>,
    log: String,
    /// Attempts at `/readyz`, 5 s apart.
    health_attempts: u64,
}

/// Files an earlier kubeadm run leaves; without an admin kubeconfig they mean a failed or
/// foreign setup that `kubeadm init` would trip over.
const LEFTOVERS: &[&str] = &[
    "/etc/kubernetes/manifests/kube-apiserver.yaml",
    "/etc/kubernetes/kubelet.conf",
    "/var/lib/etcd/member",
];

impl Described for KubeadmInit {
    const NAME: &'static str = "kubeadm_init";
    const DOC: &'static str =
        "kubeadm init from a configuration file, once, on the first control plane";
    type Params = KubeadmInitParams;

    fn from_params(p: KubeadmInitParams, _shell: Shell) -> Result<Self, ParamError> {
        posix_abs_line("config", &p.config)?;
        let kubeconfig = p.creates.unwrap_or_else(|| ADMIN_CONF.to_string());
        posix_abs_line("creates", &kubeconfig)?;
        let log = p
            .log
            .unwrap_or_else(|| "/var/log/kwin/kubeadm-init.log".to_string());
        posix_abs_line("log", &log)?;
        for (i, e) in p.ignore_preflight_errors.iter().enumerate() {
            if e.is_empty()
                || !e
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
            {
                return Err(ParamError::at(
                    format!("ignore_preflight_errors.{i}"),
                    format!("`{e}` is not a preflight check name"),
                ));
            }
        }
        let health = match &p.health_timeout {
            Some(v) => parse_duration("health_timeout", v)?,
            None => 30,
        };
        Ok(KubeadmInit {
            health_attempts: (health / 5).max(1),
            config: p.config,
            upload_certs: p.upload_certs,
            kubeconfig,
            ignore_preflight_errors: p.ignore_preflight_errors,
            log,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![FactSample::kube(InitFact {
            kubeconfig: ADMIN_CONF.into(),
            script: "true".into(),
        })]
    }
}

impl KubeadmInit {
    fn fact(&self) -> InitFact {
        let kc = sh_quote(&self.kubeconfig);
        let leftovers = LEFTOVERS
            .iter()
            .map(|f| sh_quote(f))
            .collect::<Vec<_>>()
            .join(" ");
        InitFact {
            kubeconfig: self.kubeconfig.clone(),
            script: format!(
                "if [ -e {kc} ]; then\n\
                 \x20 command -v kubectl >/dev/null 2>&1 || {{ echo 'kwin: unhealthy'; echo 'kubectl is not installed'; exit 0; }}\n\
                 \x20 i=0\n\
                 \x20 while :; do\n\
                 \x20   if err=$({k} --request-timeout=10s get --raw /readyz 2>&1 >/dev/null); then echo 'kwin: healthy'; exit 0; fi\n\
                 \x20   i=$((i + 1)); [ $i -ge {attempts} ] && break\n\
                 \x20   sleep 5\n\
                 \x20 done\n\
                 \x20 echo 'kwin: unhealthy'; printf '%s\\n' \"$err\" | tail -n 3; exit 0\n\
                 fi\n\
                 for f in {leftovers}; do\n\
                 \x20 if [ -e \"$f\" ]; then echo \"kwin: leftover $f\"; exit 0; fi\n\
                 done\n\
                 echo 'kwin: absent'\n",
                k = kubectl(&self.kubeconfig),
                attempts = self.health_attempts,
            ),
        }
    }

    /// The `kubeadm init` step.
    pub fn init_script(&self) -> String {
        let mut args = format!("--config {}", sh_quote(&self.config));
        if self.upload_certs {
            args.push_str(" --upload-certs");
        }
        args.push_str(" --skip-token-print --skip-certificate-key-print");
        if !self.ignore_preflight_errors.is_empty() {
            args.push_str(&format!(
                " --ignore-preflight-errors={}",
                sh_quote(&self.ignore_preflight_errors.join(","))
            ));
        }
        let log = sh_quote(&self.log);
        format!(
            "[ -r {cfg} ] || {{ printf '%s\\n' {missing} >&2; exit 1; }}\n\
             umask 077\n\
             mkdir -p \"$(dirname {log})\" || exit 1\n\
             if ! kubeadm init {args} > {log} 2>&1; then\n\
             \x20 printf '%s\\n' {failed} >&2\n\
             \x20 tail -n 25 {log} | sed -e 's/[0-9a-f]\\{{64\\}}/***/g' -e 's/[a-z0-9]\\{{6\\}}\\.[a-z0-9]\\{{16\\}}/***/g' >&2\n\
             \x20 exit 1\n\
             fi\n\
             [ -e {kc} ] || {{ printf '%s\\n' {nokc} >&2; exit 1; }}\n",
            cfg = sh_quote(&self.config),
            missing = sh_quote(&format!("{} does not exist", self.config)),
            failed = sh_quote(&format!(
                "kubeadm init failed; the last lines of {}:",
                self.log
            )),
            kc = sh_quote(&self.kubeconfig),
            nokc = sh_quote(&format!(
                "kubeadm init succeeded but did not write {}",
                self.kubeconfig
            )),
        )
    }
}

impl Module for KubeadmInit {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&self.fact(), shell)]
    }

    fn reads(&self) -> Vec<String> {
        let mut r = vec![self.kubeconfig.clone()];
        r.extend(LEFTOVERS.iter().map(|s| s.to_string()));
        r
    }

    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        match facts.get(&self.fact())? {
            InitState::Healthy => Ok(Plan::noop(format!(
                "initialised ({} exists) and the API server is healthy",
                self.kubeconfig
            ))),
            InitState::Unhealthy(err) => Err(ModuleError::Precondition(format!(
                "{} exists but the API server does not answer ({err}); kwin does not run kubeadm init over an existing control plane: check the kubelet and the static pods (journalctl -u kubelet, crictl ps -a), or run `kubeadm reset -f` to start over",
                self.kubeconfig
            ))),
            InitState::Leftover(f) => Err(ModuleError::Precondition(format!(
                "{f} exists but {} does not: an earlier kubeadm init or join left this node half set up; run `kubeadm reset -f` on it and apply again",
                self.kubeconfig
            ))),
            InitState::Absent => Ok(Plan::Change(Change {
                action: Action::Create,
                reason: "the cluster is not initialised".into(),
                diff: Some(format!(
                    "+ kubeadm init --config {}{}\n",
                    self.config,
                    if self.upload_certs { " --upload-certs" } else { "" }
                )),
                steps: vec![Step::Run(self.init_script())],
                touches: Touches::Anything,
            })),
        }
    }
}
