//! Whether a kernel module is available in the running kernel: loaded (`/proc/modules`),
//! built in (`modules.builtin`), or present under `/sys/module`.

use super::{kv_lines, ok_stdout};
use kwin_engine::fact::{Fact, FactError, FactOutput};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;

/// The kernel's own spelling of a module name: `-` and `_` are the same to modprobe, and
/// `/proc/modules` shows `_`.
pub fn normalize(name: &str) -> String {
    name.replace('-', "_")
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelModuleFact {
    /// Module name, already validated (`[A-Za-z0-9_-]+`).
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelModuleState {
    /// Listed in `/proc/modules` (loaded as a module).
    pub loaded: bool,
    /// Compiled into the kernel.
    pub builtin: bool,
    /// `/sys/module/<name>` exists (loaded, or built in with parameters).
    pub in_sysfs: bool,
}

impl KernelModuleState {
    /// Whether the kernel has the module's functionality right now.
    pub fn active(&self) -> bool {
        self.loaded || self.builtin || self.in_sysfs
    }
}

impl Fact for KernelModuleFact {
    type Output = KernelModuleState;

    fn key(&self) -> String {
        format!("kernel_module:{}", normalize(&self.name))
    }

    fn command(&self, _shell: Shell) -> String {
        format!(
            "n={}\n\
             if [ -d \"/sys/module/$n\" ]; then echo sys_module=yes; else echo sys_module=no; fi\n\
             if [ -r /proc/modules ]; then awk -v n=\"$n\" '$1 == n {{ print \"proc=\" $0 }}' /proc/modules; fi\n\
             b=\"/lib/modules/$(uname -r)/modules.builtin\"\n\
             if [ -r \"$b\" ]; then awk -F/ -v n=\"$n\" '{{ m = $NF; sub(/\\.ko.*$/, \"\", m); gsub(/-/, \"_\", m); if (m == n) print \"builtin=\" $0 }}' \"$b\"; fi\n",
            sh_quote(&normalize(&self.name))
        )
    }

    fn parse(&self, out: &FactOutput) -> Result<KernelModuleState, FactError> {
        parse_kernel_module(&normalize(&self.name), ok_stdout(out)?)
    }
}

/// Parse [`KernelModuleFact`]'s output for module `name` (normalized).
pub fn parse_kernel_module(name: &str, text: &str) -> Result<KernelModuleState, FactError> {
    let mut st = KernelModuleState {
        loaded: false,
        builtin: false,
        in_sysfs: false,
    };
    for (k, v) in kv_lines(text)? {
        match k {
            "sys_module" => st.in_sysfs = v == "yes",
            // A /proc/modules line: name size refcount deps state address.
            "proc" => {
                let mut f = v.split_whitespace();
                if f.next() == Some(name) {
                    let state = f.nth(3).unwrap_or("Live");
                    st.loaded = state != "Unloading";
                }
            }
            // A modules.builtin line: kernel/net/bridge/br_netfilter.ko
            "builtin" => {
                let file = v.rsplit('/').next().unwrap_or(v);
                let stem = file.split(".ko").next().unwrap_or(file);
                if normalize(stem) == name {
                    st.builtin = true;
                }
            }
            other => return Err(FactError::Parse(format!("unexpected key `{other}`"))),
        }
    }
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::super::out;
    use super::*;

    #[test]
    fn loaded_module_line_from_proc_modules() {
        // A /proc/modules line (name size refcount deps state address), as the kernel prints
        // it for a loaded br_netfilter.
        let st = KernelModuleFact {
            name: "br-netfilter".into(),
        }
        .parse(&out(
            "sys_module=yes\nproc=br_netfilter 32768 0 - Live 0x0000000000000000\n",
            0,
        ))
        .expect("parse");
        assert!(st.loaded && st.in_sysfs && !st.builtin && st.active());
    }

    #[test]
    fn unloading_is_not_loaded() {
        let st = parse_kernel_module(
            "overlay",
            "sys_module=yes\nproc=overlay 151552 0 - Unloading 0xffffffffc0a1b000\n",
        )
        .expect("parse");
        assert!(!st.loaded);
    }

    #[test]
    fn builtin_module() {
        // A modules.builtin line (path of the module under the kernel tree).
        let st = parse_kernel_module(
            "nf_conntrack",
            "sys_module=no\nbuiltin=kernel/net/netfilter/nf-conntrack.ko\n",
        )
        .expect("parse");
        assert!(st.builtin && st.active() && !st.loaded);
    }

    #[test]
    fn missing_module() {
        let st = parse_kernel_module("br_netfilter", "sys_module=no\n").expect("parse");
        assert!(!st.active());
        // A line for another module (awk prints only matches, but the parser checks anyway).
        let st = parse_kernel_module(
            "br_netfilter",
            "sys_module=no\nproc=bridge 311296 1 br_netfilter, Live 0x0000000000000000\n",
        )
        .expect("parse");
        assert!(!st.active());
        assert!(parse_kernel_module("x", "what=1\n").is_err());
    }
}
