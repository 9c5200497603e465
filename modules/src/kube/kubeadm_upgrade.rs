//! `kubeadm_upgrade`: `kubeadm upgrade apply` on the first control plane, `kubeadm upgrade
//! node` on the other control planes and on Linux and Windows workers — the kubeadm part of a
//! Kubernetes upgrade. On Windows (PowerShell) only `mode = "node"`: Windows nodes are never
//! control planes.
//!
//! Parameters: the fields of [`KubeadmUpgradeParams`], shown by `kwin doc kubeadm_upgrade`
//! and in docs/modules.md.
//!
//! Sources: "Upgrading kubeadm clusters" (kubernetes.io/docs/tasks/administer-cluster/kubeadm/
//! kubeadm-upgrade): on the first control plane `kubeadm upgrade plan`, then `kubeadm upgrade
//! apply vX.Y.Z` with the kubeadm of that version installed; on the other control planes and
//! on workers `kubeadm upgrade node`. kubeadm tells an upgraded control plane by the image tags
//! of its static pods (`cmd/kubeadm/app/cmd/phases/upgrade/addons.go` @ `88b93957`), and
//! records the cluster's version in kubeadm-config when `upgrade apply` finishes.
//!
//! Facts (one script): the installed `kubeadm version -o short`; the image tags of the static
//! pod manifests of kube-apiserver, kube-controller-manager and kube-scheduler; kubeadm-config's
//! `kubernetesVersion` (with the admin kubeconfig, where there is one); the Node's kubelet
//! version (with the node's own kubelet.conf); on a worker, the version `kubeadm upgrade node`
//! last finished for (`/var/lib/kubelet/kwin-upgraded-node`, written by this step).
//!
//! No-op when: not initialised or not joined yet (kubeadm init/join build it at the version);
//! `apply`: every manifest and kubeadm-config at `version`; `node` on a control plane: every
//! manifest at `version`; `node` on a worker: the Node's kubelet at `version` (the kubelet is
//! upgraded after `kubeadm upgrade node`, so a kubelet at the version means it ran), or the
//! step's own record says `kubeadm upgrade node` finished for `version` there. The change
//! first checks, when it runs, that the installed kubeadm is `version` (its package step comes
//! first) and, for `node` on a control plane, that kubeadm-config is at `version` (`upgrade
//! apply` on the first control plane comes first); either failing changes nothing. `kwin plan`
//! runs neither step, so it plans the change and says what it waits for.
//!
//! Windows (PowerShell form): "Upgrading Windows nodes" (kubernetes.io/docs/tasks/
//! administer-cluster/kubeadm/upgrading-windows-nodes; kubernetes/website
//! `content/en/docs/tasks/administer-cluster/kubeadm/upgrading-windows-nodes.md` @ `0189ae0f`):
//! kubeadm.exe of the new version at `C:\k\kubeadm.exe` (the path the page downloads it to,
//! and windows-worker's `kubeadm-download`), drain, `kubeadm upgrade node` on the node ("to
//! sync new kubelet configuration"), then stop the kubelet service, replace kubelet.exe, start
//! it, uncordon. What kwin took from it: the order, the path and the command; the kubelet part
//! is the `service` module's (recipe upgrade-worker). Facts (one script): `C:\k\kubeadm.exe
//! version -o short`; the installed `C:\k\kubelet.exe --version` (a Windows node has no
//! kubectl to read its Node with: the kubelet binary is replaced only after this step in the
//! upgrade sequence, so a kubelet.exe at the version means it ran or the node joined at it);
//! whether the kubelet's kubeconfig `C:\etc\kubernetes\kubelet.conf` exists; the step's
//! record [`UPGRADED_NODE_WINDOWS`]. The change checks the installed kubeadm.exe version when
//! it runs, runs `kubeadm.exe upgrade node` (exit code checked), and writes the record
//! (created exclusively under an unguessable name, renamed into place).
//!
//! ```toml
//! [[tasks]]
//! name = "kubeadm-upgrade"
//! module = "kubeadm_upgrade"
//! on = { hosts = ["cp1"] }
//! params = { mode = "apply", version = "1.32.5", node = "cp1" }
//! ```

use super::drain::kube_version;
use super::facts::{header, script_key};
use super::node::{node_param, v_prefixed};
use super::ADMIN_CONF;
use crate::paths::{posix_abs_line, windows_abs, windows_resource};
use crate::table::{Described, FactSample};
use kwin_engine::fact::{Fact, FactError, FactOutput, FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::quote::{ps_quote, sh_quote};
use kwin_engine::transport::Shell;
use serde::Deserialize;

/// The kubelet's kubeconfig kubeadm writes on every node.
pub const KUBELET_CONF: &str = "/etc/kubernetes/kubelet.conf";

/// The same on a Windows node (kubeadm's `C:\etc\kubernetes`, as windows-worker's join
/// guard).
pub const KUBELET_CONF_WINDOWS: &str = r"C:\etc\kubernetes\kubelet.conf";

/// Where windows-worker's `kubeadm-download` puts kubeadm.exe, and where "Upgrading Windows
/// nodes" downloads the new one (`curl.exe -Lo C:\k\kubeadm.exe ...`).
pub const KUBEADM_WINDOWS: &str = r"C:\k\kubeadm.exe";

/// The kubelet binary windows-worker's `kubelet` service runs (and upgrade-worker's twin
/// replaces).
pub const KUBELET_WINDOWS: &str = r"C:\k\kubelet.exe";

/// The control plane's static pods, whose image tags say what it runs.
const COMPONENTS: [&str; 3] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KubeadmUpgradeParams {
    /// `apply` (the first control plane) or `node` (the other control planes, workers).
    mode: String,
    /// The Kubernetes version (`"1.32.5"`).
    version: String,
    /// This host's Node name.
    node: String,
    /// The admin kubeconfig (default `/etc/kubernetes/admin.conf`), read where it exists.
    /// Linux only: a Windows node has none.
    kubeconfig: Option<String>,
    /// The kubelet's kubeconfig (default `/etc/kubernetes/kubelet.conf`, on Windows
    /// `C:\etc\kubernetes\kubelet.conf`): present means joined.
    kubelet_kubeconfig: Option<String>,
    /// Preflight checks to ignore. Linux only. `kubeadm upgrade apply` and `upgrade node` run the
    /// SystemVerification check for the next minor's kubelet, which fails on cgroup v1 from
    /// 1.35 (k8s.io/kubernetes@v1.37.2 cmd/kubeadm/app/preflight/checks.go RunUpgradeChecks,
    /// SystemVerificationCheck isUpgrade): the recipes pass what init and join ignore.
    #[schemars(extend("x-kwin-shell" = "linux"))]
    ignore_preflight_errors: Option<Vec<String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Apply,
    Node,
}

#[derive(Debug, Clone)]
pub struct KubeadmUpgrade {
    shell: Shell,
    mode: Mode,
    /// `v1.32.5`.
    version: String,
    node: String,
    kubeconfig: String,
    kubelet_kubeconfig: String,
    /// ` --ignore-preflight-errors='…'`, or empty.
    ignore: String,
}

/// ` --ignore-preflight-errors=<names>` (shell-quoted) for kubeadm, or empty; each name checked.
fn preflight_flag(names: &[String]) -> Result<String, ParamError> {
    for (i, e) in names.iter().enumerate() {
        if !super::kubeadm_join::is_check_name(e) {
            return Err(ParamError::at(
                format!("ignore_preflight_errors.{i}"),
                format!("`{e}` is not a preflight check name"),
            ));
        }
    }
    Ok(if names.is_empty() {
        String::new()
    } else {
        format!(" --ignore-preflight-errors={}", sh_quote(&names.join(",")))
    })
}

impl Described for KubeadmUpgrade {
    const NAME: &'static str = "kubeadm_upgrade";
    const DOC: &'static str =
        "kubeadm upgrade apply (first control plane) or kubeadm upgrade node, to a version";
    type Params = KubeadmUpgradeParams;

    fn from_params(p: KubeadmUpgradeParams, shell: Shell) -> Result<Self, ParamError> {
        if shell == Shell::PowerShell {
            crate::shared::linux_only(
                "kubeadm_upgrade",
                &[(
                    "ignore_preflight_errors",
                    p.ignore_preflight_errors.is_some(),
                )],
            )?;
        }
        let mode = match p.mode.as_str() {
            "apply" => Mode::Apply,
            "node" => Mode::Node,
            m => {
                return Err(ParamError::at(
                    "mode",
                    format!("`{m}`: `apply` (the first control plane) or `node`"),
                ))
            }
        };
        kube_version("version", &p.version)?;
        node_param(&p.node)?;
        if shell == Shell::PowerShell {
            if mode == Mode::Apply {
                return Err(ParamError::at(
                    "mode",
                    "Windows nodes run `kubeadm upgrade node` only (`mode = \"node\"`): they are never control planes",
                ));
            }
            if p.kubeconfig.is_some() {
                return Err(ParamError::at(
                    "kubeconfig",
                    "a Windows node has no admin kubeconfig: leave `kubeconfig` out",
                ));
            }
            let kubelet_kubeconfig = p
                .kubelet_kubeconfig
                .unwrap_or_else(|| KUBELET_CONF_WINDOWS.to_string());
            windows_abs("kubelet_kubeconfig", &kubelet_kubeconfig)?;
            return Ok(KubeadmUpgrade {
                shell,
                mode,
                version: v_prefixed(&p.version),
                node: p.node,
                kubeconfig: String::new(),
                kubelet_kubeconfig,
                ignore: String::new(),
            });
        }
        let kubeconfig = p.kubeconfig.unwrap_or_else(|| ADMIN_CONF.to_string());
        posix_abs_line("kubeconfig", &kubeconfig)?;
        let kubelet_kubeconfig = p
            .kubelet_kubeconfig
            .unwrap_or_else(|| KUBELET_CONF.to_string());
        posix_abs_line("kubelet_kubeconfig", &kubelet_kubeconfig)?;
        Ok(KubeadmUpgrade {
            shell,
            mode,
            version: v_prefixed(&p.version),
            node: p.node,
            kubeconfig,
            kubelet_kubeconfig,
            ignore: preflight_flag(p.ignore_preflight_errors.as_deref().unwrap_or_default())?,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![
            FactSample::kube(UpgradeFact::new("n1", ADMIN_CONF, KUBELET_CONF)),
            FactSample::kube(UpgradeFact::windows(KUBELET_CONF_WINDOWS)),
        ]
    }
}

/// What a node runs, as kubeadm sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradeFact {
    pub script: String,
    /// The shell `script` is written for.
    pub shell: Shell,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UpgradeState {
    /// `kubeadm version -o short` (`v1.32.5`); `None` when kubeadm is not installed.
    pub kubeadm: Option<String>,
    /// Each static pod manifest's image tag, in [`COMPONENTS`] order; `None`: no manifest.
    pub manifests: Vec<(String, Option<String>)>,
    /// kubeadm-config's `kubernetesVersion`, when the admin kubeconfig could read it.
    pub cluster: Option<String>,
    /// Whether the kubelet's kubeconfig exists (the node joined or was initialised).
    pub joined: bool,
    /// The Node's `kubeletVersion`, when the kubelet's kubeconfig could read it.
    pub node: Option<String>,
    /// The version `kubeadm upgrade node` last finished for on a worker ([`UPGRADED_NODE`]).
    pub upgraded_node: Option<String>,
    /// Windows: the installed `C:\k\kubelet.exe --version` (`v1.31.4`).
    pub kubelet_binary: Option<String>,
}

/// On a worker, the version `kubeadm upgrade node` last finished for: kubeadm leaves no
/// versioned trace there (it rewrites `/var/lib/kubelet/config.yaml` from the cluster's
/// kubelet-config), and the kubelet reports the new version only after its own package and
/// restart, so without this record the step could not tell it already ran (and would not
/// converge). Written by the step, root's only, in the kubelet's state directory.
pub const UPGRADED_NODE: &str = "/var/lib/kubelet/kwin-upgraded-node";

/// [`UPGRADED_NODE`] on a Windows node: in the kubelet's state directory
/// (`C:\var\lib\kubelet`, windows-worker's `kubelet-dir`).
pub const UPGRADED_NODE_WINDOWS: &str = r"C:\var\lib\kubelet\kwin-upgraded-node";

impl UpgradeFact {
    pub fn new(node: &str, kubeconfig: &str, kubelet_kubeconfig: &str) -> UpgradeFact {
        let admin = sh_quote(kubeconfig);
        let kubelet = sh_quote(kubelet_kubeconfig);
        let stamp = sh_quote(UPGRADED_NODE);
        let n = sh_quote(node);
        let mut s = String::from(
            "kv=$(kubeadm version -o short 2>/dev/null) || kv=''\n\
             echo \"kwin: kubeadm ${kv:-none}\"\n",
        );
        for c in COMPONENTS {
            s.push_str(&format!(
                "f=/etc/kubernetes/manifests/{c}.yaml\n\
                 if [ -r \"$f\" ]; then\n\
                 \x20 tag=$(sed -n 's|^[-[:space:]]*image:[[:space:]]*[\"'\\'']\\{{0,1\\}}[^\"'\\'' ]*/{c}:\\(v[0-9][^\"'\\'' @]*\\).*|\\1|p' \"$f\" | head -n 1)\n\
                 \x20 echo \"manifest {c} ${{tag:-unknown}}\"\n\
                 else echo 'manifest {c} absent'; fi\n"
            ));
        }
        s.push_str(&format!(
            "if command -v kubectl >/dev/null 2>&1; then\n\
             \x20 if [ -r {admin} ]; then\n\
             \x20   cv=$(kubectl --kubeconfig {admin} --request-timeout=20s -n kube-system get configmap kubeadm-config -o 'jsonpath={{.data.ClusterConfiguration}}' 2>/dev/null | sed -n 's/^kubernetesVersion:[[:space:]]*//p')\n\
             \x20   echo \"cluster ${{cv:-unknown}}\"\n\
             \x20 fi\n\
             \x20 if [ -r {kubelet} ]; then\n\
             \x20   nv=$(kubectl --kubeconfig {kubelet} --request-timeout=20s get node {n} -o 'jsonpath={{.status.nodeInfo.kubeletVersion}}' 2>/dev/null)\n\
             \x20   echo \"node ${{nv:-unknown}}\"\n\
             \x20 fi\n\
             fi\n\
             if [ -r {stamp} ]; then echo \"upgraded-node $(head -c 64 {stamp} | tr -dc 'v0-9.')\"; fi\n\
             if [ -e {kubelet} ]; then echo joined; fi\n"
        ));
        UpgradeFact {
            script: s,
            shell: Shell::Posix,
        }
    }

    /// The Windows node's facts: kubeadm.exe's and kubelet.exe's versions (native programs
    /// run with `$ErrorActionPreference = 'Continue'`: Windows PowerShell 5.1 turns a native
    /// program's stderr into error records, which 'Stop' would make terminating; their whole
    /// output is collected before the first line is taken, so `$LASTEXITCODE` is the
    /// program's own), the record, and whether `kubelet_kubeconfig` exists. It answers even
    /// when a program fails (the probe takes a non-zero `$LASTEXITCODE` for a failed fact):
    /// what it could not read is `none` / absent.
    pub fn windows(kubelet_kubeconfig: &str) -> UpgradeFact {
        let script = format!(
            "$ErrorActionPreference = 'Continue'\n\
             $kv = 'none'\n\
             if (Test-Path -LiteralPath {kubeadm} -PathType Leaf) {{\n\
             \x20 $o = @(& {kubeadm} version -o short 2>$null)\n\
             \x20 if ($LASTEXITCODE -eq 0 -and $o.Count -gt 0) {{ $kv = ([string]$o[0]).Trim() }}\n\
             }}\n\
             'kwin: kubeadm ' + $kv\n\
             if (Test-Path -LiteralPath {kubelet} -PathType Leaf) {{\n\
             \x20 $o = @(& {kubelet} --version 2>$null)\n\
             \x20 if ($LASTEXITCODE -eq 0 -and $o.Count -gt 0) {{ 'kubelet-binary ' + (([string]$o[0]).Trim() -replace '[^A-Za-z0-9. +-]', '') }}\n\
             }}\n\
             if (Test-Path -LiteralPath {stamp} -PathType Leaf) {{\n\
             \x20 $t = [IO.File]::ReadAllText({stamp})\n\
             \x20 'upgraded-node ' + ($t -replace '[^v0-9.]', '')\n\
             }}\n\
             if (Test-Path -LiteralPath {conf}) {{ 'joined' }}\n\
             $global:LASTEXITCODE = 0\n",
            kubeadm = ps_quote(KUBEADM_WINDOWS),
            kubelet = ps_quote(KUBELET_WINDOWS),
            stamp = ps_quote(UPGRADED_NODE_WINDOWS),
            conf = ps_quote(kubelet_kubeconfig),
        );
        UpgradeFact {
            script,
            shell: Shell::PowerShell,
        }
    }
}

impl Fact for UpgradeFact {
    type Output = UpgradeState;
    fn key(&self) -> String {
        script_key("kube.upgrade", &self.script)
    }
    fn command(&self, shell: Shell) -> String {
        match (shell, self.shell) {
            (Shell::Posix, Shell::Posix) | (Shell::PowerShell, Shell::PowerShell) => {
                self.script.clone()
            }
            (Shell::Posix, Shell::PowerShell) => {
                "echo 'kubeadm_upgrade: a Windows fact asked of a POSIX host' >&2; exit 1".into()
            }
            (Shell::PowerShell, Shell::Posix) => {
                "throw 'kubeadm_upgrade: a POSIX fact asked of a Windows host'".into()
            }
        }
    }
    fn parse(&self, out: &FactOutput) -> Result<UpgradeState, FactError> {
        parse_upgrade(out)
    }
}

fn known(v: &str) -> Option<String> {
    let v = v.trim().trim_matches(|c| c == '"' || c == '\'');
    (!v.is_empty() && v != "unknown" && v != "none").then(|| v_prefixed(v))
}

/// Parse an [`UpgradeFact`] answer.
pub fn parse_upgrade(out: &FactOutput) -> Result<UpgradeState, FactError> {
    let (state, lines) = header(out)?;
    let kubeadm = state
        .strip_prefix("kubeadm ")
        .ok_or_else(|| FactError::Parse(format!("unknown state `{state}`")))?;
    let mut s = UpgradeState {
        kubeadm: known(kubeadm),
        ..UpgradeState::default()
    };
    for line in lines.iter().map(|l| l.trim()).filter(|l| !l.is_empty()) {
        let mut w = line.splitn(3, ' ');
        match (w.next(), w.next(), w.next()) {
            (Some("manifest"), Some(c), Some(tag)) => s.manifests.push((
                c.to_string(),
                (tag != "absent").then(|| known(tag).unwrap_or_else(|| "unknown".into())),
            )),
            (Some("cluster"), Some(v), None) => s.cluster = known(v),
            (Some("node"), Some(v), None) => s.node = known(v),
            (Some("joined"), None, None) => s.joined = true,
            (Some("upgraded-node"), Some(v), None) => s.upgraded_node = known(v),
            (Some("upgraded-node"), None, None) => {}
            // `Kubernetes v1.31.4`: `kubelet --version` prints `Kubernetes <gitVersion>`
            // (kubernetes/kubernetes staging/src/k8s.io/component-base/version/verflag/
            // verflag.go @ 05a338a8, `PrintAndExitIfRequested`): the last word.
            (Some("kubelet-binary"), None, None) => {}
            (Some("kubelet-binary"), Some(_), _) => {
                s.kubelet_binary = line.split_whitespace().last().and_then(known)
            }
            _ => return Err(FactError::Parse(format!("unexpected line {line:?}"))),
        }
    }
    Ok(s)
}

impl KubeadmUpgrade {
    fn fact(&self) -> UpgradeFact {
        match self.shell {
            Shell::Posix => {
                UpgradeFact::new(&self.node, &self.kubeconfig, &self.kubelet_kubeconfig)
            }
            Shell::PowerShell => UpgradeFact::windows(&self.kubelet_kubeconfig),
        }
    }

    /// The Windows worker's plan: `kubeadm.exe upgrade node` unless the record or the
    /// installed kubelet.exe says it ran for `version`.
    fn plan_windows(&self, s: &UpgradeState, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let v = &self.version;
        if !s.joined {
            return Ok(Plan::noop(format!(
                "{} is not joined yet ({} is absent): kubeadm join builds it at {v}",
                self.node, self.kubelet_kubeconfig
            )));
        }
        if s.upgraded_node.as_deref() == Some(v.as_str()) {
            return Ok(Plan::noop(format!(
                "kubeadm upgrade node ran for {v} on {} (its kubelet follows)",
                self.node
            )));
        }
        if s.kubelet_binary.as_deref() == Some(v.as_str()) {
            return Ok(Plan::noop(format!(
                "{} runs kubelet.exe {v} (installed after kubeadm upgrade node, or joined at it)",
                self.node
            )));
        }
        let note = match &s.kubeadm {
            Some(k) if k == v => String::new(),
            other => format!(
                " (once kubeadm.exe {v} is downloaded: {} now)",
                other.as_deref().unwrap_or("none")
            ),
        };
        let msg = ps_quote(&format!(
            " is installed, not {v}: kubeadm.exe of {v} must be downloaded first (windows-worker's kubeadm-download)"
        ));
        let record = crate::shared::file::write_script(
            UPGRADED_NODE_WINDOWS,
            format!("{v}\n").as_bytes(),
            ctx.nonce,
        );
        let script = format!(
            "$ErrorActionPreference = 'Stop'\n\
             $ProgressPreference = 'SilentlyContinue'\n\
             $kubeadm = {kubeadm}\n\
             $kv = ''\n\
             if (Test-Path -LiteralPath $kubeadm -PathType Leaf) {{\n\
             \x20 $ErrorActionPreference = 'Continue'\n\
             \x20 $o = @(& $kubeadm version -o short 2>$null)\n\
             \x20 $ErrorActionPreference = 'Stop'\n\
             \x20 if ($o.Count -gt 0) {{ $kv = ([string]$o[0]).Trim() }}\n\
             }}\n\
             if ($kv -ne {want}) {{ if (-not $kv) {{ $kv = '(none)' }}; throw ('kubeadm.exe ' + $kv + {msg}) }}\n\
             $ErrorActionPreference = 'Continue'\n\
             & $kubeadm upgrade node 2>&1 | ForEach-Object {{ [string]$_ }}\n\
             $rc = $LASTEXITCODE\n\
             $ErrorActionPreference = 'Stop'\n\
             if ($rc -ne 0) {{ throw \"kubeadm upgrade node failed with exit code $rc\" }}\n\
             {record}\n",
            kubeadm = ps_quote(KUBEADM_WINDOWS),
            want = ps_quote(v),
        );
        Ok(self.change(
            format!(
                "{} runs kubelet.exe {}: kubeadm upgrade node{note}",
                self.node,
                s.kubelet_binary.as_deref().unwrap_or("(unknown)")
            ),
            script,
        ))
    }

    fn change(&self, reason: String, script: String) -> Plan {
        Plan::Change(Change {
            action: Action::Run,
            reason,
            diff: None,
            steps: vec![Step::Run(script)],
            touches: Touches::Anything,
        })
    }

    /// The installed kubeadm must be the target's: checked when the step runs (the package
    /// step before it installs that kubeadm; `kwin plan` runs neither, so it plans the change
    /// and says what it waits for). What the plan's reason adds, and the script's first lines.
    fn kubeadm_check(&self, s: &UpgradeState) -> (String, String) {
        let v = &self.version;
        let note = match &s.kubeadm {
            Some(k) if k == v => String::new(),
            other => format!(
                " (once the kubeadm package of {v} is installed: {} now)",
                other.as_deref().unwrap_or("none")
            ),
        };
        let msg = sh_quote(&format!(
            "is installed, not {v}: the kubeadm package of {v} must be installed first"
        ));
        let script = format!(
            "kv=$(kubeadm version -o short 2>/dev/null) || kv=''\n\
             if [ \"$kv\" != {want} ]; then printf 'kubeadm %s %s\\n' \"${{kv:-(none)}}\" {msg} >&2; exit 1; fi\n",
            want = sh_quote(v),
        );
        (note, script)
    }
}

impl Module for KubeadmUpgrade {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&self.fact(), shell)]
    }

    fn reads(&self) -> Vec<String> {
        if self.shell == Shell::PowerShell {
            return vec![
                super::API_RESOURCE.to_string(),
                windows_resource(KUBEADM_WINDOWS),
                windows_resource(KUBELET_WINDOWS),
                windows_resource(UPGRADED_NODE_WINDOWS),
                windows_resource(&self.kubelet_kubeconfig),
            ];
        }
        vec![
            super::API_RESOURCE.to_string(),
            "package:kubeadm".to_string(),
            "/etc/kubernetes/manifests".to_string(),
            self.kubelet_kubeconfig.clone(),
        ]
    }

    fn plan(&self, facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let s = facts.get(&self.fact())?;
        if self.shell == Shell::PowerShell {
            return self.plan_windows(&s, ctx);
        }
        let v = &self.version;
        let stale: Vec<String> = s
            .manifests
            .iter()
            .filter_map(|(c, tag)| match tag {
                Some(t) if t != v => Some(format!("{c} {t}")),
                _ => None,
            })
            .collect();
        let control_plane = s.manifests.iter().any(|(_, t)| t.is_some());
        if !s.joined && !control_plane {
            return Ok(Plan::noop(format!(
                "{} is not initialised or joined yet: kubeadm builds it at {v}",
                self.node
            )));
        }
        let kubeadm = sh_quote(v);
        match (self.mode, control_plane) {
            (Mode::Apply, false) => Err(ModuleError::Precondition(format!(
                "`mode = \"apply\"` runs on the first control plane; {} has no control-plane static pods",
                self.node
            ))),
            (Mode::Apply, true) => {
                let cluster_done = s.cluster.as_deref() == Some(v.as_str());
                if stale.is_empty() && cluster_done {
                    return Ok(Plan::noop(format!("the control plane runs {v}")));
                }
                let (note, check) = self.kubeadm_check(&s);
                let now = if stale.is_empty() {
                    format!("kubeadm-config at {}", s.cluster.as_deref().unwrap_or("unknown"))
                } else {
                    stale.join(", ")
                };
                Ok(self.change(
                    format!("{now}: kubeadm upgrade apply {v}{note}"),
                    format!(
                        "{check}kubeadm upgrade plan {kubeadm} || exit 1\n\
                         kubeadm upgrade apply {kubeadm} --yes{ignore}\n",
                        ignore = self.ignore
                    ),
                ))
            }
            (Mode::Node, true) => {
                if stale.is_empty() {
                    return Ok(Plan::noop(format!("the control plane runs {v}")));
                }
                // `kubeadm upgrade node` takes the cluster's version from kubeadm-config, which
                // `kubeadm upgrade apply` on the first control plane sets: checked when the step
                // runs (in `kwin plan` that apply has not run yet).
                let after = match s.cluster.as_deref().filter(|c| *c != v) {
                    Some(c) => format!(
                        " (after kubeadm upgrade apply {v} on the first control plane: the cluster is at {c} now)"
                    ),
                    None => String::new(),
                };
                let (note, check) = self.kubeadm_check(&s);
                let admin = sh_quote(&self.kubeconfig);
                let msg = sh_quote(&format!(
                    "(kubeadm-config): `kubeadm upgrade apply {v}` on the first control plane comes before `kubeadm upgrade node` here"
                ));
                Ok(self.change(
                    format!("{}: kubeadm upgrade node{after}{note}", stale.join(", ")),
                    format!(
                        "{check}if [ -r {admin} ]; then\n\
                         \x20 cv=$(kubectl --kubeconfig {admin} --request-timeout=20s -n kube-system get configmap kubeadm-config -o 'jsonpath={{.data.ClusterConfiguration}}' 2>/dev/null | sed -n 's/^kubernetesVersion:[[:space:]]*//p')\n\
                         \x20 if [ -n \"$cv\" ] && [ \"$cv\" != {kubeadm} ]; then printf 'the cluster is at %s %s\\n' \"$cv\" {msg} >&2; exit 1; fi\n\
                         fi\n\
                         kubeadm upgrade node{ignore}\n",
                        ignore = self.ignore
                    ),
                ))
            }
            (Mode::Node, false) => {
                if s.node.as_deref() == Some(v.as_str()) {
                    return Ok(Plan::noop(format!("{} runs kubelet {v}", self.node)));
                }
                if s.upgraded_node.as_deref() == Some(v.as_str()) {
                    return Ok(Plan::noop(format!(
                        "kubeadm upgrade node ran for {v} on {} (its kubelet follows)",
                        self.node
                    )));
                }
                let (note, check) = self.kubeadm_check(&s);
                let stamp = sh_quote(UPGRADED_NODE);
                let tmp = sh_quote(&format!(
                    "/var/lib/kubelet/{}",
                    crate::temp_name(ctx.nonce, UPGRADED_NODE)
                ));
                Ok(self.change(
                    format!(
                        "{} runs kubelet {}: kubeadm upgrade node{note}",
                        self.node,
                        s.node.as_deref().unwrap_or("(unknown)")
                    ),
                    // The record goes through a fresh file of an unguessable name, created
                    // exclusively (`set -C`), then renamed over the old one.
                    format!(
                        "{check}kubeadm upgrade node{ignore} || exit 1\n\
                         mkdir -p /var/lib/kubelet || exit 1\n\
                         (umask 077; set -C; printf '%s\\n' {kubeadm} > {tmp}) || exit 1\n\
                         mv -f {tmp} {stamp} || {{ rm -f {tmp}; exit 1; }}\n",
                        ignore = self.ignore
                    ),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fact script over manifests as kubeadm writes them (image lines of
    /// `cmd/kubeadm/app/phases/controlplane/manifests.go`'s pods, with a custom registry and a
    /// quoted form), kubeadm and kubectl as shell functions.
    #[test]
    fn the_fact_script_reads_manifest_tags() {
        let dir = tempfile_dir();
        let m = dir.join("manifests");
        std::fs::create_dir_all(&m).expect("mkdir");
        std::fs::write(
            m.join("kube-apiserver.yaml"),
            "spec:\n  containers:\n  - command:\n    - kube-apiserver\n    image: registry.k8s.io/kube-apiserver:v1.31.4\n    imagePullPolicy: IfNotPresent\n",
        )
        .expect("write");
        std::fs::write(
            m.join("kube-scheduler.yaml"),
            "spec:\n  containers:\n  - image: \"my.registry:5000/k8s/kube-scheduler:v1.32.5\"\n",
        )
        .expect("write");
        let script = UpgradeFact::new(
            "cp1",
            "/nonexistent/admin.conf",
            "/nonexistent/kubelet.conf",
        )
        .script
        .replace("/etc/kubernetes/manifests/", &format!("{}/", m.display()));
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(format!("kubeadm() {{ echo v1.32.5; }}\n{script}"))
            .output()
            .expect("sh");
        let s = parse_upgrade(&FactOutput {
            exit: out.status.code().unwrap_or(-1),
            stdout: out.stdout,
            stderr: out.stderr,
        })
        .expect("parses");
        assert_eq!(s.kubeadm.as_deref(), Some("v1.32.5"));
        let tags: Vec<(&str, Option<&str>)> = s
            .manifests
            .iter()
            .map(|(c, t)| (c.as_str(), t.as_deref()))
            .collect();
        assert_eq!(
            tags,
            [
                ("kube-apiserver", Some("v1.31.4")),
                ("kube-controller-manager", None),
                ("kube-scheduler", Some("v1.32.5")),
            ]
        );
        assert!(!s.joined);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!(
            "kwin-kubeadm-upgrade-{}-{}",
            std::process::id(),
            kwin_engine::fs::new_nonce()
        ));
        std::fs::create_dir_all(&d).expect("temp dir");
        d
    }
}
