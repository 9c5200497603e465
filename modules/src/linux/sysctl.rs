//! `sysctl`: a kernel parameter, live and persisted.
//!
//! Parameters:
//!
//! | name | type | default | meaning |
//! |---|---|---|---|
//! | `key` | string | required | `net.ipv4.ip_forward` (or the `/` form, `net/ipv4/conf/eth0.100/forwarding`) |
//! | `value` | string or integer | required | desired value; whitespace between fields is normalized |
//! | `persist` | bool | `true` | also write a file under `/etc/sysctl.d` so the value survives a reboot |
//! | `file` | string | `/etc/sysctl.d/99-kwin-<key>.conf` | the persisted file (one key per file) |
//!
//! No-op when the live value (read from `/proc/sys`) equals `value` after normalizing
//! whitespace, and (with `persist`) the file holds exactly `<key> = <value>`.
//!
//! Changes: writes the file atomically, then writes the value to `/proc/sys/...` (what
//! `sysctl -w` does). A key that does not exist on the kernel is not an error at plan time —
//! an earlier task may load the module providing it (`br_netfilter` for `net.bridge.*`) —
//! but the step fails with a clear message if it still does not exist when it runs.
//!
//! ```toml
//! [[tasks]]
//! name = "bridged traffic through iptables"
//! module = "sysctl"
//! params = { key = "net.bridge.bridge-nf-call-iptables", value = 1 }
//! ```

use super::diff::value_diff;
use super::facts::file::FileFact;
use super::facts::sysctl::{normalize_value, proc_path, SysctlFact};
use super::managed::ensure_content;
use super::script::{fail, sha256_hex, Ends};
use crate::paths::posix_abs;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;
use serde::Deserialize;

/// A value as written in a plan: text or a number.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum RawValue {
    Text(String),
    Int(i64),
}

/// Params of `sysctl`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("x-kwin-instead" = {
    "name": "kwin's `sysctl` names the kernel parameter `key` (Ansible's `name`)",
    "sysctl_file": "write `file` (Ansible's `sysctl_file`)",
    "reload": "kwin always sets the running value, and persists it unless `persist = false`",
    "sysctl_set": "kwin always sets the running value"
}))]
pub struct SysctlParams {
    /// Kernel parameter name.
    pub key: String,
    /// Desired value.
    pub value: RawValue,
    /// Persist under /etc/sysctl.d (default `true`).
    #[serde(default = "crate::shared::yes")]
    pub persist: bool,
    /// The persisted file (default `/etc/sysctl.d/99-kwin-<key>.conf`).
    pub file: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Sysctl {
    key: String,
    value: String,
    file: Option<String>,
}

/// Whether `key` is a plausible kernel parameter name.
pub fn check_key(key: &str) -> Result<(), ParamError> {
    let ok_chars = key
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_.-/:@+".contains(c));
    if key.is_empty()
        || !ok_chars
        || key.starts_with(['.', '/'])
        || key.ends_with(['.', '/'])
        || key.contains("..")
        || key.split('/').any(|seg| seg == "." || seg == "..")
    {
        return Err(ParamError::at(
            "key",
            format!("`{key}` is not a kernel parameter name"),
        ));
    }
    Ok(())
}

impl Described for Sysctl {
    const NAME: &'static str = "sysctl";
    const DOC: &'static str = "a kernel parameter set now and persisted in /etc/sysctl.d";
    type Params = SysctlParams;

    fn from_params(p: SysctlParams, _shell: Shell) -> Result<Self, ParamError> {
        check_key(&p.key)?;
        let value = match p.value {
            RawValue::Text(s) => s,
            RawValue::Int(n) => n.to_string(),
        };
        if value.contains(['\n', '\r']) {
            return Err(ParamError::at("value", "`value` must be a single line"));
        }
        let value = normalize_value(&value);
        if let Some(f) = &p.file {
            posix_abs("file", f)?;
            if !p.persist {
                return Err(ParamError::at(
                    "file",
                    "`file` makes no sense with persist = false",
                ));
            }
        }
        let file = p.persist.then(|| {
            p.file.unwrap_or_else(|| {
                format!("/etc/sysctl.d/99-kwin-{}.conf", p.key.replace('/', "."))
            })
        });
        Ok(Sysctl {
            key: p.key,
            value,
            file,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        let mut v = super::facts::file::samples();
        v.push(FactSample::linux(SysctlFact {
            key: "net.ipv4.ip_forward".into(),
        }));
        v
    }
}

impl Sysctl {
    fn live(&self) -> SysctlFact {
        SysctlFact {
            key: self.key.clone(),
        }
    }

    fn resources(&self) -> Vec<String> {
        let mut r = vec![format!("sysctl:{}", self.key), proc_path(&self.key)];
        r.extend(self.file.clone());
        r
    }

    fn file_content(&self) -> String {
        format!("# managed by kwin\n{} = {}\n", self.key, self.value)
    }

    /// The persisted file: its content is read only when it is not the wanted one.
    fn file_fact(&self, f: &str) -> FileFact {
        FileFact::content_unless(f, sha256_hex(self.file_content().as_bytes()))
    }
}

impl Module for Sysctl {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        let mut v = vec![FactQuery::of(&self.live(), shell)];
        if let Some(f) = &self.file {
            v.push(FactQuery::of(&self.file_fact(f), shell));
            v.push(super::managed::route_query(f, shell));
        }
        v
    }

    fn reads(&self) -> Vec<String> {
        self.resources()
    }

    fn plan(&self, facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let live = facts.get(&self.live())?;
        let mut reasons = Vec::new();
        let mut diff = String::new();
        let mut steps = Vec::new();

        if let Some(f) = &self.file {
            let st = facts.get(&self.file_fact(f))?;
            if let Some(w) = ensure_content(
                f,
                &st,
                facts,
                self.file_content().as_bytes(),
                0o644,
                ctx.nonce,
            )? {
                reasons.push(w.reason);
                diff.push_str(&w.diff);
                steps.extend(w.steps);
            }
        }

        match &live {
            Some(v) if *v == self.value => {}
            _ => {
                if live.is_none() {
                    reasons.insert(0, "not available on the kernel yet");
                } else {
                    reasons.insert(0, "live value differs");
                }
                let old = live.as_ref().map(|v| format!("{} = {v}", self.key));
                diff.insert_str(
                    0,
                    &value_diff(
                        old.as_deref(),
                        Some(&format!("{} = {}", self.key, self.value)),
                    ),
                );
                // Builtins only, failures `return`: an inline step (no subshell). It is a
                // step of its own, so the file write's `set -C` is undone before its `>`.
                let pp = proc_path(&self.key);
                let die = |m: &str| fail(Ends::Return, "", m);
                steps.push(Step::Inline(format!(
                    "__kw_f={}\n[ -e \"$__kw_f\" ] || {}\nprintf '%s\\n' {} > \"$__kw_f\" || {}\n",
                    sh_quote(&pp),
                    die(&format!(
                        "sysctl {} does not exist on this kernel (is the kernel module providing it loaded?)",
                        self.key
                    )),
                    sh_quote(&self.value),
                    die(&format!("cannot set sysctl {}", self.key)),
                )));
            }
        }
        if steps.is_empty() {
            return Ok(Plan::noop(format!("already {}", self.value)));
        }
        Ok(Plan::Change(Change {
            action: Action::Update,
            reason: reasons.join("; "),
            diff: Some(diff),
            steps,
            touches: Touches::Resources(self.resources()),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert!(check_key("net.ipv4.ip_forward").is_ok());
        assert!(check_key("net.bridge.bridge-nf-call-iptables").is_ok());
        assert!(check_key("net/ipv4/conf/eth0.100/forwarding").is_ok());
        for bad in [
            "",
            "../x",
            "net..x",
            "a b",
            "net.$(x)",
            "/abs",
            "net/../../etc",
            "x.",
        ] {
            assert!(check_key(bad).is_err(), "{bad}");
        }
    }
}
