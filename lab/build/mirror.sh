#!/usr/bin/env bash
# The lab's artifact mirror, built once per machine into $CACHE/mirror/www from what build.sh
# built, laid out as the upstream download sites kwin's recipes fetch from (kwin's
# `artifacts.mirror` maps each upstream URL to a path under it):
#
#   pkgs.k8s.io/core:/stable:/vMINOR/deb/   kubeadm, kubelet, kubectl VERSION-1.1 and
#                                           kubernetes-cni (flat repository, signed: InRelease,
#                                           Release.gpg, Release.key), one per minor, as
#                                           pkgs.k8s.io has them
#   github.com/containerd/containerd/releases/download/vV/containerd-V-linux-amd64.tar.gz
#   raw.githubusercontent.com/containerd/containerd/vV/containerd.service
#   github.com/opencontainers/runc/releases/download/vR/runc.amd64
#   github.com/containernetworking/plugins/releases/download/vC/cni-plugins-linux-amd64-vC.tgz
#   raw.githubusercontent.com/flannel-io/flannel/vF/Documentation/kube-flannel.yml
#
# The packages follow kubernetes/release cmd/krel/templates/latest (commit f618b2a3):
# kubelet.spec (/usr/bin/kubelet, kubelet.service, /etc/default/kubelet from kubelet.env,
# /var/lib/kubelet, /etc/kubernetes/manifests; Requires iptables, mount, util-linux and, from
# metadata.yaml for >= 1.28, kubernetes-cni >= 1.2.0), kubeadm.spec (/usr/bin/kubeadm and the
# 10-kubeadm.conf drop-in, sysconfig path turned into /etc/default/kubelet as for debbuild;
# no dependency from 1.32, metadata.yaml), kubectl.spec (/usr/bin/kubectl), kubernetes-cni.spec
# (/opt/cni/bin/*, /etc/cni/net.d). The unit files are in files/ beside this script.
# Signed with the lab's fixed key (lab/cluster/lab-repository-key.asc, fingerprint
# 299785BE2B90584DA503D5ED005A7D5F6EF0F348, pinned by the lab example plans).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=versions.sh
source "$HERE/versions.sh"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

B="$CACHE/bin"
OUT="$CACHE/mirror"
KEY="$HERE/../cluster/lab-repository-key.asc"
stamp=$(
  {
    sha256sum "$0" "$HERE/versions.sh" "$KEY" "$HERE"/files/*
    find "$B" -type f ! -name .stamp -print0 | sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-16
)
if [[ ${KWIN_LAB_FORCE:-0} != 1 && -f "$OUT/.stamp" && $(cat "$OUT/.stamp") == "$stamp" ]]; then
  exit 0
fi
T0=$EPOCHSECONDS
build_say "mirror: building into $OUT"
W="$OUT.new"
rm -rf "$W"
mkdir -p "$W/www" "$W/pkg"
export GNUPGHOME="$W/gnupg"
mkdir -m 700 "$GNUPGHOME"
gpg --batch --quiet --import "$KEY" 2>/dev/null || build_die "cannot import $KEY"

control() { # name version description depends [more fields]
  {
    echo "Package: $1"
    echo "Version: $2"
    echo "Architecture: amd64"
    echo "Maintainer: Kubernetes Authors <dev@kubernetes.io>"
    [[ -n $4 ]] && echo "Depends: $4"
    echo "Section: admin"
    echo "Priority: optional"
    echo "Homepage: https://kubernetes.io"
    echo "Description: $3"
  }
}

deb() { # root name version
  local minor=$4
  local d="$W/www/pkgs.k8s.io/core:/stable:/v$minor/deb"
  mkdir -p "$d"
  dpkg-deb --root-owner-group -Zgzip -z1 --build "$1" "$d/${2}_${3}_amd64.deb" >/dev/null ||
    build_die "dpkg-deb $2 $3 failed"
}

cni_pkgver="$LAB_CNI_PLUGINS-1.1"
build_version() { # VERSION
  local v=$1 minor=${1%.*} pv=$1-1.1 p="$W/pkg/$1" kb="$B/kubernetes-$1"
  [[ -x $kb/kubelet ]] || build_die "kubernetes $v is not built"
  mkdir -p "$p/kubelet/DEBIAN" "$p/kubelet/usr/bin" "$p/kubelet/usr/lib/systemd/system" \
    "$p/kubelet/etc/default" "$p/kubelet/var/lib/kubelet" "$p/kubelet/etc/kubernetes/manifests"
  control kubelet "$pv" "Node agent for Kubernetes clusters" \
    "iptables (>= 1.4.21), kubernetes-cni (>= 1.2.0), mount, util-linux" >"$p/kubelet/DEBIAN/control"
  echo /etc/default/kubelet >"$p/kubelet/DEBIAN/conffiles"
  install -m 0755 "$kb/kubelet" "$p/kubelet/usr/bin/kubelet"
  install -m 0644 "$HERE/files/kubelet.service" "$p/kubelet/usr/lib/systemd/system/kubelet.service"
  install -m 0644 "$HERE/files/kubelet.env" "$p/kubelet/etc/default/kubelet"
  touch "$p/kubelet/var/lib/kubelet/.kubelet-keep" "$p/kubelet/etc/kubernetes/manifests/.kubelet-keep"
  deb "$p/kubelet" kubelet "$pv" "$minor"

  mkdir -p "$p/kubeadm/DEBIAN" "$p/kubeadm/usr/bin" "$p/kubeadm/usr/lib/systemd/system/kubelet.service.d"
  local dep=""
  # metadata.yaml: kubeadm >= 1.30 < 1.32 depends on cri-tools (>= 1.30.0), nothing from 1.32
  [[ ${minor#1.} -lt 32 ]] && build_die "kubeadm $v would need cri-tools: not built for the lab"
  control kubeadm "$pv" "Command-line utility for administering a Kubernetes cluster" "$dep" \
    >"$p/kubeadm/DEBIAN/control"
  install -m 0755 "$kb/kubeadm" "$p/kubeadm/usr/bin/kubeadm"
  install -m 0644 "$HERE/files/10-kubeadm.conf" "$p/kubeadm/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"
  deb "$p/kubeadm" kubeadm "$pv" "$minor"

  mkdir -p "$p/kubectl/DEBIAN" "$p/kubectl/usr/bin"
  control kubectl "$pv" "Command-line utility for interacting with a Kubernetes cluster" "" \
    >"$p/kubectl/DEBIAN/control"
  install -m 0755 "$kb/kubectl" "$p/kubectl/usr/bin/kubectl"
  deb "$p/kubectl" kubectl "$pv" "$minor"

  local c="$W/pkg/cni-$minor"
  mkdir -p "$c/DEBIAN" "$c/opt/cni/bin" "$c/etc/cni/net.d"
  control kubernetes-cni "$cni_pkgver" "Binaries required to provision kubernetes container networking" "" \
    >"$c/DEBIAN/control"
  cp -a "$B/cni-plugins-$LAB_CNI_PLUGINS/." "$c/opt/cni/bin/"
  rm -f "$c/opt/cni/bin/.stamp"
  touch "$c/etc/cni/net.d/.kubernetes-cni-keep"
  deb "$c" kubernetes-cni "$cni_pkgver" "$minor"
}

repo() { # dir: flat repository, signed
  local d=$1
  (cd "$d" && dpkg-scanpackages --multiversion . /dev/null 2>/dev/null >Packages) ||
    build_die "dpkg-scanpackages failed in $d"
  gzip -9kf "$d/Packages"
  {
    echo "Origin: kwin-lab"
    echo "Label: kwin-lab"
    echo "Date: $(LC_ALL=C date -Ru)"
    echo "Architectures: amd64"
    echo "SHA256:"
    for f in Packages Packages.gz; do
      printf ' %s %s %s\n' "$(sha256sum "$d/$f" | cut -d' ' -f1)" "$(stat -c %s "$d/$f")" "$f"
    done
  } >"$d/Release"
  gpg --batch --yes --quiet --clearsign -o "$d/InRelease" "$d/Release"
  gpg --batch --yes --quiet -abs -o "$d/Release.gpg" "$d/Release"
  gpg --batch --yes --armor --export >"$d/Release.key"
}

pids=()
for v in $LAB_K8S_SERVED; do
  build_version "$v" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || build_die "building the packages failed"; done
for d in "$W"/www/pkgs.k8s.io/core:/stable:/v*/deb; do repo "$d"; done

# containerd release tarballs, as containerd's release script lays them out (bin/), and the
# unit file of that tag (containerd.service at the repository's root).
for v in $LAB_CONTAINERD; do
  t="$W/pkg/containerd-$v"
  mkdir -p "$t/bin"
  for f in containerd ctr containerd-shim-runc-v2; do install -m 0755 "$B/containerd-$v/$f" "$t/bin/$f"; done
  rel="$W/www/github.com/containerd/containerd/releases/download/v$v"
  mkdir -p "$rel"
  tar -C "$t" --owner=0 --group=0 --numeric-owner --mtime=@0 --sort=name -cf - bin | gzip -n -1 >"$rel/containerd-$v-linux-amd64.tar.gz"
  case $v in 1.*) mod=github.com/containerd/containerd ;; *) mod=github.com/containerd/containerd/v2 ;; esac
  src=$(go mod download -json "$mod@v$v" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [[ -f $src/containerd.service ]] || build_die "no containerd.service in $mod@v$v"
  unit="$W/www/raw.githubusercontent.com/containerd/containerd/v$v"
  mkdir -p "$unit"
  cp "$src/containerd.service" "$unit/containerd.service"
done
for v in $LAB_RUNC; do
  d="$W/www/github.com/opencontainers/runc/releases/download/v$v"
  mkdir -p "$d"
  install -m 0755 "$B/runc-$v/runc" "$d/runc.amd64"
done
v=$LAB_CNI_PLUGINS
d="$W/www/github.com/containernetworking/plugins/releases/download/v$v"
mkdir -p "$d"
tar -C "$B/cni-plugins-$v" --owner=0 --group=0 --numeric-owner --mtime=@0 --sort=name --exclude=.stamp -cf - . |
  gzip -n -1 >"$d/cni-plugins-linux-amd64-v$v.tgz"
v=$LAB_FLANNEL
d="$W/www/raw.githubusercontent.com/flannel-io/flannel/v$v/Documentation"
mkdir -p "$d"
cp "$GOMODCACHE/github.com/flannel-io/flannel@v$v/Documentation/kube-flannel.yml" "$d/kube-flannel.yml"

gpg --batch --yes --export >"$W/keyring.gpg"
gpgconf --kill gpg-agent 2>/dev/null || true
rm -rf "$W/pkg" "$W/gnupg"
echo "$stamp" >"$W/.stamp"
rm -rf "$OUT"
mv "$W" "$OUT"
build_say "mirror: done in $(build_elapsed "$T0") ($(du -sh "$OUT" | cut -f1))"
