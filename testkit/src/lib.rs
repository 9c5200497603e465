//! kwin's test kit (crate `kwin-testkit`, not published): what kwin's tests share.
//!
//! | module | what |
//! |---|---|
//! | [`tier`] | the lab tier: [`lab_test!`] marks tests that need root and the lab's peers (`#[ignore = "lab: ..."]`); they fail, never pass, when run without them |
//! | [`host`] | facts about the machine the tests run on (`is_root`, `has_command`) |
//! | [`scripts`] | script checks: `sh -n`, tree-sitter-powershell syntax errors, `"` in native-command arguments, wildcard parameters |
//! | [`cases`] | the one runner of the data-driven module cases (`modules/tests/{cases,windows_cases,kube_cases}`) |
//!
//! Engine unit tests (`#[cfg(test)]` inside `engine/src`) cannot use this crate: a
//! dev-dependency would link a second copy of `kwin_engine`.

pub mod cases;
pub mod converge;
pub mod host;
pub mod scripts;
pub mod tier;
