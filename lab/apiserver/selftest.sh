#!/usr/bin/env bash
# (bash -c '...' snippets below expand $KUBECTL/$KUBECONFIG in the child shell)
# shellcheck disable=SC2016
# Self-test of the API tier: build (cached), start etcd + kube-apiserver (LAB_K8S_NEWEST of
# lab/build/versions.sh), drive it with the real kubectl and kubeadm of the same version and
# tear it down.
#
#   lab/apiserver/selftest.sh
#
# Environment:
#   KUBECTL                     kubectl to test (default: the tier's, KUBECTL_BIN of its env)
#   KWIN_SELFTEST_KEEP=1        leave the tier running and print its state dir
# Prints "selftest: N passed, M failed"; exit status 0 only if M is 0.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

now_ms() { echo $(($(date +%s%N) / 1000000)); }

t0=$(now_ms)
"$HERE/build.sh"
t1=$(now_ms)
echo "selftest: build.sh (cached check or build) took $((t1 - t0)) ms"

STATE="$(mktemp -d /tmp/kwin-apiserver-selftest.XXXXXX)"
cleanup() {
  if [[ "${KWIN_SELFTEST_KEEP:-0}" == 1 ]]; then
    echo "selftest: tier left running, state in $STATE (stop: $HERE/down.sh $STATE)"
  else
    "$HERE/down.sh" "$STATE" || true
  fi
  rm -rf "$WORK"
}
WORK="$(mktemp -d /tmp/kwin-apiserver-selftest-work.XXXXXX)"
trap cleanup EXIT

t0=$(now_ms)
"$HERE/up.sh" "$STATE"
t1=$(now_ms)
echo "selftest: up.sh took $((t1 - t0)) ms"
# shellcheck disable=SC1091
source "$STATE/env"
KUBECTL="${KUBECTL:-$KUBECTL_BIN}"
export KUBECTL

PASS=0
FAIL=0
FAILED=()
OUT="$WORK/out"
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }

# check NAME CMD...: CMD must succeed; its output is kept in $OUT.
check() {
  local name=$1
  shift
  if "$@" >"$OUT" 2>&1; then
    PASS=$((PASS + 1))
    echo "ok   - $name"
  else
    FAIL=$((FAIL + 1))
    FAILED+=("$name")
    echo "FAIL - $name"
    sed 's/^/       /' "$OUT" | tail -n 15
  fi
}
# expect NAME WANT CMD...: CMD must succeed and print exactly WANT.
expect() {
  local name=$1 want=$2
  shift 2
  local got rc=0
  got="$("$@" 2>"$WORK/err")" || rc=$?
  if [[ $rc -eq 0 && "$got" == "$want" ]]; then
    PASS=$((PASS + 1))
    echo "ok   - $name"
  else
    FAIL=$((FAIL + 1))
    FAILED+=("$name")
    echo "FAIL - $name: want [$want] got [$got] rc=$rc"
    sed 's/^/       /' "$WORK/err" | tail -n 10
  fi
}
# grep_out PATTERN: the last check's output matches the extended regex.
out_has() { grep -Eq -- "$1" "$OUT"; }

# ------------------------------------------------------------------ version
# `kubectl version` has no jsonpath output; take the fields from -o json.
check "kubectl version (client + server)" k version -o json
cp "$OUT" "$WORK/version.json"
gitversion() { sed -n "/\"$1\"/,/}/s/.*\"gitVersion\": \"\([^\"]*\)\".*/\1/p" "$WORK/version.json"; }
expect "server version is v$K8S_VERSION (lab/build/versions.sh)" "v$K8S_VERSION" gitversion serverVersion
expect "kubectl client is the same version" "v$K8S_VERSION" gitversion clientVersion
echo "       client $(gitversion clientVersion), server $(gitversion serverVersion)"
check "readyz" k get --raw /readyz
check "discovery: api-resources" k api-resources
check "default namespaces exist" k get ns default kube-system kube-public

# --------------------------------------------- server-side apply: flannel
cat >"$WORK/flannel.yaml" <<'EOF'
apiVersion: v1
kind: Namespace
metadata:
  name: kube-flannel
  labels:
    pod-security.kubernetes.io/enforce: privileged
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: kube-flannel-cfg
  namespace: kube-system
  labels:
    app: flannel
data:
  net-conf.json: |
    {
      "Network": "10.244.0.0/16",
      "Backend": {"Type": "vxlan", "VNI": 4096, "Port": 4789}
    }
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: kube-flannel-ds
  namespace: kube-flannel
  labels:
    app: flannel
spec:
  selector:
    matchLabels:
      app: flannel
  template:
    metadata:
      labels:
        app: flannel
    spec:
      hostNetwork: true
      priorityClassName: system-node-critical
      tolerations:
      - operator: Exists
        effect: NoSchedule
      nodeSelector:
        kubernetes.io/os: linux
      containers:
      - name: kube-flannel
        image: docker.io/flannel/flannel:v0.26.1
        command: ["/opt/bin/flanneld"]
        args: ["--ip-masq", "--kube-subnet-mgr"]
        securityContext:
          privileged: true
        volumeMounts:
        - name: run
          mountPath: /run/flannel
      volumes:
      - name: run
        hostPath:
          path: /run/flannel
EOF
check "apply --server-side namespace + ConfigMap + DaemonSet" \
  k apply --server-side --field-manager=kwin -f "$WORK/flannel.yaml"
expect "ConfigMap read back (jsonpath)" "10.244.0.0/16" \
  bash -c "\"\$KUBECTL\" --kubeconfig \"\$KUBECONFIG\" -n kube-system get cm kube-flannel-cfg -o jsonpath='{.data.net-conf\.json}' | sed -n 's/.*\"Network\": \"\([^\"]*\)\".*/\1/p'"
expect "DaemonSet read back (jsonpath)" "docker.io/flannel/flannel:v0.26.1" \
  k -n kube-flannel get ds kube-flannel-ds -o jsonpath='{.spec.template.spec.containers[0].image}'
expect "managedFields record the field manager" "kwin" \
  k -n kube-flannel get ds kube-flannel-ds --show-managed-fields -o jsonpath='{.metadata.managedFields[0].manager}'

rv1="$(k -n kube-flannel get ds kube-flannel-ds -o jsonpath='{.metadata.resourceVersion}')"
check "apply --server-side of the same manifest again" \
  k apply --server-side --field-manager=kwin -f "$WORK/flannel.yaml"
rv2="$(k -n kube-flannel get ds kube-flannel-ds -o jsonpath='{.metadata.resourceVersion}')"
expect "DaemonSet unchanged by no-op server-side apply (resourceVersion)" "$rv1" echo "$rv2"

# ---------------------------------------------------------------- patch
check "patch DaemonSet nodeSelector (strategic merge)" \
  k -n kube-flannel patch ds kube-flannel-ds --type=strategic \
  -p '{"spec":{"template":{"spec":{"nodeSelector":{"kubernetes.io/os":"linux","kwin.io/flannel":"true"}}}}}'
expect "patched nodeSelector read back" "true linux" \
  k -n kube-flannel get ds kube-flannel-ds \
  -o jsonpath='{.spec.template.spec.nodeSelector.kwin\.io/flannel} {.spec.template.spec.nodeSelector.kubernetes\.io/os}'
check "patch removes a nodeSelector key (strategic merge, null)" \
  k -n kube-flannel patch ds kube-flannel-ds \
  -p '{"spec":{"template":{"spec":{"nodeSelector":{"kwin.io/flannel":null}}}}}'
expect "nodeSelector key removed" '{"kubernetes.io/os":"linux"}' \
  k -n kube-flannel get ds kube-flannel-ds -o jsonpath='{.spec.template.spec.nodeSelector}'
check "patch --type=merge on ConfigMap" \
  k -n kube-system patch cm kube-flannel-cfg --type=merge -p '{"data":{"extra":"1"}}'
check "patch --type=json on ConfigMap" \
  k -n kube-system patch cm kube-flannel-cfg --type=json -p '[{"op":"remove","path":"/data/extra"}]'

# --------------------------------------------------- client-side apply
cat >"$WORK/csa.yaml" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: kwin-client-side
  namespace: kube-system
data:
  a: "1"
EOF
check "client-side apply (create)" k apply -f "$WORK/csa.yaml"
check "client-side apply again reports unchanged" k apply -f "$WORK/csa.yaml"
out_has 'unchanged' || { FAIL=$((FAIL + 1)); FAILED+=("client-side apply unchanged text"); echo "FAIL - no 'unchanged' in: $(cat "$OUT")"; }
check "kubectl diff (server-side dry-run) shows no change" k diff -f "$WORK/csa.yaml"

# ---------------------------------------------------------------- CRDs
cat >"$WORK/crds.yaml" <<'EOF'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ippools.crd.projectcalico.org
spec:
  group: crd.projectcalico.org
  names:
    kind: IPPool
    listKind: IPPoolList
    plural: ippools
    singular: ippool
  scope: Cluster
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            properties:
              cidr: {type: string}
              blockSize: {type: integer}
              ipipMode: {type: string}
              vxlanMode: {type: string}
              natOutgoing: {type: boolean}
              nodeSelector: {type: string}
              disabled: {type: boolean}
            required: [cidr]
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: felixconfigurations.crd.projectcalico.org
spec:
  group: crd.projectcalico.org
  names:
    kind: FelixConfiguration
    listKind: FelixConfigurationList
    plural: felixconfigurations
    singular: felixconfiguration
  scope: Cluster
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
EOF
check "apply --server-side CRDs (IPPool, FelixConfiguration)" \
  k apply --server-side --field-manager=kwin -f "$WORK/crds.yaml"
check "CRDs become Established" \
  k wait --for=condition=Established --timeout=30s \
  crd/ippools.crd.projectcalico.org crd/felixconfigurations.crd.projectcalico.org
cat >"$WORK/ippool.yaml" <<'EOF'
apiVersion: crd.projectcalico.org/v1
kind: IPPool
metadata:
  name: default-ipv4-ippool
spec:
  cidr: 192.168.0.0/16
  blockSize: 26
  ipipMode: Never
  vxlanMode: Always
  natOutgoing: true
  nodeSelector: all()
---
apiVersion: crd.projectcalico.org/v1
kind: FelixConfiguration
metadata:
  name: default
spec:
  vxlanVNI: 4096
  vxlanPort: 4789
  bpfEnabled: false
EOF
# Discovery of a just-established CRD can lag by a moment on the client.
for _ in 1 2 3 4 5 6 7 8 9 10; do
  k get ippools.crd.projectcalico.org >/dev/null 2>&1 && break
  sleep 0.5
done
check "apply --server-side custom objects" \
  k apply --server-side --field-manager=kwin -f "$WORK/ippool.yaml"
rv1="$(k get ippool default-ipv4-ippool -o jsonpath='{.metadata.resourceVersion}')"
check "apply --server-side the same custom objects again" \
  k apply --server-side --field-manager=kwin -f "$WORK/ippool.yaml"
rv2="$(k get ippool default-ipv4-ippool -o jsonpath='{.metadata.resourceVersion}')"
expect "IPPool unchanged by second server-side apply (resourceVersion)" "$rv1" echo "$rv2"
expect "IPPool read back (jsonpath)" "192.168.0.0/16 Always" \
  k get ippool default-ipv4-ippool -o jsonpath='{.spec.cidr} {.spec.vxlanMode}'
expect "FelixConfiguration unknown fields preserved" "4096" \
  k get felixconfiguration default -o jsonpath='{.spec.vxlanVNI}'
cat >"$WORK/ippool-bad.yaml" <<'EOF'
apiVersion: crd.projectcalico.org/v1
kind: IPPool
metadata:
  name: bad-pool
spec:
  blockSize: 26
EOF
if k apply --server-side --field-manager=kwin -f "$WORK/ippool-bad.yaml" >"$OUT" 2>&1; then
  FAIL=$((FAIL + 1)); FAILED+=("CRD schema rejects missing cidr"); echo "FAIL - CRD schema rejects missing cidr"
else
  PASS=$((PASS + 1)); echo "ok   - CRD schema rejects missing required field (server-side validation)"
fi
cat >"$WORK/ippool-conflict.yaml" <<'EOF'
apiVersion: crd.projectcalico.org/v1
kind: IPPool
metadata:
  name: default-ipv4-ippool
spec:
  cidr: 192.168.0.0/16
  vxlanMode: Never
EOF
if k apply --server-side --field-manager=other -f "$WORK/ippool-conflict.yaml" >"$OUT" 2>&1; then
  FAIL=$((FAIL + 1)); FAILED+=("SSA conflict"); echo "FAIL - SSA conflict between field managers not reported"
else
  if out_has 'conflict'; then
    PASS=$((PASS + 1)); echo "ok   - SSA conflict between field managers reported"
  else
    FAIL=$((FAIL + 1)); FAILED+=("SSA conflict text"); echo "FAIL - unexpected SSA error: $(cat "$OUT")"
  fi
fi
check "apply --server-side --force-conflicts takes ownership" \
  k apply --server-side --field-manager=other --force-conflicts -f "$WORK/ippool-conflict.yaml"

# ---------------------------------------------------------- RuntimeClass
cat >"$WORK/runtimeclass.yaml" <<'EOF'
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: windows-2019
handler: runhcs-wcow-process
scheduling:
  nodeSelector:
    kubernetes.io/os: windows
    kubernetes.io/arch: amd64
    node.kubernetes.io/windows-build: "10.0.17763"
  tolerations:
  - key: os
    operator: Equal
    value: windows
    effect: NoSchedule
EOF
check "apply --server-side RuntimeClass node.k8s.io/v1" \
  k apply --server-side --field-manager=kwin -f "$WORK/runtimeclass.yaml"
expect "RuntimeClass read back (jsonpath)" "runhcs-wcow-process windows 10.0.17763 os=windows:NoSchedule" \
  k get runtimeclass windows-2019 \
  -o jsonpath='{.handler} {.scheduling.nodeSelector.kubernetes\.io/os} {.scheduling.nodeSelector.node\.kubernetes\.io/windows-build} {.scheduling.tolerations[0].key}={.scheduling.tolerations[0].value}:{.scheduling.tolerations[0].effect}'

# ----------------------------------------------------------------- Nodes
cat >"$WORK/nodes.yaml" <<'EOF'
apiVersion: v1
kind: Node
metadata:
  name: lin-1
  labels:
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: lin-1
---
apiVersion: v1
kind: Node
metadata:
  name: win-1
  labels:
    kubernetes.io/os: windows
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: win-1
    node.kubernetes.io/windows-build: "10.0.17763"
spec:
  taints:
  - key: os
    value: windows
    effect: NoSchedule
EOF
check "create Nodes (simulated registration)" k create -f "$WORK/nodes.yaml"
check "get nodes" k get nodes -o wide
if ! out_has '^win-1 ' || ! out_has '^lin-1 '; then
  FAIL=$((FAIL + 1)); FAILED+=("get nodes lists both"); echo "FAIL - get nodes: $(cat "$OUT")"
fi
expect "select Windows nodes by label" "win-1" \
  k get nodes -l kubernetes.io/os=windows -o jsonpath='{.items[*].metadata.name}'
check "label a node" k label node lin-1 kwin.io/role=worker
check "patch node status with a Ready condition (subresource)" \
  k patch node lin-1 --subresource=status --type=merge \
  -p '{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"simulated","lastHeartbeatTime":"2024-01-01T00:00:00Z","lastTransitionTime":"2024-01-01T00:00:00Z"}]}}'
expect "node Ready condition read back" "True" \
  k get node lin-1 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'

# ---------------------------------------------------- kubeadm against it
# up.sh ran kubeadm's upload-config and bootstrap-token phases.
expect "kubeadm-config ConfigMap uploaded (serviceSubnet)" "10.96.0.0/12" bash -c \
  '"$KUBECTL" --kubeconfig "$KUBECONFIG" -n kube-system get cm kubeadm-config -o jsonpath="{.data.ClusterConfiguration}" | sed -n "s/^ *serviceSubnet: //p"'
check "cluster-info ConfigMap in kube-public" k -n kube-public get cm cluster-info
check "kubeadm token create --print-join-command" \
  "$KUBEADM_BIN" token create --kubeconfig "$KUBECONFIG" --config "$KUBEADM_CONFIG" --print-join-command
out_has "^kubeadm join 127\.0\.0\.1:$APISERVER_PORT --token [a-z0-9]{6}\.[a-z0-9]{16} +--discovery-token-ca-cert-hash sha256:" ||
  { FAIL=$((FAIL + 1)); FAILED+=("join command text"); echo "FAIL - join command: $(cat "$OUT")"; }
check "kubeadm token list" "$KUBEADM_BIN" token list --kubeconfig "$KUBECONFIG"
out_has 'system:bootstrappers:kubeadm:default-node-token' ||
  { FAIL=$((FAIL + 1)); FAILED+=("token list groups"); echo "FAIL - token list: $(cat "$OUT")"; }

# --------------------------------------------------- no pods ever run
check "a Pod can be created" k run kwin-probe --image=registry.invalid/none:1 --restart=Never
expect "the Pod stays Pending, unscheduled (no scheduler/kubelet)" "Pending " \
  k get pod kwin-probe -o jsonpath='{.status.phase} {.spec.nodeName}'
check "ServiceAccount + TokenRequest (kubectl create token)" bash -c \
  '"$KUBECTL" --kubeconfig "$KUBECONFIG" -n kube-system create sa kwin-probe >/dev/null && "$KUBECTL" --kubeconfig "$KUBECONFIG" -n kube-system create token kwin-probe --duration=10m | grep -q "^eyJ"'
check "cordon + drain a node (no pods to evict)" bash -c \
  '"$KUBECTL" --kubeconfig "$KUBECONFIG" cordon lin-1 && "$KUBECTL" --kubeconfig "$KUBECONFIG" drain lin-1 --ignore-daemonsets --timeout=20s'
check "auth can-i as admin" k auth can-i '*' '*'

# ------------------------------------------- what a current API server adds
# Asserted so a change shows: what kubectl and kwin can rely on from the API server of a
# supported Kubernetes version (all GA since 1.27 or earlier).
check "openapi v3 served (GA in 1.27)" k get --raw /openapi/v3
check "openapi v2 served" k get --raw /openapi/v2
check "kubectl explain" k explain ds.spec.template.spec.nodeSelector
cat >"$WORK/unknown-field.yaml" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: kwin-unknown-field
  namespace: default
bogusField: 1
data:
  a: "1"
EOF
# Server-side field validation (GA in 1.27, KEP-2885): kubectl sends fieldValidation=Strict
# and the server rejects an unknown field itself.
if k apply -f "$WORK/unknown-field.yaml" >"$OUT" 2>&1; then
  FAIL=$((FAIL + 1)); FAILED+=("server-side validation"); echo "FAIL - unknown field accepted by kubectl apply"
elif out_has 'strict decoding error: unknown field "bogusField"'; then
  PASS=$((PASS + 1)); echo "ok   - unknown field rejected by the server's strict field validation"
else
  FAIL=$((FAIL + 1)); FAILED+=("server-side validation text"); echo "FAIL - unexpected: $(cat "$OUT")"
fi
if k apply --server-side --validate=false -f "$WORK/unknown-field.yaml" >"$OUT" 2>&1; then
  FAIL=$((FAIL + 1)); FAILED+=("SSA unknown field"); echo "FAIL - unknown field accepted by server-side apply"
elif out_has 'field not declared in schema'; then
  PASS=$((PASS + 1)); echo "ok   - server-side apply (validate=false) rejects unknown field on the server"
else
  FAIL=$((FAIL + 1)); FAILED+=("SSA unknown field text"); echo "FAIL - unexpected: $(cat "$OUT")"
fi
check "client-side apply --validate=false (fieldValidation=Ignore): server drops unknown field" \
  k apply --validate=false -f "$WORK/unknown-field.yaml"
expect "dropped field is absent from the stored object" "" \
  k get cm kwin-unknown-field -o jsonpath='{.bogusField}'
# SelfSubjectReview (GA in 1.28): admin.conf's user is kubernetes-admin in the group
# kubeadm:cluster-admins (kubeadm 1.29+), not system:masters.
check "kubectl auth whoami" k auth whoami -o jsonpath='{.status.userInfo.username} {.status.userInfo.groups}'
out_has '^kubernetes-admin .*kubeadm:cluster-admins' ||
  { FAIL=$((FAIL + 1)); FAILED+=("whoami groups"); echo "FAIL - whoami: $(cat "$OUT")"; }

echo "selftest: $PASS passed, $FAIL failed"
if [[ $FAIL -ne 0 ]]; then
  printf 'selftest: failed: %s\n' "${FAILED[@]}"
  exit 1
fi
