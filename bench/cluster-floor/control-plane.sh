#!/bin/sh
# The floor, first control plane (after node.sh): kubeadm init with the lab plan's settings,
# root's kubeconfig, flannel, then the join command on the last line of output.
#
#   ssh HOST sh -s < control-plane.sh   with MIRROR K8S FLANNEL NODE POD_CIDR in the environment
set -eu
: "${MIRROR:?}" "${K8S:?}" "${FLANNEL:?}" "${NODE:?}" "${POD_CIDR:?}"
cat >/root/kubeadm.yaml <<EOF
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
nodeRegistration:
  name: $NODE
  criSocket: unix:///run/containerd/containerd.sock
  ignorePreflightErrors:
    - SystemVerification
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v$K8S
networking:
  podSubnet: $POD_CIDR
  serviceSubnet: 10.96.0.0/12
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
---
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
conntrack:
  maxPerCore: 0
EOF
kubeadm init --config /root/kubeadm.yaml >/root/kubeadm-init.log 2>&1 || { tail -n 30 /root/kubeadm-init.log >&2; exit 1; }
mkdir -p /root/.kube
install -m 0600 /etc/kubernetes/admin.conf /root/.kube/config
curl -fsSL "$MIRROR/raw.githubusercontent.com/flannel-io/flannel/v$FLANNEL/Documentation/kube-flannel.yml" |
  sed "s|\"Network\": \"10.244.0.0/16\"|\"Network\": \"$POD_CIDR\"|" | kubectl apply -f - >/dev/null
kubeadm token create --print-join-command 2>/dev/null | tail -n 1
