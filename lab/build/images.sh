#!/usr/bin/env bash
# The lab's container images, from the programs build.sh built, pushed into the registry
# storage the lab serves ($CACHE/registry, distribution's filesystem driver): every image a
# lab cluster pulls, under the name upstream publishes it (without the registry host, which
# containerd's mirror configuration maps to the lab registry).
#
#   lab/build/images.sh            # called by build.sh; a no-op when nothing changed
#
# Each image follows its upstream Dockerfile's contract (cited below): where the program sits,
# its entrypoint and user. Base images are not pulled (no registry is reachable): an image is
# its program (static) on an empty base, plus, where the upstream image has them, the
# programs it runs (iptables/nft, cp) with their shared libraries, taken from this machine's
# Debian packages.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=versions.sh
source "$HERE/versions.sh"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

B="$CACHE/bin"
CRANE="$B/crane-$LAB_CRANE/crane"
REGISTRY_BIN="$B/registry-$LAB_REGISTRY/registry"
[[ -x $CRANE && -x $REGISTRY_BIN ]] || build_die "build crane and registry first (build.sh crane registry)"
STORE="$CACHE/registry"
WORK="$CACHE/images.work"
PORT="${KWIN_LAB_IMAGES_PORT:-5099}"
REG="127.0.0.1:$PORT"

# The stamp: every input binary's hash, this script and the versions.
stamp=$(
  {
    sha256sum "$0" "$HERE/versions.sh"
    find "$B" -type f ! -name .stamp -print0 | sort -z | xargs -0 sha256sum
    command -v iptables nft busybox | xargs -r readlink -f | xargs -r sha256sum
  } | sha256sum | cut -c1-16
)
if [[ ${KWIN_LAB_FORCE:-0} != 1 && -f "$STORE/.stamp" && $(cat "$STORE/.stamp") == "$stamp" ]]; then
  exit 0
fi
T0=$EPOCHSECONDS
build_say "images: building into $STORE"

rm -rf "$STORE.new" "$WORK"
mkdir -p "$STORE.new" "$WORK"
cat >"$WORK/registry.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $STORE.new
http:
  addr: $REG
EOF
"$REGISTRY_BIN" serve "$WORK/registry.yml" >>"$BUILD_LOG" 2>&1 &
REGPID=$!
trap 'kill $REGPID 2>/dev/null || true; build_failed $?' EXIT
for ((i = 0; i < 100; i++)); do
  curl -fsS "http://$REG/v2/" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "http://$REG/v2/" >/dev/null || build_die "the image registry did not start"

# rootfs_add ROOT FILE [DEST]: a program and the shared libraries it loads (ldd), at the same
# paths (DEST for the program if given).
rootfs_add() {
  local root=$1 f=$2 dest=${3:-$2} lib
  mkdir -p "$root/$(dirname "$dest")"
  cp -L "$f" "$root/$dest"
  while read -r lib; do
    [[ -n $lib && -e $lib ]] || continue
    mkdir -p "$root/$(dirname "$lib")"
    cp -Ln "$lib" "$root/$lib"
  done < <(ldd "$f" 2>/dev/null | awk '/=>/ { print $3 } /^\t\// { print $1 }')
}

# iptables (nft and legacy backends, as the upstream images carry both) and nft.
rootfs_netfilter() {
  local root=$1 x
  rootfs_add "$root" "$(readlink -f /usr/sbin/xtables-nft-multi)" /usr/sbin/xtables-nft-multi
  rootfs_add "$root" "$(readlink -f /usr/sbin/xtables-legacy-multi)" /usr/sbin/xtables-legacy-multi
  for x in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
    ln -sf xtables-nft-multi "$root/usr/sbin/$x"
    ln -sf xtables-nft-multi "$root/usr/sbin/${x/tables/tables-nft}"
    ln -sf xtables-legacy-multi "$root/usr/sbin/${x/tables/tables-legacy}"
  done
  rootfs_add "$root" /usr/sbin/nft
  # libxtables loads its extensions at run time
  local xt
  xt=$(dirname "$(ldd /usr/sbin/xtables-nft-multi | awk '/libxtables/ { print $3 }')")/xtables
  # where libxtables looks (its XTABLES_LIBDIR, /usr/lib/<triplet>/xtables): the physical
  # path, since the image has no merged-/usr link from /lib
  xt=$(readlink -f "$xt")
  if [[ -d $xt ]]; then
    mkdir -p "$root/$xt"
    cp -a "$xt/." "$root/$xt/"
    for lib in "$xt"/*.so; do
      ldd "$lib" 2>/dev/null | awk '/=>/ { print $3 }' | while read -r l; do
        [[ -e $l ]] && mkdir -p "$root/$(dirname "$l")" && cp -Ln "$l" "$root/$l"
      done
    done
  fi
  mkdir -p "$root/etc" "$root/run" "$root/var/run" "$root/tmp"
  chmod 1777 "$root/tmp"
}

# busybox (static) with the applets the upstream images' commands use.
rootfs_busybox() {
  local root=$1 a
  mkdir -p "$root/bin"
  cp -L "$(command -v busybox)" "$root/bin/busybox"
  ldd "$root/bin/busybox" >/dev/null 2>&1 && build_die "busybox is not static (install busybox-static)"
  for a in sh cp cat ls mkdir rm mv ln echo sleep test env nslookup wget hostname; do ln -sf busybox "$root/bin/$a"; done
}

# push NAME ROOT ENTRYPOINT [USER] [CMD]: ROOT as one layer of an image NAME (path:tag in the
# lab registry), linux/amd64, PATH set as the upstream base images set it.
push() {
  local name=$1 root=$2 entry=$3 user=${4:-} cmd=${5:-}
  local tarf="$WORK/layer-${name//[\/:]/_}.tar"
  # file capabilities travel as the security.capability xattr (a PAX record containerd
  # applies when it unpacks the layer)
  tar --create --file "$tarf" --directory "$root" --numeric-owner --owner=0 --group=0 \
    --mtime=@0 --sort=name --xattrs --xattrs-include=security.capability .
  "$CRANE" append --insecure -f "$tarf" -t "$REG/$name" --platform linux/amd64 >>"$BUILD_LOG" 2>&1 ||
    build_die "crane append $name failed"
  local args=(mutate --insecure "$REG/$name" --set-platform linux/amd64
    --env "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    --entrypoint "$entry")
  [[ -n $user ]] && args+=(--user "$user")
  [[ -n $cmd ]] && args+=(--cmd "$cmd")
  "$CRANE" "${args[@]}" >>"$BUILD_LOG" 2>&1 || build_die "crane mutate $name failed"
  build_say "images: $name"
}

newroot() {
  local r="$WORK/root-$1"
  rm -rf "$r"
  mkdir -p "$r"
  printf '%s' "$r"
}

# pause: kubernetes build/pause/Dockerfile — /pause, USER 65535:65535, ENTRYPOINT ["/pause"]
for v in $LAB_PAUSE; do
  r=$(newroot pause)
  cp "$B/pause-$v/pause" "$r/pause"
  push "pause:$v" "$r" /pause 65535:65535
done

# Control plane and kube-proxy: kubernetes build/server-image/Dockerfile — the binary at
# /usr/local/bin/NAME, kube-log-runner as /go-runner, ENTRYPOINT ["/go-runner"]; kube-proxy's
# base image (distroless-iptables) carries iptables and nft.
for v in $LAB_K8S_SERVED; do
  kb="$B/kubernetes-$v"
  for c in kube-apiserver kube-controller-manager kube-scheduler kube-proxy; do
    r=$(newroot "$c")
    mkdir -p "$r/usr/local/bin"
    cp "$kb/$c" "$r/usr/local/bin/$c"
    cp "$kb/kube-log-runner" "$r/go-runner"
    [[ $c == kube-proxy ]] && rootfs_netfilter "$r"
    push "$c:v$v" "$r" /go-runner
  done
done

# etcd: kubernetes cluster/images/etcd — /usr/local/bin/etcd; kubeadm's manifest runs `etcd`.
for v in $LAB_ETCD; do
  r=$(newroot etcd)
  mkdir -p "$r/usr/local/bin" "$r/var/lib/etcd" "$r/tmp"
  cp "$B/etcd-$v/etcd" "$r/usr/local/bin/etcd"
  push "etcd:$v-0" "$r" /usr/local/bin/etcd
done

# CoreDNS: coredns Dockerfile — /coredns with the file capability cap_net_bind_service
# (`setcap cap_net_bind_service=+ep /coredns`: as nonroot it binds port 53 where the runtime
# does not open the privileged ports to unprivileged users, which containerd 2.x does and 1.7
# does not: enable_unprivileged_ports), USER nonroot (65532), ENTRYPOINT ["/coredns"]
for v in $LAB_COREDNS; do
  r=$(newroot coredns)
  cp "$B/coredns-$v/coredns" "$r/coredns"
  setcap cap_net_bind_service=+ep "$r/coredns" || build_die "setcap on coredns failed"
  push "coredns/coredns:v$v" "$r" /coredns 65532:65532
done

# flannel: flannel images/Dockerfile — /opt/bin/flanneld and /opt/bin/install-conf, iptables
# and nftables, ENTRYPOINT ["/opt/bin/flanneld"]
v=$LAB_FLANNEL
r=$(newroot flannel)
mkdir -p "$r/opt/bin"
# flanneld is built with cgo (its UDP backend): with the C library it links
rootfs_add "$r" "$B/flannel-$v/flanneld" /opt/bin/flanneld
cp "$B/flannel-$v/install-conf" "$r/opt/bin/"
rootfs_netfilter "$r"
rootfs_busybox "$r"
push "flannel-io/flannel:v$v" "$r" /opt/bin/flanneld

# The flannel CNI plugin under the name and tag the flannel manifest asks for (versions.sh):
# flannel-io/cni-plugin's image has /flannel and the `cp` its init container runs.
manifest="$GOMODCACHE/github.com/flannel-io/flannel@v$LAB_FLANNEL/Documentation/kube-flannel.yml"
[[ -f $manifest ]] || build_die "no $manifest"
cni_ref=$(sed -n 's|^ *image: ghcr.io/\(flannel-io/flannel-cni-plugin:.*\)$|\1|p' "$manifest" | head -1)
[[ -n $cni_ref ]] || build_die "kube-flannel.yml names no flannel-cni-plugin image"
r=$(newroot flannel-cni)
cp "$B/flannel-cni-$LAB_FLANNEL_CNI_SOURCE/flannel" "$r/flannel"
rootfs_busybox "$r"
push "$cni_ref" "$r" /bin/sh

# agnhost: kubernetes test/images/agnhost/Dockerfile — /agnhost, ENTRYPOINT ["/agnhost"],
# CMD ["pause"], and from its alpine base the tools e2e tests exec in it: curl, nslookup, sh
# (here Debian's curl with its libraries and busybox's applets); its tag is that directory's
# VERSION file, the one test/utils/image/manifest.go names.
kv=$LAB_K8S_NEWEST
ksrc=$(go mod download -json "k8s.io/kubernetes@v$kv" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
agn=$(cat "$ksrc/test/images/agnhost/VERSION")
r=$(newroot agnhost)
cp "$B/kubernetes-$kv/agnhost" "$r/agnhost"
mkdir -p "$r/uploads" "$r/etc"
rootfs_busybox "$r"
rootfs_add "$r" "$(command -v curl)" /usr/bin/curl
push "e2e-test-images/agnhost:$agn" "$r" /agnhost "" pause

kill $REGPID 2>/dev/null || true
wait $REGPID 2>/dev/null || true
trap - EXIT
echo "$stamp" >"$STORE.new/.stamp"
rm -rf "$STORE" "$WORK"
mv "$STORE.new" "$STORE"
build_say "images: done in $(build_elapsed "$T0") ($(du -sh "$STORE" | cut -f1))"
