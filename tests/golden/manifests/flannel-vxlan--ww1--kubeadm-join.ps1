$ErrorActionPreference = 'Stop'
$ProgressPreference = 'SilentlyContinue'
$kubeadm = 'C:\k\kubeadm.exe'
$ErrorActionPreference = 'Continue'
$ver = [string](& $kubeadm version -o short 2>$null)
$rc = $LASTEXITCODE
$ErrorActionPreference = 'Stop'
if ($rc -ne 0 -or $ver -notmatch '^v1\.(\d+)\.') { throw "cannot tell the kubeadm version ($kubeadm version -o short: $ver)" }
$minor = [int]$Matches[1]
if ($minor -ge 31) {
$text = @'
{
  "apiVersion": "kubeadm.k8s.io/v1beta4",
  "discovery": {
    "bootstrapToken": {
      "apiServerEndpoint": "192.168.56.10:6443",
      "caCertHashes": [
        "sha256:0000000000000000000000000000000000000000000000000000000000000000"
      ],
      "token": "abcdef.0123456789abcdef"
    }
  },
  "kind": "JoinConfiguration",
  "nodeRegistration": {
    "criSocket": "npipe:////./pipe/containerd-containerd",
    "kubeletExtraArgs": [
      {
        "name": "node-ip",
        "value": "192.168.56.21"
      }
    ],
    "name": "ww1",
    "taints": [
      {
        "effect": "NoSchedule",
        "key": "os",
        "value": "windows"
      }
    ]
  }
}
'@
} elseif ($minor -ge 22) {
$text = @'
{
  "apiVersion": "kubeadm.k8s.io/v1beta3",
  "discovery": {
    "bootstrapToken": {
      "apiServerEndpoint": "192.168.56.10:6443",
      "caCertHashes": [
        "sha256:0000000000000000000000000000000000000000000000000000000000000000"
      ],
      "token": "abcdef.0123456789abcdef"
    }
  },
  "kind": "JoinConfiguration",
  "nodeRegistration": {
    "criSocket": "npipe:////./pipe/containerd-containerd",
    "kubeletExtraArgs": {
      "node-ip": "192.168.56.21"
    },
    "name": "ww1",
    "taints": [
      {
        "effect": "NoSchedule",
        "key": "os",
        "value": "windows"
      }
    ]
  }
}
'@
} else {
$text = @'
{
  "apiVersion": "kubeadm.k8s.io/v1beta2",
  "discovery": {
    "bootstrapToken": {
      "apiServerEndpoint": "192.168.56.10:6443",
      "caCertHashes": [
        "sha256:0000000000000000000000000000000000000000000000000000000000000000"
      ],
      "token": "abcdef.0123456789abcdef"
    }
  },
  "kind": "JoinConfiguration",
  "nodeRegistration": {
    "criSocket": "npipe:////./pipe/containerd-containerd",
    "kubeletExtraArgs": {
      "node-ip": "192.168.56.21"
    },
    "name": "ww1",
    "taints": [
      {
        "effect": "NoSchedule",
        "key": "os",
        "value": "windows"
      }
    ]
  }
}
'@
}
$cfg = Join-Path $env:TEMP ('kwin-join-' + [guid]::NewGuid().ToString('N') + '.yaml')
try {
  [IO.File]::WriteAllText($cfg, $text)
  $ErrorActionPreference = 'Continue'
  & $kubeadm join --config $cfg 2>&1 | ForEach-Object { [string]$_ }
  $rc = $LASTEXITCODE
  $ErrorActionPreference = 'Stop'
  if ($rc -ne 0) { throw "kubeadm join failed with exit code $rc" }
} finally {
  Remove-Item -LiteralPath $cfg -Force -ErrorAction SilentlyContinue
}
