//! The commit the `kwin` binary is built from, for `kwin --version`: `KWIN_BUILD_COMMIT` is
//! `git rev-parse --short=7 HEAD` (with `-dirty` when tracked files differ from it) where the
//! source is a git checkout, else the environment's `KWIN_COMMIT` (a source archive built by a
//! packager), else `unknown`. Rebuilt when HEAD, the branch it points to or the index moves.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=KWIN_COMMIT");
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = if root.join(".git").exists() {
        from_git(&root)
    } else {
        None
    };
    let commit = commit
        .or_else(|| std::env::var("KWIN_COMMIT").ok().filter(|c| !c.is_empty()))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=KWIN_BUILD_COMMIT={commit}");
}

/// The short commit, `-dirty` with changes to tracked files; the files to watch announced.
fn from_git(root: &Path) -> Option<String> {
    let abs = |p: String| {
        let p = PathBuf::from(p);
        if p.is_absolute() {
            p
        } else {
            root.join(p)
        }
    };
    // A worktree's HEAD and index live in its own git dir, branches in the common one.
    if let Some(dir) = git(root, &["rev-parse", "--git-dir"]).map(abs) {
        println!("cargo:rerun-if-changed={}", dir.join("HEAD").display());
        println!("cargo:rerun-if-changed={}", dir.join("index").display());
    }
    if let (Some(common), Some(branch)) = (
        git(root, &["rev-parse", "--git-common-dir"]).map(abs),
        git(root, &["symbolic-ref", "-q", "HEAD"]),
    ) {
        println!("cargo:rerun-if-changed={}", common.join(branch).display());
        println!(
            "cargo:rerun-if-changed={}",
            common.join("packed-refs").display()
        );
    }
    let short = git(root, &["rev-parse", "--short=7", "HEAD"])?;
    let dirty = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["diff-index", "--quiet", "HEAD", "--"])
        .status()
        .map(|s| !s.success())
        .unwrap_or(false);
    Some(if dirty {
        format!("{short}-dirty")
    } else {
        short
    })
}
