//! Linux modules (POSIX sh).
//!
//! One file per module; `facts/` holds the typed facts they share (each a command and a pure
//! parser), `script.rs` the building blocks of step scripts, `common.rs` shared parameter
//! types. Every module documents its parameters, when it is a no-op, what it changes, and an
//! example task in its `//!` header.

use kwin_engine::module::{Module, ParamError};

pub mod archive;
pub mod command;
pub mod common;
pub mod diff;
pub mod directory;
pub mod download;
pub mod facts;
pub mod file;
pub mod kernel_module;
pub mod line_in_file;
pub mod managed;
pub mod package;
pub mod package_repo;
pub mod reboot;
pub mod script;
pub mod service;
pub mod swap_off;
pub mod sysctl;

/// Module names implemented for Linux hosts.
pub const NAMES: &[&str] = &[
    "archive",
    "command",
    "directory",
    "download",
    "file",
    "kernel_module",
    "line_in_file",
    "package",
    "reboot",
    "service",
    "swap_off",
    "sysctl",
];

/// The parameters' JSON Schema of a Linux module, or `None` if `name` is not one.
pub fn params_schema(name: &str) -> Option<schemars::Schema> {
    Some(match name {
        "archive" => archive::params_schema(),
        "command" => command::params_schema(),
        "directory" => directory::params_schema(),
        "download" => download::params_schema(),
        "file" => file::params_schema(),
        "kernel_module" => kernel_module::params_schema(),
        "line_in_file" => line_in_file::params_schema(),
        "package" => package::params_schema(),
        "reboot" => reboot::params_schema(),
        "service" => service::params_schema(),
        "swap_off" => swap_off::params_schema(),
        "sysctl" => sysctl::params_schema(),
        _ => return None,
    })
}

/// Build a Linux module, or `None` if `name` is not one.
pub fn build(
    name: &str,
    params: &serde_json::Value,
) -> Option<Result<Box<dyn Module>, ParamError>> {
    Some(match name {
        "archive" => archive::build(params),
        "command" => command::build(params),
        "directory" => directory::build(params),
        "download" => download::build(params),
        "file" => file::build(params),
        "kernel_module" => kernel_module::build(params),
        "line_in_file" => line_in_file::build(params),
        "package" => package::build(params),
        "reboot" => reboot::build(params),
        "service" => service::build(params),
        "swap_off" => swap_off::build(params),
        "sysctl" => sysctl::build(params),
        _ => return None,
    })
}
