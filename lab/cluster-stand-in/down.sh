#!/usr/bin/env bash
# Stop what lab/cluster-stand-in/up.sh started for the lab KWIN_LAB_ID names: the status
# stand-in, the repository server (each by its recorded PID, only if its command line is
# still ours), the API tier; remove the service address and routes if the lab is still up.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
ID="${KWIN_LAB_ID:-0}"
if [[ "$ID" == 0 ]]; then LAB="$ROOT/target/lab"; NS=kwin; VETH=kwv; else
  LAB="$ROOT/target/lab-$ID"; NS="kwin$ID"; VETH="kwv$ID"; fi
ADDR="10.$((213 + ID)).255.1"
OUT="$LAB/cluster"

stop() { # pidfile pattern
  local f=$1 pat=$2 pid
  [[ -f "$f" ]] || return 0
  pid=$(cat "$f")
  local cmd
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)
  if [[ -n "$pid" && "$cmd" == *"$pat"* ]]; then
    kill "$pid" 2>/dev/null
    for ((i = 0; i < 30; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  fi
  rm -f "$f"
}
stop "$OUT/status.pid" "status-stand-in.py"
stop "$OUT/http.pid" "$OUT/www"
if [[ -f "$OUT/tier/env" ]]; then "$ROOT/lab/apiserver/down.sh" "$OUT/tier" >/dev/null 2>&1; fi
for dev in $(ip -o link show 2>/dev/null | awk -F': ' '{ print $2 }' | cut -d@ -f1 | grep "^$VETH-h"); do
  ip addr del "$ADDR/32" dev "$dev" 2>/dev/null
  ip netns exec "$NS-${dev#"$VETH"-}" ip route del "$ADDR/32" 2>/dev/null
done
if [[ -d "$OUT/gnupg" ]]; then GNUPGHOME="$OUT/gnupg" gpgconf --kill gpg-agent 2>/dev/null; fi
rm -rf "$OUT"
exit 0
