[ -r /etc/kubernetes/admin.conf ] || { printf '%s\n' '/etc/kubernetes/admin.conf does not exist' >&2; exit 1; }
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
unserved=''
kw_eval() {
awk -v want='cp1 lw1 ww1 ww2' -v label='node ' -v cond=Ready -v optional=0 -v unserved="$unserved" '
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
    if ($3 == "True") print "ok " $2
    else {
      why = ($4 != "") ? $4 : ("condition " cond " is " (($3 == "") ? "not reported" : $3))
      if ($5 != "") why = why ": " $5
      print "no " $2 " " label $2 " Not" cond ": " why
    }
  }
}'
}
kw_check() {
unserved=''
if ! kubectl --kubeconfig /etc/kubernetes/admin.conf get Node -o jsonpath='{range .items[*]}-{"\x1f"}{.metadata.name}{"\x1f"}{.status.conditions[?(@.type=="Ready")].status}{"\x1f"}{.status.conditions[?(@.type=="Ready")].reason}{"\x1f"}{.status.conditions[?(@.type=="Ready")].message}{"\n"}{end}' > "$d/rows" 2> "$d/err"; then
  if grep -q -e "doesn't have a resource type" -e 'could not find the requested resource' -e 'no matches for kind' "$d/err"; then
    : > "$d/rows"; unserved="kind Node is not served by the API server yet"
  else return 2; fi
fi
kw_eval < "$d/rows"
}
deadline=$(( $(date +%s) + 900 ))
wp=''
trap '[ -z "$wp" ] || kill "$wp" 2>/dev/null; rm -rf "$d"' EXIT
mkfifo "$d/events" || exit 1
while :; do
  now=$(date +%s)
  if [ "$now" -ge "$deadline" ]; then
    kw_check > "$d/report"; rc=$?
    if [ $rc -eq 0 ] && ! grep -q '^no ' "$d/report"; then exit 0; fi
    printf '%s\n' 'timed out after 900s waiting for Node cp1, lw1, ww1, ww2 to be Ready:' >&2
    if [ $rc -ne 0 ]; then cat "$d/err" >&2; else sed -n 's/^no [^ ]* /  /p' "$d/report" >&2; fi
    exit 1
  fi
  : > "$d/rows"
  kubectl --kubeconfig /etc/kubernetes/admin.conf get Node --watch --output-watch-events --request-timeout=$((deadline - now))s -o jsonpath='{.type}{"\x1f"}{.object.metadata.name}{"\x1f"}{.object.status.conditions[?(@.type=="Ready")].status}{"\x1f"}{.object.status.conditions[?(@.type=="Ready")].reason}{"\x1f"}{.object.status.conditions[?(@.type=="Ready")].message}{"\n"}' > "$d/events" 2> "$d/err" &
  wp=$!
  while IFS= read -r row; do
    printf '%s\n' "$row" >> "$d/rows"
    kw_eval < "$d/rows" > "$d/report"
    if ! grep -q '^no ' "$d/report"; then exit 0; fi
  done < "$d/events"
  wait "$wp"; rc=$?; wp=''
  if [ $rc -ne 0 ] || [ "$(date +%s)" -le "$now" ]; then sleep 5; fi
done
