//! Windows modules (Windows PowerShell 5.1, as shipped with Windows Server 2019/2022).
//!
//! Every fact is a PowerShell snippet that prints ONE line of compact JSON
//! (`ConvertTo-Json -Compress`), parsed by a pure function in [`facts`]. Every step is a
//! PowerShell script that stops on the first error (`$ErrorActionPreference = 'Stop'`) and
//! never calls `exit`, so the engine can run several steps in one script. Plan-provided text
//! reaches scripts only through `ps_quote`.

use kwin_engine::module::{Module, ParamError};

pub mod archive;
pub mod command;
pub mod directory;
pub mod download;
pub mod env_var;
pub mod facts;
pub mod feature;
pub mod file;
pub mod firewall_rule;
pub mod hotfix;
mod no_proxy;
pub mod path_entry;
pub mod preflight;
pub mod reboot;
pub mod registry_value;
pub mod service;
mod service_script;

/// Module names implemented for Windows hosts.
pub const NAMES: &[&str] = &[
    "archive",
    "command",
    "directory",
    "download",
    "env_var",
    "file",
    "firewall_rule",
    "hotfix",
    "path_entry",
    "preflight",
    "reboot",
    "registry_value",
    "service",
    "windows_feature",
];

/// The parameters' JSON Schema of a Windows module, or `None` if `name` is not one.
pub fn params_schema(name: &str) -> Option<schemars::Schema> {
    Some(match name {
        "archive" => archive::params_schema(),
        "command" => command::params_schema(),
        "directory" => directory::params_schema(),
        "download" => download::params_schema(),
        "env_var" => env_var::params_schema(),
        "file" => file::params_schema(),
        "firewall_rule" => firewall_rule::params_schema(),
        "hotfix" => hotfix::params_schema(),
        "path_entry" => path_entry::params_schema(),
        "preflight" => preflight::params_schema(),
        "reboot" => reboot::params_schema(),
        "registry_value" => registry_value::params_schema(),
        "service" => service::params_schema(),
        "windows_feature" => feature::params_schema(),
        _ => return None,
    })
}

/// Build a Windows module, or `None` if `name` is not one.
pub fn build(
    name: &str,
    params: &serde_json::Value,
) -> Option<Result<Box<dyn Module>, ParamError>> {
    fn boxed<M: Module + 'static>(r: Result<M, ParamError>) -> Result<Box<dyn Module>, ParamError> {
        r.map(|m| Box::new(m) as Box<dyn Module>)
    }
    Some(match name {
        "archive" => boxed(archive::Archive::new(params)),
        "command" => boxed(command::Command::new(params)),
        "directory" => boxed(directory::Directory::new(params)),
        "download" => boxed(download::Download::new(params)),
        "env_var" => boxed(env_var::EnvVar::new(params)),
        "file" => boxed(file::File::new(params)),
        "firewall_rule" => boxed(firewall_rule::FirewallRule::new(params)),
        "hotfix" => boxed(hotfix::Hotfix::new(params)),
        "path_entry" => boxed(path_entry::PathEntry::new(params)),
        "preflight" => boxed(preflight::Preflight::new(params)),
        "reboot" => boxed(reboot::Reboot::new(params)),
        "registry_value" => boxed(registry_value::RegistryValue::new(params)),
        "service" => boxed(service::Service::new(params)),
        "windows_feature" => boxed(feature::Feature::new(params)),
        _ => return None,
    })
}

/// `present` / `absent`, the common `state` parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum State {
    #[default]
    Present,
    Absent,
}

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

/// Validate a Windows absolute path (drive or UNC); returns it unchanged.
pub(crate) fn check_path(field: &str, p: &str) -> Result<(), ParamError> {
    let b = p.as_bytes();
    let drive = b.len() >= 3
        && b[0].is_ascii_alphabetic()
        && b[1] == b':'
        && (b[2] == b'\\' || b[2] == b'/');
    let unc = p.starts_with("\\\\");
    if !(drive || unc) {
        return Err(ParamError::at(
            field,
            format!("`{p}` is not an absolute Windows path (e.g. C:\\k\\file)"),
        ));
    }
    if p.contains(['\n', '\r', '\0']) {
        return Err(ParamError::at(field, "path contains a line break or NUL"));
    }
    Ok(())
}

/// Case-insensitive Windows path identity for resources (`C:/K/` ≡ `c:\k`).
pub(crate) fn path_resource(p: &str) -> String {
    let mut s = p.replace('/', "\\").to_ascii_lowercase();
    while s.len() > 3 && s.ends_with('\\') {
        s.pop();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert!(check_path("p", "C:\\k\\x").is_ok());
        assert!(check_path("p", "c:/k").is_ok());
        assert!(check_path("p", "\\\\srv\\share").is_ok());
        assert!(check_path("p", "k\\x").is_err());
        assert!(check_path("p", "/etc/x").is_err());
        assert_eq!(path_resource("C:/K/"), "c:\\k");
    }
}
