//! `kube_join_data`: what other nodes need to join the cluster, produced on request.
//!
//! Parameters: the fields of [`JoinDataParams`],
//! shown by `kwin doc kube_join_data` and in docs/modules.md.
//!
//! Always a no-op: the task changes nothing. Its outputs (`Module::output`) are read only
//! when a node that is not joined yet asks for them, and are secrets:
//!
//! - `token`: a fresh bootstrap token (`kubeadm token create --ttl`);
//! - `ca_cert_hash`: `sha256:` + the SHA-256 of the cluster CA's public key (SubjectPublicKeyInfo,
//!   DER), computed with openssl from `pki_dir/ca.crt`, as `kubeadm join` verifies it;
//! - `api_endpoint`: the parameter;
//! - `certificate_key` (with `upload_certs`): the key of the certificates just uploaded with
//!   `kubeadm init phase upload-certs --upload-certs` (valid for two hours).
//!
//! ```toml
//! [[tasks]]
//! name = "join-data"
//! module = "kube_join_data"
//! on = { hosts = ["cp1"] }
//! params = { api_endpoint = "192.168.56.10:6443", ttl = "1h" }
//! ```

use super::{parse_duration, ADMIN_CONF};
use crate::paths::posix_abs_line;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{Ctx, Module, ModuleError, ParamError, Plan};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JoinDataParams {
    /// `host:port` the nodes join (the control-plane endpoint).
    api_endpoint: String,
    /// Lifetime of each join token (default `"2h"`).
    #[schemars(with = "Option<super::DurationParam>")]
    ttl: Option<serde_json::Value>,
    /// Also upload the control-plane certificates and output their key (`certificate_key`).
    #[serde(default)]
    upload_certs: bool,
    /// The admin kubeconfig (default `/etc/kubernetes/admin.conf`).
    kubeconfig: Option<String>,
    /// Where `ca.crt` is (default `/etc/kubernetes/pki`).
    pki_dir: Option<String>,
    /// A kubeadm configuration for `upload-certs` (when the certificates are not in the
    /// default place).
    kubeadm_config: Option<String>,
}

#[derive(Debug, Clone)]
pub struct JoinData {
    api_endpoint: String,
    ttl_secs: u64,
    upload_certs: bool,
    kubeconfig: String,
    pki_dir: String,
    kubeadm_config: Option<String>,
}

/// `host:port` with a port number and a host of address/DNS characters.
fn check_endpoint(e: &str) -> Result<(), ParamError> {
    let bad = || {
        ParamError::at(
            "api_endpoint",
            format!("`{e}` is not host:port (e.g. 192.168.56.10:6443)"),
        )
    };
    let (host, port) = e.rsplit_once(':').ok_or_else(bad)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty()
        || !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-:".contains(c))
        || port.parse::<u16>().is_err()
    {
        return Err(bad());
    }
    Ok(())
}

impl Described for JoinData {
    const NAME: &'static str = "kube_join_data";
    const DOC: &'static str =
        "no change; its outputs are fresh join data (token, CA hash, endpoint, certificate key)";
    type Params = JoinDataParams;

    fn from_params(p: JoinDataParams, _shell: Shell) -> Result<Self, ParamError> {
        check_endpoint(&p.api_endpoint)?;
        let ttl_secs = match &p.ttl {
            Some(v) => parse_duration("ttl", v)?,
            None => 7200,
        };
        if ttl_secs == 0 {
            return Err(ParamError::at(
                "ttl",
                "a join token must expire: give a ttl like \"2h\"",
            ));
        }
        let kubeconfig = p.kubeconfig.unwrap_or_else(|| ADMIN_CONF.to_string());
        posix_abs_line("kubeconfig", &kubeconfig)?;
        let pki_dir = p
            .pki_dir
            .unwrap_or_else(|| "/etc/kubernetes/pki".to_string());
        posix_abs_line("pki_dir", &pki_dir)?;
        if let Some(c) = &p.kubeadm_config {
            posix_abs_line("kubeadm_config", c)?;
        }
        Ok(JoinData {
            api_endpoint: p.api_endpoint,
            ttl_secs,
            upload_certs: p.upload_certs,
            kubeconfig,
            pki_dir: pki_dir.trim_end_matches('/').to_string(),
            kubeadm_config: p.kubeadm_config,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        Vec::new()
    }
}

impl JoinData {
    /// The output script: `key=value` lines on stdout, nothing else there.
    pub fn output_script(&self) -> String {
        let kc = sh_quote(&self.kubeconfig);
        let ca = sh_quote(&format!("{}/ca.crt", self.pki_dir));
        let mut s = format!(
            "[ -r {kc} ] || {{ printf '%s\\n' {nokc} >&2; exit 1; }}\n\
             [ -r {ca} ] || {{ printf '%s\\n' {noca} >&2; exit 1; }}\n\
             command -v openssl >/dev/null 2>&1 || {{ echo 'openssl is not installed (needed for the CA certificate hash)' >&2; exit 1; }}\n\
             token=$(kubeadm token create --kubeconfig {kc} --ttl {ttl}s --description 'kwin join' | tail -n 1) || {{ echo 'kubeadm token create failed' >&2; exit 1; }}\n\
             printf '%s\\n' \"$token\" | grep -Eq '^[a-z0-9]{{6}}\\.[a-z0-9]{{16}}$' || {{ echo 'kubeadm token create printed no token' >&2; exit 1; }}\n\
             hash=$(openssl x509 -pubkey -noout -in {ca} | openssl pkey -pubin -outform der | sha256sum | cut -d' ' -f1)\n\
             printf '%s\\n' \"$hash\" | grep -Eq '^[0-9a-f]{{64}}$' || {{ printf '%s\\n' {nohash} >&2; exit 1; }}\n",
            nokc = sh_quote(&format!("{} does not exist", self.kubeconfig)),
            noca = sh_quote(&format!("{}/ca.crt does not exist", self.pki_dir)),
            ttl = self.ttl_secs,
            nohash = sh_quote(&format!(
                "cannot compute the CA public key hash of {}/ca.crt",
                self.pki_dir
            )),
        );
        if self.upload_certs {
            let cfg = self
                .kubeadm_config
                .as_ref()
                .map(|c| format!(" --config {}", sh_quote(c)))
                .unwrap_or_default();
            s.push_str(&format!(
                "key=$(kubeadm init phase upload-certs --upload-certs --kubeconfig {kc}{cfg} | tail -n 1) || {{ echo 'kubeadm init phase upload-certs failed' >&2; exit 1; }}\n\
                 printf '%s\\n' \"$key\" | grep -Eq '^[0-9a-f]{{64}}$' || {{ echo 'kubeadm init phase upload-certs printed no certificate key' >&2; exit 1; }}\n"
            ));
        }
        s.push_str(&format!(
            "printf 'token=%s\\n' \"$token\"\n\
             printf 'ca_cert_hash=sha256:%s\\n' \"$hash\"\n\
             printf 'api_endpoint=%s\\n' {}\n",
            sh_quote(&self.api_endpoint)
        ));
        if self.upload_certs {
            s.push_str("printf 'certificate_key=%s\\n' \"$key\"\n");
        }
        s
    }
}

impl Module for JoinData {
    /// What the output script prints (`certificate_key` with `upload_certs`).
    fn output_keys(&self, shell: Shell) -> Option<Vec<&'static str>> {
        self.output(shell)?;
        let mut keys = vec!["token", "ca_cert_hash", "api_endpoint"];
        if self.upload_certs {
            keys.push("certificate_key");
        }
        Some(keys)
    }

    fn facts(&self, _shell: Shell) -> Vec<FactQuery> {
        Vec::new()
    }

    fn reads(&self) -> Vec<String> {
        Vec::new()
    }

    fn plan(&self, _facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        Ok(Plan::noop(format!(
            "join data for {} is produced when a node asks for it",
            self.api_endpoint
        )))
    }

    fn output(&self, shell: Shell) -> Option<String> {
        match shell {
            Shell::Posix => Some(self.output_script()),
            Shell::PowerShell => None,
        }
    }
}
