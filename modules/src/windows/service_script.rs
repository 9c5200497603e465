//! Script pieces of the Windows `service` module. None of them hands a `"` to a native command:
//! Windows PowerShell 5.1 passes native arguments without escaping embedded quotes
//! (reference/5.1/Microsoft.PowerShell.Core/About/about_Parsing.md, PowerShell-Docs 27138b21;
//! PowerShell/PowerShell#1995), so a quoted image path given to `sc.exe binPath=` is split at
//! its spaces and stored without its quotes. The image path goes to the Service Control
//! Manager through cmdlets instead, as a .NET string:
//!
//! - registration: `New-Service -BinaryPathName` (5.1: Name, BinaryPathName, DisplayName,
//!   StartupType = Automatic | Manual | Disabled, DependsOn; the path "can also include
//!   arguments", see `lpBinaryPathName` of CreateServiceW) —
//!   reference/5.1/Microsoft.PowerShell.Management/New-Service.md;
//! - reconfiguration: `Set-Service` in 5.1 has no BinaryPathName (it came with PowerShell 6),
//!   so the `Change` method of `Win32_Service` (DisplayName, PathName, StartMode = Automatic |
//!   Manual | Disabled, ServiceDependencies; it calls ChangeServiceConfig; return value 0 is
//!   success) through `Invoke-CimMethod` (reference/5.1/CimCmdlets/Invoke-CimMethod.md;
//!   learn.microsoft.com "Change method of the Win32_Service class");
//! - failure actions: `sc.exe failure <name> reset= 0 actions= restart/10000/...`, whose
//!   arguments hold no quote.

use kwin_engine::quote::ps_quote;

/// `New-Service` for a service that does not exist yet.
pub(super) fn register(
    name: &str,
    image_path: &str,
    display_name: &str,
    startup: &str,
    depends_on: &[String],
) -> String {
    let deps = if depends_on.is_empty() {
        String::new()
    } else {
        format!(
            " -DependsOn {}",
            depends_on
                .iter()
                .map(|d| ps_quote(d))
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    format!(
        "New-Service -Name {n} -BinaryPathName {p} -DisplayName {d} -StartupType {startup}{deps} | Out-Null\n",
        n = ps_quote(name),
        p = ps_quote(image_path),
        d = ps_quote(display_name),
    )
}

/// `Win32_Service.Change` for a registered service: image path, display name, start mode and
/// (when managed) dependencies.
pub(super) fn change(
    name: &str,
    image_path: &str,
    display_name: &str,
    startup: &str,
    depends_on: Option<&[String]>,
) -> String {
    let deps = match depends_on {
        Some(d) => format!(
            "; ServiceDependencies = [string[]]@({})",
            d.iter().map(|x| ps_quote(x)).collect::<Vec<_>>().join(",")
        ),
        None => String::new(),
    };
    format!(
        "$svc = Get-CimInstance -ClassName Win32_Service -Filter {filter}\n\
         $r = Invoke-CimMethod -InputObject $svc -MethodName Change -Arguments @{{ PathName = {p}; DisplayName = {d}; StartMode = '{startup}'{deps} }}\n\
         if ($r.ReturnValue -ne 0) {{ throw ('Win32_Service.Change of ' + {n} + ' returned ' + $r.ReturnValue) }}\n",
        filter = ps_quote(&format!("Name='{name}'")),
        n = ps_quote(name),
        p = ps_quote(image_path),
        d = ps_quote(display_name),
    )
}

/// Restart on failure, 10 s after each crash (no quote reaches sc.exe).
pub(super) fn failure_actions(name: &str) -> String {
    format!(
        "$o = & sc.exe failure {n} reset= 0 actions= restart/10000/restart/10000/restart/10000\n\
         if ($LASTEXITCODE -ne 0) {{ throw ('sc.exe failure: ' + ($o -join ' ')) }}\n",
        n = ps_quote(name)
    )
}

/// Remember the running services that depend on `name` in `$kwinDependents`: `Stop-Service
/// -Force` stops them too ("stop a service even if that service has dependent services",
/// reference/5.1/Microsoft.PowerShell.Management/Stop-Service.md), and nothing starts them
/// again by itself (kubelet depends on containerd).
pub(super) fn capture_dependents(name: &str) -> String {
    format!(
        "$kwinDependents = @(Get-Service -Name {n} -DependentServices | Where-Object {{ $_.Status -eq 'Running' }} | ForEach-Object {{ $_.Name }})\n",
        n = ps_quote(name)
    )
}

/// Start again what [`capture_dependents`] found running.
pub(super) fn start_dependents() -> &'static str {
    "foreach ($d in $kwinDependents) { Start-Service -Name $d }\n"
}

/// Stop the service if it runs (remembering it in `$kwinWasRunning`) and wait until the
/// service's own process has exited: the process id the SCM reports for it
/// (`Win32_Service.ProcessId`), read before the stop, its handle taken then, so the wait
/// never lands on another process that got the id later. Stop-Service returns when the SCM
/// reports Stopped, which the service process says just before it exits; a wrapper such as
/// kube-log-runner exits after its child (it waits for it: `cmd.Wait()`,
/// k8s.io/component-base@v0.34.0 logs/kube-log-runner/kube-log-runner.go).
///
/// Nothing else running from a file about to be replaced is waited for. containerd's shims
/// (`containerd-shim-runhcs-v1.exe`, one per pod sandbox) are processes of their own that
/// outlive containerd: it reconnects to them when it starts again ("This is also used when
/// containerd boots and reconnects to shims", containerd docs/runtime-v2.md at v2.3.7;
/// `loadShims`, core/runtime/v2/shim_load.go). The pods the drain leaves running
/// (`--ignore-daemonsets`) keep theirs until they end, so waiting for them never ends. Their
/// image is renamed aside by [`replace`] instead, as Microsoft documents for a library in use
/// ("Dynamic-Link Library Updates", learn.microsoft.com/windows/win32/dlls/dynamic-link-library-updates:
/// rename it with MoveFileEx on the same volume, copy the new file in; every new process
/// uses the new one): running pods keep the old shim, new pods start the new one.
pub(super) fn stop_for_replace(name: &str, exists: bool) -> String {
    let mut s = String::from("$kwinWasRunning = $false\n$kwinDependents = @()\n");
    if exists {
        s.push_str(&capture_dependents(name));
        s.push_str(&format!(
            "$s = Get-Service -Name {n} -ErrorAction SilentlyContinue\n\
             if ($s -and $s.Status -ne 'Stopped') {{\n\
             \x20 $kwinWasRunning = $true\n\
             \x20 $kwinProcess = $null\n\
             \x20 $kwinPid = [int](Get-CimInstance -ClassName Win32_Service -Filter {filter}).ProcessId\n\
             \x20 if ($kwinPid -gt 0) {{ $kwinProcess = Get-Process -Id $kwinPid -ErrorAction SilentlyContinue }}\n\
             \x20 if ($kwinProcess) {{ $null = $kwinProcess.Handle }}\n\
             \x20 Stop-Service -Name {n} -Force\n\
             \x20 if ($kwinProcess -and -not $kwinProcess.WaitForExit(120000)) {{ throw ('the process of the service ' + {n} + ' (id ' + $kwinPid + ') still runs 120 s after the service stopped') }}\n\
             }}\n",
            n = ps_quote(name),
            filter = ps_quote(&format!("Name='{name}'")),
        ));
    }
    s
}

/// Replace `dest` by `src` after checking `src` still has the hash the plan saw. The new file
/// is copied next to `dest` first; an existing `dest` is renamed aside to
/// `<dest>.kwin-old-<time>` in its own directory (Windows lets an image in use be renamed,
/// not overwritten or deleted: "Dynamic-Link Library Updates", see [`stop_for_replace`]),
/// then the copy moved in. Renamed-aside files nothing runs from any more are removed; one a
/// process still runs from (a running pod's shim) stays until a later replacement or reset
/// finds it free.
pub(super) fn replace(src: &str, dest: &str, sha256: &str) -> String {
    format!(
        "$src = {s}\n$dst = {d}\n\
         $h = (Get-FileHash -LiteralPath $src -Algorithm SHA256).Hash.ToLowerInvariant()\n\
         if ($h -ne '{sha256}') {{ throw ('' + $src + ' has sha256 ' + $h + ', expected {sha256}') }}\n\
         $dir = [IO.Path]::GetDirectoryName($dst)\n\
         New-Item -ItemType Directory -Force -Path $dir | Out-Null\n\
         Copy-Item -LiteralPath $src -Destination ($dst + '.kwin-new') -Force\n\
         if (Test-Path -LiteralPath $dst) {{ Move-Item -LiteralPath $dst -Destination ($dst + '.kwin-old-' + (Get-Date -Format 'yyyyMMddHHmmssfff')) }}\n\
         Move-Item -LiteralPath ($dst + '.kwin-new') -Destination $dst\n\
         Get-ChildItem -LiteralPath $dir -Filter ([IO.Path]::GetFileName($dst) + '.kwin-old-*') | Remove-Item -Force -ErrorAction SilentlyContinue\n",
        s = ps_quote(src),
        d = ps_quote(dest),
    )
}
