#!/bin/sh
# The floor of a cluster build: what a person does by hand on every node, following
# kubernetes.io "Installing kubeadm" and "Container runtimes" (containerd from its release
# tarball, its unit, runc, kubeadm/kubelet/kubectl from pkgs.k8s.io), with the same settings
# kwin's lab plan gives (restrict_oom_score_adj: the lab's machine withholds CAP_SYS_RESOURCE,
# lab/cluster/README.md). One shell script per host, no checks beyond `set -e`.
#
#   ssh HOST sh -s < node.sh   with MIRROR REGISTRY K8S CONTAINERD RUNC PAUSE in the environment
#   (bench/cluster_floor.py runs it; it is not a kwin test)
set -eu
: "${MIRROR:?}" "${REGISTRY:?}" "${K8S:?}" "${CONTAINERD:?}" "${RUNC:?}" "${PAUSE:?}"
MINOR=${K8S%.*}
GH=$MIRROR/github.com
RAW=$MIRROR/raw.githubusercontent.com

# kernel prerequisites (the modules are built into the lab's kernel) and swap
cat >/etc/sysctl.d/k8s.conf <<EOF
net.bridge.bridge-nf-call-iptables = 1
net.ipv4.ip_forward = 1
EOF
sysctl -p /etc/sysctl.d/k8s.conf >/dev/null
swapoff -a

# containerd, runc and the unit
curl -fsSL "$GH/containerd/containerd/releases/download/v$CONTAINERD/containerd-$CONTAINERD-linux-amd64.tar.gz" |
  tar -xz -C /usr/local
curl -fsSL -o /usr/local/sbin/runc "$GH/opencontainers/runc/releases/download/v$RUNC/runc.amd64"
chmod 0755 /usr/local/sbin/runc
curl -fsSL -o /etc/systemd/system/containerd.service "$RAW/containerd/containerd/v$CONTAINERD/containerd.service"
mkdir -p /etc/containerd
cat >/etc/containerd/config.toml <<EOF
version = 3
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = 'registry.k8s.io/pause:$PAUSE'
[plugins.'io.containerd.cri.v1.images'.registry]
  config_path = '/etc/containerd/certs.d'
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = 'io.containerd.runc.v2'
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = false
EOF
for r in registry.k8s.io ghcr.io; do
  mkdir -p "/etc/containerd/certs.d/$r"
  printf 'server = "https://%s"\n\n[host."%s"]\n  capabilities = ["pull", "resolve"]\n' "$r" "$REGISTRY" \
    >"/etc/containerd/certs.d/$r/hosts.toml"
done
systemctl daemon-reload
systemctl enable --now containerd

# kubeadm, kubelet, kubectl
mkdir -p /etc/apt/keyrings
curl -fsSL "$MIRROR/pkgs.k8s.io/core:/stable:/v$MINOR/deb/Release.key" |
  gpg --batch --yes --dearmor -o /etc/apt/keyrings/kubernetes-apt-keyring.gpg
echo "deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] $MIRROR/pkgs.k8s.io/core:/stable:/v$MINOR/deb/ /" \
  >/etc/apt/sources.list.d/kubernetes.list
apt-get update -q >/dev/null
# --allow-downgrades: the lab's machine (whose files the hosts see) carries the Cloud SDK's
# kubectl package, version 1:528.0.0-0, above pkgs.k8s.io's (kwin's package module passes it too)
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades kubelet="$K8S-1.1" kubeadm="$K8S-1.1" kubectl="$K8S-1.1" >/dev/null
apt-mark hold kubelet kubeadm kubectl >/dev/null
systemctl enable kubelet
