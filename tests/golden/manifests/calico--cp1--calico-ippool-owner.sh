# onlyif
k="kubectl --kubeconfig /etc/kubernetes/admin.conf --request-timeout=30s"
for pools in ippools.crd.projectcalico.org ippools.projectcalico.org; do
  owners=$($k get "$pools" default-ipv4-ippool -o jsonpath='{.metadata.labels.app\.kubernetes\.io/managed-by}{"|,"}{range .metadata.managedFields[*]}{.manager}{","}{end}' 2>/dev/null) || continue
  case "$owners" in "|"*",kwin,"*) exit 0 ;; *) exit 1 ;; esac
done
exit 1
# run
k="kubectl --kubeconfig /etc/kubernetes/admin.conf --request-timeout=30s"
for pools in ippools.crd.projectcalico.org ippools.projectcalico.org; do
  if $k get "$pools" default-ipv4-ippool >/dev/null 2>&1; then
    exec $k label "$pools" default-ipv4-ippool app.kubernetes.io/managed-by=tigera-operator
  fi
done
echo "kwin: IP pool default-ipv4-ippool not found in crd.projectcalico.org/v1 or projectcalico.org/v3" >&2
exit 1
