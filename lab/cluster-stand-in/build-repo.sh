#!/usr/bin/env bash
# Build the lab cluster's signed apt repositories (see README.md next to this file).
#
#   lab/cluster-stand-in/build-repo.sh OUT_DIR TIER_DIR
#
# OUT_DIR/www/ is laid out like an artifact mirror (kwin's `artifacts.mirror`):
#   pkgs.k8s.io/core:/stable:/vMINOR/deb/   kubeadm, kubelet, kubectl VERSION-1.1 (flat repo,
#                                           InRelease + Release.gpg + Release.key)
#   debian/                                 containerd and runc: Debian 12's real packages
#                                           (flat repo, same key)
# The key is the lab's fixed ed25519 signing key (lab-repository-key.asc next to this file,
# fingerprint 299785BE2B90584DA503D5ED005A7D5F6EF0F348, pinned by examples/lab-cluster*.toml),
# imported into OUT_DIR/gnupg.
#
# Packages:
#   kubeadm  bin/kubeadm-stand-in + the API tier's CA, SA and front-proxy keys and an admin
#            client certificate (TIER_DIR/pki, TIER_DIR/admin.conf); the real kubeadm 1.20 of
#            the tier is named for `token` commands
#   kubelet  bin/kubelet-stand-in, kubelet.service and kubeadm's 10-kubeadm.conf drop-in
#   kubectl  the machine's real kubectl binary of the same minor version
#            (/usr/lib/google-cloud-sdk/bin/kubectl.1.MINOR), else /usr/bin/kubectl
#
# Environment: KWIN_LAB_K8S_VERSION (default 1.31.4), KWIN_APISERVER_CACHE, KWIN_LAB_DEB_CACHE
# (default /var/cache/kwin-lab/debs: where `apt-get download` keeps containerd and runc).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[[ $# -eq 2 ]] || { echo "usage: $0 OUT_DIR TIER_DIR" >&2; exit 2; }
OUT="$(mkdir -p "$1" && cd "$1" && pwd)"
TIER="$(cd "$2" && pwd)"
VERSION="${KWIN_LAB_K8S_VERSION:-1.31.4}"
MINOR="${VERSION%.*}"
PKGVER="$VERSION-1.1"
CACHE="${KWIN_APISERVER_CACHE:-/var/cache/kwin-lab/apiserver}"
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
[[ -x "$CACHE/bin/kubeadm" ]] || die "$CACHE/bin/kubeadm missing (lab/apiserver/build.sh)"

rm -rf "$OUT/www" "$OUT/pkg" "$OUT/gnupg"
mkdir -p "$OUT/www" "$OUT/pkg"
export GNUPGHOME="$OUT/gnupg"
mkdir -m 700 "$GNUPGHOME"
gpg --batch --quiet --import "$HERE/lab-repository-key.asc" 2>/dev/null ||
  die "cannot import $HERE/lab-repository-key.asc"

control() { # name description depends
  cat <<EOF
Package: $1
Version: $PKGVER
Architecture: amd64
Maintainer: kwin lab <lab@kwin.invalid>
Depends: $3
Section: admin
Priority: optional
Description: $2
EOF
}

# ---------------------------------------------------------------------------- kubeadm
P="$OUT/pkg/kubeadm"
mkdir -p "$P/DEBIAN" "$P/usr/bin" "$P/usr/share/kubeadm-stand-in"
control kubeadm "kubeadm stand-in for kwin's lab hosts (not Kubernetes' kubeadm)" \
  "python3, python3-yaml, openssl, kubelet (= $PKGVER), kubectl" >"$P/DEBIAN/control"
install -m 0755 "$HERE/bin/kubeadm-stand-in" "$P/usr/bin/kubeadm"
S="$P/usr/share/kubeadm-stand-in"
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
cat >"$S/stand-in.json" <<EOF
{"version": "v$VERSION", "real_kubeadm": "$CACHE/bin/kubeadm"}
EOF

# ---------------------------------------------------------------------------- kubelet
P="$OUT/pkg/kubelet"
mkdir -p "$P/DEBIAN" "$P/usr/bin" "$P/usr/share/kubelet-stand-in" \
  "$P/usr/lib/systemd/system/kubelet.service.d"
control kubelet "kubelet stand-in for kwin's lab hosts (registers a Node once, runs no pod)" \
  "python3, python3-yaml, kubectl" >"$P/DEBIAN/control"
install -m 0755 "$HERE/bin/kubelet-stand-in" "$P/usr/bin/kubelet"
echo "v$VERSION" >"$P/usr/share/kubelet-stand-in/version"
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

# ---------------------------------------------------------------------------- kubectl
P="$OUT/pkg/kubectl"
mkdir -p "$P/DEBIAN" "$P/usr/bin"
REAL_KUBECTL="/usr/lib/google-cloud-sdk/bin/kubectl.$MINOR"
[[ -x "$REAL_KUBECTL" ]] || REAL_KUBECTL="$(command -v kubectl)" || die "no kubectl on this machine"
control kubectl "the machine's real kubectl ($REAL_KUBECTL), repackaged for kwin's lab hosts" \
  "libc6" >"$P/DEBIAN/control"
install -m 0755 "$REAL_KUBECTL" "$P/usr/bin/kubectl"

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

K8S="$OUT/www/pkgs.k8s.io/core:/stable:/v$MINOR/deb"
mkdir -p "$K8S"
for p in kubeadm kubelet kubectl; do
  dpkg-deb --root-owner-group -Zgzip -z1 --build "$OUT/pkg/$p" "$K8S/${p}_${PKGVER}_amd64.deb" \
    >/dev/null || die "dpkg-deb $p failed"
done
repo "$K8S"

# --------------------------------------------------------------------- containerd, runc
mkdir -p "$DEBS"
if ! ls "$DEBS"/containerd_*.deb "$DEBS"/runc_*.deb >/dev/null 2>&1; then
  (cd "$DEBS" && retry apt-get download -q containerd runc >/dev/null 2>&1) ||
    die "apt-get download containerd runc failed"
fi
mkdir -p "$OUT/www/debian"
cp "$DEBS"/containerd_*.deb "$DEBS"/runc_*.deb "$OUT/www/debian/"
repo "$OUT/www/debian"
gpg --batch --yes --export >"$OUT/keyring.gpg"
gpgconf --kill gpg-agent 2>/dev/null || true # signing is done; no agent left behind
rm -rf "$OUT/pkg"
echo "repositories in $OUT/www (kubernetes $PKGVER, $(basename -a "$OUT"/www/debian/*.deb | tr "\n" " "))"
