[ -r /etc/kubernetes/admin.conf ] || { printf '%s\n' '/etc/kubernetes/admin.conf does not exist' >&2; exit 1; }
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
unserved=''
kw_eval() {
awk -v want=kube-proxy -v label='daemonset kube-system/' -v cond='' -v optional=1 -v unserved="$unserved" '
BEGIN { FS = "\037"; nw = split(want, w, " "); for (i = 1; i <= nw; i++) wanted[w[i]] = 1 }
($2 in wanted) { if ($1 == "DELETED") delete row[$2]; else row[$2] = $0 }
END {
  for (i = 1; i <= nw; i++) {
    if (!(w[i] in row)) {
      if (optional && unserved == "") print "ok " w[i]
      else print "no " w[i] " " label w[i] ": " ((unserved != "") ? unserved : "not found")
      continue
    }
    $0 = row[w[i]]
    gen = $3 + 0; obs = $4 + 0; want = $5 + 0; upd = $6 + 0; av = $7 + 0
    if (obs < gen) print "no " $2 " " label $2 ": generation " gen " not observed yet"
    else if (upd < want) print "no " $2 " " label $2 ": " upd " of " want " updated"
    else if (av < want) print "no " $2 " " label $2 ": " av " of " want " ready"
    else print "ok " $2
  }
}'
}
kw_check() {
unserved=''
if ! kubectl --kubeconfig /etc/kubernetes/admin.conf get DaemonSet -n kube-system -o jsonpath='{range .items[*]}-{"\x1f"}{.metadata.name}{"\x1f"}{.metadata.generation}{"\x1f"}{.status.observedGeneration}{"\x1f"}{.status.desiredNumberScheduled}{"\x1f"}{.status.updatedNumberScheduled}{"\x1f"}{.status.numberAvailable}{"\n"}{end}' > "$d/rows" 2> "$d/err"; then
  if grep -q -e "doesn't have a resource type" -e 'could not find the requested resource' -e 'no matches for kind' "$d/err"; then
    : > "$d/rows"; unserved="kind DaemonSet is not served by the API server yet"
  else return 2; fi
fi
kw_eval < "$d/rows"
}
deadline=$(( $(date +%s) + 600 ))
wp=''
trap '[ -z "$wp" ] || kill "$wp" 2>/dev/null; rm -rf "$d"' EXIT
mkfifo "$d/events" || exit 1
while :; do
  now=$(date +%s)
  if [ "$now" -ge "$deadline" ]; then
    kw_check > "$d/report"; rc=$?
    if [ $rc -eq 0 ] && ! grep -q '^no ' "$d/report"; then exit 0; fi
    printf '%s\n' 'timed out after 600s waiting for DaemonSet kube-proxy to roll out:' >&2
    if [ $rc -ne 0 ]; then cat "$d/err" >&2; else sed -n 's/^no [^ ]* /  /p' "$d/report" >&2; fi
    exit 1
  fi
  : > "$d/rows"
  if kw_check > "$d/report" && ! grep -q '^no ' "$d/report"; then exit 0; fi
  kubectl --kubeconfig /etc/kubernetes/admin.conf get DaemonSet -n kube-system --watch --output-watch-events --request-timeout=$((deadline - now))s -o jsonpath='{.type}{"\x1f"}{.object.metadata.name}{"\x1f"}{.object.metadata.generation}{"\x1f"}{.object.status.observedGeneration}{"\x1f"}{.object.status.desiredNumberScheduled}{"\x1f"}{.object.status.updatedNumberScheduled}{"\x1f"}{.object.status.numberAvailable}{"\n"}' > "$d/events" 2> "$d/err" &
  wp=$!
  while IFS= read -r row; do
    printf '%s\n' "$row" >> "$d/rows"
    kw_eval < "$d/rows" > "$d/report"
    if ! grep -q '^no ' "$d/report"; then exit 0; fi
  done < "$d/events"
  wait "$wp"; rc=$?; wp=''
  if [ $rc -ne 0 ] || [ "$(date +%s)" -le "$now" ]; then sleep 5; fi
done
