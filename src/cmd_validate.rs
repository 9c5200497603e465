//! `kwin validate` and `kwin schema`.

use crate::OutputFormat;
use kwin_engine::diag::Diagnostics;
use std::path::Path;
use std::process::ExitCode;

/// Load + validate; print every diagnostic. Exit 1 on any error.
pub fn validate(path: &Path, output: OutputFormat) -> anyhow::Result<ExitCode> {
    let registry = kwin_modules::Builtin;
    let diags = match kwin_engine::plan::load(path) {
        Ok(plan) => kwin_engine::plan::validate::validate(&plan, &registry),
        Err(d) => d,
    }
    .sorted();
    print_diagnostics(&diags, output);
    if diags.has_errors() {
        Ok(ExitCode::from(1))
    } else {
        if output == OutputFormat::Human {
            let warnings = diags.0.len();
            println!(
                "{}: ok ({warnings} warning{})",
                path.display(),
                if warnings == 1 { "" } else { "s" }
            );
        }
        Ok(ExitCode::SUCCESS)
    }
}

pub fn print_diagnostics(diags: &Diagnostics, output: OutputFormat) {
    match output {
        OutputFormat::Human => {
            for d in &diags.0 {
                eprintln!("{d}");
            }
        }
        OutputFormat::Json => {
            for d in &diags.0 {
                if let Ok(s) = serde_json::to_string(d) {
                    println!("{s}");
                }
            }
        }
    }
}

/// Print the plan file's JSON Schema.
pub fn schema() -> anyhow::Result<ExitCode> {
    println!("{}", kwin_engine::plan::schema::schema_json());
    Ok(ExitCode::SUCCESS)
}
