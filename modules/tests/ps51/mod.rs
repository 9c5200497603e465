//! A Windows PowerShell 5.1 profile for scripts, checked over the tree-sitter-powershell AST.
//!
//! Rules (each finding names its rule):
//!
//! - `syntax`: the script parses (no ERROR / MISSING node). PowerShell 7 operators the 5.1
//!   grammar does not have (`??`, `??=`, `?.`, `?[`, the ternary `? :`) show up here, and are
//!   named as such.
//! - `ps7-syntax`: pipeline chains (`&&`, `||`), the background operator (`cmd &`), `clean`
//!   blocks, the `` `e `` and `` `u{…} `` string escapes and the automatic variables
//!   `$IsWindows`, `$IsLinux`, `$IsMacOS`, `$IsCoreCLR`, `$PSStyle` are PowerShell 6/7 only.
//! - `unknown-command`: every command is a cmdlet of Windows PowerShell 5.1 on Windows Server
//!   2019 (`cmdlets.tsv`, generated from Microsoft's cmdlet reference by
//!   `generate_cmdlets.py`), one of their documented aliases, a function the script defines,
//!   or a native program named with its extension (`sc.exe`, not `sc`, which is the alias of
//!   `Set-Content`) or by path.
//! - `ws2025-only`: cmdlets documented only for Windows Server 2025 (the HostNetworkingService
//!   module: Get-HnsNetwork, Get-HnsPolicyList, ...) are refused, imported or not. kwin
//!   supports Windows Server 2019 and 2022, where Microsoft documents no such module and
//!   nothing shows the policy-list cmdlets in-box (microsoft/SDN 299daf2 kept them in hns.psm1
//!   when it dropped the ones that clashed with in-box cmdlets); a script that imports the
//!   module "if present" does nothing where it is absent. kwin's scripts talk to HNS through
//!   `plans/lib/hns.ps1` (vmcompute.dll's HNSCall) instead.
//! - `parameter`: every named parameter of a cmdlet is one of its documented parameters or a
//!   common parameter, written out in full (no alias, no prefix): what 5.1 accepts and what a
//!   reader can look up.
//! - `parameter-value`: a literal value of a parameter whose documentation lists its accepted
//!   values is one of them (`-Encoding utf8NoBOM` is PowerShell 6+; 5.1 takes `UTF8`).
//! - `native-quote`: no argument of a native command contains `"`. Windows PowerShell 5.1
//!   does not escape embedded quotes when it builds a native command line
//!   (PowerShell/PowerShell#1995, fixed only in 7.3 with `$PSNativeCommandArgumentPassing`),
//!   so the program receives a different argument list. String literals, bare words and
//!   variables assigned a string literal in the same script are checked.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use tree_sitter::Node;

/// One row of `cmdlets.tsv`.
#[derive(Debug, Clone)]
pub struct Cmdlet {
    pub name: String,
    pub module: String,
    /// `5.1` (ships with Windows PowerShell 5.1), `ws2019` (Windows Server 2019 module),
    /// `ws2025` (documented only for Windows Server 2025).
    pub availability: String,
    pub params: Vec<String>,
    /// Alias (lowercase) → parameter.
    pub param_aliases: HashMap<String, String>,
    pub common: bool,
    pub source: String,
    /// Parameter (lowercase) → its documented accepted values.
    pub accepted: HashMap<String, Vec<String>>,
}

#[derive(Debug, Clone)]
pub struct Table {
    pub cmdlets: HashMap<String, Cmdlet>,
    /// Cmdlet alias (lowercase) → cmdlet name (lowercase).
    pub aliases: HashMap<String, String>,
    pub common: Vec<String>,
    pub common_aliases: HashMap<String, String>,
    /// The `# source:` lines of the table.
    pub sources: Vec<String>,
}

pub const TABLE: &str = include_str!("cmdlets.tsv");

fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect()
}

fn alias_map(s: &str) -> HashMap<String, String> {
    split_list(s)
        .into_iter()
        .filter_map(|p| {
            let (param, alias) = p.split_once('=')?;
            Some((alias.to_ascii_lowercase(), param.to_string()))
        })
        .collect()
}

pub fn table() -> Table {
    let mut t = Table {
        cmdlets: HashMap::new(),
        aliases: HashMap::new(),
        common: Vec::new(),
        common_aliases: HashMap::new(),
        sources: Vec::new(),
    };
    for line in TABLE.lines() {
        if let Some(rest) = line.strip_prefix("# source: ") {
            t.sources.push(rest.to_string());
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 9, "cmdlets.tsv: bad row `{line}`");
        if f[0] == "<common>" {
            t.common = split_list(f[3]);
            t.common_aliases = alias_map(f[5]);
            continue;
        }
        let key = f[0].to_ascii_lowercase();
        for a in split_list(f[4]) {
            t.aliases.insert(a.to_ascii_lowercase(), key.clone());
        }
        t.cmdlets.insert(
            key,
            Cmdlet {
                name: f[0].to_string(),
                module: f[1].to_string(),
                availability: f[2].to_string(),
                params: split_list(f[3]),
                param_aliases: alias_map(f[5]),
                common: f[6] == "y",
                source: f[7].to_string(),
                accepted: f[8]
                    .split(';')
                    .filter_map(|pv| {
                        let (p, vs) = pv.split_once('=')?;
                        Some((
                            p.to_ascii_lowercase(),
                            vs.split('|').map(str::to_string).collect(),
                        ))
                    })
                    .collect(),
            },
        );
    }
    assert!(!t.common.is_empty(), "cmdlets.tsv has no <common> row");
    t
}

/// One problem in one script.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Finding {
    pub line: usize,
    pub rule: &'static str,
    pub message: String,
}

/// A command invocation seen in a script (for reports and the tests' own checks).
#[derive(Debug, Clone)]
pub struct Invocation {
    pub name: String,
    pub kind: CommandKind,
    pub params: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandKind {
    Cmdlet,
    Function,
    Native,
    ScriptBlock,
    Unknown,
}

pub struct Analysis {
    pub findings: Vec<Finding>,
    pub invocations: Vec<Invocation>,
}

fn text<'a>(n: Node, src: &'a str) -> &'a str {
    &src[n.byte_range()]
}

fn line(n: Node) -> usize {
    n.start_position().row + 1
}

fn descendants<'t>(n: Node<'t>) -> Vec<Node<'t>> {
    let mut out = Vec::new();
    let mut stack = vec![n];
    while let Some(x) = stack.pop() {
        out.push(x);
        let mut c = x.walk();
        let kids: Vec<Node> = x.children(&mut c).collect();
        stack.extend(kids.into_iter().rev());
    }
    out
}

/// The value of a string literal node (quotes removed, escapes resolved as far as quotes go;
/// variables and sub-expressions stay as written).
fn literal_value(n: Node, src: &str) -> Option<String> {
    let t = text(n, src);
    let inner = |s: &str, open: &str, close: &str| -> Option<String> {
        s.strip_prefix(open)?
            .strip_suffix(close)
            .map(str::to_string)
    };
    for d in descendants(n) {
        match d.kind() {
            "verbatim_string_characters" => {
                let t = text(d, src);
                return inner(t, "'", "'").map(|s| s.replace("''", "'"));
            }
            "verbatim_here_string_characters" => {
                let t = text(d, src);
                let body = t.strip_prefix("@'")?.strip_suffix("'@")?;
                return Some(body.to_string());
            }
            "expandable_string_literal" => {
                let t = text(d, src);
                let body = inner(t, "\"", "\"")?;
                return Some(body.replace("`\"", "\"").replace("\"\"", "\""));
            }
            "expandable_here_string_literal" => {
                let t = text(d, src);
                let body = t.strip_prefix("@\"")?.strip_suffix("\"@")?;
                return Some(body.replace("`\"", "\""));
            }
            _ => {}
        }
    }
    Some(t.to_string())
}

/// The node is exactly one string literal (possibly wrapped in expression layers).
fn as_string_literal<'t>(n: Node<'t>, src: &str) -> Option<Node<'t>> {
    let t = text(n, src).trim();
    descendants(n)
        .into_iter()
        .find(|d| d.kind() == "string_literal" && text(*d, src).trim() == t)
}

/// The variable name of a node that is exactly one variable (`$x`, `${x}`), lowercase.
fn as_variable(n: Node, src: &str) -> Option<String> {
    let t = text(n, src).trim();
    let v = descendants(n)
        .into_iter()
        .find(|d| d.kind() == "variable" && text(*d, src).trim() == t)?;
    let name = text(v, src)
        .trim_start_matches('$')
        .trim_start_matches('{')
        .trim_end_matches('}');
    Some(name.to_ascii_lowercase())
}

const PS7_VARIABLES: &[&str] = &["iswindows", "islinux", "ismacos", "iscoreclr", "psstyle"];

pub fn analyze(script: &str, table: &Table) -> Analysis {
    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&tree_sitter_powershell::LANGUAGE.into())
        .expect("load PowerShell grammar");
    let mut findings = Vec::new();
    let mut invocations = Vec::new();
    let Some(tree) = parser.parse(script, None) else {
        findings.push(Finding {
            line: 1,
            rule: "syntax",
            message: "the parser gave up".into(),
        });
        return Analysis {
            findings,
            invocations,
        };
    };
    let root = tree.root_node();
    let all = descendants(root);

    // Functions the script defines; string values assigned to variables.
    let mut functions = BTreeSet::new();
    let mut strings: BTreeMap<String, String> = BTreeMap::new();
    for n in &all {
        match n.kind() {
            "function_statement" => {
                if let Some(f) = n
                    .children(&mut n.walk())
                    .find(|c| c.kind() == "function_name")
                {
                    functions.insert(text(f, script).to_ascii_lowercase());
                }
            }
            "assignment_expression" => {
                let kids: Vec<Node> = n.children(&mut n.walk()).collect();
                if let (Some(l), Some(r)) = (kids.first(), kids.last()) {
                    if let (Some(var), Some(lit)) =
                        (as_variable(*l, script), as_string_literal(*r, script))
                    {
                        if let Some(v) = literal_value(lit, script) {
                            strings.insert(var, v);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    for n in &all {
        let t = text(*n, script);
        if n.is_error() || n.is_missing() {
            let why = if t.contains("??") {
                " (`??` / `??=` are PowerShell 7 operators)"
            } else if t.contains("?.") || t.contains("?[") {
                " (`?.` / `?[` are PowerShell 7 operators)"
            } else if t.trim() == "?" || t.contains(" ? ") {
                " (the ternary `? :` is a PowerShell 7 operator)"
            } else {
                ""
            };
            findings.push(Finding {
                line: line(*n),
                rule: "syntax",
                message: format!(
                    "{} near `{}`{why}",
                    n.kind(),
                    t.lines().next().unwrap_or("").trim()
                ),
            });
            continue;
        }
        match n.kind() {
            "pipeline_chain_tail" => findings.push(Finding {
                line: line(*n),
                rule: "ps7-syntax",
                message: format!("pipeline chain operator `{}` (PowerShell 7)", t.trim()),
            }),
            "background_operator" => findings.push(Finding {
                line: line(*n),
                rule: "ps7-syntax",
                message: "background operator `&` after a pipeline (PowerShell 6)".into(),
            }),
            "expandable_string_literal" | "expandable_here_string_literal"
                if t.contains("`e") || t.contains("`u{") =>
            {
                findings.push(Finding {
                    line: line(*n),
                    rule: "ps7-syntax",
                    message: format!(
                        "escape `` `e `` / `` `u{{…}} `` in `{}` (PowerShell 6)",
                        t.lines().next().unwrap_or("")
                    ),
                })
            }
            "variable" => {
                let name = t
                    .trim_start_matches('$')
                    .trim_start_matches('{')
                    .trim_end_matches('}')
                    .to_ascii_lowercase();
                if PS7_VARIABLES.contains(&name.as_str()) {
                    findings.push(Finding {
                        line: line(*n),
                        rule: "ps7-syntax",
                        message: format!("automatic variable `{t}` exists only in PowerShell 6+"),
                    });
                }
            }
            "command" => {
                let inv = command(*n, script, table, &functions, &strings, &mut findings);
                invocations.push(inv);
            }
            _ => {}
        }
    }

    // Cmdlets documented only for Windows Server 2025 are refused.
    for n in &all {
        if n.kind() != "command" {
            continue;
        }
        let Some(name) = command_name(*n, script) else {
            continue;
        };
        let key = table
            .aliases
            .get(&name.to_ascii_lowercase())
            .cloned()
            .unwrap_or(name.to_ascii_lowercase());
        if let Some(c) = table.cmdlets.get(&key) {
            if c.availability == "ws2025" && !functions.contains(&key) {
                findings.push(Finding {
                    line: line(*n),
                    rule: "ws2025-only",
                    message: format!(
                        "`{}` ({}) is documented for Windows Server 2025 only ({}), and kwin supports 2019 and 2022: reach HNS through plans/lib/hns.ps1",
                        c.name, c.module, c.source
                    ),
                });
            }
        }
    }
    findings.sort();
    findings.dedup();
    Analysis {
        findings,
        invocations,
    }
}

/// The command name as written (`Get-Service`, `sc.exe`, `%`), or `None` for `& <expr>`
/// forms other than a literal name.
fn command_name(n: Node, src: &str) -> Option<String> {
    let mut c = n.walk();
    for ch in n.children(&mut c) {
        match ch.kind() {
            "command_name" => return Some(text(ch, src).to_string()),
            "command_name_expr" => {
                let inner = ch.child(0)?;
                let t = text(inner, src);
                return match inner.kind() {
                    // `& $program`: an expression, resolved by the caller.
                    _ if t.starts_with('$') => None,
                    "command_name" | "path_command_name" => Some(t.to_string()),
                    _ => None,
                };
            }
            _ => {}
        }
    }
    None
}

/// Argument nodes of a command: everything in `command_elements` but separators, named
/// parameters, redirections. Values given as `-Param:value` sit inside the separator and
/// are returned too.
fn arguments(n: Node) -> Vec<Node> {
    let mut out = Vec::new();
    let mut c = n.walk();
    for ch in n.children(&mut c) {
        if ch.kind() != "command_elements" {
            continue;
        }
        let mut c2 = ch.walk();
        for el in ch.children(&mut c2) {
            match el.kind() {
                "command_parameter" | "redirection" | "stop_parsing" => {}
                "command_argument_sep" => {
                    let mut c3 = el.walk();
                    out.extend(el.named_children(&mut c3));
                }
                _ => out.push(el),
            }
        }
    }
    out
}

/// Named parameters of a command given a literal value (a bare word or a string literal),
/// as `-Name value` or `-Name:value`: (parameter node, name, value).
fn literal_param_values<'t>(n: Node<'t>, src: &str) -> Vec<(Node<'t>, String, String)> {
    let mut out = Vec::new();
    let mut c = n.walk();
    for ch in n.children(&mut c) {
        if ch.kind() != "command_elements" {
            continue;
        }
        let mut c2 = ch.walk();
        let els: Vec<Node> = ch.children(&mut c2).collect();
        for (i, el) in els.iter().enumerate() {
            if el.kind() != "command_parameter" {
                continue;
            }
            let name = text(*el, src)
                .trim()
                .trim_start_matches('-')
                .trim_end_matches(':')
                .to_string();
            // The value: inside the `:` separator, or the next element after blanks.
            let mut value = None;
            for next in &els[i + 1..] {
                match next.kind() {
                    "command_argument_sep" => {
                        if let Some(v) = next.named_child(0) {
                            value = Some(v);
                            break;
                        }
                    }
                    "command_parameter" | "redirection" | "stop_parsing" => break,
                    _ => {
                        value = Some(*next);
                        break;
                    }
                }
            }
            let Some(v) = value else { continue };
            let literal = if v.kind() == "generic_token" {
                Some(text(v, src).to_string())
            } else {
                as_string_literal(v, src).and_then(|l| literal_value(l, src))
            };
            if let Some(l) = literal {
                out.push((*el, name, l));
            }
        }
    }
    out
}

fn is_native_name(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    [".exe", ".com", ".bat", ".cmd"]
        .iter()
        .any(|e| l.ends_with(e))
        || l.contains('\\')
        || l.contains('/')
}

fn command(
    n: Node,
    src: &str,
    table: &Table,
    functions: &BTreeSet<String>,
    strings: &BTreeMap<String, String>,
    findings: &mut Vec<Finding>,
) -> Invocation {
    let params: Vec<(Node, String)> = {
        let mut v = Vec::new();
        let mut c = n.walk();
        for ch in n.children(&mut c) {
            if ch.kind() == "command_elements" {
                let mut c2 = ch.walk();
                for el in ch.children(&mut c2) {
                    if el.kind() == "command_parameter" {
                        let p = text(el, src)
                            .trim()
                            .trim_start_matches('-')
                            .trim_end_matches(':')
                            .to_string();
                        v.push((el, p));
                    }
                }
            }
        }
        v
    };
    // What is invoked.
    let (name, kind) = match command_name(n, src) {
        Some(name) => {
            let l = name.to_ascii_lowercase();
            if functions.contains(&l) {
                (name, CommandKind::Function)
            } else if table.cmdlets.contains_key(&l) || table.aliases.contains_key(&l) {
                (name, CommandKind::Cmdlet)
            } else if is_native_name(&name) {
                (name, CommandKind::Native)
            } else {
                (name, CommandKind::Unknown)
            }
        }
        None => {
            // `& <expression>`: a script block, a string naming a program, or a variable.
            let expr = {
                let mut c = n.walk();
                let found = n
                    .children(&mut c)
                    .find(|ch| ch.kind() == "command_name_expr");
                found
            };
            match expr {
                Some(e)
                    if descendants(e)
                        .iter()
                        .any(|d| d.kind() == "script_block_expression") =>
                {
                    (text(e, src).to_string(), CommandKind::ScriptBlock)
                }
                Some(e) => {
                    let var = as_variable(e, src).or_else(|| {
                        let t = text(e, src).trim();
                        let name = t.strip_prefix('$')?;
                        name.chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_')
                            .then(|| name.to_ascii_lowercase())
                    });
                    let value = as_string_literal(e, src)
                        .and_then(|l| literal_value(l, src))
                        .or_else(|| var.and_then(|v| strings.get(&v).cloned()));
                    match value {
                        Some(v) if table.cmdlets.contains_key(&v.to_ascii_lowercase()) => {
                            (v, CommandKind::Cmdlet)
                        }
                        Some(v) => (v, CommandKind::Native),
                        // An unknown program held in a variable: treat as native.
                        None => (text(e, src).to_string(), CommandKind::Native),
                    }
                }
                None => (String::new(), CommandKind::Unknown),
            }
        }
    };
    let param_names: Vec<String> = params.iter().map(|(_, p)| p.clone()).collect();
    match kind {
        CommandKind::Unknown => findings.push(Finding {
            line: line(n),
            rule: "unknown-command",
            message: if name.eq_ignore_ascii_case("clean") {
                "`clean` block (PowerShell 7.3)".to_string()
            } else {
                format!(
                    "`{name}` is not a cmdlet of Windows PowerShell 5.1 on Windows Server 2019 (cmdlets.tsv), an alias of one, nor a function of this script; name native programs with their extension (`{name}.exe`)"
                )
            },
        }),
        CommandKind::Cmdlet => {
            let l = name.to_ascii_lowercase();
            let key = table.aliases.get(&l).cloned().unwrap_or(l);
            if let Some(c) = table.cmdlets.get(&key) {
                for (node, p) in &params {
                    if let Some(f) = check_param(c, p, table) {
                        findings.push(Finding {
                            line: line(*node),
                            rule: "parameter",
                            message: f,
                        });
                    }
                }
                for (node, p, value) in literal_param_values(n, src) {
                    let Some(accepted) = c.accepted.get(&p.to_ascii_lowercase()) else {
                        continue;
                    };
                    if !accepted.iter().any(|a| a.eq_ignore_ascii_case(&value)) {
                        findings.push(Finding {
                            line: line(node),
                            rule: "parameter-value",
                            message: format!(
                                "`{}` -{p} {value}: Windows PowerShell 5.1 accepts {} ({})",
                                c.name,
                                accepted.join(", "),
                                c.source
                            ),
                        });
                    }
                }
            }
        }
        CommandKind::Native => {
            for a in arguments(n) {
                let mut bad = Vec::new();
                if a.kind() == "generic_token" && text(a, src).contains('"') {
                    bad.push(text(a, src).to_string());
                }
                for d in descendants(a) {
                    match d.kind() {
                        "string_literal" => {
                            if let Some(v) = literal_value(d, src) {
                                if v.contains('"') {
                                    bad.push(v);
                                }
                            }
                        }
                        "variable" => {
                            let var = text(d, src)
                                .trim_start_matches('$')
                                .trim_start_matches('{')
                                .trim_end_matches('}')
                                .to_ascii_lowercase();
                            if let Some(v) = strings.get(&var) {
                                if v.contains('"') {
                                    bad.push(format!("{} = {v}", text(d, src)));
                                }
                            }
                        }
                        _ => {}
                    }
                }
                for b in bad {
                    findings.push(Finding {
                        line: line(a),
                        rule: "native-quote",
                        message: format!(
                            "native command `{name}` gets an argument containing `\"`: `{b}` (Windows PowerShell 5.1 does not escape embedded quotes for native commands, PowerShell/PowerShell#1995)"
                        ),
                    });
                }
            }
        }
        CommandKind::Function | CommandKind::ScriptBlock => {}
    }
    Invocation {
        name,
        kind,
        params: param_names,
    }
}

/// Why parameter `p` (as written, without `-`) is not acceptable for cmdlet `c`, if it is not.
fn check_param(c: &Cmdlet, p: &str, table: &Table) -> Option<String> {
    if p.is_empty() || p.starts_with(|ch: char| ch.is_ascii_digit()) {
        return None; // a negative number argument, or `--`
    }
    let l = p.to_ascii_lowercase();
    // Provider dynamic parameters are written `Name@Provider`.
    let mut names: Vec<&str> = c
        .params
        .iter()
        .map(|n| n.split('@').next().unwrap_or(n))
        .collect();
    if c.common {
        names.extend(table.common.iter().map(String::as_str));
    }
    if names.iter().any(|n| n.to_ascii_lowercase() == l) {
        return None;
    }
    if let Some(full) = c
        .param_aliases
        .get(&l)
        .or_else(|| c.common.then(|| table.common_aliases.get(&l)).flatten())
    {
        return Some(format!(
            "`{}` -{p}: an alias; write the parameter's full name -{full}",
            c.name
        ));
    }
    let prefixed: Vec<&&str> = names
        .iter()
        .filter(|n| n.to_ascii_lowercase().starts_with(&l))
        .collect();
    if prefixed.len() == 1 {
        return Some(format!(
            "`{}` -{p}: an abbreviation; write the parameter's full name -{}",
            c.name, prefixed[0]
        ));
    }
    let ps7 = match (c.name.as_str(), l.as_str()) {
        ("ForEach-Object", "parallel") | (_, "progressaction") => " (PowerShell 7)",
        _ => "",
    };
    Some(format!(
        "`{}` has no parameter -{p} in Windows PowerShell 5.1{ps7} ({})",
        c.name, c.source
    ))
}
