# containerd's log rotation on this Windows node (kwin recipe windows-worker), run every hour by
# the scheduled task kwin-containerd-log. containerd writes its --log-file itself and rotates
# nothing; it holds the file open for appending and shares it for reading and writing, not
# for deleting (Go's syscall.Open on Windows, src/syscall/syscall_windows.go at go1.26.8:
# FILE_SHARE_READ | FILE_SHARE_WRITE, O_APPEND as FILE_APPEND_DATA), so the file cannot be
# renamed while containerd runs. Once it reaches
# 10 MiB (10485760 bytes) its content is copied to containerd-<time>.log and the file emptied
# in place; containerd's next write lands at the new end. Lines written between the copy and the
# truncation are lost. Rotated files older than 7 days are removed: the kubelet's log rotates
# at the same size and age (kube-log-runner).
$ErrorActionPreference = 'Stop'
$log = 'C:\var\log\containerd\containerd.log'
$dir = [IO.Path]::GetDirectoryName($log)
if ((Test-Path -LiteralPath $log -PathType Leaf) -and ((Get-Item -LiteralPath $log).Length -ge 10485760)) {
  $rotated = Join-Path $dir ('containerd-' + (Get-Date -Format 'yyyyMMdd-HHmmss') + '.log')
  $in = [IO.File]::Open($log, [IO.FileMode]::Open, [IO.FileAccess]::ReadWrite, [IO.FileShare]::ReadWrite)
  try {
    $out = [IO.File]::Open($rotated, [IO.FileMode]::CreateNew, [IO.FileAccess]::Write, [IO.FileShare]::None)
    try { $in.CopyTo($out) } finally { $out.Dispose() }
    $in.SetLength(0)
  } finally {
    $in.Dispose()
  }
}
$cutoff = (Get-Date).AddDays(-7)
Get-ChildItem -LiteralPath $dir -Filter 'containerd-*.log' | Where-Object { $_.LastWriteTime -lt $cutoff } | Remove-Item -Force
