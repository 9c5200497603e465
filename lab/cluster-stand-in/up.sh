#!/usr/bin/env bash
# Everything a lab cluster needs around running lab hosts (see README.md next to this file).
#
#   sudo lab/up.sh 3 && sudo lab/cluster-stand-in/up.sh
#
# For the lab KWIN_LAB_ID names (default 0; addresses 10.<213+ID>.0.0/16):
# Refuses on a machine with swap on (lab hosts share its kernel; see below).
#   1. the lab's service address 10.<213+ID>.255.1 on the root side of every host's veth, and
#      a /32 route to it in every host (a host still reaches nothing else);
#   2. the real API tier (lab/apiserver/up.sh) on SERVICE_ADDRESS:6443;
#   3. signed apt repositories (build-repo.sh) served over HTTP on SERVICE_ADDRESS:8080;
#   4. per host: the systemctl stand-in as /usr/local/sbin/systemctl, /run/systemd/system
#      (so programs that ask "is this a systemd host?" get yes), the runner of
#      containerd.service (it records the version a containerd started now would report),
#      apt sources = the lab's
#      Debian repository only (the host has no route to Debian's mirrors), `apt-get update`;
#   5. the status stand-in (status-stand-in.py) in the background, its record of node changes
#      in target/lab[-ID]/cluster/timeline.log.
# Writes target/lab[-ID]/cluster/env. Stop with lab/cluster-stand-in/down.sh (before
# lab/down.sh, or after: it only stops what this script started).
#
# Environment: KWIN_LAB_ID, KWIN_LAB_API_PORT (6443), KWIN_LAB_REPO_PORT (8080),
# KWIN_LAB_K8S_VERSIONS (the package versions, see build-repo.sh), KWIN_LAB_NODE_GRACE (seconds
# a Node's Lease may go unrenewed before the status stand-in marks it Unknown, 40), and
# lab/apiserver's variables.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
ID="${KWIN_LAB_ID:-0}"
[[ "$ID" =~ ^(0|[1-9]|1[0-9])$ ]] || { echo "up.sh: KWIN_LAB_ID must be 0 to 19 (lab/lib.sh)" >&2; exit 2; }
if [[ "$ID" == 0 ]]; then LAB="$ROOT/target/lab"; NS=kwin; VETH=kwv; else
  LAB="$ROOT/target/lab-$ID"; NS="kwin$ID"; VETH="kwv$ID"; fi
ADDR="10.$((213 + ID)).255.1"
API_PORT="${KWIN_LAB_API_PORT:-6443}"
REPO_PORT="${KWIN_LAB_REPO_PORT:-8080}"
OUT="$LAB/cluster"
SSH=(ssh -F "$LAB/ssh_config" -o ConnectTimeout=10)

die() { echo "cluster-stand-in/up.sh: $*" >&2; exit 1; }
[[ $(id -u) == 0 ]] || die "run as root"
# Lab hosts share the machine's kernel: the swap areas in /proc/swaps are the machine's, and
# node-prereqs' swap_off would turn them off for the whole machine. Refuse instead.
if [[ $(awk 'NR > 1' /proc/swaps 2>/dev/null) ]]; then
  die "this machine has swap on (/proc/swaps); lab hosts share its kernel, so the cluster recipes would turn it off for the whole machine: refusing (swapoff -a first if that is fine)"
fi
[[ -r "$LAB/pids" && -r "$LAB/ssh_config" ]] || die "no lab $ID is up (run lab/up.sh N first)"
mapfile -t HOSTS < <(awk '$1 ~ /^h[0-9]+$/ { print $1 }' "$LAB/pids")
[[ ${#HOSTS[@]} -gt 0 ]] || die "$LAB/pids names no hosts"
mkdir -p "$OUT"
T0=$(date +%s%N)

# 1. service address and routes
for h in "${HOSTS[@]}"; do
  dev="$VETH-$h"
  gw=$(ip -o -4 addr show dev "$dev" | awk '$4 ~ /\/30$/ { split($4, a, "/"); print a[1] }')
  [[ -n "$gw" ]] || die "$dev has no /30 address"
  ip addr replace "$ADDR/32" dev "$dev"
  ip netns exec "$NS-$h" ip route replace "$ADDR/32" via "$gw"
done

# 2. the API tier
if [[ -f "$OUT/tier/env" ]]; then "$ROOT/lab/apiserver/down.sh" "$OUT/tier" >/dev/null 2>&1 || true; fi
KWIN_APISERVER_ADDRESS="$ADDR" KWIN_APISERVER_PORT="$API_PORT" \
  "$ROOT/lab/apiserver/up.sh" "$OUT/tier" >"$OUT/tier-up.log" 2>&1 ||
  { cat "$OUT/tier-up.log" >&2; die "the API tier did not start"; }

# 3. repositories and their HTTP server
"$HERE/build-repo.sh" "$OUT" "$OUT/tier" >"$OUT/build-repo.log" 2>&1 ||
  { cat "$OUT/build-repo.log" >&2; die "building the repositories failed"; }
if [[ -f "$OUT/http.pid" ]]; then kill "$(cat "$OUT/http.pid")" 2>/dev/null || true; fi
setsid python3 -m http.server --bind "$ADDR" --directory "$OUT/www" "$REPO_PORT" \
  </dev/null >"$OUT/http.log" 2>&1 &
echo $! >"$OUT/http.pid"
for ((i = 0; i < 50; i++)); do
  curl -fsS -o /dev/null "http://$ADDR:$REPO_PORT/debian/Release" 2>/dev/null && break
  sleep 0.1
done
curl -fsS -o /dev/null "http://$ADDR:$REPO_PORT/debian/Release" || die "the repository server does not answer"

# 4. hosts
prep() {
  local h=$1
  "${SSH[@]}" "$h" 'cat > /usr/local/sbin/systemctl && chmod 0755 /usr/local/sbin/systemctl && mkdir -p /run/systemd/system' \
    <"$HERE/bin/systemctl-stand-in" || return 1
  "${SSH[@]}" "$h" 'mkdir -p /usr/lib/systemctl-stand-in/run && cat > /usr/lib/systemctl-stand-in/run/containerd.service && chmod 0755 /usr/lib/systemctl-stand-in/run/containerd.service' \
    <"$HERE/bin/containerd-stand-in-runner" || return 1
  "${SSH[@]}" "$h" 'mkdir -p /etc/apt/keyrings && cat > /etc/apt/keyrings/kwin-lab-debian.gpg' \
    <"$OUT/keyring.gpg" || return 1
  "${SSH[@]}" "$h" "set -e
    rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*
    echo 'deb [signed-by=/etc/apt/keyrings/kwin-lab-debian.gpg] http://$ADDR:$REPO_PORT/debian/ /' > /etc/apt/sources.list.d/kwin-lab-debian.list
    apt-get update -qq </dev/null >/dev/null" || return 1
}
pids=()
for h in "${HOSTS[@]}"; do
  prep "$h" >"$OUT/prep-$h.log" 2>&1 &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { cat "$OUT/prep-${HOSTS[$i]}.log" >&2; die "preparing ${HOSTS[$i]} failed"; }
done

# 5. status stand-in
if [[ -f "$OUT/status.pid" ]]; then kill "$(cat "$OUT/status.pid")" 2>/dev/null || true; fi
setsid python3 "$HERE/status-stand-in.py" "$OUT/tier/admin.conf" --timeline "$OUT/timeline.log" \
  </dev/null >"$OUT/status.log" 2>&1 &
echo $! >"$OUT/status.pid"

cat >"$OUT/env" <<EOF
SERVICE_ADDRESS='$ADDR'
CONTROL_PLANE_ENDPOINT='$ADDR:$API_PORT'
MIRROR='http://$ADDR:$REPO_PORT'
KUBECONFIG='$OUT/tier/admin.conf'
TIER_DIR='$OUT/tier'
EOF
T1=$(date +%s%N)
echo "lab cluster stand-ins up in $(((T1 - T0) / 1000000)) ms: API https://$ADDR:$API_PORT, mirror http://$ADDR:$REPO_PORT, ${#HOSTS[@]} hosts prepared"
