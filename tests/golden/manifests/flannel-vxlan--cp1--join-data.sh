[ -r /etc/kubernetes/admin.conf ] || { printf '%s\n' '/etc/kubernetes/admin.conf does not exist' >&2; exit 1; }
[ -r /etc/kubernetes/pki/ca.crt ] || { printf '%s\n' '/etc/kubernetes/pki/ca.crt does not exist' >&2; exit 1; }
command -v openssl >/dev/null 2>&1 || { echo 'openssl is not installed (needed for the CA certificate hash)' >&2; exit 1; }
token=$(kubeadm token create --kubeconfig /etc/kubernetes/admin.conf --ttl 7200s --description 'kwin join' | tail -n 1) || { echo 'kubeadm token create failed' >&2; exit 1; }
printf '%s\n' "$token" | grep -Eq '^[a-z0-9]{6}\.[a-z0-9]{16}$' || { echo 'kubeadm token create printed no token' >&2; exit 1; }
hash=$(openssl x509 -pubkey -noout -in /etc/kubernetes/pki/ca.crt | openssl pkey -pubin -outform der | sha256sum | cut -d' ' -f1)
printf '%s\n' "$hash" | grep -Eq '^[0-9a-f]{64}$' || { printf '%s\n' 'cannot compute the CA public key hash of /etc/kubernetes/pki/ca.crt' >&2; exit 1; }
printf 'token=%s\n' "$token"
printf 'ca_cert_hash=sha256:%s\n' "$hash"
printf 'api_endpoint=%s\n' 192.168.56.10:6443
