//! `registry_value`: a registry value with a given kind and data.
//!
//! Parameters: `path` (provider path, `HKLM:\...`), `name`, `value` (string; or an integer for
//! DWord/QWord; or a list of strings for MultiString), `kind` = "String" (default for strings)
//! | "ExpandString" | "DWord" (default for integers) | "QWord" | "MultiString" (default for
//! lists), `state` = "present" (default) | "absent".
//! No-op when the value exists with that kind and data. Changes: creates the key if missing
//! and sets the value (`New-ItemProperty -Force`), or removes it.
//!
//! ```toml
//! [[tasks]]
//! name = "hns-flag"
//! module = "registry_value"
//! on = { os = "windows" }
//! params = { path = 'HKLM:\SYSTEM\CurrentControlSet\Services\hns\State', name = "EnableCompartmentNamespace", value = 1 }
//! ```

use super::facts::{RegistryValueFact, RegistryValueState};
use super::{step, State};
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Touches};
use kwin_engine::quote::ps_quote;
use kwin_engine::transport::Shell;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum Value {
    Int(i64),
    Text(String),
    List(Vec<String>),
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegistryValueParams {
    /// The key, as a provider path (`HKLM:\SYSTEM\...`); created when missing.
    path: String,
    /// The value's name.
    name: String,
    /// The data: a string, an integer (DWord/QWord) or a list of strings (MultiString);
    /// required when `state` is `present`.
    value: Option<Value>,
    /// `String` (default for strings), `ExpandString`, `DWord` (default for integers),
    /// `QWord` or `MultiString` (default for lists).
    kind: Option<String>,
    /// `present` (default) or `absent`.
    #[serde(default)]
    state: State,
}

#[derive(Debug, Clone)]
pub struct RegistryValue {
    path: String,
    name: String,
    kind: &'static str,
    /// Data as the fact renders it (decimal numbers, `\n`-joined lists).
    text: String,
    /// PowerShell expression for the data.
    expr: String,
    state: State,
}

impl Described for RegistryValue {
    const NAME: &'static str = "registry_value";
    const DOC: &'static str = "a registry value of the given type and data, or absent";
    type Params = RegistryValueParams;

    fn from_params(p: RegistryValueParams, _shell: Shell) -> Result<Self, ParamError> {
        let hive_ok = ["HKLM:\\", "HKCU:\\", "HKCR:\\", "HKU:\\", "HKCC:\\"]
            .iter()
            .any(|h| p.path.len() > h.len() && p.path[..h.len()].eq_ignore_ascii_case(h));
        if !hive_ok || p.path.contains(['\n', '\r', '\0']) {
            return Err(ParamError::at(
                "path",
                format!(
                    "`{}` is not a registry path like HKLM:\\SOFTWARE\\...",
                    p.path
                ),
            ));
        }
        let (kind, text, expr) = match (&p.value, p.kind.as_deref()) {
            (None, _) if p.state == State::Absent => ("String", String::new(), String::new()),
            (None, _) => return Err(ParamError::at("value", "`value` is required when state is present")),
            (Some(Value::Int(i)), None | Some("DWord")) => {
                if *i < 0 || *i > u32::MAX as i64 {
                    return Err(ParamError::at("value", "a DWord is 0..=4294967295"));
                }
                ("DWord", i.to_string(), format!("([uint32]{i})"))
            }
            (Some(Value::Int(i)), Some("QWord")) => {
                if *i < 0 {
                    return Err(ParamError::at("value", "a QWord is non-negative"));
                }
                ("QWord", i.to_string(), format!("([uint64]{i})"))
            }
            (Some(Value::Text(s)), None | Some("String")) => ("String", s.clone(), ps_quote(s)),
            (Some(Value::Text(s)), Some("ExpandString")) => ("ExpandString", s.clone(), ps_quote(s)),
            (Some(Value::List(v)), None | Some("MultiString")) => (
                "MultiString",
                v.join("\n"),
                format!("[string[]]@({})", v.iter().map(|s| ps_quote(s)).collect::<Vec<_>>().join(", ")),
            ),
            (_, Some(k)) => {
                return Err(ParamError::at("kind", format!("kind `{k}` does not fit the value (String, ExpandString, DWord, QWord, MultiString)")))
            }
        };
        Ok(RegistryValue {
            path: p.path,
            name: p.name,
            kind,
            text,
            expr,
            state: p.state,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![FactSample::windows(RegistryValueFact {
            path: "HKLM:\\X".into(),
            name: "v".into(),
        })]
    }
}

impl RegistryValue {
    fn fact(&self) -> RegistryValueFact {
        RegistryValueFact {
            path: self.path.clone(),
            name: self.name.clone(),
        }
    }
    fn resource(&self) -> String {
        format!(
            "registry:{}\\{}",
            self.path.to_ascii_lowercase(),
            self.name.to_ascii_lowercase()
        )
    }
}

impl Module for RegistryValue {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&self.fact(), shell)]
    }
    fn reads(&self) -> Vec<String> {
        vec![self.resource()]
    }
    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let st: RegistryValueState = facts.get(&self.fact())?;
        let touches = Touches::Resources(vec![self.resource()]);
        let (p, n) = (ps_quote(&self.path), ps_quote(&self.name));
        match self.state {
            State::Present if st.exists && st.kind == self.kind && st.value == self.text => {
                Ok(Plan::noop("value matches"))
            }
            State::Present => {
                let mut script = format!("if (-not (Test-Path -LiteralPath {p})) {{ New-Item -Path {p} -Force | Out-Null }}\n");
                if st.exists && st.kind != self.kind {
                    script.push_str(&format!("Remove-ItemProperty -LiteralPath {p} -Name {n}\n"));
                }
                script.push_str(&format!(
                    "New-ItemProperty -LiteralPath {p} -Name {n} -PropertyType {} -Value {} -Force | Out-Null",
                    self.kind, self.expr
                ));
                Ok(Plan::Change(Change {
                    diff: Some(format!(
                        "{}+ {}\\{} ({}) = {}",
                        if st.exists {
                            format!(
                                "- {}\\{} ({}) = {}\n",
                                self.path, self.name, st.kind, st.value
                            )
                        } else {
                            String::new()
                        },
                        self.path,
                        self.name,
                        self.kind,
                        self.text
                    )),
                    steps: vec![step(script)],
                    touches,
                    ..Change::upsert(st.exists, "value differs")
                }))
            }
            State::Absent if !st.exists => Ok(Plan::noop("absent")),
            State::Absent => Ok(Plan::Change(Change {
                action: Action::Delete,
                reason: "present".into(),
                diff: Some(format!(
                    "- {}\\{} ({}) = {}",
                    self.path, self.name, st.kind, st.value
                )),
                steps: vec![step(format!(
                    "Remove-ItemProperty -LiteralPath {p} -Name {n}"
                ))],
                touches,
            })),
        }
    }
}
