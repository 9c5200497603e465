umask 077
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
v=$(kubeadm version -o short 2>/dev/null)
minor=$(printf '%s' "$v" | sed -n 's/^v1\.\([0-9][0-9]*\)\..*/\1/p')
[ -n "$minor" ] || { echo "cannot tell the kubeadm version (kubeadm version -o short: $v)" >&2; exit 1; }
if [ "$minor" -ge 31 ]; then
cat > "$d/join.yaml" <<'KWIN_JOIN_CONFIG'
{
  "apiVersion": "kubeadm.k8s.io/v1beta4",
  "discovery": {
    "bootstrapToken": {
      "apiServerEndpoint": "192.168.56.10:6443",
      "caCertHashes": [
        "sha256:0000000000000000000000000000000000000000000000000000000000000000"
      ],
      "token": "abcdef.0123456789abcdef"
    }
  },
  "kind": "JoinConfiguration",
  "nodeRegistration": {
    "criSocket": "unix:///run/containerd/containerd.sock",
    "kubeletExtraArgs": [
      {
        "name": "node-ip",
        "value": "192.168.56.11"
      }
    ],
    "name": "lw1"
  }
}
KWIN_JOIN_CONFIG
elif [ "$minor" -ge 22 ]; then
cat > "$d/join.yaml" <<'KWIN_JOIN_CONFIG'
{
  "apiVersion": "kubeadm.k8s.io/v1beta3",
  "discovery": {
    "bootstrapToken": {
      "apiServerEndpoint": "192.168.56.10:6443",
      "caCertHashes": [
        "sha256:0000000000000000000000000000000000000000000000000000000000000000"
      ],
      "token": "abcdef.0123456789abcdef"
    }
  },
  "kind": "JoinConfiguration",
  "nodeRegistration": {
    "criSocket": "unix:///run/containerd/containerd.sock",
    "kubeletExtraArgs": {
      "node-ip": "192.168.56.11"
    },
    "name": "lw1"
  }
}
KWIN_JOIN_CONFIG
else
cat > "$d/join.yaml" <<'KWIN_JOIN_CONFIG'
{
  "apiVersion": "kubeadm.k8s.io/v1beta2",
  "discovery": {
    "bootstrapToken": {
      "apiServerEndpoint": "192.168.56.10:6443",
      "caCertHashes": [
        "sha256:0000000000000000000000000000000000000000000000000000000000000000"
      ],
      "token": "abcdef.0123456789abcdef"
    }
  },
  "kind": "JoinConfiguration",
  "nodeRegistration": {
    "criSocket": "unix:///run/containerd/containerd.sock",
    "kubeletExtraArgs": {
      "node-ip": "192.168.56.11"
    },
    "name": "lw1"
  }
}
KWIN_JOIN_CONFIG
fi
kubeadm join --config "$d/join.yaml"
