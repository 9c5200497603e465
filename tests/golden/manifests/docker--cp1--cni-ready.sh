[ -r /etc/kubernetes/admin.conf ] || { printf '%s\n' '/etc/kubernetes/admin.conf does not exist' >&2; exit 1; }
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
kw_check() {
unserved=''
if ! kubectl --kubeconfig /etc/kubernetes/admin.conf get DaemonSet -n kube-flannel -o jsonpath='{range .items[*]}{.metadata.name}{"\t"}{.metadata.generation}{"\t"}{.status.observedGeneration}{"\t"}{.status.desiredNumberScheduled}{"\t"}{.status.updatedNumberScheduled}{"\t"}{.status.numberAvailable}{"\n"}{end}' > "$d/rows" 2> "$d/err"; then
  if grep -q -e "doesn't have a resource type" -e 'could not find the requested resource' -e 'no matches for kind' "$d/err"; then
    : > "$d/rows"; unserved="kind DaemonSet is not served by the API server yet"
  else return 2; fi
fi
awk -v want=kube-flannel-ds -v label='daemonset kube-flannel/' -v cond='' -v unserved="$unserved" '
BEGIN { FS = "\t"; nw = split(want, w, " "); for (i = 1; i <= nw; i++) wanted[w[i]] = 1 }
($1 in wanted) && !($1 in seen) {
  seen[$1] = 1
  gen = $2 + 0; obs = $3 + 0; want = $4 + 0; upd = $5 + 0; av = $6 + 0
  if (obs < gen) print "no " $1 " " label $1 ": generation " gen " not observed yet"
  else if (upd < want) print "no " $1 " " label $1 ": " upd " of " want " updated"
  else if (av < want) print "no " $1 " " label $1 ": " av " of " want " ready"
  else print "ok " $1
}
END { for (i = 1; i <= nw; i++) if (!(w[i] in seen)) print "no " w[i] " " label w[i] ": " ((unserved != "") ? unserved : "not found") }
' "$d/rows"
}
deadline=$(( $(date +%s) + 300 ))
while :; do
  kw_check > "$d/report"; rc=$?
  if [ $rc -eq 0 ] && ! grep -q '^no ' "$d/report"; then break; fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    printf '%s\n' 'timed out after 300s waiting for DaemonSet kube-flannel-ds to roll out:' >&2
    if [ $rc -ne 0 ]; then cat "$d/err" >&2; else sed -n 's/^no [^ ]* /  /p' "$d/report" >&2; fi
    exit 1
  fi
  sleep 5
done
