//! `preflight`: checks a Windows node can run a kubelet before anything is installed — never
//! changes the host.
//!
//! Parameters (at least one): the fields of [`PreflightParams`],
//! shown by `kwin doc preflight` and in docs/modules.md.
//!
//! The fact asks Windows which interface and source address its routing table uses for
//! `reach` (`Find-NetRoute`), and the drive's free space. The plan is a no-op that reports them
//! ("C: 41.2 GiB free; reaches 192.168.56.10 from 192.168.56.21 on Ethernet 2"), or a
//! precondition error for the host naming what is wrong: too little space, no route, or a
//! route from another address than `node_ip` — the kubelet would then register an address the
//! other nodes may not reach (set `node_ip`, or fix the routes).
//!
//! ```toml
//! [[tasks]]
//! name = "preflight"
//! module = "preflight"
//! on = { os = "windows" }
//! params = { min_free_gb = 20, reach = "192.168.56.10", node_ip = "192.168.56.21" }
//! ```

use super::facts::parse_json;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{Fact, FactError, FactOutput, FactQuery, Facts};
use kwin_engine::module::{Ctx, Module, ModuleError, ParamError, Plan};
use kwin_engine::quote::ps_quote;
use kwin_engine::transport::Shell;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PreflightParams {
    /// Free space (GiB) the drive needs (images and containerd state). At least one of
    /// `min_free_gb` and `reach`.
    min_free_gb: Option<u64>,
    /// The drive `min_free_gb` is about (default `C:`).
    drive: Option<String>,
    /// An address (IP or name) the node must reach: the control plane.
    reach: Option<String>,
    /// With `reach`: the address the node must reach it from (the plan's `node_ip`); a
    /// route from another address fails the check.
    node_ip: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Preflight {
    min_free_gb: Option<u64>,
    drive: String,
    reach: Option<String>,
    node_ip: Option<String>,
}

impl Described for Preflight {
    const NAME: &'static str = "preflight";
    const DOC: &'static str =
        "a precondition: free disk space, the Windows build, reachability of the control plane";
    type Params = PreflightParams;

    fn from_params(p: PreflightParams, _shell: Shell) -> Result<Self, ParamError> {
        if p.min_free_gb.is_none() && p.reach.is_none() {
            return Err(ParamError::new("give `min_free_gb`, `reach`, or both"));
        }
        let drive = p.drive.unwrap_or_else(|| "C:".to_string());
        let d = drive.as_bytes();
        if !(d.len() == 2 && d[0].is_ascii_alphabetic() && d[1] == b':') {
            return Err(ParamError::at(
                "drive",
                format!("`{drive}` is not a drive like C:"),
            ));
        }
        if p.node_ip.is_some() && p.reach.is_none() {
            return Err(ParamError::at("node_ip", "`node_ip` goes with `reach`"));
        }
        for (key, v) in [("reach", &p.reach), ("node_ip", &p.node_ip)] {
            if let Some(v) = v {
                let ok = !v.is_empty()
                    && v.len() <= 253
                    && v.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'));
                if !ok {
                    return Err(ParamError::at(
                        key,
                        format!("`{v}` is not an IP address or host name"),
                    ));
                }
            }
        }
        if let Some(ip) = &p.node_ip {
            if ip.parse::<std::net::IpAddr>().is_err() {
                return Err(ParamError::at(
                    "node_ip",
                    format!("`{ip}` is not an IP address"),
                ));
            }
        }
        Ok(Preflight {
            min_free_gb: p.min_free_gb,
            drive: drive.to_ascii_uppercase(),
            reach: p.reach,
            node_ip: p.node_ip,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![FactSample::windows(PreflightFact {
            drive: "C:".into(),
            reach: Some("192.168.56.10".into()),
        })]
    }
}

impl Preflight {
    fn fact(&self) -> PreflightFact {
        PreflightFact {
            drive: self.drive.clone(),
            reach: self.reach.clone(),
        }
    }
}

/// Free space of a drive and the route to an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreflightFact {
    pub drive: String,
    pub reach: Option<String>,
}

/// Every key is always printed (null when unknown), so a document without them is not this
/// fact's answer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PreflightState {
    /// Free bytes on the drive; none: the drive does not exist.
    pub free: Option<u64>,
    pub size: Option<u64>,
    /// The address `reach` resolved to.
    pub target: Option<String>,
    /// Source address and interface Windows would use.
    pub address: Option<String>,
    pub interface: Option<String>,
    /// Why no route was found (name resolution or routing error text).
    pub route_error: Option<String>,
}

impl Fact for PreflightFact {
    type Output = PreflightState;
    fn key(&self) -> String {
        format!(
            "win.preflight:{}:{}",
            self.drive,
            self.reach.as_deref().unwrap_or("")
        )
    }
    fn command(&self, shell: Shell) -> String {
        if shell == Shell::Posix {
            return "echo 'preflight: Windows only' >&2; exit 1".to_string();
        }
        let reach = self.reach.as_deref().unwrap_or("");
        format!(
            "$o = @{{ free = $null; size = $null; target = $null; address = $null; interface = $null; route_error = $null }}\n\
             $d = Get-CimInstance -ClassName Win32_LogicalDisk -Filter (\"DeviceID='\" + {drive} + \"'\") -ErrorAction SilentlyContinue\n\
             if ($d) {{ $o.free = [int64]$d.FreeSpace; $o.size = [int64]$d.Size }}\n\
             $reach = {reach}\n\
             if ($reach) {{\n\
             \x20 try {{\n\
             \x20   $ip = $null\n\
             \x20   $parsed = $null\n\
             \x20   if ([System.Net.IPAddress]::TryParse($reach, [ref]$parsed)) {{ $ip = $parsed }}\n\
             \x20   else {{ $ip = [System.Net.Dns]::GetHostAddresses($reach) | Where-Object {{ $_.AddressFamily -eq 'InterNetwork' }} | Select-Object -First 1 }}\n\
             \x20   if (-not $ip) {{ throw \"cannot resolve $reach\" }}\n\
             \x20   $o.target = [string]$ip\n\
             \x20   $src = Find-NetRoute -RemoteIPAddress ([string]$ip) -ErrorAction Stop | Where-Object {{ $_.CimClass.CimClassName -eq 'MSFT_NetIPAddress' }} | Select-Object -First 1\n\
             \x20   if ($src) {{ $o.address = [string]$src.IPAddress; $o.interface = [string]$src.InterfaceAlias }}\n\
             \x20   else {{ $o.route_error = 'no route' }}\n\
             \x20 }} catch {{ $o.route_error = [string]$_.Exception.Message }}\n\
             }}\n\
             ConvertTo-Json -Compress -InputObject $o",
            drive = ps_quote(&self.drive),
            reach = ps_quote(reach),
        )
    }
    fn parse(&self, out: &FactOutput) -> Result<PreflightState, FactError> {
        parse_json(out)
    }
}

const GIB: u64 = 1024 * 1024 * 1024;

impl Module for Preflight {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&self.fact(), shell)]
    }
    fn reads(&self) -> Vec<String> {
        vec![format!("drive:{}", self.drive), "net:routes".to_string()]
    }
    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let st: PreflightState = facts.get(&self.fact())?;
        let mut found = Vec::new();
        let mut problems = Vec::new();
        if let Some(min) = self.min_free_gb {
            match st.free {
                None => problems.push(format!("drive {} does not exist", self.drive)),
                Some(free) if free < min.saturating_mul(GIB) => problems.push(format!(
                    "{} has {:.1} GiB free, needs {min} GiB (container images and containerd state)",
                    self.drive,
                    free as f64 / GIB as f64
                )),
                Some(free) => found.push(format!(
                    "{} {:.1} GiB free",
                    self.drive,
                    free as f64 / GIB as f64
                )),
            }
        }
        if let Some(reach) = &self.reach {
            match (&st.address, &st.route_error) {
                (Some(addr), _) => {
                    let iface = st.interface.as_deref().unwrap_or("?");
                    let target = st.target.as_deref().unwrap_or(reach);
                    match &self.node_ip {
                        Some(want) if !same_ip(want, addr) => problems.push(format!(
                            "this host reaches {target} from {addr} ({iface}), not from node_ip {want}: \
                             the other nodes may not reach the address the kubelet registers; \
                             set node_ip to {addr}, or fix the routes"
                        )),
                        _ => found.push(format!("reaches {target} from {addr} on {iface}")),
                    }
                }
                (None, why) => problems.push(format!(
                    "cannot reach {reach}: {}",
                    why.as_deref().unwrap_or("no route")
                )),
            }
        }
        if problems.is_empty() {
            Ok(Plan::noop(found.join("; ")))
        } else {
            Err(ModuleError::Precondition(problems.join("; ")))
        }
    }
}

/// Same address, whatever the notation (`::1` vs `0:0::1`).
fn same_ip(a: &str, b: &str) -> bool {
    match (a.parse::<std::net::IpAddr>(), b.parse::<std::net::IpAddr>()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a.eq_ignore_ascii_case(b),
    }
}
