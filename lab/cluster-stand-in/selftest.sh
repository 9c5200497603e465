#!/usr/bin/env bash
# Single-quoted scripts below run on the hosts, where their $ expand.
# shellcheck disable=SC2016
# Self-test of the lab cluster's stand-ins (README.md next to this file), driven by the API
# tier's real kubectl, real apt/dpkg on the lab hosts and the real API server: a cluster is built at one
# version with the stand-in kubeadm and kubelet (no kwin involved), pods are drained for real,
# the stand-ins refuse upgrades in the wrong order, and the cluster is upgraded to the next
# minor in the right one. The WinRM stand-in's kubeadm-stand-in gets `upgrade node` checked
# against the same cluster.
#
#   sudo lab/cluster-stand-in/selftest.sh        (under flock /tmp/kwin-e2e.lock)
#
# Environment: KWIN_LAB_ID (default 7: a lab no test uses), KWIN_SELFTEST_KEEP=1 (leave the lab
# up), KWIN_LAB_TAKEOVER. Prints "selftest: N passed, M failed"; exit status 0 only if M is 0.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
export KWIN_LAB_ID="${KWIN_LAB_ID:-7}"
LAB="$ROOT/target/lab-$KWIN_LAB_ID"
[[ $KWIN_LAB_ID == 0 ]] && LAB="$ROOT/target/lab"
OUT="$LAB/cluster"
# A short grace period, so a stopped kubelet's Node goes Unknown within seconds.
export KWIN_LAB_NODE_GRACE=6
export KWIN_LAB_KUBEADM_WAIT=30
[[ $(id -u) == 0 ]] || { echo "selftest: run as root" >&2; exit 2; }

WORK="$(mktemp -d /tmp/kwin-cluster-selftest.XXXXXX)"
cleanup() {
  if [[ "${KWIN_SELFTEST_KEEP:-0}" == 1 ]]; then
    echo "selftest: lab $KWIN_LAB_ID left up (stop: KWIN_LAB_ID=$KWIN_LAB_ID $HERE/down.sh; KWIN_LAB_ID=$KWIN_LAB_ID $ROOT/lab/down.sh)"
  else
    "$HERE/down.sh" >/dev/null 2>&1
    "$ROOT/lab/down.sh" --quiet >/dev/null 2>&1
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

now_ms() { echo $(($(date +%s%N) / 1000000)); }
T0=$(now_ms)
"$ROOT/lab/up.sh" 3 >"$WORK/lab-up.log" 2>&1 || { cat "$WORK/lab-up.log" >&2; exit 1; }
"$HERE/up.sh" || exit 1
T1=$(now_ms)
echo "selftest: lab and stand-ins up in $((T1 - T0)) ms"
# shellcheck disable=SC1091
source "$OUT/env"
export KUBECONFIG
# The API tier's own kubectl (the version of its API server), first on PATH for every check.
export PATH="$TIER_DIR/bin:$PATH"

PASS=0
FAIL=0
FAILED=()
k() { kubectl --request-timeout=15s "$@"; }
on() { # HOST SCRIPT: run SCRIPT as root on a lab host
  ssh -F "$LAB/ssh_config" -o ConnectTimeout=10 "$1" "$2" </dev/null
}
ok() { PASS=$((PASS + 1)); echo "ok   - $1"; }
bad() {
  FAIL=$((FAIL + 1))
  FAILED+=("$1")
  echo "FAIL - $1${2:+: $2}"
  [[ -s "$WORK/out" ]] && sed 's/^/       /' "$WORK/out" | tail -n 15
}
# check NAME CMD...: CMD must succeed.
check() {
  local name=$1
  shift
  if "$@" >"$WORK/out" 2>&1; then ok "$name"; else bad "$name"; fi
}
# refused NAME PATTERN CMD...: CMD must fail and say PATTERN (grep -E).
refused() {
  local name=$1 pat=$2
  shift 2
  if "$@" >"$WORK/out" 2>&1; then
    bad "$name" "succeeded, a refusal was expected"
  elif grep -Eq -- "$pat" "$WORK/out"; then
    ok "$name"
  else
    bad "$name" "no /$pat/ in the output"
  fi
}
# expect NAME WANT CMD...: CMD must print exactly WANT.
expect() {
  local name=$1 want=$2 got
  shift 2
  got="$("$@" 2>"$WORK/out")"
  if [[ "$got" == "$want" ]]; then ok "$name"; else bad "$name" "want [$want] got [$got]"; fi
}
# eventually NAME WANT SECONDS CMD...: CMD prints exactly WANT within SECONDS.
eventually() {
  local name=$1 want=$2 secs=$3 got="" end
  shift 3
  end=$(($(date +%s) + secs))
  while :; do
    got="$("$@" 2>"$WORK/out")"
    [[ "$got" == "$want" ]] && { ok "$name"; return; }
    [[ $(date +%s) -ge $end ]] && break
    sleep 0.5
  done
  bad "$name" "want [$want] within ${secs}s, last [$got]"
}
node_field() { k get node "$1" -o "jsonpath=$2"; }
ready() { node_field "$1" '{.status.conditions[?(@.type=="Ready")].status}'; }
kubelet_version() { node_field "$1" '{.status.nodeInfo.kubeletVersion}'; }
violations() { on "$1" 'cat /var/lib/kubelet-stand-in/violations.log 2>/dev/null' | sed -n 's/.*"kind": "\([^"]*\)".*/\1/p' | sort -u | tr '\n' ' '; }

# ------------------------------------------------------------------ hosts, packages, init
repo_line() { # MINOR
  echo "deb [signed-by=/etc/apt/keyrings/kwin-lab-debian.gpg] $MIRROR/pkgs.k8s.io/core:/stable:/v$1/deb/ /"
}
use_repo() { # HOST MINOR: the pkgs.k8s.io repository of that minor, as the upgrade docs say
  on "$1" "echo '$(repo_line "$2")' >/etc/apt/sources.list.d/kubernetes.list && apt-get update -qq"
}
install() { # HOST PKG=VERSION...: unhold, install (downgrades allowed), hold again
  local h=$1
  shift
  local names=()
  for p in "$@"; do names+=("${p%%=*}"); done
  on "$h" "apt-mark unhold ${names[*]} >/dev/null 2>&1; DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes apt-get install -y -qq --allow-downgrades $* >/dev/null && apt-mark hold ${names[*]} >/dev/null"
}
prep() {
  local h=$1
  use_repo "$h" 1.31 &&
    install "$h" kubeadm=1.31.4-1.1 kubelet=1.31.4-1.1 kubectl=1.31.4-1.1 &&
    on "$h" 'sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 && systemctl enable kubelet >/dev/null'
}
for h in h1 h2 h3; do prep "$h" >"$WORK/prep-$h.log" 2>&1 & done
wait
installed() { # HOST: versions of kubeadm kubelet kubectl
  on "$1" "dpkg-query -W -f '\${Version} ' kubeadm kubelet kubectl" | sed 's/ $//'
}
cat "$WORK"/prep-h*.log
for h in h1 h2 h3; do
  expect "packages 1.31.4 from the v1.31 repository on $h" "1.31.4-1.1 1.31.4-1.1 1.31.4-1.1" installed "$h"
done
expect "apt-cache sees both 1.31 versions" "1.31.9-1.1 1.31.4-1.1" \
  on h1 "apt-cache madison kubeadm | awk '{print \$3}' | tr '\n' ' ' | sed 's/ \$//'"

cat >"$WORK/init.yaml" <<EOF
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
nodeRegistration:
  name: h1
  criSocket: unix:///run/containerd/containerd.sock
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
clusterName: selftest
kubernetesVersion: v1.31.4
controlPlaneEndpoint: $CONTROL_PLANE_ENDPOINT
networking:
  podSubnet: 10.244.0.0/16
  serviceSubnet: 10.96.0.0/12
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
maxPods: 110
EOF
check "kubeadm init on h1" on h1 "cat >/root/init.yaml <<'EOF'
$(cat "$WORK/init.yaml")
EOF
kubeadm init --config /root/init.yaml"
TOKEN=$(on h1 'kubeadm token create --kubeconfig /etc/kubernetes/admin.conf --ttl 20m | tail -n 1')
HASH=$(on h1 'openssl x509 -pubkey -noout -in /etc/kubernetes/pki/ca.crt | openssl pkey -pubin -outform der | sha256sum | cut -d" " -f1')
join_config() { # NODE
  cat <<EOF
apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: $CONTROL_PLANE_ENDPOINT
    token: $TOKEN
    caCertHashes: ["sha256:$HASH"]
nodeRegistration:
  name: $1
  criSocket: unix:///run/containerd/containerd.sock
EOF
}
for h in h2 h3; do
  check "kubeadm join on $h" on "$h" "cat >/root/join.yaml <<'EOF'
$(join_config "$h")
EOF
kubeadm join --config /root/join.yaml"
done

# ------------------------------------------------------------------ the cluster at 1.31.4
for h in h1 h2 h3; do
  expect "node $h Ready at kubelet v1.31.4" "True v1.31.4" \
    node_field "$h" '{.status.conditions[?(@.type=="Ready")].status} {.status.nodeInfo.kubeletVersion}'
done
expect "kubelet.service active, its process running (h2)" "active" on h2 'systemctl is-active kubelet'
expect "mirror pods of h1's static pods (etcd too, as kubeadm labels it), at v1.31.4" \
  "etcd-h1=registry.k8s.io/etcd:3.5.15-0 kube-apiserver-h1=registry.k8s.io/kube-apiserver:v1.31.4 kube-controller-manager-h1=registry.k8s.io/kube-controller-manager:v1.31.4 kube-scheduler-h1=registry.k8s.io/kube-scheduler:v1.31.4" \
  bash -c "kubectl -n kube-system get pods -l tier=control-plane -o jsonpath='{range .items[*]}{.metadata.name}={.spec.containers[0].image}{\" \"}{end}' | sed 's/ \$//'"
expect "mirror pod config.hash = md5 of the manifest" \
  "$(on h1 'md5sum /etc/kubernetes/manifests/kube-apiserver.yaml | cut -d" " -f1')" \
  k -n kube-system get pod kube-apiserver-h1 -o 'jsonpath={.metadata.annotations.kubernetes\.io/config\.hash}'
expect "kubeadm-config kubernetesVersion v1.31.4" "kubernetesVersion: v1.31.4" \
  bash -c "kubectl -n kube-system get cm kubeadm-config -o jsonpath='{.data.ClusterConfiguration}' | grep '^kubernetesVersion'"
expect "Leases of h1..h3 renewed by the kubelets" "h1 h2 h3" \
  bash -c "kubectl -n kube-node-lease get leases -o jsonpath='{.items[*].spec.holderIdentity}'"
expect "join wrote the kubelet configuration from kubelet-config" "maxPods: 110" \
  on h2 'grep maxPods /var/lib/kubelet/config.yaml'

# ------------------------------------------------------------------ pods, drain, budgets
pod() { # NAME NODE APP
  cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: selftest, labels: {app: $3}}
spec:
  nodeName: $2
  terminationGracePeriodSeconds: 30
  containers: [{name: c, image: registry.k8s.io/pause:3.10}]
EOF
}
k create namespace selftest >/dev/null
{ pod free h2 free; echo ---; pod guarded h2 guarded; echo ---; pod pinned h3 pinned; } >"$WORK/pods.yaml"
check "pods bound to h2 and h3 created" k apply -f "$WORK/pods.yaml"
eventually "the kubelets report their pods Running and Ready" "Running/True Running/True Running/True" 15 \
  bash -c "kubectl -n selftest get pods -o jsonpath='{range .items[*]}{.status.phase}/{.status.conditions[?(@.type==\"Ready\")].status} {end}' | sed 's/ \$//'"
cat >"$WORK/pdb.yaml" <<EOF
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: guarded, namespace: selftest}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: guarded}}
EOF
check "PodDisruptionBudget minAvailable 1 over the guarded pod" k apply -f "$WORK/pdb.yaml"
eventually "its status: 1 healthy, 1 desired, 0 disruptions allowed" "1 1 0" 10 \
  k -n selftest get pdb guarded -o 'jsonpath={.status.currentHealthy} {.status.desiredHealthy} {.status.disruptionsAllowed}'
refused "drain without --force names the pod with no controller" 'cannot delete Pods that declare no controller.*selftest/pinned' \
  k drain h3 --ignore-daemonsets --timeout=10s
check "(uncordon h3)" k uncordon h3
refused "drain of h2 is blocked by the budget, naming the pod" 'evicting pods/"guarded" -n "selftest".*|disruption budget' \
  k drain h2 --ignore-daemonsets --force --timeout=12s
if grep -q 'disruption budget' "$WORK/out"; then ok "the drain says why: the disruption budget"; else bad "the drain says why"; fi
expect "the free pod was evicted and its deletion completed; the guarded one stays" "guarded pinned" \
  k -n selftest get pods -o 'jsonpath={.items[*].metadata.name}'
expect "h2 stays cordoned after the failed drain" "true" node_field h2 '{.spec.unschedulable}'
check "without the budget the drain finishes" bash -c \
  "kubectl -n selftest delete pdb guarded && kubectl drain h2 --ignore-daemonsets --force --timeout=20s"
expect "no pod left on h2" "" k get pods -A --field-selector spec.nodeName=h2,metadata.namespace=selftest -o 'jsonpath={.items[*].metadata.name}'
check "uncordon h2" k uncordon h2
expect "h2 schedulable again" "" node_field h2 '{.spec.unschedulable}'

# ------------------------------------------------------------------ refusals (wrong order)
use_repo h2 1.32 >/dev/null && install h2 kubeadm=1.32.5-1.1 >/dev/null
refused "kubeadm upgrade node on a worker before the control plane" 'control plane is upgraded first' \
  on h2 'kubeadm upgrade node'
use_repo h1 1.33 >/dev/null && install h1 kubeadm=1.33.1-1.1 >/dev/null
refused "kubeadm upgrade apply of two minors (1.31 -> 1.33)" 'too high; kubeadm can upgrade only 1 minor version at a time' \
  on h1 'kubeadm upgrade apply v1.33.1 -y'
use_repo h1 1.32 >/dev/null && install h1 kubeadm=1.32.5-1.1 >/dev/null
refused "kubeadm upgrade apply above the kubeadm's minor" 'higher than the kubeadm minor' \
  on h1 'kubeadm upgrade apply v1.33.1 -y'
refused "kubeadm upgrade apply without --yes and no answer" "won't proceed" \
  on h1 'kubeadm upgrade apply v1.32.5'
expect "the refused applies changed no manifest" "image: registry.k8s.io/kube-apiserver:v1.31.4" \
  on h1 'grep image: /etc/kubernetes/manifests/kube-apiserver.yaml | sed "s/^ *//"'

# A kubelet newer than the API server: the package alone changes nothing, the restart does.
use_repo h3 1.32 >/dev/null && install h3 kubelet=1.32.5-1.1 >/dev/null
expect "kubelet 1.32.5 installed on h3, the running one still reports v1.31.4" "v1.31.4" kubelet_version h3
check "restart the kubelet on h3" on h3 'systemctl restart kubelet'
eventually "h3 reports v1.32.5 and NotReady (KubeletVersionSkew)" "v1.32.5 False KubeletVersionSkew" 15 \
  node_field h3 '{.status.nodeInfo.kubeletVersion} {.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].reason}'
expect "h3 recorded the skew and the undrained minor upgrade" "kubelet-newer-minor undrained-minor-upgrade " violations h3
use_repo h3 1.31 >/dev/null && install h3 kubelet=1.31.4-1.1 >/dev/null && on h3 'systemctl restart kubelet'
eventually "back at 1.31.4, h3 is Ready again" "v1.31.4 True" 15 \
  node_field h3 '{.status.nodeInfo.kubeletVersion} {.status.conditions[?(@.type=="Ready")].status}'

# ------------------------------------------------------------------ the WinRM stand-in's kubeadm
WIN="$WORK/win"
mkdir -p "$WIN"
WLAB="$ROOT/lab/winrm-stand-in"
win() { # SCRIPT: run SCRIPT (sh) on the isolated Windows stand-in host; $F $K are its programs
  "$WLAB/isolated-stand-in.sh" "$WIN" env F="$WLAB/windows-feature-stand-in" K="$WLAB/kubeadm-stand-in" sh -c "$1"
}
printf '{"apiVersion":"kubeadm.k8s.io/v1beta3","kind":"JoinConfiguration","discovery":{"bootstrapToken":{"apiServerEndpoint":"%s","token":"%s","caCertHashes":["sha256:%s"]}},"nodeRegistration":{"name":"ww1"}}' \
  "$CONTROL_PLANE_ENDPOINT" "$TOKEN" "$HASH" >"$WORK/win-join.json"
check "Windows stand-in host joins (kubeadm-stand-in join)" \
  win "\$F install Containers >/dev/null && \$F boot && \$K join --config $WORK/win-join.json && mkdir -p /var/lib/kwin-standin && echo v1.32.5 >/var/lib/kwin-standin/kubeadm.version"
expect "kubeadm-stand-in version is the installed kubeadm.exe's" "v1.32.5" win '$K version -o short'
refused "Windows kubeadm upgrade node before the control plane" 'control plane is upgraded first' \
  win '$K upgrade node'

# ------------------------------------------------------------------ the upgrade, in order
UPGRADE_START=$(date +%s.%N)
check "kubeadm upgrade plan offers v1.32.5" bash -c \
  "ssh -F $LAB/ssh_config h1 'kubeadm upgrade plan' </dev/null | tee /dev/stderr | grep -q 'kubeadm upgrade apply v1.32.5'"
check "kubeadm upgrade apply v1.32.5 on h1" on h1 'kubeadm upgrade apply v1.32.5 --yes'
expect "kubeadm-config kubernetesVersion v1.32.5" "kubernetesVersion: v1.32.5" \
  bash -c "kubectl -n kube-system get cm kubeadm-config -o jsonpath='{.data.ClusterConfiguration}' | grep '^kubernetesVersion'"
expect "static pod manifests at v1.32.5" "3" \
  on h1 'grep -l ":v1.32.5" /etc/kubernetes/manifests/kube-*.yaml | wc -l'
expect "mirror pods replaced: kube-apiserver-h1 at v1.32.5 with the new hash" \
  "registry.k8s.io/kube-apiserver:v1.32.5 $(on h1 'md5sum /etc/kubernetes/manifests/kube-apiserver.yaml | cut -d" " -f1')" \
  k -n kube-system get pod kube-apiserver-h1 -o 'jsonpath={.spec.containers[0].image} {.metadata.annotations.kubernetes\.io/config\.hash}'
check "a second apply of v1.32.5 leaves the manifests as they are" bash -c \
  "ssh -F $LAB/ssh_config h1 'kubeadm upgrade apply v1.32.5 --yes' </dev/null | grep -c 'are equal, skipping' | grep -qx 3"
check "the Windows stand-in's upgrade node, now the control plane is at v1.32.5" \
  win '$K upgrade node && test -s /var/lib/kubelet/config.yaml'

upgrade_kubelet() { # HOST
  local h=$1
  k drain "$h" --ignore-daemonsets --force --timeout=30s >/dev/null &&
    use_repo "$h" 1.32 >/dev/null && install "$h" kubelet=1.32.5-1.1 kubectl=1.32.5-1.1 >/dev/null &&
    [[ "$(kubelet_version "$h")" == v1.31.4 ]] && on "$h" 'systemctl restart kubelet'
}
check "h1: drain, kubelet and kubectl 1.32.5, restart" upgrade_kubelet h1
eventually "h1 Ready at v1.32.5" "True v1.32.5" 15 node_field h1 '{.status.conditions[?(@.type=="Ready")].status} {.status.nodeInfo.kubeletVersion}'
check "uncordon h1" k uncordon h1
for h in h2 h3; do
  [[ $h == h3 ]] && use_repo h3 1.32 >/dev/null && install h3 kubeadm=1.32.5-1.1 >/dev/null
  check "kubeadm upgrade node on $h" on "$h" 'kubeadm upgrade node'
  check "$h: drain, kubelet and kubectl 1.32.5, restart" upgrade_kubelet "$h"
  eventually "$h Ready at v1.32.5" "True v1.32.5" 15 node_field "$h" '{.status.conditions[?(@.type=="Ready")].status} {.status.nodeInfo.kubeletVersion}'
  check "uncordon $h" k uncordon "$h"
done
two_violations() { echo "$(violations h1)|$(violations h2)"; }
expect "no violation recorded on h1 and h2" "|" two_violations
expect "h3 recorded only the deliberate ones" "kubelet-newer-minor undrained-minor-upgrade " violations h3

# The status stand-in's timeline: one node cordoned at a time, each uncordoned again, h1's
# kubelet at v1.32.5 before a worker's.
timeline_check() {
  python3 - "$OUT/timeline.log" "$UPGRADE_START" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in rows if r["epoch"] >= float(sys.argv[2]) and "unschedulable" in r]
cordoned, most, first_new = set(), 0, {}
for r in rows:
    (cordoned.add if r["unschedulable"] else cordoned.discard)(r["node"])
    most = max(most, len(cordoned))
    if r["kubelet"] == "v1.32.5":
        first_new.setdefault(r["node"], r["epoch"])
seen = sorted({r["node"] for r in rows if r["unschedulable"]})
order = sorted(first_new, key=first_new.get)
print(f"cordoned={','.join(seen)} at-once={most} left={','.join(sorted(cordoned)) or '-'} "
      f"upgraded={','.join(order)}")
PY
}
expect "timeline: each node cordoned alone, all uncordoned, h1 first" \
  "cordoned=h1,h2,h3 at-once=1 left=- upgraded=h1,h2,h3" timeline_check

use_repo h1 1.31 >/dev/null && install h1 kubeadm=1.31.9-1.1 >/dev/null
refused "kubeadm upgrade apply of a downgrade (v1.32.5 -> v1.31.9)" 'refuses every downgrade' \
  on h1 'kubeadm upgrade apply v1.31.9 --yes --force'
use_repo h1 1.32 >/dev/null && install h1 kubeadm=1.32.5-1.1 >/dev/null
expect "h1's call log: the order the kubeadm calls came in" \
  "init:ok upgrade apply:refused upgrade apply:refused upgrade apply:refused upgrade plan:ok upgrade apply:ok upgrade apply:ok upgrade apply:refused" \
  bash -c "ssh -F $LAB/ssh_config h1 cat /var/log/kubeadm-stand-in.log </dev/null | python3 -c 'import json,sys; print(\" \".join(j[\"verb\"]+\":\"+j[\"result\"] for j in map(json.loads, sys.stdin)))'"

# ------------------------------------------------------------------ node lifecycle
check "stop the kubelet on h3" on h3 'systemctl stop kubelet'
expect "kubelet.service inactive on h3" "inactive" on h3 'systemctl is-active kubelet'
eventually "h3's lease runs out: Ready=Unknown, tainted unreachable" "Unknown node.kubernetes.io/unreachable" 20 \
  node_field h3 '{.status.conditions[?(@.type=="Ready")].status} {.spec.taints[*].key}'
check "start the kubelet on h3" on h3 'systemctl start kubelet'
eventually "h3 Ready again, the taint gone" "True " 15 \
  node_field h3 '{.status.conditions[?(@.type=="Ready")].status} {.spec.taints[*].key}'
check "kill the kubelet process on h3" on h3 'kill -9 "$(cat /run/kubelet-stand-in/pid)"'
eventually "systemctl says activating (Restart=always would restart it)" "activating" 5 \
  on h3 'systemctl is-active kubelet'
expect "systemctl show: ActiveState=activating SubState=auto-restart" "ActiveState=activating SubState=auto-restart" \
  on h3 'systemctl show kubelet -p ActiveState -p SubState | tr "\n" " " | sed "s/ \$//"'
check "systemctl start brings it back" on h3 'systemctl start kubelet && systemctl is-active kubelet'

T2=$(now_ms)
echo "selftest: checks took $((T2 - T1)) ms"
echo "selftest: $PASS passed, $FAIL failed"
if [[ $FAIL -gt 0 ]]; then
  printf 'selftest: failed: %s\n' "${FAILED[@]}"
  exit 1
fi
