#!/usr/bin/env bash
# The long tier of the test suite, which the test command (scripts/test.sh)
# leaves out to stay within CI's time: the lit files marked
# `REQUIRES: long-tests` (more models and configurations of
# pipeline-semantics, generated-programs and versioned-schedules). The full
# matrices are scripts/generated-matrix.sh and scripts/check-versioned.sh.
# Usage: scripts/test-long.sh (after scripts/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
cmake --build "$build" --target pp-test-models
files=$(grep -rl --include="*.test" --include="*.mlir" "^// REQUIRES: long-tests" "$root/test" | sort)
tests=()
for f in $files; do
  tests+=("$build/test/${f#"$root/test/"}")
done
PP_LONG_TESTS=1 /usr/lib/llvm-22/bin/lit -sv "${tests[@]}"
