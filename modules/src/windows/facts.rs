//! Typed Windows facts. Each command prints one line of compact JSON; each parser is pure.
//!
//! JSON comes from Windows PowerShell 5.1's `ConvertTo-Json -Compress`, which escapes `'`, `<`,
//! `>`, `&` and non-ASCII as `\uXXXX` and prints `$null` as `null`; serde_json reads all of it.
//! Dates are never serialised as objects (5.1 prints them as `"\/Date(ms)\/"`): scripts format
//! them as ISO-8601 strings first.

use crate::paths::windows_resource;
use kwin_engine::fact::{Fact, FactError, FactOutput};
use kwin_engine::quote::ps_quote;
use kwin_engine::transport::Shell;
use serde::de::DeserializeOwned;
use serde::Deserialize;

/// Parse the single JSON document a fact command printed (surrounding whitespace and a UTF-8
/// BOM allowed). A non-zero exit is a command failure with its stderr.
pub fn parse_json<T: DeserializeOwned>(out: &FactOutput) -> Result<T, FactError> {
    if out.exit != 0 {
        return Err(FactError::Command {
            exit: out.exit,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let s = out.stdout_str()?;
    let s = s.trim_start_matches('\u{feff}').trim();
    serde_json::from_str(s).map_err(|e| FactError::Parse(format!("{e} in {:?}", truncate(s, 200))))
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

fn posix_unsupported() -> String {
    "echo 'windows fact on a posix host' >&2; exit 2".to_string()
}

/// A file or directory at a path: existence, kind, size, SHA-256 and (for small files) content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathFact {
    pub path: String,
    /// Include content (base64) when the file is at most this many bytes; 0: never.
    pub content_limit: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PathState {
    pub exists: bool,
    #[serde(default)]
    pub dir: bool,
    #[serde(default)]
    pub size: u64,
    /// Lowercase hex.
    #[serde(default)]
    pub sha256: Option<String>,
    #[serde(default)]
    pub content_b64: Option<String>,
}

impl PathState {
    pub fn content(&self) -> Option<Vec<u8>> {
        use base64::Engine;
        let b = self.content_b64.as_deref()?;
        base64::engine::general_purpose::STANDARD.decode(b).ok()
    }
}

impl Fact for PathFact {
    type Output = PathState;
    fn key(&self) -> String {
        format!(
            "win.path:{}:{}",
            self.content_limit,
            windows_resource(&self.path)
        )
    }
    fn command(&self, shell: Shell) -> String {
        if shell == Shell::Posix {
            return posix_unsupported();
        }
        format!(
            "$p = {p}\n\
             if (Test-Path -LiteralPath $p -PathType Leaf) {{\n\
             \x20 $i = Get-Item -LiteralPath $p -Force\n\
             \x20 $h = (Get-FileHash -LiteralPath $p -Algorithm SHA256).Hash.ToLowerInvariant()\n\
             \x20 $c = $null\n\
             \x20 if ($i.Length -le {limit}) {{ $c = [Convert]::ToBase64String([IO.File]::ReadAllBytes($i.FullName)) }}\n\
             \x20 ConvertTo-Json -Compress -InputObject @{{ exists = $true; dir = $false; size = $i.Length; sha256 = $h; content_b64 = $c }}\n\
             }} elseif (Test-Path -LiteralPath $p -PathType Container) {{\n\
             \x20 ConvertTo-Json -Compress -InputObject @{{ exists = $true; dir = $true }}\n\
             }} else {{\n\
             \x20 ConvertTo-Json -Compress -InputObject @{{ exists = $false }}\n\
             }}",
            p = ps_quote(&self.path),
            limit = self.content_limit
        )
    }
    fn parse(&self, out: &FactOutput) -> Result<PathState, FactError> {
        parse_json(out)
    }
}

/// Who owns a directory and who may use it: its owner, whether its ACL is protected (inherits
/// nothing), its explicit rules, and the owners of the directories above it (below the drive
/// root). Before kwin first protects it (`protected` false or the owner not Administrators),
/// also what inside it another account owns (the first 5 paths found), since an owner keeps the
/// right to change its own file's ACL whatever the parent's says.
///
/// Read with .NET's `DirectoryInfo.GetAccessControl` (Windows PowerShell 5.1 runs on .NET
/// Framework 4.x; learn.microsoft.com, FileSystemAclExtensions / DirectoryInfo.GetAccessControl),
/// SIDs rather than names (account names are localised).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFact {
    pub path: String,
}

/// One explicit access rule: `SID:rights:inheritance:propagation:type`, each a number as .NET
/// has it (`FileSystemRights`, `InheritanceFlags`, `PropagationFlags`, `AccessControlType`).
pub type AclRule = String;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AclParent {
    pub path: String,
    #[serde(default)]
    pub owner: String,
    /// A reparse point (a junction or symbolic link).
    #[serde(default)]
    pub link: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AclState {
    pub exists: bool,
    #[serde(default)]
    pub dir: bool,
    #[serde(default)]
    pub link: bool,
    /// Owner SID.
    #[serde(default)]
    pub owner: String,
    #[serde(default)]
    pub protected: bool,
    #[serde(default, deserialize_with = "one_or_many")]
    pub rules: Vec<AclRule>,
    #[serde(default, deserialize_with = "parents_one_or_many")]
    pub parents: Vec<AclParent>,
    /// `path|owner SID` of what inside is owned by another account (only before kwin first
    /// protects the directory).
    #[serde(default, deserialize_with = "one_or_many")]
    pub foreign: Vec<String>,
}

fn parents_one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<AclParent>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(AclParent),
        Many(Vec<AclParent>),
        None(()),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(p) => vec![p],
        OneOrMany::Many(v) => v,
        OneOrMany::None(()) => Vec::new(),
    })
}

impl Fact for AclFact {
    type Output = AclState;
    fn key(&self) -> String {
        format!("win.acl:{}", windows_resource(&self.path))
    }
    fn command(&self, shell: Shell) -> String {
        if shell == Shell::Posix {
            return posix_unsupported();
        }
        // Owners kwin trusts: SYSTEM, Administrators, TrustedInstaller (well-known SIDs,
        // learn.microsoft.com "Well-known SIDs").
        format!(
            "$p = {p}\n\
             $sid = [Security.Principal.SecurityIdentifier]\n\
             $trusted = @('S-1-5-18', 'S-1-5-32-544', '{ti}')\n\
             $up = @()\n\
             $d = [IO.Path]::GetDirectoryName($p)\n\
             while ($d -and ([IO.Path]::GetPathRoot($d) -ne $d)) {{\n\
             \x20 if (Test-Path -LiteralPath $d) {{\n\
             \x20   $x = Get-Item -LiteralPath $d -Force\n\
             \x20   $up += @{{ path = $d; owner = $x.GetAccessControl('Owner').GetOwner($sid).Value; link = [bool]($x.Attributes -band [IO.FileAttributes]::ReparsePoint) }}\n\
             \x20 }}\n\
             \x20 $d = [IO.Path]::GetDirectoryName($d)\n\
             }}\n\
             $i = Get-Item -LiteralPath $p -Force -ErrorAction SilentlyContinue\n\
             if ($null -eq $i) {{\n\
             \x20 ConvertTo-Json -Compress -Depth 4 -InputObject @{{ exists = $false; parents = $up }}\n\
             }} else {{\n\
             \x20 $a = $i.GetAccessControl('Owner, Access')\n\
             \x20 $o = $a.GetOwner($sid).Value\n\
             \x20 $r = @($a.GetAccessRules($true, $false, $sid) | ForEach-Object {{ '{{0}}:{{1}}:{{2}}:{{3}}:{{4}}' -f $_.IdentityReference.Value, [int]$_.FileSystemRights, [int]$_.InheritanceFlags, [int]$_.PropagationFlags, [int]$_.AccessControlType }})\n\
             \x20 $f = @()\n\
             \x20 if ($i.PSIsContainer -and -not ($a.AreAccessRulesProtected -and $o -eq 'S-1-5-32-544')) {{\n\
             \x20   $f = @(Get-ChildItem -LiteralPath $p -Recurse -Force -ErrorAction SilentlyContinue | ForEach-Object {{ $n = $_.FullName; try {{ $w = $_.GetAccessControl('Owner').GetOwner($sid).Value }} catch {{ $w = 'unreadable' }}; if ($trusted -notcontains $w) {{ $n + '|' + $w }} }} | Select-Object -First 5)\n\
             \x20 }}\n\
             \x20 ConvertTo-Json -Compress -Depth 4 -InputObject @{{ exists = $true; dir = [bool]$i.PSIsContainer; link = [bool]($i.Attributes -band [IO.FileAttributes]::ReparsePoint); owner = $o; protected = [bool]$a.AreAccessRulesProtected; rules = $r; parents = $up; foreign = $f }}\n\
             }}",
            p = ps_quote(&self.path),
            ti = TRUSTED_INSTALLER,
        )
    }
    fn parse(&self, out: &FactOutput) -> Result<AclState, FactError> {
        parse_json(out)
    }
}

/// NT SERVICE\TrustedInstaller, the owner of the system's own directories
/// (learn.microsoft.com, "Well-known SIDs": the service SID of TrustedInstaller).
pub const TRUSTED_INSTALLER: &str =
    "S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464";

/// Install state of a Windows feature (`Get-WindowsFeature` on Server, else an optional
/// feature from `Get-WindowsOptionalFeature`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureFact {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FeatureState {
    pub found: bool,
    /// `InstallState` (Installed, Available, Removed, InstallPending, UninstallPending) or
    /// optional feature `State` (Enabled, Disabled, EnablePending, DisablePending,
    /// DisabledWithPayloadRemoved).
    #[serde(default)]
    pub state: String,
    /// Which cmdlet family answered: "server" or "optional".
    #[serde(default)]
    pub kind: String,
}

impl FeatureState {
    pub fn installed(&self) -> bool {
        matches!(self.state.as_str(), "Installed" | "Enabled")
    }
    pub fn install_pending(&self) -> bool {
        matches!(self.state.as_str(), "InstallPending" | "EnablePending")
    }
    pub fn removal_pending(&self) -> bool {
        matches!(self.state.as_str(), "UninstallPending" | "DisablePending")
    }
}

impl Fact for FeatureFact {
    type Output = FeatureState;
    fn key(&self) -> String {
        format!("win.feature:{}", self.name.to_ascii_lowercase())
    }
    fn command(&self, shell: Shell) -> String {
        if shell == Shell::Posix {
            return posix_unsupported();
        }
        format!(
            "$n = {n}\n\
             $r = @{{ found = $false; state = ''; kind = '' }}\n\
             if (Get-Command Get-WindowsFeature -ErrorAction SilentlyContinue) {{\n\
             \x20 $f = Get-WindowsFeature -Name $n -ErrorAction SilentlyContinue\n\
             \x20 if ($f) {{ $r = @{{ found = $true; state = [string]$f.InstallState; kind = 'server' }} }}\n\
             }}\n\
             if (-not $r.found) {{\n\
             \x20 $o = Get-WindowsOptionalFeature -Online -FeatureName $n -ErrorAction SilentlyContinue\n\
             \x20 if ($o) {{ $r = @{{ found = $true; state = [string]$o.State; kind = 'optional' }} }}\n\
             }}\n\
             ConvertTo-Json -Compress -InputObject $r",
            n = ps_quote(&self.name)
        )
    }
    fn parse(&self, out: &FactOutput) -> Result<FeatureState, FactError> {
        parse_json(out)
    }
}

/// Whether Windows waits for a reboot: Component Based Servicing, Windows Update, or a
/// feature install/uninstall pending. `PendingFileRenameOperations` is deliberately not
/// counted: many installers leave it set, which would reboot on every run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RebootPendingFact;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RebootPending {
    pub pending: bool,
    #[serde(default, deserialize_with = "one_or_many")]
    pub reasons: Vec<String>,
}

/// PowerShell 5.1 serialises a one-element array built with `+=` as an array, but a value
/// piped through the pipeline may arrive unwrapped: accept both.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
        Null(()),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
        OneOrMany::Null(()) => Vec::new(),
    })
}

impl Fact for RebootPendingFact {
    type Output = RebootPending;
    fn key(&self) -> String {
        "win.reboot-pending".to_string()
    }
    fn command(&self, shell: Shell) -> String {
        if shell == Shell::Posix {
            return posix_unsupported();
        }
        "$r = @()\n\
         if (Test-Path -LiteralPath 'HKLM:\\SOFTWARE\\Microsoft\\Windows\\CurrentVersion\\Component Based Servicing\\RebootPending') { $r += 'component-servicing' }\n\
         if (Test-Path -LiteralPath 'HKLM:\\SOFTWARE\\Microsoft\\Windows\\CurrentVersion\\WindowsUpdate\\Auto Update\\RebootRequired') { $r += 'windows-update' }\n\
         if (Get-Command Get-WindowsFeature -ErrorAction SilentlyContinue) {\n\
         \x20 $p = @(Get-WindowsFeature | Where-Object { $_.InstallState -eq 'InstallPending' -or $_.InstallState -eq 'UninstallPending' })\n\
         \x20 if ($p.Count -gt 0) { $r += 'feature' }\n\
         }\n\
         ConvertTo-Json -Compress -InputObject @{ pending = ($r.Count -gt 0); reasons = $r }"
            .to_string()
    }
    fn parse(&self, out: &FactOutput) -> Result<RebootPending, FactError> {
        parse_json(out)
    }
}

/// A Windows service as the Service Control Manager stores it: the service's registry key
/// `HKLM:\SYSTEM\CurrentControlSet\Services\<name>` (`ImagePath` read with
/// `DoNotExpandEnvironmentNames`, i.e. byte for byte what `CreateServiceW` /
/// `ChangeServiceConfigW` stored from `lpBinaryPathName`; `Start` = `dwStartType`: 2 auto,
/// 3 demand, 4 disabled; `DependOnService`), and its status from `Get-Service`
/// (`ServiceControllerStatus`: Running, Stopped, StartPending, StopPending, ...).
/// Sources: learn.microsoft.com winsvc.h CreateServiceW / ChangeServiceConfigW (start types);
/// reference/5.1/Microsoft.PowerShell.Management/Get-Service.md (PowerShell-Docs 27138b21).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceFact {
    /// Validated: letters, digits, `-`, `_`, `.` only (no wildcard, safe in a registry path).
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ServiceState {
    pub exists: bool,
    /// `ImagePath` as stored, e.g. `"C:\k\kubelet.exe" --windows-service ...`.
    #[serde(default)]
    pub image_path: String,
    /// `Start`: 2 auto, 3 demand (manual), 4 disabled; -1 when the value is missing.
    #[serde(default = "no_start")]
    pub start: i64,
    /// `Get-Service` `Status`: Running, Stopped, StartPending, StopPending, Paused, ...
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub display_name: String,
    /// `DependOnService` (a REG_MULTI_SZ).
    #[serde(default, deserialize_with = "one_or_many")]
    pub depends_on: Vec<String>,
}

fn no_start() -> i64 {
    -1
}

impl Fact for ServiceFact {
    type Output = ServiceState;
    fn key(&self) -> String {
        format!("win.service:{}", self.name.to_ascii_lowercase())
    }
    fn command(&self, shell: Shell) -> String {
        if shell == Shell::Posix {
            return posix_unsupported();
        }
        format!(
            "$k = Get-Item -LiteralPath {key} -ErrorAction SilentlyContinue\n\
             $s = Get-Service -Name {n} -ErrorAction SilentlyContinue\n\
             if ($k -and $s) {{\n\
             \x20 $d = @($k.GetValue('DependOnService', @()) | ForEach-Object {{ [string]$_ }})\n\
             \x20 ConvertTo-Json -Compress -InputObject @{{ exists = $true; image_path = [string]$k.GetValue('ImagePath', '', 'DoNotExpandEnvironmentNames'); start = [int]$k.GetValue('Start', -1); state = [string]$s.Status; display_name = [string]$s.DisplayName; depends_on = $d }}\n\
             }} else {{ ConvertTo-Json -Compress -InputObject @{{ exists = $false }} }}",
            key = ps_quote(&format!(
                "HKLM:\\SYSTEM\\CurrentControlSet\\Services\\{}",
                self.name
            )),
            n = ps_quote(&self.name)
        )
    }
    fn parse(&self, out: &FactOutput) -> Result<ServiceState, FactError> {
        parse_json(out)
    }
}

/// A machine-scope environment variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvVarFact {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct EnvVarState {
    pub value: Option<String>,
}

impl Fact for EnvVarFact {
    type Output = EnvVarState;
    fn key(&self) -> String {
        format!("win.env:{}", self.name.to_ascii_uppercase())
    }
    fn command(&self, shell: Shell) -> String {
        if shell == Shell::Posix {
            return posix_unsupported();
        }
        format!(
            "ConvertTo-Json -Compress -InputObject @{{ value = [Environment]::GetEnvironmentVariable({}, 'Machine') }}",
            ps_quote(&self.name)
        )
    }
    fn parse(&self, out: &FactOutput) -> Result<EnvVarState, FactError> {
        parse_json(out)
    }
}

/// A Windows Firewall rule by its (unique) rule name, with its port filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirewallRuleFact {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FirewallRuleState {
    pub exists: bool,
    /// `True` / `False` (the `Enabled` enum prints as a string).
    #[serde(default)]
    pub enabled: String,
    /// `Inbound` / `Outbound`.
    #[serde(default)]
    pub direction: String,
    /// `Allow` / `Block`.
    #[serde(default)]
    pub action: String,
    /// `TCP`, `UDP`, `Any`, or a number.
    #[serde(default)]
    pub protocol: String,
    /// Comma-joined `LocalPort` values (`4789`, `10250`, `8000-8100`, `Any`).
    #[serde(default)]
    pub local_port: String,
}

impl Fact for FirewallRuleFact {
    type Output = FirewallRuleState;
    fn key(&self) -> String {
        format!("win.firewall:{}", self.name)
    }
    fn command(&self, shell: Shell) -> String {
        if shell == Shell::Posix {
            return posix_unsupported();
        }
        format!(
            "$r = Get-NetFirewallRule -Name {n} -ErrorAction SilentlyContinue\n\
             if ($r) {{\n\
             \x20 $pf = $r | Get-NetFirewallPortFilter\n\
             \x20 ConvertTo-Json -Compress -InputObject @{{ exists = $true; enabled = [string]$r.Enabled; direction = [string]$r.Direction; action = [string]$r.Action; protocol = [string]$pf.Protocol; local_port = (@($pf.LocalPort) -join ',') }}\n\
             }} else {{ ConvertTo-Json -Compress -InputObject @{{ exists = $false }} }}",
            n = super::ps_wildcard_literal(&self.name)
        )
    }
    fn parse(&self, out: &FactOutput) -> Result<FirewallRuleState, FactError> {
        parse_json(out)
    }
}

/// A registry value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryValueFact {
    /// PowerShell provider path, e.g. `HKLM:\SYSTEM\CurrentControlSet\Services\hns\State`.
    pub path: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RegistryValueState {
    pub exists: bool,
    /// `RegistryValueKind` name: String, ExpandString, DWord, QWord, MultiString, Binary.
    #[serde(default)]
    pub kind: String,
    /// The value rendered as text: numbers in decimal, multi-strings joined by `\n`.
    #[serde(default)]
    pub value: String,
}

impl Fact for RegistryValueFact {
    type Output = RegistryValueState;
    fn key(&self) -> String {
        format!(
            "win.registry:{}:{}",
            self.path.to_ascii_lowercase(),
            self.name.to_ascii_lowercase()
        )
    }
    fn command(&self, shell: Shell) -> String {
        if shell == Shell::Posix {
            return posix_unsupported();
        }
        format!(
            "$k = Get-Item -LiteralPath {p} -ErrorAction SilentlyContinue\n\
             $n = {n}\n\
             if ($k -and ($k.GetValueNames() -contains $n)) {{\n\
             \x20 $v = $k.GetValue($n, $null, 'DoNotExpandEnvironmentNames')\n\
             \x20 $kind = [string]$k.GetValueKind($n)\n\
             \x20 if ($v -is [array]) {{ $v = ($v | ForEach-Object {{ [string]$_ }}) -join \"`n\" }}\n\
             \x20 ConvertTo-Json -Compress -InputObject @{{ exists = $true; kind = $kind; value = [string]$v }}\n\
             }} else {{ ConvertTo-Json -Compress -InputObject @{{ exists = $false }} }}",
            p = ps_quote(&self.path),
            n = ps_quote(&self.name)
        )
    }
    fn parse(&self, out: &FactOutput) -> Result<RegistryValueState, FactError> {
        parse_json(out)
    }
}

/// The machine `Path` variable as a list of entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachinePathFact;

impl Fact for MachinePathFact {
    type Output = Vec<String>;
    fn key(&self) -> String {
        "win.env:PATH".to_string()
    }
    fn command(&self, shell: Shell) -> String {
        if shell == Shell::Posix {
            return posix_unsupported();
        }
        "ConvertTo-Json -Compress -InputObject @{ value = [Environment]::GetEnvironmentVariable('Path', 'Machine') }".to_string()
    }
    fn parse(&self, out: &FactOutput) -> Result<Vec<String>, FactError> {
        let v: EnvVarState = parse_json(out)?;
        Ok(v.value
            .unwrap_or_default()
            .split(';')
            .filter(|s| !s.trim().is_empty())
            .map(str::to_string)
            .collect())
    }
}

/// Windows version, build and update revision, and the installed hotfixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OsBuildFact;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct OsBuild {
    /// e.g. "Windows Server 2019 Datacenter".
    #[serde(default)]
    pub product: String,
    /// `CurrentMajorVersionNumber`.`CurrentMinorVersionNumber` — 10.0 for Server 2016+.
    pub major: u32,
    pub minor: u32,
    /// `CurrentBuildNumber`, e.g. 17763 (Server 2019), 20348 (Server 2022).
    pub build: u32,
    /// Update build revision (`UBR`), raised by each cumulative update.
    #[serde(default)]
    pub ubr: u32,
    /// Installed hotfix ids (`KB4489899`), from `Get-HotFix`.
    #[serde(default, deserialize_with = "one_or_many")]
    pub hotfixes: Vec<String>,
}

impl OsBuild {
    /// `10.0.17763` — the value of the `node.kubernetes.io/windows-build` label.
    pub fn windows_build(&self) -> String {
        format!("{}.{}.{}", self.major, self.minor, self.build)
    }
    pub fn version_tuple(&self) -> (u32, u32, u32, u32) {
        (self.major, self.minor, self.build, self.ubr)
    }
}

impl Fact for OsBuildFact {
    type Output = OsBuild;
    fn key(&self) -> String {
        "win.os-build".to_string()
    }
    fn command(&self, shell: Shell) -> String {
        if shell == Shell::Posix {
            return posix_unsupported();
        }
        "$cv = Get-ItemProperty -LiteralPath 'HKLM:\\SOFTWARE\\Microsoft\\Windows NT\\CurrentVersion'\n\
         $hf = @(Get-HotFix -ErrorAction SilentlyContinue | ForEach-Object { [string]$_.HotFixID })\n\
         ConvertTo-Json -Compress -InputObject @{ product = [string]$cv.ProductName; major = [int]$cv.CurrentMajorVersionNumber; minor = [int]$cv.CurrentMinorVersionNumber; build = [int]$cv.CurrentBuildNumber; ubr = [int]$cv.UBR; hotfixes = $hf }"
            .to_string()
    }
    fn parse(&self, out: &FactOutput) -> Result<OsBuild, FactError> {
        parse_json(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(s: &str) -> FactOutput {
        FactOutput {
            stdout: s.as_bytes().to_vec(),
            stderr: vec![],
            exit: 0,
        }
    }

    // Samples below are in the shape Windows PowerShell 5.1 prints for these scripts:
    // ConvertTo-Json -Compress of a hashtable (key order is unspecified), `\u0027`-style
    // escapes, CRLF line ending from the console.

    #[test]
    fn path_state() {
        let f = PathFact {
            path: "C:\\k\\config".into(),
            content_limit: 1024,
        };
        let s = f
            .parse(&out("{\"size\":5,\"exists\":true,\"dir\":false,\"content_b64\":\"aGVsbG8=\",\"sha256\":\"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824\"}\r\n"))
            .expect("parse");
        assert!(s.exists && !s.dir);
        assert_eq!(s.content().as_deref(), Some(&b"hello"[..]));
        let s = f.parse(&out("{\"exists\":false}")).expect("parse");
        assert!(!s.exists);
    }

    #[test]
    fn acl_state_reads_one_or_many_rules_and_parents() {
        let f = AclFact {
            path: "C:\\etc\\kubernetes".into(),
        };
        let s = f
            .parse(&out("{\"exists\":true,\"dir\":true,\"link\":false,\"owner\":\"S-1-5-32-544\",\"protected\":true,\"rules\":\"S-1-5-18:2032127:3:0:0\",\"parents\":{\"path\":\"C:\\\\etc\",\"owner\":\"S-1-5-18\",\"link\":false},\"foreign\":[]}\r\n"))
            .expect("parse");
        assert_eq!(s.rules, vec!["S-1-5-18:2032127:3:0:0".to_string()]);
        assert_eq!(s.parents.len(), 1);
        assert_eq!(s.parents[0].path, "C:\\etc");
        let s = f
            .parse(&out("{\"exists\":false,\"parents\":[]}"))
            .expect("parse");
        assert!(!s.exists && s.parents.is_empty() && s.rules.is_empty());
    }

    #[test]
    fn feature_states() {
        let f = FeatureFact {
            name: "Containers".into(),
        };
        let s = f
            .parse(&out(
                "{\"kind\":\"server\",\"state\":\"InstallPending\",\"found\":true}",
            ))
            .expect("parse");
        assert!(s.install_pending() && !s.installed());
        let s = f
            .parse(&out(
                "{\"kind\":\"optional\",\"state\":\"Enabled\",\"found\":true}",
            ))
            .expect("parse");
        assert!(s.installed());
    }

    #[test]
    fn reboot_pending_one_or_many() {
        let p = RebootPendingFact
            .parse(&out("{\"reasons\":[\"feature\"],\"pending\":true}"))
            .expect("parse");
        assert_eq!(p.reasons, ["feature"]);
        let p = RebootPendingFact
            .parse(&out("{\"reasons\":\"feature\",\"pending\":true}"))
            .expect("parse");
        assert_eq!(p.reasons, ["feature"]);
        let p = RebootPendingFact
            .parse(&out("{\"reasons\":[],\"pending\":false}"))
            .expect("parse");
        assert!(!p.pending && p.reasons.is_empty());
    }

    #[test]
    fn service_as_stored() {
        // ConvertTo-Json of the registry values: the quotes of ImagePath escaped as \".
        let s = ServiceFact { name: "kubelet".into() }
            .parse(&out("{\"state\":\"Running\",\"depends_on\":[\"containerd\"],\"image_path\":\"\\\"C:\\\\k\\\\kubelet.exe\\\" --windows-service --hostname-override=ww1\",\"exists\":true,\"start\":2,\"display_name\":\"kubelet\"}\r\n"))
            .expect("parse");
        assert_eq!(
            s.image_path,
            "\"C:\\k\\kubelet.exe\" --windows-service --hostname-override=ww1"
        );
        assert_eq!((s.start, s.state.as_str()), (2, "Running"));
        assert_eq!(s.depends_on, ["containerd"]);
        // One dependency may arrive unwrapped; none as an empty array.
        let s = ServiceFact { name: "kubelet".into() }
            .parse(&out("{\"state\":\"Stopped\",\"depends_on\":\"containerd\",\"image_path\":\"x\",\"exists\":true,\"start\":3,\"display_name\":\"k\"}"))
            .expect("parse");
        assert_eq!(s.depends_on, ["containerd"]);
        let s = ServiceFact {
            name: "kubelet".into(),
        }
        .parse(&out("{\"exists\":false}"))
        .expect("parse");
        assert!(!s.exists && s.start == -1);
    }

    #[test]
    fn env_var_escapes() {
        let v = EnvVarFact {
            name: "HTTP_PROXY".into(),
        }
        .parse(&out(
            "{\"value\":\"http://proxy.example.com:80/\\u0026x=\\u0027y\\u0027\"}",
        ))
        .expect("parse");
        assert_eq!(
            v.value.as_deref(),
            Some("http://proxy.example.com:80/&x='y'")
        );
        let v = EnvVarFact { name: "X".into() }
            .parse(&out("{\"value\":null}"))
            .expect("parse");
        assert_eq!(v.value, None);
    }

    #[test]
    fn machine_path_split() {
        let p = MachinePathFact
            .parse(&out(
                "{\"value\":\"C:\\\\Windows\\\\system32;C:\\\\Windows;;C:\\\\k\"}",
            ))
            .expect("parse");
        assert_eq!(p, ["C:\\Windows\\system32", "C:\\Windows", "C:\\k"]);
    }

    #[test]
    fn os_build() {
        let b = OsBuildFact
            .parse(&out("{\"ubr\":6054,\"minor\":0,\"hotfixes\":[\"KB5041913\",\"KB5043050\"],\"build\":17763,\"product\":\"Windows Server 2019 Datacenter\",\"major\":10}"))
            .expect("parse");
        assert_eq!(b.windows_build(), "10.0.17763");
        assert_eq!(b.version_tuple(), (10, 0, 17763, 6054));
        let b = OsBuildFact
            .parse(&out("{\"ubr\":2700,\"minor\":0,\"hotfixes\":\"KB5041160\",\"build\":20348,\"product\":\"Windows Server 2022 Standard\",\"major\":10}"))
            .expect("parse");
        assert_eq!(b.hotfixes, ["KB5041160"]);
    }

    #[test]
    fn failures_are_clear() {
        let e = parse_json::<EnvVarState>(&FactOutput {
            stdout: vec![],
            stderr: b"Access is denied.".to_vec(),
            exit: 1,
        })
        .expect_err("fails");
        assert!(e.to_string().contains("Access is denied"), "{e}");
        let e = parse_json::<EnvVarState>(&out("garbage")).expect_err("fails");
        assert!(e.to_string().contains("garbage"), "{e}");
    }
}
