#!/usr/bin/env bash
# The full matrix of generated programs (issue 11's acceptance; the test
# suite runs a slice of it in test/Target/Program/generated-programs.test):
# each test model plus the tied-weight one, every schedule on 2 and 4
# devices, compiled with --pp-compile, built, trained 5 steps (--local on 2
# devices, mpirun on 4) and compared with the reference interpreter on the
# same pipeline and with the unsplit step (python/check_generated.py;
# resnet18 against its one-device program, BatchNorm statistics being per
# micro-batch). Prints one line per program and fails on any MISMATCH.
#   scripts/generated-matrix.sh [WORK_DIR] [MODEL...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
work=${1:-$build/generated-matrix}
[ $# -gt 0 ] && shift
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(mlp transformer gpt vgg11 resnet18 tied)
export PATH="$build/bin:$PATH"
mpirun="mpirun --allow-run-as-root --oversubscribe"
configs=gpipe:2:none:local,gpipe:4:none:mpi,1f1b:2:none:local,1f1b:4:none:mpi
configs+=,interleaved:2:none:local,interleaved:4:none:mpi
configs+=,zb-h1:2:none:local,zb-h1:4:none:mpi
mkdir -p "$work"
status=0
for model in "${models[@]}"; do
  extra=()
  [ "$model" = resnet18 ] && extra=(--reference one-stage)
  start=$(date +%s)
  if ! /usr/bin/python3 "$root/python/check_generated.py" --model "$model" \
      --work "$work/$model" --mpirun "$mpirun" --configs "$configs" \
      "${extra[@]}" | tee "$work.$model.log"; then
    status=1
  fi
  grep -q MISMATCH "$work.$model.log" && status=1
  echo "$model: $(( $(date +%s) - start )) s"
done
exit $status
