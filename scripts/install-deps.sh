#!/usr/bin/env bash
# Installs the Debian packages pipeline-opt needs to build, test and make its test models.
set -euo pipefail
PKGS=(
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata
  libopenmpi-dev openmpi-bin libopenblas-dev libgtest-dev
  libdnnl-dev ocl-icd-opencl-dev
  ninja-build cmake g++ ccache
  clang-22 libclang-rt-22-dev
  python3-onnx python3-torch python3-torchvision python3-numpy
  python3-sklearn python3-matplotlib
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
