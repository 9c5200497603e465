//! `file` (Windows): a file with exact content, or no file.
//!
//! Parameters: `path` (absolute Windows path), `content` (text, written as UTF-8 bytes exactly
//! as given, no BOM, no newline conversion), `state` = "present" (default) | "absent".
//! No-op when the file's SHA-256 equals the content's. Changes: writes a new temporary file with
//! an unguessable name beside the target, checks it is still that plain file with that content,
//! and renames it over (atomic on NTFS); creates missing parent directories.
//! With the task's `sensitive = true`, the probe reads the file's hash only and diffs show
//! `sha256:… (sensitive)` for both sides (Windows has no mode bits to make it the default).
//! Output (read from the probe, also under a guard): `differs` = `true` when the file is not
//! the content (missing or another), else `false`; none with `state = "absent"`.
//!
//! ```toml
//! [[tasks]]
//! name = "kubelet-env"
//! module = "file"
//! on = { os = "windows" }
//! params = { path = 'C:\k\kubelet.env', content = "KUBELET_EXTRA_ARGS=--v=2\r\n" }
//! ```

use super::facts::{PathFact, PathState};
use super::{step, State};
use crate::paths::{windows_abs, windows_resource};
use crate::shared::file::{write_script, FileParams};
use crate::shared::linux_only;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::quote::ps_quote;
use kwin_engine::transport::Shell;
use sha2::{Digest, Sha256};

/// Files up to this size are embedded in the step script; larger ones are uploaded.
const EMBED_LIMIT: usize = 256 * 1024;
/// Current content is read back for a diff up to this size.
const DIFF_LIMIT: u64 = 256 * 1024;

#[derive(Debug, Clone)]
pub struct File {
    path: String,
    content: Option<Vec<u8>>,
    state: State,
    /// The task says `sensitive = true`.
    sensitive: bool,
}

impl Described for File {
    const NAME: &'static str = "file";
    const DOC: &'static str = "a file with the given content, or no file";
    type Params = FileParams;

    fn from_params(p: FileParams, _shell: Shell) -> Result<Self, ParamError> {
        linux_only("file", &p.linux_fields())?;
        windows_abs("path", &p.path)?;
        if p.state == State::Present && p.content.is_none() {
            return Err(ParamError::at(
                "content",
                "`content` is required when state is present",
            ));
        }
        Ok(File {
            path: p.path,
            content: p.content.map(String::into_bytes),
            state: p.state,
            sensitive: false,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![FactSample::windows(PathFact {
            path: "C:\\k\\x".into(),
            content_limit: 1024,
        })]
    }
}

impl File {
    fn fact(&self) -> PathFact {
        PathFact {
            path: self.path.clone(),
            // A sensitive file's content never comes back.
            content_limit: if self.sensitive { 0 } else { DIFF_LIMIT },
        }
    }

    fn diff(&self, st: &PathState, new: &[u8]) -> String {
        if self.sensitive {
            let old = st
                .sha256
                .as_deref()
                .filter(|_| st.exists)
                .map(kwin_engine::module::sensitive_digest);
            let new =
                (self.state == State::Present).then(|| kwin_engine::module::sensitive_hash(new));
            let mut d = format!("--- a/{p}\n+++ b/{p}\n", p = self.path);
            for (sign, v) in [('-', old), ('+', new)] {
                if let Some(v) = v {
                    d.push_str(&format!("{sign} {v}\n"));
                }
            }
            d
        } else {
            content_diff(&self.path, st.content().as_deref(), new)
        }
    }
}

/// Unified diff of two byte strings (lossy UTF-8), or a size/hash note for binary content.
pub(crate) fn content_diff(path: &str, old: Option<&[u8]>, new: &[u8]) -> String {
    let old_text = old.map(String::from_utf8_lossy).unwrap_or_default();
    let new_text = String::from_utf8_lossy(new);
    similar::TextDiff::from_lines(old_text.as_ref(), new_text.as_ref())
        .unified_diff()
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}

impl Module for File {
    /// The whole file when it sets content or removes the file.
    fn manages(&self) -> Vec<kwin_engine::module::Managed> {
        use kwin_engine::module::Managed;
        let whole = self.content.is_some() || self.state == State::Absent;
        vec![if whole {
            Managed::Whole(self.path.clone())
        } else {
            Managed::Part(self.path.clone())
        }]
    }

    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&self.fact(), shell)]
    }

    fn reads(&self) -> Vec<String> {
        vec![windows_resource(&self.path)]
    }

    fn mark_sensitive(&mut self) {
        self.sensitive = true;
    }

    /// `differs` ([`Module::fact_outputs`]) for a file with content to write.
    fn output_keys(&self, _shell: Shell) -> Option<Vec<&'static str>> {
        Some(
            if matches!(self.state, State::Present) && self.content.is_some() {
                vec!["differs"]
            } else {
                Vec::new()
            },
        )
    }

    /// `differs`: whether the file on the host is not the content this step writes (`true`
    /// when it is missing or another file), read from the probe: what an upgrade recipe's
    /// drain asks before a twin of this step rewrites the file inside the drained window
    /// (upgrade-worker's `upgrade-drain-runtime` reads windows-worker's `containerd-config`,
    /// whose own guard leaves joined nodes alone). A guarded step gives it too (`Guarded`
    /// passes its module's fact outputs through). None for `state = "absent"`.
    fn fact_outputs(&self, facts: &Facts) -> Option<std::collections::BTreeMap<String, String>> {
        if !matches!(self.state, State::Present) {
            return None;
        }
        let content = self.content.as_ref()?;
        let st: PathState = facts.get(&self.fact()).ok()?;
        let want = hex::encode(Sha256::digest(content));
        let differs = !(st.exists && !st.dir && st.sha256.as_deref() == Some(want.as_str()));
        Some(
            [("differs".to_string(), differs.to_string())]
                .into_iter()
                .collect(),
        )
    }

    fn sensitive(&self, _facts: &Facts) -> bool {
        self.sensitive
    }

    fn plan(&self, facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let st: PathState = facts.get(&self.fact())?;
        let touches = Touches::Resources(vec![windows_resource(&self.path)]);
        match (&self.state, &self.content) {
            (State::Absent, _) => {
                if !st.exists {
                    return Ok(Plan::noop("absent"));
                }
                if st.dir {
                    return Err(ModuleError::Precondition(format!(
                        "{} is a directory, not a file",
                        self.path
                    )));
                }
                Ok(Plan::Change(Change {
                    action: Action::Delete,
                    reason: "present".into(),
                    diff: Some(self.diff(&st, b"")),
                    steps: vec![step(format!(
                        "Remove-Item -LiteralPath {} -Force",
                        ps_quote(&self.path)
                    ))],
                    touches,
                }))
            }
            (State::Present, Some(content)) => {
                if st.dir {
                    return Err(ModuleError::Precondition(format!(
                        "{} is a directory, not a file",
                        self.path
                    )));
                }
                let want = hex::encode(Sha256::digest(content));
                if st.exists && st.sha256.as_deref() == Some(want.as_str()) {
                    return Ok(Plan::noop("content matches"));
                }
                let (action, reason) = if st.exists {
                    (Action::Update, "content differs")
                } else {
                    (Action::Create, "missing")
                };
                let steps = if content.len() <= EMBED_LIMIT {
                    vec![step(write_script(&self.path, content, ctx.nonce))]
                } else {
                    vec![Step::Put {
                        path: self.path.clone(),
                        content: content.clone(),
                        mode: None,
                    }]
                };
                Ok(Plan::Change(Change {
                    action,
                    reason: reason.into(),
                    diff: Some(self.diff(&st, content)),
                    steps,
                    touches,
                }))
            }
            (State::Present, None) => {
                Err(ModuleError::Unsupported("file: no content given".into()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kwin_engine::fact::FactOutput;
    use kwin_engine::module::Inputs;

    fn plan_with(f: &File, fact_stdout: &str) -> Change {
        let mut facts = Facts::new();
        let q = &f.facts(Shell::PowerShell)[0];
        facts.insert(
            q.key.clone(),
            FactOutput {
                stdout: fact_stdout.as_bytes().to_vec(),
                ..FactOutput::default()
            },
        );
        let inputs = Inputs::new();
        let ctx = Ctx {
            shell: Shell::PowerShell,
            host: "ww1",
            inputs: &inputs,
            nonce: "0123456789abcdef0123456789abcdef",
        };
        match f.plan(&facts, &ctx) {
            Ok(Plan::Change(c)) => c,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_sensitive_file_is_never_read_back_and_diffs_show_hashes() {
        let params =
            serde_json::json!({ "path": "C:\\k\\secret.txt", "content": "password=NewPw\r\n" });
        let plain = File::from_json(&params, Shell::PowerShell).expect("params");
        let mut marked = plain.clone();
        Module::mark_sensitive(&mut marked);
        assert!(Module::sensitive(&marked, &Facts::new()));
        assert!(!Module::sensitive(&plain, &Facts::new()));
        // The probe asks for the hash only.
        assert_eq!(marked.fact().content_limit, 0);
        use kwin_engine::fact::Fact;
        assert_ne!(plain.fact().key(), marked.fact().key());
        let old = "password=OldPw\r\n";
        let sha = hex::encode(Sha256::digest(old));
        let c = plan_with(
            &marked,
            &format!(r#"{{"size":16,"exists":true,"dir":false,"sha256":"{sha}"}}"#),
        );
        let d = c.diff.unwrap_or_default();
        assert!(!d.contains("Pw"), "{d}");
        assert!(
            d.contains(&format!("- sha256:{}… (sensitive)", &sha[..16])),
            "{d}"
        );
        assert!(
            d.contains(&kwin_engine::module::sensitive_hash(b"password=NewPw\r\n")),
            "{d}"
        );
        // Not sensitive: the diff shows the lines.
        let c = plan_with(
            &plain,
            &format!(
                r#"{{"size":16,"exists":true,"dir":false,"sha256":"{sha}","content_b64":"cGFzc3dvcmQ9T2xkUHcNCg=="}}"#
            ),
        );
        assert!(c.diff.unwrap_or_default().contains("+password=NewPw"));
    }
}
