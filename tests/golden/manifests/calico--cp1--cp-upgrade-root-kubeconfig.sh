# unless
cmp -s /etc/kubernetes/admin.conf /root/.kube/config
# run
install -m 0600 /etc/kubernetes/admin.conf /root/.kube/config
