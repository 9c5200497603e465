//! Image contracts: every container the recipes run on Windows nodes gets what its image needs.
//!
//! `windows_images/contracts.toml` holds, for every image a recipe may run on Windows, what its
//! upstream Dockerfile and start script (at a pinned commit) need from the pod spec: whether
//! the upstream still builds it, the command / args / working directory, the environment
//! variables and the mounts. This test renders the Windows DaemonSets of the flannel and the
//! Calico example plans for every Kubernetes minor kwin accepts and checks each container
//! against its image's contract. An image with no contract is an error: a new image needs its
//! upstream read first.
//!
//! For the host-process base image, which runs a script kwin supplies, the script is the
//! contract: found through the container's `-File` argument, its mount and its ConfigMap, it
//! must parse, every `$env:NAME` it reads must be set by the container (or by the runtime,
//! `provided_env`), and every path it reads under `$env:CONTAINER_SANDBOX_MOUNT_POINT` must be
//! a mount of the container.

mod kube_common;

use kube_common::{expand, plan_text, root};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeSet;

/// Kubernetes minors kwin accepts. The newest is the validation's (the version table owns it);
/// keep this in step with it.
const MINORS: std::ops::RangeInclusive<u32> = 29..=37;

#[derive(Debug, Deserialize)]
struct Table {
    image: Vec<Contract>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Contract {
    pattern: String,
    source: String,
    built: String,
    built_source: String,
    entrypoint: Vec<String>,
    cmd: Vec<String>,
    needs_command: bool,
    command: Option<Vec<String>>,
    args: Option<Vec<String>>,
    working_dir: Option<String>,
    env: Vec<String>,
    mounts: Vec<String>,
    script_from: Option<String>,
    #[serde(default)]
    provided_env: Vec<String>,
}

fn contracts() -> Vec<Contract> {
    let path = root().join("modules/tests/windows_images/contracts.toml");
    let text = std::fs::read_to_string(&path).expect("contracts.toml");
    let t: Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(!t.image.is_empty());
    t.image
}

/// `*` matches any text.
fn glob(pattern: &str, s: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == s;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !s.starts_with(first) || !s.ends_with(last) || s.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &s[first.len()..s.len() - last.len()];
    for p in &parts[1..parts.len() - 1] {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    true
}

/// Every object of every `kube_apply` manifest the plan renders on its first control plane.
pub fn objects(plan: &str, text: &str) -> Vec<Value> {
    let tasks = expand(plan, text);
    let mut out = Vec::new();
    for t in tasks.iter().filter(|t| t.module == "kube_apply") {
        let Some(m) = t.params["manifest"].as_str() else {
            continue;
        };
        for doc in serde_yaml_ng::Deserializer::from_str(m) {
            let v = Value::deserialize(doc).unwrap_or_else(|e| panic!("{}: {e}\n{m}", t.id));
            if !v.is_null() {
                out.push(v);
            }
        }
    }
    out
}

fn is_windows_workload(o: &Value) -> bool {
    let spec = &o["spec"]["template"]["spec"];
    o["kind"] == "DaemonSet"
        && (spec["nodeSelector"]["kubernetes.io/os"] == "windows"
            || spec["securityContext"]["windowsOptions"]["hostProcess"] == true)
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn norm_mount(p: &str) -> String {
    p.replace('\\', "/")
        .trim_end_matches('/')
        .to_ascii_lowercase()
}

/// Environment variables `script` reads (not the ones it sets itself).
fn env_reads(script: &str) -> BTreeSet<String> {
    let re = regex::Regex::new(r"\$env:([A-Za-z_][A-Za-z0-9_]*)(\s*=[^=])?").expect("regex");
    let mut reads = BTreeSet::new();
    let mut sets = BTreeSet::new();
    for c in re.captures_iter(script) {
        let name = c[1].to_string();
        if c.get(2).is_some() {
            sets.insert(name);
        } else {
            reads.insert(name);
        }
    }
    reads.retain(|n| !sets.contains(n));
    reads
}

/// Paths `script` reads under the sandbox mount point: `Join-Path $env:CONTAINER_SANDBOX_MOUNT_POINT '<path>'`.
fn sandbox_paths(script: &str) -> Vec<String> {
    let re = regex::Regex::new(r"Join-Path \$env:CONTAINER_SANDBOX_MOUNT_POINT '([^']+)'")
        .expect("regex");
    re.captures_iter(script).map(|c| c[1].to_string()).collect()
}

/// The service account token kubelet mounts into every pod that has a service account.
const SERVICE_ACCOUNT_MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Problems of one container of `ds` against `contracts`; `all` are the plan's objects.
fn check_container(
    what: &str,
    minor: u32,
    ds: &Value,
    c: &Value,
    all: &[Value],
    contracts: &[Contract],
) -> Vec<String> {
    let mut p = Vec::new();
    let image = c["image"].as_str().unwrap_or("");
    let Some(k) = contracts.iter().find(|k| glob(&k.pattern, image)) else {
        return vec![format!(
            "{what}: image `{image}` has no contract in windows_images/contracts.toml (read its upstream Dockerfile and start script first)"
        )];
    };
    match k.built.as_str() {
        "yes" => {}
        "no" => p.push(format!(
            "{what}: `{image}` is no longer built upstream ({})",
            k.built_source
        )),
        other => {
            let from: u32 = other
                .strip_prefix("from 1.")
                .and_then(|m| m.parse().ok())
                .unwrap_or_else(|| panic!("built = {other:?}"));
            if minor < from {
                p.push(format!(
                    "{what}: `{image}` is built automatically only from Kubernetes 1.{from} ({})",
                    k.built_source
                ));
            }
        }
    }
    let command = strings(&c["command"]);
    let args = strings(&c["args"]);
    if k.needs_command && command.is_empty() {
        p.push(format!(
            "{what}: `{image}` has no ENTRYPOINT (CMD {:?}): the container must set `command`",
            k.cmd
        ));
    }
    if !k.entrypoint.is_empty() && !command.is_empty() && command != k.entrypoint {
        p.push(format!(
            "{what}: `command` {command:?} replaces the image's ENTRYPOINT {:?}",
            k.entrypoint
        ));
    }
    if let Some(want) = &k.args {
        if &args != want {
            p.push(format!("{what}: args {args:?}, the image needs {want:?}"));
        }
    }
    let wd = c["workingDir"].as_str().unwrap_or("");
    if let Some(want) = &k.working_dir {
        if wd != want {
            p.push(format!(
                "{what}: workingDir `{wd}`, the image's start script needs `{want}`"
            ));
        }
    }
    let env: BTreeSet<String> = c["env"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| e["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    for e in &k.env {
        if !env.contains(e) {
            p.push(format!(
                "{what}: env {e} is not set; the image's start script reads it"
            ));
        }
    }
    let mounts: Vec<String> = c["volumeMounts"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|m| m["mountPath"].as_str().map(norm_mount))
                .collect()
        })
        .unwrap_or_default();
    for m in &k.mounts {
        if !mounts.contains(&norm_mount(m)) {
            p.push(format!(
                "{what}: nothing is mounted at {m}; the image's start script reads it"
            ));
        }
    }
    if k.script_from.as_deref() == Some("configmap") {
        p.extend(check_script(what, ds, c, &env, &mounts, all, k));
    }
    p
}

/// The script a base-image container runs, checked as its own contract.
fn check_script(
    what: &str,
    ds: &Value,
    c: &Value,
    env: &BTreeSet<String>,
    mounts: &[String],
    all: &[Value],
    k: &Contract,
) -> Vec<String> {
    let mut p = Vec::new();
    let args = strings(&c["args"]);
    let Some(file) = args
        .iter()
        .position(|a| a.eq_ignore_ascii_case("-File"))
        .and_then(|i| args.get(i + 1))
    else {
        return vec![format!(
            "{what}: the base image runs no script (`-File <script>` missing in args {args:?})"
        )];
    };
    let Some(rel) = file.strip_prefix("$env:CONTAINER_SANDBOX_MOUNT_POINT") else {
        return vec![format!(
            "{what}: the script `{file}` is not under $env:CONTAINER_SANDBOX_MOUNT_POINT"
        )];
    };
    let rel = rel.replace('\\', "/");
    let (dir, key) = rel.rsplit_once('/').unwrap_or(("", &rel));
    let dir = norm_mount(dir);
    let Some(vm) = c["volumeMounts"].as_array().and_then(|a| {
        a.iter()
            .find(|m| m["mountPath"].as_str().map(norm_mount) == Some(dir.clone()))
    }) else {
        return vec![format!(
            "{what}: the script's directory {dir} is not a mount"
        )];
    };
    let vol_name = vm["name"].as_str().unwrap_or("");
    let volumes = ds["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let Some(cm_name) = volumes
        .iter()
        .find(|v| v["name"] == vol_name)
        .and_then(|v| v["configMap"]["name"].as_str())
    else {
        return vec![format!("{what}: volume {vol_name} is not a ConfigMap")];
    };
    let ns = &ds["metadata"]["namespace"];
    let Some(script) = all
        .iter()
        .find(|o| {
            o["kind"] == "ConfigMap"
                && o["metadata"]["name"] == cm_name
                && &o["metadata"]["namespace"] == ns
        })
        .and_then(|cm| cm["data"][key].as_str())
    else {
        return vec![format!(
            "{what}: ConfigMap {ns}/{cm_name} with key {key} is not in the recipes' manifests"
        )];
    };
    // kubelet writes a ConfigMap key as UTF-8 without a BOM, which Windows PowerShell 5.1
    // reads in the ANSI code page (PowerShell-Docs reference/5.1/Microsoft.PowerShell.Core/
    // About/about_Character_Encoding.md at 27138b21: "may break in Windows PowerShell if the
    // file contains non-Ascii characters").
    if let Some(c) = script.chars().find(|c| !c.is_ascii()) {
        p.push(format!("{what}: {key} holds `{c}`, not ASCII: Windows PowerShell reads it in the ANSI code page"));
    }
    let errors = kwin_testkit::scripts::ps_syntax_errors(script);
    if !errors.is_empty() {
        p.push(format!("{what}: {key} does not parse: {errors:?}"));
    }
    for name in env_reads(script) {
        if !env.contains(&name) && !k.provided_env.iter().any(|e| e.eq_ignore_ascii_case(&name)) {
            p.push(format!(
                "{what}: {key} reads $env:{name}, which the container does not set"
            ));
        }
    }
    for path in sandbox_paths(script) {
        let path = norm_mount(&format!("/{path}"));
        let under = |m: &str| path == m || path.starts_with(&format!("{m}/"));
        if !mounts.iter().any(|m| under(m)) && !under(&norm_mount(SERVICE_ACCOUNT_MOUNT)) {
            p.push(format!(
                "{what}: {key} reads {path} under the sandbox, which is not mounted"
            ));
        }
    }
    if ds["spec"]["template"]["spec"]["automountServiceAccountToken"] == false
        && script.contains("kubernetes.io\\serviceaccount")
    {
        p.push(format!(
            "{what}: {key} reads the service account token, which is not mounted"
        ));
    }
    p
}

/// Problems of every Windows container the plan `rel` renders at Kubernetes 1.`minor`.
fn problems_of(rel: &str, minor: u32, contracts: &[Contract]) -> (usize, Vec<String>) {
    let text = plan_text(
        rel,
        &[(
            "kubernetes_version = \"1.37.2\"",
            &format!("kubernetes_version = \"1.{minor}.2\""),
        )],
    );
    let all = objects(rel, &text);
    let mut checked = 0;
    let mut problems = Vec::new();
    for ds in all.iter().filter(|o| is_windows_workload(o)) {
        let spec = &ds["spec"]["template"]["spec"];
        for c in spec["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(spec["initContainers"].as_array().into_iter().flatten())
        {
            checked += 1;
            let what = format!(
                "{rel} 1.{minor} {}/{} container {}",
                ds["metadata"]["namespace"].as_str().unwrap_or(""),
                ds["metadata"]["name"].as_str().unwrap_or(""),
                c["name"].as_str().unwrap_or("")
            );
            problems.extend(check_container(&what, minor, ds, c, &all, contracts));
        }
    }
    (checked, problems)
}

#[test]
fn every_windows_container_meets_its_image_contract() {
    let contracts = contracts();
    let mut problems = Vec::new();
    for rel in ["examples/flannel.toml", "examples/calico.toml"] {
        for minor in MINORS {
            let (checked, p) = problems_of(rel, minor, &contracts);
            assert!(
                checked >= 1,
                "{rel} 1.{minor}: no Windows container rendered"
            );
            problems.extend(p);
        }
    }
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The checks can fail: each kind of problem is found in a manifest that has it.
#[test]
fn the_contract_check_finds_each_kind_of_problem() {
    let contracts = contracts();
    let ds = |container: Value, volumes: Value| {
        serde_json::json!({
            "kind": "DaemonSet",
            "metadata": {"name": "x", "namespace": "kube-system"},
            "spec": {"template": {"spec": {
                "nodeSelector": {"kubernetes.io/os": "windows"},
                "containers": [container],
                "volumes": volumes,
            }}}
        })
    };
    let check = |d: &Value, all: &[Value]| {
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        check_container("t", 31, d, c, all, &contracts).join("\n")
    };
    // The 2021-era images.
    let d = ds(
        serde_json::json!({"name": "k", "image": "sigwindowstools/flannel:v0.26.7-hostprocess"}),
        serde_json::json!([]),
    );
    let p = check(&d, &[]);
    assert!(p.contains("no longer built upstream"), "{p}");
    assert!(p.contains("env CNI_BIN_PATH is not set"), "{p}");
    assert!(
        p.contains("nothing is mounted at /mounts/kube-flannel/"),
        "{p}"
    );
    // Calico's kube-proxy without args, workingDir and NODENAME.
    let d = ds(
        serde_json::json!({"name": "k", "image": "sigwindowstools/kube-proxy:v1.31.2-calico-hostprocess",
            "env": [{"name": "NODE_NAME"}]}),
        serde_json::json!([]),
    );
    let p = check(&d, &[]);
    assert!(
        p.contains("built automatically only from Kubernetes 1.33"),
        "{p}"
    );
    assert!(p.contains("args [], the image needs"), "{p}");
    assert!(p.contains("workingDir ``"), "{p}");
    assert!(p.contains("env NODENAME is not set"), "{p}");
    // An unknown image.
    let d = ds(
        serde_json::json!({"name": "k", "image": "example.com/other:1"}),
        serde_json::json!([]),
    );
    assert!(check(&d, &[]).contains("has no contract"));
    // The base image: no command; then a script reading what the container does not give.
    let base = "mcr.microsoft.com/oss/kubernetes/windows-host-process-containers-base-image:v1.0.0";
    let d = ds(
        serde_json::json!({"name": "k", "image": base}),
        serde_json::json!([]),
    );
    assert!(check(&d, &[]).contains("must set `command`"));
    let d = ds(
        serde_json::json!({"name": "k", "image": base, "command": ["powershell.exe"],
            "args": ["-File", "$env:CONTAINER_SANDBOX_MOUNT_POINT\\kwin\\s.ps1"],
            "env": [{"name": "A"}],
            "volumeMounts": [{"name": "kwin", "mountPath": "/kwin"}]}),
        serde_json::json!([{"name": "kwin", "configMap": {"name": "s"}}]),
    );
    let cm = serde_json::json!({"kind": "ConfigMap", "metadata": {"name": "s", "namespace": "kube-system"},
        "data": {"s.ps1": "$x = $env:A + $env:B\n$env:C = 'set'\nWrite-Output $env:C\n$y = Join-Path $env:CONTAINER_SANDBOX_MOUNT_POINT 'other\\f'\nif ($x -eq {\n"}});
    let p = check(&d, &[cm]);
    assert!(p.contains("reads $env:B"), "{p}");
    assert!(!p.contains("$env:A,") && !p.contains("$env:C,"), "{p}");
    assert!(p.contains("reads /other/f under the sandbox"), "{p}");
    assert!(p.contains("does not parse"), "{p}");
    let cm = serde_json::json!({"kind": "ConfigMap", "metadata": {"name": "s", "namespace": "kube-system"},
        "data": {"s.ps1": "Write-Output '\u{2014} $env:A'\n"}});
    assert!(check(&d, &[cm]).contains("not ASCII"));
    assert!(check(&d, &[]).contains("is not in the recipes' manifests"));
}
