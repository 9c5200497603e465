#!/usr/bin/env bash
# kwin vs Ansible vs pyinfra on the lab, from one command (as root, on a fresh machine too):
#
#   bench/run.sh                      # N=50, D=0 and 25 ms, 3 reps, all tools, + criterion
#   bench/run.sh --quick              # smoke test: N=10, D=0, 1 rep
#   bench/run.sh --n 10,50,100 --delay 0,25 --reps 3 --tools kwin,ansible,pyinfra,floor
#   bench/run.sh --n 50,200,500 --delay 0 --tool-reps ansible=1,pyinfra=1   # Ansible at N=50 only
#
# Installs what it lacks (apt: python3-venv, openssh-client, git; the lab installs
# openssh-server & co.), a venv under target/bench-venv with pinned ansible-core and pyinfra
# (plus the ansible.posix collection, taken from the `ansible` package on PyPI), builds kwin in
# release, brings the lab up per N, runs the matrix (bench/harness.py), tears the lab down and
# writes bench/results/<date>.md (bench/report.py). See bench/README.md.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$REPO"

ANSIBLE_CORE_VERSION=2.19.14
ANSIBLE_VERSION=12.3.0   # the package whose ansible.posix collection we use (ansible-core 2.19)
PYINFRA_VERSION=3.10.0
VENV=$REPO/target/bench-venv
PY=/usr/bin/python3

usage() {
  cat >&2 <<EOF
usage: bench/run.sh [--quick] [--n LIST] [--delay LIST] [--reps R] [--tools LIST]
                    [--modes cold,warm] [--no-criterion] [--only-criterion] [--out FILE]
  --n LIST        host counts, comma-separated (default 50)
  --delay LIST    added delay in ms each way through the lab's proxy (default 0,25);
                  at most one non-zero value per call
  --reps R        repetitions per cell (default 3)
  --tool-reps L   fewer repetitions for some tools, e.g. ansible=1
  --tools LIST    any of kwin,ansible,pyinfra,floor,floor-libssh,floor-openssh
                  (default kwin,ansible,pyinfra,floor,floor-libssh)
  --ansible-n L   host counts Ansible runs at (default 50; pyinfra and the others run at all)
  --modes LIST    cold,warm (default both)
  --quick         N=10, D=0, 1 rep (smoke test)
  --no-criterion  skip the criterion micro-benchmark
  --only-criterion  run only the criterion micro-benchmark
  --out FILE      results file (default bench/results/<date>.md)
  --keep-lab      leave the last lab up
env: KWIN_LAB_ID=0..19 picks which of the machine's labs to use (default 0; tests use others),
     KWIN_LAB_TAKEOVER=1 replaces that lab if another checkout has it up (see lab/README.md)
EOF
  exit 2
}

NS=50 DELAYS=0,25 REPS=3 TOOLS=kwin,ansible,pyinfra,floor,floor-libssh MODES=cold,warm TOOL_REPS="" ANSIBLE_N=50
CRITERION=1 MATRIX=1 OUT="" KEEP=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --n) NS=${2:?}; shift 2 ;;
    --delay) DELAYS=${2:?}; shift 2 ;;
    --reps) REPS=${2:?}; shift 2 ;;
    --tool-reps) TOOL_REPS=${2:?}; shift 2 ;;
    --ansible-n) ANSIBLE_N=${2:?}; shift 2 ;;
    --tools) TOOLS=${2:?}; shift 2 ;;
    --modes) MODES=${2:?}; shift 2 ;;
    --quick) NS=10 DELAYS=0 REPS=1; shift ;;
    --no-criterion) CRITERION=0; shift ;;
    --only-criterion) MATRIX=0; shift ;;
    --out) OUT=${2:?}; shift 2 ;;
    --keep-lab) KEEP=(--keep-lab); shift ;;
    -h | --help) usage ;;
    *) echo "bench: unknown argument $1" >&2; usage ;;
  esac
done
[[ $(id -u) -eq 0 ]] || { echo "bench: run as root (the lab needs network namespaces)" >&2; exit 1; }

log() { echo "bench: $*" >&2; }

retry() { # retry N CMD...: run CMD up to N times, backing off
  local n=$1 i
  shift
  for ((i = 1; i <= n; i++)); do
    "$@" && return 0
    [[ $i -lt $n ]] && { log "retrying ($i/$n): $*"; sleep $((i * 3)); }
  done
  return 1
}

# --- system packages ------------------------------------------------------------------------
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  retry 5 apt-get update -q >/dev/null
  retry 5 apt-get install -y -q --no-install-recommends "$@" >/dev/null
}
missing=()
[[ -x $PY ]] || missing+=(python3)
$PY -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
command -v ssh >/dev/null || missing+=(openssh-client)
command -v git >/dev/null || missing+=(git)
# the floor's second client (bench/floor-libssh): libssh and a C compiler
[[ -f /usr/include/libssh/libssh.h ]] || missing+=(libssh-dev)
command -v gcc >/dev/null || missing+=(gcc)
if [[ ${#missing[@]} -gt 0 ]]; then
  log "installing ${missing[*]}"
  apt_install "${missing[@]}"
fi

# --- Python tools, pinned ---------------------------------------------------------------------
venv_ok() {
  [[ -x $VENV/bin/ansible-playbook && -x $VENV/bin/pyinfra ]] &&
    "$VENV/bin/python" - "$ANSIBLE_CORE_VERSION" "$PYINFRA_VERSION" <<'EOF'
import sys
from importlib.metadata import version
sys.exit(0 if (version("ansible-core"), version("pyinfra")) == (sys.argv[1], sys.argv[2]) else 1)
EOF
}
if [[ $MATRIX == 1 ]]; then
  if ! venv_ok; then
    log "creating $VENV (ansible-core $ANSIBLE_CORE_VERSION, pyinfra $PYINFRA_VERSION)"
    rm -rf "$VENV"
    $PY -m venv "$VENV"
    retry 4 "$VENV/bin/pip" install -q "ansible-core==$ANSIBLE_CORE_VERSION" "pyinfra==$PYINFRA_VERSION"
  fi
  if [[ ! -f $VENV/collections/ansible_collections/ansible/posix/plugins/modules/sysctl.py ]]; then
    # ansible.posix (for its sysctl module) is not part of ansible-core; the `ansible` package on
    # PyPI ships it. Take only that collection from its wheel.
    log "adding the ansible.posix collection from ansible $ANSIBLE_VERSION"
    mkdir -p "$VENV/dl"
    retry 4 "$VENV/bin/pip" download -q --no-deps -d "$VENV/dl" "ansible==$ANSIBLE_VERSION"
    "$VENV/bin/python" - "$VENV/dl/ansible-$ANSIBLE_VERSION-py3-none-any.whl" "$VENV/collections" <<'EOF'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("ansible_collections/ansible/posix/")])
EOF
    rm -rf "$VENV/dl"
  fi
fi

# --- kwin -------------------------------------------------------------------------------------
command -v cargo >/dev/null || { log "cargo not found (install Rust first)"; exit 1; }
if [[ $MATRIX == 1 ]]; then
  log "building kwin (release)"
  cargo build --release --bin kwin -q
  # The floor's two clients (bench/README.md, "The floor"): libssh2 through the ssh2 crate
  # (kwin's library; its own small workspace) and libssh (C).
  log "building the floor clients (bench/floor-ssh2, bench/floor-libssh)"
  cargo build --release -q --manifest-path bench/floor-ssh2/Cargo.toml --target-dir target/floor-ssh2
  gcc -O2 -Wall -o target/floor-libssh bench/floor-libssh/floor-libssh.c -lssh -lpthread
fi

DATE=$(date +%Y-%m-%d)
STAMP=$(date +%Y%m%d-%H%M%S)
RUN_DIR=$REPO/target/bench/$STAMP
OUT=${OUT:-$REPO/bench/results/$DATE.md}
mkdir -p "$RUN_DIR"

# --- criterion: load + validate + graph of 1,000 hosts --------------------------------------
if [[ $CRITERION == 1 ]]; then
  log "criterion: plan_graph (1,000 hosts)"
  echo "load before: $(cat /proc/loadavg)" >"$RUN_DIR/criterion.txt"
  cargo bench -q -p kwin-engine --bench plan_graph -- --noplot 2>&1 | tee -a "$RUN_DIR/criterion.txt"
  echo "load after: $(cat /proc/loadavg)" >>"$RUN_DIR/criterion.txt"
fi

# --- the matrix -------------------------------------------------------------------------------
rc=0
if [[ $MATRIX == 1 ]]; then
  log "load before the matrix: $(cut -d' ' -f1-3 /proc/loadavg)"
  # In the background so that a signal to this script reaches the harness, which then takes
  # the lab down before exiting.
  $PY bench/harness.py --n "$NS" --delay "$DELAYS" --reps "$REPS" --tool-reps "$TOOL_REPS" --tools "$TOOLS" --ansible-n "$ANSIBLE_N" \
    --modes "$MODES" --out "$RUN_DIR" "${KEEP[@]}" &
  hpid=$!
  trap 'kill -TERM "$hpid" 2>/dev/null' TERM INT HUP
  wait "$hpid" || rc=$?
  # a trapped signal interrupts `wait`: wait for the harness's clean-up too
  while kill -0 "$hpid" 2>/dev/null; do wait "$hpid" || rc=$?; done
  trap - TERM INT HUP
  notes=()
  [[ -f $RUN_DIR/criterion.txt ]] && notes=(--criterion "$RUN_DIR/criterion.txt")
  $PY bench/report.py "$RUN_DIR" --out "$OUT" "${notes[@]}"
  log "raw runs and logs: $RUN_DIR"
fi
exit $rc
