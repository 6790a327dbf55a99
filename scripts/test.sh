#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test suite: lit (FileCheck
# tests, including the importer runs over ONNX's own test models), then the
# GoogleTest suites through ctest, then each libFuzzer harness for
# PP_FUZZ_SECONDS (20) seconds (scripts/fuzz.sh: build-fuzz, clang-22).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"
cmake --build "$build" --target check-pp
(cd "$build" && ctest --output-on-failure)
bash "$root/scripts/fuzz.sh" "${PP_FUZZ_SECONDS:-20}"
