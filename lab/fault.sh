#!/usr/bin/env bash
# Inject faults into running lab hosts.
#
#   lab/fault.sh cut hN            take the host's link down (root-side veth down)
#   lab/fault.sh heal hN           bring it back up
#   lab/fault.sh loss hN PERCENT   drop PERCENT % of packets, each direction (iptables in the host's netns)
#   lab/fault.sh noloss hN         remove the packet loss rules
#   lab/fault.sh kill-sshd hN      stop the host's sshd (running sessions stay, like `systemctl stop ssh`)
#   lab/fault.sh start-sshd hN     start it again with the same config; returns once it answers
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  sed -n '4,9s/^#   //p' "${BASH_SOURCE[0]}" >&2
  exit 2
}

[[ $# -ge 2 ]] || usage
op=$1
name=$2
lab_require_root
i=$(lab_index "$name")
ns="$LAB_NS_PREFIX$i"
veth="$LAB_VETH_PREFIX$i"
hd=$(lab_host_dir "$name")
lab_addr "$i"
[[ -e /run/netns/$ns ]] || lab_die "host $name is not up (no netns $ns)"

holder_pid() {
  local pid
  pid=$(lab_read "$hd/holder.pid")
  lab_pid_matches "$pid" "lib.sh holder $name" || lab_die "host $name: holder process not running"
  echo "$pid"
}

loss_rules() {
  ip netns exec "$ns" iptables -w -S 2>/dev/null | grep -- '--comment kwin-lab-loss' || true
}

case $op in
  cut)
    ip link set "$veth" down
    ;;
  heal)
    ip link set "$veth" up
    ;;
  loss)
    pct=${3:-}
    [[ $pct =~ ^[0-9]+([.][0-9]+)?$ ]] || lab_die "loss needs a PERCENT (0-100)"
    prob=$(awk -v p="$pct" 'BEGIN { if (p > 100) p = 100; printf "%.4f", p / 100 }')
    # Replace any earlier loss rules.
    while read -r _ chain rest; do
      [[ -n $chain ]] || continue
      # shellcheck disable=SC2086 # rule spec is a word list from iptables -S
      ip netns exec "$ns" iptables -w -D "$chain" $rest
    done < <(loss_rules)
    for chain in INPUT OUTPUT; do
      ip netns exec "$ns" iptables -w -I "$chain" -m statistic --mode random --probability "$prob" \
        -m comment --comment kwin-lab-loss -j DROP
    done
    ;;
  noloss)
    while read -r _ chain rest; do
      [[ -n $chain ]] || continue
      # shellcheck disable=SC2086 # rule spec is a word list from iptables -S
      ip netns exec "$ns" iptables -w -D "$chain" $rest
    done < <(loss_rules)
    ;;
  kill-sshd)
    hp=$(holder_pid)
    spid=$(lab_read "$hd/sshd.pid")
    kill -USR2 "$hp"
    for _ in $(seq 100); do
      if [[ -z $spid ]] || ! lab_pid_matches "$spid" "/run/kwin-lab/sshd_config"; then exit 0; fi
      sleep 0.05
    done
    lab_die "host $name: sshd $spid did not stop"
    ;;
  start-sshd)
    hp=$(holder_pid)
    kill -USR1 "$hp"
    for _ in $(seq 200); do
      if lab_ssh_banner "$LAB_ADDR_HOST" 22; then exit 0; fi
      sleep 0.05
    done
    tail -n 20 "$hd/sshd.log" >&2 || true
    lab_die "host $name: sshd did not answer within 10 s"
    ;;
  *)
    usage
    ;;
esac
