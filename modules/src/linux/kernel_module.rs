//! `kernel_module`: a kernel module loaded now and at every boot.
//!
//! Parameters:
//!
//! | name | type | default | meaning |
//! |---|---|---|---|
//! | `name` | string | required | module name (`br_netfilter`; `-` and `_` are the same) |
//! | `persist` | bool | `true` | list it in a file under `/etc/modules-load.d` |
//! | `file` | string | `/etc/modules-load.d/<name>.conf` | the persisted file |
//! | `present_if` | string | none | absolute path that only the module creates (e.g. `/proc/sys/net/bridge/bridge-nf-call-iptables` for `br_netfilter`): its existence also shows the module is in the running kernel |
//!
//! No-op when the module is loaded (`/proc/modules`), built into the kernel
//! (`modules.builtin`), present under `/sys/module`, or `present_if` exists, and (with
//! `persist`) the file lists exactly this module. `present_if` is for kernels that have the
//! module built in but ship no `modules.builtin` list and show no `/sys/module/<name>`
//! (built-in modules without parameters do not appear there), as some VM kernels do.
//!
//! Changes: writes the file atomically, then `modprobe <name>`. Where modules cannot be
//! loaded (a container, a kernel without module support) the step fails with modprobe's
//! message; kwin never pretends the module is there.
//!
//! ```toml
//! [[tasks]]
//! name = "br_netfilter"
//! module = "kernel_module"
//! params = { name = "br_netfilter" }
//! ```

use super::diff::value_diff;
use super::facts::file::{FileFact, PathState};
use super::facts::kmod::{normalize, KernelModuleFact};
use super::managed::ensure_content;
use super::script::die;
use crate::paths::posix_abs;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;
use serde::Deserialize;

/// Params of `kernel_module`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KernelModuleParams {
    /// Module name.
    pub name: String,
    /// Load it at boot through /etc/modules-load.d (default `true`).
    #[serde(default = "crate::shared::yes")]
    pub persist: bool,
    /// The persisted file (default `/etc/modules-load.d/<name>.conf`).
    pub file: Option<String>,
    /// A path only the module creates; existing means the module is in the kernel.
    pub present_if: Option<String>,
}

#[derive(Debug, Clone)]
pub struct KernelModule {
    name: String,
    file: Option<String>,
    present_if: Option<String>,
}

impl Described for KernelModule {
    const NAME: &'static str = "kernel_module";
    const DOC: &'static str = "a kernel module loaded now and at boot, or unloaded and blacklisted";
    type Params = KernelModuleParams;

    fn from_params(p: KernelModuleParams, _shell: Shell) -> Result<Self, ParamError> {
        let ok = !p.name.is_empty()
            && !p.name.starts_with('-')
            && p.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !ok {
            return Err(ParamError::at(
                "name",
                format!("`{}` is not a kernel module name", p.name),
            ));
        }
        if let Some(f) = &p.file {
            posix_abs("file", f)?;
            if !p.persist {
                return Err(ParamError::at(
                    "file",
                    "`file` makes no sense with persist = false",
                ));
            }
        }
        if let Some(f) = &p.present_if {
            posix_abs("present_if", f)?;
        }
        let file = p.persist.then(|| {
            p.file
                .unwrap_or_else(|| format!("/etc/modules-load.d/{}.conf", p.name))
        });
        Ok(KernelModule {
            name: p.name,
            file,
            present_if: p.present_if,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        let mut v = super::facts::file::samples();
        v.push(FactSample::linux(KernelModuleFact {
            name: "br_netfilter".into(),
        }));
        v
    }
}

impl KernelModule {
    fn live(&self) -> KernelModuleFact {
        KernelModuleFact {
            name: self.name.clone(),
        }
    }

    fn file_content(&self) -> String {
        format!("# managed by kwin\n{}\n", self.name)
    }
}

impl Module for KernelModule {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        let mut v = vec![FactQuery::of(&self.live(), shell)];
        if let Some(f) = &self.file {
            v.push(FactQuery::of(&FileFact::content(f), shell));
            v.push(super::managed::route_query(f, shell));
        }
        if let Some(p) = &self.present_if {
            v.push(FactQuery::of(&FileFact::meta(p), shell));
        }
        v
    }

    fn reads(&self) -> Vec<String> {
        let mut r = vec![
            format!("module:{}", normalize(&self.name)),
            format!("/sys/module/{}", normalize(&self.name)),
        ];
        r.extend(self.file.clone());
        r.extend(self.present_if.clone());
        r
    }

    fn plan(&self, facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let live = facts.get(&self.live())?;
        let marker = match &self.present_if {
            Some(p) => !matches!(facts.get(&FileFact::meta(p))?, PathState::Absent),
            None => false,
        };
        let active = live.active() || marker;
        let mut reasons = Vec::new();
        let mut diff = String::new();
        let mut steps = Vec::new();
        if let Some(f) = &self.file {
            let st = facts.get(&FileFact::content(f))?;
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
        if !active {
            reasons.insert(0, "not loaded");
            diff.insert_str(0, &value_diff(None, Some(&format!("loaded {}", self.name))));
            steps.push(Step::Run(format!(
                "command -v modprobe >/dev/null 2>&1 || {}\nmodprobe -- {} </dev/null || {}\n",
                die(&format!("cannot load kernel module {}: modprobe is not installed", self.name)),
                sh_quote(&self.name),
                die(&format!(
                    "cannot load kernel module {} (where modules cannot be loaded, as in containers, load it on the host or build it in)",
                    self.name
                ))
            )));
        }
        if steps.is_empty() {
            return Ok(Plan::noop(if live.loaded {
                "loaded"
            } else if live.builtin {
                "built into the kernel"
            } else if live.in_sysfs {
                "present in /sys/module"
            } else {
                "present (present_if exists)"
            }));
        }
        let n = normalize(&self.name);
        // Loading the module changes what the kernel reports; writing its boot-time file
        // alone changes only that file.
        let mut touched = if active {
            Vec::new()
        } else {
            vec![
                format!("module:{n}"),
                format!("/sys/module/{n}"),
                "/proc/modules".to_string(),
                // A loaded module may add kernel parameters (br_netfilter: net.bridge.*).
                "/proc/sys".to_string(),
            ]
        };
        touched.extend(self.file.clone());
        Ok(Plan::Change(Change {
            action: if active {
                Action::Update
            } else {
                Action::Create
            },
            reason: reasons.join("; "),
            diff: Some(diff),
            steps,
            touches: Touches::Resources(touched),
        }))
    }
}
