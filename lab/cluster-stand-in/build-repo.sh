#!/usr/bin/env bash
# Build the lab cluster's signed apt repositories (see README.md next to this file).
#
#   lab/cluster-stand-in/build-repo.sh OUT_DIR TIER_DIR
#
# OUT_DIR/www/ is laid out like an artifact mirror (kwin's `artifacts.mirror`):
#   pkgs.k8s.io/core:/stable:/vMINOR/deb/   kubeadm, kubelet, kubectl VERSION-1.1 of every
#                                           version of that minor (flat repo, InRelease +
#                                           Release.gpg + Release.key): one repository per
#                                           minor, as pkgs.k8s.io has them
#   debian/                                 containerd and runc: Debian 12's real packages
#                                           (flat repo, same key)
#   github.com/containerd/containerd/releases/download/vV/containerd-V-linux-amd64.tar.gz
#                                           for each V of KWIN_LAB_CONTAINERD_VERSIONS, laid
#                                           out as containerd's release (bin/): Debian's real
#                                           ctr and runc v2 shim, and bin/containerd-stand-in as
#                                           bin/containerd answering `--version` with vV
#   raw.githubusercontent.com/containerd/containerd/vV/containerd.service
#                                           containerd's own unit of v1.7.24 (ExecStart=
#                                           /usr/local/bin/containerd), for each V
#   github.com/opencontainers/runc/releases/download/vR/runc.amd64
#                                           Debian's real runc binary, at R =
#                                           KWIN_LAB_RUNC_VERSION (kwin's runc pin, 1.3.3)
# Release downloads have no checksum file here: a plan pins their SHA-256 (the mirror is
# plain HTTP), e.g. from the files under OUT_DIR/www.
# The key is the lab's fixed ed25519 signing key (lab-repository-key.asc next to this file,
# fingerprint 299785BE2B90584DA503D5ED005A7D5F6EF0F348, pinned by examples/lab-cluster*.toml),
# imported into OUT_DIR/gnupg.
#
# Packages, for each version of KWIN_LAB_K8S_VERSIONS:
#   kubeadm  bin/kubeadm-stand-in + the API tier's CA, SA and front-proxy keys and an admin
#            client certificate (TIER_DIR/pki, TIER_DIR/admin.conf); the real kubeadm of
#            the tier (lab/build/tier.sh) is named for `token` commands. No dependency on kubelet or kubectl of a
#            version: pkgs.k8s.io's kubeadm 1.30-1.31 depends only on cri-tools and 1.32+ on
#            nothing (kubernetes/release cmd/krel/templates/latest/metadata.yaml), so kubeadm
#            can be upgraded before the kubelet, as the kubeadm upgrade procedure does
#   kubelet  bin/kubelet-stand-in, kubelet.service and kubeadm's 10-kubeadm.conf drop-in, and
#            the systemctl stand-in's runner for kubelet.service (the kubelet stand-in runs
#            as a process while the unit is active)
#   kubectl  the machine's real kubectl binary of the same minor version
#            (/usr/lib/google-cloud-sdk/bin/kubectl.1.MINOR), else the API tier's kubectl
#
# Environment: KWIN_LAB_K8S_VERSIONS (default "1.31.4 1.31.9 1.32.5 1.33.1"; KWIN_LAB_K8S_VERSION
# alone, if set, builds that one version), KWIN_LAB_CONTAINERD_VERSIONS (default "1.7.24
# 1.7.27"), KWIN_LAB_RUNC_VERSION (default 1.3.3), KWIN_LAB_CACHE (lab/build's), KWIN_LAB_DEB_CACHE
# (default /var/cache/kwin-lab/debs: where `apt-get download` keeps containerd and runc).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[[ $# -eq 2 ]] || { echo "usage: $0 OUT_DIR TIER_DIR" >&2; exit 2; }
OUT="$(mkdir -p "$1" && cd "$1" && pwd)"
TIER="$(cd "$2" && pwd)"
if [[ -n "${KWIN_LAB_K8S_VERSIONS:-}" ]]; then
  read -r -a VERSIONS <<<"$KWIN_LAB_K8S_VERSIONS"
elif [[ -n "${KWIN_LAB_K8S_VERSION:-}" ]]; then
  VERSIONS=("$KWIN_LAB_K8S_VERSION")
else
  VERSIONS=(1.31.4 1.31.9 1.32.5 1.33.1)
fi
# shellcheck source-path=SCRIPTDIR source=../build/versions.sh
source "$HERE/../build/versions.sh"
# shellcheck source-path=SCRIPTDIR source=../build/tier.sh
source "$HERE/../build/tier.sh"
DEBS="${KWIN_LAB_DEB_CACHE:-/var/cache/kwin-lab/debs}"

die() { echo "build-repo.sh: $*" >&2; exit 1; }
retry() {
  local n=0
  until "$@"; do
    n=$((n + 1))
    [[ $n -lt 5 ]] || return 1
    sleep $((n * 2))
  done
}
for c in gpg dpkg-deb dpkg-scanpackages openssl python3; do
  command -v "$c" >/dev/null 2>&1 || die "$c is not installed"
done
[[ -r "$TIER/pki/ca.key" && -r "$TIER/admin.conf" ]] || die "$TIER is not a running API tier"
REAL_KUBEADM="$(lab_tier_bins | sed -n 2p)"
[[ -x "$REAL_KUBEADM" ]] || die "the API tier's kubeadm is not built (lab/apiserver/build.sh)"

rm -rf "$OUT/www" "$OUT/pkg" "$OUT/gnupg"
mkdir -p "$OUT/www" "$OUT/pkg"
export GNUPGHOME="$OUT/gnupg"
mkdir -m 700 "$GNUPGHOME"
gpg --batch --quiet --import "$HERE/lab-repository-key.asc" 2>/dev/null ||
  die "cannot import $HERE/lab-repository-key.asc"

control() { # name version description depends
  cat <<EOF
Package: $1
Version: $2
Architecture: amd64
Maintainer: kwin lab <lab@kwin.invalid>
Depends: $4
Section: admin
Priority: optional
Description: $3
EOF
}

# build_version VERSION: the three packages of one Kubernetes version, into the repository of
# its minor.
build_version() {
  local version=$1 minor=${1%.*} pkgver=$1-1.1 dir="$OUT/pkg/$1" P S real_kubectl
  # -------------------------------------------------------------------------- kubeadm
  P="$dir/kubeadm"
  mkdir -p "$P/DEBIAN" "$P/usr/bin" "$P/usr/share/kubeadm-stand-in"
  control kubeadm "$pkgver" "kubeadm stand-in for kwin's lab hosts (not Kubernetes' kubeadm)" \
    "python3, python3-yaml, openssl, kubectl" >"$P/DEBIAN/control"
  install -m 0755 "$HERE/bin/kubeadm-stand-in" "$P/usr/bin/kubeadm"
  S="$P/usr/share/kubeadm-stand-in"
  cp -a "$OUT/pkg/kubeadm-share/." "$S/"
  cat >"$S/stand-in.json" <<EOF
{"version": "v$version", "real_kubeadm": "$REAL_KUBEADM"}
EOF
  # -------------------------------------------------------------------------- kubelet
  P="$dir/kubelet"
  mkdir -p "$P/DEBIAN" "$P/usr/bin" "$P/usr/share/kubelet-stand-in" \
    "$P/usr/lib/systemd/system/kubelet.service.d" "$P/usr/lib/systemctl-stand-in/run"
  control kubelet "$pkgver" \
    "kubelet stand-in for kwin's lab hosts (reports its Node and pods, runs no container)" \
    "python3, python3-yaml" >"$P/DEBIAN/control"
  install -m 0755 "$HERE/bin/kubelet-stand-in" "$P/usr/bin/kubelet"
  install -m 0755 "$HERE/bin/kubelet-stand-in-runner" \
    "$P/usr/lib/systemctl-stand-in/run/kubelet.service"
  echo "v$version" >"$P/usr/share/kubelet-stand-in/version"
  cat >"$P/usr/lib/systemd/system/kubelet.service" <<'EOF'
[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
EOF
  cat >"$P/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf" <<'EOF'
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
EOF
  # -------------------------------------------------------------------------- kubectl
  P="$dir/kubectl"
  mkdir -p "$P/DEBIAN" "$P/usr/bin"
  real_kubectl="/usr/lib/google-cloud-sdk/bin/kubectl.$minor"
  # else the API tier's own kubectl (lab/build/tier.sh; the version of the tier's API server)
  [[ -x "$real_kubectl" ]] || real_kubectl="$(lab_tier_bins | sed -n 3p)"
  [[ -x "$real_kubectl" ]] || die "no kubectl for $version on this machine"
  control kubectl "$pkgver" \
    "the machine's real kubectl ($real_kubectl), repackaged for kwin's lab hosts" \
    "libc6" >"$P/DEBIAN/control"
  install -m 0755 "$real_kubectl" "$P/usr/bin/kubectl"
  # -------------------------------------------------------------------------- debs
  local k8s="$OUT/www/pkgs.k8s.io/core:/stable:/v$minor/deb" p
  mkdir -p "$k8s"
  for p in kubeadm kubelet kubectl; do
    dpkg-deb --root-owner-group -Zgzip -z1 --build "$dir/$p" "$k8s/${p}_${pkgver}_amd64.deb" \
      >/dev/null || die "dpkg-deb $p $pkgver failed"
  done
}

# What every kubeadm package carries: the API tier's keys and an admin client certificate.
S="$OUT/pkg/kubeadm-share"
mkdir -p "$S"
for f in ca.crt ca.key sa.key sa.pub front-proxy-ca.crt front-proxy-ca.key; do
  install -m 0644 "$TIER/pki/$f" "$S/$f"
done
python3 - "$TIER/admin.conf" "$S" <<'PY'
import base64, sys, yaml
kc = yaml.safe_load(open(sys.argv[1]))
u = kc["users"][0]["user"]
open(sys.argv[2] + "/admin.crt", "wb").write(base64.b64decode(u["client-certificate-data"]))
open(sys.argv[2] + "/admin.key", "wb").write(base64.b64decode(u["client-key-data"]))
PY

repo() { # dir: flat repository, signed
  local d=$1
  (cd "$d" && dpkg-scanpackages --multiversion . /dev/null 2>/dev/null >Packages) ||
    die "dpkg-scanpackages failed in $d"
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

# Versions build in parallel (dpkg-deb compresses each kubectl binary: ~1 s each).
pids=()
for v in "${VERSIONS[@]}"; do
  [[ "$v" =~ ^1\.[0-9]+\.[0-9]+$ ]] || die "version $v is not 1.MINOR.PATCH"
  build_version "$v" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || die "building the packages failed"; done
for d in "$OUT"/www/pkgs.k8s.io/core:/stable:/v*/deb; do repo "$d"; done

# --------------------------------------------------------------------- containerd, runc
mkdir -p "$DEBS"
if ! ls "$DEBS"/containerd_*.deb "$DEBS"/runc_*.deb >/dev/null 2>&1; then
  (cd "$DEBS" && retry apt-get download -q containerd runc >/dev/null 2>&1) ||
    die "apt-get download containerd runc failed"
fi
mkdir -p "$OUT/www/debian"
cp "$DEBS"/containerd_*.deb "$DEBS"/runc_*.deb "$OUT/www/debian/"
repo "$OUT/www/debian"

# containerd releases and runc, as the runtime-containerd recipe fetches them with
# runtime.containerd_source = "release" (its URLs under artifacts.mirror).
read -r -a CONTAINERD_VERSIONS <<<"${KWIN_LAB_CONTAINERD_VERSIONS:-1.7.24 1.7.27}"
RUNC_VERSION="${KWIN_LAB_RUNC_VERSION:-1.3.3}"
X="$OUT/pkg/debs-x"
mkdir -p "$X"
# Only what a release tarball's bin/ needs here (ctr and the runc v2 shim; the daemon is the
# stand-in), and runc.
for d in "$DEBS"/containerd_*.deb; do
  dpkg-deb --fsys-tarfile "$d" | tar -x -C "$X" ./usr/bin/ctr ./usr/bin/containerd-shim-runc-v2 ||
    die "unpacking $d failed"
done
for d in "$DEBS"/runc_*.deb; do
  dpkg-deb --fsys-tarfile "$d" | tar -x -C "$X" ./usr/sbin/runc || die "unpacking $d failed"
done
pack_containerd() { # version
  local v=$1 t="$OUT/pkg/containerd-$1" rel
  mkdir -p "$t/bin"
  install -m 0755 "$X/usr/bin/ctr" "$X/usr/bin/containerd-shim-runc-v2" "$t/bin/"
  sed "s/@VERSION@/$v/" "$HERE/bin/containerd-stand-in" >"$t/bin/containerd"
  chmod 0755 "$t/bin/containerd"
  rel="$OUT/www/github.com/containerd/containerd/releases/download/v$v"
  mkdir -p "$rel"
  tar -C "$t" --owner=0 --group=0 -cf - bin | gzip -1 >"$rel/containerd-$v-linux-amd64.tar.gz"
}
pids=()
for v in "${CONTAINERD_VERSIONS[@]}"; do
  [[ "$v" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "containerd version $v is not X.Y.Z"
  pack_containerd "$v" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || die "packing a containerd release failed"; done
for v in "${CONTAINERD_VERSIONS[@]}"; do
  unit="$OUT/www/raw.githubusercontent.com/containerd/containerd/v$v"
  mkdir -p "$unit"
  # containerd/containerd containerd.service at v1.7.24 (Apache-2.0), without its comments.
  cat >"$unit/containerd.service" <<'UNIT'
[Unit]
Description=containerd container runtime
Documentation=https://containerd.io
After=network.target local-fs.target dbus.service

[Service]
ExecStartPre=-/sbin/modprobe overlay
ExecStart=/usr/local/bin/containerd

Type=notify
Delegate=yes
KillMode=process
Restart=always
RestartSec=5
LimitNPROC=infinity
LimitCORE=infinity
LimitNOFILE=infinity
TasksMax=infinity
OOMScoreAdjust=-999

[Install]
WantedBy=multi-user.target
UNIT
done
runc="$OUT/www/github.com/opencontainers/runc/releases/download/v$RUNC_VERSION"
mkdir -p "$runc"
install -m 0755 "$X/usr/sbin/runc" "$runc/runc.amd64"
gpg --batch --yes --export >"$OUT/keyring.gpg"
gpgconf --kill gpg-agent 2>/dev/null || true # signing is done; no agent left behind
rm -rf "$OUT/pkg"
echo "repositories in $OUT/www (kubernetes ${VERSIONS[*]}, $(basename -a "$OUT"/www/debian/*.deb | tr "\n" " "); containerd releases ${CONTAINERD_VERSIONS[*]}, runc $RUNC_VERSION)"
