#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60) and prints, per target, executions,
# crashes, timeouts, out-of-memory inputs and peak memory.
#
#   fuzz/run.sh [SECONDS] [TARGET...]
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). Targets are built
# with optimizations and debug assertions (overflow checks on), without a sanitizer (`SAN`,
# default `none`; `SAN=address` for AddressSanitizer): the only unsafe code on a parser's path
# is the trace scanner's SSE2 search for a string's end, whose loads stay inside the slice
# (actors/src/json_str.rs), and its ASCII check (src/trace/event.rs); run trace_lines and
# trace_file with SAN=address after changing them. Without a sanitizer the speed buys
# executions. The limits are the acceptance ones:
# an input that runs over 1 s is a timeout, one that takes over 512 MiB is out of memory.
# JOBS targets run at once (default: the number of cores). Inputs that fail are saved under
# fuzz/artifacts/<target>/; replay one with the target binary, then add it under
# tests/hostile/<target>/ so the normal suite keeps it fixed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
seconds="${1:-60}"
shift || true
all=(manifest lock trace_lines trace_file plan archive script reply peer)
targets=("${@:-${all[@]}}")
jobs="${JOBS:-$(nproc)}"
shared="${MUR_SHARED:-$root/../shared}"

cd "$here"
cargo +nightly fuzz build -O -a -s "${SAN:-none}" 2>&1 | tail -1
bin="$here/target/$(rustc +nightly -vV | sed -n 's/^host: //p')/release"

# The seed corpus of each target: files the project already holds, and the regression inputs.
seed() {
  local t="$1" dir="$here/corpus/$1"
  mkdir -p "$dir"
  local -a from=()
  case "$t" in
    manifest) from=("$shared"/conformance/manifests/*.yaml) ; while IFS= read -r f; do from+=("$f"); done < <(find "$root/examples" -name murmur.yaml) ;;
    script) while IFS= read -r f; do from+=("$f"); done < <(find "$root/examples" -name 'script*.yaml') ;;
    trace_lines|trace_file) from=("$here"/seeds/trace/* "$shared"/conformance/traces/*.jsonl) ;;
    *) from=("$here"/seeds/"$t"/*) ;;
  esac
  from+=("$root"/tests/hostile/"$t"/*)
  for f in "${from[@]}"; do
    [ -f "$f" ] && cp "$f" "$dir/seed-$(sha256sum "$f" | cut -c1-16)"
  done
  return 0
}

run() {
  local t="$1" art="$here/artifacts/$1/" log="$here/artifacts/$1.log"
  # Only this run's findings are counted: earlier ones move aside.
  if [ -d "$art" ] && [ -n "$(ls -A "$art")" ]; then
    mv "$art" "$here/artifacts/$t.$(date +%s).old"
  fi
  mkdir -p "$art"
  "$bin/$t" "$here/corpus/$t" -max_total_time="$seconds" -timeout=1 -rss_limit_mb=512 \
    -print_final_stats=1 -artifact_prefix="$art" >"$log" 2>&1 || true
}

for t in "${targets[@]}"; do seed "$t"; done
running=0
for t in "${targets[@]}"; do
  run "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
done
wait

printf '%-12s %12s %8s %9s %5s %9s\n' target executions crashes timeouts ooms peak_MiB
status=0
for t in "${targets[@]}"; do
  log="$here/artifacts/$t.log"; art="$here/artifacts/$t"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  crashes=$(find "$art" -name 'crash-*' | wc -l)
  timeouts=$(find "$art" -name 'timeout-*' -o -name 'slow-unit-*' | wc -l)
  ooms=$(find "$art" -name 'oom-*' | wc -l)
  printf '%-12s %12s %8s %9s %5s %9s\n' "$t" "${execs:-?}" "$crashes" "$timeouts" "$ooms" "${rss:-?}"
  if [ "$crashes$timeouts$ooms" != "000" ] || [ -z "$execs" ]; then status=1; fi
done
exit "$status"
