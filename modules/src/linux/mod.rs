//! Linux modules (POSIX sh).
//!
//! One file per module; `facts/` holds the typed facts they share (each a command and a pure
//! parser), `script.rs` the building blocks of step scripts, `common.rs` shared parameter
//! types and checks. Every module documents its parameters, when it is a no-op, what it
//! changes, and an example task in its `//!` header.
//!
//! A module exists for Linux hosts when it has a row in `crate::registry::LINUX`.

pub mod common;
pub mod diff;
pub mod facts;
pub mod managed;
pub mod package_repo;
pub mod route;
pub mod script;

pub mod archive;
pub mod command;
pub mod directory;
pub mod download;
pub mod file;
pub mod kernel_module;
pub mod line_in_file;
pub mod node_check;
pub mod package;
pub mod reboot;
pub mod registry_mirrors;
pub mod service;
pub mod swap_off;
pub mod sysctl;
pub mod user;
