#!/usr/bin/env bash
# The [artifacts.sha256] pins of the release files the lab's mirror serves (built here, so
# their digests are the lab's, not upstream's): what lab/cluster/plan.toml pins.
#
#   lab/build/pins.sh              # prints the table (containerd and runc of versions.sh)
#
# The builds are reproducible (-trimpath, the same Go and C toolchain, tarballs with fixed
# owners, times and order), so the table changes only when versions.sh or the toolchain does.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=versions.sh
source "$HERE/versions.sh"
W="${KWIN_LAB_CACHE:-/var/cache/kwin-lab}/mirror/www"
[[ -f $W/../.stamp ]] || { echo "pins.sh: no lab mirror yet (lab/build/build.sh)" >&2; exit 1; }
echo "[artifacts.sha256]"
for v in $LAB_CONTAINERD; do
  f="$W/github.com/containerd/containerd/releases/download/v$v/containerd-$v-linux-amd64.tar.gz"
  printf '"%s" = "%s"\n' "${f##*/}" "$(sha256sum "$f" | cut -d' ' -f1)"
done
for v in $LAB_RUNC; do
  f="$W/github.com/opencontainers/runc/releases/download/v$v/runc.amd64"
  printf '"runc.amd64" = "%s"   # runc %s\n' "$(sha256sum "$f" | cut -d' ' -f1)" "$v"
done
