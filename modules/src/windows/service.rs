//! `service` (Windows): a Windows service registered with a command line and start mode, and
//! running (or stopped); restarted once when a file it watches changed; its binaries replaced
//! with the service stopped.
//!
//! Parameters: `name` (letters, digits, `-`, `_`, `.`), `binary` (absolute path of the
//! executable), `args` (list of arguments; quoted for the Windows command line), `wrapper`
//! (optional: a program and its arguments the SCM runs instead, with `binary` and `args` after
//! them, e.g. `['C:\k\kube-log-runner.exe', '-log-file=C:\var\log\kubelet\kubelet.log']`;
//! its first element is an absolute path), `display_name`, `start_mode` = "auto" (default) |
//! "manual" | "disabled", `state` = "running" (default) | "stopped" | "unchanged",
//! `depends_on` (service names; unset or empty: dependencies are left as they are),
//! `restart_on` (paths: restart when any of their contents changed since the last (re)start
//! kwin did), `restart_on_failure` (default true: the SCM restarts the service 10 s after it
//! dies), `binaries` (list of `{ src, dest }`: files the service runs from, installed from a
//! verified staging copy `src`, usually what a `download` or `archive` step left in
//! `C:\ProgramData\kwin\cache`).
//!
//! No-op when registered with the same image path (compared byte for byte with the `ImagePath`
//! the SCM stored), start mode, display name and dependencies, in the wanted state, every
//! `dest` has its `src`'s SHA-256, and no watched file changed.
//!
//! Registration never hands a `"` to a native command (see `service_script`): `New-Service`,
//! then `Win32_Service.Change` through `Invoke-CimMethod` for a changed configuration.
//!
//! Binaries: a `dest` that differs from its `src` is replaced with the service stopped — stop
//! (if it runs) → wait until the service's own process has exited → replace each (the old file
//! is renamed aside: Windows lets a running image be renamed, not overwritten) → start again if
//! it was running (`state = "unchanged"`) or if it should run (`state = "running"`). Other
//! processes running from a replaced file are not waited for and keep the renamed copy:
//! containerd's shims of the pods a drain leaves running, which outlive containerd and to which
//! it reconnects (`service_script::stop_for_replace`). A binary change therefore always
//! restarts a running service; kubelet and containerd upgrades are the same step with another
//! `src`.
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
//! params = { name = "kubelet", binary = 'C:\k\kubelet.exe', args = ["--windows-service", "--config=C:\\var\\lib\\kubelet\\config.yaml"], binaries = [{ src = 'C:\ProgramData\kwin\cache\kubelet-v1.31.4.exe', dest = 'C:\k\kubelet.exe' }] }
//! ```

use super::facts::{PathFact, PathState, ServiceFact, ServiceState};
use super::service_script as script;
use super::step;
use crate::paths::{windows_abs, windows_resource};
use crate::shared::linux_only;
use crate::shared::service::{BinaryParam, RunState, ServiceParams, StartMode};
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Touches};
use kwin_engine::quote::ps_quote;
use kwin_engine::transport::Shell;

impl StartMode {
    /// `New-Service -StartupType` / `Win32_Service.Change` `StartMode` value.
    fn cmdlet(self) -> &'static str {
        match self {
            StartMode::Auto => "Automatic",
            StartMode::Manual => "Manual",
            StartMode::Disabled => "Disabled",
        }
    }
    /// The `Start` value the SCM stores (`dwStartType`: SERVICE_AUTO_START 2,
    /// SERVICE_DEMAND_START 3, SERVICE_DISABLED 4).
    fn start_value(self) -> i64 {
        match self {
            StartMode::Auto => 2,
            StartMode::Manual => 3,
            StartMode::Disabled => 4,
        }
    }
}

fn start_name(v: i64) -> String {
    match v {
        2 => "Automatic".into(),
        3 => "Manual".into(),
        4 => "Disabled".into(),
        -1 => "unset".into(),
        n => format!("start type {n}"),
    }
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
    binaries: Vec<BinaryParam>,
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

/// The image path the SCM stores for `program` + `args`: the program always quoted (a path
/// with a space, unquoted, makes the SCM try `C:\Program.exe` first), every argument quoted
/// when it needs it.
pub fn image_path(program: &str, args: &[String]) -> String {
    let mut s = format!("\"{program}\"");
    for a in args {
        s.push(' ');
        s.push_str(&win_arg(a));
    }
    s
}

fn valid_service_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 256
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

impl Described for Service {
    const NAME: &'static str = "service";
    const DOC: &'static str = "a service enabled or not, running or stopped, restarted once when a file it watches changed";
    type Params = ServiceParams;

    fn from_params(p: ServiceParams, _shell: Shell) -> Result<Self, ParamError> {
        linux_only("service", &[("enabled", p.enabled.is_some())])?;
        let binary = p
            .binary
            .ok_or_else(|| ParamError::at("binary", "`binary` is required on Windows"))?;
        let args = p.args.unwrap_or_default();
        let wrapper = p.wrapper.unwrap_or_default();
        let depends_on = p.depends_on.unwrap_or_default();
        let binaries = p.binaries.unwrap_or_default();
        if !valid_service_name(&p.name) {
            return Err(ParamError::at(
                "name",
                format!(
                    "`{}`: service names use letters, digits, -, _ and .",
                    p.name
                ),
            ));
        }
        windows_abs("binary", &binary)?;
        if binary.contains('"') {
            return Err(ParamError::at("binary", "a path cannot contain `\"`"));
        }
        for (i, d) in depends_on.iter().enumerate() {
            if !valid_service_name(d) {
                return Err(ParamError::at(
                    format!("depends_on.{i}"),
                    format!("`{d}` is not a service name"),
                ));
            }
        }
        for (i, r) in p.restart_on.iter().enumerate() {
            windows_abs(&format!("restart_on.{i}"), r)?;
        }
        for (i, b) in binaries.iter().enumerate() {
            windows_abs(&format!("binaries.{i}.src"), &b.src)?;
            windows_abs(&format!("binaries.{i}.dest"), &b.dest)?;
        }
        for (field, list) in [("args", &args), ("wrapper", &wrapper)] {
            if let Some(i) = list.iter().position(|a| a.contains(['\n', '\r', '\0'])) {
                return Err(ParamError::at(
                    format!("{field}.{i}"),
                    "arguments cannot contain line breaks or NUL",
                ));
            }
        }
        let command_line = match wrapper.split_first() {
            None => image_path(&binary, &args),
            Some((program, wargs)) => {
                windows_abs("wrapper.0", program)?;
                if program.contains('"') {
                    return Err(ParamError::at("wrapper.0", "a path cannot contain `\"`"));
                }
                let mut all = wargs.to_vec();
                all.push(binary.clone());
                all.extend(args.iter().cloned());
                image_path(program, &all)
            }
        };
        Ok(Service {
            display_name: p.display_name.unwrap_or_else(|| p.name.clone()),
            name: p.name,
            command_line,
            start_mode: p.start_mode.unwrap_or_default(),
            state: p.state.unwrap_or(RunState::Running),
            depends_on,
            restart_on: p.restart_on,
            restart_on_failure: p.restart_on_failure.unwrap_or(true),
            binaries,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![
            FactSample::windows(ServiceFact {
                name: "kubelet".into(),
            }),
            FactSample::windows(Service::path_fact("C:\\k\\x")),
        ]
    }
}

impl Service {
    /// The image path kwin registers (and compares with the stored `ImagePath`).
    pub fn command_line(&self) -> &str {
        &self.command_line
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

    fn path_fact(p: &str) -> PathFact {
        PathFact {
            path: p.to_string(),
            content_limit: 0,
        }
    }

    fn watch_facts(&self) -> Vec<PathFact> {
        let mut v: Vec<PathFact> = self.restart_on.iter().map(|p| Self::path_fact(p)).collect();
        if !self.restart_on.is_empty() {
            v.push(PathFact {
                path: self.marker(),
                content_limit: 4096,
            });
        }
        v
    }

    fn binary_facts(&self) -> Vec<PathFact> {
        self.binaries
            .iter()
            .flat_map(|b| [Self::path_fact(&b.src), Self::path_fact(&b.dest)])
            .collect()
    }

    /// Dependencies differ (only when the plan manages them).
    fn deps_differ(&self, st: &ServiceState) -> bool {
        if self.depends_on.is_empty() {
            return false;
        }
        let norm = |v: &[String]| {
            let mut v: Vec<String> = v.iter().map(|d| d.to_ascii_lowercase()).collect();
            v.sort();
            v.dedup();
            v
        };
        norm(&self.depends_on) != norm(&st.depends_on)
    }
}

/// One binary to replace: src, dest, the src's hash, the dest's hash (none: missing).
struct Replace<'a> {
    src: &'a str,
    dest: &'a str,
    want: String,
    have: Option<String>,
}

impl Module for Service {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        let mut v = vec![FactQuery::of(&self.fact(), shell)];
        v.extend(self.watch_facts().iter().map(|f| FactQuery::of(f, shell)));
        v.extend(self.binary_facts().iter().map(|f| FactQuery::of(f, shell)));
        v
    }

    fn reads(&self) -> Vec<String> {
        let mut v = vec![format!("service:{}", self.name.to_ascii_lowercase())];
        v.extend(self.restart_on.iter().map(|p| windows_resource(p)));
        v.push(windows_resource(&self.marker()));
        for b in &self.binaries {
            v.push(windows_resource(&b.src));
            v.push(windows_resource(&b.dest));
        }
        v
    }

    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let st: ServiceState = facts.get(&self.fact())?;
        // Hash line of the watched files as they are now, and as recorded at the last start.
        let mut now = String::new();
        let mut recorded = String::new();
        if !self.restart_on.is_empty() {
            for p in &self.restart_on {
                let s: PathState = facts.get(&Self::path_fact(p))?;
                now.push_str(&format!(
                    "{} {}\n",
                    s.sha256.unwrap_or_else(|| "missing".into()),
                    windows_resource(p)
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

        // Binaries whose installed copy is not the staged one.
        let mut replace = Vec::new();
        for b in &self.binaries {
            let src: PathState = facts.get(&Self::path_fact(&b.src))?;
            let dest: PathState = facts.get(&Self::path_fact(&b.dest))?;
            let want = match (&src.sha256, src.exists && !src.dir) {
                (Some(h), true) => h.clone(),
                _ => {
                    return Err(ModuleError::Precondition(format!(
                        "{} is missing: the step that downloads or unpacks it must run first",
                        b.src
                    )))
                }
            };
            if dest.dir {
                return Err(ModuleError::Precondition(format!(
                    "{} is a directory",
                    b.dest
                )));
            }
            if dest.sha256.as_deref() != Some(want.as_str()) {
                replace.push(Replace {
                    src: &b.src,
                    dest: &b.dest,
                    want,
                    have: dest.sha256.clone(),
                });
            }
        }

        let n = ps_quote(&self.name);
        let mut script = String::new();
        let mut why = Vec::new();
        let mut diff = Vec::new();
        let running = st.state == "Running";

        // 1. Binaries: stop, replace.
        let replaced = !replace.is_empty();
        if replaced {
            script.push_str(&script::stop_for_replace(&self.name, st.exists));
            for r in &replace {
                why.push(match &r.have {
                    Some(_) => format!("{} differs from {}", r.dest, r.src),
                    None => format!("{} missing", r.dest),
                });
                diff.push(format!(
                    "{}+ {} sha256 {} (from {})",
                    r.have
                        .as_ref()
                        .map(|h| format!("- {} sha256 {h}\n", r.dest))
                        .unwrap_or_default(),
                    r.dest,
                    r.want,
                    r.src
                ));
                script.push_str(&script::replace(r.src, r.dest, &r.want));
            }
            if st.exists && running {
                diff.push(format!(
                    "~ {} stopped for the replacement, started again",
                    self.name
                ));
            }
        }

        // 2. Registration.
        let startup = self.start_mode.cmdlet();
        let action;
        let mut reconfigured = false;
        if !st.exists {
            action = Action::Create;
            why.push("not registered".to_string());
            diff.push(format!("+ service {} = {}", self.name, self.command_line));
            script.push_str(&script::register(
                &self.name,
                &self.command_line,
                &self.display_name,
                startup,
                &self.depends_on,
            ));
            reconfigured = true;
        } else {
            action = Action::Update;
            let path_differs = st.image_path != self.command_line;
            let start_differs = st.start != self.start_mode.start_value();
            let name_differs = st.display_name != self.display_name;
            let deps_differ = self.deps_differ(&st);
            if path_differs || start_differs || name_differs || deps_differ {
                why.push("configuration differs".to_string());
                if path_differs {
                    diff.push(format!("- {}\n+ {}", st.image_path, self.command_line));
                }
                if start_differs {
                    diff.push(format!(
                        "- start mode {}\n+ start mode {startup}",
                        start_name(st.start)
                    ));
                }
                if name_differs {
                    diff.push(format!(
                        "- display name {}\n+ display name {}",
                        st.display_name, self.display_name
                    ));
                }
                if deps_differ {
                    diff.push(format!(
                        "- depends on {}\n+ depends on {}",
                        st.depends_on.join(", "),
                        self.depends_on.join(", ")
                    ));
                }
                script.push_str(&script::change(
                    &self.name,
                    &self.command_line,
                    &self.display_name,
                    startup,
                    (!self.depends_on.is_empty()).then_some(self.depends_on.as_slice()),
                ));
                reconfigured = true;
            }
        }
        if reconfigured && self.restart_on_failure {
            script.push_str(&script::failure_actions(&self.name));
        }

        // 3. Running state.
        if replaced && st.exists {
            // The replacement stopped it if it ran: start it again as the state asks.
            match self.state {
                RunState::Running => {
                    if !running {
                        why.push(format!("not running ({})", st.state));
                        diff.push(format!("+ running {}", self.name));
                    }
                    script.push_str(&format!("Start-Service -Name {n}\n"));
                    script.push_str(script::start_dependents());
                }
                RunState::Unchanged => {
                    script.push_str(&format!(
                        "if ($kwinWasRunning) {{ Start-Service -Name {n} }}\n"
                    ));
                    script.push_str(script::start_dependents());
                }
                RunState::Stopped => {}
            }
        } else {
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
                            script.push_str(&script::capture_dependents(&self.name));
                            script.push_str(&format!("Restart-Service -Name {n} -Force\n"));
                            script.push_str(script::start_dependents());
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
                        script.push_str(&script::capture_dependents(&self.name));
                        script.push_str(&format!("Restart-Service -Name {n} -Force\n"));
                        script.push_str(script::start_dependents());
                    }
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
            windows_resource(&self.marker()),
        ];
        touches.extend(self.restart_on.iter().map(|p| windows_resource(p)));
        touches.extend(replace.iter().map(|r| windows_resource(r.dest)));
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
    use super::{image_path, win_arg};

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
        assert_eq!(
            image_path(
                "C:\\Program Files\\containerd\\bin\\containerd.exe",
                &["--run-service".into()]
            ),
            "\"C:\\Program Files\\containerd\\bin\\containerd.exe\" --run-service"
        );
    }
}
