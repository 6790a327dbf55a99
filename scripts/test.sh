#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test suite: lit (FileCheck
# tests, including the importer runs over ONNX's own test models), then the
# GoogleTest suites through ctest, then each libFuzzer harness for
# PP_FUZZ_SECONDS (20) seconds (scripts/fuzz.sh: build-fuzz, clang-22).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
# A disk that fills mid-run fails tests in ways that hide the cause (a CI
# run once did); the run needs about 3 GiB: the build, build-fuzz, ccache
# and the tests' outputs at their peak (a passing test's are deleted).
need_gib=${PP_TEST_FREE_DISK_GIB:-3}
free_kib=$(df -Pk "$root" | awk 'NR == 2 { print $4 }')
if [ -n "$free_kib" ] && [ "$free_kib" -lt $((need_gib * 1024 * 1024)) ]; then
  echo "error: $((free_kib / 1024)) MiB free on the disk of $root; the test" \
    "command needs about $need_gib GiB (PP_TEST_FREE_DISK_GIB=0 skips this check)" >&2
  exit 1
fi
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"
cmake --build "$build" --target check-pp
(cd "$build" && ctest --output-on-failure)
bash "$root/scripts/fuzz.sh" "${PP_FUZZ_SECONDS:-20}"
