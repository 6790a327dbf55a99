#!/usr/bin/env bash
# GPU checks for a node with NVIDIA GPUs (not part of CI: CI has no GPU).
# Builds with the CUDA backend and runs what needs a GPU:
#   - the kernel cross-check: the same kernel cases on the CPU and on the
#     GPU, outputs compared (python/compare_kernel_runs.py);
#   - the NCCL communicator (pp-rt-nccl-check) on every GPU of the node
#     under mpirun: a ring, large messages both ways, an all-reduce.
# A node with CUDA but without the toolchain (LLVM/MLIR, ONNX, Open MPI)
# runs the same checks from an archive built elsewhere: scripts/gpu-bundle.sh
# packs it, scripts/gpu-bundle-run.sh runs it.
#   - end to end: the MLP, GPT and resnet18 test models compiled into
#     2-stage 1F1B programs, built for the CPU and for CUDA from the same
#     generated source; the CUDA build trains with --local (one process,
#     the stages on the node's GPUs) and, with 2+ GPUs, under mpirun over
#     NCCL (messages matched by order, then again with --p2p-matching=headers);
#     its losses must match the CPU build's (
#     python/compare_losses.py, 1e-3 relative: cuBLAS and cuDNN sum in
#     other orders; --no-tf32: full FP32, not the TF32 of training runs).
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
echo "gpu-check: generated programs, CPU against CUDA"
cmake --build "$build" --target pp-test-models
source "$root/scripts/gpu-programs.sh"
for entry in $gpu_programs; do
  gpu_program_emit "$build" "$work" "$entry"
  model=$gpu_program_name program=$gpu_program_dir
  cmake -S "$program" -B "$program/cpu" -G Ninja >/dev/null
  cmake --build "$program/cpu" >/dev/null
  cmake -S "$program" -B "$program/cuda" -G Ninja -DPP_CUDA=ON >/dev/null
  cmake --build "$program/cuda" >/dev/null
  "$program/cpu/train" --local --steps 5 --synthetic --seed 1 | grep '^step' > "$work/$model.cpu"
  timeout 300 "$program/cuda/train" --local --steps 5 --synthetic --seed 1 --no-tf32 | grep '^step' > "$work/$model.cuda"
  /usr/bin/python3 "$root/python/compare_losses.py" "$work/$model.cpu" "$work/$model.cuda"
  if [ "$gpus" -ge 2 ]; then
    timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 "$program/cuda/train" \
      --steps 5 --synthetic --seed 1 --no-tf32 | grep '^step' > "$work/$model.nccl"
    /usr/bin/python3 "$root/python/compare_losses.py" "$work/$model.cpu" "$work/$model.nccl"
    timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 "$program/cuda/train" \
      --steps 5 --synthetic --seed 1 --no-tf32 --p2p-matching=headers | grep '^step' > "$work/$model.headers"
    /usr/bin/python3 "$root/python/compare_losses.py" "$work/$model.cpu" "$work/$model.headers"
  else
    echo "gpu-check: one GPU: NCCL point-to-point (2+ GPUs) not run"
  fi
done
echo "gpu-check: passed"
