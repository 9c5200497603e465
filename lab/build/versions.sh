# shellcheck shell=bash
# shellcheck disable=SC2034 # read by the scripts that source this file
# The exact versions of every real program the lab builds from its published Go module (see
# build.sh). Sourced by build.sh, images.sh and the lab cluster scripts; tests read the same
# file (testkit). Each version names the upstream source that decides it.
#
# Kubernetes: the newest minor kwin supports, at the patch release the Go module proxy serves
# (k8s.io/kubernetes v1.37.2); the lab plan (lab/cluster/plan.toml) uses LAB_K8S_NEWEST. The
# previous minor (LAB_K8S_PREVIOUS, for an upgrade on real components) is built only when
# asked: LAB_K8S_FULL="1.36.3 1.37.2" (each full build is about 2,900 Go packages).
LAB_K8S_FULL="${LAB_K8S_FULL:-1.37.2}"
LAB_K8S_NEWEST="1.37.2"
LAB_K8S_PREVIOUS="1.36.3"
# kube-apiserver only, for checking kwin's manifests against the API server of an older
# minor that no cluster test runs (tests/e2e_real_api.rs wants 1.34 to 1.37): built only when
# asked (LAB_K8S_APISERVER_ONLY="1.34.4").
LAB_K8S_APISERVER_ONLY="${LAB_K8S_APISERVER_ONLY:-}"

# What kubeadm of each Kubernetes version the lab can build deploys (cmd/kubeadm/app/
# constants/constants.go of k8s.io/kubernetes at that tag: DefaultEtcdVersion /
# SupportedEtcdVersion, CoreDNSVersion, PauseVersion; the pause tag is also
# build/pause/Makefile's TAG). `lab_kubeadm_images V` prints "ETCD COREDNS PAUSE".
#   1.35.4: etcd 3.6.6-0, CoreDNS v1.13.1, pause 3.10.1 (for the containerd 1.7 -> 2.x move:
#           1.35 is the last minor that supports containerd 1.x)
#   1.36.3: etcd 3.6.8-0, CoreDNS v1.14.2, pause 3.10.2
#   1.37.2: etcd 3.7.0-0, CoreDNS v1.14.6, pause 3.10.2
lab_kubeadm_images() {
  case $1 in
    1.35.4) echo "3.6.6 1.13.1 3.10.1" ;;
    1.36.3) echo "3.6.8 1.14.2 3.10.2" ;;
    1.37.2) echo "3.7.0 1.14.6 3.10.2" ;;
    *) return 1 ;;
  esac
}
# The minor before LAB_K8S_PREVIOUS: the last that supports containerd 1.x (built only when
# asked: LAB_K8S_FULL="1.35.4 1.37.2" for tests/e2e_real_cluster.rs's containerd move).
LAB_K8S_CONTAINERD1="1.35.4"
# The Kubernetes versions the lab serves (images in its registry, packages in its mirror):
# those asked for and every one this machine built before, so that a later build of fewer
# versions does not take away what another test starts its cluster at.
LAB_K8S_SERVED=""
for _v in $LAB_K8S_FULL $LAB_K8S_NEWEST $LAB_K8S_PREVIOUS $LAB_K8S_CONTAINERD1; do
  if [[ " $LAB_K8S_FULL " == *" $_v "* || -f ${KWIN_LAB_CACHE:-/var/cache/kwin-lab}/bin/kubernetes-$_v/.stamp ]] &&
    [[ " $LAB_K8S_SERVED " != *" $_v "* ]]; then
    LAB_K8S_SERVED="${LAB_K8S_SERVED:+$LAB_K8S_SERVED }$_v"
  fi
done
# etcd, CoreDNS and pause: what the Kubernetes versions served here deploy, each once.
LAB_ETCD="" LAB_COREDNS="" LAB_PAUSE=""
for _v in $LAB_K8S_SERVED; do
  read -r _e _c _p < <(lab_kubeadm_images "$_v" || echo "")
  [[ -n ${_e:-} ]] || { echo "versions.sh: no kubeadm images known for Kubernetes $_v" >&2; exit 1; }
  [[ " $LAB_ETCD " == *" $_e "* ]] || LAB_ETCD="${LAB_ETCD:+$LAB_ETCD }$_e"
  [[ " $LAB_COREDNS " == *" $_c "* ]] || LAB_COREDNS="${LAB_COREDNS:+$LAB_COREDNS }$_c"
  [[ " $LAB_PAUSE " == *" $_p "* ]] || LAB_PAUSE="${LAB_PAUSE:+$LAB_PAUSE }$_p"
done
unset _v _e _c _p

# containerd: 2.3 is the LTS branch and 2.4 the newest (containerd RELEASES.md, "Current
# State of containerd Releases" and the Kubernetes support table: 1.36 needs 2.2.0+/2.3.0+);
# 1.7 for the move of an existing 1.7 node to 2.x (1.7 is supported by Kubernetes up to 1.35).
LAB_CONTAINERD="1.7.29 2.3.7"
# runc and the CNI plugins: the defaults of kwin's support matrix (engine/src/plan/versions.toml)
LAB_RUNC="1.5.3"
# (containerd v2.3.4 tests with runc v1.4.3 and plugins v1.9.1: script/setup/runc-version, go.mod)
LAB_CNI_PLUGINS="1.10.0"
# flannel (flannel-io/flannel releases) and the manifest of that tag
# (Documentation/kube-flannel.yml, shipped in the module).
LAB_FLANNEL="0.28.10"
# The flannel CNI plugin. flannel-io/cni-plugin is not served by the Go module proxy (403 for
# every version and its list); its code was split out of containernetworking/plugins, whose
# v0.9.1 still holds it (plugins/meta/flannel; v1.0.0 dropped it). The lab builds that source
# and serves it under the image name kube-flannel.yml asks for.
LAB_FLANNEL_CNI_SOURCE="0.9.1"
# crictl (kubernetes-sigs/cri-tools: the release of the newest minor)
LAB_CRICTL="1.37.0"
# The lab's container registry (distribution/distribution v3) and crane
# (google/go-containerregistry), which builds and pushes the images offline.
LAB_REGISTRY="3.1.2"
LAB_CRANE="0.22.1"
