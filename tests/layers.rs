//! The shape of `src/` (the `kwin` binary) and `modules/src/` (`kwin-modules`), and where
//! kwin's defaults live, read from the source with syn (code under `#[cfg(test)]` is not
//! production code and is skipped; `engine/tests/layers.rs` holds the engine's layers):
//!
//! - only `src/output/` prints or touches stdout, stderr or stdin, and only `src/drive.rs`
//!   exits the process;
//! - the modules of `src/`, and those of `modules/src/`, import each other without a cycle
//!   (a parent module's use of its own child counts like any other; only its `pub use` of
//!   the child, a re-export, does not);
//! - the module families of `kwin-modules` (`linux`, `windows`, `kube`) never import each
//!   other;
//! - `src/` runs the pipeline's run phases only through `pipeline::run`: it names no piece of
//!   the upgrade gate, verify, the lock or the executor; and the phases are numbered only in
//!   the list of `engine/src/pipeline/mod.rs`;
//! - kwin's default values are written once, in `engine/src/plan/effective/defaults.rs` (and
//!   the admin kubeconfig's path in `modules/src/kube/mod.rs`): the literals anywhere else in
//!   `engine/src`, `modules/src` or `src`, a literal schema default, or a literal fallback
//!   (`unwrap_or(3)`) for a plan key fail.

use proc_macro2::TokenTree;
use std::collections::{BTreeMap, BTreeSet};
use syn::spanned::Spanned;
use syn::visit::Visit;

mod source;

use source::{flat, is_test_only, sources};

// ------------------------------------------------------------------------- only output prints

/// What a production file of `src/` does with the terminal and the process.
#[derive(Default)]
struct Effects {
    /// (line, what): print macros, `stdout()`, `stderr()`, `stdin()`.
    prints: Vec<(usize, String)>,
    /// Lines of `process::exit`.
    exits: Vec<usize>,
}

impl<'ast> Visit<'ast> for Effects {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test_only(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !is_test_only(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        let name = m.path.segments.last().map(|s| s.ident.to_string());
        if let Some(n) =
            name.filter(|n| ["print", "println", "eprint", "eprintln", "dbg"].contains(&n.as_str()))
        {
            self.prints.push((m.span().start().line, format!("{n}!")));
        }
        let mut toks = Vec::new();
        flat(m.tokens.clone(), &mut toks);
        for t in toks {
            if let TokenTree::Ident(i) = t {
                if i == "stdout" || i == "stderr" || i == "stdin" {
                    self.prints.push((i.span().start().line, i.to_string()));
                }
            }
        }
        syn::visit::visit_macro(self, m);
    }
    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if let Some(last) = segs.last() {
            if ["stdout", "stderr", "stdin"].contains(&last.as_str()) {
                self.prints.push((p.span().start().line, segs.join("::")));
            }
            if last == "exit" && segs.iter().any(|s| s == "process") {
                self.exits.push(p.span().start().line);
            }
        }
        syn::visit::visit_path(self, p);
    }
    fn visit_use_tree(&mut self, u: &'ast syn::UseTree) {
        if let syn::UseTree::Name(n) = u {
            if ["stdout", "stderr", "stdin"].contains(&n.ident.to_string().as_str()) {
                self.prints
                    .push((n.ident.span().start().line, format!("use {}", n.ident)));
            }
        }
        syn::visit::visit_use_tree(self, u);
    }
}

fn effects(ast: &syn::File) -> Effects {
    let mut e = Effects::default();
    e.visit_file(ast);
    e
}

#[test]
fn only_the_output_module_prints_and_only_drive_exits() {
    let mut found = Vec::new();
    let mut output_prints = 0;
    for (file, ast) in sources(&["src"]) {
        let e = effects(&ast);
        if file.starts_with("src/output/") {
            output_prints += e.prints.len();
        } else {
            for (line, what) in e.prints {
                found.push(format!(
                    "{file}:{line}: {what} (print through crate::output)"
                ));
            }
        }
        if file != "src/drive.rs" {
            for line in e.exits {
                found.push(format!(
                    "{file}:{line}: process::exit (only drive.rs ends the process)"
                ));
            }
        }
    }
    assert!(output_prints > 5, "the output module prints nothing?");
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_print_check_sees_prints_outside_output() {
    let ast = syn::parse_file(
        r#"
use std::io::{stderr, Write};
fn f() {
    println!("x");
    let _ = writeln!(std::io::stdout().lock(), "y");
    let _ = stderr();
    std::process::exit(3);
}
#[cfg(test)]
mod tests { fn t() { eprintln!("fine in tests"); } }
"#,
    )
    .expect("parse");
    let e = effects(&ast);
    let what: Vec<&str> = e.prints.iter().map(|(_, w)| w.as_str()).collect();
    assert_eq!(what, ["use stderr", "println!", "stdout", "stderr"]);
    assert_eq!(e.exits, [7]);
}

// ------------------------------------------------------------------------- no cycle in src/

/// The module path of a file of `src/` (`src/output/human.rs` → `output::human`).
/// The module path of a file of the `kwin` binary (`src/`) or of `kwin-modules`
/// (`modules/src/`): `src/output/mod.rs` → `output`, `modules/src/kube/verify/run.rs` →
/// `kube::verify::run`, `main.rs` / `lib.rs` → the crate root.
fn module_of(file: &str) -> String {
    let p = file
        .trim_start_matches("modules/")
        .trim_start_matches("src/");
    let p = p.trim_end_matches(".rs").trim_end_matches("/mod");
    let p = p.trim_end_matches("main").trim_end_matches("lib");
    p.trim_end_matches('/').replace('/', "::")
}

/// Every module a file refers to: paths that start with `crate::`, `super::` (any number),
/// `self::` or one of the file's own child modules (`mod x;` … `x::f()`), in `use` trees and
/// in code, each with whether it was written in a `pub use` (a re-export).
struct Refs {
    /// The module the code being visited is in: the file's, plus inline modules entered.
    module: Vec<String>,
    /// The file's own child modules (`mod x;`).
    children: BTreeSet<String>,
    /// Depth of inline modules entered (a bare `x::` there is not the file's child).
    inline: usize,
    /// (module path, written in a `pub use`).
    out: BTreeSet<(String, bool)>,
}

impl Refs {
    fn new(module: &str, ast: &syn::File) -> Refs {
        Refs {
            module: module
                .split("::")
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
            children: ast
                .items
                .iter()
                .filter_map(|i| match i {
                    syn::Item::Mod(m) if m.content.is_none() && !is_test_only(&m.attrs) => {
                        Some(m.ident.to_string())
                    }
                    _ => None,
                })
                .collect(),
            inline: 0,
            out: BTreeSet::new(),
        }
    }

    /// The absolute module path `segs` (a path as written) names, if it is one of the
    /// crate's.
    fn resolve(&self, segs: &[String]) -> Option<Vec<String>> {
        let first = segs.first()?;
        let (mut base, mut rest) = match first.as_str() {
            "crate" => (Vec::new(), &segs[1..]),
            "self" => (self.module.clone(), &segs[1..]),
            "super" => (self.module.clone(), segs),
            c if self.inline == 0 && self.children.contains(c) => (self.module.clone(), segs),
            _ => return None,
        };
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
        base.extend(rest.iter().filter(|s| *s != "self").cloned());
        Some(base)
    }

    fn add(&mut self, segs: &[String], reexport: bool) {
        if let Some(path) = self.resolve(segs) {
            self.out.insert((path.join("::"), reexport));
        }
    }
}

impl<'ast> Visit<'ast> for Refs {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if is_test_only(&m.attrs) || m.content.is_none() {
            return;
        }
        self.module.push(m.ident.to_string());
        self.inline += 1;
        syn::visit::visit_item_mod(self, m);
        self.inline -= 1;
        self.module.pop();
    }
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        fn walk(t: &syn::UseTree, pre: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
            match t {
                syn::UseTree::Path(p) => {
                    pre.push(p.ident.to_string());
                    walk(&p.tree, pre, out);
                    pre.pop();
                }
                syn::UseTree::Name(n) => {
                    let mut v = pre.clone();
                    v.push(n.ident.to_string());
                    out.push(v);
                }
                syn::UseTree::Rename(r) => {
                    let mut v = pre.clone();
                    v.push(r.ident.to_string());
                    out.push(v);
                }
                syn::UseTree::Glob(_) => out.push(pre.clone()),
                syn::UseTree::Group(g) => {
                    for t in &g.items {
                        walk(t, pre, out);
                    }
                }
            }
        }
        let reexport = !matches!(u.vis, syn::Visibility::Inherited);
        let mut paths = Vec::new();
        walk(&u.tree, &mut Vec::new(), &mut paths);
        for p in paths {
            self.add(&p, reexport);
        }
    }
    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.add(&segs, false);
        syn::visit::visit_path(self, p);
    }
    /// `pub(super)`, `pub(in crate::x)`: who may see an item, not a use of another module.
    fn visit_visibility(&mut self, _v: &'ast syn::Visibility) {}
}

/// Strongly connected components of more than one module, each as `a → b → a`.
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    // Tarjan, small and recursive: src/ has a dozen files.
    struct T<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<&'a str>>,
    }
    impl<'a> T<'a> {
        fn visit(&mut self, v: &'a str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low[v];
                    self.low.insert(v, lv.min(lw));
                } else if self.on.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low[v];
                    self.low.insert(v, lv.min(iw));
                }
            }
            if self.low[v] == self.index[v] {
                let mut comp = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    self.out.push(comp);
                }
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.out
        .into_iter()
        .map(|c| {
            let mut s = c.join(" → ");
            s.push_str(&format!(" → {}", c[0]));
            s
        })
        .collect()
}

/// Module → the modules of the same crate it refers to (a reference to an item resolves to
/// the longest module prefix, the crate root included). A parent's references to its own
/// children count like any other; only a `pub use` of its own child (a re-export, namespace
/// plumbing) is not an edge.
fn module_graph(files: &[(String, syn::File)]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = files.iter().map(|(f, _)| module_of(f)).collect();
    let mut edges = BTreeMap::new();
    for (file, ast) in files {
        let m = module_of(file);
        let mut r = Refs::new(&m, ast);
        r.visit_file(ast);
        let mut to = BTreeSet::new();
        for (path, reexport) in r.out {
            let segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
            let target = (0..=segs.len())
                .rev()
                .map(|n| segs[..n].join("::"))
                .find(|p| modules.contains(p));
            let Some(t) = target else {
                continue;
            };
            let child = m.is_empty() || t.starts_with(&format!("{m}::"));
            if t != m && !(reexport && child) {
                to.insert(t);
            }
        }
        edges.insert(m, to);
    }
    edges
}

#[test]
fn the_modules_of_src_import_each_other_without_a_cycle() {
    let files = sources(&["src"]);
    let graph = module_graph(&files);
    assert!(graph.len() > 8, "{graph:?}");
    let found = cycles(&graph);
    assert!(
        found.is_empty(),
        "import cycles in src/:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_cycle_check_sees_a_cycle() {
    let parse = |s: &str| syn::parse_file(s).expect("parse");
    let files = vec![
        (
            "src/a.rs".to_string(),
            parse("use crate::b::f; pub fn g() { f() }"),
        ),
        (
            "src/b.rs".to_string(),
            parse("pub fn f() { crate::a::g() }"),
        ),
        ("src/c.rs".to_string(), parse("use super::a::g;")),
    ];
    assert_eq!(cycles(&module_graph(&files)), ["a → b → a"]);
}

/// A parent and its child that use each other are a cycle, however the parent names the
/// child (`child::f`, `self::child::f`, `crate::…::child::f`); a parent's `pub use` of its
/// own child is namespace plumbing, not an edge.
#[test]
fn the_cycle_check_sees_a_parent_and_child_cycle() {
    let parse = |s: &str| syn::parse_file(s).expect("parse");
    let child = (
        "modules/src/kube/join.rs".to_string(),
        parse("use super::ADMIN; pub fn g() -> &'static str { ADMIN }"),
    );
    for parent in [
        "pub mod join; pub const ADMIN: &str = \"a\"; fn f() { join::g(); }",
        "pub mod join; pub const ADMIN: &str = \"a\"; use self::join::g;",
        "pub mod join; pub const ADMIN: &str = \"a\"; fn f() { crate::kube::join::g(); }",
        "mod join; pub const ADMIN: &str = \"a\"; use join::g as h;",
    ] {
        let files = vec![
            ("modules/src/kube/mod.rs".to_string(), parse(parent)),
            child.clone(),
        ];
        assert_eq!(
            cycles(&module_graph(&files)),
            ["kube → kube::join → kube"],
            "{parent}"
        );
    }
    // A re-export of the child is no edge; nor is a child's `pub(super)`: no cycle.
    let files = vec![
        (
            "modules/src/kube/mod.rs".to_string(),
            parse("mod join; pub use join::g; pub const ADMIN: &str = \"a\";"),
        ),
        child,
    ];
    assert_eq!(cycles(&module_graph(&files)), Vec::<String>::new());
    let files = vec![
        (
            "modules/src/kube/mod.rs".to_string(),
            parse("mod join; fn f() { join::g(); }"),
        ),
        (
            "modules/src/kube/join.rs".to_string(),
            parse("pub(super) fn g() {}"),
        ),
    ];
    assert_eq!(cycles(&module_graph(&files)), Vec::<String>::new());
}

#[test]
fn the_module_files_of_kwin_modules_import_each_other_without_a_cycle() {
    let files = sources(&["modules/src"]);
    let graph = module_graph(&files);
    assert!(graph.len() > 40, "{graph:?}");
    let found = cycles(&graph);
    assert!(
        found.is_empty(),
        "import cycles in modules/src/:\n{}",
        found.join("\n")
    );
}

/// The module families of `kwin-modules`: each may use `shared`, `paths`, `table` and the
/// crate root, never another family.
const FAMILIES: &[&str] = &["linux", "windows", "kube"];

fn family_edges(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let family = |m: &str| {
        let first = m.split("::").next().unwrap_or("");
        FAMILIES.contains(&first).then(|| first.to_string())
    };
    let mut out = Vec::new();
    for (from, tos) in graph {
        for to in tos {
            if let (Some(a), Some(b)) = (family(from), family(to)) {
                if a != b {
                    out.push(format!("{from} → {to}"));
                }
            }
        }
    }
    out
}

#[test]
fn the_module_families_never_import_each_other() {
    let graph = module_graph(&sources(&["modules/src"]));
    let found = family_edges(&graph);
    assert!(
        found.is_empty(),
        "a module family imports another (put what they share in shared/ or paths.rs):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_family_check_sees_a_crossing() {
    let parse = |s: &str| syn::parse_file(s).expect("parse");
    let files = vec![
        (
            "modules/src/kube/join.rs".to_string(),
            parse("use crate::windows::paths::check; use crate::paths::x;"),
        ),
        ("modules/src/windows/paths.rs".to_string(), parse("")),
        ("modules/src/paths.rs".to_string(), parse("")),
    ];
    assert_eq!(
        family_edges(&module_graph(&files)),
        ["kube::join → windows::paths"]
    );
}

// ------------------------------------------------------------------------- the run is the pipeline's

/// The pieces the pipeline's run phases are made of (`engine/src/pipeline/mod.rs` lists
/// them): `src/` runs them only through `pipeline::run`, never composes them itself. Each
/// entry: a path prefix, and the items under it `src/` may name (the command line's
/// options of a piece). The session's lock, connect and execute are not public at all.
const RUN_PIECES: &[(&str, &[&str])] = &[
    // the upgrade gate
    ("kwin_modules::kube::upgrade", &[]),
    // the verify runner
    (
        "kwin_modules::kube::verify",
        &["VerifyOptions", "NAMESPACE"],
    ),
    // the executor and the plan's lock
    ("kwin_engine::exec::execute", &[]),
    ("kwin_engine::exec::lock", &[]),
];

/// Every path a file writes (in `use` trees and in code), with an imported name or alias
/// at its start replaced by what it stands for: (line, full path).
fn full_paths(ast: &syn::File) -> Vec<(usize, String)> {
    /// Imported name → (line, full path).
    struct Imports(BTreeMap<String, (usize, String)>);
    impl<'ast> Visit<'ast> for Imports {
        fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
            type Out = BTreeMap<String, (usize, String)>;
            fn walk(t: &syn::UseTree, pre: &mut Vec<String>, out: &mut Out) {
                match t {
                    syn::UseTree::Path(p) => {
                        pre.push(p.ident.to_string());
                        walk(&p.tree, pre, out);
                        pre.pop();
                    }
                    syn::UseTree::Name(n) => {
                        let mut v = pre.clone();
                        if n.ident != "self" {
                            v.push(n.ident.to_string());
                        }
                        if let Some(last) = v.last() {
                            let line = n.ident.span().start().line;
                            out.insert(last.clone(), (line, v.join("::")));
                        }
                    }
                    syn::UseTree::Rename(r) => {
                        let mut v = pre.clone();
                        if r.ident != "self" {
                            v.push(r.ident.to_string());
                        }
                        let line = r.ident.span().start().line;
                        out.insert(r.rename.to_string(), (line, v.join("::")));
                    }
                    syn::UseTree::Glob(_) => {}
                    syn::UseTree::Group(g) => {
                        for t in &g.items {
                            walk(t, pre, out);
                        }
                    }
                }
            }
            walk(&u.tree, &mut Vec::new(), &mut self.0);
        }
    }
    struct Paths<'a> {
        imports: &'a BTreeMap<String, (usize, String)>,
        out: Vec<(usize, String)>,
    }
    impl<'ast> Visit<'ast> for Paths<'_> {
        fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
            if !is_test_only(&m.attrs) {
                syn::visit::visit_item_mod(self, m);
            }
        }
        fn visit_item_use(&mut self, _u: &'ast syn::ItemUse) {}
        /// A path of one name is a local or an import (the import counts already).
        fn visit_path(&mut self, p: &'ast syn::Path) {
            let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
            if segs.len() > 1 {
                let head = match self.imports.get(&segs[0]) {
                    Some((_, full)) => full.clone(),
                    None => segs[0].clone(),
                };
                let mut full = vec![head];
                full.extend(segs[1..].iter().cloned());
                self.out.push((p.span().start().line, full.join("::")));
            }
            syn::visit::visit_path(self, p);
        }
    }
    let mut imports = Imports(BTreeMap::new());
    imports.visit_file(ast);
    let mut paths = Paths {
        imports: &imports.0,
        out: Vec::new(),
    };
    paths.visit_file(ast);
    paths.out.extend(imports.0.values().cloned());
    paths.out
}

/// The paths of `ast` that name a run piece beyond what `RUN_PIECES` allows.
fn run_pieces(ast: &syn::File) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (line, path) in full_paths(ast) {
        for (piece, allowed) in RUN_PIECES {
            let Some(rest) = path.strip_prefix(piece) else {
                continue;
            };
            let item = rest.trim_start_matches("::");
            if (rest.is_empty() || rest.starts_with("::")) && !allowed.contains(&item) {
                // The import of a module whose allowed items are then named is no use of it.
                if item.is_empty() && !allowed.is_empty() {
                    continue;
                }
                found.push((line, path.clone()));
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

#[test]
fn src_runs_the_gate_verify_and_executor_only_through_the_pipeline() {
    let mut found = Vec::new();
    for (file, ast) in sources(&["src"]) {
        for (line, path) in run_pieces(&ast) {
            found.push(format!("{file}:{line}: {path}"));
        }
    }
    assert!(
        found.is_empty(),
        "src/ composes the run itself (call kwin_engine::pipeline::run, which runs the gate, lock, executor and verify in the order pipeline/mod.rs lists):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_run_check_sees_a_piece_named_in_src() {
    let ast = syn::parse_file(
        r#"
use kwin_modules::kube::upgrade::gate::{self, GateSpec};
use kwin_modules::kube::verify as v;
fn f() {
    let _ = gate::check(r, &spec);
    let _ = v::verify(r, &spec);
    let _ = v::VerifyOptions { timeout };
    let _ = kwin_engine::exec::lock::Lock::acquire(d, n, id);
}
#[cfg(test)]
mod tests { fn t() { kwin_modules::kube::verify::verify(r, &s); } }
"#,
    )
    .expect("parse");
    let want = [
        (2, "kwin_modules::kube::upgrade::gate"),
        (2, "kwin_modules::kube::upgrade::gate::GateSpec"),
        (5, "kwin_modules::kube::upgrade::gate::check"),
        (6, "kwin_modules::kube::verify::verify"),
        (8, "kwin_engine::exec::lock::Lock::acquire"),
    ];
    assert_eq!(run_pieces(&ast), want.map(|(l, p)| (l, p.to_string())));
}

// ------------------------------------------------------------------------- phases, numbered once

/// The one place that numbers the phases: the list at the top of the pipeline's module docs.
const PHASE_LIST: &str = "engine/src/pipeline/mod.rs";

/// Lines of `text` that number a phase (`phase 4`, `Phases 1–5`) or a step of the pipeline
/// in a code comment (`// 3. Effective values`), outside the list: (line, text).
fn phase_numbers(file: &str, text: &str) -> Vec<(usize, String)> {
    let in_pipeline = file.starts_with("engine/src/pipeline/");
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if file == PHASE_LIST && t.starts_with("//!") {
            continue;
        }
        let lower = t.to_lowercase();
        let numbered = lower.match_indices("phase").any(|(at, _)| {
            let rest = lower[at + "phase".len()..].trim_start_matches('s');
            rest.trim_start().starts_with(|c: char| c.is_ascii_digit())
        });
        let step = in_pipeline
            && t.strip_prefix("//").map(str::trim_start).is_some_and(|c| {
                let digits = c.chars().take_while(char::is_ascii_digit).count();
                digits > 0 && c[digits..].starts_with(['.', '–', '-'])
            });
        if numbered || step {
            out.push((i + 1, t.to_string()));
        }
    }
    out
}

#[test]
fn phases_are_numbered_only_in_the_pipelines_list() {
    let mut files = Vec::new();
    for d in ["engine/src", "modules/src", "src", "docs"] {
        source::rust_files(&source::root().join(d), &mut files);
    }
    for d in ["docs", "."] {
        let dir = source::root().join(d);
        for e in std::fs::read_dir(&dir).expect("dir").flatten() {
            if e.path().extension().is_some_and(|x| x == "md") {
                files.push(e.path());
            }
        }
    }
    let mut found = Vec::new();
    for f in files {
        let rel = f
            .strip_prefix(source::root())
            .unwrap_or(&f)
            .display()
            .to_string();
        let text = std::fs::read_to_string(&f).expect("read");
        for (line, what) in phase_numbers(&rel, &text) {
            found.push(format!("{rel}:{line}: {what}"));
        }
    }
    assert!(
        found.is_empty(),
        "phases are numbered only in {PHASE_LIST}'s list; elsewhere name them (`the expand phase`):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_phase_check_sees_a_number_outside_the_list() {
    let text = "//! 4  expand   recipes\n/// Phases 1–5: every command starts here.\n    // 3. Effective values.\n// kubeadm init phase certs\n/// What phase 4 gives.\n";
    let lines = |file: &str| -> Vec<usize> {
        phase_numbers(file, text)
            .into_iter()
            .map(|(l, _)| l)
            .collect()
    };
    assert_eq!(lines(PHASE_LIST), [2, 3, 5]);
    assert_eq!(lines("engine/src/pipeline/phase.rs"), [2, 3, 5]);
    assert_eq!(lines("src/drive.rs"), [2, 5]);
}

// ------------------------------------------------------------------------- defaults, once

/// Default values that have one home.
const DEFAULT_STRINGS: &[&str] = &[
    "10.244.0.0/16",
    "10.96.0.0/12",
    "10.96.0.10",
    "cluster.local",
    "/etc/kubernetes/admin.conf",
];
const DEFAULT_INTEGERS: &[u64] = &[6443];
/// Plan keys whose fallback must come from the defaults module.
const PLAN_KEYS: &[&str] = &[
    "pod_cidr",
    "service_cidr",
    "dns_service_ip",
    "max_pods_per_node",
    "dns_domain",
    "windows_taint",
    "windows_runtime_classes",
    "verify",
    "vni",
    "parallelism",
    "step_timeout",
    "retries",
    "retry_delay",
    "allow_reboot",
    "output_budget_mib",
    "keep_runs",
    "logs_limit_mib",
];
/// The executor's names of plan keys (`settings.output_budget_mib` is `output_budget` in
/// bytes).
const EXECUTOR_KEYS: &[&str] = &["output_budget"];
/// Files that may write the literals: the defaults themselves.
const HOMES: &[(&str, &[&str])] = &[("modules/src/kube/mod.rs", &["/etc/kubernetes/admin.conf"])];
/// The defaults module: every literal of it is a default's one home.
const DEFAULTS: &str = "engine/src/plan/effective/defaults.rs";

struct Literals {
    /// (line, what).
    found: Vec<(usize, String)>,
}

impl Literals {
    fn token(&mut self, t: &TokenTree) {
        if let TokenTree::Literal(l) = t {
            if let Ok(lit) = syn::parse2::<syn::Lit>(TokenTree::Literal(l.clone()).into()) {
                self.lit(&lit);
            }
        }
    }
    fn lit(&mut self, lit: &syn::Lit) {
        let line = lit.span().start().line;
        match lit {
            syn::Lit::Str(s) if DEFAULT_STRINGS.contains(&s.value().as_str()) => {
                self.found.push((line, format!("{:?}", s.value())))
            }
            syn::Lit::Int(i)
                if i.base10_parse::<u64>()
                    .is_ok_and(|n| DEFAULT_INTEGERS.contains(&n)) =>
            {
                self.found.push((line, i.to_string()))
            }
            _ => {}
        }
    }
}

impl<'ast> Visit<'ast> for Literals {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test_only(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !is_test_only(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }
    fn visit_lit(&mut self, l: &'ast syn::Lit) {
        self.lit(l);
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        let mut toks = Vec::new();
        flat(m.tokens.clone(), &mut toks);
        for t in &toks {
            self.token(t);
        }
    }
    /// A default literal inside `#[schemars(...)]`.
    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        if let syn::Meta::List(list) = &a.meta {
            if a.path().is_ident("schemars") {
                let mut toks = Vec::new();
                flat(list.tokens.clone(), &mut toks);
                for t in &toks {
                    self.token(t);
                }
            }
        }
    }
    /// A plan key's schema default, `#[schemars(extend("default" = <literal>))]`: it must be
    /// the defaults module's constant.
    fn visit_field(&mut self, f: &'ast syn::Field) {
        let key = f.ident.as_ref().map(|i| i.to_string());
        if key.is_some_and(|k| PLAN_KEYS.contains(&k.as_str())) {
            for a in f.attrs.iter().filter(|a| a.path().is_ident("schemars")) {
                let syn::Meta::List(list) = &a.meta else {
                    continue;
                };
                let mut toks = Vec::new();
                flat(list.tokens.clone(), &mut toks);
                for w in toks.windows(3) {
                    if let [TokenTree::Literal(k), TokenTree::Punct(eq), TokenTree::Literal(v)] = w
                    {
                        if k.to_string() == "\"default\"" && eq.as_char() == '=' {
                            self.found
                                .push((v.span().start().line, format!("schema default {v}")));
                        }
                    }
                }
            }
        }
        syn::visit::visit_field(self, f);
    }
    /// A plan key's value written as a literal in a struct expression (`retries: 3`,
    /// `step_timeout: Duration::from_secs(600)`): a default copied where the executor's or a
    /// command's options are made.
    fn visit_field_value(&mut self, f: &'ast syn::FieldValue) {
        if let syn::Member::Named(n) = &f.member {
            let k = n.to_string();
            if (PLAN_KEYS.contains(&k.as_str()) || EXECUTOR_KEYS.contains(&k.as_str()))
                && is_literal_value(&f.expr)
            {
                self.found
                    .push((n.span().start().line, format!("`{k}: <literal>`")));
            }
        }
        syn::visit::visit_field_value(self, f);
    }
    /// `const DEFAULT_X: T = <literal>;` (or `static`): a default with a home of its own.
    fn visit_item_const(&mut self, c: &'ast syn::ItemConst) {
        if c.ident.to_string().starts_with("DEFAULT_") && is_literal_value(&c.expr) {
            self.found
                .push((c.ident.span().start().line, format!("const {}", c.ident)));
        }
        syn::visit::visit_item_const(self, c);
    }
    fn visit_item_static(&mut self, c: &'ast syn::ItemStatic) {
        if c.ident.to_string().starts_with("DEFAULT_") && is_literal_value(&c.expr) {
            self.found
                .push((c.ident.span().start().line, format!("static {}", c.ident)));
        }
        syn::visit::visit_item_static(self, c);
    }
    /// `<plan key>.unwrap_or(<literal>)`.
    fn visit_expr_method_call(&mut self, c: &'ast syn::ExprMethodCall) {
        if c.method == "unwrap_or" || c.method == "unwrap_or_else" {
            let key = match &*c.receiver {
                syn::Expr::Field(f) => match &f.member {
                    syn::Member::Named(n) => Some(n.to_string()),
                    _ => None,
                },
                _ => None,
            };
            let literal = matches!(c.args.first(), Some(syn::Expr::Lit(_)));
            if let (Some(k), true) = (key, literal) {
                if PLAN_KEYS.contains(&k.as_str()) {
                    self.found.push((
                        c.method.span().start().line,
                        format!("`{k}.unwrap_or(<literal>)`"),
                    ));
                }
            }
        }
        syn::visit::visit_expr_method_call(self, c);
    }
}

/// Whether `e` is made of literals only: `3`, `64 << 20`, `Duration::from_secs(600)`,
/// `"2h".to_string()`.
fn is_literal_value(e: &syn::Expr) -> bool {
    match e {
        syn::Expr::Lit(_) => true,
        syn::Expr::Paren(p) => is_literal_value(&p.expr),
        syn::Expr::Group(g) => is_literal_value(&g.expr),
        syn::Expr::Unary(u) => is_literal_value(&u.expr),
        syn::Expr::Cast(c) => is_literal_value(&c.expr),
        syn::Expr::Binary(b) => is_literal_value(&b.left) && is_literal_value(&b.right),
        syn::Expr::Call(c) => !c.args.is_empty() && c.args.iter().all(is_literal_value),
        syn::Expr::MethodCall(m) => {
            is_literal_value(&m.receiver) && m.args.iter().all(is_literal_value)
        }
        _ => false,
    }
}

fn default_literals(ast: &syn::File) -> Vec<(usize, String)> {
    let mut l = Literals { found: Vec::new() };
    l.visit_file(ast);
    l.found
}

#[test]
fn default_values_are_written_only_in_the_defaults_module() {
    let mut found = Vec::new();
    for (file, ast) in sources(&["engine/src", "modules/src", "src"]) {
        if file == DEFAULTS {
            continue;
        }
        let allowed: &[&str] = HOMES
            .iter()
            .find(|(f, _)| *f == file)
            .map(|(_, a)| *a)
            .unwrap_or(&[]);
        for (line, what) in default_literals(&ast) {
            if !allowed.iter().any(|a| what == format!("{a:?}")) {
                found.push(format!("{file}:{line}: {what}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "kwin's defaults are written in engine/src/plan/effective/defaults.rs (read them from there):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_defaults_check_sees_a_copy() {
    let ast = syn::parse_file(
        r#"
struct Cluster {
    #[schemars(extend("default" = "cluster.local"))]
    dns_domain: Option<String>,
    #[schemars(extend("default" = defaults::MAX_PODS_PER_NODE), range(min = 1))]
    max_pods_per_node: Option<u32>,
    #[schemars(extend("default" = 110))]
    max_pods_per_node: Option<u32>,
    #[schemars(extend("default" = false))]
    sensitive: bool,
}
fn f(s: &Settings, c: &Cluster) {
    let r = s.retries.unwrap_or(3);
    let p = format!("{}:{}", c.host, 6443);
    let ok = s.retries.unwrap_or(defaults::settings::RETRIES);
}
pub const DEFAULT_KEEP_RUNS: usize = 50;
const DEFAULT_BUDGET: u64 = 64 << 20;
const DEFAULT_FROM_HOME: u64 = defaults::settings::OUTPUT_BUDGET_MIB;
fn options() -> RunOptions {
    RunOptions {
        retries: 3,
        step_timeout: Duration::from_secs(600),
        output_budget: DEFAULT_BUDGET,
        parallelism: s.parallelism,
    }
}
#[cfg(test)]
mod tests { const X: &str = "10.244.0.0/16"; }
"#,
    )
    .expect("parse");
    let what: Vec<String> = default_literals(&ast).into_iter().map(|(_, w)| w).collect();
    assert_eq!(
        what,
        [
            "schema default \"cluster.local\"",
            "\"cluster.local\"",
            "schema default 110",
            "`retries.unwrap_or(<literal>)`",
            "6443",
            "const DEFAULT_KEEP_RUNS",
            "const DEFAULT_BUDGET",
            "`retries: <literal>`",
            "`step_timeout: <literal>`",
        ]
    );
}
