//! The test workloads of `kwin verify`: one namespace with a Linux web server, a Linux
//! client and (with Windows workers) a Windows web server, each behind a NodePort Service.

/// The namespace the workloads go to unless told otherwise.
pub const NAMESPACE: &str = "kwin-verify";
/// Linux web server image.
pub const LINUX_WEB_IMAGE: &str = "docker.io/library/nginx:1.27-alpine";
/// Linux client image (curl, nslookup).
pub const CLIENT_IMAGE: &str = "docker.io/nicolaka/netshoot:v0.13";
/// The default URL of the egress check.
pub const EXTERNAL_URL: &str = "https://kubernetes.io/";

/// The Windows web server pod.
pub const WIN_WEB: &str = "win-web";
/// The Linux web server pod.
pub const LINUX_WEB: &str = "linux-web";
/// The Linux client pod.
pub const CLIENT: &str = "client";

/// The Windows Server Core image matching a node's `node.kubernetes.io/windows-build`
/// (process isolation needs the container's build to match the host's).
pub fn windows_image(build: Option<&str>) -> String {
    let tag = match build.map(|b| b.trim()) {
        Some(b) if b.starts_with("10.0.17763") => "ltsc2019",
        Some(b) if b.starts_with("10.0.26100") => "ltsc2025",
        _ => "ltsc2022",
    };
    format!("mcr.microsoft.com/windows/servercore:{tag}")
}

/// The Windows web server: a PowerShell `HttpListener` answering every request with a small
/// page, as in the Kubernetes guide to scheduling Windows containers.
pub const WINDOWS_WEB_SERVER: &str = "$listener = New-Object System.Net.HttpListener; \
$listener.Prefixes.Add('http://*:80/'); $listener.Start(); \
Write-Host 'Listening at http://*:80/'; \
while ($listener.IsListening) { \
$context = $listener.GetContext(); \
$body = [System.Text.Encoding]::UTF8.GetBytes('<html><body><H1>Windows Container Web Server</H1></body></html>'); \
$context.Response.ContentLength64 = $body.Length; \
$context.Response.OutputStream.Write($body, 0, $body.Length); \
$context.Response.Close() }";

/// What the workloads depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workloads {
    pub namespace: String,
    /// Deploy the Windows web server (the plan has Windows workers).
    pub windows: bool,
    /// `node.kubernetes.io/windows-build` of a Windows node, to pin the pod and pick its image.
    pub windows_build: Option<String>,
    /// Let the Linux pods run on control planes (the plan has no Linux worker).
    pub linux_on_control_plane: bool,
}

fn yaml_str(s: &str) -> String {
    // JSON strings are valid YAML flow scalars.
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

impl Workloads {
    /// The pods this verification waits for.
    pub fn pods(&self) -> Vec<&'static str> {
        let mut p = vec![LINUX_WEB, CLIENT];
        if self.windows {
            p.insert(0, WIN_WEB);
        }
        p
    }

    /// The manifest: namespace, pods, services.
    pub fn manifest(&self) -> String {
        let ns = yaml_str(&self.namespace);
        let cp_toleration = if self.linux_on_control_plane {
            "\n  tolerations:\n    - key: node-role.kubernetes.io/control-plane\n      operator: Exists\n      effect: NoSchedule"
        } else {
            ""
        };
        let mut m = format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  labels:\n    app.kubernetes.io/managed-by: kwin\n"
        );
        let web = |name: &str| {
            format!(
                "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels:\n    app: {name}\nspec:\n  type: NodePort\n  externalTrafficPolicy: Local\n  selector:\n    app: {name}\n  ports:\n    - port: 80\n      targetPort: 80\n      protocol: TCP\n"
            )
        };
        m.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {LINUX_WEB}\n  namespace: {ns}\n  labels:\n    app: {LINUX_WEB}\nspec:\n  nodeSelector:\n    kubernetes.io/os: linux{cp_toleration}\n  containers:\n    - name: nginx\n      image: {LINUX_WEB_IMAGE}\n      ports:\n        - containerPort: 80\n      readinessProbe:\n        httpGet:\n          path: /\n          port: 80\n        periodSeconds: 2\n"
        ));
        m.push_str(&web(LINUX_WEB));
        m.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {CLIENT}\n  namespace: {ns}\n  labels:\n    app: {CLIENT}\nspec:\n  nodeSelector:\n    kubernetes.io/os: linux{cp_toleration}\n  terminationGracePeriodSeconds: 1\n  containers:\n    - name: netshoot\n      image: {CLIENT_IMAGE}\n      command: [\"sleep\", \"infinity\"]\n"
        ));
        if self.windows {
            let build = self
                .windows_build
                .as_deref()
                .map(|b| format!("\n    node.kubernetes.io/windows-build: {}", yaml_str(b)))
                .unwrap_or_default();
            m.push_str(&format!(
                "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {WIN_WEB}\n  namespace: {ns}\n  labels:\n    app: {WIN_WEB}\nspec:\n  nodeSelector:\n    kubernetes.io/os: windows{build}\n  tolerations:\n    - key: os\n      operator: Equal\n      value: windows\n      effect: NoSchedule\n  containers:\n    - name: windowswebserver\n      image: {image}\n      command:\n        - powershell.exe\n        - -command\n        - {server}\n      ports:\n        - containerPort: 80\n      readinessProbe:\n        httpGet:\n          path: /\n          port: 80\n        periodSeconds: 5\n",
                image = windows_image(self.windows_build.as_deref()),
                server = yaml_str(WINDOWS_WEB_SERVER),
            ));
            m.push_str(&web(WIN_WEB));
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // ------------------------------------------------------------------------ workloads

    #[test]
    fn manifest_pins_windows_and_exposes_node_ports() {
        let w = Workloads {
            namespace: NAMESPACE.into(),
            windows: true,
            windows_build: Some("10.0.17763".into()),
            linux_on_control_plane: true,
        };
        // The structure is checked against the real API server (tests/verify_reset.rs).
        let m = w.manifest();
        assert_eq!(m.matches("\n---\n").count(), 5, "{m}");
        for want in [
            "kubernetes.io/os: windows\n    node.kubernetes.io/windows-build: \"10.0.17763\"",
            "    - key: os\n      operator: Equal\n      value: windows\n      effect: NoSchedule",
            "image: mcr.microsoft.com/windows/servercore:ltsc2019",
            "key: node-role.kubernetes.io/control-plane",
            "type: NodePort\n  externalTrafficPolicy: Local",
        ] {
            assert!(m.contains(want), "{want} missing:\n{m}");
        }
        assert_eq!(m.matches("type: NodePort").count(), 2);
        // The web server's PowerShell is one JSON-quoted YAML scalar, byte for byte.
        let quoted = serde_json::to_string(WINDOWS_WEB_SERVER).expect("json");
        assert!(m.contains(&format!("- {quoted}")));
        assert_eq!(w.pods(), vec![WIN_WEB, LINUX_WEB, CLIENT]);
        let linux_only = Workloads {
            windows: false,
            ..w
        };
        assert!(!linux_only.manifest().contains(WIN_WEB));
        assert_eq!(
            windows_image(Some("10.0.20348")),
            "mcr.microsoft.com/windows/servercore:ltsc2022"
        );
    }
}
