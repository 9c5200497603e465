#!/usr/bin/env bash
# shellcheck disable=SC2034 # variables here are used by the scripts that source this file
# Shared helpers for the kwin lab (lab/up.sh, lab/down.sh, lab/fault.sh).
#
# Sourced by the lab scripts for names, paths and addresses. Also executed
# directly for the long-running parts of the lab:
#   lib.sh supervise N          the lab supervisor (child subreaper, parent of all hosts)
#   lib.sh host-enter NAME I    (node hosts) joins the host's cgroups, then host-init in a
#                               cgroup namespace too
#   lib.sh host-init NAME I     runs inside a new netns+mount+uts namespace, builds the
#                               host's private root and execs the holder
#   lib.sh holder NAME          runs inside the host; owns that host's sshd
set -euo pipefail

LAB_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
LAB_LIB="$LAB_SRC/lib.sh"
LAB_REPO="$(cd "$LAB_SRC/.." && pwd -P)"
# KWIN_LAB_ID (0-19) selects one of twenty independent labs that can run side by side: each has
# its own names, address range, ports, state dir and lock. 0 (the default) is the plain lab.
LAB_ID="${KWIN_LAB_ID:-0}"
[[ $LAB_ID =~ ^(0|[1-9]|1[0-9])$ ]] || { echo "lab: error: KWIN_LAB_ID must be 0 to 19" >&2; exit 1; }
LAB_TAG=""
[[ $LAB_ID == 0 ]] || LAB_TAG="$LAB_ID"
LAB_DIR="$LAB_REPO/target/lab${LAB_TAG:+-$LAB_TAG}"
LAB_HOSTS_DIR="$LAB_DIR/hosts"
LAB_PYTHON="${KWIN_LAB_PYTHON:-/usr/bin/python3}"
LAB_NS_PREFIX="kwin${LAB_TAG}-h"    # network namespace kwin-h1 (lab 0), kwin2-h1 (lab 2) ...
LAB_VETH_PREFIX="kwv${LAB_TAG}-h"   # root-side veth kwv-h1 ... (IFNAMSIZ: 15 chars max)
LAB_NET_OCTET=$((213 + LAB_ID))     # lab hosts live in 10.<213+ID>.0.0/16
LAB_MOUNT_TAG="kwin-lab${LAB_TAG}"  # source label of the lab's tmpfs/overlay mounts
LAB_MAX_HOSTS=1000
LAB_DELAY_PORT_BASE_DEFAULT=$((42000 + LAB_ID * 1000))
# How many hosts are set up at the same time (key generation, network, start): all at once
# is a fork storm of a few thousand processes for a big lab; fewer than a few dozen at a
# time starts a busy machine's lab slower (each job waits for its share of the CPUs).
# KWIN_LAB_JOBS overrides it; set by lab_jobs_init (up.sh, the supervisor), not in the
# hosts, which source this file too.
LAB_JOBS=1
lab_jobs_init() {
  LAB_JOBS="${KWIN_LAB_JOBS:-64}"
  [[ $LAB_JOBS =~ ^[1-9][0-9]*$ ]] || lab_die "KWIN_LAB_JOBS must be a positive number"
}

# One lab of each id per machine (fixed names and addresses): up/down serialize on this
# lock, and the owner file names the state dir of the lab that is up.
LAB_LOCK_FILE=/run/kwin-lab${LAB_TAG:+-$LAB_TAG}.lock
LAB_OWNER_FILE=/run/kwin-lab${LAB_TAG:+-$LAB_TAG}.owner

lab_die() { echo "lab: error: $*" >&2; exit 1; }
lab_log() { echo "lab: $*" >&2; }

lab_require_root() {
  [[ $(id -u) -eq 0 ]] || lab_die "must run as root"
}

# Take the machine-wide lab lock (fd LAB_LOCK_FD); nested calls (up.sh -> down.sh)
# see KWIN_LAB_LOCKED and skip it. Long-lived children must close LAB_LOCK_FD.
LAB_LOCK_FD=""
lab_lock() {
  [[ ${KWIN_LAB_LOCKED:-0} == 1 ]] && return 0
  exec {LAB_LOCK_FD}>>"$LAB_LOCK_FILE"
  if ! flock -w 120 "$LAB_LOCK_FD"; then
    lab_die "another lab/up.sh or lab/down.sh has held $LAB_LOCK_FILE for 120 s"
  fi
  export KWIN_LAB_LOCKED=1
}

# target/lab of a lab from another checkout that is still running (empty if none).
lab_other_owner() {
  local other pid
  other=$(lab_read "$LAB_OWNER_FILE")
  [[ -n $other && $other != "$LAB_DIR" ]] || return 0
  pid=$(lab_read "$other/supervisor.pid")
  if lab_pid_matches "$pid" "lib.sh supervise"; then echo "$other"; fi
}

# Refuse to replace a running lab of another checkout unless KWIN_LAB_TAKEOVER=1.
lab_check_owner() {
  local other
  other=$(lab_other_owner)
  [[ -n $other ]] || return 0
  [[ ${KWIN_LAB_TAKEOVER:-0} == 1 ]] && return 0
  lab_die "a lab from another checkout is up ($other); stop it with its lab/down.sh or set KWIN_LAB_TAKEOVER=1 to replace it"
}

# Host index from a name: h7 -> 7.
lab_index() {
  local name=$1
  [[ $name =~ ^h([1-9][0-9]*)$ ]] || lab_die "bad host name '$name' (expected h1, h2, ...)"
  echo "${BASH_REMATCH[1]}"
}

# Sets LAB_ADDR_ROOT / LAB_ADDR_HOST for host index $1: 10.<213+ID>.0.0/16 split into /30s,
# base = 4*i, root side .1 and host side .2 of that /30.
lab_addr() {
  local i=$1 base x y
  base=$((4 * i))
  x=$((base / 256))
  y=$((base % 256))
  LAB_ADDR_ROOT="10.$LAB_NET_OCTET.$x.$((y + 1))"
  LAB_ADDR_HOST="10.$LAB_NET_OCTET.$x.$((y + 2))"
}

lab_host_dir() { echo "$LAB_HOSTS_DIR/$1"; }

# Is PID alive and is its command line the one we expect (guards against PID reuse)?
lab_pid_matches() {
  local pid=$1 want=$2 args=()
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  mapfile -d '' -t args 2>/dev/null <"/proc/$pid/cmdline" || return 1
  [[ " ${args[*]} " == *"$want"* ]]
}

# lab_each N FUNC: FUNC 1, FUNC 2, ... FUNC N in background jobs, at most LAB_JOBS at a
# time; returns when all have ended. Call it only while no other background job of this
# shell runs (it waits for any).
lab_each() {
  local n=$1 f=$2 i running=0
  for ((i = 1; i <= n; i++)); do
    "$f" "$i" &
    running=$((running + 1))
    if [[ $running -ge $LAB_JOBS ]]; then
      wait -n || true
      running=$((running - 1))
    fi
  done
  wait
}

# Contents of a small file (pid files), empty if missing.
lab_read() {
  local v=""
  if [[ -r $1 ]]; then read -r v <"$1" || true; fi
  echo "$v"
}

# Does ADDR:PORT answer with an SSH banner (TCP connect, then up to 1 s to read it)?
lab_ssh_banner() {
  local addr=$1 port=$2 line=""
  (
    exec 3<>"/dev/tcp/$addr/$port" || exit 1
    IFS= read -r -t 1 line <&3 || exit 1
    exec 3<&-
    [[ $line == SSH-2.0-* ]]
  ) 2>/dev/null
}

# ---------------------------------------------------------------------------
# supervisor: parent of every host holder (and of the delay proxy). It is made a
# child subreaper before exec (see up.sh), so session processes orphaned by a
# killed sshd are reaped here rather than left as zombies. It exits on its own
# once no holder is alive.
lab_supervise() {
  local n=$1 i name hd pids=() proxy="" starting=()
  echo "$$" >"$LAB_DIR/supervisor.pid"
  lab_jobs_init
  # At most LAB_JOBS hosts starting at a time: the next one starts as soon as one of them
  # listens (its sshd wrote its PidFile) or its holder is gone.
  for ((i = 1; i <= n; i++)); do
    lab_wait_starting starting
    name="h$i"
    hd=$(lab_host_dir "$name")
    if [[ -f $LAB_DIR/nodes ]]; then
      # A Kubernetes node: its own cgroup subtree and cgroup namespace (lab_host_enter).
      bash "$LAB_LIB" host-enter "$name" "$i" </dev/null >"$hd/init.log" 2>&1 &
    else
      ip netns exec "$LAB_NS_PREFIX$i" \
        unshare --mount --uts --propagation private \
        bash "$LAB_LIB" host-init "$name" "$i" </dev/null >"$hd/init.log" 2>&1 &
    fi
    echo "$!" >"$hd/holder.pid"
    pids+=("$!")
    starting+=("$i:$!")
  done
  if [[ -f $LAB_DIR/delay-proxy.map ]]; then
    "$LAB_PYTHON" "$LAB_SRC/delay-proxy/delay_proxy.py" \
      --delay-ms "$(cat "$LAB_DIR/delay-proxy.delay-ms")" \
      --map-file "$LAB_DIR/delay-proxy.map" \
      --ready-file "$LAB_DIR/delay-proxy.ready" \
      </dev/null >"$LAB_DIR/delay-proxy.log" 2>&1 &
    proxy=$!
    echo "$proxy" >"$LAB_DIR/delay-proxy.pid"
  fi
  touch "$LAB_DIR/supervisor.started"
  trap 'exit 0' TERM INT HUP
  local alive p
  while :; do
    sleep 2 &
    wait "$!" || true
    alive=0
    for p in "${pids[@]}"; do
      if kill -0 "$p" 2>/dev/null; then alive=1; break; fi
    done
    if [[ $alive -eq 0 ]]; then
      if [[ -n $proxy ]]; then kill "$proxy" 2>/dev/null || true; fi
      exit 0
    fi
  done
}

# lab_wait_starting ARRAY: ARRAY (a name) holds I:HOLDER_PID of hosts still starting; drop
# those whose sshd listens (wrote its PidFile) or whose holder is gone, and wait until
# fewer than LAB_JOBS are left, at most 15 s (up.sh's own checks report what failed).
lab_wait_starting() {
  local -n _starting=$1
  local still e end=$((EPOCHSECONDS + 15))
  while :; do
    still=()
    for e in "${_starting[@]+"${_starting[@]}"}"; do
      [[ -s $LAB_HOSTS_DIR/h${e%%:*}/sshd.pid.sshd ]] && continue
      kill -0 "${e#*:}" 2>/dev/null || continue
      still+=("$e")
    done
    _starting=("${still[@]+"${still[@]}"}")
    [[ ${#_starting[@]} -ge $LAB_JOBS && $EPOCHSECONDS -lt $end ]] || return 0
    sleep 0.02
  done
}

# ---------------------------------------------------------------------------
# Cgroups of node hosts (`up.sh --nodes`). The machine mounts cgroup v1 hierarchies (LAB-NOTES:
# its v2 hierarchy has no controllers). Each node host gets the directory kwin-lab<ID>/hN in
# every v1 hierarchy, below the cgroup the lab runs in, and a cgroup namespace rooted there: in
# the host, /proc/self/cgroup says "/" and the cgroup file systems it mounts show only its own
# subtree, so its kubelet and containerd (cgroupfs driver) make /kubepods and the pods' cgroups
# inside it, apart from every other host's. down.sh kills every process left in a host's subtree
# (containers run in network namespaces of their own, out of reach of `ip netns pids`) and
# removes it.

# The v1 hierarchies mounted on this machine: "MOUNTPOINT OPTIONS" per line (options are the
# controllers, or name=systemd).
lab_cgroup_hierarchies() {
  awk '{
    for (s = 7; s <= NF && $s != "-"; s++) {}
    if ($(s + 1) != "cgroup" || $5 !~ "^/sys/fs/cgroup/") next
    n = split($(s + 3), o, ","); c = ""
    for (i = 1; i <= n; i++) if (o[i] !~ /^(rw|ro|relatime|nosuid|nodev|noexec|clone_children|xattr)$/) c = c (c ? "," : "") o[i]
    print $5, c
  }' /proc/self/mountinfo
}

# The directory of host NAME in the hierarchy at MOUNTPOINT (for the process running this).
lab_cgroup_dir() {
  local mnt=$1 opts=$2 name=$3 cur
  cur=$(awk -F: -v o="$opts" '$2 == o { print $3 }' /proc/self/cgroup)
  printf '%s%s/kwin-lab%s/%s' "$mnt" "${cur%/}" "$LAB_TAG" "$name"
}

# host-enter: make and join the host's cgroups (here, in the machine's mount namespace: `ip
# netns exec` mounts a sysfs of the netns over /sys, hiding the cgroup mounts), then the
# host's netns and a cgroup namespace; host-init mounts the hierarchies listed in
# LAB_CGROUP_HIERARCHIES.
lab_host_enter() {
  local name=$1 i=$2 mnt opts d parent hier=""
  while read -r mnt opts; do
    hier+="${mnt#/sys/fs/cgroup/}:$opts "
    d=$(lab_cgroup_dir "$mnt" "$opts" "$name")
    parent=${d%/*}
    mkdir -p "$d"
    if [[ $opts == cpuset ]]; then
      # cpuset children start empty: copy the parent's CPUs and memory nodes down.
      [[ -s $parent/cpuset.cpus ]] || cat "${parent%/*}/cpuset.cpus" >"$parent/cpuset.cpus"
      [[ -s $parent/cpuset.mems ]] || cat "${parent%/*}/cpuset.mems" >"$parent/cpuset.mems"
      [[ -s $d/cpuset.cpus ]] || cat "$parent/cpuset.cpus" >"$d/cpuset.cpus"
      [[ -s $d/cpuset.mems ]] || cat "$parent/cpuset.mems" >"$d/cpuset.mems"
    fi
    echo $$ >"$d/cgroup.procs"
  done < <(lab_cgroup_hierarchies)
  [[ -n $hier ]] || lab_die "no cgroup v1 hierarchy is mounted under /sys/fs/cgroup"
  LAB_CGROUP_HIERARCHIES=$hier exec ip netns exec "$LAB_NS_PREFIX$i" \
    unshare --mount --uts --cgroup --propagation private bash "$LAB_LIB" host-init "$name" "$i"
}

# Every process in host NAME's cgroup subtree (any hierarchy: they are the same processes).
lab_cgroup_pids() {
  local name=$1 mnt opts d
  read -r mnt opts < <(lab_cgroup_hierarchies | awk '$2 == "pids" || $2 == "freezer" { print; exit }')
  [[ -n ${mnt:-} ]] || return 0
  d=$(lab_cgroup_dir "$mnt" "$opts" "$name")
  [[ -d $d ]] || return 0
  find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null
}

# Remove host NAME's cgroup subtrees (deepest first; only empty cgroups can go).
lab_cgroup_remove() {
  local name=$1 mnt opts d
  while read -r mnt opts; do
    d=$(lab_cgroup_dir "$mnt" "$opts" "$name")
    [[ -d $d ]] || continue
    find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done < <(lab_cgroup_hierarchies)
}

# ---------------------------------------------------------------------------
# host-init: we are in the host's netns, in a fresh mount and UTS namespace with
# private propagation (nothing here is visible in the root mount namespace and it
# all disappears with the host's last process).
lab_host_init() {
  local name=$1 i=$2 hd t m
  if [[ ${KWIN_LAB_TRACE:-0} == 1 ]]; then
    PS4='+ $EPOCHREALTIME '
    set -x
  fi
  hd=$(lab_host_dir "$name")
  echo "$name" >/proc/sys/kernel/hostname
  t="$hd/mnt"
  m="$t/merged"
  mount -t tmpfs -o "mode=755${KWIN_LAB_TMPFS_SIZE:+,size=$KWIN_LAB_TMPFS_SIZE}" "$LAB_MOUNT_TAG-$name" "$t"
  # upper/ (base files, opaque /dev /run /tmp), work/, merged/ and root/ (the host's
  # /root), see make_base in up.sh. Then the host's /etc/hostname and /etc/hosts.
  cp -a "$LAB_DIR/seed/." "$t/"
  local lines=()
  mapfile -t lines </etc/hosts
  lab_addr "$i"
  echo "$name" >"$t/upper/etc/hostname"
  printf '%s\n' "${lines[@]}" "127.0.1.1	$name" "$LAB_ADDR_HOST	$name" >"$t/upper/etc/hosts"
  mount -t overlay "$LAB_MOUNT_TAG-$name" -o "lowerdir=/,upperdir=$t/upper,workdir=$t/work" "$m"

  # /proc: fresh; /proc/sys read-only except the keys that are namespaced here
  # (net.* per netns, kernel.hostname/domainname per UTS ns), so sysctl writes in a
  # host never reach the real machine.
  mount -t proc -o nosuid,nodev,noexec proc "$m/proc"
  if [[ ${KWIN_LAB_PROC_SYS_RW:-0} != 1 ]]; then
    # (a bind mount copies the flags of its source, so bind the writable parts first)
    mount --bind "$m/proc/sys" "$m/proc/sys"
    mount --bind "$m/proc/sys/net" "$m/proc/sys/net"
    mount --bind "$m/proc/sys/kernel/hostname" "$m/proc/sys/kernel/hostname"
    mount --bind "$m/proc/sys/kernel/domainname" "$m/proc/sys/kernel/domainname"
    mount -o remount,bind,ro "$m/proc/sys"
  fi
  # /sys: a sysfs of this netns (its own /sys/class/net), read-only like a container's.
  mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$m/sys"
  # /dev (nodes from the seed), /run, /tmp: opaque directories of the upper layer, so
  # private to the host and in RAM. Its own devpts instance.
  mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5,nosuid,noexec devpts "$m/dev/pts"
  # /root: minimal per-host home (the real /root's shell rc files are slow).
  mount --bind "$t/root" "$m/root"
  local node=0
  if [[ -f $LAB_DIR/nodes ]]; then
    node=1
    # A Kubernetes node: its cgroup subtree (the namespace's root) mounted as a VM's would be,
    # and a file system for containerd's overlayfs snapshots (an overlayfs upper directory
    # cannot be on overlayfs, the host's root; a VM has a disk there).
    mount -t tmpfs -o mode=755,nosuid,nodev,noexec cgroup "$m/sys/fs/cgroup"
    local h sub opts
    for h in ${LAB_CGROUP_HIERARCHIES:?}; do
      sub=${h%%:*}
      opts=${h#*:}
      mkdir -p "$m/sys/fs/cgroup/$sub"
      if [[ $opts == name=* ]]; then opts="none,$opts"; fi
      mount -t cgroup -o "nosuid,nodev,noexec,$opts" cgroup "$m/sys/fs/cgroup/$sub"
    done
    mount -o remount,ro,nosuid,nodev,noexec "$m/sys/fs/cgroup"
    mkdir -p "$m/var/lib/containerd"
    mount -t tmpfs -o mode=711 "$LAB_MOUNT_TAG-$name-containerd" "$m/var/lib/containerd"
  fi
  # The host's lab dir (sshd config, host key, log, pids, a copy of this script) at
  # /run/kwin-lab, read-write to the real file system so up.sh/fault.sh see logs and
  # pids. A fixed path: the checkout itself may be hidden in the host (/tmp, /root).
  mount --bind "$hd" "$m/run/kwin-lab"

  # Make the overlay the root and drop every other mount inherited from the machine.
  cd "$m"
  pivot_root . .
  umount -l .
  cd /
  # Node hosts: mounts propagate below / as on a systemd host (shared), which the kubelet's
  # volume mounts and containerd's rootfs mounts expect.
  if [[ $node == 1 ]]; then mount --make-rshared /; fi
  exec bash /run/kwin-lab/lib.sh holder "$name"
}

# ---------------------------------------------------------------------------
# holder: runs in the host from its copy of this script (/run/kwin-lab/lib.sh); PID
# recorded in hosts/NAME/holder.pid. Parent of the host's sshd.
#   SIGUSR2: stop sshd (like `systemctl stop ssh`: running sessions stay)
#   SIGUSR1: start sshd again with the same config
#   SIGTERM: stop sshd and exit (the host's namespaces go away with its processes)
lab_holder() {
  local name=$1 hd=/run/kwin-lab sshd="" sleeper=""
  start_sshd() {
    if [[ -n $sshd ]] && kill -0 "$sshd" 2>/dev/null; then return 0; fi
    /usr/sbin/sshd -D -f "$hd/sshd_config" -E "$hd/sshd.log" </dev/null >/dev/null 2>&1 &
    sshd=$!
    echo "$sshd" >"$hd/sshd.pid"
  }
  stop_sshd() {
    if [[ -n $sshd ]]; then
      kill "$sshd" 2>/dev/null || true
      wait "$sshd" 2>/dev/null || true
    fi
    sshd=""
    rm -f "$hd/sshd.pid"
  }
  trap start_sshd USR1
  trap stop_sshd USR2
  trap 'stop_sshd; [[ -n $sleeper ]] && kill "$sleeper" 2>/dev/null; exit 0' TERM INT HUP
  start_sshd
  while :; do
    if [[ -z $sleeper ]] || ! kill -0 "$sleeper" 2>/dev/null; then
      sleep infinity &
      sleeper=$!
    fi
    wait "$sleeper" 2>/dev/null || true
  done
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  cmd=${1:-}
  shift || true
  case $cmd in
    supervise) lab_supervise "$@" ;;
    host-enter) lab_host_enter "$@" ;;
    host-init) lab_host_init "$@" ;;
    holder) lab_holder "$@" ;;
    *) lab_die "usage: lib.sh supervise N | host-enter NAME I | host-init NAME I | holder NAME (internal)" ;;
  esac
fi
