//! `kwin`: the command line. Argument parsing, wiring and output only; no domain logic.
//!
//! `args.rs` the command line; `cmd_*.rs` one file per command, each a short list of
//! pipeline phases (`kwin_engine::pipeline`); `drive.rs` what belongs to the process
//! (runtime, renderer thread, Ctrl-C, exit code); `output/` everything printed.

// Only `output` prints (it allows these lints for itself).
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod alloc;
mod args;
mod cmd_checksums;
mod cmd_doc;
mod cmd_exec;
mod cmd_graph;
mod cmd_init;
mod cmd_kubeconfig;
mod cmd_meta;
mod cmd_reset;
mod cmd_run;
mod cmd_validate;
mod cmd_verify;
mod drive;
mod exit;
#[allow(clippy::print_stdout, clippy::print_stderr)]
mod output;

use args::Command;
pub use args::{GraphFormat, OutputFormat, RunArgs};
use clap::FromArgMatches;
use kwin_engine::event::Outcome;
use std::process::ExitCode;

fn main() -> ExitCode {
    drive::raise_open_files_limit();
    drive::bound_template_memory();
    let raw: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let parsed = cmd_meta::command()
        .after_long_help(drive::exit_codes_help())
        .try_get_matches_from(&raw)
        .and_then(|m| args::Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(cli) => cli,
        // `--help` and `--version` are no error (exit 0); everything else clap refuses is a
        // usage error (exit 64), never 2, which `plan --detailed-exitcode` gives changes.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            output::Output::usage_error(&e, args::asks_for_json(&raw));
            return drive::exit_code(Outcome::UsageError);
        }
    };
    let out = output::Output::new(cli.command.output(), Some(cli.command.name()));
    let result = match cli.command {
        Command::Validate { plan, vars, .. } => cmd_validate::validate(&plan, &vars, &out),
        Command::Schema { events } => cmd_validate::schema(events, &out),
        Command::Checksums { plan, write, vars } => {
            cmd_checksums::checksums(&plan, write.as_deref(), &vars, &out)
        }
        Command::Modules => cmd_doc::modules(&out),
        Command::Doc { module } => cmd_doc::doc(&module, &out),
        Command::Graph { plan, format, vars } => cmd_graph::graph(&plan, format, &vars, &out),
        Command::Plan {
            run,
            detailed_exitcode,
        } => cmd_run::plan(&run, detailed_exitcode, &out),
        Command::Apply {
            run,
            check,
            no_verify,
        } => cmd_run::apply(&run, check, no_verify, &out),
        Command::Kubeconfig {
            run,
            out: file,
            address,
        } => cmd_kubeconfig::kubeconfig(&run, file, address.as_deref(), &out),
        Command::Verify { run, verify } => cmd_verify::verify(&run, &verify, &out),
        Command::Reset { run, yes } => cmd_reset::reset(&run, yes, &out),
        Command::Exec { run, command } => cmd_exec::exec(&run, &command, &out),
        Command::Facts { run } => cmd_exec::facts(&run, &out),
        Command::Init(init) => cmd_init::init(&init, &out),
        Command::Completions { shell } => cmd_meta::completions(shell, &out),
        Command::Man { out_dir } => cmd_meta::man(out_dir.as_deref(), &out),
        Command::Show { plan, .. } => output::show(&plan, &out),
    };
    drive::exit_code(out.finish(result))
}
