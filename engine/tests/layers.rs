//! The engine is a layered DAG: every `crate::` / `super::` / `self::` edge between its
//! modules goes down the table below (ARCHITECTURE.md, "Engine layers"), and no two files
//! import each other, directly or around a circle.
//!
//! Edges are read from the source with `syn`: every `use` tree (groups and `self` expanded),
//! every path written in code, and paths inside macro calls (`format!("{}", crate::fs::x())`).
//! Items under `#[cfg(test)]` (and files declared `#[cfg(test)] mod x;`) are test code and
//! exempt. A path is taken as written: importing through a re-export of a higher layer
//! (`crate::transport::Shell`) counts as an edge to that layer, so engine code names the
//! vocabulary where it lives (`crate::shell::Shell`). A `pub use` in a module of its own
//! child is namespace plumbing and is not a file edge.
//!
//! And only `transport/` names the crates that reach the network or speak its protocols
//! (ssh2, reqwest, hyper, rustls, sspi and their helpers); the executor calls
//! `Module::plan` in one place and resolves a module's inputs in one loop.

use petgraph::algo::tarjan_scc;
use petgraph::graph::DiGraph;
use proc_macro2::{TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// Units of the engine (a unit is the longest module path prefix listed here) and the units
/// each may import. Importing inside one's own unit is always allowed.
const LAYERS: &[(&str, &[&str])] = &[
    // rank 0: vocabulary
    ("diag", &[]),
    ("quote", &[]),
    ("shell", &[]),
    ("fs", &[]),
    // `event` carries a diagnostic as the `diagnostic` event of `--output json`
    ("event", &["diag"]),
    ("net", &[]),
    // rank 1
    ("secret", &["quote"]),
    // rank 2: connection specs (pure data)
    ("transport::spec", &["shell", "secret", "fs"]),
    // rank 3
    (
        "plan",
        &["diag", "shell", "secret", "fs", "transport::spec"],
    ),
    // rank 4
    ("task", &["diag"]),
    ("template", &["quote"]),
    // rank 5
    ("checksums", &["plan", "task", "fs", "diag", "net"]),
    (
        "expand",
        &[
            "plan",
            "task",
            "template",
            "checksums",
            "diag",
            "quote",
            "shell",
        ],
    ),
    ("graph", &["task", "diag"]),
    // rank 6: facts hash what is secret in a probe's log form (`secret`), draw their
    // markers from `fs::new_nonce`, and read a host's own facts into the event's type
    // (`fact::host`, what `kwin facts` shows)
    ("fact", &["shell", "quote", "diag", "secret", "fs", "event"]),
    // rank 7: modules draw each plan's nonce from `fs::new_nonce`
    (
        "module",
        &[
            "fact", "secret", "shell", "fs", "plan", "task", "graph", "diag",
        ],
    ),
    // rank 8: the transport implementations
    (
        "transport",
        &["transport::spec", "shell", "secret", "quote", "fs", "net"],
    ),
    // rank 9
    (
        "exec",
        &[
            "diag",
            "quote",
            "shell",
            "fs",
            "event",
            "net",
            "secret",
            "transport::spec",
            "plan",
            "task",
            "template",
            "checksums",
            "expand",
            "graph",
            "fact",
            "module",
            "transport",
        ],
    ),
    // rank 10: the phases every command runs, and the session they share
    (
        "pipeline",
        &[
            "diag",
            "fs",
            "event",
            "net",
            "secret",
            "transport::spec",
            "plan",
            "task",
            "checksums",
            "expand",
            "graph",
            "module",
            "transport",
            "exec",
        ],
    ),
    // test helpers (`#[cfg(any(test, feature = "test-support"))]`): may import anything;
    // nothing outside tests imports them
    ("testing", &["*"]),
];

/// One edge as written: from the file at `line`, to the module path `to`.
#[derive(Debug, Clone)]
struct Edge {
    file: String,
    line: usize,
    from: String,
    to: String,
    /// Written in a `pub use` (a re-export).
    reexport: bool,
}

/// The engine's module path of a source file: `exec/worker/apply.rs` → `exec::worker::apply`,
/// `x/mod.rs` → `x`, `lib.rs` → `` (the crate root).
fn module_path(rel: &Path) -> String {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        if stem != "mod" && stem != "lib" {
            parts.push(stem.to_string());
        }
    }
    parts.join("::")
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| matches!(&m, syn::Meta::Path(p) if p.is_ident("test")))
    })
}

struct Collector<'a> {
    file: &'a str,
    /// The module the code being visited is in (the file's, plus inline modules).
    module: Vec<String>,
    edges: Vec<Edge>,
    /// Child modules declared `#[cfg(test)] mod x;` (their files are test code).
    test_children: Vec<String>,
    /// The file's own child modules (`mod x;`): a path may start with one (`x::f()`).
    children: BTreeSet<String>,
    /// Depth of inline modules entered.
    inline: usize,
}

impl Collector<'_> {
    /// Resolve `segs` (a path as written) to an absolute module path, if it starts with
    /// `crate`, `super` or `self`.
    fn resolve(&self, segs: &[String]) -> Option<Vec<String>> {
        let first = segs.first()?;
        let mut base: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "super" | "self" => self.module.clone(),
            // A path starting with a child module of the file's own module.
            c if self.inline == 0 && self.children.contains(c) => {
                let mut m = self.module.clone();
                m.extend(segs.iter().cloned());
                return Some(m);
            }
            _ => return None,
        };
        let mut rest = &segs[1..];
        if first == "super" {
            base.pop();
        }
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
        if rest.is_empty() {
            return None;
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn add(&mut self, segs: &[String], line: usize, reexport: bool) {
        if segs.len() < 2 {
            return;
        }
        if let Some(to) = self.resolve(segs) {
            self.edges.push(Edge {
                file: self.file.to_string(),
                line,
                from: self.module.join("::"),
                to: to.join("::"),
                reexport,
            });
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree, reexport: bool) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree, reexport);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let line = n.ident.span().start().line;
                let mut segs = prefix.clone();
                if n.ident != "self" {
                    segs.push(n.ident.to_string());
                }
                self.add(&segs, line, reexport);
            }
            syn::UseTree::Rename(r) => {
                let line = r.ident.span().start().line;
                let mut segs = prefix.clone();
                if r.ident != "self" {
                    segs.push(r.ident.to_string());
                }
                self.add(&segs, line, reexport);
            }
            syn::UseTree::Glob(g) => {
                let line = g.star_token.spans[0].start().line;
                let mut segs = prefix.clone();
                segs.push("*".into());
                self.add(&segs, line, reexport);
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t, reexport);
                }
            }
        }
    }

    /// Paths inside a macro call's tokens: `crate :: a :: b`, `super :: a`.
    fn tokens(&mut self, ts: TokenStream) {
        let toks: Vec<TokenTree> = ts.into_iter().collect();
        let mut i = 0;
        while i < toks.len() {
            match &toks[i] {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(id) if id == "crate" || id == "super" => {
                    let line = id.span().start().line;
                    let mut segs = vec![id.to_string()];
                    let mut j = i + 1;
                    while let (
                        Some(TokenTree::Punct(a)),
                        Some(TokenTree::Punct(b)),
                        Some(TokenTree::Ident(next)),
                    ) = (toks.get(j), toks.get(j + 1), toks.get(j + 2))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        segs.push(next.to_string());
                        j += 3;
                    }
                    self.add(&segs, line, false);
                    i = j;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item(&mut self, i: &'ast syn::Item) {
        let attrs = match i {
            syn::Item::Const(x) => &x.attrs,
            syn::Item::Enum(x) => &x.attrs,
            syn::Item::ExternCrate(x) => &x.attrs,
            syn::Item::Fn(x) => &x.attrs,
            syn::Item::ForeignMod(x) => &x.attrs,
            syn::Item::Impl(x) => &x.attrs,
            syn::Item::Macro(x) => &x.attrs,
            syn::Item::Mod(x) => &x.attrs,
            syn::Item::Static(x) => &x.attrs,
            syn::Item::Struct(x) => &x.attrs,
            syn::Item::Trait(x) => &x.attrs,
            syn::Item::TraitAlias(x) => &x.attrs,
            syn::Item::Type(x) => &x.attrs,
            syn::Item::Union(x) => &x.attrs,
            syn::Item::Use(x) => &x.attrs,
            _ => return syn::visit::visit_item(self, i),
        };
        if is_cfg_test(attrs) {
            if let syn::Item::Mod(m) = i {
                if m.content.is_none() {
                    let mut child = self.module.clone();
                    child.push(m.ident.to_string());
                    self.test_children.push(child.join("::"));
                }
            }
            return;
        }
        syn::visit::visit_item(self, i)
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_some() {
            self.module.push(m.ident.to_string());
            self.inline += 1;
            syn::visit::visit_item_mod(self, m);
            self.inline -= 1;
            self.module.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let reexport = !matches!(u.vis, syn::Visibility::Inherited);
        self.use_tree(&mut Vec::new(), &u.tree, reexport);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        let line = p
            .segments
            .first()
            .map_or(0, |s| s.ident.span().start().line);
        self.add(&segs, line, false);
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }

    fn visit_attribute(&mut self, _a: &'ast syn::Attribute) {
        // Doc comments and derives name no module of the engine.
    }
}

/// Every edge of the files `(relative path, text)`, and the modules that are test code.
fn edges_of(files: &[(PathBuf, String)]) -> Result<(Vec<Edge>, BTreeSet<String>), String> {
    let mut edges = Vec::new();
    let mut tests = BTreeSet::new();
    for (rel, text) in files {
        let ast = syn::parse_file(text).map_err(|e| format!("{}: {e}", rel.display()))?;
        let module = module_path(rel);
        let mut c = Collector {
            file: &rel.display().to_string(),
            module: if module.is_empty() {
                Vec::new()
            } else {
                module.split("::").map(str::to_string).collect()
            },
            edges: Vec::new(),
            test_children: Vec::new(),
            children: ast
                .items
                .iter()
                .filter_map(|i| match i {
                    syn::Item::Mod(m) if m.content.is_none() => Some(m.ident.to_string()),
                    _ => None,
                })
                .collect(),
            inline: 0,
        };
        c.visit_file(&ast);
        edges.extend(c.edges);
        tests.extend(c.test_children);
    }
    Ok((edges, tests))
}

fn unit_of(path: &str) -> Option<&'static str> {
    LAYERS
        .iter()
        .map(|(u, _)| *u)
        .filter(|u| path == *u || path.starts_with(&format!("{u}::")))
        .max_by_key(|u| u.len())
}

fn is_test(module: &str, tests: &BTreeSet<String>) -> bool {
    tests
        .iter()
        .any(|t| module == t || module.starts_with(&format!("{t}::")))
}

/// Check 1: every edge between units is in the table. The findings, one line each.
fn forbidden_edges(files: &[(PathBuf, String)]) -> Result<Vec<String>, String> {
    let (edges, tests) = edges_of(files)?;
    let mut out = Vec::new();
    for rel in files.iter().map(|(r, _)| module_path(r)) {
        if !rel.is_empty() && unit_of(&rel).is_none() && !is_test(&rel, &tests) {
            out.push(format!("{rel}: in no layer of the table"));
        }
    }
    for e in edges {
        if is_test(&e.from, &tests) {
            continue;
        }
        let (Some(from), Some(to)) = (unit_of(&e.from), unit_of(&e.to)) else {
            continue;
        };
        if from == to {
            continue;
        }
        let allowed = LAYERS
            .iter()
            .find(|(u, _)| *u == from)
            .map_or(&[][..], |(_, a)| *a);
        if allowed.contains(&"*") || allowed.contains(&to) {
            continue;
        }
        out.push(format!(
            "engine/src/{}:{}: {from} → {to} ({from} may import: {})",
            e.file,
            e.line,
            if allowed.is_empty() {
                "nothing".to_string()
            } else {
                allowed.join(", ")
            }
        ));
    }
    Ok(out)
}

/// Check 2: the file-level import graph has no cycle. Each strongly connected set of files
/// as its shortest cycle through its first file, `a → b → a (all of: a, b)`.
fn file_cycles(files: &[(PathBuf, String)]) -> Result<Vec<String>, String> {
    let (edges, tests) = edges_of(files)?;
    let modules: BTreeSet<String> = files
        .iter()
        .map(|(r, _)| module_path(r))
        .filter(|m| !is_test(m, &tests))
        .collect();
    let mut g: DiGraph<String, ()> = DiGraph::new();
    let idx: HashMap<String, _> = modules
        .iter()
        .map(|m| (m.clone(), g.add_node(m.clone())))
        .collect();
    // The file a module path is in: the longest prefix that is a file's module.
    let file_of = |path: &str| -> Option<String> {
        let segs: Vec<&str> = path.split("::").collect();
        (0..=segs.len())
            .rev()
            .map(|n| segs[..n].join("::"))
            .find(|p| modules.contains(p))
    };
    let mut seen = BTreeSet::new();
    for e in &edges {
        let (Some(from), Some(to)) = (file_of(&e.from), file_of(&e.to)) else {
            continue;
        };
        if from == to || is_test(&e.from, &tests) {
            continue;
        }
        // A module re-exporting its own child: namespace plumbing.
        if e.reexport && (from.is_empty() || to.starts_with(&format!("{from}::"))) {
            continue;
        }
        if seen.insert((from.clone(), to.clone())) {
            g.add_edge(idx[&from], idx[&to], ());
        }
    }
    let mut out = Vec::new();
    for scc in tarjan_scc(&g) {
        if scc.len() < 2 {
            continue;
        }
        // The shortest cycle through the first file (by name) of the component, found by a
        // breadth-first search inside it.
        let inside: BTreeSet<_> = scc.iter().copied().collect();
        let start = *scc.iter().min_by_key(|&&n| &g[n]).expect("non-empty");
        let mut came_from = HashMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        let mut last = None;
        'search: while let Some(n) = queue.pop_front() {
            let mut next: Vec<_> = g.neighbors(n).filter(|m| inside.contains(m)).collect();
            next.sort_by_key(|&m| &g[m]);
            for m in next {
                if m == start {
                    last = Some(n);
                    break 'search;
                }
                if m != start && !came_from.contains_key(&m) {
                    came_from.insert(m, n);
                    queue.push_back(m);
                }
            }
        }
        let mut path = vec![start];
        let mut at = last.expect("a component has a cycle");
        while at != start {
            path.push(at);
            at = came_from[&at];
        }
        path.push(start);
        let n = path.len();
        path[1..n - 1].reverse();
        let mut names: Vec<&str> = scc.iter().map(|&n| g[n].as_str()).collect();
        names.sort_unstable();
        out.push(format!(
            "{} (all of: {})",
            path.iter()
                .map(|&n| g[n].as_str())
                .collect::<Vec<_>>()
                .join(" → "),
            names.join(", ")
        ));
    }
    out.sort();
    Ok(out)
}

fn engine_sources() -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(d) = dirs.pop() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&d)
            .unwrap_or_else(|e| panic!("{}: {e}", d.display()))
            .map(|e| e.expect("dir entry").path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).expect("source");
                let rel = p.strip_prefix(&root).expect("under src").to_path_buf();
                out.push((rel, text));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn every_engine_edge_goes_down_the_layer_table() {
    let files = engine_sources();
    assert!(files.len() > 40, "found only {} files", files.len());
    let bad = forbidden_edges(&files).expect("parses");
    assert!(bad.is_empty(), "forbidden edges:\n{}", bad.join("\n"));
}

#[test]
fn no_two_engine_files_import_each_other() {
    let files = engine_sources();
    let cycles = file_cycles(&files).expect("parses");
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

#[test]
fn a_forbidden_edge_is_reported() {
    let files = vec![
        (
            PathBuf::from("plan/x.rs"),
            "use crate::exec::Run;\nfn f() { let _ = format!(\"{}\", crate::module::build::x()); }\n#[cfg(test)]\nmod tests { use crate::exec::Run; }\n".to_string(),
        ),
        (PathBuf::from("exec/mod.rs"), "pub struct Run;".to_string()),
    ];
    let bad = forbidden_edges(&files).expect("parses");
    assert_eq!(
        bad,
        [
            "engine/src/plan/x.rs:1: plan → exec (plan may import: diag, shell, secret, fs, transport::spec)",
            "engine/src/plan/x.rs:2: plan → module (plan may import: diag, shell, secret, fs, transport::spec)",
        ]
    );
}

#[test]
fn a_cycle_between_files_is_reported() {
    let files = vec![
        (
            PathBuf::from("exec/mod.rs"),
            "mod walker;\npub use walker::walk;\npub struct Run;".to_string(),
        ),
        (
            PathBuf::from("exec/walker.rs"),
            "use super::Run;\npub fn walk() {}".to_string(),
        ),
        (
            PathBuf::from("exec/batch.rs"),
            "use super::walker::walk;".to_string(),
        ),
    ];
    // mod.rs re-exporting its child is not an edge: no cycle.
    assert_eq!(file_cycles(&files).expect("parses"), Vec::<String>::new());
    let mut files = files;
    files[0]
        .1
        .push_str("\nfn go() { walker::walk() }\nuse self::walker::walk as w;");
    assert_eq!(
        file_cycles(&files).expect("parses"),
        ["exec → exec::walker → exec (all of: exec, exec::walker)"]
    );
}

/// The crates that reach the network or speak its protocols: only `transport/` names them.
const NETWORK_CRATES: &[&str] = &[
    "ssh2",
    "kwin_ssh_sign",
    "reqwest",
    "hyper",
    "hyper_util",
    "http_body_util",
    "rustls",
    "rustls_native_certs",
    "tokio_rustls",
    "sspi",
];

/// Every path (in code, a `use` tree or a macro call) of a file whose first segment is one of
/// [`NETWORK_CRATES`], as `line: crate`; code under `#[cfg(test)]` exempt.
fn network_crate_uses(text: &str) -> Result<Vec<(usize, String)>, String> {
    struct Finder(Vec<(usize, String)>);
    impl Finder {
        fn first(&mut self, ident: &proc_macro2::Ident) {
            let name = ident.to_string();
            if NETWORK_CRATES.contains(&name.as_str()) {
                self.0.push((ident.span().start().line, name));
            }
        }
        fn tokens(&mut self, ts: TokenStream) {
            let toks: Vec<TokenTree> = ts.into_iter().collect();
            for (i, t) in toks.iter().enumerate() {
                match t {
                    TokenTree::Group(g) => self.tokens(g.stream()),
                    TokenTree::Ident(id) => {
                        let path_start = matches!(
                            (toks.get(i + 1), toks.get(i + 2)),
                            (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                                if a.as_char() == ':' && b.as_char() == ':'
                        );
                        let after_colons = i >= 1
                            && matches!(&toks[i - 1], TokenTree::Punct(p) if p.as_char() == ':');
                        if path_start && !after_colons {
                            self.first(id);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    impl<'ast> Visit<'ast> for Finder {
        fn visit_item(&mut self, i: &'ast syn::Item) {
            let attrs: &[syn::Attribute] = match i {
                syn::Item::Fn(x) => &x.attrs,
                syn::Item::Impl(x) => &x.attrs,
                syn::Item::Mod(x) => &x.attrs,
                syn::Item::Use(x) => &x.attrs,
                syn::Item::Const(x) => &x.attrs,
                syn::Item::Struct(x) => &x.attrs,
                syn::Item::Enum(x) => &x.attrs,
                _ => &[],
            };
            if !is_cfg_test(attrs) {
                syn::visit::visit_item(self, i);
            }
        }
        fn visit_use_tree(&mut self, u: &'ast syn::UseTree) {
            match u {
                syn::UseTree::Path(p) => self.first(&p.ident),
                syn::UseTree::Name(n) => self.first(&n.ident),
                syn::UseTree::Rename(r) => self.first(&r.ident),
                syn::UseTree::Group(g) => g.items.iter().for_each(|t| self.visit_use_tree(t)),
                syn::UseTree::Glob(_) => {}
            }
        }
        fn visit_path(&mut self, p: &'ast syn::Path) {
            if p.leading_colon.is_some() || p.segments.len() > 1 {
                if let Some(s) = p.segments.first() {
                    self.first(&s.ident);
                }
            }
            syn::visit::visit_path(self, p);
        }
        fn visit_macro(&mut self, m: &'ast syn::Macro) {
            self.tokens(m.tokens.clone());
            syn::visit::visit_macro(self, m);
        }
    }
    let ast = syn::parse_file(text).map_err(|e| e.to_string())?;
    let mut f = Finder(Vec::new());
    f.visit_file(&ast);
    Ok(f.0)
}

#[test]
fn only_the_transports_name_the_network_crates() {
    let mut found = Vec::new();
    for (rel, text) in engine_sources() {
        if rel.starts_with("transport") {
            continue;
        }
        for (line, krate) in network_crate_uses(&text).expect("parses") {
            found.push(format!("engine/src/{}:{line}: {krate}", rel.display()));
        }
    }
    assert!(
        found.is_empty(),
        "only engine/src/transport/ may name the network crates:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_network_crate_outside_the_transports_is_reported() {
    let text = "use ssh2::Session;\nuse std::io;\nfn f() { let _ = reqwest::Client::new(); let _ = format!(\"{:?}\", sspi::x()); }\nfn g(s: &str) -> bool { s == \"hyper\" }\n#[cfg(test)]\nmod tests { use rustls::x; }\n";
    let found = network_crate_uses(text).expect("parses");
    assert_eq!(
        found,
        [
            (1, "ssh2".to_string()),
            (3, "reqwest".to_string()),
            (3, "sspi".to_string()),
        ]
    );
}

/// The table's units are real modules and each row lists known units.
#[test]
fn the_layer_table_names_real_modules() {
    let files = engine_sources();
    let modules: BTreeSet<String> = files.iter().map(|(r, _)| module_path(r)).collect();
    let units: BTreeMap<&str, &[&str]> = LAYERS.iter().copied().collect();
    for (u, allowed) in LAYERS {
        assert!(modules.contains(*u), "`{u}` is no module of the engine");
        for a in *allowed {
            assert!(
                *a == "*" || units.contains_key(a),
                "`{u}` may import unknown `{a}`"
            );
        }
    }
}

/// Where the executor calls `Module::plan` and matches `ModuleError::InputPending` (the
/// input loop), in production code: (file, line, what).
fn plan_calls(files: &[(PathBuf, String)]) -> Result<Vec<(String, usize, &'static str)>, String> {
    struct Finder<'a> {
        file: &'a str,
        out: Vec<(String, usize, &'static str)>,
    }
    impl<'ast> Visit<'ast> for Finder<'_> {
        fn visit_item(&mut self, i: &'ast syn::Item) {
            let test = match i {
                syn::Item::Mod(m) => is_cfg_test(&m.attrs),
                syn::Item::Fn(f) => is_cfg_test(&f.attrs),
                _ => false,
            };
            if !test {
                syn::visit::visit_item(self, i);
            }
        }
        fn visit_expr_method_call(&mut self, c: &'ast syn::ExprMethodCall) {
            if c.method == "plan" {
                let line = c.method.span().start().line;
                self.out.push((self.file.to_string(), line, "Module::plan"));
            }
            syn::visit::visit_expr_method_call(self, c);
        }
        fn visit_path(&mut self, p: &'ast syn::Path) {
            if p.segments.last().is_some_and(|s| s.ident == "InputPending") {
                let line = p.segments.last().map_or(0, |s| s.ident.span().start().line);
                self.out.push((self.file.to_string(), line, "InputPending"));
            }
            syn::visit::visit_path(self, p);
        }
    }
    let mut out = Vec::new();
    for (rel, text) in files {
        if !rel.starts_with("exec") {
            continue;
        }
        let ast = syn::parse_file(text).map_err(|e| format!("{}: {e}", rel.display()))?;
        let file = format!("engine/src/{}", rel.display());
        let mut f = Finder {
            file: &file,
            out: Vec::new(),
        };
        f.visit_file(&ast);
        out.extend(f.out);
    }
    Ok(out)
}

/// The executor plans a task in one place (`Worker::plan_once`: the first plan, the
/// convergence check, the plan after a reconnect) and resolves the inputs a module asks for
/// in one loop (`Worker::plan_task`, for both the apply and the plan policy).
#[test]
fn the_executor_plans_in_one_place_and_one_input_loop() {
    let found = plan_calls(&engine_sources()).expect("parses");
    let at = |what: &str| -> Vec<String> {
        found
            .iter()
            .filter(|(_, _, w)| *w == what)
            .map(|(f, l, _)| format!("{f}:{l}"))
            .collect()
    };
    let plans = at("Module::plan");
    assert!(
        plans.len() == 1 && plans[0].starts_with("engine/src/exec/worker/mod.rs:"),
        "Module::plan is called from the executor at {plans:?}: plan through Worker::plan_once"
    );
    let loops = at("InputPending");
    assert!(
        loops.len() == 1 && loops[0].starts_with("engine/src/exec/worker/mod.rs:"),
        "ModuleError::InputPending is handled at {loops:?}: resolve inputs through Worker::plan_task"
    );
}

#[test]
fn a_second_plan_call_is_reported() {
    let files = vec![
        (
            PathBuf::from("exec/worker/mod.rs"),
            "fn plan_once(m: &dyn Module) { m.plan(f, c); }\n#[cfg(test)]\nmod tests { fn t() { m.plan(f, c); } }".to_string(),
        ),
        (
            PathBuf::from("exec/worker/plan.rs"),
            "fn task() {\n    match module.plan(&w.facts, &ctx) {\n        Err(ModuleError::InputPending(n)) => {}\n        _ => {}\n    }\n}".to_string(),
        ),
        (
            PathBuf::from("module/guard.rs"),
            "fn plan() { self.inner.plan(f, c) }".to_string(),
        ),
    ];
    let found = plan_calls(&files).expect("parses");
    assert_eq!(
        found,
        [
            (
                "engine/src/exec/worker/mod.rs".to_string(),
                1,
                "Module::plan"
            ),
            (
                "engine/src/exec/worker/plan.rs".to_string(),
                2,
                "Module::plan"
            ),
            (
                "engine/src/exec/worker/plan.rs".to_string(),
                3,
                "InputPending"
            ),
        ]
    );
}
