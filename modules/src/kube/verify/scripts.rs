//! The scripts `kwin verify` runs on the first control plane: `kubectl` with the admin
//! kubeconfig (get, apply, delete, exec into the test pods: curl, nslookup) and curl on the
//! host itself. Every word from outside is quoted.

use crate::kube::script::{kubectl, write_b64, TEMP_DIR};
use kwin_engine::quote::sh_quote;

/// `kubectl get <what> -o json`, exit status and stderr kept. `what` is e.g. `nodes` or
/// `pods -n <ns>`; every word is quoted here.
pub fn get_json(kubeconfig: &str, kind: &str, namespace: Option<&str>) -> String {
    let ns = namespace
        .map(|n| format!(" -n {}", sh_quote(n)))
        .unwrap_or_default();
    format!(
        "{} --request-timeout=20s get {}{ns} -o json\n",
        kubectl(kubeconfig),
        sh_quote(kind)
    )
}

/// The namespace's state: prints `absent`, `terminating` or `active`; non-zero on an API error.
pub fn namespace_state(kubeconfig: &str, namespace: &str) -> String {
    format!(
        "out=$({k} --request-timeout=20s get namespace {ns} --ignore-not-found -o 'jsonpath={{.metadata.name}} {{.metadata.deletionTimestamp}}') || exit 1\n\
         set -- $out\n\
         if [ $# -eq 0 ]; then echo absent; elif [ $# -gt 1 ]; then echo terminating; else echo active; fi\n",
        k = kubectl(kubeconfig),
        ns = sh_quote(namespace)
    )
}

/// Server-side apply of `manifest` (written from a here-document: scripts never read stdin).
pub fn apply(kubeconfig: &str, manifest: &str) -> String {
    format!(
        "{TEMP_DIR}{}{} --request-timeout=60s apply --server-side --force-conflicts --field-manager=kwin-verify -f \"$d/workloads.yaml\"\n",
        write_b64("\"$d/workloads.yaml\"", manifest.as_bytes()),
        kubectl(kubeconfig)
    )
}

/// Delete the namespace without waiting for its finalizers (pods take their grace period).
pub fn delete_namespace(kubeconfig: &str, namespace: &str) -> String {
    format!(
        "{} --request-timeout=60s delete namespace {} --ignore-not-found --wait=false\n",
        kubectl(kubeconfig),
        sh_quote(namespace)
    )
}

/// `curl` a URL from inside a test pod: prints `HTTP_CODE REMOTE_IP:PORT`. The agnhost image
/// has curl on both systems; a Windows pod's curl.exe writes the body to `NUL`.
pub fn pod_curl(kubeconfig: &str, namespace: &str, pod: &str, url: &str, windows: bool) -> String {
    format!(
        "{} -n {} exec {} -- curl -sS -o {} -w '%{{http_code}} %{{remote_ip}}:%{{remote_port}}\\n' --max-time 10 {}\n",
        kubectl(kubeconfig),
        sh_quote(namespace),
        sh_quote(pod),
        if windows { "NUL" } else { "/dev/null" },
        sh_quote(url)
    )
}

/// `nslookup NAME` inside a Linux pod.
pub fn pod_nslookup(kubeconfig: &str, namespace: &str, pod: &str, name: &str) -> String {
    format!(
        "{} -n {} exec {} -- nslookup {}\n",
        kubectl(kubeconfig),
        sh_quote(namespace),
        sh_quote(pod),
        sh_quote(name)
    )
}

/// `curl` a URL from the control plane host itself (outside the cluster's pod network).
pub fn host_curl(url: &str) -> String {
    format!(
        "command -v curl >/dev/null 2>&1 || {{ echo 'curl is not installed on this host' >&2; exit 127; }}\n\
         curl -sS -o /dev/null -w '%{{http_code}} %{{remote_ip}}:%{{remote_port}}\\n' --max-time 10 {}\n",
        sh_quote(url)
    )
}
