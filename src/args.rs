//! The command line: clap's types, their checks, and how they become a pipeline request.

use clap::{Parser, Subcommand, ValueEnum};
use kwin_engine::pipeline::{ChecksumMode, Flags, Request};
use kwin_engine::plan::starter;
use kwin_modules::kube::verify as v;
pub use kwin_modules::recipes::{request, Recipes};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "kwin",
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
    /// Work on these hosts only: host names, role:R (control-plane, worker), os:O (linux,
    /// windows), comma-separated; repeated options unite. Hosts the chosen ones need are
    /// read, not changed; no other host is connected to.
    #[arg(long, value_name = "SELECTOR")]
    pub limit: Vec<String>,
    #[command(flatten)]
    pub vars: VarArgs,
    /// Show every script sent to the hosts, and its output line by line as it arrives
    /// (scrubbed, as in the host logs; a script whose log hides a sensitive task's content
    /// or answers shows its output when it ends, in the log's form).
    #[arg(short, long)]
    pub verbose: bool,
}

impl RunArgs {
    /// The pipeline request of this command on the plan, with `--var` and `--limit`.
    pub fn request(
        &self,
        recipes: Recipes,
        checksums: ChecksumMode,
        no_verify: bool,
    ) -> Request<'_> {
        let mut req = request(&self.plan, recipes, checksums, no_verify).with_vars(self.vars.map());
        req.limit = self.limit.clone();
        req
    }

    /// What a session takes from the command line.
    pub fn flags(&self) -> Flags {
        Flags {
            parallelism: self.parallelism,
            accept_new_host_keys: self.accept_new_host_keys,
            verbose: self.verbose,
        }
    }
}

/// The plan's variables given on the command line (every command that reads a plan).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct VarArgs {
    /// Value of the plan's variable NAME ([variables.NAME]); wins over the environment's
    /// KWIN_VAR_NAME and the declared default. Repeatable.
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
    pub vars: Vec<(String, String)>,
}

impl VarArgs {
    /// name → value; of two `--var` for one name, the last wins.
    pub fn map(&self) -> BTreeMap<String, String> {
        self.vars.iter().cloned().collect()
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Check a plan: every problem at once, with file:line:col. Exit 1 on any error.
    Validate {
        plan: PathBuf,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
        #[command(flatten)]
        vars: VarArgs,
    },
    /// Print the task graph (DOT, or sorted text).
    Graph {
        plan: PathBuf,
        #[arg(long, value_enum, default_value_t)]
        format: GraphFormat,
        #[command(flatten)]
        vars: VarArgs,
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
        #[command(flatten)]
        vars: VarArgs,
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
        /// The API server's address in the kubeconfig, instead of the cluster's
        /// control_plane_endpoint: how this machine reaches it (a public IP, a load
        /// balancer). The API server's certificate must name HOST (cluster.api_server_sans).
        #[arg(long, value_name = "HOST[:PORT]")]
        address: Option<String>,
    },
    /// Deploy test workloads and check nodes, pod and service networking, DNS and egress.
    Verify {
        #[command(flatten)]
        run: RunArgs,
        #[command(flatten)]
        verify: VerifyArgs,
    },
    /// Run a command line on the chosen hosts (sh on Linux, PowerShell on Windows), over the
    /// plan's connections; output per host. Not idempotent: it runs what you give it.
    Exec {
        #[command(flatten)]
        run: RunArgs,
        /// The command line, after `--`: its words joined by spaces and given to the host's
        /// shell as is (like `ssh host CMD`).
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Connect to the chosen hosts and show what each is (OS, kernel, CPUs, memory, cgroup
    /// version, Windows build, addresses) and what the probe reads there for the plan's
    /// tasks. Changes nothing.
    Facts {
        #[command(flatten)]
        run: RunArgs,
    },
    /// Remove the cluster from the hosts: drain, kubeadm reset, Windows services and state.
    Reset {
        #[command(flatten)]
        run: RunArgs,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
    },
    /// Write a commented starter plan that validates as written; edit the lines marked EDIT.
    Init(InitArgs),
    /// Print the shell completion script for SHELL (e.g. `kwin completions bash >
    /// /etc/bash_completion.d/kwin`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print kwin's manual page (roff), or write one page per command into a directory.
    Man {
        /// Write kwin.1 and kwin-<command>.1 for every command here instead.
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
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

/// `kwin init`: what the starter plan holds.
#[derive(clap::Args, Debug, Clone)]
pub struct InitArgs {
    /// Where to write the plan; `-` prints it. An existing file is never overwritten.
    #[arg(
        short = 'o',
        long = "out",
        value_name = "FILE",
        default_value = "plan.toml"
    )]
    pub out: PathBuf,
    /// The pod network.
    #[arg(long, value_enum, default_value_t = CniArg::Flannel)]
    pub cni: CniArg,
    /// Linux workers (besides the control plane).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = workers())]
    pub linux_workers: u64,
    /// Windows workers.
    #[arg(long, value_name = "M", default_value_t = 1, value_parser = workers())]
    pub windows_workers: u64,
    /// How kwin reaches the Windows hosts: WinRM over HTTPS, or OpenSSH with PowerShell.
    #[arg(long, value_enum, default_value_t = WindowsTransportArg::Winrm)]
    pub windows_transport: WindowsTransportArg,
    /// The cluster's Kubernetes release (x.y.z of a minor kwin knows); default: the newest
    /// release of kwin's support matrix, the one kwin's examples use.
    #[arg(long, value_name = "X.Y.Z", value_parser = parse_kubernetes_version)]
    pub kubernetes_version: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CniArg {
    Flannel,
    Calico,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WindowsTransportArg {
    Winrm,
    Ssh,
}

impl InitArgs {
    /// The starter plan these arguments ask for.
    pub fn starter(&self) -> starter::Starter {
        let count = |n: u64| usize::try_from(n).unwrap_or(starter::MAX_WORKERS);
        starter::Starter {
            cni: match self.cni {
                CniArg::Flannel => starter::Cni::Flannel,
                CniArg::Calico => starter::Cni::Calico,
            },
            linux_workers: count(self.linux_workers),
            windows_workers: count(self.windows_workers),
            windows_transport: match self.windows_transport {
                WindowsTransportArg::Winrm => starter::WindowsTransport::Winrm,
                WindowsTransportArg::Ssh => starter::WindowsTransport::Ssh,
            },
            kubernetes_version: self
                .kubernetes_version
                .clone()
                .unwrap_or_else(|| starter::Starter::default().kubernetes_version),
        }
    }
}

/// 0 to [`starter::MAX_WORKERS`] workers.
fn workers() -> clap::builder::RangedU64ValueParser {
    clap::value_parser!(u64).range(0..=starter::MAX_WORKERS as u64)
}

/// A full `x.y.z` of a Kubernetes minor kwin knows, released (kwin's support matrix).
fn parse_kubernetes_version(s: &str) -> Result<String, String> {
    use kwin_engine::plan::{support, versions};
    let v = kwin_engine::plan::syntax::version(s, false).map_err(|e| format!("`{s}`: {e}"))?;
    let minor = versions::Version(vec![v.major, v.minor]);
    if versions::known_minors().contains(&minor) {
        support::patch_released(&versions::Version(vec![v.major, v.minor, v.patch])).map_err(
            |latest| {
                format!("`{s}` was never released: Kubernetes {minor} has {minor}.0 to {latest}")
            },
        )?;
        Ok(s.to_string())
    } else {
        Err(format!(
            "`{s}`: kwin knows Kubernetes {} to {}",
            versions::oldest(),
            versions::newest()
        ))
    }
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
            Command::Exec { .. } => "exec",
            Command::Facts { .. } => "facts",
            Command::Init(_) => "init",
            Command::Completions { .. } => "completions",
            Command::Man { .. } => "man",
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
            | Command::Graph { .. }
            | Command::Init(_)
            | Command::Completions { .. }
            | Command::Man { .. } => OutputFormat::Human,
            Command::Plan { run, .. }
            | Command::Apply { run, .. }
            | Command::Kubeconfig { run, .. }
            | Command::Verify { run, .. }
            | Command::Exec { run, .. }
            | Command::Facts { run }
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
    /// URL the egress checks fetch from inside the pods (curl; any HTTP answer passes);
    /// default: the plan's `cluster.verify_egress_url`, else https://kubernetes.io/.
    #[arg(long, value_parser = parse_url)]
    pub external_url: Option<String>,
    /// Namespace of the test workloads.
    #[arg(long, default_value = v::NAMESPACE, value_parser = parse_namespace)]
    pub namespace: String,
    /// Leave the test workloads in place afterwards (for a look with kubectl).
    #[arg(long)]
    pub keep_workloads: bool,
}

impl VerifyArgs {
    /// What the verify runner takes of them.
    pub fn options(&self) -> v::VerifyOptions {
        v::VerifyOptions {
            timeout: self.timeout,
            external_url: self.external_url.clone(),
            namespace: self.namespace.clone(),
            keep_workloads: self.keep_workloads,
        }
    }
}

impl Default for VerifyArgs {
    fn default() -> Self {
        VerifyArgs {
            timeout: Duration::from_secs(15 * 60),
            external_url: None,
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

/// `NAME=VALUE` of `--var`: NAME as a plan declares it (letters, digits, `_`); VALUE may
/// hold anything, `=` too.
fn parse_var(s: &str) -> Result<(String, String), String> {
    let Some((name, value)) = s.split_once('=') else {
        return Err(format!("`{s}` is not NAME=VALUE"));
    };
    let ok = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok {
        return Err(format!(
            "`{name}` is not a variable name (letters, digits and `_`)"
        ));
    }
    Ok((name.to_string(), value.to_string()))
}

/// A module name `kwin doc` knows; else a usage error naming the closest one.
fn parse_module(s: &str) -> Result<String, String> {
    kwin_modules::reference::find(s).map(|m| m.name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_namespaces_and_urls_are_checked_on_the_command_line() {
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
        assert_eq!(parse_var("a_1=x=y"), Ok(("a_1".into(), "x=y".into())));
        assert_eq!(parse_var("a="), Ok(("a".into(), String::new())));
        assert!(parse_var("a").is_err());
        assert!(parse_var("=x").is_err());
        assert!(parse_var("a-b=x").is_err());
        assert!(parse_kubernetes_version("1.31.4").is_ok());
        assert!(parse_kubernetes_version("1.31").is_err());
        assert!(parse_kubernetes_version("v1.31.4").is_err());
        assert!(parse_kubernetes_version("1.99.0").is_err());
        assert!(parse_kubernetes_version("1.37.99").is_err());
    }
}
