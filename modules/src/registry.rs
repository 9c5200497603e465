//! The tables of modules, one per family: the only list of what kwin's modules are, and
//! what reads it. Each row is made by [`row`] from the module's type (its name, doc, params
//! schema and facts come from the type, `table.rs`).
//!
//! Everything that needs "every module" reads these tables through [`rows`]: the registry
//! ([`Builtin`]: names, building, params schemas), `kwin schema`, the module reference
//! (`kwin modules`, `kwin doc`, docs/modules.md and docs/plan.md's list,
//! `crate::reference`), the parser garbage tests and the fuzz target ([`fact_samples`]),
//! and the tests that keep each module's cases and examples. What adding a module takes is
//! listed in `table.rs`.
//!
//! The tables live here, above the families, so that a family's `mod.rs` names no module of
//! its own that also uses it: the crate's modules import each other without a cycle
//! (`tests/layers.rs`).

use crate::table::{self, row, Row, BOTH, POSIX, POWERSHELL};
use crate::{kube, linux, windows};
use kwin_engine::module::{Module, ModuleInfo, ParamError, Registry};
use kwin_engine::transport::Shell;

/// The Linux modules (POSIX sh).
pub static LINUX: &[Row] = &[
    row::<linux::archive::Archive>(POSIX),
    row::<linux::command::Command>(POSIX),
    row::<linux::directory::Directory>(POSIX),
    row::<linux::download::Download>(POSIX),
    row::<linux::file::File>(POSIX),
    row::<linux::kernel_module::KernelModule>(POSIX),
    row::<linux::line_in_file::LineInFile>(POSIX),
    row::<linux::node_check::NodeCheck>(POSIX),
    row::<linux::package::Package>(POSIX),
    row::<linux::reboot::Reboot>(POSIX),
    row::<linux::registry_mirrors::RegistryMirrors>(POSIX),
    row::<linux::service::Service>(POSIX),
    row::<linux::swap_off::SwapOff>(POSIX),
    row::<linux::sysctl::Sysctl>(POSIX),
    row::<linux::user::User>(POSIX),
];

/// The Windows modules (PowerShell 5.1).
pub static WINDOWS: &[Row] = &[
    row::<windows::archive::Archive>(POWERSHELL),
    row::<windows::command::Command>(POWERSHELL),
    row::<windows::directory::Directory>(POWERSHELL),
    row::<windows::download::Download>(POWERSHELL),
    row::<windows::env_var::EnvVar>(POWERSHELL),
    row::<windows::file::File>(POWERSHELL),
    row::<windows::firewall_rule::FirewallRule>(POWERSHELL),
    row::<windows::hotfix::Hotfix>(POWERSHELL),
    row::<windows::path_entry::PathEntry>(POWERSHELL),
    row::<windows::preflight::Preflight>(POWERSHELL),
    row::<windows::reboot::Reboot>(POWERSHELL),
    row::<windows::registry_mirrors::RegistryMirrors>(POWERSHELL),
    row::<windows::registry_value::RegistryValue>(POWERSHELL),
    row::<windows::service::Service>(POWERSHELL),
    row::<windows::feature::Feature>(POWERSHELL),
];

/// The Kubernetes modules: `kubeadm_join` and `kubeadm_upgrade` run on Linux and Windows
/// nodes, the others only on POSIX hosts (the control plane).
pub static KUBE: &[Row] = &[
    row::<kube::apply::KubeApply>(POSIX),
    row::<kube::delete::KubeDelete>(POSIX),
    row::<kube::join_data::JoinData>(POSIX),
    row::<kube::wait::KubeWait>(POSIX),
    row::<kube::drain::KubeDrain>(POSIX),
    row::<kube::uncordon::KubeUncordon>(POSIX),
    row::<kube::kubeadm_init::KubeadmInit>(POSIX),
    row::<kube::kubeadm_join::KubeadmJoin>(BOTH),
    row::<kube::kubeadm_upgrade::KubeadmUpgrade>(BOTH),
    row::<kube::kubelet_restart::KubeletRestart>(POSIX),
];

/// Every row of every family's table, with its family.
pub fn rows() -> impl Iterator<Item = (table::Family, &'static table::Row)> {
    use table::Family;
    let tag = |f: Family, rows: &'static [table::Row]| rows.iter().map(move |r| (f, r));
    tag(Family::Linux, LINUX)
        .chain(tag(Family::Windows, WINDOWS))
        .chain(tag(Family::Kube, KUBE))
}

/// The row that builds module `name` for `shell`.
pub fn row_for(name: &str, shell: Shell) -> Option<&'static table::Row> {
    rows()
        .map(|(_, r)| r)
        .find(|r| r.name == name && r.shells.contains(&shell))
}

/// One sample of every fact any module can read, one per fact kind (the first module's),
/// for the parser garbage tests and the fuzz target.
pub fn fact_samples() -> Vec<table::FactSample> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for (_, r) in rows() {
        for s in (r.facts)() {
            if seen.insert(s.kind.clone()) {
                out.push(s);
            }
        }
    }
    out
}

/// The registry of every built-in module: the tables above.
#[derive(Debug, Default, Clone, Copy)]
pub struct Builtin;

impl Registry for Builtin {
    fn names(&self) -> Vec<&'static str> {
        let mut v: Vec<&'static str> = rows().map(|(_, r)| r.name).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    fn params_schema(&self, name: &str, shell: Shell) -> Option<serde_json::Value> {
        row_for(name, shell).map(|r| (r.params)().to_value())
    }

    /// One entry per module name: its rows' shells together (a module of both shells has
    /// one params type, `tests/table.rs`), the first row's doc and schema.
    fn modules(&self) -> Vec<ModuleInfo> {
        let mut out: Vec<ModuleInfo> = Vec::new();
        for (_, r) in rows() {
            match out.iter_mut().find(|m| m.name == r.name) {
                Some(m) => m.shells.extend(r.shells.iter().copied()),
                None => out.push(ModuleInfo {
                    name: r.name,
                    doc: r.doc,
                    shells: r.shells.to_vec(),
                    params: (r.params)().to_value(),
                }),
            }
        }
        out.sort_by_key(|m| m.name);
        out
    }

    fn build(
        &self,
        name: &str,
        shell: Shell,
        params: &serde_json::Value,
    ) -> Result<Box<dyn Module>, ParamError> {
        if let Some(r) = row_for(name, shell) {
            return (r.build)(params, shell);
        }
        let names = self.names();
        if names.contains(&name) {
            return Err(ParamError::new(format!(
                "module `{name}` is not available on {} hosts",
                match shell {
                    Shell::Posix => "Linux",
                    Shell::PowerShell => "Windows",
                }
            )));
        }
        let hint = kwin_engine::diag::did_you_mean(name, names.iter().copied())
            .map(|s| format!("; did you mean `{s}`?"))
            .unwrap_or_default();
        Err(ParamError::new(format!("unknown module `{name}`{hint}")))
    }
}
