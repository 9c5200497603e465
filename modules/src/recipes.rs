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

/// A library: script text several recipes share (`{{ lib.<name> }}`, plans/README.md).
macro_rules! library {
    ($name:literal) => {
        (
            concat!("plans/lib/", $name),
            include_str!(concat!("../../plans/lib/", $name)),
        )
    };
}

/// (file name, text) of every recipe, and of the libraries they use.
pub const RECIPES: &[(&str, &str)] = &[
    library!("hns.ps1"),
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
    use kwin_engine::expand::RecipeSet;

    #[test]
    fn every_recipe_parses_and_checks() {
        let set = RecipeSet::parse(RECIPES).unwrap_or_else(|d| panic!("{d}"));
        let toml = RECIPES.iter().filter(|(f, _)| f.ends_with(".toml")).count();
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
            .filter(|(f, _)| f.ends_with(".toml"))
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
}
