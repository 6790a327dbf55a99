#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test suite (lit; the
# GoogleTest/ctest suites join here as they are added).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"
cmake --build "$build" --target check-pp
