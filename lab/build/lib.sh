# shellcheck shell=bash
# Helpers of lab/build/build.sh and images.sh (sourced).

CACHE="${KWIN_LAB_CACHE:-/var/cache/kwin-lab}"
BUILD_LOG="$CACHE/build.log"
export GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" GOTOOLCHAIN=local
export GOFLAGS="-buildvcs=false -modcacherw"
BUILD_JOBS="${KWIN_LAB_BUILD_JOBS:-$(nproc)}"
BUILD_NICE="${KWIN_LAB_BUILD_NICE:-10}"

build_say() { printf '[lab build %s] %s\n' "$(date +%T)" "$*" | tee -a "$BUILD_LOG" >&2; }
build_die() {
  printf 'lab/build: %s\n' "$*" >&2
  exit 1
}
build_elapsed() { # START_EPOCH
  local s=$((EPOCHSECONDS - $1))
  printf '%dm%02ds' $((s / 60)) $((s % 60))
}
build_failed() { # rc
  [[ $1 -eq 0 ]] && return 0
  echo "lab/build: FAILED (rc=$1); last lines of $BUILD_LOG:" >&2
  tail -n 40 "$BUILD_LOG" >&2 || true
}

# Run a command with its output in the log; retry network failures of the module proxy.
build_run() {
  local try rc
  for try in 1 2 3 4; do
    rc=0
    "$@" >>"$BUILD_LOG" 2>&1 || rc=$?
    [[ $rc -eq 0 ]] && return 0
    if [[ $try -lt 4 ]] && tail -n 20 "$BUILD_LOG" | grep -Eq 'dial tcp|i/o timeout|connection reset|TLS handshake|502 Bad Gateway|503 Service|unexpected EOF'; then
      build_say "network error, retrying ($try): $*"
      sleep $((try * 5))
      continue
    fi
    return "$rc"
  done
}

# Debian packages the builds need (only the missing ones; apt retried on locks).
build_deps() {
  local missing=() p
  for p in "$@"; do
    [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" == "install ok installed" ]] || missing+=("$p")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  build_say "installing ${missing[*]}"
  local try
  for try in 1 2 3 4 5; do
    if DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$BUILD_LOG" 2>&1; then
      return 0
    fi
    [[ $try -eq 1 ]] && { apt-get update -q >>"$BUILD_LOG" 2>&1 || true; }
    sleep $((try * 3))
  done
  build_die "apt-get install ${missing[*]} failed"
}

# go_component NAME VERSION MODULE [--cgo] [--kubernetes] [--static-check] [--tags "T ..."]
#              [--ldflags "..."] [--replace MODULE=DIR] PKG=OUT ...
# Builds each PKG (an import path) into $CACHE/bin/NAME-VERSION/OUT, from the module
# $CACHE/src/NAME-VERSION that requires MODULE@vVERSION. A stamp of the inputs makes a second
# call a no-op.
go_component() {
  local name=$1 version=$2 module=$3
  shift 3
  local cgo=0 k8s=0 static_check=0 tags="" ldflags="" specs=() replaces=()
  while [[ $# -gt 0 ]]; do
    case $1 in
      --replace) replaces+=("$2"); shift ;;
      --cgo) cgo=1 ;;
      --kubernetes) k8s=1 ;;
      --static-check) static_check=1 ;;
      --tags) tags=$2; shift ;;
      --ldflags) ldflags=$2; shift ;;
      *) specs+=("$1") ;;
    esac
    shift
  done
  local src="$CACHE/src/$name-$version" out="$CACHE/bin/$name-$version"
  if [[ $k8s -eq 1 ]]; then
    ldflags+=" $(k8s_version_ldflags "$version")"
  fi
  ldflags="-s -w $ldflags"
  local stamp
  stamp=$(printf '%s\n' "$(go version)" "$module@v$version" "cgo=$cgo" "tags=$tags" "ldflags=$ldflags" "${specs[@]}" "${replaces[@]}" | sha256sum | cut -c1-16)
  if [[ ${KWIN_LAB_FORCE:-0} != 1 && -f "$out/.stamp" && $(cat "$out/.stamp") == "$stamp" ]]; then
    return 0
  fi
  local t0=$EPOCHSECONDS
  build_say "$name $version: module $module@v$version"
  mkdir -p "$src"
  BUILD_REPLACES=("${replaces[@]}")
  build_gomod "$src" "$module" "$version" "$k8s" "${specs[@]}"
  local pkgs=() outs=() s
  for s in "${specs[@]}"; do
    pkgs+=("${s%%=*}")
    outs+=("${s#*=}")
  done
  rm -rf "$out.new"
  mkdir -p "$out.new"
  local total
  total=$(cd "$src" && CGO_ENABLED=$cgo go list -mod=mod -tags "${tags// /,}" -deps "${pkgs[@]}" 2>>"$BUILD_LOG" | wc -l) || total="?"
  build_say "$name $version: compiling ${#pkgs[@]} command(s), $total packages"
  # One go build per output name that differs from the package's last element; the rest in
  # one call (shared work is shared by the build cache either way).
  local i group=() gouts=()
  for i in "${!pkgs[@]}"; do
    if [[ ${pkgs[$i]##*/} == "${outs[$i]}" ]]; then
      group+=("${pkgs[$i]}")
      gouts+=("${outs[$i]}")
    fi
  done
  local progress="$src/.progress"
  : >"$progress"
  (
    while sleep 20; do
      build_say "$name $version: $(wc -l <"$progress") packages compiled, $(build_elapsed "$t0")"
    done
  ) &
  local ticker=$!
  local rc=0
  (
    cd "$src"
    export CGO_ENABLED=$cgo
    # (errexit does not hold inside a subshell tested by ||: every failure exits explicitly)
    if [[ ${#group[@]} -gt 0 ]]; then
      nice -n "$BUILD_NICE" go build -mod=mod -v -p "$BUILD_JOBS" -trimpath -tags "${tags// /,}" \
        -ldflags "$ldflags" -o "$out.new/" "${group[@]}" 2>>"$progress" || exit $?
    fi
    for i in "${!pkgs[@]}"; do
      [[ ${pkgs[$i]##*/} == "${outs[$i]}" ]] && continue
      nice -n "$BUILD_NICE" go build -mod=mod -v -p "$BUILD_JOBS" -trimpath -tags "${tags// /,}" \
        -ldflags "$ldflags" -o "$out.new/${outs[$i]}" "${pkgs[$i]}" 2>>"$progress" || exit $?
    done
  ) || rc=$?
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  cat "$progress" >>"$BUILD_LOG"
  if [[ $rc -ne 0 ]]; then
    grep -vE '^[a-zA-Z0-9_.~/-]+$' "$progress" | tail -n 20 >&2 || true
    build_die "$name $version: go build failed (rc=$rc)"
  fi
  for s in "${outs[@]}"; do
    [[ -x "$out.new/$s" ]] || build_die "$name $version: $s was not built"
    if [[ $static_check -eq 1 ]] && ldd "$out.new/$s" >/dev/null 2>&1; then
      build_die "$name $version: $s is not static"
    fi
  done
  echo "$stamp" >"$out.new/.stamp"
  rm -rf "$out"
  mv "$out.new" "$out"
  build_say "$name $version: built in $(build_elapsed "$t0") -> $out ($(du -sh "$out" | cut -f1))"
}

# The -X stamps of kubernetes hack/lib/version.sh for version V.
k8s_version_ldflags() {
  local v=$1 minor=${1#*.}
  minor=${minor%%.*}
  local key val out=""
  for kv in "gitVersion=v$v" "gitMajor=1" "gitMinor=$minor" "gitCommit=v$v" \
    "gitTreeState=clean" "buildDate=1970-01-01T00:00:00Z"; do
    key=${kv%%=*}
    val=${kv#*=}
    out+=" -X k8s.io/client-go/pkg/version.$key=$val -X k8s.io/component-base/version.$key=$val"
  done
  printf '%s' "$out"
}

# build_gomod DIR MODULE VERSION K8S PKG=OUT...: go.mod requiring MODULE@vVERSION with the
# upstream go.mod's replace directives carried over, go.sum from the proxy for the packages.
build_gomod() {
  local dir=$1 module=$2 version=$3 k8s=$4
  shift 4
  local want
  want=$(printf '%s\n' "$module@v$version" "$@" "${BUILD_REPLACES[@]}" | sha256sum | cut -c1-16)
  [[ -f "$dir/go.sum" && -f "$dir/.inputs" && $(cat "$dir/.inputs") == "$want" ]] && return 0
  rm -f "$dir/go.mod" "$dir/go.sum" "$dir/.inputs"
  build_run go mod download "$module@v$version" ||
    build_die "the module proxy does not serve $module@v$version"
  local upstream
  upstream=$(go mod download -json "$module@v$version" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
  [[ -f $upstream ]] || build_die "no go.mod for $module@v$version"
  local gover
  gover=$(awk '$1 == "go" { print $2; exit }' "$upstream")
  {
    echo "module kwin.lab/build/$(basename "$dir")"
    echo
    echo "go ${gover:-1.22}"
    echo
    echo "require $module v$version"
    echo
    # replace directives of the upstream go.mod, single-line and block form
    awk -v k8s="$k8s" -v ver="$version" '
      function emit(line,   parts, lhs, rhs) {
        split(line, parts, "=>")
        lhs = parts[1]; rhs = parts[2]
        gsub(/^[ \t]+|[ \t]+$/, "", lhs); gsub(/^[ \t]+|[ \t]+$/, "", rhs)
        if (rhs ~ /^\.\.?\//) {
          if (k8s == 1 && rhs ~ /^\.\/staging\/src\//) {
            split(ver, v, ".")
            printf "replace %s => %s v0.%s.%s\n", lhs, lhs, v[2], v[3]
          }
          next_skip = 1
          return
        }
        printf "replace %s => %s\n", lhs, rhs
      }
      /^replace[ \t]*\(/ { inblock = 1; next }
      inblock && /^\)/ { inblock = 0; next }
      inblock && /=>/ { sub(/\/\/.*/, ""); emit($0); next }
      /^replace[ \t]+[^(]/ { sub(/^replace[ \t]+/, ""); sub(/\/\/.*/, ""); emit($0); next }
    ' "$upstream"
    # our own replacements (--replace MODULE=DIR): stand-ins for modules the proxy refuses
    local r
    for r in "${BUILD_REPLACES[@]}"; do printf 'replace %s => %s\n' "${r%%=*}" "${r#*=}"; done
  } >"$dir/go.mod"
  # go.sum: what building the packages needs, from the proxy (`go list -mod=mod -deps`; not
  # `go mod tidy`, which would also fetch every test dependency of the whole graph)
  local pk=() s
  for s in "$@"; do pk+=("${s%%=*}"); done
  (cd "$dir" && build_run go list -mod=mod -deps "${pk[@]}") || build_die "resolving the packages of $module@v$version failed"
  echo "$want" >"$dir/.inputs"
}

# build_pause TAG K8S_VERSION: kubernetes build/pause/linux/pause.c of that version.
build_pause() {
  local tag=$1 kv=$2 out="$CACHE/bin/pause-$1"
  local src
  src=$(go mod download -json "k8s.io/kubernetes@v$kv" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [[ -f $src/build/pause/linux/pause.c ]] || build_die "no build/pause/linux/pause.c in k8s.io/kubernetes@v$kv"
  local mtag
  mtag=$(sed -n 's/^TAG ?= //p' "$src/build/pause/Makefile")
  [[ $mtag == "$tag" ]] || build_die "k8s.io/kubernetes@v$kv builds pause $mtag, not $tag"
  local stamp
  stamp=$(cat "$src/build/pause/linux/pause.c" <(gcc --version | head -1) | sha256sum | cut -c1-16)
  [[ ${KWIN_LAB_FORCE:-0} != 1 && -f "$out/.stamp" && $(cat "$out/.stamp") == "$stamp" ]] && return 0
  mkdir -p "$out"
  gcc -Os -Wall -Werror -static -DVERSION="v$tag-v$kv" -o "$out/pause" "$src/build/pause/linux/pause.c" >>"$BUILD_LOG" 2>&1 ||
    build_die "pause: gcc failed"
  echo "$stamp" >"$out/.stamp"
  build_say "pause $tag: built from k8s.io/kubernetes@v$kv build/pause"
}
