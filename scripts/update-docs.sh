#!/usr/bin/env bash
# Rewrites docs/passes.md from the passes' TableGen (mlir-doc) and
# pipeline-opt --help; test/docs.test fails while it is stale.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
cmake --build "$build" --target mlir-doc pipeline-opt
/usr/bin/python3 "$root/python/pass_docs.py" --docs "$build/docs" \
  --pipeline-opt "$build/bin/pipeline-opt" --write "$root/docs/passes.md"
