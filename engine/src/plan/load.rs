//! Reading a plan file: TOML → [`PlanFile`] → [`LoadedPlan`] with resolved hosts.
//!
//! Flow: parse with recovery (every syntax error), index the spans, walk the document
//! against the plan's JSON Schema (every unknown key, wrong type and missing key, see
//! `structure.rs`), cut out what was wrong where that is possible, deserialize the rest,
//! merge the inventory and `[defaults.*]` into each host. A plan that loads with errors can
//! still be validated ([`load_partial`]) so one `kwin validate` run reports everything.

use super::loaded::{resolve_path, LoadedPlan, ResolvedHost};
use super::model::*;
use super::spans::SpanIndex;
use super::structure::{self, Anchor};
use super::vars::{self, VarInput, VarValue};
use crate::diag::{Diagnostic, Diagnostics, SourceMap};
use crate::shell::Shell;
use crate::transport::spec::{ConnSpec, JumpAddress, ProxyJump, SecretSource, SshSpec, WinrmSpec};
use serde::de::IntoDeserializer;
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

/// Load the plan at `path`. Errors: every problem found, with locations.
pub fn load(path: &Path) -> Result<LoadedPlan, Diagnostics> {
    let text = read(path)?;
    load_str(path, &text)
}

/// Largest plan or inventory file read (a plan of 1,000 hosts is about 100 KiB).
pub const MAX_PLAN_BYTES: u64 = 16 * 1024 * 1024;

pub use crate::fs::read_bounded;

pub(crate) fn read(path: &Path) -> Result<String, Diagnostics> {
    let bytes = read_bounded(path, MAX_PLAN_BYTES).map_err(|e| {
        Diagnostics(vec![Diagnostic::error(
            "read",
            format!("cannot read plan {}: {e}", path.display()),
        )])
    })?;
    String::from_utf8(bytes).map_err(|e| {
        // Point at the first byte that is not UTF-8: the text before it is valid.
        let good = e.utf8_error().valid_up_to();
        let before = String::from_utf8_lossy(&e.as_bytes()[..good]).into_owned();
        let at = SourceMap::new(path, &before).location(good);
        Diagnostics(vec![Diagnostic::error(
            "read",
            format!(
                "the plan is not valid UTF-8 (byte 0x{:02x})",
                e.as_bytes().get(good).copied().unwrap_or(0)
            ),
        )
        .with_hint("save the plan as UTF-8")
        .at(Some(at))])
    })
}

/// Load a plan from `text`, as if read from `path`.
pub fn load_str(path: &Path, text: &str) -> Result<LoadedPlan, Diagnostics> {
    let partial = load_partial(path, text);
    match partial.plan {
        Some(plan) if !partial.diags.has_errors() => Ok(plan),
        _ => Err(partial.diags),
    }
}

/// Paths of the plan that were cut out because they were wrong (already reported); rules
/// about a missing value skip these so one mistake is reported once.
#[derive(Debug, Clone, Default)]
pub struct Pruned(HashSet<String>);

impl Pruned {
    /// Whether `path` itself was cut out.
    pub fn contains(&self, path: &str) -> bool {
        self.0.contains(path)
    }
}

/// The outcome of loading: the plan as far as it could be read, and every problem found.
#[derive(Debug)]
pub struct Partial {
    /// `None` when the file could not be read into the model at all (syntax errors, a
    /// missing or wrong required key).
    pub plan: Option<LoadedPlan>,
    pub diags: Diagnostics,
    pub pruned: Pruned,
    /// Values a variable could not be substituted in (`plan/vars.rs`): other diagnostics at
    /// these places are about the text left as written, and dropped.
    pub masked: Vec<crate::diag::Location>,
    /// The values of the variables marked `sensitive`: no diagnostic may show them.
    pub secrets: Vec<crate::secret::Secret>,
}

/// Load as much of the plan as possible, reporting every problem on the way. Variables take
/// their values from the environment (`KWIN_VAR_<name>`) and their defaults.
pub fn load_partial(path: &Path, text: &str) -> Partial {
    load_partial_with(path, text, &VarInput::with_env(Default::default()))
}

/// [`load_partial`] with the variables' values from `vars` (`plan/vars.rs`).
pub fn load_partial_with(path: &Path, text: &str, vars: &VarInput) -> Partial {
    let source = SourceMap::new(path, text);
    let mut diags = Diagnostics::default();
    let mut masked = Vec::new();
    let (values, substituted, secrets) = variables(text, vars, &source, &mut diags, &mut masked);
    let text = substituted.as_deref().unwrap_or(text);
    // Substituted values keep their lines, not their byte offsets: map the new text.
    let mut partial = load_substituted(path, text, SourceMap::new(path, text), diags);
    if let Some(plan) = partial.plan.as_mut() {
        plan.vars = values;
    }
    partial.masked = masked;
    partial.secrets = secrets;
    vars::scrub_diagnostics(&mut partial.diags, &partial.secrets);
    partial
}

/// The plan's variables: their values, the plan text with them substituted (`None`: no
/// variable is used in a host field; lines keep their numbers, so `source` still locates),
/// and the values of those marked `sensitive`.
fn variables(
    text: &str,
    input: &VarInput,
    source: &SourceMap,
    diags: &mut Diagnostics,
    masked: &mut Vec<crate::diag::Location>,
) -> (
    BTreeMap<String, VarValue>,
    Option<String>,
    Vec<crate::secret::Secret>,
) {
    if !text.contains("variables") && !text.contains("var.") && input.cli.is_empty() {
        return (BTreeMap::new(), None, Vec::new());
    }
    let (doc, errors) = toml::de::DeTable::parse_recoverable(text);
    if !errors.is_empty() {
        return (BTreeMap::new(), None, Vec::new());
    }
    let spans = SpanIndex::build(doc.get_ref());
    let decls = vars::declarations(doc.get_ref());
    let mut invalid = Default::default();
    let values = vars::resolve(&decls, input, source, &spans, diags, &mut invalid);
    let edits = vars::substitutions(
        doc.get_ref(),
        &decls,
        &values,
        &invalid,
        source,
        diags,
        masked,
    );
    let text = (!edits.is_empty()).then(|| vars::apply_edits(text, edits));
    let secrets = vars::sensitive_values(&decls, &values);
    (values, text, secrets)
}

fn load_substituted(path: &Path, text: &str, source: SourceMap, diags: Diagnostics) -> Partial {
    let mut diags = diags;
    let mut pruned = Pruned::default();

    let (mut doc, syntax_errors) = toml::de::DeTable::parse_recoverable(text);
    // Recovery after one mistake can produce follow-up errors on the same line: keep the
    // first of each line.
    let mut lines_seen = HashSet::new();
    for e in &syntax_errors {
        let loc = source.span(e.span());
        if !lines_seen.insert(loc.as_ref().map(|l| l.line)) {
            continue;
        }
        diags.push(Diagnostic::error("toml-syntax", e.message().trim().to_string()).at(loc));
    }
    if !syntax_errors.is_empty() {
        return Partial {
            plan: None,
            diags,
            pruned,
            masked: Vec::new(),
            secrets: Vec::new(),
        };
    }
    let spans = SpanIndex::build(doc.get_ref());

    let findings = structure::check(doc.get_ref(), super::schema::schema_value());
    let mut fatal = false;
    for f in &findings {
        let p = f.path.to_string();
        let span = match f.anchor {
            Anchor::Key => spans.key(&p),
            Anchor::Value => spans.find(&p),
        };
        diags.push(f.diag.clone().at(source.span(span)));
        match &f.prune {
            Some(cut) => {
                pruned.0.insert(cut.to_string());
            }
            None => fatal = true,
        }
    }
    if fatal {
        return Partial {
            plan: None,
            diags,
            pruned,
            masked: Vec::new(),
            secrets: Vec::new(),
        };
    }
    structure::prune(doc.get_mut(), &findings);
    literal_modes(doc.get_mut());

    let file = match PlanFile::deserialize(doc.into_deserializer()) {
        Ok(f) => f,
        Err(e) => {
            // The structural pass knows every key and type of the model, so this only
            // happens if the schema and serde disagree.
            diags.push(
                Diagnostic::error("plan-type", e.message().trim().to_string())
                    .with_hint("this is a bug in kwin: the plan passed the schema but not serde")
                    .at(source.span(e.span())),
            );
            return Partial {
                plan: None,
                diags,
                pruned,
                masked: Vec::new(),
                secrets: Vec::new(),
            };
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
        .unwrap_or(Path::new("."));
    // Absolute, so paths resolved against it (inventory, keys, manifest files) stay right
    // whatever directory a step or a later command runs in.
    let base_dir = std::path::absolute(base_dir).unwrap_or_else(|_| base_dir.to_path_buf());

    let inventory = match &file.inventory {
        Some(inv) => match read_inventory(inv, &resolve_path(&base_dir, inv)) {
            Ok(hosts) => hosts,
            Err(msg) => {
                let mut d = Diagnostic::error("inventory", msg);
                if !resolve_path(&base_dir, inv).exists() {
                    if let Some(hint) = super::loaded::outside_hint(inv) {
                        d = d.with_hint(hint);
                    }
                }
                diags.push(d.at(source.span(spans.find("inventory"))));
                Vec::new()
            }
        },
        None => Vec::new(),
    };

    let mut hosts = Vec::new();
    for (i, h) in file.hosts.iter().enumerate() {
        let inv = inventory.iter().find(|x| x.name == h.name);
        let (rh, errs) = resolve_host(i, h, inv, &file.defaults, &base_dir, &pruned);
        for (field, d) in errs {
            let p = format!("hosts[{i}].{field}");
            diags.push(d.at(source.span(spans.key(&p))));
        }
        hosts.push(rh);
    }
    resolve_jumps(&mut hosts, &file, &inventory, &file.defaults);
    Partial {
        plan: Some(LoadedPlan {
            path: path.to_path_buf(),
            base_dir,
            file,
            hosts,
            source,
            spans,
            vars: BTreeMap::new(),
            limit: None,
        }),
        diags,
        pruned,
        masked: Vec::new(),
        secrets: Vec::new(),
    }
}

/// A task's `mode` written as TOML's octal (`0o644`), hex or binary literal means the bits
/// that literal's value is (`0o644` is 0644), while a decimal one's digits are read as octal
/// (`644` is 0644, the form the modules document). Both reach a module as one integer, so the
/// literal's form is kept here, where it is still known: such a `mode` anywhere in a task's
/// params becomes the string of its octal digits (`"0644"`).
fn literal_modes(doc: &mut toml::de::DeTable<'_>) {
    use toml::de::DeValue;
    fn walk(v: &mut DeValue<'_>) {
        match v {
            DeValue::Table(t) => {
                for (k, v) in t.iter_mut() {
                    let v = v.get_mut();
                    if k.get_ref() == "mode" {
                        if let DeValue::Integer(n) = &*v {
                            let digits = n.as_str().replace('_', "");
                            if n.radix() != 10 {
                                if let Ok(bits) = u64::from_str_radix(&digits, n.radix()) {
                                    *v = DeValue::String(format!("{bits:04o}").into());
                                    continue;
                                }
                            }
                        }
                    }
                    walk(v);
                }
            }
            DeValue::Array(items) => items.iter_mut().for_each(|i| walk(i.get_mut())),
            _ => {}
        }
    }
    if let Some(DeValue::Array(tasks)) = doc.get_mut("tasks").map(|t| t.get_mut()) {
        for t in tasks.iter_mut() {
            if let DeValue::Table(t) = t.get_mut() {
                if let Some(p) = t.get_mut("params") {
                    walk(p.get_mut());
                }
            }
        }
    }
}

#[derive(Debug, Clone, Default, serde::Deserialize)]
struct InventoryFile {
    #[serde(default)]
    hosts: Vec<Host>,
}

/// Read the inventory `name` (as the plan wrote it) at `path`.
fn read_inventory(name: &str, path: &Path) -> Result<Vec<Host>, String> {
    let bytes = read_bounded(path, MAX_PLAN_BYTES)
        .map_err(|e| format!("cannot read inventory {name}: {e}"))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("cannot read inventory {name}: not UTF-8 text"))?;
    let inv: InventoryFile =
        toml::from_str(&text).map_err(|e| format!("inventory {name}: {}", e.message().trim()))?;
    if let Some(h) = inv.hosts.iter().find(|h| h.connection.password.is_some()) {
        return Err(format!(
            "inventory {name}: host `{}` has a plain-text password; use password_env or password_file",
            h.name
        ));
    }
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
        password: None,
        become_root: pick!(become_root),
        https: pick!(https),
        auth: pick!(auth),
        cert_fingerprint: pick!(cert_fingerprint),
        ca_file: pick!(ca_file),
        insecure: pick!(insecure),
        connect_timeout: pick!(connect_timeout),
        proxy_jump: pick!(proxy_jump),
    }
}

type FieldErrors = Vec<(&'static str, Diagnostic)>;

/// Resolve one host's connection. Always returns a host (with fallbacks where the plan is
/// wrong) so validation can go on; the errors say what was wrong, by field.
fn resolve_host(
    index: usize,
    h: &Host,
    inv: Option<&Host>,
    defaults: &Defaults,
    base: &Path,
    pruned: &Pruned,
) -> (ResolvedHost, FieldErrors) {
    let mut errs: FieldErrors = Vec::new();
    let is_pruned = |field: &str| pruned.contains(&format!("hosts[{index}].{field}"));
    let os = h.os.or(inv.and_then(|i| i.os)).unwrap_or_else(|| {
        if !is_pruned("os") {
            errs.push((
                "name",
                Diagnostic::error("host-os", format!("host `{}` has no `os`", h.name))
                    .with_hint("add os = \"linux\" or os = \"windows\""),
            ));
        }
        Os::Linux
    });
    let (def, def_path) = match os {
        Os::Linux => (&defaults.linux, "defaults.linux"),
        Os::Windows => (&defaults.windows, "defaults.windows"),
    };
    let c = merge(&h.connection, inv.map(|i| &i.connection), def);
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
            if !is_pruned("address") {
                errs.push((
                    "name",
                    Diagnostic::error(
                        "host-address",
                        format!("host `{}` has no `address`", h.name),
                    )
                    .with_hint("set address, or name an inventory that has this host"),
                ));
            }
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
    let user_default = match os {
        Os::Linux => "root",
        Os::Windows => "Administrator",
    };
    let transport_err = |msg: &str, hint: &str| {
        let mut d = Diagnostic::error("transport-os", msg.to_string());
        if !hint.is_empty() {
            d = d.with_hint(hint.to_string());
        }
        ("transport", d)
    };
    let conn = match (os, transport) {
        (_, TransportKind::Ssh) | (_, TransportKind::SshPowershell) => {
            let shell = if transport == TransportKind::SshPowershell {
                Shell::PowerShell
            } else {
                Shell::Posix
            };
            if os == Os::Linux && shell == Shell::PowerShell {
                errs.push(transport_err(
                    "transport `ssh-powershell` is for Windows hosts",
                    "use transport = \"ssh\" for Linux hosts",
                ));
            }
            if os == Os::Windows && shell == Shell::Posix {
                errs.push(transport_err(
                    "transport `ssh` is for Linux hosts",
                    "use transport = \"ssh-powershell\" for OpenSSH on Windows",
                ));
            }
            let user = c.user.clone().unwrap_or_else(|| user_default.to_string());
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
                // A plan host's name is resolved once every host is (`resolve_jumps`).
                proxy_jump: c.proxy_jump.as_deref().and_then(|v| match v.trim() {
                    "none" => Some(ProxyJump::Direct),
                    v => JumpAddress::parse(v).ok().map(ProxyJump::Address),
                }),
            })
        }
        (os, TransportKind::Winrm) => {
            if os == Os::Linux {
                errs.push(transport_err(
                    "transport `winrm` is for Windows hosts",
                    "use transport = \"ssh\"",
                ));
            }
            let https = c.https.unwrap_or(true);
            let auth = c.auth.unwrap_or(WinrmAuth::Ntlm);
            let password_cut = ["password", "password_env", "password_file"]
                .iter()
                .any(|f| is_pruned(f) || pruned.contains(&format!("{def_path}.{f}")));
            if password.is_none() && os == Os::Windows && !password_cut {
                errs.push((
                    "name",
                    Diagnostic::error(
                        "winrm-password",
                        format!("host `{}` uses WinRM but names no password source", h.name),
                    )
                    .with_hint("set password_env or password_file (here or in [defaults.windows])"),
                ));
            }
            ConnSpec::Winrm(WinrmSpec {
                address: address.clone(),
                port: c.port.unwrap_or(if https { 5986 } else { 5985 }),
                user: c.user.clone().unwrap_or_else(|| user_default.to_string()),
                password: password.unwrap_or(SecretSource::Env(String::new())),
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
        (os, TransportKind::Local) => {
            if os == Os::Windows {
                errs.push(transport_err(
                    "transport `local` is for Linux hosts",
                    "use transport = \"winrm\" or \"ssh-powershell\"",
                ));
            }
            ConnSpec::Local {
                become_root: c.become_root.unwrap_or(false),
            }
        }
    };
    let host = ResolvedHost {
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
    };
    (host, errs)
}

/// Point `proxy_jump` values that name another host of the plan at that host's own SSH
/// connection. What cannot be resolved (the host itself, a WinRM or local host, a host
/// that has a jump of its own) stays as it is and is reported by validation
/// (`validate::hosts`, `bad-proxy-jump`).
fn resolve_jumps(
    hosts: &mut [ResolvedHost],
    file: &PlanFile,
    inventory: &[Host],
    defaults: &Defaults,
) {
    let raw: Vec<Option<String>> = file
        .hosts
        .iter()
        .zip(hosts.iter())
        .map(|(h, rh)| {
            let inv = inventory.iter().find(|x| x.name == h.name);
            let def = match rh.os {
                Os::Linux => &defaults.linux,
                Os::Windows => &defaults.windows,
            };
            merge(&h.connection, inv.map(|i| &i.connection), def).proxy_jump
        })
        .collect();
    for i in 0..hosts.len() {
        let Some(name) = raw[i].as_deref().map(str::trim) else {
            continue;
        };
        let Some(j) = hosts.iter().position(|h| h.name == name) else {
            continue;
        };
        let jump = match &hosts[j].conn {
            // Its own `proxy_jump` may only be "none"; a `ProxyJump` that `~/.ssh/config`
            // gives it is refused when connecting.
            ConnSpec::Ssh(s) if j != i && raw[j].as_deref().is_none_or(|v| v.trim() == "none") => {
                s.clone()
            }
            _ => continue,
        };
        if let ConnSpec::Ssh(s) = &mut hosts[i].conn {
            s.proxy_jump = Some(ProxyJump::Host {
                name: name.to_string(),
                spec: Box::new(jump),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    /// A plan named by a relative path resolves its files to absolute paths, so a manifest
    /// or key path still holds when used from another directory.
    #[test]
    fn base_dir_is_absolute_for_a_relative_plan_path() {
        let dir = tempfile::tempdir().expect("tmp");
        let sub = dir.path().join("plans");
        std::fs::create_dir(&sub).expect("mkdir");
        std::fs::write(
            sub.join("p.toml"),
            "[[hosts]]\nname = \"h1\"\naddress = \"10.0.0.1\"\nos = \"linux\"\n",
        )
        .expect("write");
        let rel = pathdiff(&sub.join("p.toml"));
        let plan = super::load(&rel).unwrap_or_else(|d| panic!("{d}"));
        assert!(plan.base_dir.is_absolute(), "{}", plan.base_dir.display());
        assert_eq!(
            std::fs::canonicalize(&plan.base_dir).expect("canon"),
            std::fs::canonicalize(&sub).expect("canon")
        );
    }

    /// `p` relative to the current directory (`../..` up to `/`, then down).
    fn pathdiff(p: &std::path::Path) -> std::path::PathBuf {
        let cwd = std::env::current_dir().expect("cwd");
        let mut rel = std::path::PathBuf::new();
        for _ in cwd.components().skip(1) {
            rel.push("..");
        }
        rel.join(p.strip_prefix("/").expect("absolute"))
    }
}
