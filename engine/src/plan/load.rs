//! Reading a plan file: TOML → [`PlanFile`] → [`LoadedPlan`] with resolved hosts.

use super::model::*;
use super::spans::SpanIndex;
use super::{resolve_path, ConnSpec, LoadedPlan, ResolvedHost, SecretSource, SshSpec, WinrmSpec};
use crate::diag::{Diagnostic, Diagnostics, SourceMap};
use crate::transport::Shell;
use std::path::Path;

/// Load the plan at `path`. Errors: every problem found, with locations.
pub fn load(path: &Path) -> Result<LoadedPlan, Diagnostics> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Diagnostics(vec![Diagnostic::error(
            "read",
            format!("cannot read plan {}: {e}", path.display()),
        )])
    })?;
    load_str(path, &text)
}

/// Load a plan from `text`, as if read from `path`.
pub fn load_str(path: &Path, text: &str) -> Result<LoadedPlan, Diagnostics> {
    let source = SourceMap::new(path, text);
    let mut diags = Diagnostics::default();

    let (doc, syntax_errors) = toml::de::DeTable::parse_recoverable(text);
    for e in &syntax_errors {
        diags.push(
            Diagnostic::error("toml-syntax", e.message().trim().to_string())
                .at(source.span(e.span())),
        );
    }
    if diags.has_errors() {
        return Err(diags);
    }
    let spans = SpanIndex::build(doc.get_ref());

    let file: PlanFile = match toml::from_str(text) {
        Ok(f) => f,
        Err(e) => {
            diags.push(serde_error(&source, &e));
            return Err(diags);
        }
    };

    let base_dir = path
        .parent()
        .map(|p| {
            if p.as_os_str().is_empty() {
                Path::new(".")
            } else {
                p
            }
        })
        .unwrap_or(Path::new("."))
        .to_path_buf();

    let inventory = match &file.inventory {
        Some(inv) => match read_inventory(&resolve_path(&base_dir, inv)) {
            Ok(hosts) => hosts,
            Err(msg) => {
                diags.push(
                    Diagnostic::error("inventory", msg).at(source.span(spans.find("inventory"))),
                );
                Vec::new()
            }
        },
        None => Vec::new(),
    };

    let mut hosts = Vec::new();
    for (i, h) in file.hosts.iter().enumerate() {
        let inv = inventory.iter().find(|x| x.name == h.name);
        match resolve_host(i, h, inv, &file.defaults, &base_dir) {
            Ok(rh) => hosts.push(rh),
            Err(errs) => {
                for (field, d) in errs {
                    let p = format!("hosts[{i}].{field}");
                    diags.push(d.at(source.span(spans.key(&p))));
                }
            }
        }
    }
    if diags.has_errors() {
        return Err(diags);
    }
    Ok(LoadedPlan {
        path: path.to_path_buf(),
        base_dir,
        file,
        hosts,
        source,
        spans,
    })
}

fn serde_error(source: &SourceMap, e: &toml::de::Error) -> Diagnostic {
    let msg = e.message().trim().to_string();
    let mut d = Diagnostic::error("plan-type", msg.clone());
    if msg.starts_with("unknown field") {
        d.code = "unknown-key";
        // "unknown field `adress`, expected one of `name`, `address`, ..."
        let mut parts = msg.split('`').skip(1).step_by(2);
        if let Some(bad) = parts.next() {
            let candidates: Vec<&str> = parts.collect();
            d.summary = format!("unknown key `{bad}`");
            if let Some(s) = crate::diag::did_you_mean(bad, candidates.iter().copied()) {
                d.hint = Some(format!("did you mean `{s}`?"));
            } else if !candidates.is_empty() {
                d.hint = Some(format!("expected one of: {}", candidates.join(", ")));
            }
        }
    }
    d.at(source.span(e.span()))
}

#[derive(Debug, Clone, Default, serde::Deserialize)]
struct InventoryFile {
    #[serde(default)]
    hosts: Vec<Host>,
}

fn read_inventory(path: &Path) -> Result<Vec<Host>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read inventory {}: {e}", path.display()))?;
    let inv: InventoryFile = toml::from_str(&text)
        .map_err(|e| format!("inventory {}: {}", path.display(), e.message().trim()))?;
    Ok(inv.hosts)
}

/// Merge connection settings: host over inventory over `[defaults.<os>]`.
fn merge(host: &Connection, inv: Option<&Connection>, def: &Connection) -> Connection {
    macro_rules! pick {
        ($f:ident) => {
            host.$f
                .clone()
                .or_else(|| inv.and_then(|i| i.$f.clone()))
                .or_else(|| def.$f.clone())
        };
    }
    Connection {
        transport: pick!(transport),
        port: pick!(port),
        user: pick!(user),
        private_key: pick!(private_key),
        private_key_passphrase_env: pick!(private_key_passphrase_env),
        password_env: pick!(password_env),
        password_file: pick!(password_file),
        password: host.password.clone().or_else(|| def.password.clone()),
        become_root: pick!(become_root),
        https: pick!(https),
        auth: pick!(auth),
        cert_fingerprint: pick!(cert_fingerprint),
        ca_file: pick!(ca_file),
        insecure: pick!(insecure),
        connect_timeout: pick!(connect_timeout),
    }
}

type FieldErrors = Vec<(&'static str, Diagnostic)>;

fn resolve_host(
    index: usize,
    h: &Host,
    inv: Option<&Host>,
    defaults: &Defaults,
    base: &Path,
) -> Result<ResolvedHost, FieldErrors> {
    let mut errs: FieldErrors = Vec::new();
    let os = h.os.or(inv.and_then(|i| i.os)).unwrap_or_else(|| {
        errs.push((
            "name",
            Diagnostic::error("host-os", format!("host `{}` has no `os`", h.name))
                .with_hint("add os = \"linux\" or os = \"windows\""),
        ));
        Os::Linux
    });
    let def = match os {
        Os::Linux => &defaults.linux,
        Os::Windows => &defaults.windows,
    };
    let c = merge(&h.connection, inv.map(|i| &i.connection), def);
    if c.password.is_some() {
        errs.push((
            "password",
            Diagnostic::error(
                "plain-password",
                "passwords are not allowed in the plan text",
            )
            .with_hint("use password_env = \"VAR\" or password_file = \"path\""),
        ));
    }
    let address = h
        .address
        .clone()
        .or_else(|| inv.and_then(|i| i.address.clone()));
    let transport = c.transport.unwrap_or(match os {
        Os::Linux => TransportKind::Ssh,
        Os::Windows => TransportKind::Winrm,
    });
    let address = match (address, transport) {
        (Some(a), _) => a,
        (None, TransportKind::Local) => "127.0.0.1".to_string(),
        (None, _) => {
            errs.push((
                "name",
                Diagnostic::error(
                    "host-address",
                    format!("host `{}` has no `address`", h.name),
                )
                .with_hint("set address, or name an inventory that has this host"),
            ));
            String::new()
        }
    };
    let password = c.password_env.clone().map(SecretSource::Env).or_else(|| {
        c.password_file
            .as_deref()
            .map(|p| SecretSource::File(resolve_path(base, p)))
    });
    let host_key = h
        .host_key
        .clone()
        .or_else(|| inv.and_then(|i| i.host_key.clone()));
    let timeout = c.connect_timeout.unwrap_or(10);
    let conn = match (os, transport) {
        (_, TransportKind::Ssh) | (_, TransportKind::SshPowershell) => {
            let shell = if transport == TransportKind::SshPowershell {
                Shell::PowerShell
            } else {
                Shell::Posix
            };
            if os == Os::Linux && shell == Shell::PowerShell {
                errs.push((
                    "transport",
                    Diagnostic::error(
                        "transport-os",
                        "transport `ssh-powershell` is for Windows hosts",
                    ),
                ));
            }
            if os == Os::Windows && shell == Shell::Posix {
                errs.push((
                    "transport",
                    Diagnostic::error("transport-os", "transport `ssh` is for Linux hosts")
                        .with_hint("use transport = \"ssh-powershell\" for OpenSSH on Windows"),
                ));
            }
            let user = c.user.clone().unwrap_or_else(|| match os {
                Os::Linux => "root".to_string(),
                Os::Windows => "Administrator".to_string(),
            });
            ConnSpec::Ssh(SshSpec {
                address: address.clone(),
                port: c.port.unwrap_or(22),
                become_root: c.become_root.unwrap_or(user != "root") && os == Os::Linux,
                user,
                private_key: c.private_key.as_deref().map(|p| resolve_path(base, p)),
                passphrase: c.private_key_passphrase_env.clone().map(SecretSource::Env),
                password: password.clone(),
                host_key,
                shell,
                connect_timeout_secs: timeout,
            })
        }
        (Os::Windows, TransportKind::Winrm) => {
            let https = c.https.unwrap_or(true);
            let auth = c.auth.unwrap_or(WinrmAuth::Ntlm);
            let Some(pw) = password.clone() else {
                errs.push((
                    "name",
                    Diagnostic::error(
                        "winrm-password",
                        format!("host `{}` uses WinRM but names no password source", h.name),
                    )
                    .with_hint("set password_env or password_file (here or in [defaults.windows])"),
                ));
                return Err(errs);
            };
            ConnSpec::Winrm(WinrmSpec {
                address: address.clone(),
                port: c.port.unwrap_or(if https { 5986 } else { 5985 }),
                user: c
                    .user
                    .clone()
                    .unwrap_or_else(|| "Administrator".to_string()),
                password: pw,
                https,
                auth,
                cert_fingerprint: c
                    .cert_fingerprint
                    .as_deref()
                    .map(|f| f.replace(':', "").to_ascii_lowercase()),
                ca_file: c.ca_file.as_deref().map(|p| resolve_path(base, p)),
                insecure: c.insecure.unwrap_or(false),
                connect_timeout_secs: timeout,
            })
        }
        (Os::Linux, TransportKind::Winrm) => {
            errs.push((
                "transport",
                Diagnostic::error("transport-os", "transport `winrm` is for Windows hosts")
                    .with_hint("use transport = \"ssh\""),
            ));
            return Err(errs);
        }
        (Os::Linux, TransportKind::Local) => ConnSpec::Local {
            become_root: c.become_root.unwrap_or(false),
        },
        (Os::Windows, TransportKind::Local) => {
            errs.push((
                "transport",
                Diagnostic::error("transport-os", "transport `local` is for Linux hosts"),
            ));
            return Err(errs);
        }
    };
    if !errs.is_empty() {
        return Err(errs);
    }
    Ok(ResolvedHost {
        index,
        name: h.name.clone(),
        address,
        os,
        role: h.role,
        node_ip: h.node_ip.clone(),
        interface: h.interface.clone(),
        labels: h.labels.clone(),
        taints: h.taints.clone(),
        conn,
    })
}
