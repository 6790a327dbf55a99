#!/usr/bin/env bash
# Runs the checks packed by scripts/gpu-bundle.sh on a GPU node without the
# toolchain: bash scripts/gpu-bundle-run.sh [.gpu/bundle.tar.xz] [LOG_DIR]
# (or .gpu/ranks.tar.xz, the CPU ranks alone).
# Every check runs (one failing does not stop the others) and the summary
# lists each as PASS or FAIL; exits non-zero when any failed.
#   kernels    the CUDA kernels against the CPU run (compare_kernel_runs.py)
#   <model>    CUDA --local 2-stage 1F1B, 5 steps, losses within 1e-3 of CPU
#              (--no-tf32 wherever losses are compared: full FP32)
#   nccl-1     pp-rt-nccl-check under orterun on every GPU (one rank each)
#   <model>-mpi  2 ranks under orterun, --transport=mpi (host copies); on one
#              GPU both ranks share it
#   nccl-2-on-1  (one GPU only) 2 NCCL ranks on one GPU: must fail with an
#              error that names the cause, not hang
#   ranks      (when packed) the CPU programs of 1, 2 and 4 ranks, a core
#              each, run by python/run_packed_ranks.py into LOG_DIR/ranks;
#              back where the bundle was made, `python/check_profile.py
#              --model M --work .gpu/ranks-work/M --results LOG_DIR/ranks`
#              sets their steps against the cost model's predictions
# Timings (steps/s of --local and of MPI with receive prefetch on/off) go to
# the log; they are figures, not checks. PP_BUNDLE_CHECKS=ranks runs only
# the CPU ranks, =gpu only the GPU checks (default: what the archive has).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=${1:-$root/.gpu/bundle.tar.xz}
logs=${2:-${OUT:-/tmp}}
mkdir -p "$logs"
log=$logs/gpu-check.log
exec > >(tee "$log") 2>&1
w=$(mktemp -d)
tar -C "$w" -xJf "$bundle" || { echo "gpu-bundle-run: cannot unpack $bundle"; exit 1; }

# The node's cuBLAS, cuDNN and NCCL: /usr/local/cuda or pip's nvidia wheels.
libdirs=""
for lib in libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do
  found=$(find /usr/local /opt /usr/lib /usr/lib64 -name "$lib" 2>/dev/null | head -1)
  if [ -z "$found" ]; then
    echo "gpu-bundle-run: $lib not found on this node"
  else
    echo "using $found"
    libdirs="$libdirs:$(dirname "$found")"
  fi
done
export LD_LIBRARY_PATH="$w/lib$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OPAL_PREFIX=$w/ompi/usr PMIX_INSTALL_PREFIX=$w/ompi/pmix2
export PATH=$w/ompi/usr/bin:$PATH
# Debian's PMIx plugins beside its built-in ones: silence the duplicates.
export PMIX_MCA_pcompress_base_silence_warning=1 PMIX_MCA_mca_base_component_show_load_errors=0
mpirun="orterun --allow-run-as-root --oversubscribe"
py=python3 # the comparisons need numpy
$py -c 'import numpy' 2>/dev/null || py=/usr/bin/python3
results=""
record() { # name, status
  results="$results$1 $2"$'\n'
  echo "== $1: $2"
}
summary() { # the checks' results; fails when any failed
  echo "== summary"
  printf '%s' "$results"
  ! grep -q FAIL <<<"$results"
}
check() { # name, command...
  local name=$1
  shift
  echo "== $name: $*"
  if "$@"; then record "$name" PASS; else record "$name" FAIL; fi
}
losses() { # out-file, command...: the command's step lines to out-file
  local out=$1
  shift
  timeout 300 "$@" >"$out.full" 2>&1
  local rc=$?
  cat "$out.full"
  grep '^step' "$out.full" >"$out"
  return $rc
}
kernels() {
  timeout 300 "$w/bin/pp-rt-crosscheck-cuda" "$w/xcuda" >/dev/null &&
    $py "$root/python/compare_kernel_runs.py" "$w/xcpu" "$w/xcuda" | tail -5
}
trains() { # model, run name, launcher and options...: losses against the CPU's
  local m=$1 run=$2
  shift 2
  losses "$w/$m.$run" "$@" --steps 5 --synthetic --seed 1 --no-tf32 &&
    $py "$root/python/compare_losses.py" "$w/models/$m.cpu" "$w/$m.$run"
}

checks=${PP_BUNDLE_CHECKS:-gpu,ranks}
if [[ ,$checks, == *,ranks,* ]] && [ -d "$w/ranks" ]; then
  # First, while the GPU checks have not warmed anything: one rank a core.
  bind="--bind-to core"
  [ "$(nproc)" -ge 4 ] || bind="--bind-to none" # fewer cores than ranks
  check ranks $py "$root/python/run_packed_ranks.py" "$logs/ranks" "$w"/ranks/* \
    --mpirun "$mpirun $bind"
fi
if [[ ,$checks, != *,gpu,* ]] || [ ! -d "$w/models" ]; then
  summary
  exit
fi

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
gpus=$(nvidia-smi --list-gpus | wc -l)
mkdir -p "$w/xcuda"
check kernels kernels

for m in mlp gpt resnet18; do
  check "$m" trains "$m" cuda "$w/models/$m/train" --local
done

echo "== timings: --local, stage s on GPU s mod $gpus; train-peer where packed"
for m in mlp gpt resnet18; do
  for run in 1 2; do
    for exe in train train-peer; do
      [ -x "$w/models/$m/$exe" ] || continue
      echo "-- $m $exe run $run, 50 steps"
      timeout 300 "$w/models/$m/$exe" --local --steps 50 --synthetic --seed 1 |
        grep -e '^trained' -e '^device'
    done
  done
  for exe in train train-peer; do
    [ -x "$w/models/$m/$exe" ] || continue
    timeout 300 "$w/models/$m/$exe" --local --steps 10 --synthetic --seed 1 \
      --profile-kind "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' _)" \
      --write-profile "$logs/profile-$m-$exe.json" >/dev/null
  done
done

# Where a step's time goes (host-bound or not): Nsight Systems' summaries
# of 10 resnet18 steps (CUDA API calls, kernels, copies), where the node
# has nsys.
nsys=$(command -v nsys || find /usr/local /opt -name nsys -type f -perm -u+x 2>/dev/null | head -1)
if [ -n "$nsys" ]; then
  echo "== nsys: $nsys, resnet18 --local, 10 steps (summaries in nsys-resnet18.txt)"
  timeout 300 "$nsys" profile --trace=cuda,nvtx,osrt --sample=none -o "$w/nsys-resnet18" \
    "$w/models/resnet18/train" --local --steps 10 --synthetic --seed 1 >/dev/null 2>&1 &&
    timeout 300 "$nsys" stats --report cuda_api_sum,cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,osrt_sum \
      "$w/nsys-resnet18.nsys-rep" >"$logs/nsys-resnet18.txt" 2>&1
  head -60 "$logs/nsys-resnet18.txt"
else
  echo "== nsys: not on this node (no API / kernel time split)"
fi

check nccl-1 timeout 120 $mpirun -np "$gpus" "$w/bin/pp-rt-nccl-check"

for m in gpt resnet18; do
  check "$m-mpi" trains "$m" mpi $mpirun -np 2 "$w/models/$m/train" --transport=mpi
done
echo "== timings: 2 ranks, --transport=mpi, receive prefetch on/off (3 runs each)"
for m in gpt resnet18; do
  for run in 1 2 3; do
    for p in on off; do
      echo "-- $m prefetch $p run $run: $(timeout 120 $mpirun -np 2 "$w/models/$m/train" --transport=mpi --steps 50 --synthetic --seed 1 --prefetch-receives $p 2>&1 | grep '^trained')"
    done
  done
done

if [ "$gpus" -eq 1 ]; then
  echo "== nccl-2-on-1: expect a clear error, no hang"
  timeout 120 $mpirun -np 2 "$w/models/mlp/train" --steps 2 --synthetic --seed 1 >"$w/n21" 2>&1
  rc=$?
  cat "$w/n21" | head -30
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -qi "error" "$w/n21"; then
    record nccl-2-on-1 PASS
  else
    record nccl-2-on-1 "FAIL (rc $rc)"
  fi
else
  for m in gpt resnet18; do
    check "$m-nccl" trains "$m" nccl $mpirun -np 2 "$w/models/$m/train"
    check "$m-headers" trains "$m" headers $mpirun -np 2 "$w/models/$m/train" --p2p-matching=headers
  done
fi

summary
