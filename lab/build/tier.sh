# shellcheck shell=bash
# Where the Kubernetes API tier's programs are (sourced after versions.sh): by build.sh's
# `tier` component, lab/apiserver's scripts, and read the same way by testkit (src/api.rs).
#
# The tier runs kube-apiserver, kubeadm and kubectl of LAB_K8S_NEWEST and the etcd that
# version's kubeadm deploys (lab_kubeadm_images). The three Kubernetes commands come from the
# full build of that version (bin/kubernetes-V) when this machine has one, else from the
# tier's own partial build (bin/kube-tier-V), which the full build supersedes.

# lab_k8s_full_has VERSION PROGRAM...: the full build of VERSION has every PROGRAM.
lab_k8s_full_has() {
  local d="${KWIN_LAB_CACHE:-/var/cache/kwin-lab}/bin/kubernetes-$1" p
  shift
  [[ -f "$d/.stamp" ]] || return 1
  for p in "$@"; do [[ -x "$d/$p" ]] || return 1; done
}

# lab_tier_bins: print the tier's kube-apiserver, kubeadm, kubectl and etcd, one path a line;
# fail (printing nothing) when one is missing.
lab_tier_bins() {
  local cache="${KWIN_LAB_CACHE:-/var/cache/kwin-lab}" v=$LAB_K8S_NEWEST d e
  if lab_k8s_full_has "$v" kube-apiserver kubeadm kubectl; then
    d="$cache/bin/kubernetes-$v"
  else
    d="$cache/bin/kube-tier-$v"
  fi
  read -r e _ _ < <(lab_kubeadm_images "$v") || return 1
  local out=("$d/kube-apiserver" "$d/kubeadm" "$d/kubectl" "$cache/bin/etcd-$e/etcd") p
  for p in "${out[@]}"; do [[ -x $p ]] || return 1; done
  printf '%s\n' "${out[@]}"
}
