//! The table of diagnostic codes (docs/diagnostics.md, "Diagnostic codes") lists exactly the
//! codes kwin can emit, with their severity — both ways: a code in the source that the table
//! does not list fails, and so does a row no source emits.
//!
//! The codes are read from the source itself (syn): every call `Diagnostic::error(code, …)` /
//! `Diagnostic::warning(code, …)` in `engine/src`, `modules/src` and `src`, outside
//! `#[cfg(test)]` code. The code must be a string literal, so a computed code (which this
//! test could not see) is itself a failure.

use std::collections::{BTreeMap, BTreeSet};
use syn::visit::Visit;

mod source;

use source::{is_test_only, root, sources};

/// What the source says: code → severities, and the calls whose code is not a literal.
#[derive(Debug, Default)]
struct Found {
    codes: BTreeMap<String, BTreeSet<String>>,
    computed: Vec<String>,
}

struct Calls<'a> {
    file: &'a str,
    found: &'a mut Found,
}

impl<'ast> Visit<'ast> for Calls<'_> {
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

    /// Macro bodies (`vec![Diagnostic::error(…)]`, `format!`) are tokens to syn: parsed as
    /// expressions where they are, else searched token by token.
    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        use syn::punctuated::Punctuated;
        match mac.parse_body_with(Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated) {
            Ok(exprs) => {
                for e in &exprs {
                    self.visit_expr(e);
                }
            }
            Err(_) => self.scan_tokens(mac.tokens.clone()),
        }
    }

    fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
        if let syn::Expr::Path(p) = &*call.func {
            let segs: Vec<String> = p
                .path
                .segments
                .iter()
                .map(|s| s.ident.to_string())
                .collect();
            if let [.., ty, severity] = segs.as_slice() {
                if ty == "Diagnostic" && (severity == "error" || severity == "warning") {
                    match call.args.first() {
                        Some(syn::Expr::Lit(syn::ExprLit {
                            lit: syn::Lit::Str(s),
                            ..
                        })) => {
                            self.found
                                .codes
                                .entry(s.value())
                                .or_default()
                                .insert(severity.clone());
                        }
                        other => {
                            let line = other
                                .map(|e| syn::spanned::Spanned::span(e).start().line)
                                .unwrap_or(0);
                            self.found.computed.push(format!("{}:{line}", self.file));
                        }
                    }
                }
            }
        }
        syn::visit::visit_expr_call(self, call);
    }
}

impl Calls<'_> {
    /// `Diagnostic :: error|warning ( "code"` in raw tokens.
    fn scan_tokens(&mut self, tokens: proc_macro2::TokenStream) {
        use proc_macro2::TokenTree;
        let tts: Vec<TokenTree> = tokens.into_iter().collect();
        for (i, tt) in tts.iter().enumerate() {
            if let TokenTree::Group(g) = tt {
                self.scan_tokens(g.stream());
            }
            let TokenTree::Ident(ty) = tt else { continue };
            if ty != "Diagnostic" {
                continue;
            }
            let (Some(TokenTree::Ident(sev)), Some(TokenTree::Group(args))) =
                (tts.get(i + 3), tts.get(i + 4))
            else {
                continue;
            };
            if sev != "error" && sev != "warning" {
                continue;
            }
            let first = args.stream().into_iter().next();
            match first.map(|t| syn::parse2::<syn::LitStr>(t.into())) {
                Some(Ok(lit)) => {
                    self.found
                        .codes
                        .entry(lit.value())
                        .or_default()
                        .insert(sev.to_string());
                }
                _ => self
                    .found
                    .computed
                    .push(format!("{}:{}", self.file, ty.span().start().line)),
            }
        }
    }
}

fn scan_source(file: &str, text: &str, found: &mut Found) {
    let ast = syn::parse_file(text).unwrap_or_else(|e| panic!("{file}: {e}"));
    Calls { file, found }.visit_file(&ast);
}

fn source_codes() -> Found {
    let mut found = Found::default();
    let files = sources(&["engine/src", "modules/src", "src"]);
    assert!(files.len() > 50, "only {} source files", files.len());
    for (name, ast) in &files {
        Calls {
            file: name,
            found: &mut found,
        }
        .visit_file(ast);
    }
    found
}

/// The page the table is on.
const PAGE: &str = "docs/diagnostics.md";

/// The rows of the "Diagnostic codes" table: code → severity column.
fn table_codes(readme: &str) -> BTreeMap<String, String> {
    let start = readme
        .find("## Diagnostic codes")
        .expect("docs/diagnostics.md has a Diagnostic codes section");
    let section = &readme[start..];
    let end = section[2..]
        .find("\n#")
        .map(|i| i + 2)
        .unwrap_or(section.len());
    let mut rows = BTreeMap::new();
    for line in section[..end].lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if let [_, code, severity, ..] = cells.as_slice() {
            if let Some(code) = code.strip_prefix('`').and_then(|c| c.strip_suffix('`')) {
                let dup = rows.insert(code.to_string(), severity.to_string());
                assert!(dup.is_none(), "{PAGE} lists `{code}` twice");
            }
        }
    }
    rows
}

/// Every difference between the source's codes and the table's rows.
fn differences(found: &Found, readme: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for at in &found.computed {
        out.push(format!(
            "{at}: the code is not a string literal (write one call per code)"
        ));
    }
    for (code, severities) in &found.codes {
        let want: Vec<&str> = severities.iter().map(String::as_str).collect();
        match readme.get(code) {
            None => out.push(format!(
                "`{code}` ({}) is emitted but not in the table of {PAGE}",
                want.join(", ")
            )),
            Some(sev) => {
                let listed: BTreeSet<&str> = sev.split(", ").collect();
                if listed != want.iter().copied().collect() {
                    out.push(format!(
                        "`{code}`: {PAGE} says {sev}, the source emits {}",
                        want.join(", ")
                    ));
                }
            }
        }
    }
    for code in readme.keys() {
        if !found.codes.contains_key(code) {
            out.push(format!("{PAGE} lists `{code}`, which nothing emits"));
        }
    }
    out
}

#[test]
fn the_docs_list_every_diagnostic_code_the_code_emits_and_no_other() {
    let page = std::fs::read_to_string(root().join(PAGE)).expect(PAGE);
    let rows = table_codes(&page);
    assert!(rows.len() > 60, "only {} rows in {PAGE}", rows.len());
    let found = source_codes();
    let diff = differences(&found, &rows);
    assert!(diff.is_empty(), "{}", diff.join("\n"));
}

#[test]
fn the_check_sees_a_missing_row_a_stale_row_and_a_computed_code() {
    let mut found = Found::default();
    scan_source(
        "x.rs",
        r#"
fn f(c: bool) {
    let a = Diagnostic::error("listed", "x");
    let b = kwin_engine::diag::Diagnostic::warning("not-listed", "y");
    let code = if c { "one" } else { "two" };
    let d = Diagnostic::error(code, "z");
    let v = vec![Diagnostic::error("in-a-macro", "m")];
    let w = vec![Diagnostic::warning("in-a-repeat", "r"); 2];
}
#[cfg(test)]
mod tests {
    fn t() { let _ = Diagnostic::error("only-in-tests", "x"); }
}
"#,
        &mut found,
    );
    let readme = "## Diagnostic codes\n\n| code | severity | rule |\n|---|---|---|\n\
                  | `listed` | error | a |\n| `stale` | warning | b |\n\n## Next\n| `elsewhere` | error | c |\n";
    let diff = differences(&found, &table_codes(readme));
    assert_eq!(
        diff,
        [
            "x.rs:6: the code is not a string literal (write one call per code)",
            "`in-a-macro` (error) is emitted but not in the table of docs/diagnostics.md",
            "`in-a-repeat` (warning) is emitted but not in the table of docs/diagnostics.md",
            "`not-listed` (warning) is emitted but not in the table of docs/diagnostics.md",
            "docs/diagnostics.md lists `stale`, which nothing emits",
        ]
    );
}
