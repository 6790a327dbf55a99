#!/usr/bin/env bash
# Packs checks for a GPU node that has CUDA 13 (driver, cuBLAS, cuDNN, NCCL)
# and Python with numpy but none of the toolchain (LLVM/MLIR, ONNX, Open
# MPI): everything is compiled here and travels as one archive (ignored by
# git), run there by scripts/gpu-bundle-run.sh ARCHIVE.
#   bash scripts/gpu-bundle.sh [gpu]   -> .gpu/bundle.tar.xz (about 51 MB)
#   - the kernel cross-check for CUDA and the CPU run's outputs;
#   - the NCCL communicator check (pp-rt-nccl-check);
#   - the MLP, GPT and resnet18 test models (scripts/gpu-programs.sh) as
#     2-stage 1F1B programs built for CUDA, with the CPU build's losses of
#     the same 5 steps;
#   - with PP_GPU_PEER=DIR, DIR/<model>/cuda/train (the same programs
#     linked against another runtime, e.g. before a change) as train-peer,
#     timed beside train.
#   Needs a build with the CUDA backend (scripts/build.sh where nvcc is
#   found).
#   bash scripts/gpu-bundle.sh ranks   -> .gpu/ranks.tar.xz (about 20 MB)
#   - the cost model's check on the node's CPUs, where each rank has a
#     core of its own (this machine has 2): resnet18 (micro-batch 8) and
#     GPT (micro-batch 16) as 1F1B programs of 1, 2 and 4 CPU ranks,
#     planned with this machine's profile (python/check_profile.py --pack;
#     its work directories stay in .gpu/ranks-work for --results, see
#     scripts/gpu-bundle-run.sh). A separate archive: resnet18's weights
#     in both would pass the device tool's 64 MiB.
# Both carry Open MPI's libraries, plugins, orted and orterun, relocated
# through OPAL_PREFIX / PMIX_INSTALL_PREFIX, and the libraries the binaries
# load (libcudart, oneDNN, OpenBLAS, ...).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
kind=${1:-gpu}
case $kind in
  gpu) archive=bundle.tar.xz ;;
  ranks) archive=ranks.tar.xz ;;
  *) echo "gpu-bundle: unknown kind '$kind' (gpu or ranks)" >&2; exit 2 ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pack=$work/pack
mkdir -p "$pack/lib"

if [ "$kind" = gpu ]; then
  for f in "$build/runtime/pp-rt-crosscheck-cuda" "$build/runtime/pp-rt-nccl-check"; do
    if [ ! -x "$f" ]; then
      echo "gpu-bundle: $f was not built (nvcc, cuDNN, NCCL or MPI missing?)" >&2
      exit 1
    fi
  done
  cmake --build "$build" --target pp-test-models pp-rt-crosscheck-cpu \
    pp-rt-crosscheck-cuda pp-rt-nccl-check pipeline-opt >/dev/null
  mkdir -p "$pack/bin" "$pack/models" "$pack/xcpu"
  cp "$build/runtime/pp-rt-crosscheck-cuda" "$build/runtime/pp-rt-nccl-check" "$pack/bin/"
  "$build/runtime/pp-rt-crosscheck-cpu" "$pack/xcpu" >/dev/null
  source "$root/scripts/gpu-programs.sh"
  for entry in $gpu_programs; do
    gpu_program_emit "$build" "$work" "$entry"
    name=$gpu_program_name program=$gpu_program_dir
    cmake -S "$program" -B "$program/cuda" -G Ninja -DPP_CUDA=ON >/dev/null
    cmake --build "$program/cuda" >/dev/null
    mkdir -p "$pack/models/$name"
    cp "$program/cuda/train" "$program/cuda/program.data" "$pack/models/$name/"
    if [ -n "${PP_GPU_PEER:-}" ]; then
      cp "$PP_GPU_PEER/$name/cuda/train" "$pack/models/$name/train-peer"
    fi
    cmake -S "$program" -B "$program/cpu" -G Ninja >/dev/null
    cmake --build "$program/cpu" >/dev/null
    "$program/cpu/train" --local --steps 5 --synthetic --seed 1 | grep '^step' \
      >"$pack/models/$name.cpu"
    if [ -n "${PP_GPU_KEEP:-}" ]; then # the programs, e.g. to build a peer
      mkdir -p "$PP_GPU_KEEP"
      cp -r "$program" "$PP_GPU_KEEP/"
    fi
  done
else
  cmake --build "$build" --target pipeline-opt >/dev/null
  rm -rf "$root/.gpu/ranks-work"
  # model, micro-batch, steps (a step of resnet18 lasts 80-180 ms here).
  for entry in resnet18:8:6 gpt:16:20; do
    IFS=: read -r name micro steps <<<"$entry"
    PATH=$build/bin:$PATH /usr/bin/python3 "$root/python/check_profile.py" \
      --model "$name" --micro-batch "$micro" --steps "$steps" \
      --profile-steps "$steps" --profile-runs 3 --devices 1,2,4 --repeats 5 \
      --work "$root/.gpu/ranks-work/$name" --pack "$pack/ranks/$name" >/dev/null
  done
fi

# Shared libraries: what the binaries and Open MPI's plugins load, less the
# C/C++ runtime (the node has its own, same or newer) and the CUDA libraries
# too large to carry (cuBLAS, cuDNN, NCCL: the node's are used).
ompi=/usr/lib/x86_64-linux-gnu/openmpi
pmix=/usr/lib/x86_64-linux-gnu/pmix2
mkdir -p "$pack/ompi/usr/bin" "$pack/ompi/usr/lib/x86_64-linux-gnu" "$pack/ompi/usr/share"
cp -a "$ompi" "$pack/ompi/usr/lib/x86_64-linux-gnu/"
rm -rf "$pack/ompi/usr/lib/x86_64-linux-gnu/openmpi/include"
cp -a /usr/share/openmpi "$pack/ompi/usr/share/"
cp /usr/bin/orted /usr/bin/orterun "$pack/ompi/usr/bin/"
mkdir -p "$pack/ompi/pmix2"
cp -a "$pmix/lib" "$pmix/share" "$pack/ompi/pmix2/"
rm -f "$pack/ompi/pmix2/lib/"*.a
shopt -s nullglob
ldd "$pack"/bin/* "$pack"/models/*/train* "$pack"/ranks/*/*/train /usr/bin/orted /usr/bin/orterun \
  "$ompi"/lib/openmpi3/*.so 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' |
  sort -u | while read -r soname path; do
    case $soname in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libgcc_s.so*|libstdc++.so*) ;;
      libcublas*|libcudnn*|libnccl*) ;;
      *) cp -L "$path" "$pack/lib/$soname" ;;
    esac
  done
mkdir -p "$root/.gpu"
grep -qx '/.gpu/' "$root/.git/info/exclude" 2>/dev/null ||
  { mkdir -p "$root/.git/info"; echo '/.gpu/' >>"$root/.git/info/exclude"; }
# One archive, a large window: the programs share most of their GPU code.
tar -C "$pack" -cf - . | xz -T1 -9 >"$root/.gpu/$archive"
ls -l "$root/.gpu/$archive"
