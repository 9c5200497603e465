//! What adding a module costs: the places `modules/src/table.rs` lists, each checked here
//! against the tables (`modules/src/registry.rs`) with a message that says what to add.
//!
//! [`missing`] checks every place for the rows it is given; the tests run it on the real
//! tables (nothing may be missing) and on the tables with a module planted in them — a row
//! of a module type of this file, and the source file of a module without its row — and
//! find exactly the places the list names, no more and no fewer.

use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{Ctx, Module, ModuleError, ParamError, Plan};
use kwin_engine::transport::Shell;
use kwin_modules::reference;
use kwin_modules::table::{row, Described, FactSample, Family, Row, POSIX};
use kwin_testkit::cases::{case_files, Suite};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_path_buf()
}

/// A family's folder under `modules/src/`, its table in `registry.rs`, the shells a row
/// there is usually built for, its cases' folder, and the fewest cases a module has.
fn family(f: Family) -> (&'static str, &'static str, &'static str, Suite, usize) {
    match f {
        Family::Linux => ("linux", "LINUX", "POSIX", Suite::linux(), 5),
        Family::Windows => ("windows", "WINDOWS", "POWERSHELL", Suite::windows(), 1),
        Family::Kube => ("kube", "KUBE", "POSIX", Suite::kube(), 1),
    }
}

/// The module types the sources define (`impl Described for T` in
/// `modules/src/<family>/<file>.rs`, or `<file>/mod.rs`): (family, file stem, type, the
/// file's path).
fn defined(sources: &[(String, String)]) -> Vec<(Family, String, String, String)> {
    let mut out = Vec::new();
    for (path, text) in sources {
        let Some(rest) = path.strip_prefix("modules/src/") else {
            continue;
        };
        let parts: Vec<&str> = rest.trim_end_matches(".rs").split('/').collect();
        let (dir, stem) = match parts.as_slice() {
            [dir, stem] if *stem != "mod" => (*dir, *stem),
            [dir, stem, "mod"] => (*dir, *stem),
            _ => continue,
        };
        let fam = [Family::Linux, Family::Windows, Family::Kube]
            .into_iter()
            .find(|f| family(*f).0 == dir);
        let Some(fam) = fam else {
            continue;
        };
        for line in text.lines() {
            if let Some(ty) = line
                .trim()
                .strip_prefix("impl Described for ")
                .and_then(|r| r.strip_suffix(" {"))
            {
                out.push((fam, stem.to_string(), ty.to_string(), path.clone()));
            }
        }
    }
    out
}

/// Every place a module of `rows` (or a module type the `sources` define) is missing from,
/// each as `<file>: <what to add>`. `sources`: (path from the workspace, text) of the
/// files under `modules/src/`.
fn missing(rows: &[(Family, &Row)], sources: &[(String, String)]) -> Vec<String> {
    let ws = workspace();
    let mut out = Vec::new();
    let text_of = |p: &str| {
        sources
            .iter()
            .find(|(f, _)| f == p)
            .map(|(_, t)| t.as_str())
            .unwrap_or("")
    };
    // The module's file is declared in its family's mod.rs and has a row.
    for (fam, stem, ty, path) in defined(sources) {
        let (dir, table, shells, _, _) = family(fam);
        let mod_rs = format!("modules/src/{dir}/mod.rs");
        let declared = text_of(&mod_rs)
            .lines()
            .any(|l| matches!(l.trim(), x if x == format!("pub mod {stem};") || x == format!("mod {stem};")));
        if !declared {
            out.push(format!(
                "{mod_rs}: add `pub mod {stem};` ({path} is not compiled without it)"
            ));
        }
        let type_path = format!("kwin_modules::{dir}::{stem}::{ty}");
        if !rows.iter().any(|(_, r)| (r.type_name)() == type_path) {
            out.push(format!(
                "modules/src/registry.rs: add `row::<{dir}::{stem}::{ty}>({shells})` to {table} ({path} defines the module, and it exists only with a row)"
            ));
        }
    }
    // Each row's module has cases, in its family's folder.
    for (fam, r) in rows {
        let (_, _, _, suite, least) = family(*fam);
        let n = case_files(&suite.dir)
            .iter()
            .filter(|c| c.module == r.name)
            .count();
        if n < least {
            let dir = suite
                .dir
                .strip_prefix(&ws)
                .unwrap_or(&suite.dir)
                .display()
                .to_string();
            out.push(format!(
                "{dir}/{}/: add cases (params, captured fact output, the expected plan; kwin_testkit::cases): {n} of at least {least}",
                r.name
            ));
        }
    }
    // Each module has an example per OS it runs on (a Kubernetes module of the first
    // control plane: one), and the generated pages list it.
    let all = reference::reference_of(rows.iter().map(|(f, r)| (*f, *r)));
    for m in &all {
        let oses: Vec<&str> = if m.family == Family::Kube {
            vec![]
        } else {
            m.oses().iter().map(|o| o.name()).collect()
        };
        let has = |os: &str| {
            m.examples
                .iter()
                .any(|e| e.contains(&format!("os = \"{}\"", os.to_lowercase())))
        };
        if m.examples.is_empty() {
            out.push(format!(
                "modules/src/examples.toml: add a [[tasks]] example with `module = \"{}\"`",
                m.name
            ));
        } else {
            for os in oses.into_iter().filter(|os| !has(os)) {
                out.push(format!(
                    "modules/src/examples.toml: add a [[tasks]] example of `{}` with `on = {{ os = \"{}\" }}`",
                    m.name,
                    os.to_lowercase()
                ));
            }
        }
    }
    let regenerate = "regenerate it: KWIN_BLESS=1 cargo test -p kwin-modules --test reference";
    let have = std::fs::read_to_string(ws.join("docs/modules.md")).unwrap_or_default();
    if have != reference::markdown_of(&all) + "\n" {
        out.push(format!("docs/modules.md: {regenerate}"));
    }
    let page = std::fs::read_to_string(ws.join("docs/plan.md")).unwrap_or_default();
    let want = reference::plan_page_with_list(&page, rows.iter().map(|(f, r)| (*f, *r)));
    if want.as_deref() != Some(page.as_str()) {
        out.push(format!("docs/plan.md (its module list): {regenerate}"));
    }
    out
}

/// (path from the workspace, text) of every `.rs` file under `modules/src/`.
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let ws = workspace();
    let mut files = Vec::new();
    walk(&ws.join("modules/src"), &mut files);
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).expect("source");
            let rel = f.strip_prefix(&ws).unwrap_or(&f).display().to_string();
            (rel, text)
        })
        .collect()
}

fn real_rows() -> Vec<(Family, &'static Row)> {
    kwin_modules::rows().collect()
}

#[test]
fn every_module_is_in_every_place() {
    let rows = real_rows();
    assert!(rows.len() > 35, "{} rows", rows.len());
    let defined = defined(&sources());
    assert_eq!(defined.len(), rows.len(), "{defined:?}");
    let found = missing(&rows, &sources());
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// A module that exists only as a row: what a test can plant without compiling a file.
#[derive(Debug)]
struct Planted;

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct PlantedParams {
    /// What it manages.
    #[allow(dead_code)]
    path: String,
}

impl Module for Planted {
    fn facts(&self, _shell: Shell) -> Vec<FactQuery> {
        Vec::new()
    }
    fn plan(&self, _facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        Ok(Plan::NoOp {
            why: "planted".into(),
            warning: None,
        })
    }
}

impl Described for Planted {
    const NAME: &'static str = "planted_for_a_test";
    const DOC: &'static str = "a module planted by tests/adding_a_module.rs";
    type Params = PlantedParams;
    fn from_params(_p: PlantedParams, _shell: Shell) -> Result<Self, ParamError> {
        Ok(Planted)
    }
    fn fact_samples() -> Vec<FactSample> {
        Vec::new()
    }
}

static PLANTED: Row = row::<Planted>(POSIX);

/// The places table.rs lists for adding a module, as the files they name.
fn documented_places() -> Vec<String> {
    let table =
        std::fs::read_to_string(workspace().join("modules/src/table.rs")).expect("table.rs");
    let start = table
        .find("//! Adding a module")
        .expect("modules/src/table.rs: a `//! Adding a module` list");
    table[start..]
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .filter_map(|l| {
            l.trim_start_matches("//!")
                .trim()
                .strip_prefix(char::is_numeric)
        })
        .filter_map(|l| l.split('`').nth(1).map(str::to_string))
        .collect()
}

/// The file a finding asks to change, with the module's name written `<name>` and its file
/// `<file>`.
fn place(finding: &str, name: &str, stem: &str) -> String {
    let file = finding.split(": ").next().unwrap_or(finding);
    let file = file.split(" (").next().unwrap_or(file);
    file.replace(name, "<name>")
        .replace(&format!("/{stem}."), "/<file>.")
}

#[test]
fn a_module_planted_in_the_tables_is_missing_from_exactly_the_listed_places() {
    // A row for a module with nothing else: its cases, its example and the two generated
    // pages are missing.
    let mut rows = real_rows();
    rows.push((Family::Linux, &PLANTED));
    let found = missing(&rows, &sources());
    let name = Planted::NAME;
    assert_eq!(
        found,
        [
            format!("modules/tests/cases/{name}/: add cases (params, captured fact output, the expected plan; kwin_testkit::cases): 0 of at least 5"),
            format!("modules/src/examples.toml: add a [[tasks]] example with `module = \"{name}\"`"),
            "docs/modules.md: regenerate it: KWIN_BLESS=1 cargo test -p kwin-modules --test reference".to_string(),
            "docs/plan.md (its module list): regenerate it: KWIN_BLESS=1 cargo test -p kwin-modules --test reference".to_string(),
        ]
    );
    // A module's file with nothing else: it is declared nowhere and has no row.
    let mut files = sources();
    files.push((
        "modules/src/linux/planted.rs".to_string(),
        "impl Described for Planted {\n}\n".to_string(),
    ));
    let file_only = missing(&real_rows(), &files);
    assert_eq!(
        file_only,
        [
            "modules/src/linux/mod.rs: add `pub mod planted;` (modules/src/linux/planted.rs is not compiled without it)",
            "modules/src/registry.rs: add `row::<linux::planted::Planted>(POSIX)` to LINUX (modules/src/linux/planted.rs defines the module, and it exists only with a row)",
        ]
    );
    // Together, the places table.rs lists (besides the file itself), in its order.
    let mut places: Vec<String> = vec!["modules/src/linux/<file>.rs".to_string()];
    for f in file_only.iter().chain(&found) {
        let p = place(f, name, "planted");
        if !places.contains(&p) {
            places.push(p);
        }
    }
    let documented: Vec<String> = documented_places()
        .into_iter()
        .map(|p| p.replace("<family>", "linux"))
        .collect();
    assert_eq!(
        places, documented,
        "modules/src/table.rs's list of what adding a module takes is not what the checks find"
    );
}

// ------------------------------------------------------------------------- facts

/// Where a module's facts are written: its family's `facts` module (table.rs, "Facts").
const FACT_HOMES: &[&str] = &[
    "modules/src/linux/facts/",
    "modules/src/windows/facts.rs",
    "modules/src/kube/facts.rs",
];

/// Facts still written beside the module that reads them, in files other work is changing
/// now: each is to move into its family's `facts` module (and out of this list).
const NOT_MOVED_YET: &[&str] = &[
    "modules/src/windows/command.rs",
    "modules/src/windows/preflight.rs",
    "modules/src/kube/delete.rs",
    "modules/src/kube/kubeadm_upgrade.rs",
    "modules/src/kube/kubelet_restart.rs",
    "modules/src/kube/node.rs",
];

/// `<file>: <type>` of every fact (`impl Fact for T`) written outside [`FACT_HOMES`].
fn facts_away_from_home(sources: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (path, text) in sources {
        if FACT_HOMES.iter().any(|h| path.starts_with(h)) {
            continue;
        }
        for line in text.lines() {
            if let Some(ty) = line.trim().strip_prefix("impl Fact for ") {
                out.push(format!("{path}: {}", ty.trim_end_matches(" {")));
            }
        }
    }
    out
}

#[test]
fn facts_are_written_in_their_familys_facts_module() {
    let away = facts_away_from_home(&sources());
    let new: Vec<&String> = away
        .iter()
        .filter(|f| {
            !NOT_MOVED_YET
                .iter()
                .any(|n| f.starts_with(&format!("{n}:")))
        })
        .collect();
    assert!(
        new.is_empty(),
        "facts are written in their family's facts module ({FACT_HOMES:?}):\n{new:#?}"
    );
    for n in NOT_MOVED_YET {
        assert!(
            away.iter().any(|f| f.starts_with(&format!("{n}:"))),
            "{n} has no fact any more: take it off NOT_MOVED_YET"
        );
    }
}

#[test]
fn a_fact_beside_its_module_is_reported() {
    let files = vec![
        (
            "modules/src/linux/planted.rs".to_string(),
            "pub struct PlantedFact;\nimpl Fact for PlantedFact {\n}\n".to_string(),
        ),
        (
            "modules/src/linux/facts/planted.rs".to_string(),
            "impl Fact for HomeFact {\n}\n".to_string(),
        ),
    ];
    assert_eq!(
        facts_away_from_home(&files),
        ["modules/src/linux/planted.rs: PlantedFact"]
    );
}
