# onlyif
# Calico's IPAM and Felix settings, written in the API group the tigera-operator installed.
# Included by recipe cni-calico's step `calico-ipam-felix`: its `onlyif` calls kw_differs,
# its `run` calls kw_apply.
#
# The operator picks the group when it starts
# (tigera/operator@40788b9b6bef9d94e77b2e0d7a5eed7e17e2364c pkg/apis/version.go `useV3CRDs`):
# crd.projectcalico.org/v1 when that group is served (an existing or upgraded cluster keeps
# it); on a brand-new cluster projectcalico.org/v3 when the cluster can serve
# MutatingAdmissionPolicy (Kubernetes 1.36+), v1 otherwise. It installs that group's CRDs, so
# the group is read from the cluster, never from the plan's versions.
#   v1: ipamconfigs.crd.projectcalico.org (kind IPAMConfig),
#       felixconfigurations.crd.projectcalico.org (kind FelixConfiguration);
#   v3: ipamconfigurations.projectcalico.org (kind IPAMConfiguration),
#       felixconfigurations.projectcalico.org (kind FelixConfiguration)
#       (projectcalico/calico api/config/crd/projectcalico.org_ipamconfigurations.yaml and
#       projectcalico.org_felixconfigurations.yaml).
# The spec fields kwin sets have the same names in both. Both groups' CRDs established counts
# as v1, the operator's rule; newer operators (tigera/operator@0c8ed74ee3c8445dc28b5094cb6511ae3d94ac72,
# same file) also take v3 once a DatastoreMigration to v3 finished, which this script does not
# read.
#
# Linux nodes must not borrow addresses from blocks affine to Windows nodes (strict affinity);
# Windows nodes support neither IP-in-IP nor BGP (VXLAN only, IP-in-IP off).
k="kubectl --kubeconfig /etc/kubernetes/admin.conf"
# Felix's VXLAN settings, named as its fields.
vxlanVNI=4096
vxlanPort=4789

# Whether a CRD is established (its condition Established is True: the API server serves it).
kw_established() {
  [ "$($k --request-timeout=10s get crd "$1" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" = True ]
}

# The group whose IPAM and Felix CRDs are both established: sets api, ipam_kind, ipam, felix;
# fails when neither group's are.
kw_group() {
  if kw_established ipamconfigs.crd.projectcalico.org &&
    kw_established felixconfigurations.crd.projectcalico.org; then
    api=crd.projectcalico.org/v1 ipam_kind=IPAMConfig
    ipam=ipamconfigs.crd.projectcalico.org felix=felixconfigurations.crd.projectcalico.org
  elif kw_established ipamconfigurations.projectcalico.org &&
    kw_established felixconfigurations.projectcalico.org; then
    api=projectcalico.org/v3 ipam_kind=IPAMConfiguration
    ipam=ipamconfigurations.projectcalico.org felix=felixconfigurations.projectcalico.org
  else
    return 1
  fi
}

# Succeeds when the objects must be written: no cluster to ask yet, neither group served yet,
# or a field kwin sets differs. Reads only, never waits.
kw_differs() {
  command -v kubectl >/dev/null 2>&1 || return 0
  [ -r /etc/kubernetes/admin.conf ] || return 0
  kw_group || return 0
  [ "$($k --request-timeout=10s get "$ipam" default -o jsonpath='{.spec.strictAffinity} {.spec.autoAllocateBlocks}' 2>/dev/null)" = "true true" ] || return 0
  [ "$($k --request-timeout=10s get "$felix" default -o jsonpath='{.spec.ipipEnabled} {.spec.vxlanEnabled} {.spec.vxlanVNI} {.spec.vxlanPort}' 2>/dev/null)" = "false true $vxlanVNI $vxlanPort" ] || return 0
  return 1
}

# Waits up to 5 minutes for one group's CRDs to be established, then applies both objects
# there, server-side with kwin's field manager (as kube_apply does).
kw_apply() {
  deadline=$(($(date +%s) + 300))
  until kw_group; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "kwin: timed out after 300s waiting for Calico's CRDs: neither ipamconfigs.crd.projectcalico.org and felixconfigurations.crd.projectcalico.org (crd.projectcalico.org/v1) nor ipamconfigurations.projectcalico.org and felixconfigurations.projectcalico.org (projectcalico.org/v3) are established; the tigera-operator installs one of the two groups when it runs (kubectl -n tigera-operator logs deployment/tigera-operator)" >&2
      return 1
    fi
    sleep 5
  done
  echo "kwin: Calico serves $api"
  tries=0
  until $k --request-timeout=30s apply --server-side --field-manager=kwin --force-conflicts -f - <<KWIN_CALICO
apiVersion: $api
kind: $ipam_kind
metadata:
  name: default
spec:
  strictAffinity: true
  autoAllocateBlocks: true
---
apiVersion: $api
kind: FelixConfiguration
metadata:
  name: default
spec:
  ipipEnabled: false
  vxlanEnabled: true
  vxlanVNI: $vxlanVNI
  vxlanPort: $vxlanPort
KWIN_CALICO
  do
    # A CRD just established may not be in kubectl's discovery yet: a few more tries.
    tries=$((tries + 1))
    if [ "$tries" -ge 3 ]; then
      echo "kwin: could not apply IPAM and Felix settings in $api" >&2
      return 1
    fi
    sleep 5
  done
}

kw_differs
# run
# Calico's IPAM and Felix settings, written in the API group the tigera-operator installed.
# Included by recipe cni-calico's step `calico-ipam-felix`: its `onlyif` calls kw_differs,
# its `run` calls kw_apply.
#
# The operator picks the group when it starts
# (tigera/operator@40788b9b6bef9d94e77b2e0d7a5eed7e17e2364c pkg/apis/version.go `useV3CRDs`):
# crd.projectcalico.org/v1 when that group is served (an existing or upgraded cluster keeps
# it); on a brand-new cluster projectcalico.org/v3 when the cluster can serve
# MutatingAdmissionPolicy (Kubernetes 1.36+), v1 otherwise. It installs that group's CRDs, so
# the group is read from the cluster, never from the plan's versions.
#   v1: ipamconfigs.crd.projectcalico.org (kind IPAMConfig),
#       felixconfigurations.crd.projectcalico.org (kind FelixConfiguration);
#   v3: ipamconfigurations.projectcalico.org (kind IPAMConfiguration),
#       felixconfigurations.projectcalico.org (kind FelixConfiguration)
#       (projectcalico/calico api/config/crd/projectcalico.org_ipamconfigurations.yaml and
#       projectcalico.org_felixconfigurations.yaml).
# The spec fields kwin sets have the same names in both. Both groups' CRDs established counts
# as v1, the operator's rule; newer operators (tigera/operator@0c8ed74ee3c8445dc28b5094cb6511ae3d94ac72,
# same file) also take v3 once a DatastoreMigration to v3 finished, which this script does not
# read.
#
# Linux nodes must not borrow addresses from blocks affine to Windows nodes (strict affinity);
# Windows nodes support neither IP-in-IP nor BGP (VXLAN only, IP-in-IP off).
k="kubectl --kubeconfig /etc/kubernetes/admin.conf"
# Felix's VXLAN settings, named as its fields.
vxlanVNI=4096
vxlanPort=4789

# Whether a CRD is established (its condition Established is True: the API server serves it).
kw_established() {
  [ "$($k --request-timeout=10s get crd "$1" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" = True ]
}

# The group whose IPAM and Felix CRDs are both established: sets api, ipam_kind, ipam, felix;
# fails when neither group's are.
kw_group() {
  if kw_established ipamconfigs.crd.projectcalico.org &&
    kw_established felixconfigurations.crd.projectcalico.org; then
    api=crd.projectcalico.org/v1 ipam_kind=IPAMConfig
    ipam=ipamconfigs.crd.projectcalico.org felix=felixconfigurations.crd.projectcalico.org
  elif kw_established ipamconfigurations.projectcalico.org &&
    kw_established felixconfigurations.projectcalico.org; then
    api=projectcalico.org/v3 ipam_kind=IPAMConfiguration
    ipam=ipamconfigurations.projectcalico.org felix=felixconfigurations.projectcalico.org
  else
    return 1
  fi
}

# Succeeds when the objects must be written: no cluster to ask yet, neither group served yet,
# or a field kwin sets differs. Reads only, never waits.
kw_differs() {
  command -v kubectl >/dev/null 2>&1 || return 0
  [ -r /etc/kubernetes/admin.conf ] || return 0
  kw_group || return 0
  [ "$($k --request-timeout=10s get "$ipam" default -o jsonpath='{.spec.strictAffinity} {.spec.autoAllocateBlocks}' 2>/dev/null)" = "true true" ] || return 0
  [ "$($k --request-timeout=10s get "$felix" default -o jsonpath='{.spec.ipipEnabled} {.spec.vxlanEnabled} {.spec.vxlanVNI} {.spec.vxlanPort}' 2>/dev/null)" = "false true $vxlanVNI $vxlanPort" ] || return 0
  return 1
}

# Waits up to 5 minutes for one group's CRDs to be established, then applies both objects
# there, server-side with kwin's field manager (as kube_apply does).
kw_apply() {
  deadline=$(($(date +%s) + 300))
  until kw_group; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "kwin: timed out after 300s waiting for Calico's CRDs: neither ipamconfigs.crd.projectcalico.org and felixconfigurations.crd.projectcalico.org (crd.projectcalico.org/v1) nor ipamconfigurations.projectcalico.org and felixconfigurations.projectcalico.org (projectcalico.org/v3) are established; the tigera-operator installs one of the two groups when it runs (kubectl -n tigera-operator logs deployment/tigera-operator)" >&2
      return 1
    fi
    sleep 5
  done
  echo "kwin: Calico serves $api"
  tries=0
  until $k --request-timeout=30s apply --server-side --field-manager=kwin --force-conflicts -f - <<KWIN_CALICO
apiVersion: $api
kind: $ipam_kind
metadata:
  name: default
spec:
  strictAffinity: true
  autoAllocateBlocks: true
---
apiVersion: $api
kind: FelixConfiguration
metadata:
  name: default
spec:
  ipipEnabled: false
  vxlanEnabled: true
  vxlanVNI: $vxlanVNI
  vxlanPort: $vxlanPort
KWIN_CALICO
  do
    # A CRD just established may not be in kubectl's discovery yet: a few more tries.
    tries=$((tries + 1))
    if [ "$tries" -ge 3 ]; then
      echo "kwin: could not apply IPAM and Felix settings in $api" >&2
      return 1
    fi
    sleep 5
  done
}

kw_apply
