//! The built-in recipes (plans/*.toml), embedded in the binary. Format: plans/README.md.

use kwin_engine::pipeline::{ChecksumMode, Request, UserTasks};
use std::sync::OnceLock;

macro_rules! recipe {
    ($name:literal) => {
        (
            concat!("plans/", $name, ".toml"),
            include_str!(concat!("../../plans/", $name, ".toml")),
        )
    };
}

/// A library: script text several recipes share (`{{ lib.<name> }}`), or the step library
/// `steps.toml` (steps recipes take with `use`); plans/README.md.
macro_rules! library {
    ($name:literal) => {
        (
            concat!("plans/lib/", $name),
            include_str!(concat!("../../plans/lib/", $name)),
        )
    };
}

/// A template file, `plans/<recipe>/<name>.<ext>.j2`: a manifest or script a recipe's step
/// includes (`{% include "<recipe>/<name>.<ext>.j2" %}`, plans/README.md).
macro_rules! template {
    ($name:literal) => {
        (
            concat!("plans/", $name),
            include_str!(concat!("../../plans/", $name)),
        )
    };
}

/// (file name, text) of every recipe, and of the libraries and template files they use.
pub const RECIPES: &[(&str, &str)] = &[
    library!("hns.ps1"),
    library!("steps.toml"),
    template!("cni-calico/installation.yaml.j2"),
    template!("cni-calico/ipam-felix.sh.j2"),
    template!("cni-flannel/cni-conf.json.j2"),
    template!("cni-flannel/flanneld.ps1.j2"),
    template!("cni-flannel/windows.yaml.j2"),
    template!("kube-proxy-windows/daemonset.yaml.j2"),
    template!("kube-proxy-windows/kube-proxy.ps1.j2"),
    template!("runtime-class/runtime-classes.yaml.j2"),
    template!("runtime-docker/cri-docker.service.j2"),
    template!("windows-worker/containerd-log.ps1.j2"),
    recipe!("node-prereqs"),
    recipe!("runtime-containerd"),
    recipe!("runtime-docker"),
    recipe!("kube-packages"),
    recipe!("control-plane"),
    recipe!("kube-proxy-windows"),
    recipe!("cni-flannel"),
    recipe!("cni-calico"),
    recipe!("runtime-class"),
    recipe!("linux-worker"),
    recipe!("windows-worker"),
    recipe!("upgrade-control-plane"),
    recipe!("upgrade-control-plane-kubelet"),
    recipe!("upgrade-worker"),
    recipe!("windows-reboot"),
    recipe!("cluster-ready"),
];

/// kwin's digests of what the recipes download (`plans/digests.toml`, format and sources in its
/// header): SHA-256 by upstream URL and version, signing-key fingerprints by key URL.
pub const DIGESTS: &str = include_str!("../../plans/digests.toml");

/// The recipes of `kwin reset`: expanded instead of [`RECIPES`], never by `apply`.
pub const RESET_RECIPES: &[(&str, &str)] = &[
    library!("hns.ps1"),
    recipe!("reset-drain"),
    recipe!("reset-linux"),
    recipe!("reset-windows"),
];

/// Every step name the built-in recipes define (names a user task's `after` may use), sorted.
/// Empty if the recipes do not parse (a bug the tests below catch).
pub fn step_names() -> Vec<String> {
    let mut names: Vec<String> = kwin_engine::expand::RecipeSet::parse(RECIPES)
        .map(|set| set.step_names.into_iter().collect())
        .unwrap_or_default();
    names.sort();
    names
}

/// Which recipes a command expands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recipes {
    /// The build recipes and the plan's `[[tasks]]`.
    Build,
    /// `kwin reset`'s recipes only.
    Reset,
}

/// The pipeline request of a kwin command on `plan`, with kwin's modules, recipes and
/// digests (validated exactly as for `apply` in every case: `after` may name the build
/// recipes' steps).
pub fn request(
    plan: &std::path::Path,
    recipes: Recipes,
    checksums: ChecksumMode,
    no_verify: bool,
) -> Request<'_> {
    static STEPS: OnceLock<Vec<String>> = OnceLock::new();
    let (recipes, user_tasks) = match recipes {
        Recipes::Build => (RECIPES, UserTasks::Include),
        Recipes::Reset => (RESET_RECIPES, UserTasks::Leave),
    };
    Request {
        plan,
        registry: &crate::Builtin,
        recipes,
        recipe_steps: STEPS.get_or_init(step_names),
        digests: DIGESTS,
        user_tasks,
        no_verify,
        checksums,
        limit: Vec::new(),
        vars: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kwin_engine::expand::recipe::{source_kind, SourceKind};
    use kwin_engine::expand::RecipeSet;

    #[test]
    fn every_recipe_parses_and_checks() {
        let set = RecipeSet::parse(RECIPES).unwrap_or_else(|d| panic!("{d}"));
        let toml = RECIPES
            .iter()
            .filter(|(f, _)| source_kind(f) == SourceKind::Recipe)
            .count();
        assert_eq!(set.recipes.len(), toml);
        let names = step_names();
        assert!(names.iter().any(|n| n == "kubeadm-init"), "{names:?}");
    }

    /// The modules the recipes may name: every module the built-in registry builds.
    fn modules() -> Vec<&'static str> {
        use kwin_engine::module::Registry;
        crate::Builtin.names()
    }

    #[test]
    fn recipes_name_only_known_modules() {
        let set = RecipeSet::parse(RECIPES).unwrap_or_else(|d| panic!("{d}"));
        for r in &set.recipes {
            for s in &r.def.steps {
                assert!(
                    modules().contains(&s.module.as_str()),
                    "recipe `{}` step `{}` names unknown module `{}`",
                    r.name(),
                    s.name,
                    s.module
                );
            }
        }
    }

    #[test]
    fn reset_recipes_parse_apart_from_the_build_recipes() {
        let set = RecipeSet::parse(RESET_RECIPES).unwrap_or_else(|d| panic!("{d}"));
        let toml = RESET_RECIPES
            .iter()
            .filter(|(f, _)| source_kind(f) == SourceKind::Recipe)
            .count();
        assert_eq!(set.recipes.len(), toml);
        for r in &set.recipes {
            for s in &r.def.steps {
                assert!(
                    modules().contains(&s.module.as_str()),
                    "recipe `{}` step `{}` names unknown module `{}`",
                    r.name(),
                    s.name,
                    s.module
                );
            }
        }
        // `apply` never expands them, and a user task cannot wait for them.
        let build = step_names();
        assert!(!build.iter().any(|n| n == "drain-nodes"), "{build:?}");
    }

    /// Every file under plans/ (but its README) is embedded: a file no list names would be
    /// edited in vain, and an include of it would fail only when rendered.
    #[test]
    fn every_file_under_plans_is_embedded() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../plans");
        let mut on_disk = Vec::new();
        let mut dirs = vec![root.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("plans/").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if let Ok(rel) = path.strip_prefix(&root) {
                    let rel = rel.to_string_lossy().replace('\\', "/");
                    if rel != "README.md" {
                        on_disk.push(format!("plans/{rel}"));
                    }
                }
            }
        }
        let embedded: std::collections::BTreeSet<&str> = RECIPES
            .iter()
            .chain(RESET_RECIPES)
            .map(|(f, _)| *f)
            .chain(["plans/digests.toml"])
            .collect();
        let missing: Vec<&String> = on_disk
            .iter()
            .filter(|f| !embedded.contains(f.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "not embedded (modules/src/recipes.rs): {missing:?}"
        );
        assert_eq!(embedded.len(), on_disk.len(), "{embedded:?} / {on_disk:?}");
    }
}
