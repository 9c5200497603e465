#!/usr/bin/env bash
# Remove everything lab/up.sh made: host processes, namespaces, veths, the delay
# proxy, the supervisor and target/lab. Safe to run when nothing is up.
#
#   lab/down.sh [--quiet]
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

QUIET=0
[[ ${1:-} == --quiet || ${1:-} == -q ]] && QUIET=1
lab_require_root
lab_lock
lab_check_owner
# A lab of another checkout being replaced (KWIN_LAB_TAKEOVER=1): stop its daemons too.
OTHER=$(lab_other_owner)

# Namespaces: the ones we recorded plus any kwin-hN left by an earlier run.
declare -A NS=()
if [[ -d $LAB_HOSTS_DIR ]]; then
  for d in "$LAB_HOSTS_DIR"/h*; do
    [[ -d $d ]] || continue
    n=${d##*/h}
    [[ $n =~ ^[0-9]+$ ]] && NS["$LAB_NS_PREFIX$n"]=1
  done
fi
while read -r ns _; do
  [[ $ns =~ ^${LAB_NS_PREFIX}[0-9]+$ ]] && NS[$ns]=1
done < <(ip netns list 2>/dev/null || true)

# PIDs of every process in those network namespaces (one /proc scan).
ns_pids() {
  local -A inode=()
  local ino name path link pid
  for name in "${!NS[@]}"; do
    [[ -e /run/netns/$name ]] || continue
    ino=$(stat -L -c %i "/run/netns/$name" 2>/dev/null) || continue
    inode[$ino]=1
  done
  [[ ${#inode[@]} -gt 0 ]] || return 0
  while read -r path link; do
    [[ $link =~ ^net:\[([0-9]+)\]$ ]] || continue
    if [[ -n ${inode[${BASH_REMATCH[1]}]:-} ]]; then
      pid=${path#/proc/}
      echo "${pid%%/*}"
    fi
  done < <(find /proc -mindepth 3 -maxdepth 3 -path '/proc/[0-9]*/ns/net' -printf '%p %l\n' 2>/dev/null || true)
}

recorded_pids() {
  local f pid
  for f in "$LAB_HOSTS_DIR"/h*/holder.pid "$LAB_HOSTS_DIR"/h*/sshd.pid; do
    pid=""
    read -r pid 2>/dev/null <"$f" || true
    if lab_pid_matches "$pid" "lib.sh holder" || lab_pid_matches "$pid" "/run/kwin-lab/sshd_config"; then
      echo "$pid"
    fi
  done
  return 0
}

# Node hosts: every process in a host's cgroup subtree (containers run in network namespaces
# of their own, which ns_pids does not see).
node_pids() {
  [[ -f $LAB_DIR/nodes ]] || return 0
  local d
  for d in "$LAB_HOSTS_DIR"/h*; do
    [[ -d $d ]] && lab_cgroup_pids "${d##*/}"
  done
  return 0
}

killed=0
for attempt in 1 2 3 4 5 6 7 8 9 10; do
  mapfile -t pids < <({ ns_pids; recorded_pids; node_pids; } | sort -un)
  [[ ${#pids[@]} -gt 0 ]] || break
  kill -KILL "${pids[@]}" 2>/dev/null || true
  killed=$((killed + ${#pids[@]}))
  sleep 0.05
  [[ $attempt -eq 10 ]] && lab_log "warning: processes still alive in lab namespaces: ${pids[*]}"
done

# Delay proxy and supervisor (recorded PIDs, checked against their command line).
for rec in "delay-proxy.pid:delay_proxy.py" "supervisor.pid:lib.sh supervise" \
  ${OTHER:+"$OTHER/delay-proxy.pid:delay_proxy.py" "$OTHER/supervisor.pid:lib.sh supervise"}; do
  f=${rec%%:*}
  [[ $f == /* ]] || f="$LAB_DIR/$f"
  [[ -f $f ]] || continue
  pid=$(lab_read "$f")
  if lab_pid_matches "$pid" "${rec#*:}"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      kill -0 "$pid" 2>/dev/null || break
      # A zombie still answers kill -0; stop waiting once it is one.
      [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) == Z ]] && break
      sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
done

# Namespaces first: the kernel then destroys their veths (and the root-side peers)
# in one batch, much faster than deleting veths one by one.
lab_veths() {
  local ifname
  while read -r _ ifname _; do
    ifname=${ifname%%@*}
    ifname=${ifname%:}
    if [[ $ifname =~ ^${LAB_VETH_PREFIX}[0-9]+$ ]]; then echo "$ifname"; fi
  done < <(ip -o link show 2>/dev/null || true)
}
batch=""
for ns in "${!NS[@]}"; do
  if [[ -e /run/netns/$ns ]]; then batch+="netns del $ns"$'\n'; fi
done
if [[ -n $batch ]]; then
  ip -force -batch - <<<"$batch" >/dev/null 2>&1 || true
fi
for _ in $(seq 100); do
  [[ -z $(lab_veths) ]] && break
  sleep 0.03
done
batch=""
for v in $(lab_veths); do batch+="link del $v"$'\n'; done
if [[ -n $batch ]]; then
  ip -force -batch - <<<"$batch" >/dev/null 2>&1 || true
fi

# Mounts: hosts mount only inside their own private mount namespaces, which are gone
# with their processes. Unmount anything of ours that is visible here anyway.
mapfile -t mnts < <(awk -v d="$LAB_DIR/" -v t="$LAB_MOUNT_TAG" '$5 ~ "^"d || $0 ~ (" - [^ ]+ " t "-(h[0-9]+(-[a-z]+)?|base) ") {print $5}' /proc/self/mountinfo | sort -r)
for m in "${mnts[@]}"; do
  umount -l "$m" 2>/dev/null || true
done

# `ip netns add` made /run/netns a mount point; undo that once no namespace is left.
if mountpoint -q /run/netns 2>/dev/null && [[ -z $(ls -A /run/netns 2>/dev/null) ]]; then
  umount /run/netns 2>/dev/null || true
fi

# Node hosts: their cgroup subtrees (empty now), the forward filter.
if [[ -f $LAB_DIR/nodes ]]; then
  for d in "$LAB_HOSTS_DIR"/h*; do
    [[ -d $d ]] && lab_cgroup_remove "${d##*/}"
  done
  nft delete table inet "kwin_lab$LAB_ID" 2>/dev/null || true
fi

left=""
if [[ -n $(ip netns list 2>/dev/null | awk -v p="^${LAB_NS_PREFIX}[0-9]+$" '$1 ~ p') ]]; then left+=" netns"; fi
if ip -o link show 2>/dev/null | grep -q " ${LAB_VETH_PREFIX}[0-9]*[@:]"; then left+=" veth"; fi
if awk -v d="$LAB_DIR/" -v t="$LAB_MOUNT_TAG" '$5 ~ "^"d || $0 ~ (" - [^ ]+ " t "-(h[0-9]+(-[a-z]+)?|base) ")' /proc/self/mountinfo | grep -q .; then
  left+=" mounts"
else
  # Nothing is mounted under target/lab, so this removes only plain files, and only
  # the ones up.sh writes.
  if [[ -d $LAB_DIR ]]; then
    (
      cd "$LAB_DIR"
      rm -rf --one-file-system hosts seed base-mnt \
        id_ed25519 id_ed25519.pub id_ed25519_pass id_ed25519_pass.pub \
        hosts.toml hosts-delay.toml known_hosts ssh_config pids ip-root.batch verify \
        supervisor.pid supervisor.log supervisor.started \
        delay-proxy.pid delay-proxy.log delay-proxy.map delay-proxy.delay-ms \
        delay-proxy.ready delay-proxy.ready.tmp nodes
    )
    rmdir "$LAB_DIR" 2>/dev/null || true
  fi
fi
if [[ -z $left ]]; then
  owner=$(lab_read "$LAB_OWNER_FILE")
  if [[ $owner == "$LAB_DIR" || -z $(lab_other_owner) ]]; then rm -f "$LAB_OWNER_FILE"; fi
fi
[[ -z $left ]] || lab_die "could not remove:$left (see ip netns list / ip link / mount)"
[[ $QUIET -eq 1 ]] || lab_log "down (${#NS[@]} namespaces, $killed processes stopped)"
