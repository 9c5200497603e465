//! `kwin graph`: load, validate, expand and print the task graph.

use crate::cmd_validate::print_diagnostics;
use crate::{GraphFormat, OutputFormat};
use std::path::Path;
use std::process::ExitCode;

/// Print the graph of `path` as DOT or sorted text. Diagnostics go to stderr; any error exits 1.
pub fn graph(path: &Path, format: GraphFormat) -> anyhow::Result<ExitCode> {
    match crate::prepare::prepare(path) {
        Ok(p) => {
            print_diagnostics(&p.warnings, OutputFormat::Human);
            match format {
                GraphFormat::Dot => print!("{}", p.graph.to_dot()),
                GraphFormat::Text => print!("{}", p.graph.to_text()),
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(d) => {
            print_diagnostics(&d, OutputFormat::Human);
            Ok(ExitCode::from(1))
        }
    }
}
