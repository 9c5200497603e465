//! Params of the modules that exist for both shells: ONE type per module, read by its Linux
//! and its Windows implementation.
//!
//! A plan's task names a module, not a shell: `kwin schema` can describe a task's `params`
//! only if a module has one set of parameters. A parameter that only one shell's module
//! understands says so in its description ("Linux only", "Windows only") and in its schema
//! (`x-kwin-shell`); the other shell's module refuses it at that parameter
//! ([`linux_only`], [`windows_only`]) instead of ignoring it.

use kwin_engine::module::ParamError;

pub mod archive;
pub mod command;
pub mod directory;
pub mod download;
pub mod file;
pub mod only_if;
pub mod reboot;
pub mod registry_mirrors;
pub mod service;

/// `present` (default) or `absent`, the common `state` parameter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(extend("x-kwin-instead" = {
    "installed": "write \"present\"",
    "removed": "write \"absent\"",
    "latest": "kwin never upgrades a package on its own: write \"present\" and pin the one you want in `version`",
    "started": "`state` here is \"present\" or \"absent\"; a service's is in the `service` module"
}))]
pub enum State {
    #[default]
    Present,
    Absent,
}

/// A file mode as written in a plan: a string of octal digits (`"0644"`, recommended;
/// `"0o644"` too), an integer whose decimal digits are read as octal (`644`), or TOML's octal
/// literal (`0o644`, read as the mode it spells: the plan loader keeps its form).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum RawMode {
    Text(String),
    Number(u64),
}

impl RawMode {
    /// The permission bits, or a param error at `path`.
    pub fn bits(&self, path: &str) -> Result<u32, ParamError> {
        let digits = match self {
            // `"0o644"`: TOML's octal literal, quoted.
            RawMode::Text(s) => {
                let s = s.trim();
                s.strip_prefix("0o").unwrap_or(s).to_string()
            }
            RawMode::Number(n) => n.to_string(),
        };
        let ok = !digits.is_empty()
            && digits.len() <= 4
            && digits.bytes().all(|b| (b'0'..=b'7').contains(&b));
        let bits = if ok {
            u32::from_str_radix(&digits, 8).ok()
        } else {
            None
        };
        bits.filter(|b| *b <= 0o7777).ok_or_else(|| {
            ParamError::at(
                path,
                format!("bad mode `{digits}`: expected up to 4 octal digits, like \"0644\""),
            )
        })
    }
}

/// `true`: the default of boolean params that are on unless turned off.
pub(crate) fn yes() -> bool {
    true
}

fn refuse(only: &str, module: &str, given: &[(&str, bool)]) -> Result<(), ParamError> {
    match given.iter().find(|(_, set)| *set) {
        Some((field, _)) => Err(ParamError::at(
            *field,
            format!("`{field}` is a {only}-only parameter of `{module}`"),
        )),
        None => Ok(()),
    }
}

/// Refuse, on a Windows host, the first of `given` (name, whether the plan set it) that is set:
/// those parameters mean something only to the Linux module.
pub(crate) fn linux_only(module: &str, given: &[(&str, bool)]) -> Result<(), ParamError> {
    refuse("Linux", module, given)
}

/// Refuse, on a Linux host, the first of `given` that is set.
pub(crate) fn windows_only(module: &str, given: &[(&str, bool)]) -> Result<(), ParamError> {
    refuse("Windows", module, given)
}
