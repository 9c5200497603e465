//! Windows modules (Windows PowerShell 5.1, as shipped with Windows Server 2019/2022).
//!
//! Every fact is a PowerShell snippet that prints ONE line of compact JSON
//! (`ConvertTo-Json -Compress`), parsed by a pure function in [`facts`]. Every step is a
//! PowerShell script that stops on the first error (`$ErrorActionPreference = 'Stop'`) and
//! never calls `exit`, so the engine can run several steps in one script. Plan-provided text
//! reaches scripts only through `ps_quote`.
//!
//! A module exists for Windows hosts when it has a row in `crate::registry::WINDOWS`.

pub mod facts;
mod no_proxy;
mod service_script;

pub mod archive;
pub mod command;
pub mod directory;
pub mod download;
pub mod env_var;
pub mod feature;
pub mod file;
pub mod firewall_rule;
pub mod hotfix;
pub mod path_entry;
pub mod preflight;
pub mod reboot;
pub mod registry_mirrors;
pub mod registry_value;
pub mod service;

pub use crate::shared::State;

/// Prefix of every step script: stop on the first error, no progress bars (they slow WinRM
/// down and pollute CLIXML streams).
pub(crate) const STEP_PRELUDE: &str =
    "$ErrorActionPreference = 'Stop'\n$ProgressPreference = 'SilentlyContinue'\n";

/// A step script: prelude + body.
pub(crate) fn step(body: impl AsRef<str>) -> kwin_engine::module::Step {
    kwin_engine::module::Step::Run(format!("{STEP_PRELUDE}{}", body.as_ref()))
}

/// `value` for a parameter that reads a wildcard pattern (`Get-NetFirewallRule -Name`,
/// `Remove-NetFirewallRule -Name`: "Wildcard characters are accepted", windows-powershell-docs
/// `docset/winserver2019-ps/NetSecurity/Remove-NetFirewallRule.md`): escaped on the host by
/// `[WildcardPattern]::Escape` (as PowerShell-Docs `reference/5.1/.../about_Switch.md` uses
/// it), so `kwin-*` matches the one rule of that name. Not for parameters that are literal
/// already (`-LiteralPath`, and what it makes literal): see `tests/ps_syntax/wildcards.rs`.
pub(crate) fn ps_wildcard_literal(value: &str) -> String {
    format!(
        "([WildcardPattern]::Escape({}))",
        kwin_engine::quote::ps_quote(value)
    )
}
