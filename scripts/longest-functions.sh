#!/usr/bin/env bash
# Prints the N longest functions (default 10) of the C++ and CUDA sources
# (.cpp, .h, .cu, .cuh) in lib/, runtime/ and tools/, or in the PATHs given:
# a row of lines, file:line (the function's name) and its qualified name,
# longest first. python/longest_functions.py scans the text (no build
# needed); lambdas count toward the function that holds them.
# Usage: scripts/longest-functions.sh [N] [PATH...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-10}
if ! [[ $n =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/longest-functions.sh [N] [PATH...] (N: a positive number, got '$n')" >&2
  exit 2
fi
shift $(($# > 0 ? 1 : 0))
if [ $# -eq 0 ]; then
  cd "$root"
  set -- lib runtime tools
fi
exec /usr/bin/python3 "$root/python/longest_functions.py" --most "$n" "$@"
