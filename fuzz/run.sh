#!/usr/bin/env bash
# Run every fuzz target for a bounded time: fuzz/run.sh SECONDS [TARGET...]
#
# Installs cargo-fuzz if it is missing, builds the targets once (release, debug assertions
# on), then runs each target for SECONDS on its corpus (fuzz/corpus/TARGET, seeded from
# fuzz/seeds/TARGET and, for plan_load, the example plans). Exits non-zero if any target
# finds a crash; the input that crashed is kept in fuzz/artifacts/TARGET/.
#
# The machine has a stable toolchain: cargo-fuzz's -Z flags need RUSTC_BOOTSTRAP=1. The
# sanitizer defaults to none (kwin's crates forbid unsafe code; the fuzzers look for panics,
# runaway memory and hangs); KWIN_FUZZ_SANITIZER=address turns AddressSanitizer on.
set -euo pipefail
cd "$(dirname "$0")"

secs="${1:-}"
if ! [[ "$secs" =~ ^[0-9]+$ ]] || [ "$secs" -lt 1 ]; then
  echo "usage: fuzz/run.sh SECONDS [TARGET...]" >&2
  exit 2
fi
shift
all_targets=(plan_load fact_batch facts quote)
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then targets=("${all_targets[@]}"); fi

export RUSTC_BOOTSTRAP=1
sanitizer="${KWIN_FUZZ_SANITIZER:-none}"

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz"
  n=0
  until cargo install cargo-fuzz --locked --quiet; do
    n=$((n + 1))
    if [ "$n" -ge 3 ]; then echo "fuzz: cannot install cargo-fuzz" >&2; exit 1; fi
    sleep $((n * 5))
  done
fi

echo "fuzz: building ${targets[*]}"
for t in "${targets[@]}"; do
  cargo fuzz build --sanitizer "$sanitizer" --debug-assertions "$t"
done

failed=()
for t in "${targets[@]}"; do
  corpus="corpus/$t"
  mkdir -p "$corpus"
  if [ -d "seeds/$t" ]; then cp -n seeds/"$t"/* "$corpus"/ 2>/dev/null || true; fi
  if [ "$t" = plan_load ]; then
    for f in ../examples/*.toml; do
      [ -e "$f" ] && cp -n "$f" "$corpus/example-$(basename "$f")"
    done
  fi
  extra=()
  case "$t" in
    plan_load) extra+=("-dict=dict/plan.dict" "-max_len=16384") ;;
    fact_batch) extra+=("-dict=dict/fact_batch.dict" "-max_len=8192") ;;
    *) extra+=("-max_len=4096") ;;
  esac
  mkdir -p logs
  log="logs/$t.log"
  echo "fuzz: $t for ${secs}s"
  if cargo fuzz run --sanitizer "$sanitizer" --debug-assertions "$t" "$corpus" -- \
      -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      "${extra[@]}" >"$log" 2>&1; then
    runs=$(grep -oE 'Done [0-9]+ runs' "$log" | tail -1 || true)
    echo "fuzz: $t ok (${runs:-no run count})"
  else
    echo "fuzz: $t FAILED; last lines of $log:" >&2
    tail -n 40 "$log" >&2
    failed+=("$t")
  fi
done

if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz: crashes in ${failed[*]} (inputs in fuzz/artifacts/)" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets ran ${secs}s each without a crash"
