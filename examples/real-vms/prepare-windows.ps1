# Prepares a Windows Server 2019/2022 host for kwin over WinRM HTTPS: PowerShell remoting on, an
# HTTPS listener with a self-signed certificate, the firewall rule for TCP 5986, and the
# certificate's SHA-256 fingerprint to pin as `cert_fingerprint` in the plan.
#
# Run it elevated on the host, or through the cloud's run-command channel (which is how the CI
# example gets the fingerprint over an authenticated path). Safe to run again: an existing HTTPS
# listener and its certificate are kept, so the fingerprint stays the same.
#
# It also reports what kwin's windows-worker recipe will check first (the Windows build and
# update level, free space on C:) as warnings, so a host kwin would refuse is known early.
#
# Output, last lines:  kwin-windows-build: 10.0.20348.2849
#                      kwin-cert-fingerprint: 6f:3a:...:02
param(
    [int]$Years = 5
)
$ErrorActionPreference = 'Stop'

Enable-PSRemoting -Force -SkipNetworkProfileCheck | Out-Null

$cert = $null
foreach ($listener in Get-ChildItem -Path WSMan:\localhost\Listener) {
    if ($listener.Keys -contains 'Transport=HTTPS') {
        $item = Get-ChildItem -Path "WSMan:\localhost\Listener\$($listener.Name)" |
            Where-Object { $_.Name -eq 'CertificateThumbprint' }
        if ($item -and $item.Value) {
            $cert = Get-Item -Path "Cert:\LocalMachine\My\$($item.Value)" -ErrorAction SilentlyContinue
        }
    }
}
if (-not $cert) {
    $cert = New-SelfSignedCertificate -DnsName $env:COMPUTERNAME -CertStoreLocation Cert:\LocalMachine\My -NotAfter (Get-Date).AddYears($Years)
    New-Item -Path WSMan:\localhost\Listener -Transport HTTPS -Address * -CertificateThumbPrint $cert.Thumbprint -Force | Out-Null
}

if (-not (Get-NetFirewallRule -Name 'kwin-winrm-https' -ErrorAction SilentlyContinue)) {
    New-NetFirewallRule -Name 'kwin-winrm-https' -DisplayName 'WinRM HTTPS (kwin)' -Direction Inbound -Protocol TCP -LocalPort 5986 -Action Allow | Out-Null
}

# What kwin's windows-worker recipe checks before it installs anything (plans/windows-worker.toml:
# steps windows-build and overlay-update, the `hotfix` module: build 10.0.17763 or later, and for
# VXLAN KB4489899 or a cumulative update from 10.0.17763.379; step preflight: 20 GiB free on C:),
# reported now so a host kwin would refuse is known before the plan is written.
$cv = Get-ItemProperty -LiteralPath 'HKLM:\SOFTWARE\Microsoft\Windows NT\CurrentVersion'
$build = [version]('{0}.{1}.{2}.{3}' -f [int]$cv.CurrentMajorVersionNumber, [int]$cv.CurrentMinorVersionNumber, [int]$cv.CurrentBuildNumber, [int]$cv.UBR)
if ($build -lt [version]'10.0.17763.379' -and -not (Get-HotFix -Id 'KB4489899' -ErrorAction SilentlyContinue)) {
    Write-Warning ('Windows build ' + $build + ': kwin needs Windows Server 2019 or later with KB4489899 or a later cumulative update (10.0.17763.379+) for the VXLAN overlay')
}
$gib = [int64]1024 * 1024 * 1024
$disk = Get-CimInstance -ClassName Win32_LogicalDisk -Filter "DeviceID='C:'"
if ($disk -and [int64]$disk.FreeSpace -lt 20 * $gib) {
    Write-Warning ('C: has ' + [math]::Floor([int64]$disk.FreeSpace / $gib) + ' GiB free: kwin needs 20 GiB (Windows container images are large)')
}
Write-Output ('kwin-windows-build: ' + $build)

$sha = [Security.Cryptography.SHA256]::Create()
$fingerprint = ($sha.ComputeHash($cert.RawData) | ForEach-Object { $_.ToString('x2') }) -join ':'
Write-Output "kwin-cert-fingerprint: $fingerprint"
