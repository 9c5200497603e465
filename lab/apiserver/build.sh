#!/usr/bin/env bash
# Build what the API tier runs, once per machine: `lab/build/build.sh tier` (kube-apiserver,
# kubeadm and kubectl of LAB_K8S_NEWEST and the etcd its kubeadm deploys, from their Go
# modules, with the lab build's GOCACHE so a later full build reuses the compile work).
#
#   lab/apiserver/build.sh            # build once, then a no-op (< 1 s, no root needed)
#
# The versions are lab/build/versions.sh's; where the programs are, lab/build/tier.sh's.
# Environment: that of lab/build/build.sh (KWIN_LAB_CACHE, KWIN_LAB_BUILD_JOBS,
# KWIN_LAB_BUILD_NICE); its log is $KWIN_LAB_CACHE/build.log.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=../build/versions.sh
source "$HERE/../build/versions.sh"
# shellcheck source-path=SCRIPTDIR source=../build/tier.sh
source "$HERE/../build/tier.sh"

if lab_tier_bins >/dev/null; then
  exit 0
fi
exec "$HERE/../build/build.sh" tier
