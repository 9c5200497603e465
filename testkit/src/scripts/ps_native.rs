//! Windows PowerShell 5.1 hands native commands their arguments without escaping embedded
//! double quotes: "Quotes within the string must be escaped using extra quotes or backslash (`\`)
//! characters", and the 5.1 parser does not add them (about_Parsing, reference/5.1 of
//! MicrosoftDocs/PowerShell-Docs at 27138b21, "Passing arguments that contain quote
//! characters"; PowerShell/PowerShell#1995, fixed only in 7.3 by `$PSNativeCommandArgumentPassing`).
//! A `"` inside an argument of `sc.exe`, `tar.exe`, ... therefore reaches the program broken.
//!
//! [`native_args_with_quotes`] walks the tree-sitter-powershell AST of a script and names every
//! argument of a native command (a command named `*.exe`, `*.com`, `*.cmd`, `*.bat`) whose
//! literal value holds a `"`. Values known only at run time (variables, sub-expressions) are not
//! judged: kwin's scripts pass plan values as literals (`ps_quote`).

/// `line N: <command>: <argument>` for every native-command argument whose value has a `"`.
pub fn native_args_with_quotes(script: &str) -> Vec<String> {
    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&tree_sitter_powershell::LANGUAGE.into())
        .expect("load PowerShell grammar");
    let Some(tree) = parser.parse(script, None) else {
        return vec!["parser gave up".into()];
    };
    let text = |n: tree_sitter::Node| &script[n.byte_range()];
    let mut found = Vec::new();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        let mut cursor = node.walk();
        for c in node.children(&mut cursor) {
            stack.push(c);
        }
        if node.kind() != "command" {
            continue;
        }
        let Some(name) = node.child_by_field_name("command_name") else {
            continue;
        };
        let name = unquote(text(name)).to_ascii_lowercase();
        let native = [".exe", ".com", ".cmd", ".bat"]
            .iter()
            .any(|ext| name.ends_with(ext));
        if !native {
            continue;
        }
        let Some(elements) = node.child_by_field_name("command_elements") else {
            continue;
        };
        let mut cursor = elements.walk();
        for arg in elements.children(&mut cursor) {
            if matches!(arg.kind(), "command_argument_sep" | "redirection") {
                continue;
            }
            if arg_has_quote(arg, script) {
                found.push(format!(
                    "line {}: {name}: {}",
                    arg.start_position().row + 1,
                    text(arg)
                ));
            }
        }
    }
    found
}

/// Whether the value PowerShell computes for this argument holds a `"`.
fn arg_has_quote(arg: tree_sitter::Node, script: &str) -> bool {
    let text = &script[arg.byte_range()];
    match arg.kind() {
        // Bare words: any `"` inside is an embedded quote (PowerShell removes only a leading
        // and trailing pair).
        "generic_token" | "command_parameter" => text.trim_matches('"').contains('"'),
        _ => {
            let mut stack = vec![arg];
            while let Some(n) = stack.pop() {
                let t = &script[n.byte_range()];
                match n.kind() {
                    "verbatim_string_characters" | "verbatim_here_string_characters" => {
                        if t.contains('"') {
                            return true;
                        }
                        continue;
                    }
                    "expandable_string_literal" | "expandable_here_string_literal" => {
                        let inner = t.get(1..t.len().saturating_sub(1)).unwrap_or("");
                        if inner.contains("`\"") || inner.contains("\"\"") {
                            return true;
                        }
                        continue;
                    }
                    _ => {}
                }
                let mut cursor = n.walk();
                for c in n.children(&mut cursor) {
                    stack.push(c);
                }
            }
            false
        }
    }
}

fn unquote(s: &str) -> &str {
    let s = s.trim();
    s.strip_prefix('\'')
        .and_then(|x| x.strip_suffix('\''))
        .or_else(|| s.strip_prefix('"').and_then(|x| x.strip_suffix('"')))
        .unwrap_or(s)
}
