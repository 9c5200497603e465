//! `service` (Windows): a Windows service registered with a command line and start mode, and
//! running (or stopped); restarted once when a file it watches changed.
//!
//! Parameters: `name` (letters, digits, `-`, `_`, `.`), `binary` (absolute path of the
//! executable), `args` (list of arguments; quoted for the Windows command line), `display_name`,
//! `start_mode` = "auto" (default) | "manual" | "disabled", `state` = "running" (default) |
//! "stopped" | "unchanged", `depends_on` (service names), `restart_on` (paths: restart when any
//! of their contents changed since the last (re)start kwin did), `restart_on_failure` (default
//! true: the SCM restarts the service 10 s after it dies).
//! No-op when registered with the same command line and start mode, in the wanted state, and
//! no watched file changed. kubelet registers this way with `--windows-service`: no wrapper
//! program is needed.
//!
//! `state = "unchanged"` registers and configures the service but leaves its running state
//! alone: a new service is created and not started, a stopped one is not started, a running
//! one is not stopped. A running service whose configuration changed (or a watched file) is
//! restarted, so it runs with what was asked and is still running afterwards; a stopped one
//! picks the new configuration up whenever something else starts it. The Windows worker recipe
//! registers the kubelet this way: `kubeadm join` starts it, and kwin must not start it before
//! the join (it has no kubeconfig yet) nor stop it after.
//!
//! ```toml
//! [[tasks]]
//! name = "kubelet-service"
//! module = "service"
//! on = { os = "windows" }
//! params = { name = "kubelet", binary = 'C:\k\kubelet.exe', args = ["--windows-service", "--config=C:\\var\\lib\\kubelet\\config.yaml"] }
//! ```

use super::facts::{PathFact, PathState, ServiceFact, ServiceState};
use super::{check_path, path_resource, step};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    parse_params, Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Touches,
};
use kwin_engine::quote::ps_quote;
use kwin_engine::transport::Shell;
use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
enum StartMode {
    #[default]
    Auto,
    Manual,
    Disabled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
enum RunState {
    #[default]
    Running,
    Stopped,
    /// Registered and configured; started or stopped only by someone else.
    Unchanged,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Params {
    name: String,
    binary: String,
    #[serde(default)]
    args: Vec<String>,
    display_name: Option<String>,
    #[serde(default)]
    start_mode: StartMode,
    #[serde(default)]
    state: RunState,
    #[serde(default)]
    depends_on: Vec<String>,
    #[serde(default)]
    restart_on: Vec<String>,
    #[serde(default = "yes")]
    restart_on_failure: bool,
}

/// The JSON Schema of the parameters (what the registry exposes for docs and tests).
pub fn params_schema() -> schemars::Schema {
    schemars::schema_for!(Params)
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone)]
pub struct Service {
    name: String,
    command_line: String,
    display_name: String,
    start_mode: StartMode,
    state: RunState,
    depends_on: Vec<String>,
    restart_on: Vec<String>,
    restart_on_failure: bool,
}

/// Quote one argument for the Windows command line (CommandLineToArgvW rules): wrap in quotes
/// when it has spaces, tabs or quotes; backslashes before a quote are doubled.
pub fn win_arg(a: &str) -> String {
    if !a.is_empty() && !a.contains([' ', '\t', '"']) {
        return a.to_string();
    }
    let mut out = String::from("\"");
    let mut backslashes = 0;
    for c in a.chars() {
        match c {
            '\\' => backslashes += 1,
            '"' => {
                out.push_str(&"\\".repeat(backslashes * 2 + 1));
                out.push('"');
                backslashes = 0;
            }
            _ => {
                out.push_str(&"\\".repeat(backslashes));
                out.push(c);
                backslashes = 0;
            }
        }
    }
    out.push_str(&"\\".repeat(backslashes * 2));
    out.push('"');
    out
}

fn valid_service_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 256
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

impl Service {
    pub fn new(params: &serde_json::Value) -> Result<Self, ParamError> {
        let p: Params = parse_params(params)?;
        if !valid_service_name(&p.name) {
            return Err(ParamError::at(
                "name",
                format!(
                    "`{}`: service names use letters, digits, -, _ and .",
                    p.name
                ),
            ));
        }
        check_path("binary", &p.binary)?;
        for (i, d) in p.depends_on.iter().enumerate() {
            if !valid_service_name(d) {
                return Err(ParamError::at(
                    format!("depends_on.{i}"),
                    format!("`{d}` is not a service name"),
                ));
            }
        }
        for (i, r) in p.restart_on.iter().enumerate() {
            check_path(&format!("restart_on.{i}"), r)?;
        }
        if p.args.iter().any(|a| a.contains(['\n', '\r', '\0'])) {
            return Err(ParamError::at(
                "args",
                "arguments cannot contain line breaks",
            ));
        }
        // The SCM stores the image path quoted, as sc.exe / New-Service are given it.
        let mut command_line = format!("\"{}\"", p.binary);
        for a in &p.args {
            command_line.push(' ');
            command_line.push_str(&win_arg(a));
        }
        Ok(Service {
            display_name: p.display_name.unwrap_or_else(|| p.name.clone()),
            name: p.name,
            command_line,
            start_mode: p.start_mode,
            state: p.state,
            depends_on: p.depends_on,
            restart_on: p.restart_on,
            restart_on_failure: p.restart_on_failure,
        })
    }

    fn fact(&self) -> ServiceFact {
        ServiceFact {
            name: self.name.clone(),
        }
    }

    /// Where kwin records the watched files' hashes at the last (re)start.
    fn marker(&self) -> String {
        format!("C:\\ProgramData\\kwin\\service-{}.sha256", self.name)
    }

    fn watch_facts(&self) -> Vec<PathFact> {
        let mut v: Vec<PathFact> = self
            .restart_on
            .iter()
            .map(|p| PathFact {
                path: p.clone(),
                content_limit: 0,
            })
            .collect();
        if !self.restart_on.is_empty() {
            v.push(PathFact {
                path: self.marker(),
                content_limit: 4096,
            });
        }
        v
    }

    fn scm_start(&self) -> &'static str {
        match self.start_mode {
            StartMode::Auto => "auto",
            StartMode::Manual => "demand",
            StartMode::Disabled => "disabled",
        }
    }

    fn wmi_start(&self) -> &'static str {
        match self.start_mode {
            StartMode::Auto => "Auto",
            StartMode::Manual => "Manual",
            StartMode::Disabled => "Disabled",
        }
    }
}

impl Module for Service {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        let mut v = vec![FactQuery::of(&self.fact(), shell)];
        v.extend(self.watch_facts().iter().map(|f| FactQuery::of(f, shell)));
        v
    }

    fn reads(&self) -> Vec<String> {
        let mut v = vec![format!("service:{}", self.name.to_ascii_lowercase())];
        v.extend(self.restart_on.iter().map(|p| path_resource(p)));
        v.push(path_resource(&self.marker()));
        v
    }

    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let st: ServiceState = facts.get(&self.fact())?;
        // Hash line of the watched files as they are now, and as recorded at the last start.
        let mut now = String::new();
        let mut recorded = String::new();
        if !self.restart_on.is_empty() {
            for (p, f) in self.restart_on.iter().zip(self.watch_facts()) {
                let s: PathState = facts.get(&f)?;
                now.push_str(&format!(
                    "{} {}\n",
                    s.sha256.unwrap_or_else(|| "missing".into()),
                    path_resource(p)
                ));
            }
            let m: PathState = facts.get(&PathFact {
                path: self.marker(),
                content_limit: 4096,
            })?;
            recorded = m
                .content()
                .map(|c| String::from_utf8_lossy(&c).replace("\r\n", "\n"))
                .unwrap_or_default();
        }
        let watched_changed = !self.restart_on.is_empty() && now != recorded;

        let (n, cl, dn) = (
            ps_quote(&self.name),
            ps_quote(&self.command_line),
            ps_quote(&self.display_name),
        );
        let deps = if self.depends_on.is_empty() {
            "/".to_string()
        } else {
            self.depends_on.join("/")
        };
        let mut script = String::new();
        let mut why = Vec::new();
        let mut diff = Vec::new();
        let action;
        if !st.exists {
            action = Action::Create;
            why.push("not registered".to_string());
            diff.push(format!("+ service {} = {}", self.name, self.command_line));
            script.push_str(&format!(
                "$o = & sc.exe create {n} binPath= {cl} start= {} DisplayName= {dn} depend= {}\nif ($LASTEXITCODE -ne 0) {{ throw \"sc.exe create: $o\" }}\n",
                self.scm_start(),
                ps_quote(&deps)
            ));
        } else {
            action = Action::Update;
            if st.path != self.command_line || !st.start_mode.eq_ignore_ascii_case(self.wmi_start())
            {
                why.push("configuration differs".to_string());
                if st.path != self.command_line {
                    diff.push(format!("- {}\n+ {}", st.path, self.command_line));
                }
                if !st.start_mode.eq_ignore_ascii_case(self.wmi_start()) {
                    diff.push(format!(
                        "- start mode {}\n+ start mode {}",
                        st.start_mode,
                        self.wmi_start()
                    ));
                }
                script.push_str(&format!(
                    "$o = & sc.exe config {n} binPath= {cl} start= {} DisplayName= {dn} depend= {}\nif ($LASTEXITCODE -ne 0) {{ throw \"sc.exe config: $o\" }}\n",
                    self.scm_start(),
                    ps_quote(&deps)
                ));
            }
        }
        let reconfigured = !script.is_empty();
        if reconfigured && self.restart_on_failure {
            script.push_str(&format!(
                "$o = & sc.exe failure {n} reset= 0 actions= restart/10000/restart/10000/restart/10000\nif ($LASTEXITCODE -ne 0) {{ throw \"sc.exe failure: $o\" }}\n"
            ));
        }
        let running = st.state == "Running";
        match self.state {
            RunState::Running => {
                if !running || (st.exists && reconfigured) || watched_changed {
                    if st.exists && running {
                        why.push(if watched_changed {
                            "a watched file changed".into()
                        } else {
                            "restart to apply the new configuration".into()
                        });
                        diff.push(format!("~ restart {}", self.name));
                        script.push_str(&format!("Restart-Service -Name {n} -Force\n"));
                    } else {
                        why.push(if st.exists {
                            format!("not running ({})", st.state)
                        } else {
                            "start".into()
                        });
                        diff.push(format!("+ running {}", self.name));
                        script.push_str(&format!("Start-Service -Name {n}\n"));
                    }
                }
            }
            RunState::Stopped => {
                if running {
                    why.push("running".into());
                    diff.push(format!("- running {}", self.name));
                    script.push_str(&format!("Stop-Service -Name {n} -Force\n"));
                }
            }
            RunState::Unchanged => {
                if running && (reconfigured || watched_changed) {
                    why.push(if watched_changed {
                        "a watched file changed".into()
                    } else {
                        "restart to apply the new configuration".into()
                    });
                    diff.push(format!("~ restart {}", self.name));
                    script.push_str(&format!("Restart-Service -Name {n} -Force\n"));
                }
            }
        }
        if !self.restart_on.is_empty() && now != recorded {
            let m = ps_quote(&self.marker());
            script.push_str(&format!(
                "New-Item -ItemType Directory -Force -Path 'C:\\ProgramData\\kwin' | Out-Null\n[IO.File]::WriteAllText({m}, {})\n",
                ps_quote(&now)
            ));
        }
        if script.is_empty() {
            return Ok(Plan::noop(match self.state {
                RunState::Running => "registered and running".to_string(),
                RunState::Stopped => "registered and stopped".to_string(),
                RunState::Unchanged => format!("registered ({}; left as it is)", st.state),
            }));
        }
        let mut touches = vec![
            format!("service:{}", self.name.to_ascii_lowercase()),
            path_resource(&self.marker()),
        ];
        touches.extend(self.restart_on.iter().map(|p| path_resource(p)));
        Ok(Plan::Change(Change {
            action,
            reason: why.join("; "),
            diff: Some(diff.join("\n")),
            steps: vec![step(script.trim_end())],
            touches: Touches::Resources(touches),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::win_arg;

    #[test]
    fn windows_argument_quoting() {
        assert_eq!(win_arg("--v=2"), "--v=2");
        assert_eq!(win_arg("C:\\Program Files\\x"), "\"C:\\Program Files\\x\"");
        assert_eq!(win_arg("a\"b"), "\"a\\\"b\"");
        assert_eq!(
            win_arg("C:\\dir with space\\"),
            "\"C:\\dir with space\\\\\""
        );
        assert_eq!(win_arg(""), "\"\"");
    }
}
