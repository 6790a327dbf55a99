#!/usr/bin/env bash
# Packs the GPU check for a GPU node that has CUDA 13 (driver, cuBLAS, cuDNN,
# NCCL) and Python with numpy but none of the toolchain (LLVM/MLIR, ONNX,
# Open MPI): everything is compiled here and travels as one archive,
# .gpu/bundle.tar.xz (about 45 MB, ignored by git), run there by
# scripts/gpu-bundle-run.sh. Contents:
#   - the kernel cross-check for CUDA and the CPU run's outputs;
#   - the NCCL communicator check (pp-rt-nccl-check);
#   - the MLP, GPT and resnet18 test models as 2-stage 1F1B programs built
#     for CUDA, with the CPU build's losses of the same 5 steps (resnet18 at
#     batch 32, lr 0.002: at batch 8 its micro-batches of 2 reach BatchNorms
#     over 1x1 maps, where float reordering alone moves the loss: the CPU's
#     two convolutions, oneDNN and im2col, differ by 11% at step 5);
#   - with PP_GPU_PEER=DIR, DIR/<model>/train (the same programs linked
#     against another runtime, e.g. before a change) as train-peer, timed
#     beside train;
#   - libcudart and Open MPI's libraries, plugins, orted and orterun,
#     relocated through OPAL_PREFIX / PMIX_INSTALL_PREFIX.
# Needs a build with the CUDA backend (scripts/build.sh where nvcc is found).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
for f in "$build/runtime/pp-rt-crosscheck-cuda" "$build/runtime/pp-rt-nccl-check"; do
  if [ ! -x "$f" ]; then
    echo "gpu-bundle: $f was not built (nvcc, cuDNN, NCCL or MPI missing?)" >&2
    exit 1
  fi
done
cmake --build "$build" --target pp-test-models pp-rt-crosscheck-cpu \
  pp-rt-crosscheck-cuda pp-rt-nccl-check pipeline-opt >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pack=$work/pack
mkdir -p "$pack/bin" "$pack/lib" "$pack/models" "$pack/xcpu"
cp "$build/runtime/pp-rt-crosscheck-cuda" "$build/runtime/pp-rt-nccl-check" "$pack/bin/"
"$build/runtime/pp-rt-crosscheck-cpu" "$pack/xcpu" >/dev/null

# name, batch option (MLP's and GPT's batches are static), learning rate.
programs="mlp::0.05 gpt::0.05 resnet18:--batch-size=32:0.002"
for entry in $programs; do
  IFS=: read -r name batch lr <<<"$entry"
  program=$work/$name
  "$build/bin/pipeline-opt" "$build/test/models/$name.onnx" $batch \
    --pp-compile="cluster=2xA100-80 schedule=1f1b microbatches=4 lr=$lr report= emit-dir=$program" \
    -o "$work/$name.mlir"
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
ldd "$pack"/bin/* "$pack"/models/*/train* /usr/bin/orted /usr/bin/orterun \
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
tar -C "$pack" -cf - . | xz -T1 -9 >"$root/.gpu/bundle.tar.xz"
ls -l "$root/.gpu/bundle.tar.xz"
