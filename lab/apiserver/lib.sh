# shellcheck shell=bash
# Shared helpers for lab/apiserver scripts (sourced, not executed).
# Callers set LAB_LOG (a file) before using the apt helpers.

: "${LAB_LOG:=/dev/null}"

lab_log() { printf '[%s] %s\n' "$(date +%T)" "$*" >>"$LAB_LOG"; }

# Run an apt command up to 5 times; retry on dpkg/apt locks, interrupted dpkg
# runs, "cannot stat pathname" races and network errors. Output goes to LAB_LOG.
LAB_APT_RETRY_RE='Could not get lock|Unable to lock|dpkg frontend lock|is another process using it|cannot stat pathname|dpkg was interrupted|Temporary failure|Failed to fetch|Unable to fetch|Could not connect|Connection (failed|timed out|reset|refused)|Could not resolve|Hash Sum mismatch|File has unexpected size|Mirror sync in progress|Some index files failed'
lab_apt_retry() {
  local try out rc
  out="$(mktemp)"
  for try in 1 2 3 4 5; do
    rc=0
    DEBIAN_FRONTEND=noninteractive "$@" >"$out" 2>&1 || rc=$?
    cat "$out" >>"$LAB_LOG"
    if [[ $rc -eq 0 ]]; then
      rm -f "$out"
      return 0
    fi
    if [[ $try -eq 5 ]] || ! grep -Eq "$LAB_APT_RETRY_RE" "$out"; then
      rm -f "$out"
      lab_log "apt command failed (rc=$rc): $*"
      return "$rc"
    fi
    if grep -q 'dpkg was interrupted' "$out"; then
      DEBIAN_FRONTEND=noninteractive dpkg --configure -a >>"$LAB_LOG" 2>&1 || true
    fi
    lab_log "apt retry $try/5 in $((try * 3))s: $*"
    sleep $((try * 3))
  done
}

# Install the packages that are not installed yet. Refreshes the package
# lists first only when apt does not know a package (fresh machine).
LAB_APT_LISTS_FRESH=0
lab_apt_install() {
  local missing=() p
  for p in "$@"; do
    [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" == "install ok installed" ]] || missing+=("$p")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  if [[ $(id -u) -ne 0 ]]; then
    echo "missing packages (${missing[*]}) and not root to install them" >&2
    return 1
  fi
  lab_log "installing: ${missing[*]}"
  if [[ $LAB_APT_LISTS_FRESH -eq 0 ]] && ! apt-get -qq --print-uris install -y "${missing[@]}" >/dev/null 2>&1; then
    lab_apt_retry apt-get -q update
    LAB_APT_LISTS_FRESH=1
  fi
  if ! lab_apt_retry apt-get -q install -y --no-install-recommends "${missing[@]}"; then
    [[ $LAB_APT_LISTS_FRESH -eq 1 ]] && return 1
    lab_apt_retry apt-get -q update
    LAB_APT_LISTS_FRESH=1
    lab_apt_retry apt-get -q install -y --no-install-recommends "${missing[@]}"
  fi
}

# True if something listens on 127.0.0.1:PORT (or the port is otherwise taken).
# lab_port_busy PORT [ADDRESS]: something listens on ADDRESS:PORT (default 127.0.0.1), or on
# PORT on every address. Another address's PORT is not busy: several tiers on different
# addresses can all use 6443. Connections left in TIME_WAIT by the last tier on the address
# do not count (etcd and kube-apiserver listen with SO_REUSEADDR, as every Go server does):
# a lab can come up again at once.
lab_port_busy() {
  local port=$1 addr=${2:-127.0.0.1} local_addr
  if command -v ss >/dev/null 2>&1; then
    while read -r local_addr; do
      case "$local_addr" in
        "$addr:$port" | "0.0.0.0:$port" | "*:$port" | "[::]:$port") return 0 ;;
      esac
    done < <(ss -Hltn "sport = :$port" 2>/dev/null | awk '{print $4}')
    return 1
  fi
  (exec 3<>"/dev/tcp/$addr/$port") 2>/dev/null
}

# Print N distinct free loopback ports, picked at random below the kernel's
# ephemeral range (so an outgoing connection cannot grab one between the
# check and the bind): 20000-32767 with the default ip_local_port_range.
lab_free_ports() {
  local n=$1 got=() port tries=0 p dup lo=32768 hi=60999 base=20000 span
  read -r lo hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  if [[ $lo -gt 21000 ]]; then
    span=$((lo - base))
  else
    base=$((hi + 1)) span=$((65000 - hi))
  fi
  while [[ ${#got[@]} -lt $n ]]; do
    tries=$((tries + 1))
    [[ $tries -gt 500 ]] && return 1
    port=$((base + (RANDOM * 32768 + RANDOM) % span))
    dup=0
    for p in "${got[@]}"; do [[ $p == "$port" ]] && dup=1; done
    [[ $dup -eq 1 ]] && continue
    lab_port_busy "$port" && continue
    got+=("$port")
  done
  echo "${got[@]}"
}

# True if PID is alive and not a zombie.
lab_pid_alive() {
  local pid=$1 state
  [[ -n "$pid" && -r "/proc/$pid/stat" ]] || return 1
  state="$(sed -E 's/^.*\) ([A-Za-z]).*$/\1/' "/proc/$pid/stat" 2>/dev/null || true)"
  [[ -n "$state" && "$state" != Z && "$state" != X ]]
}

# True if PID is alive and its command line mentions STRING (guards against
# signalling a recycled PID).
lab_pid_is() {
  local pid=$1 str=$2
  local cmd
  lab_pid_alive "$pid" || return 1
  # (no "| grep -q" here: with pipefail an early grep exit fails the pipe)
  cmd="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)"
  [[ "$cmd" == *"$str"* ]]
}

# Stop PID: SIGTERM, wait up to TIMEOUT seconds, then SIGKILL.
lab_stop_pid() {
  local pid=$1 timeout=${2:-10} i
  lab_pid_alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < timeout * 10; i++)); do
    lab_pid_alive "$pid" || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    lab_pid_alive "$pid" || return 0
    sleep 0.1
  done
  return 1
}
