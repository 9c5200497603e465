#!/usr/bin/env bash
# Start N local Linux test hosts h1..hN (real OpenSSH servers in network
# namespaces, each with a private overlay of /). See lab/README.md.
#
#   lab/up.sh [N] [--delay-ms D] [--delay-port-base P] [--verify-all] [--nodes]
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat >&2 <<EOF
usage: lab/up.sh [N] [--delay-ms D] [--delay-port-base P] [--verify-all] [--nodes]
  N                    number of hosts (default 3, max $LAB_MAX_HOSTS)
  --delay-ms D         also start the delay proxy (+D ms each way) and write
                       target/lab/hosts-delay.toml (host i on 127.0.0.1:P+i)
  --delay-port-base P  first proxy port minus one (default $LAB_DELAY_PORT_BASE_DEFAULT)
  --verify-all         log in with ssh on every host (default: first and last)
  --nodes              hosts that can be Kubernetes nodes: cgroups, /dev/kmsg, a disk for
                       containerd, routes between the hosts (see lab/README.md)
env: KWIN_LAB_KEY_PASSPHRASE (default kwin-lab-pass), KWIN_LAB_TMPFS_SIZE,
     KWIN_LAB_PROC_SYS_RW=1 (make all of /proc/sys writable inside hosts)
EOF
  exit 2
}

N=3
DELAY_MS=""
PORT_BASE=$LAB_DELAY_PORT_BASE_DEFAULT
VERIFY_ALL=0
NODES=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --delay-ms) DELAY_MS=${2:?}; shift 2 ;;
    --delay-ms=*) DELAY_MS=${1#*=}; shift ;;
    --delay-port-base) PORT_BASE=${2:?}; shift 2 ;;
    --delay-port-base=*) PORT_BASE=${1#*=}; shift ;;
    --verify-all) VERIFY_ALL=1; shift ;;
    --nodes) NODES=1; shift ;;
    -h | --help) usage ;;
    [0-9]*) N=$1; shift ;;
    *) usage ;;
  esac
done
[[ $N =~ ^[0-9]+$ && $N -ge 1 && $N -le $LAB_MAX_HOSTS ]] || lab_die "N must be 1..$LAB_MAX_HOSTS"
if [[ -n $DELAY_MS ]]; then
  [[ $DELAY_MS =~ ^[0-9]+$ ]] || lab_die "--delay-ms takes whole milliseconds"
  [[ $PORT_BASE =~ ^[0-9]+$ && $((PORT_BASE + N)) -le 65535 && $PORT_BASE -ge 1024 ]] ||
    lab_die "bad --delay-port-base"
fi
lab_require_root
lab_jobs_init
lab_lock
lab_check_owner

T0=$EPOCHREALTIME
TPREV=$T0
# KWIN_LAB_TIMING=1 prints how long each phase took.
phase() {
  if [[ ${KWIN_LAB_TIMING:-0} == 1 ]]; then
    awk -v a="$TPREV" -v b="$EPOCHREALTIME" -v n="$1" 'BEGIN { printf "lab: %-10s %.3fs\n", n, b - a }' >&2
  fi
  TPREV=$EPOCHREALTIME
}
PASSPHRASE=${KWIN_LAB_KEY_PASSPHRASE:-kwin-lab-pass}

# --- dependencies -----------------------------------------------------------
install_deps() {
  local missing=() i out
  [[ -x /usr/sbin/sshd ]] || missing+=(openssh-server)
  [[ -x /usr/lib/openssh/sftp-server ]] || missing+=(openssh-sftp-server)
  command -v ssh >/dev/null || missing+=(openssh-client)
  command -v ssh-keygen >/dev/null || missing+=(openssh-client)
  command -v ip >/dev/null || missing+=(iproute2)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v sudo >/dev/null || missing+=(sudo)
  command -v unshare >/dev/null || missing+=(util-linux)
  [[ -x $LAB_PYTHON ]] || missing+=(python3)
  [[ ${#missing[@]} -eq 0 ]] && return 0
  lab_log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  for i in 1 2 3 4 5; do
    if out=$(apt-get update -q 2>&1); then break; fi
    [[ $i -eq 5 ]] && { echo "$out" >&2; lab_die "apt-get update failed"; }
    sleep $((i * 2))
  done
  for i in 1 2 3 4 5; do
    if out=$(apt-get install -y -q --no-install-recommends \
      -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
      "${missing[@]}" 2>&1); then
      return 0
    fi
    if [[ $i -lt 5 ]] && grep -qiE 'lock|cannot stat pathname|Temporary failure|Could not resolve|Failed to fetch|Connection|timed out|Hash Sum mismatch|dpkg was interrupted' <<<"$out"; then
      if grep -q 'dpkg was interrupted' <<<"$out"; then dpkg --configure -a >/dev/null 2>&1 || true; fi
      sleep $((i * 3))
      continue
    fi
    echo "$out" >&2
    lab_die "apt-get install ${missing[*]} failed"
  done
}
install_deps
phase deps

# --- clean slate ------------------------------------------------------------
bash "$LAB_SRC/down.sh" --quiet
phase down
echo "$LAB_DIR" >"$LAB_OWNER_FILE"

mkdir -p "$LAB_HOSTS_DIR"

# --- client keys --------------------------------------------------------------
ssh-keygen -q -t ed25519 -N "" -C "kwin-lab" -f "$LAB_DIR/id_ed25519"
ssh-keygen -q -t ed25519 -N "$PASSPHRASE" -C "kwin-lab-pass" -f "$LAB_DIR/id_ed25519_pass"
AUTH_KEYS="$(cat "$LAB_DIR/id_ed25519.pub" "$LAB_DIR/id_ed25519_pass.pub")"

# --- seed shared by all hosts ---------------------------------------------------
# seed/ is copied (cp -a, one command) into each host's tmpfs before its overlay is
# mounted: seed/upper is the start of the host's upper layer, seed/root its /root.
#  - kwuser is created with useradd inside a throwaway overlay of /, and the files
#    useradd changed are kept;
#  - /dev, /run and /tmp are opaque directories of the upper layer (they hide the
#    machine's), /dev with the usual nodes.
make_base() {
  local s="$LAB_DIR/seed" bm="$LAB_DIR/base-mnt"
  local u="$s/upper"
  mkdir -p "$u" "$s/work" "$s/merged" "$bm"
  # shellcheck disable=SC2016 # script for the inner bash, arguments passed as $1 $2
  unshare --mount --propagation private bash -euo pipefail -c '
    u=$1 bm=$2
    mount -t tmpfs kwin-lab-base "$bm"
    mkdir "$bm/upper" "$bm/work" "$bm/m"
    mount -t overlay kwin-lab-base -o "lowerdir=/,upperdir=$bm/upper,workdir=$bm/work" "$bm/m"
    if ! chroot "$bm/m" getent passwd kwuser >/dev/null; then
      chroot "$bm/m" useradd --create-home --shell /bin/bash --user-group kwuser
    fi
    chroot "$bm/m" usermod -p "*" kwuser
    # sshd without PAM refuses key logins to locked accounts ("!" hash).
    if chroot "$bm/m" getent shadow root | cut -d: -f2 | grep -q "^!"; then
      chroot "$bm/m" usermod -p "*" root
    fi
    cd "$bm/upper"
    for f in etc/passwd etc/shadow etc/group etc/gshadow etc/subuid etc/subgid home/kwuser; do
      if [[ -e $f ]]; then cp -a --parents "$f" "$u/"; fi
    done
  ' make-base "$u" "$bm"
  rmdir "$bm"
  mkdir -p "$u/etc/sudoers.d"
  printf 'kwuser ALL=(ALL:ALL) NOPASSWD: ALL\n' >"$u/etc/sudoers.d/kwin-lab"
  chmod 0440 "$u/etc/sudoers.d/kwin-lab"
  local kh="$u/home/kwuser"
  install -d -m 700 "$kh/.ssh"
  printf '%s\n' "$AUTH_KEYS" >"$kh/.ssh/authorized_keys"
  chmod 600 "$kh/.ssh/authorized_keys"
  chown -R --reference="$kh" "$kh/.ssh"

  local r="$s/root"
  install -d -m 700 "$r" "$r/.ssh"
  printf '%s\n' "$AUTH_KEYS" >"$r/.ssh/authorized_keys"
  chmod 600 "$r/.ssh/authorized_keys"
  # shellcheck disable=SC2016 # literal file content
  printf '# kwin lab host: minimal root profile\n[ -n "$BASH_VERSION" ] && [ -f ~/.bashrc ] && . ~/.bashrc\n' >"$r/.profile"
  printf '# kwin lab host: minimal root bashrc\nPS1='"'"'\\u@\\h:\\w\\$ '"'"'\n' >"$r/.bashrc"

  install -d -m 755 "$u/dev" "$u/dev/pts" "$u/run" "$u/run/sshd" "$u/run/lock" "$u/run/kwin-lab"
  install -d -m 1777 "$u/dev/shm" "$u/tmp"
  local d="$u/dev"
  mknod -m 666 "$d/null" c 1 3
  mknod -m 666 "$d/zero" c 1 5
  mknod -m 666 "$d/full" c 1 7
  mknod -m 666 "$d/random" c 1 8
  mknod -m 666 "$d/urandom" c 1 9
  mknod -m 666 "$d/tty" c 5 0
  ln -s pts/ptmx "$d/ptmx"
  ln -s /proc/self/fd "$d/fd"
  ln -s /proc/self/fd/0 "$d/stdin"
  ln -s /proc/self/fd/1 "$d/stdout"
  ln -s /proc/self/fd/2 "$d/stderr"
  ln -s /proc/kcore "$d/core"
  "$LAB_PYTHON" -c '
import os, sys
for d in sys.argv[1:]:
    os.setxattr(d, "trusted.overlay.opaque", b"y")
' "$u/dev" "$u/run" "$u/tmp"
}
make_base
if [[ $NODES -eq 1 ]]; then
  # Node hosts (lab_host_enter, lab_host_init): /dev/kmsg, which the kubelet's OOM watcher
  # reads, like any VM's /dev.
  mknod -m 640 "$LAB_DIR/seed/upper/dev/kmsg" c 1 11
  touch "$LAB_DIR/nodes"
fi
phase base

# --- per-host files -------------------------------------------------------------
host_files() {
  local i=$1 name="h$1" hd
  hd=$(lab_host_dir "$name")
  mkdir -p "$hd/mnt"
  ssh-keygen -q -t ed25519 -N "" -C "root@$name" -f "$hd/ssh_host_ed25519_key"
  cp "$LAB_LIB" "$hd/lib.sh"
  # Paths as the host sees them: this directory is bind-mounted at /run/kwin-lab.
  cat >"$hd/sshd_config" <<EOF
# kwin lab host $name
Port 22
ListenAddress 0.0.0.0
HostKey /run/kwin-lab/ssh_host_ed25519_key
PidFile /run/kwin-lab/sshd.pid.sshd
AuthorizedKeysFile .ssh/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
UseDNS no
MaxStartups 200:30:400
MaxSessions 100
MaxAuthTries 10
LoginGraceTime 30
PrintMotd no
PrintLastLog no
X11Forwarding no
AcceptEnv LANG LC_*
Subsystem sftp /usr/lib/openssh/sftp-server
EOF
}
lab_each "$N" host_files
phase hostkeys

# --- kernel limits of the root namespace ------------------------------------------
# Every host is a veth peer of the root namespace, which keeps one neighbour (ARP) entry per
# host it talks to, in one table shared by every lab on the machine. Past gc_thresh2 the
# kernel starts evicting entries, past gc_thresh3 it refuses new ones ("neighbour table
# overflow") and hosts stop answering; the defaults (128/512/1024) end at a few hundred
# hosts. Raised here for N hosts (never lowered; they stay raised after down.sh), with
# kernel.pid_max for the hosts' processes (holder, sshd, and the sessions of a run).
raise_at_least() {
  local key=$1 want=$2 f cur
  f=/proc/sys/${key//.//}
  read -r cur <"$f" || return 0
  if [[ $cur =~ ^[0-9]+$ && $cur -lt $want ]]; then
    echo "$want" >"$f" || lab_log "warning: cannot raise $key to $want (it is $cur)"
  fi
}
raise_at_least net.ipv4.neigh.default.gc_thresh1 $((N + 128))
raise_at_least net.ipv4.neigh.default.gc_thresh2 $((2 * N + 512))
raise_at_least net.ipv4.neigh.default.gc_thresh3 $((4 * N + 1024))
raise_at_least kernel.pid_max $((16 * N + 32768))
if [[ $NODES -eq 1 ]]; then
  # The kubelet sets these kernel tunables when it starts unless they already have the value
  # it wants, and stops if it cannot (kubernetes pkg/kubelet/cm/container_manager_linux.go,
  # setupKernelTunables: vm.overcommit_memory=1, vm.panic_on_oom=0, kernel.panic=10,
  # kernel.panic_on_oops=1). They are not namespaced: a host cannot set them (its /proc/sys is
  # read-only outside net.*), so the machine is given them here, once, for every node host.
  for kv in vm.overcommit_memory=1 vm.panic_on_oom=0 kernel.panic=10 kernel.panic_on_oops=1; do
    sysctl -qw "$kv" || lab_die "cannot set $kv, which a kubelet on a lab host needs"
  done
  # Routes between the hosts: the root namespace forwards between lab addresses only (an
  # nftables table of this lab drops anything else from or to its veths).
  sysctl -qw net.ipv4.ip_forward=1
  nft -f - <<NFT || lab_die "nft: cannot install the lab's forward filter"
table inet kwin_lab$LAB_ID
delete table inet kwin_lab$LAB_ID
table inet kwin_lab$LAB_ID {
  chain forward {
    type filter hook forward priority 0; policy accept;
    iifname "$LAB_VETH_PREFIX*" ip daddr != 10.$LAB_NET_OCTET.0.0/16 drop
    oifname "$LAB_VETH_PREFIX*" ip saddr != 10.$LAB_NET_OCTET.0.0/16 drop
  }
}
NFT
fi
phase limits

# --- network ---------------------------------------------------------------------
{
  for ((i = 1; i <= N; i++)); do
    lab_addr "$i"
    echo "netns add $LAB_NS_PREFIX$i"
    echo "link add $LAB_VETH_PREFIX$i type veth peer name eth0 netns $LAB_NS_PREFIX$i"
    echo "addr add $LAB_ADDR_ROOT/30 dev $LAB_VETH_PREFIX$i"
    echo "link set $LAB_VETH_PREFIX$i up"
  done
} >"$LAB_DIR/ip-root.batch"
ip -batch "$LAB_DIR/ip-root.batch" || lab_die "network setup failed (see $LAB_DIR/ip-root.batch)"
host_net() {
  lab_addr "$1"
  {
    printf 'link set lo up\naddr add %s/30 dev eth0\nlink set eth0 up\n' "$LAB_ADDR_HOST"
    # node hosts: a default route (kubeadm and the kubelet take the node's address from it),
    # through the root namespace, which forwards only between lab hosts
    if [[ $NODES -eq 1 ]]; then printf 'route add default via %s\n' "$LAB_ADDR_ROOT"; fi
  } | ip -n "$LAB_NS_PREFIX$1" -batch -
}
lab_each "$N" host_net
phase network

# --- inventory ---------------------------------------------------------------------
write_inventory() {
  local i name fp pub inv kh cfg invd=""
  inv="$LAB_DIR/hosts.toml"
  kh="$LAB_DIR/known_hosts"
  cfg="$LAB_DIR/ssh_config"
  [[ -n $DELAY_MS ]] && invd="$LAB_DIR/hosts-delay.toml"
  {
    echo "# kwin lab inventory ($N hosts), written by lab/up.sh"
  } >"$inv"
  [[ -n $invd ]] && echo "# kwin lab inventory via delay proxy (+$DELAY_MS ms each way), written by lab/up.sh" >"$invd"
  : >"$kh"
  : >"$cfg"
  [[ -n $invd ]] && : >"$LAB_DIR/delay-proxy.map"
  # Host public keys and their fingerprints (one ssh-keygen run for all).
  local pubs=() fps=() typ key
  for ((i = 1; i <= N; i++)); do
    read -r typ key _ <"$LAB_HOSTS_DIR/h$i/ssh_host_ed25519_key.pub"
    pubs+=("$typ $key")
  done
  mapfile -t fps < <(printf '%s\n' "${pubs[@]}" | ssh-keygen -l -f - | awk '{print $2}')
  [[ ${#fps[@]} -eq $N ]] || lab_die "could not read host key fingerprints"
  for ((i = 1; i <= N; i++)); do
    name="h$i"
    lab_addr "$i"
    fp=${fps[i - 1]}
    pub=${pubs[i - 1]}
    printf '\n[[hosts]]\nname = "%s"\naddress = "%s"\nport = 22\nuser = "root"\nprivate_key = "%s"\nhost_key = "%s"\n' \
      "$name" "$LAB_ADDR_HOST" "$LAB_DIR/id_ed25519" "$fp" >>"$inv"
    echo "$LAB_ADDR_HOST $pub" >>"$kh"
    printf 'Host %s\n  HostName %s\n  Port 22\n' "$name" "$LAB_ADDR_HOST" >>"$cfg"
    printf '  User root\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  KexAlgorithms curve25519-sha256\n  BatchMode yes\n  LogLevel ERROR\n\n' \
      "$LAB_DIR/id_ed25519" "$kh" >>"$cfg"
    if [[ -n $invd ]]; then
      local port=$((PORT_BASE + i))
      printf '\n[[hosts]]\nname = "%s"\naddress = "127.0.0.1"\nport = %d\nuser = "root"\nprivate_key = "%s"\nhost_key = "%s"\n' \
        "$name" "$port" "$LAB_DIR/id_ed25519" "$fp" >>"$invd"
      echo "[127.0.0.1]:$port $pub" >>"$kh"
      printf 'Host %s-delay\n  HostName 127.0.0.1\n  Port %d\n' "$name" "$port" >>"$cfg"
      printf '  User root\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  KexAlgorithms curve25519-sha256\n  BatchMode yes\n  LogLevel ERROR\n\n' \
        "$LAB_DIR/id_ed25519" "$kh" >>"$cfg"
      echo "127.0.0.1:$port=$LAB_ADDR_HOST:22" >>"$LAB_DIR/delay-proxy.map"
    fi
  done
  if [[ -n $invd ]]; then echo "$DELAY_MS" >"$LAB_DIR/delay-proxy.delay-ms"; fi
  chmod 600 "$LAB_DIR/id_ed25519" "$LAB_DIR/id_ed25519_pass"
}
write_inventory
phase inventory

# --- start -----------------------------------------------------------------------
# The supervisor is made a child subreaper (prctl PR_SET_CHILD_SUBREAPER = 36, kept
# across exec) so it reaps every orphan of the lab; PID 1 here may not.
setsid "$LAB_PYTHON" -c '
import ctypes, os, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
os.execvp(sys.argv[1], sys.argv[1:])
' bash "$LAB_LIB" supervise "$N" </dev/null >"$LAB_DIR/supervisor.log" 2>&1 {LAB_LOCK_FD}>&- &

fail() {
  local name=$1 why=$2 hd
  hd=$(lab_host_dir "$name")
  {
    echo "lab: error: host $name $why"
    for f in init.log sshd.log; do
      if [[ -s $hd/$f ]]; then echo "--- $hd/$f"; tail -n 40 "$hd/$f"; fi
    done
    if [[ -s $LAB_DIR/supervisor.log ]]; then echo "--- $LAB_DIR/supervisor.log"; tail -n 20 "$LAB_DIR/supervisor.log"; fi
  } >&2
  if [[ ${KWIN_LAB_KEEP_ON_FAIL:-0} != 1 ]]; then bash "$LAB_SRC/down.sh" --quiet || true; fi
  exit 1
}

# ~30 s, more for big labs on a busy machine (500 hosts: 130 s)
deadline=$((EPOCHSECONDS + 30 + N / 5))
while [[ ! -f $LAB_DIR/supervisor.started ]]; do
  [[ $EPOCHSECONDS -lt $deadline ]] || fail h1 "supervisor did not start"
  sleep 0.05
done

# Wait for every sshd: first for its PidFile (written once it listens; a cheap test
# that leaves the CPU to the starting hosts), then for its SSH banner on port 22.
wait_hosts() {
  local check=$1 i hp round=0 still pending=()
  for ((i = 1; i <= N; i++)); do pending+=("$i"); done
  while [[ ${#pending[@]} -gt 0 ]]; do
    still=()
    for i in "${pending[@]}"; do
      if [[ $check == pidfile ]]; then
        [[ -s $LAB_HOSTS_DIR/h$i/sshd.pid.sshd ]] && continue
      else
        lab_addr "$i"
        lab_ssh_banner "$LAB_ADDR_HOST" 22 && continue
      fi
      still+=("$i")
    done
    pending=("${still[@]+"${still[@]}"}")
    [[ ${#pending[@]} -gt 0 ]] || break
    if ((round++ % 10 == 0)); then
      for i in "${pending[@]}"; do
        hp=""
        read -r hp 2>/dev/null <"$LAB_HOSTS_DIR/h$i/holder.pid" || true
        if [[ -n $hp ]] && ! kill -0 "$hp" 2>/dev/null; then fail "h$i" "exited during start"; fi
        hp=""
        read -r hp 2>/dev/null <"$LAB_HOSTS_DIR/h$i/sshd.pid" || true
        if [[ -n $hp ]] && ! kill -0 "$hp" 2>/dev/null; then fail "h$i" "sshd exited during start"; fi
      done
    fi
    [[ $EPOCHSECONDS -lt $deadline ]] || fail "h${pending[0]}" "sshd not answering on port 22 after $((30 + N / 5)) s"
    sleep 0.05
  done
}
wait_hosts pidfile
wait_hosts banner

phase sshd-up

# Delay proxy ready?
if [[ -n $DELAY_MS ]]; then
  while [[ ! -f $LAB_DIR/delay-proxy.ready ]]; do
    if ! kill -0 "$(lab_read "$LAB_DIR/delay-proxy.pid")" 2>/dev/null ||
      [[ $EPOCHSECONDS -ge $deadline ]]; then
      echo "--- $LAB_DIR/delay-proxy.log" >&2
      cat "$LAB_DIR/delay-proxy.log" >&2 || true
      bash "$LAB_SRC/down.sh" --quiet || true
      lab_die "delay proxy did not start"
    fi
    sleep 0.05
  done
fi

# Real logins (keys, known_hosts, config): first and last host, or all.
verify=("h1")
[[ $N -gt 1 ]] && verify+=("h$N")
if [[ $VERIFY_ALL -eq 1 ]]; then verify=(); for ((i = 1; i <= N; i++)); do verify+=("h$i"); done; fi
[[ -n $DELAY_MS ]] && verify+=("h1-delay")
# Four logins at a time; each writes "hN OK" or "hN <error>" to its own file.
vdir="$LAB_DIR/verify"
mkdir -p "$vdir"
login_check() {
  local h=$1 out
  if out=$(ssh -F "$LAB_DIR/ssh_config" -o ConnectTimeout=10 "$h" hostname 2>&1) &&
    [[ $out == "${h%-delay}" ]]; then
    echo OK >"$vdir/$h"
  else
    echo "ssh $h hostname: $out" >"$vdir/$h"
  fi
}
# (wait only for these jobs: the supervisor is a child of this shell too)
lpids=()
for h in "${verify[@]}"; do
  login_check "$h" &
  lpids+=("$!")
  if [[ ${#lpids[@]} -ge 4 ]]; then
    wait -n "${lpids[@]}" || true
    alive=()
    for p in "${lpids[@]}"; do if kill -0 "$p" 2>/dev/null; then alive+=("$p"); fi; done
    lpids=("${alive[@]+"${alive[@]}"}")
  fi
done
for p in "${lpids[@]+"${lpids[@]}"}"; do wait "$p" || true; done
for h in "${verify[@]}"; do
  res=$(lab_read "$vdir/$h")
  [[ $res == OK ]] || fail "${h%-delay}" "failed a real login: $(cat "$vdir/$h" 2>/dev/null)"
done
rm -rf "$vdir"

phase ssh-login

# Record PIDs in one place as well: NAME HOLDER_PID SSHD_PID
{
  echo "supervisor $(lab_read "$LAB_DIR/supervisor.pid")"
  [[ -f $LAB_DIR/delay-proxy.pid ]] && echo "delay-proxy $(lab_read "$LAB_DIR/delay-proxy.pid")"
  for ((i = 1; i <= N; i++)); do
    hd=$(lab_host_dir "h$i")
    echo "h$i $(lab_read "$hd/holder.pid") $(lab_read "$hd/sshd.pid")"
  done
} >"$LAB_DIR/pids"

T1=$EPOCHREALTIME
extra=""
[[ -n $DELAY_MS ]] && extra="; +${DELAY_MS}ms via target/lab/hosts-delay.toml"
printf 'lab: %d hosts up in %ss; inventory %s/hosts.toml%s\n' "$N" "$(awk -v a="$T0" -v b="$T1" 'BEGIN { printf "%.1f", b - a }')" "${LAB_DIR#"$LAB_REPO"/}" "$extra"
