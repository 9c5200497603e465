//! Linux modules (POSIX sh).

use kwin_engine::module::{Module, ParamError};

/// Module names implemented for Linux hosts.
pub const NAMES: &[&str] = &[];

/// Build a Linux module, or `None` if `name` is not one.
pub fn build(
    name: &str,
    params: &serde_json::Value,
) -> Option<Result<Box<dyn Module>, ParamError>> {
    let _ = (name, params);
    None
}
