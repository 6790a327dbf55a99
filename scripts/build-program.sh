#!/usr/bin/env bash
# Builds a generated training program (pipeline-opt --pp-compile ...
# emit-dir=DIR) in DIR/build: CMake + Ninja, Release, or -O$PP_PROGRAM_OPT
# and through ccache with PP_PROGRAM_CCACHE=1 as python/check_generated.py's
# build (the lit tests set both). The demos call it.
#   bash scripts/build-program.sh DIR
set -euo pipefail
dir=$1
configure=(-DCMAKE_BUILD_TYPE=Release)
[ -n "${PP_PROGRAM_OPT:-}" ] &&
  configure=(-DCMAKE_BUILD_TYPE=None "-DCMAKE_CXX_FLAGS=-O$PP_PROGRAM_OPT")
[ "${PP_PROGRAM_CCACHE:-}" = 1 ] && command -v ccache >/dev/null &&
  configure+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$dir" -B "$dir/build" -G Ninja "${configure[@]}" >/dev/null
cmake --build "$dir/build" >/dev/null
