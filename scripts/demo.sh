#!/usr/bin/env bash
# The main job on the bundled example: install, build, export the example
# models from PyTorch, plan resnet18 for a heterogeneous 4-GPU cluster
# (partition, recompute, schedule, predicted timeline in build/plan/), then
# compile the MLP into a 2-stage 1F1B pipeline and train it for 5 steps,
# as threads and on 2 MPI ranks; last, the digits demo
# (scripts/digits-demo.sh: a CNN trained on scikit-learn's digits on 2 MPI
# ranks against PyTorch, its held-out accuracy and curves).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"
cmake --build "$build" --target pp-test-models
model=${1:-$build/test/models/resnet18.onnx}
mkdir -p "$build/plan"
"$build/bin/pipeline-opt" "$model" --batch-size=32 \
  --pp-compile="cluster=TITANV,RTX2060,P4000,P4000 schedule=1f1b microbatches=8 recompute=auto plan-dir=$build/plan" \
  -o "$build/plan/pipeline.mlir"
echo "plan: $build/plan/plan.json, timeline: $build/plan/timeline.svg (and timeline.json for chrome://tracing)"
program=$build/mlp-program
"$build/bin/pipeline-opt" "$build/test/models/mlp.onnx" \
  --pp-compile="cluster=2xT4 schedule=1f1b microbatches=4 lr=0.1 emit-dir=$program" \
  -o "$build/plan/mlp-2stage.mlir"
cmake -S "$program" -B "$program/build" -G Ninja >/dev/null
cmake --build "$program/build"
echo "== training the generated 2-stage program: one process, a thread per stage"
"$program/build/train" --local --steps 5 --synthetic --seed 0
echo "== the same program on 2 MPI ranks (mpirun -np 2)"
mpirun --allow-run-as-root --oversubscribe -np 2 "$program/build/train" \
  --steps 5 --synthetic --seed 0
echo "== the digits demo: a CNN trained on scikit-learn's digits, 2 MPI ranks, against PyTorch"
bash "$root/scripts/digits-demo.sh" "$build/digits-demo"
