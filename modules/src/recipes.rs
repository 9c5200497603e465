//! The built-in recipes (plans/*.toml), embedded in the binary. Format: plans/README.md.

macro_rules! recipe {
    ($name:literal) => {
        (
            concat!("plans/", $name, ".toml"),
            include_str!(concat!("../../plans/", $name, ".toml")),
        )
    };
}

/// (file name, text) of every recipe.
pub const RECIPES: &[(&str, &str)] = &[
    recipe!("node-prereqs"),
    recipe!("runtime-containerd"),
    recipe!("runtime-docker"),
    recipe!("kube-packages"),
    recipe!("control-plane"),
    recipe!("cni-flannel"),
    recipe!("cni-calico"),
    recipe!("runtime-class"),
    recipe!("linux-worker"),
    recipe!("windows-worker"),
    recipe!("smoke-test"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use kwin_engine::expand::RecipeSet;

    #[test]
    fn every_recipe_parses_and_checks() {
        let set = RecipeSet::parse(RECIPES).unwrap_or_else(|d| panic!("{d}"));
        assert_eq!(set.recipes.len(), RECIPES.len());
    }
}
