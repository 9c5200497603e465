//! Rules about hosts: names, addresses, connection settings, labels and taints.

use super::pass::V;
use crate::diag::Diagnostic;
use crate::plan::model::{Connection, Os, WinrmAuth};
use crate::plan::spans::PlanPath;
use crate::plan::{syntax, ConnSpec, JumpAddress, ProxyJump, ResolvedHost};
use crate::shell::Shell;
use std::collections::HashMap;
use std::net::IpAddr;

pub(super) fn check(v: &mut V<'_>) {
    names(v);
    addresses(v);
    connection_tables(v);
    transports(v);
    labels_and_taints(v);
}

fn names(v: &mut V<'_>) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, h) in v.plan.file.hosts.iter().enumerate() {
        let path = format!("hosts[{i}].name");
        if let Err(why) = syntax::node_name(&h.name) {
            v.at(
                &path,
                Diagnostic::error(
                    "host-name",
                    format!("host name \"{}\" is not a valid node name: {why}", h.name),
                )
                .with_hint(
                    "host names are Kubernetes node names: lowercase letters, digits, `-` and `.`",
                ),
            );
        }
        if let Some(first) = seen.insert(&h.name, i) {
            seen.insert(&h.name, first);
            v.at(
                &path,
                Diagnostic::error(
                    "host-duplicate",
                    format!("host name `{}` is used twice", h.name),
                )
                .with_hint(format!("the first is hosts[{first}]")),
            );
        }
    }
}

fn addresses(v: &mut V<'_>) {
    let plan = v.plan;
    let mut endpoints: HashMap<(String, u16), &str> = HashMap::new();
    let mut node_ips: HashMap<&str, &str> = HashMap::new();
    for (i, h) in plan.file.hosts.iter().enumerate() {
        let Some(rh) = plan.hosts.get(i) else {
            continue;
        };
        if let Some(a) = &h.address {
            if let Err(why) = syntax::address(a) {
                v.at(
                    &format!("hosts[{i}].address"),
                    Diagnostic::error(
                        "bad-address",
                        format!("address \"{a}\" is not valid: {why}"),
                    ),
                );
            }
        }
        if let Some(ip) = &h.node_ip {
            if ip.parse::<IpAddr>().is_err() {
                v.at(
                    &format!("hosts[{i}].node_ip"),
                    Diagnostic::error(
                        "bad-address",
                        format!("node_ip \"{ip}\" is not an IP address"),
                    ),
                );
            }
        }
        let port = match &rh.conn {
            ConnSpec::Ssh(s) => s.port,
            ConnSpec::Winrm(w) => w.port,
            ConnSpec::Local { .. } => continue,
        };
        let addr_path = if v.has(&format!("hosts[{i}].address")) {
            format!("hosts[{i}].address")
        } else {
            format!("hosts[{i}].name")
        };
        if rh.address.is_empty() {
            continue;
        }
        let key = (rh.address.to_ascii_lowercase(), port);
        if let Some(other) = endpoints.insert(key.clone(), &rh.name) {
            endpoints.insert(key, other);
            v.at(
                &addr_path,
                Diagnostic::error(
                    "address-duplicate",
                    format!(
                        "hosts `{other}` and `{}` both connect to {}:{port}",
                        rh.name, rh.address
                    ),
                )
                .with_hint("every host needs its own address (or port)"),
            );
            continue;
        }
        if plan.file.cluster.is_some() && rh.role.is_some() {
            let node = rh.node_address();
            if let Some(other) = node_ips.insert(node, &rh.name) {
                node_ips.insert(node, other);
                v.at(
                    &addr_path,
                    Diagnostic::error(
                        "address-duplicate",
                        format!(
                            "nodes `{other}` and `{}` would both register with {node}",
                            rh.name
                        ),
                    )
                    .with_hint("set node_ip to the address other nodes reach each host on"),
                );
            } else if node.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback()) {
                v.at(
                    &addr_path,
                    Diagnostic::warning(
                        "node-ip-loopback",
                        format!(
                            "node `{}` would register with loopback address {node}",
                            rh.name
                        ),
                    )
                    .with_hint("set node_ip to the address other nodes reach this host on"),
                );
            }
        }
    }
}

/// The connection tables of the plan: `[defaults.linux]`, `[defaults.windows]` and each
/// host, by path.
fn tables(v: &V<'_>) -> Vec<(String, Connection)> {
    let f = &v.plan.file;
    let mut t = vec![
        ("defaults.linux".to_string(), f.defaults.linux.clone()),
        ("defaults.windows".to_string(), f.defaults.windows.clone()),
    ];
    for (i, h) in f.hosts.iter().enumerate() {
        t.push((format!("hosts[{i}]"), h.connection.clone()));
    }
    t
}

fn connection_tables(v: &mut V<'_>) {
    for (base, c) in tables(v) {
        for (key, val) in [
            ("password_env", &c.password_env),
            ("private_key_passphrase_env", &c.private_key_passphrase_env),
        ] {
            if let Some(var) = val {
                if var.is_empty() || var.contains(['=', ' ', '\t', '\0']) {
                    v.at(
                        &format!("{base}.{key}"),
                        Diagnostic::error(
                            "bad-env-var",
                            format!("`{key}` = \"{var}\" is not an environment variable name"),
                        )
                        .with_hint(format!(
                            "{key} names the variable that holds the secret, e.g. \"KWIN_PASSWORD\""
                        )),
                    );
                }
            }
        }
        if let Some(fp) = &c.cert_fingerprint {
            if let Err(why) = syntax::cert_fingerprint(fp) {
                v.at(
                    &format!("{base}.cert_fingerprint"),
                    Diagnostic::error(
                        "bad-fingerprint",
                        format!("cert_fingerprint is not valid: {why}"),
                    )
                    .with_hint("the SHA-256 of the WinRM HTTPS certificate: 64 hex digits, colons optional"),
                );
            }
        }
        if let Some(j) = c.proxy_jump.as_deref().filter(|j| j.trim() != "none") {
            if let Err(why) = JumpAddress::parse(j) {
                v.at(
                    &format!("{base}.proxy_jump"),
                    Diagnostic::error(
                        "bad-proxy-jump",
                        format!("proxy_jump \"{j}\" is not valid: {why}"),
                    )
                    .with_hint(
                        "the name of another host of the plan, `[user@]host[:port]`, or \"none\"",
                    ),
                );
            }
        }
        // Hosts are checked by their transport in `transports`; the OS defaults by OS.
        if base == "defaults.linux" {
            for key in ["https", "auth", "cert_fingerprint", "ca_file", "insecure"] {
                unused(v, &base, key, "a WinRM", "Linux hosts");
            }
        }
        if base == "defaults.windows" {
            unused(v, &base, "become", "a Linux (sudo)", "Windows hosts");
        }
    }
    for (i, h) in v.plan.file.hosts.iter().enumerate() {
        if let Some(k) = &h.host_key {
            if let Err(why) = syntax::host_key(k) {
                v.at(
                    &format!("hosts[{i}].host_key"),
                    Diagnostic::error("bad-host-key", format!("host_key is not valid: {why}"))
                        .with_hint("`SHA256:` and 43 base64 characters, as `ssh-keygen -lf <(ssh-keyscan HOST)` prints it"),
                );
            }
        }
    }
}

/// Warn about `key` in the table at `base` if it was written there.
fn unused(v: &mut V<'_>, base: &str, key: &str, what: &str, who: &str) {
    let path = format!("{base}.{key}");
    if v.has(&path) {
        v.at_key(
            &path,
            Diagnostic::warning(
                "conn-unused",
                format!("`{key}` is {what} setting; {who} ignore it"),
            ),
        );
    }
}

/// Where a host's connection setting `key` comes from: the host, else its OS defaults.
fn source_of(v: &V<'_>, i: usize, os: Os, key: &str) -> String {
    let own = format!("hosts[{i}].{key}");
    if v.has(&own) {
        return own;
    }
    match os {
        Os::Linux => format!("defaults.linux.{key}"),
        Os::Windows => format!("defaults.windows.{key}"),
    }
}

fn transports(v: &mut V<'_>) {
    const WINRM_KEYS: [&str; 5] = ["https", "auth", "cert_fingerprint", "ca_file", "insecure"];
    const SSH_KEYS: [&str; 4] = [
        "private_key",
        "private_key_passphrase_env",
        "host_key",
        "proxy_jump",
    ];
    let plan = v.plan;
    for rh in &plan.hosts {
        let i = rh.index;
        let base = format!("hosts[{i}]");
        match &rh.conn {
            ConnSpec::Winrm(w) => {
                if w.insecure {
                    let p = source_of(v, i, rh.os, "insecure");
                    v.at(
                        &p,
                        Diagnostic::warning(
                            "winrm-insecure",
                            "`insecure = true`: the WinRM server's certificate is not verified",
                        )
                        .with_hint("pin it with cert_fingerprint or trust its CA with ca_file"),
                    );
                }
                if !w.https {
                    let p = source_of(v, i, rh.os, "https");
                    v.at(
                        &p,
                        Diagnostic::warning(
                            "winrm-http",
                            format!(
                                "host `{}`: WinRM over plain HTTP does not authenticate the server: whoever answers on {}:{} gets the NTLMv2 response (an offline-crackable proof of the password) and can refuse or stall requests",
                                rh.name, w.address, w.port
                            ),
                        )
                        .with_hint("use https = true with cert_fingerprint (or ca_file) where the network is not trusted"),
                    );
                }
                if !w.https && w.auth == WinrmAuth::Basic {
                    let p = source_of(v, i, rh.os, "auth");
                    v.at(
                        &p,
                        Diagnostic::error(
                            "winrm-basic-http",
                            format!(
                                "host `{}`: WinRM Basic authentication over HTTP would send the password in clear text",
                                rh.name
                            ),
                        )
                        .with_hint("Basic only over HTTPS: set https = true, or use auth = \"ntlm\""),
                    );
                }
                for key in SSH_KEYS {
                    unused(v, &base, key, "an SSH", "WinRM hosts");
                }
                if !w.https {
                    for key in ["cert_fingerprint", "ca_file", "insecure"] {
                        unused(v, &base, key, "a WinRM HTTPS", "hosts with https = false");
                    }
                }
            }
            ConnSpec::Ssh(s) => {
                if let Some(ProxyJump::Address(a)) = &s.proxy_jump {
                    jump_to_plan_host(v, rh, a);
                }
                let who = match s.shell {
                    Shell::Posix => "SSH hosts",
                    Shell::PowerShell => "ssh-powershell hosts",
                };
                for key in WINRM_KEYS {
                    unused(v, &base, key, "a WinRM", who);
                }
            }
            ConnSpec::Local { .. } => {
                for key in WINRM_KEYS.iter().chain(&SSH_KEYS) {
                    let what = if WINRM_KEYS.contains(key) {
                        "WinRM"
                    } else {
                        "SSH"
                    };
                    unused(v, &base, key, what, "local hosts");
                }
            }
        }
        if rh.os == Os::Windows {
            unused(v, &base, "become", "a Linux (sudo)", "Windows hosts");
        }
    }
}

/// A `proxy_jump` that names a plan host but was not resolved to it (`plan::load`): say why.
/// One that is almost a plan host's name (`bastoin`) is taken as an address: warn.
fn jump_to_plan_host(v: &mut V<'_>, rh: &ResolvedHost, a: &JumpAddress) {
    if a.user.is_some() || a.port.is_some() {
        return;
    }
    let plan = v.plan;
    let Some(target) = plan.hosts.iter().find(|h| h.name == a.host) else {
        let names = plan.hosts.iter().map(|h| h.name.as_str());
        let near = crate::diag::did_you_mean(&a.host, names);
        if let (Some(near), false) = (near, a.host.contains('.')) {
            let p = source_of(v, rh.index, rh.os, "proxy_jump");
            v.at(
                &p,
                Diagnostic::warning(
                    "proxy-jump-address",
                    format!(
                        "host `{}`: proxy_jump \"{}\" is not a host of the plan, so kwin looks it up as an address (DNS name)",
                        rh.name, a.host
                    ),
                )
                .with_hint(format!("did you mean the plan's host `{near}`? write proxy_jump = \"{near}\"")),
            );
        }
        return;
    };
    let why = if target.name == rh.name {
        "a host cannot be its own jump host".to_string()
    } else if !matches!(target.conn, ConnSpec::Ssh(_)) {
        format!("host `{}` is not reached over SSH", target.name)
    } else {
        format!(
            "host `{}` is itself reached through a jump host: kwin reaches a host through at most one jump host",
            target.name
        )
    };
    let p = source_of(v, rh.index, rh.os, "proxy_jump");
    v.at(
        &p,
        Diagnostic::error(
            "bad-proxy-jump",
            format!("host `{}`: proxy_jump \"{}\": {why}", rh.name, a.host),
        )
        .with_hint(
            "name an SSH host of the plan that has no proxy_jump, or give `[user@]host[:port]`",
        ),
    );
}

fn labels_and_taints(v: &mut V<'_>) {
    let plan = v.plan;
    for (i, h) in plan.file.hosts.iter().enumerate() {
        let os = plan.hosts.get(i).map(|rh| rh.os);
        for (key, value) in &h.labels {
            let path = PlanPath::root()
                .key("hosts")
                .index(i)
                .key("labels")
                .key(key)
                .to_string();
            if let Err(why) = syntax::label_key(key) {
                v.at_key(
                    &path,
                    Diagnostic::error("bad-label", format!("label key \"{key}\" is not valid: {why}"))
                        .with_hint("label keys are `[prefix/]name`: a DNS subdomain prefix, a name of at most 63 letters, digits, `-`, `_`, `.`"),
                );
            } else if let Some(why) = syntax::kubelet_label_refusal(key) {
                v.at_key(
                    &path,
                    Diagnostic::error(
                        "label-restricted",
                        format!("label \"{key}\" cannot be registered by the node: {why}"),
                    )
                    .with_hint("the kubelet refuses it at start; set such labels with kubectl after the node joined, or use your own prefix"),
                );
            }
            if let Err(why) = syntax::label_value(value) {
                v.at(
                    &path,
                    Diagnostic::error(
                        "bad-label",
                        format!("label value \"{value}\" is not valid: {why}"),
                    )
                    .with_hint("label values are empty or at most 63 letters, digits, `-`, `_`, `.`, starting and ending with a letter or digit"),
                );
            }
            let os_label = match key.as_str() {
                "kubernetes.io/os" | "beta.kubernetes.io/os" => Some(value.as_str()),
                "node.kubernetes.io/windows-build" => Some("windows"),
                _ => None,
            };
            if let (Some(label_os), Some(os)) = (os_label, os) {
                let host_os = match os {
                    Os::Linux => "linux",
                    Os::Windows => "windows",
                };
                if label_os != host_os {
                    v.at(
                        &path,
                        Diagnostic::error(
                            "label-os",
                            format!("label \"{key}\" says {label_os}, but host `{}` is a {host_os} host", h.name),
                        )
                        .with_hint("the kubelet sets the OS labels itself; remove this one"),
                    );
                }
            }
        }
        for (j, t) in h.taints.iter().enumerate() {
            if let Err(why) = syntax::taint(t) {
                v.at(
                    &format!("hosts[{i}].taints[{j}]"),
                    Diagnostic::error("bad-taint", format!("taint \"{t}\" is not valid: {why}"))
                        .with_hint("write taints as \"key=value:Effect\" or \"key:Effect\", e.g. \"os=windows:NoSchedule\""),
                );
            }
        }
    }
}
