//! Reading kwin's production source with syn, for the tests that check its shape
//! (`tests/layers.rs`, `tests/diagnostic_codes.rs`): every `.rs` file below some directories,
//! parsed, without the files that exist for tests only (`#[cfg(test)] mod name;`).

#![allow(dead_code)]

use proc_macro2::{TokenStream, TokenTree};
use std::path::{Path, PathBuf};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// (path relative to the repository, parsed file) of every production file under `dirs`:
/// a file declared `#[cfg(test)] mod name;` (and what it declares) is left out.
pub fn sources(dirs: &[&str]) -> Vec<(String, syn::File)> {
    let mut files = Vec::new();
    for d in dirs {
        rust_files(&root().join(d), &mut files);
    }
    let parsed: Vec<(PathBuf, String, syn::File)> = files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).expect("source");
            let rel = f.strip_prefix(root()).unwrap_or(&f).display().to_string();
            let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{rel}: {e}"));
            (f, rel, ast)
        })
        .collect();
    let mut test_dirs: Vec<PathBuf> = Vec::new();
    for (f, _, ast) in &parsed {
        for name in test_only_children(ast) {
            test_dirs.push(child_dir(f).join(name));
        }
    }
    parsed
        .into_iter()
        .filter(|(f, _, _)| {
            !test_dirs
                .iter()
                .any(|t| f.with_extension("") == *t || f.starts_with(t))
        })
        .map(|(_, rel, ast)| (rel, ast))
        .collect()
}

/// The names of the file modules `ast` declares for tests only (`#[cfg(test)] mod tests;`).
pub fn test_only_children(ast: &syn::File) -> Vec<String> {
    ast.items
        .iter()
        .filter_map(|i| match i {
            syn::Item::Mod(m) if m.content.is_none() && is_test_only(&m.attrs) => {
                Some(m.ident.to_string())
            }
            _ => None,
        })
        .collect()
}

/// The directory of the files a module file declares: `a/mod.rs`, `lib.rs`, `main.rs` → `a/`;
/// `a/b.rs` → `a/b/`.
pub fn child_dir(file: &Path) -> PathBuf {
    let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
    match file.file_name().and_then(|n| n.to_str()) {
        Some("mod.rs" | "lib.rs" | "main.rs") => dir,
        _ => file.with_extension(""),
    }
}

pub fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

/// Every token tree of a stream, nested groups flattened.
pub fn flat(tokens: TokenStream, out: &mut Vec<TokenTree>) {
    for t in tokens {
        if let TokenTree::Group(g) = &t {
            out.push(t.clone());
            flat(g.stream(), out);
        } else {
            out.push(t);
        }
    }
}
