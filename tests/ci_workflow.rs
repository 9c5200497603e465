//! The CI example run, not only read: examples/ci/github-actions.yml's own steps, in order,
//! as GitHub Actions runs them (`bash --noprofile --norc -eo pipefail`, the workflow's, job's
//! and step's `env`, `$GITHUB_ENV` and `$GITHUB_PATH` carried to later steps, a failed step
//! skipping every later one but those with `if: always()`), with the steps that provision the
//! cloud replaced by named lab steps and every other step run verbatim, with its jq checks.
//! Any drift between the workflow and the binary fails here.
//!
//! | workflow step | replaced by |
//! |---|---|
//! | `uses: actions/checkout`, `azure/login` | nothing: the tree is this checkout, there is no cloud |
//! | `Build kwin` | the kwin under test on `$GITHUB_PATH` |
//! | `Create the VMs` | lab step `create-vms` |
//! | `Read host identities over the cloud's run-command channel` | lab step `read-identities` |
//! | `uses: actions/upload-artifact` | lab step `keep-logs`: the paths it keeps exist |
//! | `Delete the VMs` | lab step `delete-vms` |
//!
//! The lab steps are a [`Lab`], in three tiers:
//!
//! - [`Offline`] (tier 1, no host) gives addresses from the documentation ranges and
//!   identities in the form the cloud gives them: the steps up to `kwin validate` run
//!   verbatim, and every step that reaches a host is reported as needing hosts
//!   ([`REACHES_HOSTS`]).
//! - [`StandIn`] (lab tier, lab 12): two lab hosts with `lab/cluster-stand-in` around them,
//!   what CI has. Every step runs verbatim but what the stand-ins cannot honestly pass, each
//!   named with why ([`StandIn::cannot_pass`]): no pod runs there, so nothing of `kwin
//!   verify`, and its API server is the lab's, not cp1's.
//! - [`RealLab`] (feature `real-lab`, lab 19): two lab hosts running the real Kubernetes,
//!   containerd and flannel the lab builds (`lab/up.sh 2 --nodes`, `lab/cluster/up.sh`):
//!   every step runs verbatim and passes, `kwin verify` with real pods.
//!
//! A lab with hosts is not a cloud: the checkout it gives the workflow holds its own copy of
//! examples/ci/cluster.toml ([`lab_plan`]): the Windows hosts left out (Windows cannot run
//! here, `lab/cluster/README.md`) and the lab's environment set where a cloud VM's plan
//! would not need it (its mirror and registry, cgroup v1 hosts without systemd, ...), each
//! key named in the lab's [`LabPlan`] with the reason; every other line is the example's.
//! The VMs the cloud makes (user `kwin` with the runner's key and sudo, as `az vm create
//! --admin-username kwin --ssh-key-values` does) are the lab's hosts, their identities read
//! from the lab's own files.
//!
//! Besides, every event a jq filter of the workflow selects, and every field it reads of it,
//! is one the binary emits (`kwin schema --events`): a filter on an event kwin does not emit
//! can never pass (the example once waited for `verify_summary`; kwin says `verify_finished`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const WORKFLOW: &str = "examples/ci/github-actions.yml";

/// One step of the workflow's job.
#[derive(Debug, Clone)]
struct Step {
    name: String,
    run: Option<String>,
    uses: Option<String>,
    env: BTreeMap<String, String>,
    always: bool,
}

/// The workflow: its top-level `env`, and its one job's `env` and steps.
struct Workflow {
    env: BTreeMap<String, String>,
    steps: Vec<Step>,
}

fn yaml_to_json(text: &str) -> serde_json::Value {
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 (with PyYAML: apt python3-yaml)");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(text.as_bytes()).expect("write");
    }
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{WORKFLOW} is not valid YAML: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

fn strings(v: &serde_json::Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let s = match v {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (k.clone(), s)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn workflow() -> Workflow {
    let text = std::fs::read_to_string(root().join(WORKFLOW)).expect("workflow");
    let wf = yaml_to_json(&text);
    let jobs = wf["jobs"].as_object().expect("jobs");
    assert_eq!(jobs.len(), 1, "one job");
    let job = jobs.values().next().expect("the job");
    let mut env = strings(&wf["env"]);
    env.extend(strings(&job["env"]));
    let steps = job["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| Step {
            name: s["name"]
                .as_str()
                .or(s["uses"].as_str())
                .unwrap_or("?")
                .to_string(),
            run: s["run"].as_str().map(str::to_string),
            uses: s["uses"].as_str().map(str::to_string),
            env: strings(&s["env"]),
            always: s["if"].as_str().is_some_and(|c| c.contains("always()")),
        })
        .collect();
    Workflow { env, steps }
}

/// What the runner does with a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// Nothing to do here (no cloud, the tree is this checkout).
    Skip,
    /// The lab step of that name instead.
    Lab(&'static str),
    /// The step's `run:` as it is written.
    Verbatim,
}

fn action(s: &Step) -> Action {
    if let Some(uses) = &s.uses {
        return if uses.starts_with("actions/upload-artifact") {
            Action::Lab("keep-logs")
        } else {
            Action::Skip
        };
    }
    match s.name.as_str() {
        "Build kwin" => Action::Lab("build"),
        "Create the VMs" => Action::Lab("create-vms"),
        "Read host identities over the cloud's run-command channel" => {
            Action::Lab("read-identities")
        }
        "Delete the VMs" => Action::Lab("delete-vms"),
        _ => Action::Verbatim,
    }
}

/// The kwin commands that reach hosts: a step running one needs hosts to run on.
const REACHES_HOSTS: [&str; 7] = [
    "kwin apply",
    "kwin plan",
    "kwin verify",
    "kwin reset",
    "kwin kubeconfig",
    "kwin exec",
    "kwin facts",
];

fn reaches_hosts(script: &str) -> bool {
    REACHES_HOSTS.iter().any(|c| script.contains(c))
}

/// What stands in for the cloud: the workflow's provisioning steps, by name.
trait Lab {
    /// Whether it has hosts kwin can build the cluster on (else the steps that reach hosts
    /// are reported, not run).
    fn has_hosts(&self) -> bool;
    /// `create-vms`, `read-identities`, `keep-logs`, `delete-vms`: `Err` fails the step.
    fn step(&self, name: &str, run: &mut Run) -> Result<(), String>;
    /// What of a verbatim step this lab cannot honestly pass, and why (default: nothing).
    fn cannot_pass(&self, _step: &Step) -> Option<Limit> {
        None
    }
}

/// What a lab cannot pass of a step.
#[derive(Debug, Clone)]
enum Limit {
    /// The whole step, for this reason.
    Step(&'static str),
    /// The lines containing each text (the rest of the step runs verbatim), each for its
    /// reason.
    Lines(Vec<(&'static str, &'static str)>),
}

/// Tier 1: no host. Addresses from the documentation ranges, identities in the form the
/// cloud gives them (what `read-identities` writes to `$GITHUB_ENV` on Azure).
struct Offline;

impl Lab for Offline {
    fn has_hosts(&self) -> bool {
        false
    }
    fn step(&self, name: &str, run: &mut Run) -> Result<(), String> {
        match name {
            // The runner's key the workflow makes with the VMs (the plan's default key).
            "create-vms" => {
                let ssh = run.home().join(".ssh");
                std::fs::create_dir_all(&ssh).map_err(|e| e.to_string())?;
                let out = Command::new("ssh-keygen")
                    .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                    .arg(ssh.join("kwin_lab"))
                    .output()
                    .map_err(|e| e.to_string())?;
                out.status
                    .success()
                    .then_some(())
                    .ok_or_else(|| String::from_utf8_lossy(&out.stderr).into_owned())
            }
            "delete-vms" => Ok(()),
            "read-identities" => {
                let fp = |seed: u8| {
                    (0..32)
                        .map(|i| format!("{:02x}", seed.wrapping_mul(31).wrapping_add(i)))
                        .collect::<Vec<_>>()
                        .join(":")
                };
                let mut lines = Vec::new();
                for (i, vm) in ["cp1", "lw1", "ww1", "ww2"].iter().enumerate() {
                    lines.push(format!("KWIN_VAR_{vm}_public=203.0.113.{}", 10 + i));
                    lines.push(format!("KWIN_VAR_{vm}_private=10.10.1.{}", 4 + i));
                }
                lines.push(
                    "KWIN_VAR_cp1_host_key=SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s"
                        .into(),
                );
                lines.push(
                    "KWIN_VAR_lw1_host_key=SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU"
                        .into(),
                );
                lines.push(format!("KWIN_VAR_ww1_cert={}", fp(1)));
                lines.push(format!("KWIN_VAR_ww2_cert={}", fp(2)));
                run.github_env(&lines.join("\n"));
                Ok(())
            }
            // Nothing ran that writes logs.
            "keep-logs" => Ok(()),
            other => Err(format!("no lab step `{other}`")),
        }
    }
}

/// One key of the environment a lab sets in its copy of the CI plan: `table.key` (the whole
/// table when `key` is `None`), as the lab's own plan has it, and why a cloud VM's plan does
/// without it.
struct EnvKey {
    table: &'static str,
    key: Option<&'static str>,
    why: &'static str,
}

/// How a lab with hosts runs the CI plan: its own plan (the one its cluster is known to come
/// up with), the keys of it that make the lab's environment.
struct LabPlan {
    own: String,
    keys: &'static [EnvKey],
}

/// examples/ci/cluster.toml as a lab runs it: its Windows hosts left out and each of `keys`
/// set as `lab` (the lab's own plan) has it; comments and every other key as the example
/// writes them (checked here: the result without those keys is the example without its
/// Windows hosts).
fn lab_plan(example: &str, lab: &str, keys: &[EnvKey]) -> String {
    let mut doc: toml_edit::DocumentMut = example.parse().expect("the example plan is TOML");
    let own: toml_edit::DocumentMut = lab.parse().expect("the lab's plan is TOML");
    let windows = |t: &toml_edit::Table| t.get("os").and_then(|v| v.as_str()) == Some("windows");
    if let Some(hosts) = doc
        .get_mut("hosts")
        .and_then(|h| h.as_array_of_tables_mut())
    {
        hosts.retain(|t| !windows(t));
    }
    for k in keys {
        let from = own
            .get(k.table)
            .unwrap_or_else(|| panic!("the lab's plan has no [{}]", k.table));
        match k.key {
            None => doc[k.table] = from.clone(),
            Some(key) => {
                let v = from
                    .get(key)
                    .unwrap_or_else(|| panic!("the lab's plan has no {}.{key}", k.table))
                    .clone();
                if doc.get(k.table).is_none() {
                    doc[k.table] = toml_edit::table();
                }
                doc[k.table][key] = v;
            }
        }
    }
    let mut head = String::from(
        "# A lab's copy of examples/ci/cluster.toml (tests/ci_workflow.rs): its Windows hosts left\n\
         # out (Windows cannot run here), and the lab's environment set where a cloud VM's plan\n\
         # does without it:\n",
    );
    for k in keys {
        let key = match k.key {
            Some(key) => format!("{}.{key}", k.table),
            None => format!("[{}]", k.table),
        };
        head.push_str(&format!("# - {key}: {}\n", k.why));
    }
    let text = format!("{head}\n{doc}");
    // Nothing else differs.
    let strip = |text: &str| {
        let mut v: toml::Table = toml::from_str(text).expect("TOML");
        if let Some(toml::Value::Array(hosts)) = v.get_mut("hosts") {
            hosts.retain(|h| h.get("os").and_then(|o| o.as_str()) != Some("windows"));
        }
        for k in keys {
            match k.key {
                None => {
                    v.remove(k.table);
                }
                Some(key) => {
                    if let Some(toml::Value::Table(t)) = v.get_mut(k.table) {
                        t.remove(key);
                    }
                }
            }
        }
        v
    };
    assert_eq!(
        strip(&text),
        strip(example),
        "the lab's plan differs from the example beyond the lab's keys"
    );
    text
}

/// The VM names of the CI plan that a lab with hosts has (Windows cannot run here), and the
/// lab host standing for each.
const LAB_VMS: [(&str, &str); 2] = [("cp1", "h1"), ("lw1", "h2")];

/// Lab hosts standing for the cloud's VMs: lab `id`'s `target/lab[-ID]` files.
struct LabHosts {
    id: &'static str,
}

impl LabHosts {
    /// `target/lab-ID` (lab 0: `target/lab`), as lab/lib.sh names it.
    fn dir(&self) -> PathBuf {
        match self.id {
            "0" => root().join("target/lab"),
            id => root().join(format!("target/lab-{id}")),
        }
    }

    /// `script` of the checkout for this lab (root); its output, or why it failed.
    #[cfg(feature = "real-lab")]
    fn script(&self, script: &str, args: &[&str], env: &[(&str, &str)]) -> Result<String, String> {
        let out = Command::new(root().join(script))
            .args(args)
            .env("KWIN_LAB_ID", self.id)
            .envs(env.iter().copied())
            .output()
            .map_err(|e| format!("{script}: {e}"))?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out.status
            .success()
            .then_some(text.clone())
            .ok_or_else(|| format!("{script} {args:?}: {}\n{text}", out.status))
    }

    /// `cmd` as root on lab host `host`, `stdin` given; its stdout.
    fn ssh(&self, host: &str, cmd: &str, stdin: &str) -> Result<String, String> {
        use std::io::Write;
        let mut child = Command::new("ssh")
            .arg("-F")
            .arg(self.dir().join("ssh_config"))
            .args([host, cmd])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("ssh: {e}"))?;
        if let Some(mut w) = child.stdin.take() {
            w.write_all(stdin.as_bytes()).map_err(|e| e.to_string())?;
        }
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
            .ok_or_else(|| format!("{host}: {cmd}: {}", String::from_utf8_lossy(&out.stderr)))
    }

    /// The address of lab host `host`, from the lab's inventory.
    fn address(&self, host: &str) -> Result<String, String> {
        let text = std::fs::read_to_string(self.dir().join("hosts.toml"))
            .map_err(|e| format!("the lab's inventory: {e}"))?;
        let v: toml::Table = toml::from_str(&text).map_err(|e| e.to_string())?;
        v.get("hosts")
            .and_then(|h| h.as_array())
            .and_then(|hs| {
                hs.iter()
                    .find(|h| h.get("name").and_then(|n| n.as_str()) == Some(host))
            })
            .and_then(|h| h.get("address"))
            .and_then(|a| a.as_str())
            .map(str::to_string)
            .ok_or_else(|| format!("no address of {host} in the lab's inventory"))
    }

    /// What `az vm create --admin-username kwin --ssh-key-values ~/.ssh/kwin_lab.pub` leaves
    /// on each VM, and the runner's key the workflow makes: user `kwin`, the runner's key,
    /// sudo without a password. Then the checkout's copy of the plan, for this lab.
    fn make_vms(&self, run: &Run, plan: &LabPlan) -> Result<(), String> {
        let ssh_dir = run.home().join(".ssh");
        std::fs::create_dir_all(&ssh_dir).map_err(|e| e.to_string())?;
        let key = ssh_dir.join("kwin_lab");
        let out = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(&key)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let public =
            std::fs::read_to_string(key.with_extension("pub")).map_err(|e| e.to_string())?;
        for (_, host) in LAB_VMS {
            self.ssh(
                host,
                "set -e; id kwin >/dev/null 2>&1 || useradd -m -s /bin/sh kwin; usermod -p '*' kwin; \
                 install -d -m 0700 -o kwin -g kwin /home/kwin/.ssh; \
                 cat > /home/kwin/.ssh/authorized_keys; chown kwin:kwin /home/kwin/.ssh/authorized_keys; \
                 chmod 0600 /home/kwin/.ssh/authorized_keys; \
                 echo 'kwin ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/kwin; chmod 0440 /etc/sudoers.d/kwin",
                &public,
            )?;
        }
        let example = std::fs::read_to_string(root().join("examples/ci/cluster.toml"))
            .map_err(|e| e.to_string())?;
        let text = lab_plan(&example, &plan.own, plan.keys);
        std::fs::write(run.dir.path().join("examples/ci/cluster.toml"), text)
            .map_err(|e| e.to_string())
    }

    /// What the identities step writes to `$GITHUB_ENV` on Azure, read from the lab's own
    /// files: each VM's address (public and private are one here) and its ed25519 host
    /// key's fingerprint, as `ssh-keygen -lf` prints it on the VM.
    fn identities(&self, run: &Run) -> Result<(), String> {
        let mut lines = Vec::new();
        for (vm, host) in LAB_VMS {
            let address = self.address(host)?;
            lines.push(format!("KWIN_VAR_{vm}_public={address}"));
            lines.push(format!("KWIN_VAR_{vm}_private={address}"));
            let pub_key = self
                .dir()
                .join(format!("hosts/{host}/ssh_host_ed25519_key.pub"));
            let out = Command::new("ssh-keygen")
                .arg("-lf")
                .arg(&pub_key)
                .output()
                .map_err(|e| e.to_string())?;
            let text = String::from_utf8_lossy(&out.stdout);
            let fp = text
                .split_whitespace()
                .find(|w| w.starts_with("SHA256:"))
                .ok_or_else(|| format!("no fingerprint of {}: {text}", pub_key.display()))?;
            lines.push(format!("KWIN_VAR_{vm}_host_key={fp}"));
        }
        run.github_env(&lines.join("\n"));
        Ok(())
    }

    /// What the artifact step uploads, there: kwin's logs and run journals, and the JSON
    /// lines the apply steps wrote (when they ran).
    fn kept(&self, run: &Run) -> Result<(), String> {
        let lab = run.dir.path().join("lab");
        for rel in [".kwin/logs", ".kwin/runs"] {
            let p = lab.join(rel);
            let empty = std::fs::read_dir(&p)
                .map(|mut d| d.next().is_none())
                .unwrap_or(true);
            if empty {
                return Err(format!("{} is missing or empty", p.display()));
            }
        }
        Ok(())
    }
}

/// The real lab's environment: what `lab/cluster/plan.toml` sets for these hosts that a
/// cloud VM's plan does without (lab/cluster/README.md says why each is so).
const REAL_LAB_KEYS: &[EnvKey] = &[
    EnvKey {
        table: "cluster",
        key: Some("allow_cgroup_v1"),
        why: "lab hosts have the machine's cgroup v1 hierarchies, which the kubelet refuses from 1.35 unless told",
    },
    EnvKey {
        table: "cluster",
        key: Some("kube_proxy_conntrack_max_per_core"),
        why: "lab hosts live in network namespaces of their own, where nf_conntrack_max is read-only: kube-proxy must leave it alone",
    },
    EnvKey {
        table: "cluster",
        key: Some("verify_egress_url"),
        why: "no internet here: verify's egress check fetches from the lab's mirror",
    },
    EnvKey {
        table: "runtime",
        key: Some("cgroup_driver"),
        why: "lab hosts run no systemd: the kubelet and containerd use cgroupfs",
    },
    EnvKey {
        table: "runtime",
        key: Some("restrict_oom_score_adj"),
        why: "the machine withholds CAP_SYS_RESOURCE: runc may not lower a container's OOM score",
    },
    EnvKey {
        table: "artifacts",
        key: None,
        why: "no internet here: the lab's mirror of pkgs.k8s.io and the release downloads (its signing key, the digests of what this machine built) and its registry",
    },
];

/// The stand-in lab's environment: what `examples/lab-cluster.toml` sets for it that a cloud
/// VM's plan does without (lab/cluster-stand-in/README.md says what stands in for what).
const STAND_IN_KEYS: &[EnvKey] = &[
    EnvKey {
        table: "cluster",
        key: Some("control_plane_endpoint"),
        why: "the stand-in's API server is the lab's own, on its service address: cp1 runs none",
    },
    EnvKey {
        table: "cluster",
        key: Some("verify"),
        why: "no pod runs in the stand-in lab (no real kubelet, no images), so kwin verify cannot pass there",
    },
    EnvKey {
        table: "cni",
        key: Some("manifest_file"),
        why: "the stand-in's flannel objects (a test fixture): its mirror serves no flannel release",
    },
    EnvKey {
        table: "artifacts",
        key: None,
        why: "no internet here: the stand-in's signed repositories and release downloads, their digests pinned (the mirror is plain HTTP)",
    },
];

/// The stand-in cluster lab, what CI has (lab 12): two lab hosts with `lab/cluster-stand-in`
/// around them, its repositories serving the example's Kubernetes, containerd and runc
/// versions.
struct StandIn {
    hosts: LabHosts,
    cluster: std::cell::RefCell<Option<kwin_testkit::cluster::Cluster>>,
}

impl StandIn {
    /// `version` of `component` in the example plan's `[cluster]` or `[versions]`, else as
    /// `kwin --version` lists kwin's default.
    fn version(component: &str) -> String {
        let example: toml::Table = toml::from_str(
            &std::fs::read_to_string(root().join("examples/ci/cluster.toml")).expect("example"),
        )
        .expect("TOML");
        let written = match component {
            "kubernetes" => example["cluster"].get("kubernetes_version"),
            other => example.get("versions").and_then(|v| v.get(other)),
        };
        if let Some(v) = written.and_then(|v| v.as_str()) {
            return v.trim_start_matches('v').to_string();
        }
        let out = Command::new(kwin_bin())
            .arg("--version")
            .output()
            .expect("kwin --version");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| {
                let mut w = l.split_whitespace();
                (w.next() == Some(component))
                    .then(|| w.next().map(str::to_string))
                    .flatten()
            })
            .unwrap_or_else(|| panic!("kwin --version names no default {component}"))
    }

    /// The stand-in's own plan: examples/lab-cluster.toml for this lab, with the digests of
    /// the release files its mirror serves.
    fn own_plan(c: &kwin_testkit::cluster::Cluster, containerd: &str, runc: &str) -> String {
        let tarball = format!("containerd-{containerd}-linux-amd64.tar.gz");
        format!(
            "{}\n[artifacts.sha256]\n{tarball:?} = \"{}\"\n\"runc.amd64\" = \"{}\"\n\"containerd.service\" = \"{}\"\n",
            c.example("lab-cluster.toml"),
            c.served(&format!(
                "github.com/containerd/containerd/releases/download/v{containerd}/{tarball}"
            )),
            c.served(&format!(
                "github.com/opencontainers/runc/releases/download/v{runc}/runc.amd64"
            )),
            c.served(&format!(
                "raw.githubusercontent.com/containerd/containerd/v{containerd}/containerd.service"
            )),
        )
    }
}

impl Lab for StandIn {
    fn has_hosts(&self) -> bool {
        true
    }
    fn step(&self, name: &str, run: &mut Run) -> Result<(), String> {
        match name {
            "create-vms" => {
                let (kubernetes, containerd, runc) = (
                    Self::version("kubernetes"),
                    Self::version("containerd"),
                    Self::version("runc"),
                );
                let c = kwin_testkit::cluster::Cluster::up_with(
                    self.hosts.id,
                    LAB_VMS.len(),
                    &[
                        ("KWIN_LAB_K8S_VERSIONS", &kubernetes),
                        ("KWIN_LAB_CONTAINERD_VERSIONS", &containerd),
                        ("KWIN_LAB_RUNC_VERSION", &runc),
                    ],
                );
                let own = Self::own_plan(&c, &containerd, &runc);
                *self.cluster.borrow_mut() = Some(c);
                self.hosts.make_vms(
                    run,
                    &LabPlan {
                        own,
                        keys: STAND_IN_KEYS,
                    },
                )
            }
            "read-identities" => self.hosts.identities(run),
            "keep-logs" => self.hosts.kept(run),
            // Dropping the cluster takes the stand-ins and the hosts down.
            "delete-vms" => {
                drop(self.cluster.borrow_mut().take());
                Ok(())
            }
            other => Err(format!("no lab step `{other}`")),
        }
    }
    fn cannot_pass(&self, step: &Step) -> Option<Limit> {
        match step.name.as_str() {
            "Apply (verifies the cluster at the end)" => Some(Limit::Lines(vec![(
                "verify_finished",
                "no pod runs in the stand-in lab: the apply's verification needs the real lab",
            )])),
            "Verify" => Some(Limit::Step(
                "no pod runs in the stand-in lab: kwin verify needs the real lab",
            )),
            "Use the cluster from the runner" => Some(Limit::Lines(vec![(
                "kubectl --kubeconfig",
                "cp1 runs no API server in the stand-in lab (the lab's own listens on its service address), so nothing answers at the address kwin kubeconfig --address wrote: kubectl from the runner needs the real lab",
            )])),
            _ => None,
        }
    }
}

/// The real cluster lab (feature `real-lab`): lab 19's two hosts (`lab/up.sh 2 --nodes`)
/// run the real Kubernetes, containerd and flannel `lab/build` built, with
/// `lab/cluster/up.sh`'s registry, mirror and systemd stand-in around them.
#[cfg(feature = "real-lab")]
struct RealLab {
    hosts: LabHosts,
}

#[cfg(feature = "real-lab")]
impl RealLab {
    fn down(&self) -> Result<(), String> {
        self.hosts.script("lab/cluster/down.sh", &[], &[])?;
        self.hosts.script("lab/down.sh", &[], &[]).map(|_| ())
    }
}

#[cfg(feature = "real-lab")]
impl Drop for RealLab {
    fn drop(&mut self) {
        let _ = self.down();
    }
}

#[cfg(feature = "real-lab")]
impl Lab for RealLab {
    fn has_hosts(&self) -> bool {
        true
    }
    fn step(&self, name: &str, run: &mut Run) -> Result<(), String> {
        match name {
            "create-vms" => {
                self.hosts.script("lab/up.sh", &["2", "--nodes"], &[])?;
                self.hosts.script("lab/cluster/up.sh", &[], &[])?;
                let own = std::fs::read_to_string(self.hosts.dir().join("cluster/plan.toml"))
                    .map_err(|e| format!("lab/cluster/up.sh's plan: {e}"))?;
                self.hosts.make_vms(
                    run,
                    &LabPlan {
                        own,
                        keys: REAL_LAB_KEYS,
                    },
                )
            }
            "read-identities" => self.hosts.identities(run),
            "keep-logs" => self.hosts.kept(run),
            "delete-vms" => self.down(),
            other => Err(format!("no lab step `{other}`")),
        }
    }
}

/// One run of the workflow: its working tree, `$GITHUB_ENV`, `$GITHUB_PATH`, and what each
/// step did.
struct Run {
    dir: tempfile::TempDir,
    env_file: PathBuf,
    path_file: PathBuf,
    /// (step, what happened, seconds it took, what a verbatim step printed on stdout).
    log: Vec<(String, String, f64, String)>,
}

impl Run {
    fn new() -> Run {
        let dir = tempfile::tempdir().expect("tempdir");
        // The checkout: the files the workflow reads, copied (kwin writes lab/ beside them).
        for rel in [
            "examples/ci/cluster.toml",
            "examples/real-vms/prepare-windows.ps1",
        ] {
            let to = dir.path().join(rel);
            std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
            std::fs::copy(root().join(rel), &to).expect("copy");
        }
        let env_file = dir.path().join(".github_env");
        let path_file = dir.path().join(".github_path");
        std::fs::write(&env_file, "").expect("GITHUB_ENV");
        std::fs::write(&path_file, "").expect("GITHUB_PATH");
        Run {
            dir,
            env_file,
            path_file,
            log: Vec::new(),
        }
    }

    /// The runner's home (its `~/.ssh`).
    fn home(&self) -> PathBuf {
        self.dir.path().join(".home")
    }

    fn github_env(&self, lines: &str) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.env_file)
            .expect("GITHUB_ENV");
        writeln!(f, "{lines}").expect("write");
    }

    fn github_path(&self, dir: &Path) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.path_file)
            .expect("GITHUB_PATH");
        writeln!(f, "{}", dir.display()).expect("write");
    }

    /// `$GITHUB_ENV` as set so far (`NAME=value` lines; no multi-line values here).
    fn carried_env(&self) -> BTreeMap<String, String> {
        std::fs::read_to_string(&self.env_file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn path(&self) -> String {
        let mut dirs: Vec<String> = std::fs::read_to_string(&self.path_file)
            .unwrap_or_default()
            .lines()
            .rev()
            .map(str::to_string)
            .collect();
        dirs.push(std::env::var("PATH").unwrap_or_default());
        dirs.join(":")
    }
}

/// `${{ … }}` as GitHub fills it in: secrets, `github.run_id`, `env.X`.
fn expressions(text: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("${{") {
        out.push_str(&rest[..i]);
        let Some(j) = rest[i..].find("}}") else {
            break;
        };
        let expr = rest[i + 3..i + j].trim();
        let value = match expr {
            "github.run_id" => "4242".to_string(),
            "secrets.KWIN_WINDOWS_PASSWORD" => "Test-Passw0rd-for-CI".to_string(),
            e if e.starts_with("secrets.") => "test-secret".to_string(),
            e => match e.strip_prefix("env.") {
                Some(name) => env.get(name).cloned().unwrap_or_default(),
                None => panic!("the runner does not know the expression `{e}`"),
            },
        };
        out.push_str(&value);
        rest = &rest[i + j + 2..];
    }
    out.push_str(rest);
    out
}

/// How a step ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Passed,
    Failed(String),
    Skipped(String),
    /// It reaches hosts, and the lab has none: what it would run.
    NeedsHosts,
    /// The lab has hosts but cannot honestly pass this step (the reason): only the real lab
    /// can.
    NeedsRealLab(String),
    /// Passed verbatim but for these lines (each with why), which only the real lab can.
    PassedWithout(Vec<String>),
}

/// Run `wf` with `lab` standing in for the cloud, as GitHub Actions runs a job.
fn run_workflow(wf: &Workflow, lab: &dyn Lab, kwin: &Path) -> (Run, Vec<(Step, Outcome)>) {
    let mut run = Run::new();
    let mut failed = false;
    let mut done = Vec::new();
    for step in &wf.steps {
        if failed && !step.always {
            done.push((
                step.clone(),
                Outcome::Skipped("an earlier step failed".into()),
            ));
            continue;
        }
        let started = std::time::Instant::now();
        let mut printed = String::new();
        let outcome = match action(step) {
            Action::Skip => Outcome::Skipped("no cloud here".into()),
            Action::Lab("build") => {
                run.github_path(kwin.parent().expect("kwin's directory"));
                Outcome::Passed
            }
            Action::Lab(name) => match lab.step(name, &mut run) {
                Ok(()) => Outcome::Passed,
                Err(e) => Outcome::Failed(format!("lab step {name}: {e}")),
            },
            Action::Verbatim => {
                let script = step.run.clone().unwrap_or_default();
                if reaches_hosts(&script) && !lab.has_hosts() {
                    Outcome::NeedsHosts
                } else {
                    match lab.cannot_pass(step) {
                        None => {
                            let (o, out) = verbatim(&run, wf, step, &script);
                            printed = out;
                            o
                        }
                        Some(Limit::Step(why)) => Outcome::NeedsRealLab(why.to_string()),
                        Some(Limit::Lines(lines)) => {
                            let (script, left) = without_lines(&step.name, &script, &lines);
                            let (o, out) = verbatim(&run, wf, step, &script);
                            printed = out;
                            match o {
                                Outcome::Passed => Outcome::PassedWithout(left),
                                other => other,
                            }
                        }
                    }
                }
            }
        };
        failed |= matches!(outcome, Outcome::Failed(_));
        run.log.push((
            step.name.clone(),
            format!("{outcome:?}"),
            started.elapsed().as_secs_f64(),
            printed,
        ));
        done.push((step.clone(), outcome));
    }
    (run, done)
}

/// `script` with each line containing one of `lines`' texts made a comment saying why; the
/// lines left out, with why. A text no line contains fails the test: the workflow changed
/// under the lab's limits.
fn without_lines(
    step: &str,
    script: &str,
    lines: &[(&'static str, &'static str)],
) -> (String, Vec<String>) {
    let mut left = Vec::new();
    let mut out = String::new();
    for line in script.lines() {
        match lines.iter().find(|(text, _)| line.contains(text)) {
            Some((_, why)) => {
                left.push(format!("`{}`: {why}", line.trim()));
                out.push_str(&format!("true # left out: {why}\n"));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    for (text, _) in lines {
        assert!(
            script.lines().any(|l| l.contains(text)),
            "step `{step}` has no line with `{text}` any more"
        );
    }
    (out, left)
}

/// A step's `run:` under bash as GitHub Actions runs it; how it ended, and its stdout.
fn verbatim(run: &Run, wf: &Workflow, step: &Step, script: &str) -> (Outcome, String) {
    let mut env = wf.env.clone();
    env.extend(run.carried_env());
    let env_now = env.clone();
    for (k, v) in &step.env {
        env.insert(k.clone(), expressions(v, &env_now));
    }
    let env: BTreeMap<String, String> = env
        .into_iter()
        .map(|(k, v)| {
            let v = expressions(&v, &env_now);
            (k, v)
        })
        .collect();
    let file = run.dir.path().join(".step.sh");
    std::fs::write(&file, expressions(script, &env)).expect("step script");
    let out = Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail"])
        .arg(&file)
        .current_dir(run.dir.path())
        .env_clear()
        .envs(&env)
        .env("PATH", run.path())
        .env("HOME", run.home())
        .env("GITHUB_ENV", &run.env_file)
        .env("GITHUB_PATH", &run.path_file)
        .output()
        .expect("bash");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        (Outcome::Passed, stdout)
    } else {
        let o = Outcome::Failed(format!(
            "exit {:?}\n--- stdout\n{stdout}\n--- stderr\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ));
        (o, stdout)
    }
}

/// How each step went, with its time and what it printed (the report of a lab run).
fn report(run: &Run) -> String {
    run.log
        .iter()
        .map(|(step, outcome, secs, printed)| {
            let mut line = format!("{step}: {outcome} ({secs:.0}s)");
            for l in printed.lines().filter(|l| !l.trim().is_empty()).take(12) {
                line.push_str(&format!("\n    | {l}"));
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The outcome of the last kwin run of the workflow's plan, as `kwin show` tells it: the
/// reset step ignores kwin's exit code (`|| true`), this does not.
fn last_run(run: &Run) -> serde_json::Value {
    let r = kwin_testkit::kwin!(
        run.dir.path().join("lab"),
        &["show", "plan.toml", "--output", "json"]
    );
    assert_eq!(r.code, 0, "{r}");
    r.summary()
}

fn kwin_bin() -> PathBuf {
    PathBuf::from(
        std::env::var("KWIN_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_kwin").into()),
    )
}

/// Tier 1: every step that needs no host runs verbatim and passes (the plan is copied and
/// validated with the variables the identities step sets); the steps that reach hosts are
/// exactly those the lab cluster must run, each named.
#[test]
fn the_workflow_runs_up_to_the_steps_that_need_the_lab_cluster() {
    let wf = workflow();
    let (run, done) = run_workflow(&wf, &Offline, &kwin_bin());
    let report: Vec<String> = done
        .iter()
        .map(|(s, o)| format!("{}: {o:?}", s.name))
        .collect();
    for (s, o) in &done {
        assert!(
            !matches!(o, Outcome::Failed(_)),
            "step `{}` failed:\n{o:?}\nall steps:\n{}",
            s.name,
            report.join("\n")
        );
    }
    let outcome = |name: &str| {
        done.iter()
            .find(|(s, _)| s.name == name)
            .map(|(_, o)| o.clone())
            .unwrap_or_else(|| panic!("the workflow has no step `{name}`"))
    };
    assert_eq!(outcome("Write and validate the plan"), Outcome::Passed);
    assert!(run.dir.path().join("lab/plan.toml").is_file());
    // What needs the lab cluster, by name: apply (twice), verify, kubectl from the runner,
    // reset.
    let needs: Vec<&str> = done
        .iter()
        .filter(|(_, o)| *o == Outcome::NeedsHosts)
        .map(|(s, _)| s.name.as_str())
        .collect();
    assert_eq!(
        needs,
        [
            "Apply (verifies the cluster at the end)",
            "Apply again (must change nothing)",
            "Verify",
            "Use the cluster from the runner",
            "Reset",
        ],
        "{}",
        report.join("\n")
    );
    // Every lab step the workflow uses is one the labs implement.
    for (s, _) in &done {
        if let Action::Lab(name) = action(s) {
            assert!(name == "build" || LAB_STEPS.contains(&name), "{name}");
        }
    }
}

/// What a lab's own plan sets that is the CI plan's own choice, not the lab's environment:
/// the CI plan keeps its values (`table.key`, or a whole table).
const THE_PLAN_S_OWN: &[&str] = &[
    "inventory",
    "cluster.name",
    "cluster.kubernetes_version",
    "cluster.pod_cidr",
    "cluster.service_cidr",
    "cluster.dns_service_ip",
    "cni.plugin",
    "cni.backend",
    "cni.vni",
    "cni.port",
    "runtime.linux",
    "settings",
    "defaults",
    "hosts",
];

/// Every key a lab's own plan sets is either its environment, taken into its copy of the CI
/// plan with a reason, or the CI plan's own choice: a key added to a lab's plan (a new need
/// of its hosts) fails here until it is sorted into one or the other.
#[test]
fn every_key_of_a_lab_s_plan_is_its_environment_or_the_ci_plan_s_choice() {
    for (file, keys) in [
        ("lab/cluster/plan.toml", REAL_LAB_KEYS),
        ("examples/lab-cluster.toml", STAND_IN_KEYS),
    ] {
        let text = std::fs::read_to_string(root().join(file)).expect(file);
        let plan: toml::Table = toml::from_str(&text).expect("TOML");
        for (table, v) in &plan {
            let names: Vec<String> = match v.as_table() {
                Some(t) if table != "defaults" => {
                    t.keys().map(|k| format!("{table}.{k}")).collect()
                }
                _ => vec![table.clone()],
            };
            for name in names {
                let environment = keys.iter().any(|k| match k.key {
                    None => k.table == table,
                    Some(key) => format!("{}.{key}", k.table) == name,
                });
                let own = THE_PLAN_S_OWN
                    .iter()
                    .any(|o| *o == name || *o == table.as_str());
                assert!(
                    environment || own,
                    "{file} sets `{name}`: add it to the lab's environment keys (with why) or to THE_PLAN_S_OWN"
                );
            }
        }
    }
}

/// The lab steps every [`Lab`] implements.
const LAB_STEPS: [&str; 4] = ["create-vms", "read-identities", "keep-logs", "delete-vms"];

/// A lab's copy of the CI plan is the example but for the lab's own keys and the Windows
/// hosts, and validates clean with the identities of its two hosts.
#[test]
fn a_lab_s_plan_is_the_example_but_for_the_lab_s_keys() {
    let example =
        std::fs::read_to_string(root().join("examples/ci/cluster.toml")).expect("example");
    let own = std::fs::read_to_string(root().join("lab/cluster/plan.toml")).expect("lab plan");
    let text = lab_plan(&example, &own, REAL_LAB_KEYS);
    let v: toml::Table = toml::from_str(&text).expect("TOML");
    let hosts: Vec<&str> = v["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .filter_map(|h| h["name"].as_str())
        .collect();
    assert_eq!(hosts, ["cp1", "lw1"]);
    assert_eq!(v["cluster"]["allow_cgroup_v1"].as_bool(), Some(true));
    assert!(v["artifacts"]["mirror"].is_str(), "{text}");
    // The example's own comments are kept.
    assert!(text.contains("# The runner reaches the API server on cp1's public address"));
    // What the example says, the lab's copy says: a change to it shows through.
    let changed = lab_plan(
        &example.replace("parallelism = 4", "parallelism = 5"),
        &own,
        REAL_LAB_KEYS,
    );
    assert!(changed.contains("parallelism = 5"), "{changed}");

    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("plan.toml"), &text).expect("plan");
    let key = dir.path().join("kwin_lab");
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key)
        .output()
        .expect("ssh-keygen");
    assert!(out.status.success());
    let mut args = vec![
        "validate".to_string(),
        "plan.toml".to_string(),
        "--var".to_string(),
        format!("ssh_key={}", key.display()),
    ];
    for (vm, i) in [("cp1", 6), ("lw1", 10)] {
        for (k, v) in [
            ("public", format!("10.232.0.{i}")),
            ("private", format!("10.232.0.{i}")),
            (
                "host_key",
                "SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU".to_string(),
            ),
        ] {
            args.push("--var".into());
            args.push(format!("{vm}_{k}={v}"));
        }
    }
    let r = kwin_testkit::kwin!(dir.path()).args(&args).run();
    assert_eq!(r.code, 0, "{r}");
}

/// The events of `kwin schema --events`: name → the fields it has.
fn event_fields() -> BTreeMap<String, Vec<String>> {
    let r = kwin_testkit::kwin!(".", &["schema", "--events"]);
    assert_eq!(r.code, 0, "{r}");
    let schema: serde_json::Value = serde_json::from_str(&r.stdout).expect("schema");
    let defs = &schema["$defs"];
    let props = |v: &serde_json::Value| -> Vec<String> {
        let mut out: Vec<String> = v["properties"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        if let Some(r) = v["$ref"].as_str().and_then(|r| r.strip_prefix("#/$defs/")) {
            out.extend(
                defs[r]["properties"]
                    .as_object()
                    .map(|m| m.keys().cloned().collect::<Vec<_>>())
                    .unwrap_or_default(),
            );
        }
        out
    };
    schema["oneOf"]
        .as_array()
        .expect("oneOf")
        .iter()
        .filter_map(|b| {
            let name = b["properties"]["event"]["const"].as_str()?.to_string();
            Some((name, props(b)))
        })
        .collect()
}

/// The jq programs of a script: the single-quoted argument after `jq` and its flags.
fn jq_programs(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in script.lines() {
        let Some(i) = line.find("jq ") else {
            continue;
        };
        let rest = &line[i..];
        if let Some(a) = rest.find('\'') {
            if let Some(b) = rest[a + 1..].find('\'') {
                out.push(rest[a + 1..a + 1 + b].to_string());
            }
        }
    }
    out
}

/// `.event == "x"` in a jq program: the events it selects.
fn selected_events(program: &str) -> Vec<String> {
    program
        .split(".event == \"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .map(str::to_string)
        .collect()
}

/// The fields a jq program reads besides `event`: `.name` not followed by `(`.
fn read_fields(program: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = program.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'.' && b.get(i + 1).is_some_and(|c| c.is_ascii_lowercase()) {
            let start = i + 1;
            let mut j = start;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                j += 1;
            }
            let name = &program[start..j];
            if name != "event" {
                out.push(name.to_string());
            }
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// Every jq filter of the workflow selects events kwin emits and reads fields they have.
#[test]
fn the_workflow_s_jq_checks_read_what_kwin_emits() {
    let events = event_fields();
    assert!(events.contains_key("summary") && events.contains_key("verify_finished"));
    let wf = workflow();
    let mut checked = 0;
    for step in &wf.steps {
        for program in jq_programs(step.run.as_deref().unwrap_or("")) {
            let selected = selected_events(&program);
            if selected.is_empty() {
                continue;
            }
            for ev in &selected {
                let Some(fields) = events.get(ev) else {
                    panic!(
                        "step `{}`: jq selects event `{ev}`, which kwin never emits (its events: {})",
                        step.name,
                        events.keys().cloned().collect::<Vec<_>>().join(", ")
                    );
                };
                for f in read_fields(&program) {
                    assert!(
                        fields.contains(&f),
                        "step `{}`: jq reads `.{f}` of `{ev}`, which has no such field ({})",
                        step.name,
                        fields.join(", ")
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 3, "the workflow's checks were not found");
}

/// The whole workflow on the real cluster lab: every step verbatim, `kwin verify` with real
/// pods, a second apply changing nothing, kubectl from the runner through `kwin kubeconfig
/// --address`, reset. A lab test behind the `real-lab` feature (root, the lab's builds in
/// /var/cache/kwin-lab): `cargo test --features real-lab --test ci_workflow --
/// --include-ignored`.
#[cfg(feature = "real-lab")]
mod real_lab {
    use super::*;

    kwin_testkit::lab_test! {
    #[test]
    #[allow(clippy::print_stderr)]
    fn the_whole_workflow_passes_on_the_real_cluster_lab() {
        let wf = workflow();
        let t = std::time::Instant::now();
        let lab = RealLab {
            hosts: LabHosts { id: "19" },
        };
        let (run, done) = run_workflow(&wf, &lab, &kwin_bin());
        let report = report(&run);
        eprintln!("{report}\nthe workflow in {:.0}s", t.elapsed().as_secs_f64());
        for (s, o) in &done {
            let ok = match o {
                Outcome::Passed => true,
                Outcome::Skipped(why) => why == "no cloud here",
                _ => false,
            };
            assert!(ok, "step `{}`: {o:?}\nall steps:\n{report}", s.name);
        }
        // The reset step ignores kwin's exit code; kwin's own record of that run does not.
        let reset = last_run(&run);
        assert_eq!((reset["failed"].as_u64(), reset["hosts_failed"].as_u64()), (Some(0), Some(0)), "{reset}");
        assert!(reset["changed"].as_u64().unwrap_or(0) > 0, "{reset}");
        // Beyond the steps' own checks: verify ran real pods, every check passed.
        let events = kwin_testkit::kwin::events(
            &std::fs::read_to_string(run.dir.path().join("lab/apply-1.jsonl")).expect("apply-1.jsonl"),
        );
        let v = events
            .iter()
            .find(|e| e["event"] == "verify_finished")
            .expect("verify_finished");
        assert!(v["passed"].as_u64().unwrap_or(0) >= 8, "{v}");
        assert_eq!(v["skipped"], 0, "{v}");
    }
    }
}

/// The workflow on the stand-in cluster lab (what CI has): every step verbatim but what no
/// stand-in can pass, each named with why: the apply's verification, `kwin verify` and
/// kubectl through `kwin kubeconfig --address`, which only the real lab passes.
mod stand_in {
    use super::*;

    kwin_testkit::lab_test! {
    #[test]
    #[allow(clippy::print_stderr)]
    fn the_workflow_passes_on_the_stand_in_lab_but_for_what_needs_the_real_lab() {
        let wf = workflow();
        let t = std::time::Instant::now();
        let lab = StandIn {
            hosts: LabHosts { id: "12" },
            cluster: std::cell::RefCell::new(None),
        };
        let (run, done) = run_workflow(&wf, &lab, &kwin_bin());
        let report = report(&run);
        eprintln!("{report}\nthe workflow in {:.0}s", t.elapsed().as_secs_f64());
        let outcome = |name: &str| {
            done.iter()
                .find(|(s, _)| s.name == name)
                .map(|(_, o)| o.clone())
                .unwrap_or_else(|| panic!("the workflow has no step `{name}`"))
        };
        for (s, o) in &done {
            assert!(
                !matches!(o, Outcome::Failed(_)),
                "step `{}` failed:\n{o:?}\nall steps:\n{report}",
                s.name,
            );
        }
        for name in [
            "Write and validate the plan",
            "Apply again (must change nothing)",
            "Reset",
        ] {
            assert_eq!(outcome(name), Outcome::Passed, "{report}");
        }
        for name in [
            "Apply (verifies the cluster at the end)",
            "Use the cluster from the runner",
        ] {
            assert!(
                matches!(outcome(name), Outcome::PassedWithout(ref l) if l.len() == 1),
                "{name}:\n{report}"
            );
        }
        // The kubeconfig the runner would use: cp1's address, the admin's key, private.
        let kubeconfig = run.dir.path().join("lab/admin.kubeconfig");
        let text = std::fs::read_to_string(&kubeconfig).expect("lab/admin.kubeconfig");
        let cp1 = run.carried_env()["KWIN_VAR_cp1_public"].clone();
        // (Only its server lines are shown: the file holds the admin's key.)
        let servers: Vec<&str> = text.lines().filter(|l| l.contains("server:")).collect();
        assert_eq!(servers, [format!("      server: \"https://{cp1}:6443\"")], "{servers:?}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&kubeconfig).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let real: Vec<&str> = done
            .iter()
            .filter(|(_, o)| matches!(o, Outcome::NeedsRealLab(_)))
            .map(|(s, _)| s.name.as_str())
            .collect();
        assert_eq!(real, ["Verify"], "{report}");
        // The reset step ignores kwin's exit code; kwin's own record of that run does not.
        let reset = last_run(&run);
        assert_eq!((reset["failed"].as_u64(), reset["hosts_failed"].as_u64()), (Some(0), Some(0)), "{reset}");
        assert!(reset["changed"].as_u64().unwrap_or(0) > 0, "{reset}");
        // The apply built the cluster, and the second one found it as the first left it.
        let events = |file: &str| {
            kwin_testkit::kwin::events(
                &std::fs::read_to_string(run.dir.path().join("lab").join(file))
                    .unwrap_or_else(|e| panic!("{file}: {e}")),
            )
        };
        let first = events("apply-1.jsonl");
        let summary = first.iter().find(|e| e["event"] == "summary").expect("summary");
        assert!(summary["changed"].as_u64().unwrap_or(0) > 0, "{summary}");
        let tasks = |s: &serde_json::Value| {
            ["ok", "changed"]
                .iter()
                .map(|k| s[k].as_u64().unwrap_or(0))
                .sum::<u64>()
        };
        let second = events("apply-2.jsonl");
        let again = second.iter().find(|e| e["event"] == "summary").expect("summary");
        assert_eq!(again["ok"].as_u64(), Some(tasks(summary)), "{again}");
        // The copy of the plan the workflow ran says what the lab changed, and why.
        let plan = std::fs::read_to_string(run.dir.path().join("lab/plan.toml")).expect("plan");
        for k in STAND_IN_KEYS {
            assert!(plan.contains(k.why), "{plan}");
        }
    }
    }
}
