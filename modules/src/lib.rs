//! kwin-modules: the idempotent modules (Linux, Windows, Kubernetes) and the built-in recipes.
//!
//! Each module implements [`kwin_engine::module::Module`]: facts to read, a pure plan, steps.
//! Modules are grouped by the shell they speak: `linux` (POSIX sh), `windows` (PowerShell)
//! and `kube` (Kubernetes steps, run from a control-plane host). A module name may exist for
//! both shells (e.g. `file`); [`Builtin`] picks the implementation for the host's shell.

pub mod kube;
pub mod linux;
pub mod paths;
pub mod private_text;
pub mod recipes;
pub mod reference;
pub mod registry;
pub mod shared;
pub mod table;
pub mod windows;

pub use registry::{fact_samples, row_for, rows, Builtin};

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
