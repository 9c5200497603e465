#!/usr/bin/env bash
# Stop the API tier started by up.sh (kube-apiserver, then etcd) by PID and
# remove STATE_DIR.
#
#   lab/apiserver/down.sh STATE_DIR
#
# Environment:
#   KWIN_APISERVER_KEEP_STATE  1 = stop the processes but keep STATE_DIR (logs)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

if [[ $# -ne 1 || -z "$1" ]]; then
  echo "usage: $0 STATE_DIR" >&2
  exit 2
fi
if [[ ! -d "$1" ]]; then
  exit 0
fi
STATE="$(cd "$1" && pwd)"
case "$STATE" in
  / | /root | /home | /tmp | /var | /usr | /etc) echo "down.sh: refusing STATE_DIR=$STATE" >&2; exit 2 ;;
esac

# PIDs come from the .pid files (written as soon as each process started, so
# a half-failed up.sh is covered too); a PID is only signalled if its command
# line still names this STATE_DIR, so a recycled PID is never hit.
apiserver_pid="$(cat "$STATE/kube-apiserver.pid" 2>/dev/null || true)"
etcd_pid="$(cat "$STATE/etcd.pid" 2>/dev/null || true)"
etcd_data="$(cat "$STATE/etcd.datadir" 2>/dev/null || true)"
rc=0
if [[ -n "$apiserver_pid" ]] && lab_pid_is "$apiserver_pid" "$STATE/"; then
  lab_stop_pid "$apiserver_pid" 10 || { echo "down.sh: kube-apiserver $apiserver_pid did not stop" >&2; rc=1; }
fi
if [[ -n "$etcd_pid" ]] && lab_pid_is "$etcd_pid" "--data-dir ${etcd_data:-$STATE/etcd}"; then
  lab_stop_pid "$etcd_pid" 10 || { echo "down.sh: etcd $etcd_pid did not stop" >&2; rc=1; }
fi
if [[ $rc -eq 0 && "${KWIN_APISERVER_KEEP_STATE:-0}" != 1 ]]; then
  if [[ -n "$etcd_data" && "$etcd_data" != "$STATE"/* && -d "$etcd_data/member" ]]; then
    rm -rf "$etcd_data"
  elif [[ -n "$etcd_data" && "$etcd_data" != "$STATE"/* ]]; then
    rmdir "$etcd_data" 2>/dev/null || true
  fi
  rm -rf "$STATE"
fi
exit "$rc"
