//! `kwin kubeconfig plan.toml [-o FILE]`: the cluster's admin kubeconfig, fetched from the
//! first control plane and written locally with mode 0600.
//!
//! The plan is prepared like for `apply` (any diagnostic stops here); the first control plane
//! is reached over its transport exactly as the executor reaches it (`transport_for`, the
//! plan's `.kwin/known_hosts`, `--accept-new-host-keys`), and one script reads
//! `/etc/kubernetes/admin.conf` through `kubectl config view --raw --minify --flatten -o json`
//! (so no YAML is parsed here). The result names cluster, user and context after
//! `cluster.name` (`<name>`, `<name>-admin`, `<name>`), and its server is
//! `https://<control_plane_endpoint>`. Default file: `<cluster name>.kubeconfig` next to the
//! plan. The file is written through a new, randomly named temporary file (0600 from the
//! start, `O_EXCL`) and a rename (`state::write_private`), so an existing file keeps no looser
//! mode and nothing planted in a shared directory receives the key.
//!
//! The kubeconfig holds the admin client key: it is never printed or logged; only the path,
//! context and server are reported.

use crate::{OutputFormat, RunArgs};
use kwin_engine::plan::effective::{defaults, host_port, node_ip};
use kwin_engine::plan::LoadedPlan;
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Where kubeadm writes the admin kubeconfig on a control plane.
const ADMIN_CONF: &str = "/etc/kubernetes/admin.conf";
/// Time allowed for connecting and reading it.
const TIMEOUT: Duration = Duration::from_secs(60);

pub fn kubeconfig(run: RunArgs, out: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let Some(prepared) = crate::prepare::reported(crate::prepare::prepare(&run.plan), run.output)
    else {
        return Ok(ExitCode::from(1));
    };
    let plan = prepared.plan;
    let Some(cluster) = &plan.file.cluster else {
        anyhow::bail!(
            "{} has no [cluster]: there is no kubeconfig to fetch",
            run.plan.display()
        );
    };
    let name = cluster.name.clone();
    let Some(cp) = crate::control_plane::first(&plan) else {
        anyhow::bail!("the plan has no host with role = \"control-plane\"");
    };
    let endpoint = match &cluster.control_plane_endpoint {
        Some(e) => e.clone(),
        None => {
            let a = node_ip(cp).unwrap_or_else(|| cp.address.clone());
            host_port(&a, defaults::API_SERVER_PORT)
        }
    };
    let path = out.unwrap_or_else(|| plan.base_dir.join(format!("{name}.kubeconfig")));

    let raw = fetch(&plan, cp, &run)?;
    let config = rewrite(&raw, &name, &format!("https://{endpoint}"))
        .map_err(|e| anyhow::anyhow!("{ADMIN_CONF} on {}: {e}", cp.name))?;
    kwin_engine::exec::state::write_private(&path, to_yaml(&config).as_bytes())
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;

    let server = format!("https://{endpoint}");
    match run.output {
        OutputFormat::Human => println!(
            "wrote {} (context {name}, server {server}, from {}:{ADMIN_CONF})",
            path.display(),
            cp.name
        ),
        OutputFormat::Json => println!(
            "{}",
            json!({
                "type": "kubeconfig",
                "path": path.display().to_string(),
                "context": name,
                "server": server,
                "host": cp.name,
            })
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// `kubectl config view` of the admin kubeconfig on `cp`, as JSON.
fn fetch(
    plan: &LoadedPlan,
    cp: &kwin_engine::plan::ResolvedHost,
    run: &RunArgs,
) -> anyhow::Result<Value> {
    let crate::control_plane::ControlPlane { made, scrubber, .. } =
        crate::control_plane::transport(plan, cp, run)?;
    let t = made.transport.clone();
    let script = format!(
        "[ -r {ADMIN_CONF} ] || {{ echo '{ADMIN_CONF} does not exist: is the cluster initialised (kwin apply)?' >&2; exit 1; }}\n\
         command -v kubectl >/dev/null 2>&1 || {{ echo 'kubectl is not installed' >&2; exit 1; }}\n\
         kubectl config view --kubeconfig {ADMIN_CONF} --raw --minify --flatten -o json </dev/null\n"
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        let r = tokio::time::timeout(TIMEOUT, async {
            t.connect().await?;
            t.run(&script, TIMEOUT).await
        })
        .await;
        t.close().await;
        r
    });
    if let Some(k) = made.recorded_host_key() {
        eprintln!("note: {k}");
    }
    let output = match result {
        Err(_) => anyhow::bail!("{}: no answer within {}s", cp.name, TIMEOUT.as_secs()),
        Ok(Err(e)) => anyhow::bail!("{}: {}", cp.name, scrubber.scrub(&e.to_string())),
        Ok(Ok(o)) => o,
    };
    if output.exit != 0 {
        let err = scrubber.scrub(String::from_utf8_lossy(&output.stderr).trim());
        anyhow::bail!(
            "{}: reading {ADMIN_CONF} failed (exit code {}): {err}",
            cp.name,
            output.exit
        );
    }
    serde_json::from_slice(&output.stdout).map_err(|e| {
        anyhow::anyhow!(
            "{}: kubectl config view printed no JSON kubeconfig ({e})",
            cp.name
        )
    })
}

/// The admin kubeconfig `raw` (one cluster, one user, as `--minify --flatten` gives) with
/// cluster `name`, user `<name>-admin`, context `name` and `server`.
fn rewrite(raw: &Value, name: &str, server: &str) -> Result<Value, String> {
    let first = |key: &str, inner: &str| -> Result<Map<String, Value>, String> {
        raw.get(key)
            .and_then(|v| v.as_array())
            .and_then(|a| a.first())
            .and_then(|e| e.get(inner))
            .and_then(|v| v.as_object())
            .cloned()
            .ok_or_else(|| format!("the kubeconfig has no {key}[0].{inner}"))
    };
    let mut cluster = first("clusters", "cluster")?;
    let user = first("users", "user")?;
    if !cluster.contains_key("certificate-authority-data") {
        return Err("the cluster entry has no certificate-authority-data".into());
    }
    cluster.insert("server".into(), Value::String(server.to_string()));
    let user_name = format!("{name}-admin");
    Ok(json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": name, "cluster": cluster }],
        "users": [{ "name": user_name, "user": user }],
        "contexts": [{ "name": name, "context": { "cluster": name, "user": user_name } }],
        "current-context": name,
        "preferences": {},
    }))
}

/// YAML for a JSON value: block style, strings as JSON strings (valid YAML double-quoted
/// scalars), keys in the order given.
fn to_yaml(v: &Value) -> String {
    let mut s = String::new();
    emit(v, 0, &mut s);
    s
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::Object(m) if m.is_empty() => Some("{}".into()),
        Value::Array(a) if a.is_empty() => Some("[]".into()),
        Value::Object(_) | Value::Array(_) => None,
        other => Some(other.to_string()),
    }
}

fn emit(v: &Value, indent: usize, s: &mut String) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) => {
            for (k, val) in m {
                let key = Value::String(k.clone()).to_string();
                let key = if k.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                    k.clone()
                } else {
                    key
                };
                match scalar(val) {
                    Some(x) => s.push_str(&format!("{pad}{key}: {x}\n")),
                    None => {
                        s.push_str(&format!("{pad}{key}:\n"));
                        emit(val, indent + 2, s);
                    }
                }
            }
        }
        Value::Array(a) => {
            for item in a {
                match scalar(item) {
                    Some(x) => s.push_str(&format!("{pad}- {x}\n")),
                    None => {
                        // "- " then the item's first line on the same line.
                        let mut inner = String::new();
                        emit(item, indent + 2, &mut inner);
                        let body = inner.get(indent + 2..).unwrap_or("");
                        s.push_str(&format!("{pad}- {body}"));
                    }
                }
            }
        }
        other => s.push_str(&format!("{pad}{other}\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admin() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{ "name": "kubernetes", "cluster": {
                "certificate-authority-data": "Q0E=", "server": "https://10.0.0.10:6443" } }],
            "users": [{ "name": "kubernetes-admin", "user": {
                "client-certificate-data": "Q0VSVA==", "client-key-data": "S0VZ" } }],
            "contexts": [{ "name": "kubernetes-admin@kubernetes",
                "context": { "cluster": "kubernetes", "user": "kubernetes-admin" } }],
            "current-context": "kubernetes-admin@kubernetes",
        })
    }

    #[test]
    fn names_and_server_follow_the_plan() {
        let c = rewrite(&admin(), "lab", "https://lb.example:6443").expect("rewrite");
        assert_eq!(c["current-context"], "lab");
        assert_eq!(c["contexts"][0]["context"]["user"], "lab-admin");
        assert_eq!(c["clusters"][0]["name"], "lab");
        assert_eq!(
            c["clusters"][0]["cluster"]["server"],
            "https://lb.example:6443"
        );
        assert_eq!(c["users"][0]["user"]["client-key-data"], "S0VZ");
    }

    #[test]
    fn missing_parts_are_errors() {
        assert!(rewrite(&json!({}), "lab", "https://x:1").is_err());
        let mut a = admin();
        a["clusters"][0]["cluster"]
            .as_object_mut()
            .map(|m| m.remove("certificate-authority-data"));
        assert!(rewrite(&a, "lab", "https://x:1")
            .unwrap_err()
            .contains("certificate-authority-data"));
    }

    #[test]
    fn yaml_is_block_style_with_quoted_strings() {
        let c = rewrite(&admin(), "lab", "https://x:6443").expect("rewrite");
        let y = to_yaml(&c);
        for line in [
            "apiVersion: \"v1\"\n",
            "\nclusters:\n  - cluster:\n",
            "\n      server: \"https://x:6443\"\n",
            "\ncurrent-context: \"lab\"\n",
            "\npreferences: {}\n",
            "\ncontexts:\n  - context:\n      cluster: \"lab\"\n      user: \"lab-admin\"\n    name: \"lab\"\n",
        ] {
            assert!(y.starts_with(line) || y.contains(line), "{line:?} not in\n{y}");
        }
    }
}
