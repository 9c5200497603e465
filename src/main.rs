//! `kwin`: the command line. Argument parsing, wiring and output only; no domain logic.

use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;

mod cmd_checksums;
mod cmd_graph;
mod cmd_kube;
mod cmd_kubeconfig;
mod cmd_reset;
mod cmd_run;
mod cmd_validate;
mod cmd_verify;
mod control_plane;
mod output;
mod prepare;

#[derive(Parser, Debug)]
#[command(
    name = "kwin",
    version,
    about = "Declarative provisioning of hybrid Linux/Windows Kubernetes clusters"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum OutputFormat {
    /// Progress on a terminal, plain lines otherwise.
    #[default]
    Human,
    /// JSON lines, one event per line.
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum GraphFormat {
    #[default]
    Dot,
    Text,
}

/// Options shared by commands that connect to hosts.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// The plan file.
    pub plan: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub output: OutputFormat,
    /// Hosts worked on at once (default: the plan's settings.parallelism, else 32).
    #[arg(long)]
    pub parallelism: Option<usize>,
    /// Record unknown host keys in .kwin/known_hosts next to the plan instead of refusing.
    #[arg(long)]
    pub accept_new_host_keys: bool,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check a plan: every problem at once, with file:line:col. Exit 1 on any error.
    Validate {
        plan: PathBuf,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
    /// Print the task graph (DOT, or sorted text).
    Graph {
        plan: PathBuf,
        #[arg(long, value_enum, default_value_t)]
        format: GraphFormat,
    },
    /// Print the JSON Schema of the plan file (for editor completion).
    Schema,
    /// Fetch the artifact checksums the plan needs that neither it nor kwin pins (as `plan`
    /// does) and print them as an [artifacts.sha256] table, for a controller without internet.
    Checksums {
        plan: PathBuf,
        /// Write the table to this file instead of printing it.
        #[arg(long, value_name = "FILE")]
        write: Option<PathBuf>,
    },
    /// Probe every host and show what apply would change, with diffs. Changes nothing.
    Plan {
        #[command(flatten)]
        run: RunArgs,
        /// Exit 0: no changes, 1: error, 2: changes pending.
        #[arg(long)]
        detailed_exitcode: bool,
    },
    /// Converge every host to the plan.
    Apply {
        #[command(flatten)]
        run: RunArgs,
        /// Plan only: show what would change, change nothing.
        #[arg(long)]
        check: bool,
        /// Skip the verification workloads at the end.
        #[arg(long)]
        no_verify: bool,
    },
    /// Fetch the cluster's admin kubeconfig from the first control plane.
    Kubeconfig {
        #[command(flatten)]
        run: RunArgs,
        /// Where to write it (mode 0600). Default: <cluster name>.kubeconfig next to the plan.
        #[arg(short = 'o', long)]
        out: Option<PathBuf>,
    },
    /// Deploy test workloads and check nodes, pod and service networking, DNS and egress.
    Verify {
        #[command(flatten)]
        run: RunArgs,
        #[command(flatten)]
        verify: cmd_verify::VerifyArgs,
    },
    /// Remove the cluster from the hosts: drain, kubeadm reset, Windows services and state.
    Reset {
        #[command(flatten)]
        run: RunArgs,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Validate { plan, output } => cmd_validate::validate(&plan, output),
        Command::Schema => cmd_validate::schema(),
        Command::Graph { plan, format } => cmd_graph::graph(&plan, format),
        Command::Checksums { plan, write } => cmd_checksums::checksums(&plan, write.as_deref()),
        Command::Plan {
            run,
            detailed_exitcode,
        } => cmd_run::plan(run, detailed_exitcode),
        Command::Apply {
            run,
            check,
            no_verify,
        } => cmd_run::apply(run, check, no_verify),
        Command::Kubeconfig { run, out } => cmd_kube::kubeconfig(run, out),
        Command::Verify { run, verify } => cmd_kube::verify(run, verify),
        Command::Reset { run, yes } => cmd_kube::reset(run, yes),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
