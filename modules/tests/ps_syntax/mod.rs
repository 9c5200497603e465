//! The PowerShell syntax check shared by the module test suites: tree-sitter-powershell
//! parses a script; any ERROR or MISSING node is a syntax error. `wildcards`: which cmdlet
//! parameters take wildcard patterns, and a check of the scripts against that table.

#[allow(dead_code)]
pub mod wildcards;

/// Syntax errors tree-sitter-powershell finds in `script` (empty: clean).
pub fn ps_syntax_errors(script: &str) -> Vec<String> {
    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&tree_sitter_powershell::LANGUAGE.into())
        .expect("load PowerShell grammar");
    let Some(tree) = parser.parse(script, None) else {
        return vec!["parser gave up".into()];
    };
    let mut errors = Vec::new();
    let mut cursor = tree.walk();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        if node.is_error() || node.is_missing() {
            let p = node.start_position();
            let line = script.lines().nth(p.row).unwrap_or("");
            errors.push(format!(
                "line {} col {}: {} near `{}`",
                p.row + 1,
                p.column + 1,
                node.kind(),
                line.trim()
            ));
        }
        for c in node.children(&mut cursor) {
            stack.push(c);
        }
    }
    errors
}
