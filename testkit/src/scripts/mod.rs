//! Script checks shared by the tests: POSIX syntax (`sh -n`), PowerShell syntax
//! (tree-sitter-powershell: any ERROR or MISSING node), `"` inside native-command arguments
//! (Windows PowerShell 5.1 passes them broken, [`ps_native`]), and parameters that read
//! wildcard patterns ([`wildcards`]).

pub mod ps_native;
pub mod wildcards;

pub use ps_native::native_args_with_quotes;

/// `sh -n` of `script` inside a subshell, as the engine runs a step or a fact: the error
/// text, if any.
pub fn sh_syntax_error(script: &str) -> Option<String> {
    let out = std::process::Command::new("/bin/sh")
        .arg("-n")
        .arg("-c")
        .arg(format!("(\n{script}\n)"))
        .output();
    match out {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(String::from_utf8_lossy(&o.stderr).into_owned()),
        Err(e) => Some(format!("cannot run /bin/sh: {e}")),
    }
}

/// Syntax errors tree-sitter-powershell finds in `script` (empty: clean).
pub fn ps_syntax_errors(script: &str) -> Vec<String> {
    let mut parser = tree_sitter::Parser::new();
    if parser
        .set_language(&tree_sitter_powershell::LANGUAGE.into())
        .is_err()
    {
        return vec!["cannot load the PowerShell grammar".into()];
    }
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

/// A PowerShell script kwin sends: no syntax error and no `"` reaching a native command.
pub fn ps_clean(what: &str, script: &str) -> Result<(), String> {
    let errs = ps_syntax_errors(script);
    if !errs.is_empty() {
        return Err(format!(
            "{what}: PowerShell syntax errors:\n{}\n--- script ---\n{script}",
            errs.join("\n")
        ));
    }
    let quoted = native_args_with_quotes(script);
    if !quoted.is_empty() {
        return Err(format!(
            "{what}: a `\"` reaches a native command (Windows PowerShell 5.1 does not escape it):\n{}\n--- script ---\n{script}",
            quoted.join("\n")
        ));
    }
    Ok(())
}

/// A POSIX script kwin sends: `sh -n` accepts it.
pub fn sh_clean(what: &str, script: &str) -> Result<(), String> {
    match sh_syntax_error(script) {
        None => Ok(()),
        Some(e) => Err(format!("{what}: sh -n: {e}\n--- script ---\n{script}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checks themselves can fail.
    #[test]
    fn syntax_checks_can_fail() {
        assert!(!ps_syntax_errors("if ($x { 'unclosed'").is_empty());
        assert!(!ps_syntax_errors("$a = @{ b = ").is_empty());
        assert!(!ps_syntax_errors("$t = @'\nno end").is_empty());
        assert!(ps_syntax_errors("$a = @{ b = 1 }\nWrite-Output $a.b").is_empty());
        assert!(sh_syntax_error("if true; then echo").is_some());
        assert!(sh_syntax_error("echo ok").is_none());
        assert!(ps_clean("x", "sc.exe failure \"a`\"b\"").is_err());
        assert!(sh_clean("x", "fi").is_err());
    }
}
