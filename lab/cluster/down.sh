#!/usr/bin/env bash
# Stop what lab/cluster/up.sh started for the lab KWIN_LAB_ID names: the registry and the
# mirror (each by its recorded PID, only if its command line is still ours); remove the
# service address if the lab is still up. The hosts, and what runs on them, go with
# lab/down.sh.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
ID="${KWIN_LAB_ID:-0}"
if [[ "$ID" == 0 ]]; then LAB="$ROOT/target/lab"; VETH=kwv; else
  LAB="$ROOT/target/lab-$ID"; VETH="kwv$ID"; fi
ADDR="10.$((213 + ID)).255.1"
OUT="$LAB/cluster"

stop() { # pidfile pattern
  local f=$1 pat=$2 pid cmd
  [[ -f "$f" ]] || return 0
  pid=$(cat "$f")
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)
  if [[ -n "$pid" && "$cmd" == *"$pat"* ]]; then
    kill "$pid" 2>/dev/null
    for ((i = 0; i < 30; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  fi
  rm -f "$f"
}
stop "$OUT/registry.pid" "$OUT/registry.yml"
stop "$OUT/mirror.pid" "http.server --bind $ADDR"
for dev in $(ip -o link show 2>/dev/null | awk -F': ' '{ print $2 }' | cut -d@ -f1 | grep "^$VETH-h"); do
  ip addr del "$ADDR/32" dev "$dev" 2>/dev/null
done
rm -rf "$OUT"
exit 0
