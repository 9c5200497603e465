//! kwin-modules: the idempotent modules (Linux, Windows, Kubernetes) and the built-in recipes.
//!
//! Each module implements [`kwin_engine::module::Module`]: facts to read, a pure plan, steps.
//! Modules are grouped by the shell they speak: `linux` (POSIX sh), `windows` (PowerShell)
//! and `kube` (Kubernetes steps, run from a control-plane host). A module name may exist for
//! both shells (e.g. `file`); [`Builtin`] picks the implementation for the host's shell.

use kwin_engine::module::{Module, ModuleInfo, ParamError, Registry};
use kwin_engine::transport::Shell;

pub mod kube;
pub mod linux;
pub mod paths;
pub mod private_text;
pub mod recipes;
pub mod reference;
pub mod shared;
pub mod table;
pub mod windows;

/// The name of the temporary file a step writes before moving it over `path`, in the same
/// directory: `.kwin-` and 32 hex digits of sha256(nonce, NUL, path). `nonce` is the plan's
/// [`Ctx::nonce`](kwin_engine::module::Ctx::nonce), drawn at random by the engine for every
/// plan, so nobody on the host can know the name before the step creates it; the steps of one
/// plan (an upload, then the move) agree on it.
pub fn temp_name(nonce: &str, path: &str) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(nonce.as_bytes());
    h.update([0]);
    h.update(path.as_bytes());
    format!(".kwin-{}", &hex::encode(h.finalize())[..32])
}

/// Every row of every family's table, with its family.
pub fn rows() -> impl Iterator<Item = (table::Family, &'static table::Row)> {
    use table::Family;
    let tag = |f: Family, rows: &'static [table::Row]| rows.iter().map(move |r| (f, r));
    tag(Family::Linux, linux::MODULES)
        .chain(tag(Family::Windows, windows::MODULES))
        .chain(tag(Family::Kube, kube::MODULES))
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

/// The registry of every built-in module: the family tables of [`table`].
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
