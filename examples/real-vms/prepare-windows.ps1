# Prepares a Windows Server 2019/2022 host for kwin over WinRM HTTPS: PowerShell remoting on, an
# HTTPS listener with a self-signed certificate, the firewall rule for TCP 5986, and the
# certificate's SHA-256 fingerprint to pin as `cert_fingerprint` in the plan.
#
# Run it elevated on the host, or through the cloud's run-command channel (which is how the CI
# example gets the fingerprint over an authenticated path). Safe to run again: an existing HTTPS
# listener and its certificate are kept, so the fingerprint stays the same.
#
# Output, last line:  kwin-cert-fingerprint: 6f:3a:...:02
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

$sha = [Security.Cryptography.SHA256]::Create()
$fingerprint = ($sha.ComputeHash($cert.RawData) | ForEach-Object { $_.ToString('x2') }) -join ':'
Write-Output "kwin-cert-fingerprint: $fingerprint"
