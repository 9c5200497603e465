//! The built-in recipes (plans/*.toml), embedded in the binary.

/// (file name, text) of every recipe.
pub const RECIPES: &[(&str, &str)] = &[];
