#!/usr/bin/env bash
# GPU checks for a node with NVIDIA GPUs (not part of CI: CI has no GPU).
# Builds with the CUDA backend and runs what needs a GPU:
#   - the kernel cross-check: the same kernel cases on the CPU and on the
#     GPU, outputs compared (python/compare_kernel_runs.py);
#   - the NCCL communicator (pp-rt-nccl-check) on every GPU of the node
#     under mpirun: a ring, large messages both ways, an all-reduce.
# The end-to-end training tests join here once code generation lands
# (issue 5).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
bash "$root/scripts/build.sh"
work=$(mktemp -d)
mkdir -p "$work/cpu" "$work/cuda"
"$build/runtime/pp-rt-crosscheck-cpu" "$work/cpu"
"$build/runtime/pp-rt-crosscheck-cuda" "$work/cuda"
/usr/bin/python3 "$root/python/compare_kernel_runs.py" "$work/cpu" "$work/cuda"
check=$build/runtime/pp-rt-nccl-check
if [ ! -x "$check" ]; then
  echo "gpu-check: $check was not built (CUDA, NCCL or MPI missing?)" >&2
  exit 1
fi
gpus=$(nvidia-smi --list-gpus | wc -l)
if [ "$gpus" -lt 1 ]; then
  echo "gpu-check: no GPU visible to nvidia-smi" >&2
  exit 1
fi
# One rank per GPU (NCCL refuses two ranks on one GPU); with a single GPU
# only the all-reduce runs.
ranks=$gpus
echo "gpu-check: NCCL on $gpus GPU(s), $ranks rank(s)"
timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$ranks" "$check"
echo "gpu-check: passed"
