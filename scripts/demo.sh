#!/usr/bin/env bash
# The main job on the bundled example: install, build, export the example
# model from PyTorch, import it and print its summary.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"
cmake --build "$build" --target pp-test-models
model=${1:-$build/test/models/resnet18.onnx}
"$build/bin/pipeline-opt" "$model" --batch-size=8 --pp-model-summary -o /dev/null
