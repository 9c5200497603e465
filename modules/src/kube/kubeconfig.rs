//! The admin kubeconfig as `kwin kubeconfig` writes it: read on the first control plane
//! ([`read_script`]: `kubectl config view --raw --minify --flatten -o json` of kubeadm's
//! `admin.conf`, so no YAML is parsed), renamed after the cluster ([`rewrite`]: cluster,
//! user `<name>-admin` and context named after `cluster.name`, the server
//! `https://<control_plane_endpoint>`), and written as YAML ([`to_yaml`]).
//!
//! The kubeconfig holds the admin client key: the read's stdout is never logged, and only the
//! path, context and server are reported.

use super::ADMIN_CONF;
use kwin_engine::pipeline::remote::{Remote, RemoteError, RunKind};
use serde_json::{json, Map, Value};
use std::time::Duration;

/// Time allowed for reading it.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// Why there is no kubeconfig.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchError {
    Interrupted,
    /// What went wrong, naming the host (scrubbed).
    Failed(String),
}

/// The admin kubeconfig read through `r` (the first control plane), as YAML named after
/// cluster `name` with `server`.
pub async fn fetch(r: &dyn Remote, name: &str, server: &str) -> Result<String, FetchError> {
    let host = r.host().to_string();
    let read = match r.connect().await {
        Err(_) if r.interrupted() => Err(RemoteError::Interrupted),
        Err(e) => Err(RemoteError::Failed(e)),
        Ok(()) => {
            r.run("kubeconfig", &read_script(), TIMEOUT, RunKind::Secret)
                .await
        }
    };
    r.close().await;
    let output = match read {
        Err(RemoteError::Interrupted) => return Err(FetchError::Interrupted),
        Err(RemoteError::Failed(e)) => return Err(FetchError::Failed(format!("{host}: {e}"))),
        Ok(o) => o,
    };
    if output.exit != 0 {
        let err = r.scrub(String::from_utf8_lossy(&output.stderr).trim());
        return Err(FetchError::Failed(format!(
            "{host}: reading {ADMIN_CONF} failed (exit code {}): {err}",
            output.exit
        )));
    }
    let raw: Value = serde_json::from_slice(&output.stdout).map_err(|e| {
        FetchError::Failed(format!(
            "{host}: kubectl config view printed no JSON kubeconfig ({e})"
        ))
    })?;
    let config = rewrite(&raw, name, server)
        .map_err(|e| FetchError::Failed(format!("{ADMIN_CONF} on {host}: {e}")))?;
    Ok(to_yaml(&config))
}

/// The script that prints the admin kubeconfig as JSON (one cluster, one user).
pub fn read_script() -> String {
    format!(
        "[ -r {ADMIN_CONF} ] || {{ echo '{ADMIN_CONF} does not exist: is the cluster initialised (kwin apply)?' >&2; exit 1; }}\n\
         command -v kubectl >/dev/null 2>&1 || {{ echo 'kubectl is not installed' >&2; exit 1; }}\n\
         kubectl config view --kubeconfig {ADMIN_CONF} --raw --minify --flatten -o json </dev/null\n"
    )
}

/// The admin kubeconfig `raw` (one cluster, one user, as `--minify --flatten` gives) with
/// cluster `name`, user `<name>-admin`, context `name` and `server`.
pub fn rewrite(raw: &Value, name: &str, server: &str) -> Result<Value, String> {
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
pub fn to_yaml(v: &Value) -> String {
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
            .expect_err("no CA")
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
