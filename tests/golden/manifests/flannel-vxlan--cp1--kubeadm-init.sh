[ -r /etc/kubernetes/kubeadm-config.yaml ] || { printf '%s\n' '/etc/kubernetes/kubeadm-config.yaml does not exist' >&2; exit 1; }
umask 077
mkdir -p "$(dirname /var/log/kwin/kubeadm-init.log)" || exit 1
if ! kubeadm init --config /etc/kubernetes/kubeadm-config.yaml --skip-token-print --skip-certificate-key-print > /var/log/kwin/kubeadm-init.log 2>&1; then
  printf '%s\n' 'kubeadm init failed; the last lines of /var/log/kwin/kubeadm-init.log:' >&2
  tail -n 25 /var/log/kwin/kubeadm-init.log | sed -e 's/[0-9a-f]\{64\}/***/g' -e 's/[a-z0-9]\{6\}\.[a-z0-9]\{16\}/***/g' >&2
  exit 1
fi
[ -e /etc/kubernetes/admin.conf ] || { printf '%s\n' 'kubeadm init succeeded but did not write /etc/kubernetes/admin.conf' >&2; exit 1; }
