//! `kwin validate` and `kwin schema`.

use crate::OutputFormat;
use kwin_engine::diag::Diagnostics;
use std::path::Path;
use std::process::ExitCode;

/// Load + validate; print every diagnostic. Exit 1 on any error.
pub fn validate(path: &Path, output: OutputFormat) -> anyhow::Result<ExitCode> {
    // The whole front half: validation, then recipe expansion (recipe asserts, template
    // errors) and the graph (unknown references, cycles).
    let diags = match crate::prepare::prepare(path) {
        Ok(p) => p.warnings,
        Err(d) => d,
    };
    print_diagnostics(&diags, output);
    let errors = diags.errors().count();
    let warnings = diags.warnings();
    if output == OutputFormat::Human {
        let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        if errors > 0 {
            eprintln!(
                "{}: {}, {}",
                path.display(),
                plural(errors, "error"),
                plural(warnings, "warning")
            );
        } else {
            println!("{}: ok ({})", path.display(), plural(warnings, "warning"));
        }
    }
    Ok(if errors > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
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
    println!(
        "{}",
        kwin_engine::module::schema::plan_schema_json(&kwin_modules::Builtin)
    );
    Ok(ExitCode::SUCCESS)
}
