#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test suite: lit (FileCheck
# tests, including the importer runs over ONNX's own test models), then the
# GoogleTest suites through ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"
cmake --build "$build" --target check-pp
cd "$build" && ctest --output-on-failure
