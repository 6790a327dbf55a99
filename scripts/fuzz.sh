#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/, docs/testing.md) in build-fuzz with
# clang-22 (incrementally) and runs each for SECONDS (default 20) from its
# seed corpus, fuzz/corpus/<name>; scripts/test.sh runs it briefly, a long run
# is `scripts/fuzz.sh 3600`. Fails when a harness finds a crash, a leak, a
# timeout (10 s per input) or a runaway memory use (2 GB); the input is then
# under build-fuzz/fuzz/artifacts/<name>/. Inputs that found new coverage
# collect in build-fuzz/fuzz/work/<name>/ (kept between runs). A summary
# (executions, seconds, exec/s, coverage) is printed and written to
# build-fuzz/fuzz/summary.txt.
#   scripts/fuzz.sh [SECONDS] [NAME...]   NAME: onnx cluster npy checkpoint pass-pipeline compile
#   FUZZ_RUNS=N: stop each harness after N executions instead (SECONDS still bounds it)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${1:-20}
[ $# -gt 0 ] && shift
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(onnx cluster npy checkpoint pass-pipeline compile)

if [ ! -f "$build/build.ninja" ]; then
  CC=${FUZZ_CC:-clang-22} CXX=${FUZZ_CXX:-clang++-22} cmake -S "$root" -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DPP_ENABLE_FUZZERS=ON
fi
targets=()
for n in "${names[@]}"; do targets+=("pp-fuzz-$n"); done
cmake --build "$build" -j "${JOBS:-$(nproc)}" --target "${targets[@]}"

out=$build/fuzz
summary=$out/summary.txt
printf '%-14s %10s %8s %8s %6s %6s  %s\n' harness execs seconds exec/s cov ft status > "$summary"
status=0
for n in "${names[@]}"; do
  work=$out/work/$n artifacts=$out/artifacts/$n log=$out/$n.log
  mkdir -p "$work" "$artifacts"
  # -close_fd_mask=2: the harnesses' own stderr (every rejected option or
  # model explains itself) is dropped; libFuzzer's and the sanitizers'
  # reports still reach the log.
  args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048
        -close_fd_mask=2 -print_final_stats=1 -artifact_prefix="$artifacts/")
  [ -n "${FUZZ_RUNS:-}" ] && args+=(-runs="$FUZZ_RUNS")
  [ -f "$root/fuzz/$n.dict" ] && args+=(-dict="$root/fuzz/$n.dict")
  echo "fuzz: $n for ${seconds}s ($log)"
  start=$(date +%s)
  rc=0
  (cd "$out" && ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
     UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
     "$out/pp-fuzz-$n" "${args[@]}" "$work" "$root/fuzz/corpus/$n") \
     > "$log" 2>&1 || rc=$?
  secs=$(( $(date +%s) - start ))
  # libFuzzer's own count of seconds, when it got to the end.
  done_secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  secs=${done_secs:-$secs}
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | awk '{s+=$1} END {print s+0}')
  rate=$(( secs > 0 ? execs / secs : execs ))
  last=$(grep -aE '^#[0-9]+' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  result=ok
  if [ $rc -ne 0 ]; then
    result="FAILED (rc $rc)"
    status=1
    grep -aE 'ERROR: |SUMMARY: |runtime error|Test unit written' "$log" | head -5 >&2 || true
    # The run dropped the harness's own stderr (-close_fd_mask=2); run the
    # input that failed once more with it, so the log names the cause (an
    # LLVM ERROR, an uncaught exception, a stack) and shows the input.
    unit=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    if [ -n "$unit" ] && [ -f "$unit" ]; then
      echo "fuzz: $n: the failing input ($unit), escaped:" >&2
      od -An -c "$unit" | head -20 >&2
      echo "fuzz: $n: that input run alone:" >&2
      (cd "$out" && ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
         UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
         "$out/pp-fuzz-$n" -timeout=10 -rss_limit_mb=2048 "$unit") 2>&1 \
        | tail -40 >&2 || true
    fi
  fi
  printf '%-14s %10s %8s %8s %6s %6s  %s\n' "$n" "$execs" "$secs" "$rate" \
    "${cov:-?}" "${ft:-?}" "$result" >> "$summary"
done
cat "$summary"
exit $status
