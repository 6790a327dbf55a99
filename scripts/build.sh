#!/usr/bin/env bash
# Configures (Ninja, Release, ccache when present) and builds pipeline-opt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release}
fi
cmake --build "$build" -j "${JOBS:-$(nproc)}"
