#!/usr/bin/env bash
# Shared helpers for the kwin lab (lab/up.sh, lab/down.sh, lab/fault.sh).
#
# Sourced by the lab scripts for names, paths and addresses. Also executed
# directly for the long-running parts of the lab:
#   lib.sh supervise N          the lab supervisor (child subreaper, parent of all hosts)
#   lib.sh host-init NAME I     runs inside a new netns+mount+uts namespace, builds the
#                               host's private root and execs the holder
#   lib.sh holder NAME          runs inside the host; owns that host's sshd
set -euo pipefail

LAB_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
LAB_LIB="$LAB_SRC/lib.sh"
LAB_REPO="$(cd "$LAB_SRC/.." && pwd -P)"
LAB_DIR="$LAB_REPO/target/lab"
LAB_HOSTS_DIR="$LAB_DIR/hosts"
LAB_PYTHON="${KWIN_LAB_PYTHON:-/usr/bin/python3}"
LAB_NS_PREFIX="kwin-h"    # network namespace kwin-h1 ...
LAB_VETH_PREFIX="kwv-h"   # root-side veth kwv-h1 ... (IFNAMSIZ: 15 chars max)
LAB_MAX_HOSTS=1000
LAB_DELAY_PORT_BASE_DEFAULT=42000

lab_die() { echo "lab: error: $*" >&2; exit 1; }
lab_log() { echo "lab: $*" >&2; }

lab_require_root() {
  [[ $(id -u) -eq 0 ]] || lab_die "must run as root"
}

# Host index from a name: h7 -> 7.
lab_index() {
  local name=$1
  [[ $name =~ ^h([1-9][0-9]*)$ ]] || lab_die "bad host name '$name' (expected h1, h2, ...)"
  echo "${BASH_REMATCH[1]}"
}

# Sets LAB_ADDR_ROOT / LAB_ADDR_HOST for host index $1: 10.213.0.0/16 split into /30s,
# base = 4*i, root side .1 and host side .2 of that /30.
lab_addr() {
  local i=$1 base x y
  base=$((4 * i))
  x=$((base / 256))
  y=$((base % 256))
  LAB_ADDR_ROOT="10.213.$x.$((y + 1))"
  LAB_ADDR_HOST="10.213.$x.$((y + 2))"
}

lab_host_dir() { echo "$LAB_HOSTS_DIR/$1"; }

# Is PID alive and is its command line the one we expect (guards against PID reuse)?
lab_pid_matches() {
  local pid=$1 want=$2 cmd
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [[ -r /proc/$pid/cmdline ]] || return 1
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ $cmd == *"$want"* ]]
}

# Can we read an SSH banner from ADDR:PORT within the bash /dev/tcp connect + 1 s read?
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
  local n=$1 i name hd pids=() proxy=""
  echo "$$" >"$LAB_DIR/supervisor.pid"
  for ((i = 1; i <= n; i++)); do
    name="h$i"
    hd=$(lab_host_dir "$name")
    ip netns exec "$LAB_NS_PREFIX$i" \
      unshare --mount --uts --propagation private \
      bash "$LAB_LIB" host-init "$name" "$i" </dev/null >"$hd/init.log" 2>&1 &
    echo "$!" >"$hd/holder.pid"
    pids+=("$!")
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
      [[ -n $proxy ]] && kill "$proxy" 2>/dev/null || true
      exit 0
    fi
  done
}

# ---------------------------------------------------------------------------
# host-init: we are in the host's netns, in a fresh mount and UTS namespace with
# private propagation (nothing here is visible in the root mount namespace and it
# all disappears with the host's last process).
lab_host_init() {
  local name=$1 i=$2 hd t m
  hd=$(lab_host_dir "$name")
  lab_addr "$i"
  echo "$name" >/proc/sys/kernel/hostname
  t="$hd/mnt"
  m="$t/merged"
  mount -t tmpfs -o "mode=755${KWIN_LAB_TMPFS_SIZE:+,size=$KWIN_LAB_TMPFS_SIZE}" "kwin-lab-$name" "$t"
  mkdir "$t/upper" "$t/work" "$t/merged" "$t/root"
  # Upper layer starts with the shared base (kwuser, sudoers, ...), plus per-host files.
  cp -a "$LAB_DIR/base/." "$t/upper/"
  cp -a "$LAB_DIR/base-root/." "$t/root/"
  echo "$name" >"$t/upper/etc/hostname"
  {
    cat /etc/hosts
    printf '127.0.1.1\t%s\n%s\t%s\n' "$name" "$LAB_ADDR_HOST" "$name"
  } >"$t/upper/etc/hosts"
  mount -t overlay "kwin-lab-$name" -o "lowerdir=/,upperdir=$t/upper,workdir=$t/work" "$m"

  # /proc: fresh; /proc/sys read-only except the keys that are namespaced here
  # (net.* per netns, kernel.hostname/domainname per UTS ns), so sysctl writes in a
  # host never reach the real machine.
  mount -t proc -o nosuid,nodev,noexec proc "$m/proc"
  if [[ ${KWIN_LAB_PROC_SYS_RW:-0} != 1 ]]; then
    mount --bind "$m/proc/sys" "$m/proc/sys"
    mount -o remount,bind,ro "$m/proc/sys"
    mount --bind "$m/proc/sys/net" "$m/proc/sys/net"
    mount --bind "$m/proc/sys/kernel/hostname" "$m/proc/sys/kernel/hostname"
    mount --bind "$m/proc/sys/kernel/domainname" "$m/proc/sys/kernel/domainname"
  fi
  # /sys: a sysfs of this netns (its own /sys/class/net), read-only like a container's.
  mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$m/sys"
  # /dev: minimal private tmpfs with the usual nodes, own devpts instance, own /dev/shm.
  mount -t tmpfs -o mode=755,nosuid "kwin-lab-$name-dev" "$m/dev"
  cp -a "$LAB_DIR/dev/." "$m/dev/"
  mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5,nosuid,noexec devpts "$m/dev/pts"
  mount -t tmpfs -o mode=1777,nosuid,nodev "kwin-lab-$name-shm" "$m/dev/shm"
  # /run, /tmp: fresh tmpfs.
  mount -t tmpfs -o mode=755,nosuid,nodev "kwin-lab-$name-run" "$m/run"
  mkdir -p -m 755 "$m/run/sshd" "$m/run/lock"
  mount -t tmpfs -o mode=1777,nosuid,nodev "kwin-lab-$name-tmp" "$m/tmp"
  # /root: minimal per-host home (the real /root's shell rc files are slow).
  mount --bind "$t/root" "$m/root"
  # The host's lab dir (sshd config, host key, log, pid) at the same path, read-write
  # to the real file system so up.sh/fault.sh can see logs and pids.
  mount --bind "$hd" "$m$hd"

  # Make the overlay the root and drop every other mount inherited from the machine.
  cd "$m"
  pivot_root . .
  umount -l .
  cd /
  exec bash "$LAB_LIB" holder "$name"
}

# ---------------------------------------------------------------------------
# holder: PID recorded in hosts/NAME/holder.pid. Parent of the host's sshd.
#   SIGUSR2: stop sshd (like `systemctl stop ssh`: running sessions stay)
#   SIGUSR1: start sshd again with the same config
#   SIGTERM: stop sshd and exit (the host's namespaces go away with its processes)
lab_holder() {
  local name=$1 hd sshd="" sleeper=""
  hd=$(lab_host_dir "$name")
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
    host-init) lab_host_init "$@" ;;
    holder) lab_holder "$@" ;;
    *) lab_die "usage: lib.sh supervise N | host-init NAME I | holder NAME (internal)" ;;
  esac
fi
