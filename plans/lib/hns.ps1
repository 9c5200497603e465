# HNS, the Host Network Service, through vmcompute.dll's HNSCall (kwin library plans/lib/hns.ps1,
# shared by every kwin script that reads or changes HNS networks, endpoints or policy lists).
#
# HNSCall(method, path, request, out response) is the HNS v1 API every Windows Server with the
# Containers feature has, 2019 to 2025: microsoft/SDN Kubernetes/windows/hns.psm1 (at 242fb0c)
# calls it through this P/Invoke (declared void there; its HRESULT is read here, as hcsshim
# does), and hcsshim internal/hns (vendored by kubernetes/kubernetes:
# zsyscall_windows.go, hnsfuncs.go, hnsnetwork.go, hnsendpoint.go, hnspolicylist.go) through the
# same export, for kube-proxy and containerd on every Windows release: GET /networks/,
# /endpoints/ and /policylists/ list, DELETE /<kind>/<ID> removes, POST /networks/ creates; the
# export returns an HRESULT and the answer is JSON {Success, Error, Output}.
# Not the HostNetworkingService cmdlets (Get-HnsNetwork, ...): Microsoft documents that module
# for Windows Server 2025 only (MicrosoftDocs/windows-powershell-docs
# docset/winserver2025-ps/HostNetworkingService), and nothing shows the policy-list cmdlets
# in-box before it: microsoft/SDN 299daf2 (#184, 2018) dropped Get-/Remove-HnsNetwork and
# Get-/Remove-HnsEndpoint from hns.psm1 as clashing with in-box cmdlets and kept
# Get-HnsPolicyList / Remove-HnsPolicyList, and upstream's Calico kube-proxy image imported
# hns.psm1 for them.
#
# Every failure throws (an HRESULT error, no answer, an answer without Success): a caller never
# takes "HNS did not answer" for "nothing there".
function Invoke-KwinHns([string] $Method, [string] $Path, [string] $Request = '') {
  if (-not ('KwinHns.Native' -as [type])) {
    Add-Type -Namespace 'KwinHns' -Name 'Native' -MemberDefinition '[DllImport("vmcompute.dll")] public static extern int HNSCall([MarshalAs(UnmanagedType.LPWStr)] string method, [MarshalAs(UnmanagedType.LPWStr)] string path, [MarshalAs(UnmanagedType.LPWStr)] string request, [MarshalAs(UnmanagedType.LPWStr)] out string response);'
  }
  $response = $null
  $hr = [KwinHns.Native]::HNSCall($Method, $Path, $Request, [ref] $response)
  if ($hr -lt 0) { throw ('HNS ' + $Method + ' ' + $Path + ' failed: HRESULT 0x' + $hr.ToString('X8')) }
  if (-not $response) { throw ('HNS ' + $Method + ' ' + $Path + ' gave no answer') }
  $result = $response | ConvertFrom-Json
  if (-not $result.Success) { throw ('HNS ' + $Method + ' ' + $Path + ' failed: ' + $result.Error) }
  if ($null -ne $result.Output) { $result.Output }
}
# Whether this host runs HNS at all (the `hns` service, as sig-windows-tools
# hack/DebugWindowsNode.ps1 at 401ee6f checks it): without it there is no HNS network to read.
function Test-KwinHnsService { [bool](Get-Service -Name 'hns' -ErrorAction SilentlyContinue) }
function Get-KwinHnsNetwork { Invoke-KwinHns 'GET' '/networks/' }
function New-KwinHnsNetwork($Definition) { Invoke-KwinHns 'POST' '/networks/' (ConvertTo-Json -Depth 10 -InputObject $Definition) }
function Remove-KwinHnsNetwork($Network) { Invoke-KwinHns 'DELETE' ('/networks/' + $Network.ID) | Out-Null }
function Get-KwinHnsEndpoint { Invoke-KwinHns 'GET' '/endpoints/' }
function Get-KwinHnsPolicyList { Invoke-KwinHns 'GET' '/policylists/' }
function Remove-KwinHnsPolicyList($List) { Invoke-KwinHns 'DELETE' ('/policylists/' + $List.ID) | Out-Null }
