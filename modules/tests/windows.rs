//! Windows scripts beyond the module cases (`cases.rs` runs those): the engine's PowerShell
//! (probe batch, reboot, the WinRM wrappers) parses clean and hands no `"` to a native
//! command; no script a Windows case produces gives a plan value to a parameter that reads it
//! as a wildcard pattern; and the checkers themselves can fail.

use kwin_engine::transport::Shell;
use kwin_modules::Builtin;
use kwin_testkit::cases::Suite;
use kwin_testkit::scripts::wildcards::wildcard_violations;
use kwin_testkit::scripts::{native_args_with_quotes, ps_clean};

fn assert_ps_clean(what: &str, script: &str) {
    if let Err(e) = ps_clean(what, script) {
        panic!("{e}");
    }
}

#[test]
fn probe_batch_wrapper_is_valid_powershell() {
    use kwin_engine::fact::{batch_script, FactQuery};
    let qs = vec![
        FactQuery {
            key: "a".into(),
            command: "ConvertTo-Json -Compress -InputObject @{ a = 1 }".into(),
            path: None,
        },
        FactQuery {
            key: "b".into(),
            command: "Get-Service -Name 'x' | Out-Null\n'done'".into(),
            path: None,
        },
    ];
    assert_ps_clean("batch", &batch_script(Shell::PowerShell, &qs, "0123abcd"));
}

#[test]
fn engine_powershell_scripts_are_valid_powershell() {
    use kwin_engine::exec::reboot::{boot_id_script, trigger_script};
    use kwin_engine::transport::winrm::scripts;
    assert_ps_clean("reboot trigger", &trigger_script(Shell::PowerShell));
    assert_ps_clean("boot id", boot_id_script(Shell::PowerShell));
    assert_ps_clean(
        "winrm run wrapper",
        &scripts::powershell_run_wrapper("Write-Output 'x'\n\nexit 3"),
    );
    assert_ps_clean(
        "winrm upload",
        &scripts::powershell_upload_script("C:\\k\\it's.txt", "0123", "abcd"),
    );
    assert_ps_clean(
        "winrm get",
        &scripts::powershell_get_script("C:\\k\\a b.txt"),
    );
}

/// No script a case produces gives a plan value to a parameter that reads it as a wildcard
/// pattern (`kwin_testkit::scripts::wildcards` has the table and its sources): a firewall rule named
/// `kwin-*` must remove that rule, not every rule whose name starts with `kwin-`.
#[test]
fn no_plan_value_reaches_a_wildcard_parameter() {
    let scripts = Suite::windows().check(&Builtin).scripts;
    assert!(scripts.len() > 50, "{} scripts", scripts.len());
    let mut bad = Vec::new();
    for (what, script) in &scripts {
        for v in wildcard_violations(script) {
            bad.push(format!("{what}: {v}"));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn wildcard_checker_catches_patterns() {
    use kwin_testkit::scripts::wildcards::wildcard_violations;
    // The check itself must be able to fail.
    assert_eq!(
        wildcard_violations("Remove-NetFirewallRule -Name 'kwin-*'").len(),
        1
    );
    assert_eq!(
        wildcard_violations("$n = 'a[1]'\nStop-Service -Name $n -Force").len(),
        1
    );
    assert_eq!(wildcard_violations("Stop-Service -Name $unknown").len(), 1);
    assert_eq!(
        wildcard_violations("Move-Item -Path $t -Destination $p -Force").len(),
        2
    );
    assert!(wildcard_violations(
        "Remove-NetFirewallRule -Name ([WildcardPattern]::Escape('kwin-*'))\n\
         Remove-ItemProperty -LiteralPath 'HKLM:\\x' -Name 'a*'\n\
         Move-Item -LiteralPath $t -Destination $p -Force\n\
         $n = 'kubelet'\nStop-Service -Name $n -Force"
    )
    .is_empty());
}

#[test]
fn native_quote_checker_catches_quotes() {
    // The check itself must be able to fail, and must not flag what 5.1 passes intact.
    for bad in [
        "$o = & sc.exe create 'kubelet' binPath= '\"C:\\k\\kubelet.exe\" --v=2' start= auto",
        "sc.exe failure kubelet \"a`\"b\"",
        "& tar.exe -xzf \"C:\\a\"\"b.tgz\"",
        "icacls.exe C:\\x --a=\"b\"c",
    ] {
        assert!(
            !native_args_with_quotes(bad).is_empty(),
            "not caught: {bad}"
        );
    }
    for good in [
        "& tar.exe -xzf 'C:\\Program Files\\a.tgz' -C \"C:\\x\"",
        "sc.exe failure 'kubelet' reset= 0 actions= restart/10000",
        "New-Service -Name 'k' -BinaryPathName '\"C:\\k\\k.exe\" --v=2'",
        "throw \"sc.exe failed: $o\"",
    ] {
        assert!(native_args_with_quotes(good).is_empty(), "flagged: {good}");
    }
}
