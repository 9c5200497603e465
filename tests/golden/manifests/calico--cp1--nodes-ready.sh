[ -r /etc/kubernetes/admin.conf ] || { printf '%s\n' '/etc/kubernetes/admin.conf does not exist' >&2; exit 1; }
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
kw_check() {
unserved=''
if ! kubectl --kubeconfig /etc/kubernetes/admin.conf get Node -o jsonpath='{range .items[*]}{.metadata.name}{"\t"}{range .status.conditions[?(@.type=="Ready")]}{.status}{"\t"}{.reason}{"\t"}{.message}{end}{"\n"}{end}' > "$d/rows" 2> "$d/err"; then
  if grep -q -e "doesn't have a resource type" -e 'could not find the requested resource' -e 'no matches for kind' "$d/err"; then
    : > "$d/rows"; unserved="kind Node is not served by the API server yet"
  else return 2; fi
fi
awk -v want='cp1 lw1 ww1 ww2' -v label='node ' -v cond=Ready -v unserved="$unserved" '
BEGIN { FS = "\t"; nw = split(want, w, " "); for (i = 1; i <= nw; i++) wanted[w[i]] = 1 }
($1 in wanted) && !($1 in seen) {
  seen[$1] = 1
  if ($2 == "True") print "ok " $1
  else {
    why = ($3 != "") ? $3 : ("condition " cond " is " (($2 == "") ? "not reported" : $2))
    if ($4 != "") why = why ": " $4
    print "no " $1 " " label $1 " Not" cond ": " why
  }
}
END { for (i = 1; i <= nw; i++) if (!(w[i] in seen)) print "no " w[i] " " label w[i] ": " ((unserved != "") ? unserved : "not found") }
' "$d/rows"
}
deadline=$(( $(date +%s) + 900 ))
while :; do
  kw_check > "$d/report"; rc=$?
  if [ $rc -eq 0 ] && ! grep -q '^no ' "$d/report"; then break; fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    printf '%s\n' 'timed out after 900s waiting for Node cp1, lw1, ww1, ww2 to be Ready:' >&2
    if [ $rc -ne 0 ]; then cat "$d/err" >&2; else sed -n 's/^no [^ ]* /  /p' "$d/report" >&2; fi
    exit 1
  fi
  sleep 5
done
