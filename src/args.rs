//! The command line: clap's types, their checks, and how they become a pipeline request.

use clap::{Parser, Subcommand, ValueEnum};
use kwin_engine::pipeline::Flags;
use kwin_modules::kube::verify as v;
pub use kwin_modules::recipes::{request, Recipes};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "kwin",
    version,
    about = "Declarative provisioning of hybrid Linux/Windows Kubernetes clusters"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
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
    /// Show every script sent to the hosts, and its output when the script ends (scrubbed, as
    /// in the host logs).
    #[arg(short, long)]
    pub verbose: bool,
}

impl RunArgs {
    /// What a session takes from the command line.
    pub fn flags(&self) -> Flags {
        Flags {
            parallelism: self.parallelism,
            accept_new_host_keys: self.accept_new_host_keys,
            verbose: self.verbose,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
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
    /// Print the JSON Schema of the plan file (for editor completion), or of the events.
    Schema {
        /// The JSON Schema of one line of `--output json` (docs/events.schema.json).
        #[arg(long)]
        events: bool,
    },
    /// Fetch the artifact checksums the plan needs that neither it nor kwin pins (as `plan`
    /// does) and print them as an [artifacts.sha256] table, for a controller without internet.
    Checksums {
        plan: PathBuf,
        /// Write the table to this file instead of printing it.
        #[arg(long, value_name = "FILE")]
        write: Option<PathBuf>,
    },
    /// List the modules a task can use, per OS, one line each.
    Modules,
    /// Print a module's parameters and examples (the reference in docs/modules.md).
    Doc {
        /// The module (`kwin modules` lists them).
        #[arg(value_parser = parse_module)]
        module: String,
    },
    /// Probe every host and show what apply would change, with diffs. Changes nothing.
    Plan {
        #[command(flatten)]
        run: RunArgs,
        /// Exit 0: no changes, 1: failure (invalid plan, failed task, host not reached),
        /// 2: changes pending, 64: usage error, 130: interrupted (docs/exit-codes.md).
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
        verify: VerifyArgs,
    },
    /// Remove the cluster from the hosts: drain, kubeadm reset, Windows services and state.
    Reset {
        #[command(flatten)]
        run: RunArgs,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
    },
    /// Print the last run's summary from its journal (.kwin/runs/ next to the plan).
    Show {
        /// The plan whose runs to show (default: plan.toml).
        #[arg(default_value = "plan.toml")]
        plan: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
}

impl Command {
    /// The command's name, as typed (`apply`, `plan`, …): the summary's `command`.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Validate { .. } => "validate",
            Command::Graph { .. } => "graph",
            Command::Schema { .. } => "schema",
            Command::Checksums { .. } => "checksums",
            Command::Modules => "modules",
            Command::Doc { .. } => "doc",
            Command::Plan { .. } => "plan",
            Command::Apply { .. } => "apply",
            Command::Kubeconfig { .. } => "kubeconfig",
            Command::Verify { .. } => "verify",
            Command::Reset { .. } => "reset",
            Command::Show { .. } => "show",
        }
    }

    /// The output format the command was given (validate's, show's or a run's; else human).
    pub fn output(&self) -> OutputFormat {
        match self {
            Command::Validate { output, .. } | Command::Show { output, .. } => *output,
            Command::Schema { .. }
            | Command::Checksums { .. }
            | Command::Modules
            | Command::Doc { .. }
            | Command::Graph { .. } => OutputFormat::Human,
            Command::Plan { run, .. }
            | Command::Apply { run, .. }
            | Command::Kubeconfig { run, .. }
            | Command::Verify { run, .. }
            | Command::Reset { run, .. } => run.output,
        }
    }
}

/// Options of a verification (flags of `kwin verify`; `kwin apply` uses the defaults).
#[derive(clap::Args, Debug, Clone)]
pub struct VerifyArgs {
    /// How long to wait for the test pods to be ready (e.g. 90s, 15m).
    #[arg(long, default_value = "15m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// URL the egress checks fetch from inside the pods (curl / Invoke-WebRequest; any HTTP
    /// answer passes).
    #[arg(long, default_value = v::EXTERNAL_URL, value_parser = parse_url)]
    pub external_url: String,
    /// Namespace of the test workloads.
    #[arg(long, default_value = v::NAMESPACE, value_parser = parse_namespace)]
    pub namespace: String,
    /// Leave the test workloads in place afterwards (for a look with kubectl).
    #[arg(long)]
    pub keep_workloads: bool,
}

impl Default for VerifyArgs {
    fn default() -> Self {
        VerifyArgs {
            timeout: Duration::from_secs(15 * 60),
            external_url: v::EXTERNAL_URL.to_string(),
            namespace: v::NAMESPACE.to_string(),
            keep_workloads: false,
        }
    }
}

/// A namespace name (RFC 1123 label).
fn parse_namespace(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!(
            "`{s}` is not a namespace name (lowercase letters, digits and `-`, at most 63)"
        ))
    }
}

/// An http(s) URL without whitespace.
fn parse_url(s: &str) -> Result<String, String> {
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"));
    match rest {
        Some(r) if !r.is_empty() && !s.chars().any(char::is_whitespace) => Ok(s.to_string()),
        _ => Err(format!("`{s}` is not an http:// or https:// URL")),
    }
}

/// Whether a command line asks for `--output json` (read from the raw arguments when clap
/// refuses them, so the stream still ends with its summary).
pub fn asks_for_json(args: &[std::ffi::OsString]) -> bool {
    let args: Vec<&str> = args.iter().filter_map(|a| a.to_str()).collect();
    args.windows(2).any(|w| w == ["--output", "json"]) || args.contains(&"--output=json")
}

/// `90`, `90s`, `15m`, `1h30m`.
fn parse_duration(s: &str) -> Result<Duration, String> {
    kwin_modules::kube::duration_secs(s)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("`{s}` is not a duration (e.g. 90s, 15m, 1h30m)"))
}

/// A module name `kwin doc` knows; else a usage error naming the closest one.
fn parse_module(s: &str) -> Result<String, String> {
    kwin_modules::reference::find(s).map(|m| m.name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_namespaces_and_urls() {
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_namespace("kwin-verify").is_ok());
        assert!(parse_namespace("Kwin").is_err());
        assert!(parse_namespace("a;b").is_err());
        assert!(parse_namespace("-a").is_err());
        assert!(parse_url("https://example.com/x").is_ok());
        assert!(parse_url("ftp://example.com").is_err());
        assert!(parse_url("https://a b").is_err());
    }
}
