#!/usr/bin/env bash
# Build every real program the lab runs from its published Go module, at the exact versions
# of versions.sh, into a cache outside the repository; then the container images (images.sh).
#
#   lab/build/build.sh              # everything; a no-op (< 1 s) once built
#   lab/build/build.sh containerd runc
#                                   # only those components (names below)
#   lab/build/build.sh tier         # only the Kubernetes API tier (lab/apiserver)
#
# Components: kubernetes (kubeadm, kubelet, kubectl, kube-apiserver, kube-controller-manager,
# kube-scheduler, kube-proxy and the e2e image agnhost, per LAB_K8S_FULL), apiservers
# (kube-apiserver of LAB_K8S_APISERVER_ONLY), tier (what the API tier lab/apiserver runs:
# kube-apiserver, kubeadm and kubectl of LAB_K8S_NEWEST and the etcd its kubeadm deploys; the
# three commands go to bin/kube-tier-VERSION only while no full build of that version exists,
# and that full build supersedes them), etcd, coredns, containerd (containerd, ctr,
# containerd-shim-runc-v2), runc, cni-plugins, flannel (flanneld and the flannel CNI plugin),
# crictl, registry, crane, pause, images.
#
# Each build is a small Go module of our own under $CACHE/src/NAME-VERSION that requires the
# upstream module at that version and takes over its go.mod's replace directives (for
# k8s.io/kubernetes: every staging module ./staging/src/k8s.io/X becomes k8s.io/X at its
# published v0.MINOR.PATCH), built with the flags upstream's release build sets (version
# stamps, static, trimmed; cited next to each). One GOCACHE for all, so packages shared by
# several components (and by the two Kubernetes versions) compile once per machine.
#
# Environment:
#   KWIN_LAB_CACHE       cache root (default /var/cache/kwin-lab): bin/, src/, go/, registry/
#   KWIN_LAB_BUILD_JOBS  go build -p (default: nproc)
#   KWIN_LAB_BUILD_NICE  nice level (default 10)
#   KWIN_LAB_FORCE=1     rebuild what is asked even if its stamp matches
# Progress goes to the terminal (a line per step, a heartbeat while Go compiles); the whole
# output of every step to $CACHE/build.log, whose tail is printed when a step fails.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=versions.sh
source "$HERE/versions.sh"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
# shellcheck source-path=SCRIPTDIR source=tier.sh
source "$HERE/tier.sh"

[[ $(id -u) -eq 0 ]] || build_die "run as root (installs build dependencies with apt)"
mkdir -p "$CACHE"
exec 9>"$CACHE/.build.lock"
if ! flock -n 9; then
  build_say "another build holds $CACHE/.build.lock; waiting"
  flock 9
fi

ALL=(runc containerd cni-plugins flannel crictl etcd coredns registry crane pause kubernetes apiservers tier images mirror)
if [[ $# -gt 0 ]]; then WANT=("$@"); else WANT=("${ALL[@]}"); fi
for w in "${WANT[@]}"; do
  [[ " ${ALL[*]} " == *" $w "* ]] || build_die "unknown component '$w' (one of: ${ALL[*]})"
done
wants() { [[ " ${WANT[*]} " == *" $1 "* ]]; }

: >>"$BUILD_LOG"
T_START=$EPOCHSECONDS
trap 'build_failed $?' EXIT

# The API tier alone is pure Go (CGO off): it needs no Debian package.
if [[ "${WANT[*]}" != tier ]]; then
  build_deps gcc libc6-dev libseccomp-dev pkg-config busybox-static iptables nftables libcap2-bin
fi

# ------------------------------------------------------------------ runc
# opencontainers/runc Makefile: BUILDTAGS ?= seccomp urfave_cli_no_docs; `make static` links
# with -extldflags -static; the version comes from -X main.version (and main.gitCommit).
if wants runc; then
  for v in $LAB_RUNC; do
    go_component runc "$v" github.com/opencontainers/runc \
      --cgo --tags "seccomp urfave_cli_no_docs" \
      --ldflags "-X main.version=$v -X main.gitCommit=v$v -extldflags -static" \
      --static-check \
      github.com/opencontainers/runc=runc
  done
fi

# ------------------------------------------------------------------ containerd
# containerd Makefile: -X $(PKG)/version.Version=$(VERSION) -X .../version.Revision=$(REVISION)
# -X .../version.Package=$(PACKAGE); static release builds use CGO_ENABLED=0 for the daemon
# with the no_btrfs tags of its release script (script/release: no_btrfs no_devmapper).
if wants containerd; then
  for v in $LAB_CONTAINERD; do
    case $v in
      1.*) mod=github.com/containerd/containerd; shim=containerd-shim-runc-v2 ;;
      *) mod=github.com/containerd/containerd/v2; shim=containerd-shim-runc-v2 ;;
    esac
    go_component containerd "$v" "$mod" \
      --tags "no_btrfs no_devmapper no_zfs" \
      --ldflags "-X $mod/version.Version=v$v -X $mod/version.Revision=v$v -X $mod/version.Package=github.com/containerd/containerd" \
      "$mod/cmd/containerd=containerd" "$mod/cmd/ctr=ctr" "$mod/cmd/$shim=$shim"
  done
fi

# ------------------------------------------------------------------ CNI plugins
# containernetworking/plugins build_linux.sh: every plugins/{main,ipam,meta}/* with
# -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=vV, CGO off.
if wants cni-plugins; then
  v=$LAB_CNI_PLUGINS
  m=github.com/containernetworking/plugins
  pk=()
  for p in main/bridge main/host-device main/ipvlan main/loopback main/macvlan main/ptp \
    main/vlan main/dummy main/tap ipam/dhcp ipam/host-local ipam/static meta/bandwidth \
    meta/firewall meta/portmap meta/sbr meta/tuning meta/vrf; do
    pk+=("$m/plugins/$p=${p#*/}")
  done
  go_component cni-plugins "$v" "$m" \
    --ldflags "-X $m/pkg/utils/buildversion.BuildVersion=v$v" "${pk[@]}"
fi

# ------------------------------------------------------------------ flannel
# flannel-io/flannel Makefile: -X github.com/flannel-io/flannel/pkg/version.Version=$(TAG),
# CGO_ENABLED=1 (its UDP backend has C code).
# Its Tencent Cloud backend's SDK is refused by the module proxy: tencentcloud-vpc-stand-in/.
# The flannel CNI plugin: containernetworking/plugins v0.9.1 plugins/meta/flannel (versions.sh).
if wants flannel; then
  v=$LAB_FLANNEL
  go_component flannel "$v" github.com/flannel-io/flannel --cgo \
    --ldflags "-X github.com/flannel-io/flannel/pkg/version.Version=v$v" \
    --replace "github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc=$HERE/tencentcloud-vpc-stand-in" \
    github.com/flannel-io/flannel=flanneld github.com/flannel-io/flannel/cmd/install_conf=install-conf
  v=$LAB_FLANNEL_CNI_SOURCE
  go_component flannel-cni "$v" github.com/containernetworking/plugins \
    --ldflags "-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=v$v" \
    github.com/containernetworking/plugins/plugins/meta/flannel=flannel
fi

# ------------------------------------------------------------------ crictl
# kubernetes-sigs/cri-tools Makefile: -X sigs.k8s.io/cri-tools/pkg/version.Version=$(VERSION)
if wants crictl; then
  v=$LAB_CRICTL
  go_component crictl "$v" sigs.k8s.io/cri-tools \
    --ldflags "-X sigs.k8s.io/cri-tools/pkg/version.Version=v$v" \
    sigs.k8s.io/cri-tools/cmd/crictl=crictl
fi

# ------------------------------------------------------------------ etcd
# etcd-io/etcd scripts/build-binary.sh: CGO_ENABLED=0, -X go.etcd.io/etcd/api/v3/version.GitSHA;
# the server's main package is the module go.etcd.io/etcd/server/v3 itself.
build_etcd() { # VERSION
  go_component etcd "$1" go.etcd.io/etcd/server/v3 \
    --ldflags "-X go.etcd.io/etcd/api/v3/version.GitSHA=v$1" \
    go.etcd.io/etcd/server/v3=etcd
}
if wants etcd; then
  for v in $LAB_ETCD; do build_etcd "$v"; done
fi

# ------------------------------------------------------------------ CoreDNS
# coredns/coredns Makefile: CGO_ENABLED=0, -X github.com/coredns/coredns/coremain.GitCommit;
# the plugins are the ones its zplugin.go (generated from plugin.cfg) imports.
if wants coredns; then
  for v in $LAB_COREDNS; do
    go_component coredns "$v" github.com/coredns/coredns \
      --ldflags "-X github.com/coredns/coredns/coremain.GitCommit=v$v" \
      github.com/coredns/coredns=coredns
  done
fi

# ------------------------------------------------------------------ registry, crane
# distribution/distribution Makefile: -X github.com/distribution/distribution/v3/version.version
if wants registry; then
  v=$LAB_REGISTRY
  go_component registry "$v" github.com/distribution/distribution/v3 \
    --ldflags "-X github.com/distribution/distribution/v3/version.version=v$v" \
    github.com/distribution/distribution/v3/cmd/registry=registry
fi
if wants crane; then
  v=$LAB_CRANE
  go_component crane "$v" github.com/google/go-containerregistry \
    --ldflags "-X github.com/google/go-containerregistry/cmd/crane/cmd.Version=v$v" \
    github.com/google/go-containerregistry/cmd/crane=crane
fi

# ------------------------------------------------------------------ pause
# kubernetes build/pause/Makefile: $(CC) -Os -Wall -Werror -static -DVERSION=v$(TAG)-$(REV),
# from build/pause/linux/pause.c of the first Kubernetes version served here whose kubeadm
# deploys that tag (its Makefile's TAG is the same).
if wants pause; then
  for v in $LAB_PAUSE; do
    kv=""
    for k in $LAB_K8S_SERVED; do
      read -r _ _ p < <(lab_kubeadm_images "$k")
      if [[ $p == "$v" ]]; then kv=$k; break; fi
    done
    build_pause "$v" "$kv"
  done
fi

# ------------------------------------------------------------------ Kubernetes
# kubernetes hack/lib/golang.sh (release build): CGO_ENABLED=0 for every binary built here,
# -trimpath, -ldflags "-s -w" plus hack/lib/version.sh's -X stamps of
# k8s.io/{component-base,client-go/pkg}/version (gitVersion, gitMajor, gitMinor, gitCommit,
# gitTreeState, buildDate), -tags selinux,notest,grpcnotrace. All of a version's commands in
# ONE go build, so their shared packages compile once.
k8s_cmds=(kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy)
K8S_TAGS="selinux notest grpcnotrace"
if wants kubernetes; then
  for v in $LAB_K8S_FULL; do
    pk=()
    for c in "${k8s_cmds[@]}"; do pk+=("k8s.io/kubernetes/cmd/$c=$c"); done
    # the images' entrypoint (build/server-image/Dockerfile: kube-log-runner as /go-runner)
    # and the e2e test image (test/images/agnhost)
    pk+=("k8s.io/component-base/logs/kube-log-runner=kube-log-runner")
    pk+=("k8s.io/kubernetes/test/images/agnhost=agnhost")
    go_component kubernetes "$v" k8s.io/kubernetes --kubernetes --tags "$K8S_TAGS" "${pk[@]}"
    # a full build supersedes the API tier's partial one of the same version
    if [[ -d "$CACHE/bin/kube-tier-$v" ]]; then rm -rf "$CACHE/bin/kube-tier-$v"; fi
  done
fi
if wants apiservers; then
  for v in $LAB_K8S_APISERVER_ONLY; do
    go_component kube-apiserver "$v" k8s.io/kubernetes --kubernetes \
      --tags "$K8S_TAGS" "k8s.io/kubernetes/cmd/kube-apiserver=kube-apiserver"
  done
fi
# The API tier (lab/apiserver/up.sh finds its programs with lab_tier_bins, tier.sh): the etcd
# that kubeadm of LAB_K8S_NEWEST deploys, and that version's kube-apiserver, kubeadm and
# kubectl, built alone (with the same flags and GOCACHE as the full build, whose compile work
# it then reuses) only while this machine has no full build of that version.
if wants tier; then
  v=$LAB_K8S_NEWEST
  read -r e _ _ < <(lab_kubeadm_images "$v") || build_die "no kubeadm images known for Kubernetes $v"
  build_etcd "$e"
  if ! lab_k8s_full_has "$v" kube-apiserver kubeadm kubectl; then
    go_component kube-tier "$v" k8s.io/kubernetes --kubernetes --tags "$K8S_TAGS" \
      k8s.io/kubernetes/cmd/kube-apiserver=kube-apiserver \
      k8s.io/kubernetes/cmd/kubeadm=kubeadm k8s.io/kubernetes/cmd/kubectl=kubectl
  fi
  lab_tier_bins >/dev/null || build_die "the API tier's programs are missing after the build"
fi

# ------------------------------------------------------------------ images
if wants images; then
  "$HERE/images.sh"
fi
if wants mirror; then
  "$HERE/mirror.sh"
fi

trap - EXIT
build_say "done in $(build_elapsed $T_START): $(du -sh "$CACHE" 2>/dev/null | cut -f1) in $CACHE"
