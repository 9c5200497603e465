#!/usr/bin/env bash
# Build kube-apiserver and kubeadm (Kubernetes 1.20.x) from Debian's `kubernetes`
# source package into a cache directory outside the repository.
#
#   lab/apiserver/build.sh            # build once, then a no-op (< 1 s)
#
# Environment:
#   KWIN_APISERVER_CACHE        cache dir (default /var/cache/kwin-lab/apiserver)
#   KWIN_APISERVER_BUILD_JOBS   go build parallelism, -p (default: nproc, at most 4)
#   KWIN_APISERVER_BUILD_NICE   nice level for the compile (default 10)
#   KWIN_APISERVER_KEEP_WORK    1 = keep the extracted source tree and go cache
#   KWIN_APISERVER_FORCE        1 = rebuild even if the cached binaries work
#
# Output: $CACHE/bin/kube-apiserver, $CACHE/bin/kubeadm, $CACHE/stamp
# Log:    $CACHE/build.log (its tail is printed on failure)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

CACHE="${KWIN_APISERVER_CACHE:-/var/cache/kwin-lab/apiserver}"
BIN="$CACHE/bin"
STAMP="$CACHE/stamp"
LOG="$CACHE/build.log"
WANT_MINOR="v1.20."

# ---------------------------------------------------------------- fast path
cached_ok() {
  [[ -f "$STAMP" && -x "$BIN/kube-apiserver" && -x "$BIN/kubeadm" ]] || return 1
  local a k
  a="$("$BIN/kube-apiserver" --version 2>/dev/null)" || return 1
  k="$("$BIN/kubeadm" version -o short 2>/dev/null)" || return 1
  [[ "$a" == "Kubernetes $WANT_MINOR"* && "$k" == "$WANT_MINOR"* ]]
}

if [[ "${KWIN_APISERVER_FORCE:-0}" != 1 ]] && cached_ok; then
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "build.sh: must run as root (installs build dependencies with apt)" >&2
  exit 1
fi

mkdir -p "$CACHE"
# One build at a time; a second caller waits, then finds the cache filled.
exec 9>"$CACHE/.lock"
if ! flock -n 9; then
  echo "build.sh: another build holds $CACHE/.lock, waiting..." >&2
  flock 9
fi
if [[ "${KWIN_APISERVER_FORCE:-0}" != 1 ]] && cached_ok; then
  exit 0
fi

: >"$LOG"
START=$(date +%s)
STEP="init"

on_exit() {
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "build.sh: FAILED (rc=$rc) at step: $STEP; last lines of $LOG:" >&2
    tail -n 40 "$LOG" >&2 || true
  fi
  rm -f "$STAMP.new"
}
trap on_exit EXIT

LAB_LOG="$LOG"
log() { lab_log "$@"; }
step() { STEP="$*"; log "== $STEP"; }

# ------------------------------------------------------------- build deps
step "install build dependencies"
lab_apt_install golang-go gcc libc6-dev rsync make dpkg-dev golang-github-modern-go-reflect2-dev
GO_VERSION="$(go version)"
log "$GO_VERSION"

# ------------------------------------------------------------- source
step "fetch Debian kubernetes source"
APTDIR="$CACHE/apt"
rm -rf "$APTDIR"
mkdir -p "$APTDIR/sources.list.d" "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial"
SYS_SOURCES=/etc/apt/sources.list.d/debian.sources
if [[ -f "$SYS_SOURCES" ]]; then
  # deb822: only the Types line changes; URIs, suites and Signed-By are kept.
  sed -E 's/^Types:.*/Types: deb-src/' "$SYS_SOURCES" >"$APTDIR/sources.list.d/debian-src.sources"
elif [[ -f /etc/apt/sources.list ]]; then
  grep -E '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' >"$APTDIR/sources.list.d/debian-src.list"
else
  echo "build.sh: no Debian apt sources found" >&2
  exit 1
fi
cat >"$APTDIR/apt.conf" <<EOF
Dir::Etc::sourcelist "/dev/null";
Dir::Etc::sourceparts "$APTDIR/sources.list.d";
Dir::State::Lists "$APTDIR/lists";
Dir::Cache "$APTDIR/cache";
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT::Sandbox::User "root";
EOF
export APT_CONFIG="$APTDIR/apt.conf"
lab_apt_retry apt-get -q update
SRC_VERSION="$(apt-cache showsrc kubernetes 2>/dev/null | awk '/^Version:/ {print $2; exit}')"
log "source version: $SRC_VERSION"
[[ -n "$SRC_VERSION" ]]

WORK="$CACHE/work"
rm -rf "$WORK"
mkdir -p "$WORK"
(cd "$WORK" && lab_apt_retry apt-get -q source --download-only "kubernetes=$SRC_VERSION")
unset APT_CONFIG
step "extract source"
(cd "$WORK" && dpkg-source -x ./kubernetes_*.dsc src >>"$LOG" 2>&1)
rm -f "$WORK"/kubernetes_*.tar.* "$WORK"/kubernetes_*.dsc
K="$WORK/src"

# Go >= 1.18 crashes at run time with the vendored reflect2 1.0.1; Debian's
# packaged reflect2 1.0.2 is API compatible and fixes it.
step "replace vendored reflect2"
R2=/usr/share/gocode/src/github.com/modern-go/reflect2
[[ -f "$R2/reflect2.go" ]]
rm -rf "$K/vendor/github.com/modern-go/reflect2"
mkdir -p "$K/vendor/github.com/modern-go/reflect2"
cp -a "$R2"/*.go "$R2"/*.s "$K/vendor/github.com/modern-go/reflect2/"

# ------------------------------------------------------------- compile
JOBS="${KWIN_APISERVER_BUILD_JOBS:-$(nproc)}"
if [[ -z "${KWIN_APISERVER_BUILD_JOBS:-}" && $JOBS -gt 4 ]]; then JOBS=4; fi
NICE="${KWIN_APISERVER_BUILD_NICE:-10}"
export GO111MODULE=off GOFLAGS="-p=$JOBS" GOPROXY=off KUBE_BUILD_PLATFORMS="" \
  KUBE_VERBOSE=0 HOME="$WORK/home" CGO_ENABLED=0
mkdir -p "$HOME"
log "GOFLAGS=$GOFLAGS nice=$NICE"

step "generate openapi (make gen_openapi)"
(cd "$K" && nice -n "$NICE" make gen_openapi >>"$LOG" 2>&1)

step "compile kube-apiserver and kubeadm"
(cd "$K" && nice -n "$NICE" hack/make-rules/build.sh cmd/kube-apiserver cmd/kubeadm >>"$LOG" 2>&1)

step "install binaries"
OUT="$K/_output/local/go/bin"
mkdir -p "$BIN"
for b in kube-apiserver kubeadm; do
  [[ -x "$OUT/$b" ]]
  cp "$OUT/$b" "$BIN/.$b.new"
  mv -f "$BIN/.$b.new" "$BIN/$b"
done
END=$(date +%s)
{
  echo "source=kubernetes $SRC_VERSION"
  echo "kube-apiserver=$("$BIN/kube-apiserver" --version)"
  echo "kubeadm=$("$BIN/kubeadm" version -o short)"
  echo "go=$GO_VERSION"
  echo "jobs=$JOBS"
  echo "build_seconds=$((END - START))"
  echo "built_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$STAMP.new"
mv -f "$STAMP.new" "$STAMP"

if [[ "${KWIN_APISERVER_KEEP_WORK:-0}" != 1 ]]; then
  step "clean work tree"
  rm -rf "$WORK" "$APTDIR"
fi
cached_ok
log "done in $((END - START))s"
echo "build.sh: built $(sed -n 's/^kube-apiserver=//p' "$STAMP") and kubeadm in $((END - START))s -> $BIN"
