//! Params of `service` (Linux: `linux/service.rs`, a systemd unit; Windows:
//! `windows/service.rs`, a service the SCM registers from `binary` and `args`).

/// Whether the service should run. Ansible's words are pointed at kwin's (`x-kwin-instead`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(extend("x-kwin-instead" = {
    "started": "\"started\" is Ansible's word: kwin's is \"running\"",
    "restarted": "kwin restarts a service when a file of its `restart_on` changed (a state would restart it on every apply): write \"running\" and list the files in `restart_on`",
    "reloaded": "kwin restarts a service when a file of its `restart_on` changed: write \"running\" and list the files in `restart_on`",
    "enabled": "start at boot is `enabled = true` (Linux) or `start_mode` (Windows), not a state"
}))]
pub enum RunState {
    Running,
    Stopped,
    /// Registered and configured; started or stopped only by someone else.
    Unchanged,
}

/// Windows start mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StartMode {
    #[default]
    Auto,
    Manual,
    Disabled,
}

/// A file the Windows service runs from, installed from a verified staging copy.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BinaryParam {
    /// The staged copy (what a `download` or `archive` step left).
    pub src: String,
    /// Where the service runs it from.
    pub dest: String,
}

/// Params of `service`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServiceParams {
    /// Unit name (Linux: `kubelet` means `kubelet.service`) or service name (Windows).
    pub name: String,
    /// `running`, `stopped` or `unchanged` (default: Linux `unchanged`, Windows `running`).
    pub state: Option<RunState>,
    /// Absolute paths: restart when any of them changed since the last (re)start kwin did.
    #[serde(default)]
    pub restart_on: Vec<String>,
    /// Start at boot. Linux only (Windows: `start_mode`).
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub enabled: Option<bool>,
    /// Absolute path of the executable (required on Windows). Windows only.
    #[schemars(extend("x-kwin-shell" = "windows"))]
    pub binary: Option<String>,
    /// Arguments, quoted for the Windows command line. Windows only.
    #[schemars(extend("x-kwin-shell" = "windows"))]
    pub args: Option<Vec<String>>,
    /// A program and its arguments the SCM runs instead, with `binary` and `args` after them.
    /// Windows only.
    #[schemars(extend("x-kwin-shell" = "windows"))]
    pub wrapper: Option<Vec<String>>,
    /// Display name. Windows only.
    #[schemars(extend("x-kwin-shell" = "windows"))]
    pub display_name: Option<String>,
    /// `auto` (default), `manual` or `disabled`. Windows only.
    #[schemars(extend("x-kwin-shell" = "windows"))]
    pub start_mode: Option<StartMode>,
    /// Service names it depends on (unset or empty: left as they are). Windows only.
    #[schemars(extend("x-kwin-shell" = "windows"))]
    pub depends_on: Option<Vec<String>>,
    /// The SCM restarts the service 10 s after it dies (default `true`). Windows only.
    #[schemars(extend("x-kwin-shell" = "windows"))]
    pub restart_on_failure: Option<bool>,
    /// Files the service runs from (`{ src, dest }`), replaced with the service stopped.
    /// Windows only.
    #[schemars(extend("x-kwin-shell" = "windows"))]
    pub binaries: Option<Vec<BinaryParam>>,
}

impl ServiceParams {
    /// The parameters only the Windows module reads, and whether each is set.
    pub(crate) fn windows_fields(&self) -> [(&'static str, bool); 8] {
        [
            ("binary", self.binary.is_some()),
            ("args", self.args.is_some()),
            ("wrapper", self.wrapper.is_some()),
            ("display_name", self.display_name.is_some()),
            ("start_mode", self.start_mode.is_some()),
            ("depends_on", self.depends_on.is_some()),
            ("restart_on_failure", self.restart_on_failure.is_some()),
            ("binaries", self.binaries.is_some()),
        ]
    }
}
