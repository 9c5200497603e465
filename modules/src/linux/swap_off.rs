//! `swap_off`: no active swap, and none configured in `/etc/fstab` (the kubelet refuses to
//! run with swap by default).
//!
//! Parameters:
//!
//! | name | type | default | meaning |
//! |---|---|---|---|
//! | `fstab` | string | `/etc/fstab` | the fstab to edit |
//!
//! No-op when `/proc/swaps` lists nothing and no uncommented fstab line has type `swap`.
//!
//! Changes: `swapoff` for each active swap area; fstab swap lines are commented out (`#`
//! prepended, nothing deleted), written atomically. A missing fstab is fine. Swap set up
//! outside fstab (systemd `.swap` units, zram generators) is turned off now but may come
//! back at boot.
//!
//! ```toml
//! [[tasks]]
//! name = "no swap"
//! module = "swap_off"
//! ```

use super::common::trim_path;
use super::diff::value_diff;
use super::facts::file::{FileFact, PathState};
use super::facts::swaps::SwapsFact;
use super::managed::ensure_content;
use super::script::die;
use crate::paths::posix_abs;
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{
    Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Step, Touches,
};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;
use serde::Deserialize;

/// Params of `swap_off`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SwapOffParams {
    /// The fstab to edit (default `/etc/fstab`).
    #[serde(default = "default_fstab")]
    pub fstab: String,
}

fn default_fstab() -> String {
    "/etc/fstab".into()
}

#[derive(Debug, Clone)]
pub struct SwapOff {
    fstab: String,
}

impl Described for SwapOff {
    const NAME: &'static str = "swap_off";
    const DOC: &'static str = "swap off now and at boot (fstab entries commented out)";
    type Params = SwapOffParams;

    fn from_params(p: SwapOffParams, _shell: Shell) -> Result<Self, ParamError> {
        posix_abs("fstab", &p.fstab)?;
        Ok(SwapOff {
            fstab: trim_path(&p.fstab),
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        let mut v = super::facts::file::samples();
        v.push(FactSample::linux(SwapsFact));
        v
    }
}

/// Whether an fstab line mounts swap (third field `swap`, not a comment).
pub fn is_swap_line(line: &str) -> bool {
    let t = line.trim_start();
    if t.starts_with('#') {
        return false;
    }
    t.split_whitespace().nth(2) == Some("swap")
}

/// `text` with every swap line commented out, or `None` if there is none.
pub fn comment_out_swap(text: &str) -> Option<String> {
    if !text.lines().any(is_swap_line) {
        return None;
    }
    let mut out = String::with_capacity(text.len() + 8);
    for piece in text.split_inclusive('\n') {
        let line = piece.strip_suffix('\n').unwrap_or(piece);
        if is_swap_line(line) {
            out.push('#');
        }
        out.push_str(piece);
    }
    Some(out)
}

impl SwapOff {
    fn fstab_fact(&self) -> FileFact {
        FileFact::content(&self.fstab)
    }
}

impl Module for SwapOff {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![
            FactQuery::of(&SwapsFact, shell),
            FactQuery::of(&self.fstab_fact(), shell),
            super::managed::route_query(&self.fstab, shell),
        ]
    }

    fn reads(&self) -> Vec<String> {
        vec!["swap".into(), "/proc/swaps".into(), self.fstab.clone()]
    }

    fn plan(&self, facts: &Facts, ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let swaps = facts.get(&SwapsFact)?;
        let fstab = facts.get(&self.fstab_fact())?;
        let mut reasons = Vec::new();
        let mut diff = String::new();
        let mut steps = Vec::new();
        if !swaps.is_empty() {
            reasons.push("swap is on");
            let mut script = String::new();
            for s in &swaps {
                diff.push_str(&value_diff(
                    Some(&format!("swap {} ({})", s.filename, s.kind)),
                    None,
                ));
                script.push_str(&format!(
                    "swapoff -- {} || {}\n",
                    sh_quote(&s.filename),
                    die(&format!("cannot turn off swap on {}", s.filename))
                ));
            }
            steps.push(Step::Run(script));
        }
        match &fstab {
            PathState::Absent => {}
            PathState::File(info) => {
                let text = match (&info.content, info.text()) {
                    (Some(_), Some(t)) => t,
                    _ => {
                        return Err(ModuleError::Precondition(format!(
                            "`{}` is not a text file of at most 256 KiB",
                            self.fstab
                        )))
                    }
                };
                if let Some(new) = comment_out_swap(text) {
                    if let Some(w) = ensure_content(
                        &self.fstab,
                        &fstab,
                        facts,
                        new.as_bytes(),
                        0o644,
                        ctx.nonce,
                    )? {
                        reasons.push("swap in fstab");
                        diff.push_str(&w.diff);
                        steps.extend(w.steps);
                    }
                }
            }
            other => {
                return Err(ModuleError::Precondition(format!(
                    "`{}` is not a regular file ({})",
                    self.fstab,
                    other.kind()
                )))
            }
        }
        if steps.is_empty() {
            return Ok(Plan::noop("no swap active or in fstab"));
        }
        Ok(Plan::Change(Change {
            action: Action::Update,
            reason: reasons.join("; "),
            diff: Some(diff),
            steps,
            touches: Touches::Resources(vec![
                "swap".into(),
                "/proc/swaps".into(),
                self.fstab.clone(),
            ]),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fstab_editing() {
        // An Ubuntu 22.04 cloud image's fstab with a swap file added.
        let fstab = "LABEL=cloudimg-rootfs\t/\t ext4\tdiscard,errors=remount-ro\t0 1\nLABEL=UEFI\t/boot/efi\tvfat\tumask=0077\t0 1\n/swap.img\tnone\tswap\tsw\t0\t0\n";
        let new = comment_out_swap(fstab).expect("has swap");
        assert!(new.contains("#/swap.img\tnone\tswap"));
        assert!(new.contains("\nLABEL=UEFI"));
        assert_eq!(comment_out_swap(&new), None);
        assert!(!is_swap_line("# /dev/sdb2 none swap sw 0 0"));
        assert!(is_swap_line("  UUID=abc none swap defaults 0 0"));
        assert!(!is_swap_line("/dev/sda1 /swap ext4 defaults 0 0"));
        assert_eq!(
            comment_out_swap("/s none swap sw 0 0"),
            Some("#/s none swap sw 0 0".into())
        );
    }
}
