//! What a module's row in the tables is: [`Row`], made by [`row`] from the module's type
//! ([`Described`]: its name, doc, params type and facts). The tables themselves, one per
//! family, are in `crate::registry`, the only list of what kwin's modules are: the
//! registry, `kwin schema`, `kwin modules`, `kwin doc`, the generated pages, the parser
//! tests and the fuzz target read them.
//!
//! Adding a module (`tests/adding_a_module.rs` checks every place for every row, and says
//! what is missing where):
//!
//! 1. `modules/src/<family>/<file>.rs`: the module type, with `Module` and [`Described`]
//!    (its name, one line, params type with a doc comment on every field, fact samples), and a
//!    `//!` header with its parameters, when it is a no-op, what it changes and an example
//!    task (a Linux module's example is built by `tests/cases.rs`).
//! 2. `modules/src/<family>/mod.rs`: `pub mod <file>;`.
//! 3. `modules/src/registry.rs`: its row, `row::<<family>::<file>::Type>(shells)`, in its
//!    family's table.
//! 4. `modules/tests/cases/<name>/`: its cases (`windows_cases/`, `kube_cases/` for those
//!    families): params, captured fact output, the expected plan; at least five for a Linux
//!    module.
//! 5. `modules/src/examples.toml`: an example task per OS it runs on.
//! 6. `docs/modules.md` and
//! 7. `docs/plan.md`'s module list: generated from the tables; regenerate both with
//!    `KWIN_BLESS=1 cargo test -p kwin-modules --test reference`.
//!
//! Facts: a fact a module reads is a type with `kwin_engine::fact::Fact` (a command and a
//! pure parser, unit-tested on captured output) written in its family's `facts` module
//! (`linux/facts/`, `windows/facts.rs`, `kube/facts.rs`), whether one module reads it or
//! several, in the family's output form ([`Family`]). Six Windows and Kubernetes facts still
//! sit beside their modules; `tests/adding_a_module.rs` lists them and holds the rule.

use kwin_engine::fact::{Fact, FactError, FactOutput};
use kwin_engine::module::{parse_params, Module, ParamError};
use kwin_engine::transport::Shell;
use serde::de::DeserializeOwned;

/// Rows for modules that run on POSIX hosts only.
pub const POSIX: &[Shell] = &[Shell::Posix];
/// Rows for modules that run on PowerShell hosts only.
pub const POWERSHELL: &[Shell] = &[Shell::PowerShell];
/// Rows for modules that run on both.
pub const BOTH: &[Shell] = &[Shell::Posix, Shell::PowerShell];

/// Which table a row or a fact belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// POSIX sh facts (`key=value` lines) and steps.
    Linux,
    /// PowerShell facts (one line of compact JSON) and steps.
    Windows,
    /// Kubernetes facts (a first line `kwin: <state>`) and steps.
    Kube,
}

/// A fact's parser with its value dropped.
type ParseFn = Box<dyn Fn(&FactOutput) -> Result<(), FactError> + Send + Sync>;

/// How a row builds its module.
pub type BuildFn = fn(&serde_json::Value, Shell) -> Result<Box<dyn Module>, ParamError>;

/// One instance of a fact a module can read, for tests and fuzzing of its parser.
pub struct FactSample {
    /// The fact's kind: its key up to the first `:` (`file.meta`, `win.path`, `kube.diff`).
    pub kind: String,
    /// The table of the module that reads it.
    pub family: Family,
    parse: ParseFn,
}

impl FactSample {
    /// A sample of `fact`, read by a module of `family`.
    pub fn of<F>(family: Family, fact: F) -> FactSample
    where
        F: Fact + Send + Sync + 'static,
    {
        let key = fact.key();
        FactSample {
            kind: key.split(':').next().unwrap_or_default().to_string(),
            family,
            parse: Box::new(move |out| fact.parse(out).map(|_| ())),
        }
    }

    /// A sample of a Linux fact.
    pub fn linux<F: Fact + Send + Sync + 'static>(fact: F) -> FactSample {
        FactSample::of(Family::Linux, fact)
    }

    /// A sample of a Windows fact.
    pub fn windows<F: Fact + Send + Sync + 'static>(fact: F) -> FactSample {
        FactSample::of(Family::Windows, fact)
    }

    /// A sample of a Kubernetes fact.
    pub fn kube<F: Fact + Send + Sync + 'static>(fact: F) -> FactSample {
        FactSample::of(Family::Kube, fact)
    }

    /// Run the sample's parser on `out` (the value is dropped).
    pub fn parse(&self, out: &FactOutput) -> Result<(), FactError> {
        (self.parse)(out)
    }
}

impl std::fmt::Debug for FactSample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FactSample")
            .field("kind", &self.kind)
            .field("family", &self.family)
            .finish()
    }
}

/// A module as the tables know it.
#[derive(Clone, Copy)]
pub struct Row {
    pub name: &'static str,
    /// One line: what the module manages (shown by `kwin schema`).
    pub doc: &'static str,
    /// The shells the module is built for.
    pub shells: &'static [Shell],
    /// Build from a task's params (a JSON object) for a host speaking that shell.
    pub build: BuildFn,
    /// The JSON Schema of the params, derived from the module's params type.
    pub params: fn() -> schemars::Schema,
    /// One instance of every fact the module can read.
    pub facts: fn() -> Vec<FactSample>,
    /// The module type's path (`kwin_modules::linux::file::File`): which file defines it.
    pub type_name: fn() -> &'static str,
}

impl std::fmt::Debug for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Row")
            .field("name", &self.name)
            .field("shells", &self.shells)
            .finish()
    }
}

/// What a module type tells its table row.
pub trait Described: Module + Sized + 'static {
    const NAME: &'static str;
    /// One line, shown by `kwin schema`.
    const DOC: &'static str;
    /// The params as a plan gives them; its JSON Schema is the module's params schema.
    type Params: DeserializeOwned + schemars::JsonSchema;
    /// Check the params and build the module for a host speaking `shell`.
    fn from_params(p: Self::Params, shell: Shell) -> Result<Self, ParamError>;
    /// One instance of every fact the module can read (see [`FactSample`]).
    fn fact_samples() -> Vec<FactSample>;

    /// Build from a task's params (a JSON object; `null`: no params, every default).
    fn from_json(params: &serde_json::Value, shell: Shell) -> Result<Self, ParamError> {
        let p: Self::Params = match params {
            serde_json::Value::Null => parse_params(&serde_json::json!({}))?,
            p => parse_params(p)?,
        };
        Self::from_params(p, shell)
    }
}

fn build_of<M: Described>(
    params: &serde_json::Value,
    shell: Shell,
) -> Result<Box<dyn Module>, ParamError> {
    M::from_json(params, shell).map(|m| Box::new(m) as Box<dyn Module>)
}

fn schema_of<P: schemars::JsonSchema>() -> schemars::Schema {
    schemars::schema_for!(P)
}

/// The row of module type `M`, built for `shells`.
pub const fn row<M: Described>(shells: &'static [Shell]) -> Row {
    Row {
        name: M::NAME,
        doc: M::DOC,
        shells,
        build: build_of::<M>,
        params: schema_of::<M::Params>,
        facts: M::fact_samples,
        type_name: std::any::type_name::<M>,
    }
}
