//! Which cmdlet parameters of Windows PowerShell 5.1 read their value as a wildcard pattern,
//! and a check that no script kwin generates hands such a parameter text that could match
//! more than the one name it means.
//!
//! Sources, read at these commits:
//! - MicrosoftDocs/PowerShell-Docs 27138b21b41de3e2b43cfcac4a56861ca419d5eb,
//!   `reference/5.1/<module>/<cmdlet>.md`: "Accept wildcard characters: True" of each row below.
//! - MicrosoftDocs/windows-powershell-docs f113d6bda7df4bf60fb213c320c12678b40ae571,
//!   `docset/winserver2019-ps/NetSecurity/{Get,Remove}-NetFirewallRule.md`, `-Name`: "Wildcard
//!   characters are accepted." (its yaml block says False; the CDXML adapter matches with
//!   `WildcardPattern.Get(expected).IsMatch(actual)` whenever globbing is on,
//!   PowerShell/PowerShell `src/Microsoft.PowerShell.Commands.Management/cimSupport/cmdletization/cim/clientSideQuery.cs`,
//!   `PropertyValueRegularFilter.WildcardEqual`, so an escaped pattern matches its text only).
//! - Literal when `-LiteralPath` binds: its setter sets `SuppressWildcardExpansion`, copied to
//!   the provider context (`CoreCommandBase.CmdletProviderContext`); `Remove-ItemProperty -Name`
//!   is then compared with `string.Equals` (`RegistryProvider.GetFilteredRegistryKeyProperties`)
//!   and `Move-Item -Destination` is resolved with that context
//!   (`SessionStateContainer.MoveItem`, `Globber.GetGlobbedMonadPathsFromMonadPath(destination,
//!   ..., context)`), in PowerShell/PowerShell and in the Windows PowerShell code it grew from.
//!   Escaping there would be wrong: the backticks would be compared as text.
//! - The service cmdlets look a name up literally only when it has no wildcard characters
//!   (`MultipleServiceCommandBase.MatchingServicesByServiceName`: `ContainsWildcardCharacters`,
//!   else `GetOneService(pattern)`), so an escaped name is looked up with its backticks: neither
//!   form is literal. kwin's service and feature names are restricted to letters, digits,
//!   `-`, `_` and `.` instead (the cases `service/wildcard-name`, `windows_feature/wildcard-name`).

/// (cmdlet, parameter, the parameter whose presence makes this one literal, if any).
pub const WILDCARD_PARAMETERS: &[(&str, &str, Option<&str>)] = &[
    ("Get-FileHash", "Path", None),
    ("Get-Item", "Path", None),
    ("Get-Service", "Name", None),
    ("Get-WindowsOptionalFeature", "FeatureName", None),
    ("Get-NetFirewallRule", "Name", None),
    ("Join-Path", "Path", None),
    ("Join-Path", "ChildPath", None),
    ("Move-Item", "Path", None),
    ("Move-Item", "Destination", Some("LiteralPath")),
    ("Remove-Item", "Path", None),
    ("Remove-ItemProperty", "Path", None),
    ("Remove-ItemProperty", "Name", Some("LiteralPath")),
    ("Remove-NetFirewallRule", "Name", None),
    ("Restart-Service", "Name", None),
    ("Set-Content", "Path", None),
    ("Stop-Service", "Name", None),
    ("Test-Path", "Path", None),
];

/// Characters a wildcard pattern gives a meaning (`WildcardPattern.Escape` escapes these).
const META: &[char] = &['*', '?', '[', ']', '`'];

/// Where `script` passes a wildcard parameter anything but a literal without wildcard
/// characters, an escaped value (`[WildcardPattern]::Escape(...)`), or a variable assigned one
/// of those in the same script.
pub fn wildcard_violations(script: &str) -> Vec<String> {
    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&tree_sitter_powershell::LANGUAGE.into())
        .expect("load PowerShell grammar");
    let Some(tree) = parser.parse(script, None) else {
        return vec!["parser gave up".into()];
    };
    let text = |n: tree_sitter::Node| script[n.byte_range()].to_string();
    let mut out = Vec::new();
    let mut stack = vec![tree.root_node()];
    let mut cursor = tree.walk();
    while let Some(node) = stack.pop() {
        for c in node.children(&mut cursor) {
            stack.push(c);
        }
        if node.kind() != "command" {
            continue;
        }
        let Some(name) = node.child_by_field_name("command_name") else {
            continue;
        };
        let cmdlet = text(name);
        let Some(elements) = node.child_by_field_name("command_elements") else {
            continue;
        };
        // (parameter name, argument text)
        let mut args: Vec<(String, Option<String>)> = Vec::new();
        let mut c2 = elements.walk();
        for e in elements.children(&mut c2) {
            match e.kind() {
                "command_argument_sep" => {}
                "command_parameter" => {
                    let p = text(e);
                    args.push((
                        p.trim_start_matches('-').trim_end_matches(':').to_string(),
                        None,
                    ));
                }
                _ => {
                    if let Some(last) = args.last_mut().filter(|a| a.1.is_none()) {
                        last.1 = Some(text(e));
                    }
                }
            }
        }
        let has = |p: &str| args.iter().any(|(n, _)| n.eq_ignore_ascii_case(p));
        for (c, param, literal_with) in WILDCARD_PARAMETERS {
            if !cmdlet.eq_ignore_ascii_case(c) {
                continue;
            }
            for (n, arg) in &args {
                if !n.eq_ignore_ascii_case(param) || literal_with.is_some_and(&has) {
                    continue;
                }
                let arg = arg.clone().unwrap_or_default();
                if !literal_enough(script, &arg) {
                    out.push(format!("{cmdlet} -{param} {arg}"));
                }
            }
        }
    }
    out
}

/// `arg` names exactly one thing: an escaped value, a single-quoted literal without wildcard
/// characters, or a variable assigned one of those (`$x = ...` on a line of its own).
fn literal_enough(script: &str, arg: &str) -> bool {
    let arg = arg.trim();
    if arg.starts_with("([WildcardPattern]::Escape(") && arg.ends_with("))") {
        return true;
    }
    if let Some(inner) = arg.strip_prefix('\'').and_then(|a| a.strip_suffix('\'')) {
        return !inner.contains(META);
    }
    if arg.starts_with('$')
        && arg[1..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        let prefix = format!("{arg} = ");
        let assigned: Vec<&str> = script
            .lines()
            .filter_map(|l| l.trim().strip_prefix(prefix.as_str()))
            .collect();
        return !assigned.is_empty()
            && assigned.iter().all(|v| {
                let v = v.trim();
                (v.starts_with("[WildcardPattern]::Escape(") && v.ends_with(')'))
                    || v.strip_prefix('\'')
                        .and_then(|a| a.strip_suffix('\''))
                        .is_some_and(|inner| !inner.contains(META))
            });
    }
    false
}
