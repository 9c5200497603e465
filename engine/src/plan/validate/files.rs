//! Rules about the controller's own files: every file the plan names on the machine kwin
//! runs on (SSH keys, password files, WinRM CA bundles, CNI manifests, proxy credentials)
//! must be there and readable, so `kwin validate` catches what `kwin apply` would fail on
//! later. Paths are resolved as loading resolves them ([`crate::plan::resolve_path`]:
//! `~/` against `$HOME`, relative ones against the plan's directory) and the diagnostic names
//! the resolved path. Files are opened, never read: a secret's value is read only when it is
//! used.

use super::pass::V;
use crate::diag::Diagnostic;
use crate::plan::model::{Connection, Os};
use crate::plan::ConnSpec;
use crate::transport::spec::SecretSource;
use std::path::{Path, PathBuf};

pub(super) fn check(v: &mut V<'_>) {
    hosts(v);
    let plan = v.plan;
    if let Some(f) = plan
        .file
        .cni
        .as_ref()
        .and_then(|c| c.manifest_file.as_deref())
    {
        file(v, "cni.manifest_file", "cni.manifest_file", f, None);
    }
    if let Some(f) = plan
        .file
        .proxy
        .as_ref()
        .and_then(|p| p.credentials_file.as_deref())
    {
        file(
            v,
            "proxy.credentials_file",
            "proxy.credentials_file",
            f,
            None,
        );
    }
}

/// The files each host's connection uses, reported where the plan wrote them: the host's
/// own key, else `[defaults.<os>]`, else (the inventory's) at the host's name.
fn hosts(v: &mut V<'_>) {
    let plan = v.plan;
    for rh in &plan.hosts {
        let Some(h) = plan.file.hosts.get(rh.index) else {
            continue;
        };
        let (def, def_path) = match rh.os {
            Os::Linux => (&plan.file.defaults.linux, "defaults.linux"),
            Os::Windows => (&plan.file.defaults.windows, "defaults.windows"),
        };
        for (key, path) in used_files(&rh.conn) {
            let written = |c: &Connection| match key {
                "private_key" => c.private_key.clone(),
                "password_file" => c.password_file.clone(),
                _ => c.ca_file.clone(),
            };
            let (at, text, from) = match (written(&h.connection), written(def)) {
                (Some(t), _) => (format!("hosts[{}].{key}", rh.index), t, None),
                (None, Some(t)) if plan.resolve_path(&t) == path => {
                    (format!("{def_path}.{key}"), t, None)
                }
                _ => (
                    format!("hosts[{}].name", rh.index),
                    path.display().to_string(),
                    Some(rh.name.as_str()),
                ),
            };
            file(v, &at, key, &text, from);
        }
    }
}

/// The local files a connection reads: `(plan key, resolved path)`.
fn used_files(conn: &ConnSpec) -> Vec<(&'static str, PathBuf)> {
    let password = |p: &Option<SecretSource>| match p {
        Some(SecretSource::File(f)) => Some(("password_file", f.clone())),
        _ => None,
    };
    match conn {
        ConnSpec::Ssh(s) => s
            .private_key
            .clone()
            .map(|k| ("private_key", k))
            .into_iter()
            .chain(password(&s.password))
            .collect(),
        ConnSpec::Winrm(w) => password(&Some(w.password.clone()))
            .into_iter()
            .chain(
                w.ca_file
                    .clone()
                    .filter(|_| w.https)
                    .map(|f| ("ca_file", f)),
            )
            .collect(),
        ConnSpec::Local { .. } => Vec::new(),
    }
}

/// Report `text` (as written at plan path `at`, named `key`) unless it resolves to a file
/// this user can open. `inventory_host`: the value came from the inventory's entry of it.
fn file(v: &mut V<'_>, at: &str, key: &str, text: &str, inventory_host: Option<&str>) {
    let path = v.plan.resolve_path(text);
    let Err(why) = openable(&path) else {
        return;
    };
    let (what, hint) = match inventory_host {
        Some(h) => (
            format!("host `{h}`: {key} from the inventory"),
            "the inventory's paths resolve against the plan's directory".to_string(),
        ),
        None => (
            format!("{key} \"{text}\""),
            crate::plan::loaded::outside_hint(text).unwrap_or_else(|| {
                format!(
                    "relative paths resolve against the plan's directory ({}), `~/` against $HOME",
                    v.plan.base_dir.display()
                )
            }),
        ),
    };
    v.at(
        at,
        Diagnostic::error(
            "local-file",
            format!("{what}: cannot read {}: {why}", path.display()),
        )
        .with_hint(hint),
    );
}

/// Whether `path` can be opened for reading. Only a regular file is opened (opening a FIFO
/// would wait for a writer); a directory is refused.
fn openable(path: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| io_reason(&e))?;
    if meta.is_dir() {
        return Err("it is a directory".into());
    }
    if meta.is_file() {
        std::fs::File::open(path).map_err(|e| io_reason(&e))?;
    }
    Ok(())
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}
