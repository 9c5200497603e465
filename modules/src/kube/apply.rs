//! `kube_apply`: objects applied with server-side apply, owned by kwin's field manager.
//!
//! Parameters (exactly one source): the fields of [`KubeApplyParams`],
//! shown by `kwin doc kube_apply` and in docs/modules.md.
//!
//! No-op when `kubectl diff --server-side --field-manager=kwin --force-conflicts` finds no
//! difference: a server-side dry run of the same apply, so a re-apply never writes. kubectl
//! compares two reads of each object, a GET (LIVE) and then the dry-run apply (MERGED); a
//! controller that writes the object in between (the DaemonSet and Deployment controllers
//! update `status` while pods are being created, i.e. right after every first apply) makes
//! MERGED carry a newer `status` and `metadata.resourceVersion` than LIVE, a difference kwin
//! did not cause and no apply removes. So the fact runs kubectl diff with
//! `KUBECTL_EXTERNAL_DIFF` set to a small script ([`DIFF_PROGRAM`]) that drops the top-level
//! `status:` block and `metadata.resourceVersion` / `metadata.generation` from both sides
//! before running the `diff -u -N LIVE MERGED` kubectl runs by default (same output format).
//! kwin never sets those fields (an apply ignores `status` on kinds with a status
//! subresource, as every built-in workload and the CRDs kwin applies have; on a kind without
//! one a `status` in the manifest would go unchecked); `generation` only moves with a spec
//! change, which shows itself.
//! (`metadata.managedFields` kubectl hides by default.) Changes:
//! `kubectl apply --server-side --field-manager=kwin --force-conflicts` (fields other managers
//! own are taken over; fields kwin does not set are left alone). Partial objects (e.g. only
//! `spec.strictAffinity` of an IPAMConfig) are fine: server-side apply merges them.
//!
//! Manifest text up to 256 KiB travels inside the fact and step scripts (base64); larger text
//! is uploaded once to `cache_dir/<sha256>.yaml` and referenced from there.
//!
//! ```toml
//! [[tasks]]
//! name = "windows-runtimeclass"
//! module = "kube_apply"
//! on = { hosts = ["cp1"] }
//! params.manifest = '''
//! apiVersion: node.k8s.io/v1
//! kind: RuntimeClass
//! metadata: { name: windows-2019 }
//! handler: runhcs-wcow-process
//! '''
//! ```

use super::facts::{DiffFact, DiffState};
use super::script::{cluster_guard, die, kubectl, write_b64, TEMP_DIR};
use super::{ADMIN_CONF, API_RESOURCE};
use crate::paths::posix_abs_line;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// Manifests up to this size travel inside scripts; larger ones are uploaded.
pub const EMBED_LIMIT: usize = 256 * 1024;
/// Default `cache_dir`.
pub const CACHE_DIR: &str = "/var/cache/kwin/manifests";
/// Diffs longer than this many lines are cut in the plan.
const DIFF_LINES: usize = 400;

/// The diff fact's `KUBECTL_EXTERNAL_DIFF` program, written to `$d/bin/kwin-diff` and named
/// by its bare name with `$d/bin` first on PATH (kubectl splits the variable on spaces, so a
/// temporary path with a space would break). kubectl (kubernetes/kubernetes
/// `staging/src/k8s.io/kubectl/pkg/cmd/diff/diff.go`, `DiffProgram.getCommand` and
/// `NewCmdDiff`; the exit codes are also in `kubectl diff --help`) runs it with the LIVE and
/// MERGED directories as its first arguments (flags in the variable would come after them;
/// kwin gives none) and exits with its exit code when that is 0 (same) or 1 (differences);
/// anything above 1 is an error. Each directory holds one YAML file per object, named like
/// `apps.v1.DaemonSet.ns.name` (empty in LIVE for an object that does not exist yet):
/// kubectl's own temporary copies, removed after the diff, printed with sorted keys and
/// two-space indentation, so top-level keys are at column 0 (list items there start with
/// `- `) and metadata's fields at two spaces. The program drops the top-level `status` block
/// and metadata's `generation` and `resourceVersion` from each file, then runs the diff
/// kubectl runs without the variable.
pub const DIFF_PROGRAM: &str = r#"#!/bin/sh
# kubectl diff's LIVE and MERGED without what concurrent writers change (kube_apply).
for f in "$1"/* "$2"/*; do
  [ -f "$f" ] || continue
  awk '/^[^ -]/ { t = $1 } t == "status:" { next }
    t == "metadata:" && /^  (generation|resourceVersion): / { next } { print }' \
    "$f" > "$f.kwin" && mv -f "$f.kwin" "$f" || exit 2
done
exec diff -u -N "$1" "$2"
"#;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KubeApplyParams {
    /// YAML (one or more documents). Exactly one of `manifest`, `src`, `path` and `url`.
    manifest: Option<String>,
    /// Absolute path of a manifest on the machine running kwin (read when the plan is
    /// loaded).
    src: Option<String>,
    /// Absolute path of a manifest on the control plane (e.g. written by a `download`
    /// task).
    path: Option<String>,
    /// `https://` manifest, fetched on the control plane once into `cache_dir`.
    url: Option<String>,
    /// With `url`: the manifest's expected SHA-256.
    sha256: Option<String>,
    /// `{ kind, name, namespace?, merge = {...} }`: merge patches applied to the named
    /// objects before the apply (kustomize, built into kubectl); a patch whose object is
    /// not in the manifest is an error.
    #[serde(default)]
    patches: Vec<PatchParam>,
    /// The cluster to apply to (default `/etc/kubernetes/admin.conf`).
    kubeconfig: Option<String>,
    /// Server-side apply field manager (default `kwin`); tasks that apply parts of one
    /// object need distinct managers.
    field_manager: Option<String>,
    /// Where fetched and uploaded manifests are kept on the control plane (default
    /// `/var/cache/kwin/manifests`).
    cache_dir: Option<String>,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct PatchParam {
    kind: String,
    name: String,
    namespace: Option<String>,
    merge: serde_json::Map<String, serde_json::Value>,
}

/// Where the manifest comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    /// Text kwin has (`manifest`, `src`), embedded in scripts.
    Inline(Vec<u8>),
    /// Text kwin has, too large to embed: uploaded to this path on the host.
    Uploaded { content: Vec<u8>, path: String },
    /// A file on the host.
    HostFile(String),
    /// Fetched on the host into `cached`.
    Url {
        url: String,
        sha256: Option<String>,
        cached: String,
    },
}

#[derive(Debug, Clone)]
pub struct KubeApply {
    source: Source,
    /// What the plan calls the source, for reasons: "manifest", the path or the URL.
    origin: String,
    /// With patches: the kustomization directory's files and each patch's target.
    kustomization: Option<Kustomization>,
    kubeconfig: String,
    field_manager: String,
}

/// `kustomization.yaml` (as JSON, which kustomize reads as YAML) and one `patch-N.json` per
/// patch, written next to the manifest; and what each patch must find.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Kustomization {
    files: Vec<(String, String)>,
    targets: Vec<Target>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    kind: String,
    name: String,
    namespace: Option<String>,
}

impl Target {
    fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// Kubernetes names, kinds and field managers: the characters their API allows (and nothing a
/// script could misread).
fn check_word(field: &str, v: &str, extra: &[char]) -> Result<(), ParamError> {
    if v.is_empty()
        || !v
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || extra.contains(&c))
    {
        return Err(ParamError::at(
            field,
            format!("`{v}` is not a valid Kubernetes name"),
        ));
    }
    Ok(())
}

fn sha256_hex(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

impl Described for KubeApply {
    const NAME: &'static str = "kube_apply";
    const DOC: &'static str = "Kubernetes objects applied server-side from the first control plane, checked by a server-side diff";
    type Params = KubeApplyParams;

    fn from_params(p: KubeApplyParams, _shell: Shell) -> Result<Self, ParamError> {
        let kubeconfig = p.kubeconfig.unwrap_or_else(|| ADMIN_CONF.to_string());
        posix_abs_line("kubeconfig", &kubeconfig)?;
        let field_manager = p.field_manager.unwrap_or_else(|| "kwin".to_string());
        check_word("field_manager", &field_manager, &['_', ':'])?;
        let cache_dir = p.cache_dir.unwrap_or_else(|| CACHE_DIR.to_string());
        posix_abs_line("cache_dir", &cache_dir)?;
        let cache_dir = cache_dir.trim_end_matches('/').to_string();
        let given: Vec<&str> = [
            ("manifest", p.manifest.is_some()),
            ("src", p.src.is_some()),
            ("path", p.path.is_some()),
            ("url", p.url.is_some()),
        ]
        .iter()
        .filter(|(_, set)| *set)
        .map(|(n, _)| *n)
        .collect();
        if given.len() != 1 {
            return Err(ParamError::new(format!(
                "give exactly one of `manifest`, `src`, `path`, `url` (got {})",
                if given.is_empty() {
                    "none".to_string()
                } else {
                    given.join(", ")
                }
            )));
        }
        if p.sha256.is_some() && p.url.is_none() {
            return Err(ParamError::at("sha256", "`sha256` checks a `url` download"));
        }
        let inline = |content: Vec<u8>| {
            if content.len() <= EMBED_LIMIT {
                Source::Inline(content)
            } else {
                let path = format!("{cache_dir}/{}.yaml", sha256_hex(&content));
                Source::Uploaded { content, path }
            }
        };
        let (source, origin) = if let Some(m) = p.manifest {
            if m.trim().is_empty() {
                return Err(ParamError::at("manifest", "the manifest is empty"));
            }
            (inline(m.into_bytes()), "manifest".to_string())
        } else if let Some(src) = p.src {
            posix_abs_line("src", &src)?;
            let content = std::fs::read(&src)
                .map_err(|e| ParamError::at("src", format!("cannot read {src}: {e}")))?;
            (inline(content), src)
        } else if let Some(path) = p.path {
            posix_abs_line("path", &path)?;
            (Source::HostFile(path.clone()), path)
        } else if let Some(url) = p.url {
            if !(url.starts_with("https://") || url.starts_with("http://"))
                || url.contains(['\n', '\r', '\0', ' '])
            {
                return Err(ParamError::at(
                    "url",
                    format!("`{url}` is not an http(s) URL"),
                ));
            }
            let sha256 = match p.sha256 {
                Some(s) => {
                    let s = s.to_ascii_lowercase();
                    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
                        return Err(ParamError::at("sha256", "expected 64 hex digits"));
                    }
                    Some(s)
                }
                None => None,
            };
            if sha256.is_none() && url.starts_with("http://") {
                return Err(ParamError::at(
                    "url",
                    format!(
                        "`{url}` is plain HTTP and no `sha256` checks what the host fetches: anyone on the way could hand it a manifest of their own, applied with the admin kubeconfig; give `sha256`, or use https"
                    ),
                ));
            }
            let base = url
                .rsplit('/')
                .next()
                .filter(|b| {
                    !b.is_empty()
                        && b.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
                })
                .unwrap_or("manifest.yaml");
            let cached = format!("{cache_dir}/{}-{base}", &sha256_hex(url.as_bytes())[..16]);
            (
                Source::Url {
                    url: url.clone(),
                    sha256,
                    cached,
                },
                url,
            )
        } else {
            return Err(ParamError::new("no manifest source given"));
        };
        let kustomization = if p.patches.is_empty() {
            None
        } else {
            Some(kustomization(&p.patches)?)
        };
        Ok(KubeApply {
            source,
            origin,
            kustomization,
            kubeconfig,
            field_manager,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![FactSample::kube(DiffFact {
            script: "kubectl get ns".into(),
        })]
    }
}

impl KubeApply {
    fn fact(&self) -> DiffFact {
        DiffFact {
            script: self.script(Mode::Diff),
        }
    }

    /// The shared script: guard, get the manifest into `$m`, patch, then diff or apply.
    fn script(&self, mode: Mode) -> String {
        let mut s = String::new();
        s.push_str(&cluster_guard(&self.kubeconfig));
        s.push_str(TEMP_DIR);
        match &self.source {
            Source::Inline(content) => {
                s.push_str(&write_b64("\"$d/manifest.yaml\"", content));
                s.push_str("m=\"$d/manifest.yaml\"\n");
            }
            Source::Uploaded { path, .. } => {
                let p = sh_quote(path);
                if mode == Mode::Diff {
                    s.push_str(&format!(
                        "[ -f {p} ] || {{ echo 'kwin: not-staged the manifest is not uploaded to the host yet'; exit 0; }}\n"
                    ));
                }
                s.push_str(&format!("m={p}\n"));
            }
            Source::HostFile(path) => {
                let p = sh_quote(path);
                if mode == Mode::Diff {
                    s.push_str(&format!(
                        "[ -r {p} ] || {{ printf '%s\\n' {}; exit 0; }}\n",
                        sh_quote(&format!("kwin: not-staged {path} does not exist yet"))
                    ));
                } else {
                    s.push_str(&format!(
                        "[ -r {p} ] || {}\n",
                        die(&format!("{path} does not exist"))
                    ));
                }
                s.push_str(&format!("m={p}\n"));
            }
            Source::Url {
                url,
                sha256,
                cached,
            } => {
                let c = sh_quote(cached);
                let check = match sha256 {
                    Some(want) => format!(
                        " && [ \"$(sha256sum {c} | cut -d' ' -f1)\" = {} ]",
                        sh_quote(want)
                    ),
                    None => String::new(),
                };
                match mode {
                    Mode::Diff => s.push_str(&format!(
                        "[ -f {c} ]{check} || {{ printf '%s\\n' {}; exit 0; }}\n",
                        sh_quote(&format!("kwin: not-staged {url} is not fetched yet"))
                    )),
                    Mode::Apply => s.push_str(&fetch_script(url, sha256.as_deref(), cached)),
                }
                s.push_str(&format!("m={c}\n"));
            }
        }
        if let Some(k) = &self.kustomization {
            s.push_str("mkdir \"$d/k\" && cp \"$m\" \"$d/k/manifest.yaml\" || exit 1\n");
            for (name, text) in &k.files {
                s.push_str(&write_b64(&format!("\"$d/k/{name}\""), text.as_bytes()));
            }
            s.push_str(
                "kubectl kustomize \"$d/k\" > \"$d/out.yaml\" || exit 1\nm=\"$d/out.yaml\"\n",
            );
            // Every patch must have found its object: list kind/namespace/name of each
            // document kustomize wrote (top-level keys at column 0, metadata fields at 2).
            s.push_str(OBJECTS_AWK);
            for t in &k.targets {
                let pattern = format!(
                    "^{}/{}/{}$",
                    t.kind,
                    t.namespace.as_deref().unwrap_or("[^/]*"),
                    t.name
                );
                let missing = format!("patch target {} is not in the manifest", t.describe());
                let on_missing = match mode {
                    Mode::Diff => format!(
                        "{{ printf '%s\\n' {}; exit 0; }}",
                        sh_quote(&format!("kwin: target-missing {missing}"))
                    ),
                    Mode::Apply => die(&missing),
                };
                s.push_str(&format!(
                    "grep -q {} \"$d/objects\" || {on_missing}\n",
                    sh_quote(&pattern)
                ));
            }
        }
        let common = format!(
            "--server-side --field-manager={} --force-conflicts -f \"$m\"",
            sh_quote(&self.field_manager)
        );
        let k = kubectl(&self.kubeconfig);
        match mode {
            Mode::Diff => s.push_str(&format!(
                "mkdir \"$d/bin\" || exit 1\n\
                 cat > \"$d/bin/kwin-diff\" <<'KWIN_DIFF'\n{DIFF_PROGRAM}KWIN_DIFF\n\
                 chmod 700 \"$d/bin/kwin-diff\" || exit 1\n\
                 KUBECTL_EXTERNAL_DIFF=kwin-diff PATH=\"$d/bin:$PATH\" \
                 {k} diff {common} > \"$d/diff\" 2> \"$d/err\"\nrc=$?\n\
                 echo \"kwin: diff $rc\"\ncat \"$d/diff\"\ncat \"$d/err\" >&2\nexit 0\n"
            )),
            Mode::Apply => s.push_str(&format!("{k} apply {common}\n")),
        }
        s
    }
}

/// Lists `kind/namespace/name` of every document kustomize wrote to `$m` (top-level keys at
/// column 0, metadata fields indented by two spaces) into `$d/objects`.
const OBJECTS_AWK: &str = "awk '
function emit() { if (k != \"\") print k \"/\" ns \"/\" n; k = \"\"; n = \"\"; ns = \"\"; s = \"\" }
/^---$/ { emit(); next }
/^[^ #]/ { s = $1 }
/^kind: / { k = $2 }
s == \"metadata:\" && /^  name: / { n = $2 }
s == \"metadata:\" && /^  namespace: / { ns = $2 }
END { emit() }
' \"$m\" > \"$d/objects\" || exit 1
";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Diff,
    Apply,
}

/// Fetch `url` into `cached` (verified, atomically), unless an intact copy is there.
fn fetch_script(url: &str, sha256: Option<&str>, cached: &str) -> String {
    let c = sh_quote(cached);
    let u = sh_quote(url);
    let verify = match sha256 {
        Some(want) => format!(
            "got=$(sha256sum \"$d/fetch\" | cut -d' ' -f1)\n\
             [ \"$got\" = {w} ] || {{ printf '%s: sha256 is %s, expected %s\\n' {u} \"$got\" {w} >&2; exit 1; }}\n",
            w = sh_quote(want),
        ),
        None => String::new(),
    };
    // The URL never on a command line (`crate::private_text`).
    let (curl, body) = crate::private_text::curl("-fsSL --retry 3", "\"$d/fetch\"", url);
    let curl = crate::private_text::on_fd(&curl, "", &body);
    let wget = match crate::private_text::wget("\"$d/fetch\"", url) {
        (cmd, Some(body)) => crate::private_text::on_fd(&cmd, "", &body),
        (cmd, None) => format!("{cmd}\n"),
    };
    format!(
        "mkdir -p \"$(dirname {c})\" || exit 1\n\
         if command -v curl >/dev/null 2>&1; then {curl}\
         elif command -v wget >/dev/null 2>&1; then {wget}\
         else false; fi || {}\n\
         {verify}mv -f \"$d/fetch\" {c} || exit 1\n",
        die(&format!("cannot fetch {url}"))
    )
}

/// The kustomization of `patches`: one strategic-merge patch file per param; for maps of
/// strings (ConfigMap data, nodeSelector) that is an RFC 7386 merge.
fn kustomization(patches: &[PatchParam]) -> Result<Kustomization, ParamError> {
    let mut files = Vec::new();
    let mut list = Vec::new();
    let mut targets = Vec::new();
    for (i, pp) in patches.iter().enumerate() {
        check_word(&format!("patches.{i}.kind"), &pp.kind, &[])?;
        check_word(&format!("patches.{i}.name"), &pp.name, &[])?;
        if let Some(ns) = &pp.namespace {
            check_word(&format!("patches.{i}.namespace"), ns, &[])?;
        }
        if pp.merge.contains_key("metadata") || pp.merge.contains_key("kind") {
            return Err(ParamError::at(
                format!("patches.{i}.merge"),
                "`merge` holds the fields to change, without kind or metadata",
            ));
        }
        let mut meta = serde_json::Map::new();
        meta.insert("name".into(), pp.name.clone().into());
        if let Some(ns) = &pp.namespace {
            meta.insert("namespace".into(), ns.clone().into());
        }
        let mut obj = serde_json::Map::new();
        obj.insert("kind".into(), pp.kind.clone().into());
        obj.insert("metadata".into(), meta.clone().into());
        obj.extend(pp.merge.clone());
        let name = format!("patch-{i}.json");
        let text = serde_json::to_string_pretty(&serde_json::Value::Object(obj))
            .map_err(|e| ParamError::at(format!("patches.{i}"), e.to_string()))?;
        files.push((name.clone(), text + "\n"));
        list.push(serde_json::json!({ "path": name, "target": meta_target(pp) }));
        targets.push(Target {
            kind: pp.kind.clone(),
            name: pp.name.clone(),
            namespace: pp.namespace.clone(),
        });
    }
    let k = serde_json::json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": ["manifest.yaml"],
        "patches": list,
    });
    let text = serde_json::to_string_pretty(&k).map_err(|e| ParamError::new(e.to_string()))?;
    files.insert(0, ("kustomization.yaml".to_string(), text + "\n"));
    Ok(Kustomization { files, targets })
}

fn meta_target(pp: &PatchParam) -> serde_json::Value {
    let mut target = serde_json::Map::new();
    target.insert("kind".into(), pp.kind.clone().into());
    target.insert("name".into(), pp.name.clone().into());
    if let Some(ns) = &pp.namespace {
        target.insert("namespace".into(), ns.clone().into());
    }
    serde_json::Value::Object(target)
}

/// The first `n` lines of `text`, and a note of how many were cut.
fn cut_lines(text: &str, n: usize) -> String {
    let total = text.lines().count();
    if total <= n {
        return text.to_string();
    }
    let mut s: String = text.lines().take(n).collect::<Vec<_>>().join("\n");
    s.push_str(&format!("\n... {} more lines\n", total - n));
    s
}

impl KubeApply {
    /// The kustomization directory's files, one after the other under `# <file>` lines, for
    /// goldens and docs.
    pub fn kustomization_text(&self) -> Option<String> {
        self.kustomization.as_ref().map(|k| {
            k.files
                .iter()
                .map(|(name, text)| format!("# {name}\n{text}"))
                .collect::<String>()
        })
    }

    /// The apply step's script.
    pub fn apply_script(&self) -> String {
        self.script(Mode::Apply)
    }

    /// The diff fact's script.
    pub fn diff_script(&self) -> String {
        self.script(Mode::Diff)
    }

    fn steps(&self) -> Vec<Step> {
        let mut steps = Vec::new();
        if let Source::Uploaded { content, path } = &self.source {
            steps.push(Step::Run(format!(
                "mkdir -p \"$(dirname {})\"",
                sh_quote(path)
            )));
            steps.push(Step::Put {
                path: path.clone(),
                content: content.clone(),
                mode: Some(0o600),
            });
        }
        steps.push(Step::Run(self.apply_script()));
        steps
    }
}

impl Module for KubeApply {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&self.fact(), shell)]
    }

    fn reads(&self) -> Vec<String> {
        let mut r = vec![API_RESOURCE.to_string(), self.kubeconfig.clone()];
        if let Source::HostFile(p) = &self.source {
            r.push(p.clone());
        }
        r
    }

    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let state = facts.get(&self.fact())?;
        let touches = Touches::Resources(vec![API_RESOURCE.to_string()]);
        let change = |action, reason: String, diff| {
            Ok(Plan::Change(Change {
                action,
                reason,
                diff,
                steps: self.steps(),
                touches: touches.clone(),
            }))
        };
        match state {
            DiffState::Same => Ok(Plan::noop(format!(
                "the cluster matches {} (server-side dry run)",
                self.origin
            ))),
            DiffState::NoCluster(nc) => change(
                Action::Create,
                format!("cannot compare yet: {}", nc.describe(&self.kubeconfig)),
                None,
            ),
            DiffState::NotStaged(why) => change(Action::Update, why, None),
            DiffState::Pending(why) => change(Action::Create, why, None),
            DiffState::TargetMissing(why) => Err(ModuleError::Precondition(format!(
                "{why} ({})",
                self.origin
            ))),
            DiffState::Differs(d) => {
                let n = d.objects.len();
                let names = d
                    .objects
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ");
                let more = if n > 3 {
                    format!(" and {} more", n - 3)
                } else {
                    String::new()
                };
                let (action, reason) = if n > 0 && d.new == n {
                    (
                        Action::Create,
                        format!(
                            "{n} new object{}: {names}{more}",
                            if n == 1 { "" } else { "s" }
                        ),
                    )
                } else {
                    (
                        Action::Update,
                        format!(
                            "{n} object{} differ{}: {names}{more}",
                            if n == 1 { "" } else { "s" },
                            if n == 1 { "s" } else { "" }
                        ),
                    )
                };
                change(action, reason, Some(cut_lines(&d.text, DIFF_LINES)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_source() {
        let e = KubeApply::from_json(&serde_json::json!({}), Shell::Posix).expect_err("none");
        assert!(e.message.contains("got none"), "{e}");
        let e = KubeApply::from_json(
            &serde_json::json!({"manifest": "a: b", "url": "https://x/y"}),
            Shell::Posix,
        )
        .expect_err("two");
        assert!(e.message.contains("manifest, url"), "{e}");
        // A template may render the unused source to null.
        assert!(KubeApply::from_json(
            &serde_json::json!({"url": null, "src": null, "manifest": "a: b"}),
            Shell::Posix
        )
        .is_ok());
    }

    #[test]
    fn large_inline_manifests_are_uploaded() {
        let big = "x: y\n".repeat(EMBED_LIMIT / 5 + 10);
        let m = KubeApply::from_json(&serde_json::json!({ "manifest": big }), Shell::Posix)
            .expect("build");
        let steps = m.steps();
        assert!(matches!(&steps[1], Step::Put { path, .. } if path.starts_with(CACHE_DIR)));
        assert!(m.diff_script().len() < 4096);
    }

    /// Run [`DIFF_PROGRAM`] (real sh, awk and diff) on LIVE and MERGED directories holding
    /// these files; its exit code and output as the diff fact parses it.
    fn run_diff_program(
        files: &[(&str, &str, Option<&str>)],
    ) -> (i32, super::super::facts::ObjectDiff) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path();
        let (live, merged) = (dir.join("LIVE-1"), dir.join("MERGED-2"));
        std::fs::create_dir_all(&live).expect("mkdir");
        std::fs::create_dir_all(&merged).expect("mkdir");
        for (name, after, before) in files {
            std::fs::write(merged.join(name), after).expect("write");
            std::fs::write(live.join(name), before.unwrap_or_default()).expect("write");
        }
        let prog = dir.join("kwin-diff");
        std::fs::write(&prog, DIFF_PROGRAM).expect("write");
        let out = std::process::Command::new("sh")
            .arg(&prog)
            .arg(&live)
            .arg(&merged)
            .output()
            .expect("run sh");
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        (
            out.status.code().unwrap_or(-1),
            super::super::facts::normalize_diff(&lines),
        )
    }

    /// A DaemonSet as kubectl diff prints it (sorted keys, two-space indentation).
    fn daemonset(rv: u32, generation: u32, image: &str, ready: u32) -> String {
        format!(
            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  annotations:\n    \
             deprecated.daemonset.template.generation: \"{generation}\"\n  creationTimestamp: \
             \"2026-01-01T00:00:00Z\"\n  generation: {generation}\n  name: ds\n  namespace: ns\n  \
             resourceVersion: \"{rv}\"\n  uid: 0b8f\nspec:\n  selector:\n    matchLabels:\n      \
             app: ds\n  template:\n    spec:\n      containers:\n      - image: {image}\n        \
             name: c\nstatus:\n  conditions:\n  - type: X\n  numberReady: {ready}\n  \
             observedGeneration: {ready}\n"
        )
    }

    #[test]
    fn diff_program_ignores_concurrent_status_writes() {
        let ds = "apps.v1.DaemonSet.ns.ds";
        // A controller wrote the status between kubectl's GET and its dry run.
        let (rc, d) = run_diff_program(&[(
            ds,
            &daemonset(12, 1, "img:1", 3),
            Some(&daemonset(11, 1, "img:1", 2)),
        )]);
        assert_eq!((rc, d.objects.len()), (0, 0), "{}", d.text);
        // A spec change still shows, without the churn around it.
        let (rc, d) = run_diff_program(&[(
            ds,
            &daemonset(12, 2, "img:2", 3),
            Some(&daemonset(11, 1, "img:1", 2)),
        )]);
        assert_eq!((rc, d.objects.clone(), d.new), (1, vec![ds.to_string()], 0));
        assert!(
            d.text
                .contains("-      - image: img:1\n+      - image: img:2\n"),
            "{}",
            d.text
        );
        assert!(
            d.text.contains("--- live/apps.v1.DaemonSet.ns.ds\n"),
            "{}",
            d.text
        );
        for gone in [
            "status:",
            "observedGeneration",
            "resourceVersion",
            "  generation:",
        ] {
            assert!(!d.text.contains(gone), "{gone} in {}", d.text);
        }
        // Objects that do not exist yet: an empty LIVE file, as kubectl writes it.
        let (rc, d) = run_diff_program(&[
            (ds, &daemonset(1, 1, "img:1", 0), None),
            (
                "v1.ConfigMap.ns.cm",
                "apiVersion: v1\nkind: ConfigMap\n",
                None,
            ),
        ]);
        assert_eq!((rc, d.objects.len(), d.new), (1, 2, 2), "{}", d.text);
        // Top-level list items at column 0 (e.g. a RoleBinding's subjects) stay.
        let rb = |who: &str| format!("kind: RoleBinding\nsubjects:\n- kind: User\n  name: {who}\n");
        let (rc, d) = run_diff_program(&[("rbac.v1.RoleBinding.ns.rb", &rb("b"), Some(&rb("a")))]);
        assert_eq!(rc, 1, "{}", d.text);
        assert!(d.text.contains("+  name: b"), "{}", d.text);
    }

    #[test]
    fn cut_diffs() {
        let t = "a\n".repeat(10);
        assert_eq!(cut_lines(&t, 20), t);
        assert!(cut_lines(&t, 3).ends_with("... 7 more lines\n"));
    }
}
