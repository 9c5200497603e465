#!/usr/bin/env bash
# What a real Kubernetes cluster on lab hosts needs around them (see README.md next to this
# file). The hosts come from `lab/up.sh N --nodes`; the programs from lab/build/build.sh.
#
#   sudo lab/up.sh 3 --nodes && sudo lab/cluster/up.sh
#
# For the lab KWIN_LAB_ID names (default 0; addresses 10.<213+ID>.0.0/16):
#   1. the lab's service address 10.<213+ID>.255.1 on the root side of every host's veth
#      (the hosts reach it through their default route);
#   2. the container registry (distribution) on SERVICE:5000, serving the images of
#      lab/build/images.sh read-only: what registry.k8s.io and ghcr.io would serve;
#   3. the artifact mirror (lab/build/mirror.sh: signed apt repositories laid out as
#      pkgs.k8s.io, release downloads laid out as github.com) over HTTP on SERVICE:8080;
#   4. per host: the systemd stand-in as /usr/local/sbin/systemctl and /run/systemd/system
#      (lab hosts run no systemd), and no apt source the host cannot reach (the machine's
#      Debian mirrors are outside the lab): kwin adds the repositories it installs from.
#   5. target/lab[-ID]/cluster/plan.toml: lab/cluster/plan.toml for this lab (its addresses,
#      its inventory, the digests of the release files this machine built).
# Writes target/lab[-ID]/cluster/env. Stop with lab/cluster/down.sh.
#
# Environment: KWIN_LAB_ID, KWIN_LAB_CACHE (/var/cache/kwin-lab), KWIN_LAB_REGISTRY_PORT (5000),
# KWIN_LAB_MIRROR_PORT (8080).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
# shellcheck source-path=SCRIPTDIR source=../build/versions.sh
source "$ROOT/lab/build/versions.sh"
ID="${KWIN_LAB_ID:-0}"
[[ "$ID" =~ ^(0|[1-9]|1[0-9])$ ]] || { echo "lab/cluster/up.sh: KWIN_LAB_ID must be 0 to 19 (lab/lib.sh)" >&2; exit 2; }
if [[ "$ID" == 0 ]]; then LAB="$ROOT/target/lab"; VETH=kwv; else
  LAB="$ROOT/target/lab-$ID"; VETH="kwv$ID"; fi
ADDR="10.$((213 + ID)).255.1"
CACHE="${KWIN_LAB_CACHE:-/var/cache/kwin-lab}"
REG_PORT="${KWIN_LAB_REGISTRY_PORT:-5000}"
MIRROR_PORT="${KWIN_LAB_MIRROR_PORT:-8080}"
OUT="$LAB/cluster"
SSH=(ssh -F "$LAB/ssh_config" -o ConnectTimeout=10)

die() { echo "lab/cluster/up.sh: $*" >&2; exit 1; }
[[ $(id -u) == 0 ]] || die "run as root"
# Lab hosts share the machine's kernel: the swap areas in /proc/swaps are the machine's, and
# node-prereqs' swap_off would turn them off for the whole machine. Refuse instead.
if [[ $(awk 'NR > 1' /proc/swaps 2>/dev/null) ]]; then
  die "this machine has swap on (/proc/swaps); lab hosts share its kernel, so the cluster recipes would turn it off for the whole machine: refusing (swapoff -a first if that is fine)"
fi
[[ -r "$LAB/pids" && -r "$LAB/ssh_config" ]] || die "no lab $ID is up (run lab/up.sh N --nodes first)"
[[ -f "$LAB/nodes" ]] || die "lab $ID's hosts cannot run Kubernetes: start them with lab/up.sh N --nodes"
REGISTRY="$CACHE/bin/registry-$LAB_REGISTRY/registry"
for f in "$REGISTRY" "$CACHE/registry/.stamp" "$CACHE/mirror/.stamp"; do
  [[ -e $f ]] || die "$f is missing: build the lab first (lab/build/build.sh)"
done
mapfile -t HOSTS < <(awk '$1 ~ /^h[0-9]+$/ { print $1 }' "$LAB/pids")
[[ ${#HOSTS[@]} -gt 0 ]] || die "$LAB/pids names no hosts"
"$HERE/down.sh" >/dev/null 2>&1 || true
mkdir -p "$OUT"
T0=$(date +%s%N)

# 1. service address
for h in "${HOSTS[@]}"; do
  ip addr replace "$ADDR/32" dev "$VETH-$h"
done

# 2. registry (read-only: nothing is pushed while a cluster runs)
cat >"$OUT/registry.yml" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $CACHE/registry
  maintenance:
    readonly:
      enabled: true
    uploadpurging:
      enabled: false
http:
  addr: $ADDR:$REG_PORT
EOF
setsid "$REGISTRY" serve "$OUT/registry.yml" </dev/null >"$OUT/registry.log" 2>&1 &
echo $! >"$OUT/registry.pid"

# 3. artifact mirror
setsid python3 -m http.server --bind "$ADDR" --directory "$CACHE/mirror/www" "$MIRROR_PORT" \
  </dev/null >"$OUT/mirror.log" 2>&1 &
echo $! >"$OUT/mirror.pid"
for ((i = 0; i < 100; i++)); do
  curl -fsS -o /dev/null "http://$ADDR:$REG_PORT/v2/" 2>/dev/null &&
    curl -fsS -o /dev/null "http://$ADDR:$MIRROR_PORT/pkgs.k8s.io/core:/stable:/v${LAB_K8S_NEWEST%.*}/deb/Release" 2>/dev/null && break
  sleep 0.1
done
curl -fsS -o /dev/null "http://$ADDR:$REG_PORT/v2/" || { cat "$OUT/registry.log" >&2; die "the registry does not answer"; }
curl -fsS -o /dev/null "http://$ADDR:$MIRROR_PORT/pkgs.k8s.io/core:/stable:/v${LAB_K8S_NEWEST%.*}/deb/Release" ||
  die "the mirror does not answer"

# 4. hosts
prep() {
  local h=$1
  "${SSH[@]}" "$h" 'cat > /usr/local/sbin/systemctl && chmod 0755 /usr/local/sbin/systemctl && mkdir -p /run/systemd/system' \
    <"$ROOT/lab/systemd-stand-in/systemctl" || return 1
  "${SSH[@]}" "$h" 'rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*' || return 1
}
pids=()
for h in "${HOSTS[@]}"; do
  prep "$h" >"$OUT/prep-$h.log" 2>&1 &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { cat "$OUT/prep-${HOSTS[$i]}.log" >&2; die "preparing ${HOSTS[$i]} failed"; }
done

cat >"$OUT/env" <<EOF
SERVICE_ADDRESS='$ADDR'
REGISTRY='http://$ADDR:$REG_PORT'
MIRROR='http://$ADDR:$MIRROR_PORT'
EOF
# 5. the plan for this lab: lab/cluster/plan.toml with this lab's addresses and inventory, and
#    the digests of the release files this machine's lab built (lab/build/pins.sh)
pins=$("$ROOT/lab/build/pins.sh") || die "lab/build/pins.sh failed"
PINS="$pins" python3 - "$ROOT/lab/cluster/plan.toml" "$OUT/plan.toml" "$ID" "$LAB/hosts.toml" <<'PY'
import os, sys
src, dst, lab_id, inventory = sys.argv[1:5]
text = open(src).read()
head, rest = text.split("\n[artifacts.sha256]\n", 1)
_, tail = rest.split("\n[settings]\n", 1)
text = head + "\n" + os.environ["PINS"] + "\n\n[settings]\n" + tail
text = text.replace("10.213.", "10.%d." % (213 + int(lab_id)))
text = text.replace('"../../target/lab/hosts.toml"', '"%s"' % inventory)
open(dst, "w").write(text)
PY
T1=$(date +%s%N)
echo "lab cluster services up in $(((T1 - T0) / 1000000)) ms: registry http://$ADDR:$REG_PORT, mirror http://$ADDR:$MIRROR_PORT, ${#HOSTS[@]} hosts prepared; plan ${OUT#"$ROOT"/}/plan.toml"
