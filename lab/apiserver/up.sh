#!/usr/bin/env bash
# Start a real Kubernetes API tier on loopback: etcd + kube-apiserver of the newest Kubernetes
# the lab builds (LAB_K8S_NEWEST in lab/build/versions.sh) and the etcd its kubeadm deploys.
# No scheduler, controller-manager or kubelet: objects are stored and served, no pod ever runs.
#
#   lab/apiserver/up.sh STATE_DIR
#
# Writes STATE_DIR/admin.conf (kubeconfig, embedded CA + admin client cert), STATE_DIR/bin
# (links to the tier's kube-apiserver, kubeadm, kubectl and etcd) and STATE_DIR/env
# (KUBECONFIG, APISERVER_URL, APISERVER_PORT, ETCD_URL, ETCD_PID, APISERVER_PID, STATE_DIR,
# KUBE_APISERVER_BIN, KUBEADM_BIN, KUBECTL_BIN, ETCD_BIN, K8S_VERSION). Stop with
# lab/apiserver/down.sh STATE_DIR.
#
# Environment:
#   KWIN_LAB_CACHE              the lab build's cache (lab/build; default /var/cache/kwin-lab)
#   KWIN_APISERVER_PORT         secure port (default: a random free port)
#   KWIN_ETCD_CLIENT_PORT       etcd client port (default: random free)
#   KWIN_ETCD_PEER_PORT         etcd peer port (default: random free)
#   KWIN_ETCD_DATA_DIR          etcd data dir (default STATE_DIR/etcd; a tmpfs
#                               path such as /dev/shm/... avoids fsync cost)
#   KWIN_APISERVER_ADDRESS      address kube-apiserver binds and clients use
#                               (default 127.0.0.1; must be a local address,
#                               e.g. one other network namespaces reach);
#                               it is a SAN of the serving certificate and the
#                               server of admin.conf
#   KWIN_APISERVER_EXTRA_ARGS   extra kube-apiserver flags (word-split)
#   KWIN_APISERVER_TIMEOUT      seconds to wait for /readyz (default 60)
#   KWIN_APISERVER_SKIP_BUILD   1 = do not call build.sh (binaries must exist)
#   KWIN_APISERVER_KUBEADM_PHASES  1 (default) = also run kubeadm's
#                               upload-config and bootstrap-token phases, so
#                               the tier looks like a kubeadm control plane
#                               (kubeadm-config, cluster-info + bootstrap RBAC,
#                               a join token);
#                               0 = bare apiserver
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
# shellcheck source-path=SCRIPTDIR source=../build/versions.sh
source "$HERE/../build/versions.sh"
# shellcheck source-path=SCRIPTDIR source=../build/tier.sh
source "$HERE/../build/tier.sh"

if [[ $# -ne 1 || -z "$1" ]]; then
  echo "usage: $0 STATE_DIR" >&2
  exit 2
fi
mkdir -p "$1"
STATE="$(cd "$1" && pwd)"
if [[ -f "$STATE/env" ]]; then
  # shellcheck disable=SC1091
  if (source "$STATE/env" && lab_pid_alive "${APISERVER_PID:-}"); then
    echo "up.sh: $STATE already has a running tier (run down.sh first)" >&2
    exit 1
  fi
fi

LAB_LOG="$STATE/up.log"
: >"$LAB_LOG"
T0=$(date +%s%N)
lab_log "up.sh $STATE"

if [[ "${KWIN_APISERVER_SKIP_BUILD:-0}" != 1 ]]; then
  "$HERE/build.sh"
fi
TIER_BINS="$(lab_tier_bins)" || {
  echo "up.sh: the API tier's programs (Kubernetes $LAB_K8S_NEWEST, its etcd) are not built (run lab/apiserver/build.sh)" >&2
  exit 1
}
# One directory with the four programs (links), first on PATH for whoever uses this tier.
BIN="$STATE/bin"
rm -rf "$BIN"
mkdir -p "$BIN"
while read -r p; do ln -s "$p" "$BIN/$(basename "$p")"; done <<<"$TIER_BINS"
ETCD_BIN="$BIN/etcd"
KUBECTL="$BIN/kubectl"

ETCD_PID=""
APISERVER_PID=""
ok=0
cleanup() {
  if [[ $ok -ne 1 ]]; then
    [[ -n "$APISERVER_PID" ]] && lab_stop_pid "$APISERVER_PID" 5
    [[ -n "$ETCD_PID" ]] && lab_stop_pid "$ETCD_PID" 5
    rm -f "$STATE/env" "$STATE/kube-apiserver.pid" "$STATE/etcd.pid"
  fi
}
trap cleanup EXIT

die() {
  echo "up.sh: $*" >&2
  local f
  for f in "$STATE/etcd.log" "$STATE/kube-apiserver.log" "$LAB_LOG"; do
    if [[ -s "$f" ]]; then
      echo "--- last lines of $f" >&2
      tail -n 12 "$f" >&2
    fi
  done
  exit 1
}

read -r P1 P2 P3 < <(lab_free_ports 3) || die "no free loopback ports"
API_PORT="${KWIN_APISERVER_PORT:-$P1}"
ETCD_CLIENT_PORT="${KWIN_ETCD_CLIENT_PORT:-$P2}"
ETCD_PEER_PORT="${KWIN_ETCD_PEER_PORT:-$P3}"
ETCD_DATA="${KWIN_ETCD_DATA_DIR:-$STATE/etcd}"
ETCD_URL="http://127.0.0.1:$ETCD_CLIENT_PORT"
API_ADDRESS="${KWIN_APISERVER_ADDRESS:-127.0.0.1}"
[[ "$API_ADDRESS" =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "KWIN_APISERVER_ADDRESS=$API_ADDRESS is not an IPv4 address"
if [[ "$API_ADDRESS" != 127.0.0.1 ]]; then
  [[ "$(ip -o -4 addr show)" == *" inet $API_ADDRESS/"* ]] || die "$API_ADDRESS is not an address of this machine"
fi
lab_port_busy "$API_PORT" "$API_ADDRESS" && die "port $API_ADDRESS:$API_PORT is in use"
for p in "$ETCD_CLIENT_PORT" "$ETCD_PEER_PORT"; do
  lab_port_busy "$p" && die "port 127.0.0.1:$p is in use"
done
APISERVER_URL="https://$API_ADDRESS:$API_PORT"
PKI="$STATE/pki"

# ------------------------------------------------------------------ etcd
# The etcd kubeadm of this Kubernetes version deploys (lab_kubeadm_images in versions.sh, from
# kubeadm's constants.go SupportedEtcdVersion: 3.7.0 for 1.37), the pairing upstream releases
# and tests kube-apiserver with. Its flags here are unchanged since etcd 3.4 (etcd --help).
rm -rf "$ETCD_DATA"
mkdir -p "$ETCD_DATA"
echo "$ETCD_DATA" >"$STATE/etcd.datadir"
chmod 700 "$ETCD_DATA"
setsid "$ETCD_BIN" \
  --name kwin-lab \
  --data-dir "$ETCD_DATA" \
  --listen-client-urls "$ETCD_URL" \
  --advertise-client-urls "$ETCD_URL" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "kwin-lab=http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster-state new \
  --initial-cluster-token "kwin-lab-$API_PORT" \
  --snapshot-count 10000 \
  --logger zap --log-outputs stderr \
  </dev/null >"$STATE/etcd.log" 2>&1 &
ETCD_PID=$!
echo "$ETCD_PID" >"$STATE/etcd.pid"

# --------------------------------------------------------- certificates
# kubeadm writes the CA, serving cert (SANs: 127.0.0.1, localhost, 10.96.0.1,
# kubernetes.default...), front-proxy certs, SA keys and admin.conf.
# The advertise address is the service VIP 10.96.0.1: it only ends up as a SAN, nothing binds
# to it, and kubeadm does not probe the host's default route for one. Clients use
# controlPlaneEndpoint ADDRESS:PORT (127.0.0.1 unless KWIN_APISERVER_ADDRESS says otherwise).
# The config is kubeadm.k8s.io/v1beta4, the one kubeadm of this version writes
# (`kubeadm config print init-defaults`); v1beta2 left kubeadm in 1.27 (kubernetes/kubernetes
# #114540) and v1beta3 is deprecated since v1beta4 came in 1.31.
rm -rf "$PKI" "$STATE/admin.conf"
cat >"$STATE/kubeadm.yaml" <<EOF
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: 10.96.0.1
  bindPort: $API_PORT
nodeRegistration:
  name: kwin-lab-apiserver
  criSocket: unix:///run/containerd/containerd.sock
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v$LAB_K8S_NEWEST
clusterName: kwin-lab
certificatesDir: $PKI
controlPlaneEndpoint: $API_ADDRESS:$API_PORT
networking:
  serviceSubnet: 10.96.0.0/12
  podSubnet: 10.244.0.0/16
  dnsDomain: cluster.local
apiServer:
  certSANs: ["127.0.0.1", "localhost", "$API_ADDRESS"]
etcd:
  external:
    endpoints: ["$ETCD_URL"]
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
EOF
# With external etcd, "certs all" makes: ca, apiserver, apiserver-kubelet-client,
# front-proxy-ca, front-proxy-client, sa.
"$BIN/kubeadm" init phase certs all --config "$STATE/kubeadm.yaml" >>"$LAB_LOG" 2>&1 ||
  die "kubeadm init phase certs all failed"
# Since kubeadm 1.29 admin.conf's user is in the group kubeadm:cluster-admins, which only a
# ClusterRoleBinding to cluster-admin makes an admin; super-admin.conf (system:masters) is what
# kubeadm init creates that binding with (kubernetes/kubernetes#121305; kubeadm's
# phases/kubeconfig EnsureAdminClusterRoleBinding). Done below, once the API server is up.
for kc in admin super-admin; do
  "$BIN/kubeadm" init phase kubeconfig "$kc" --config "$STATE/kubeadm.yaml" \
    --kubeconfig-dir "$STATE" >>"$LAB_LOG" 2>&1 || die "kubeadm init phase kubeconfig $kc failed"
  chmod 600 "$STATE/$kc.conf"
done

lab_log "certificates written"

# Wait for etcd (it starts in well under a second).
for ((i = 0; i < 100; i++)); do
  lab_pid_alive "$ETCD_PID" || die "etcd exited"
  if (exec 3<>"/dev/tcp/127.0.0.1/$ETCD_CLIENT_PORT") 2>/dev/null; then break; fi
  sleep 0.1
done

# ------------------------------------------------------------ apiserver
# The flags of kubeadm's static pod (cmd/kubeadm/app/phases/controlplane/manifests.go) where
# they apply. Not --insecure-port: the insecure port stopped serving in 1.20 and the flag was
# removed in 1.24 (kubernetes/kubernetes#95856, CHANGELOG-1.24).
# shellcheck disable=SC2206
EXTRA=(${KWIN_APISERVER_EXTRA_ARGS:-})
setsid "$BIN/kube-apiserver" \
  --advertise-address="$API_ADDRESS" \
  --endpoint-reconciler-type=none \
  --bind-address="$API_ADDRESS" \
  --secure-port="$API_PORT" \
  --etcd-servers="$ETCD_URL" \
  --service-cluster-ip-range=10.96.0.0/12 \
  --service-node-port-range=30000-32767 \
  --allow-privileged=true \
  --authorization-mode=Node,RBAC \
  --enable-admission-plugins=NodeRestriction \
  --disable-admission-plugins=ServiceAccount \
  --enable-bootstrap-token-auth=true \
  --client-ca-file="$PKI/ca.crt" \
  --tls-cert-file="$PKI/apiserver.crt" \
  --tls-private-key-file="$PKI/apiserver.key" \
  --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
  --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
  --kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname \
  --service-account-key-file="$PKI/sa.pub" \
  --service-account-signing-key-file="$PKI/sa.key" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" \
  --proxy-client-cert-file="$PKI/front-proxy-client.crt" \
  --proxy-client-key-file="$PKI/front-proxy-client.key" \
  --requestheader-allowed-names=front-proxy-client \
  --requestheader-extra-headers-prefix=X-Remote-Extra- \
  --requestheader-group-headers=X-Remote-Group \
  --requestheader-username-headers=X-Remote-User \
  --profiling=false \
  --v=1 \
  "${EXTRA[@]}" \
  </dev/null >"$STATE/kube-apiserver.log" 2>&1 &
APISERVER_PID=$!
echo "$APISERVER_PID" >"$STATE/kube-apiserver.pid"

TIMEOUT="${KWIN_APISERVER_TIMEOUT:-60}"
deadline=$(($(date +%s) + TIMEOUT))
ready=0
while [[ $(date +%s) -lt $deadline ]]; do
  lab_pid_alive "$ETCD_PID" || die "etcd exited"
  lab_pid_alive "$APISERVER_PID" || die "kube-apiserver exited"
  if "$KUBECTL" --kubeconfig "$STATE/super-admin.conf" --request-timeout=2s get --raw /readyz \
    >/dev/null 2>&1; then
    ready=1
    break
  fi
  sleep 0.25
done
[[ $ready -eq 1 ]] || die "kube-apiserver not ready after ${TIMEOUT}s"
lab_log "apiserver ready"
"$KUBECTL" --kubeconfig "$STATE/super-admin.conf" create clusterrolebinding kubeadm:cluster-admins \
  --clusterrole=cluster-admin --group=kubeadm:cluster-admins >>"$LAB_LOG" 2>&1 ||
  die "creating the ClusterRoleBinding kubeadm:cluster-admins failed"
# RBAC serves the new binding from its informer a moment later: wait until admin.conf is admin.
while [[ "$("$KUBECTL" --kubeconfig "$STATE/admin.conf" --request-timeout=2s auth can-i '*' '*' 2>/dev/null)" != yes ]]; do
  [[ $(date +%s) -lt $deadline ]] || die "admin.conf is not cluster-admin after ${TIMEOUT}s"
  sleep 0.1
done

if [[ "${KWIN_APISERVER_KUBEADM_PHASES:-1}" == 1 ]]; then
  # (not "upload-config kubelet": it waits for the control-plane Node object)
  for phase in "upload-config kubeadm" bootstrap-token; do
    # shellcheck disable=SC2086
    "$BIN/kubeadm" init phase $phase --config "$STATE/kubeadm.yaml" \
      --kubeconfig "$STATE/admin.conf" >>"$LAB_LOG" 2>&1 || die "kubeadm init phase $phase failed"
  done
fi

T1=$(date +%s%N)
cat >"$STATE/env" <<EOF
STATE_DIR='$STATE'
KUBECONFIG='$STATE/admin.conf'
APISERVER_URL='$APISERVER_URL'
APISERVER_PORT='$API_PORT'
ETCD_URL='$ETCD_URL'
ETCD_DATA_DIR='$ETCD_DATA'
ETCD_PID='$ETCD_PID'
APISERVER_PID='$APISERVER_PID'
KUBE_APISERVER_BIN='$BIN/kube-apiserver'
KUBEADM_BIN='$BIN/kubeadm'
KUBECTL_BIN='$BIN/kubectl'
ETCD_BIN='$BIN/etcd'
K8S_VERSION='$LAB_K8S_NEWEST'
KUBEADM_CONFIG='$STATE/kubeadm.yaml'
STARTUP_MS='$(((T1 - T0) / 1000000))'
export KUBECONFIG APISERVER_URL
EOF
ok=1
echo "apiserver ready $APISERVER_URL kubeconfig=$STATE/admin.conf"
