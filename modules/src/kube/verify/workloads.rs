//! The test workloads of `kwin verify`: one namespace with a Linux web server, a Linux
//! client and (with Windows workers) a Windows web server, each behind a NodePort Service.

/// The namespace the workloads go to unless told otherwise.
pub const NAMESPACE: &str = "kwin-verify";
/// The image of every test pod: upstream's own conformance image, the one the Kubernetes e2e
/// tests of the newest minor use (kubernetes/kubernetes v1.37.2 test/utils/image/manifest.go,
/// `configs[Agnhost]`: `registry.k8s.io/e2e-test-images/agnhost:2.66.1`). One manifest list for
/// Linux and Windows (test/images/agnhost/BASEIMAGE: linux/amd64 on alpine, windows/amd64 1809,
/// ltsc2022 and ltsc2025), so a Windows pod gets the image of its node's build. `agnhost
/// netexec --http-port=80` serves HTTP on port 80 (`/` answers 200), `agnhost pause` waits;
/// both images carry `curl` and `nslookup` (test/images/agnhost/Dockerfile: alpine's curl and
/// bind-tools; Dockerfile_windows on test/images/busybox: `C:\curl` and `C:\dig` on `PATH`).
pub const AGNHOST_IMAGE: &str = "registry.k8s.io/e2e-test-images/agnhost:2.66.1";

/// The Windows web server pod.
pub const WIN_WEB: &str = "win-web";
/// The Linux web server pod.
pub const LINUX_WEB: &str = "linux-web";
/// The Linux client pod.
pub const CLIENT: &str = "client";

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
            "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {LINUX_WEB}\n  namespace: {ns}\n  labels:\n    app: {LINUX_WEB}\nspec:\n  nodeSelector:\n    kubernetes.io/os: linux{cp_toleration}\n  containers:\n    - name: netexec\n      image: {AGNHOST_IMAGE}\n      args: [\"netexec\", \"--http-port=80\"]\n      ports:\n        - containerPort: 80\n      readinessProbe:\n        httpGet:\n          path: /\n          port: 80\n        periodSeconds: 2\n"
        ));
        m.push_str(&web(LINUX_WEB));
        m.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {CLIENT}\n  namespace: {ns}\n  labels:\n    app: {CLIENT}\nspec:\n  nodeSelector:\n    kubernetes.io/os: linux{cp_toleration}\n  terminationGracePeriodSeconds: 1\n  containers:\n    - name: client\n      image: {AGNHOST_IMAGE}\n      args: [\"pause\"]\n"
        ));
        if self.windows {
            let build = self
                .windows_build
                .as_deref()
                .map(|b| format!("\n    node.kubernetes.io/windows-build: {}", yaml_str(b)))
                .unwrap_or_default();
            m.push_str(&format!(
                "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {WIN_WEB}\n  namespace: {ns}\n  labels:\n    app: {WIN_WEB}\nspec:\n  nodeSelector:\n    kubernetes.io/os: windows{build}\n  tolerations:\n    - key: os\n      operator: Equal\n      value: windows\n      effect: NoSchedule\n  containers:\n    - name: netexec\n      image: {AGNHOST_IMAGE}\n      args: [\"netexec\", \"--http-port=80\"]\n      ports:\n        - containerPort: 80\n      readinessProbe:\n        httpGet:\n          path: /\n          port: 80\n        periodSeconds: 5\n",
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
            "key: node-role.kubernetes.io/control-plane",
            "type: NodePort\n  externalTrafficPolicy: Local",
        ] {
            assert!(m.contains(want), "{want} missing:\n{m}");
        }
        assert_eq!(m.matches("type: NodePort").count(), 2);
        // Every pod runs upstream's conformance image: two web servers, one client.
        assert_eq!(
            m.matches(&format!("image: {AGNHOST_IMAGE}")).count(),
            3,
            "{m}"
        );
        assert_eq!(
            m.matches("args: [\"netexec\", \"--http-port=80\"]").count(),
            2,
            "{m}"
        );
        assert_eq!(m.matches("args: [\"pause\"]").count(), 1, "{m}");
        assert_eq!(w.pods(), vec![WIN_WEB, LINUX_WEB, CLIENT]);
        let linux_only = Workloads {
            windows: false,
            ..w
        };
        assert!(!linux_only.manifest().contains(WIN_WEB));
    }
}
