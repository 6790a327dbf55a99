#!/usr/bin/env bash
# The prepared GPU benchmark (issue 44): one run on one GPU node that
#   - runs the kernel cross-check (CUDA against the CPU's outputs);
#   - trains the GPT test model scaled up (12 layers, d 768, 12 heads,
#     sequence 1024, vocabulary 8192, batch 8) and resnet50 (224 x 224,
#     batch 64) as generated programs of 1 stage and of 2 stages (1F1B, 4
#     micro-batches, `--local`: both stages on the one GPU), in fp32 (TF32,
#     the default; and 1 stage with --no-tf32) and in bf16
#     (`precision=bf16`), 20 steps each: median samples/s after the
#     warm-up, MFU, peak GPU memory;
#   - runs the same models, batch and SGD step in PyTorch on the same GPU:
#     eager fp32 (TF32 allowed), eager with bf16 autocast, torch.compile
#     with bf16 autocast;
#   - runs the cost model's 4-rank prediction check on the node's cores
#     (scripts/gpu-bundle.sh ranks, when its archive is there);
#   - writes the results as a bench/README.md section (LOG_DIR/bench.md,
#     and appended to bench/README.md of the checkout it runs in).
# bench/gpu_bench.py holds the models, the PyTorch peers and the table.
#
#   bash scripts/gpu-bench.sh --dry-run
#       Here, without a GPU: checks the inputs (tools built, python modules,
#       the models exported and compiled at a small size, each program kind
#       that pipeline-opt cannot compile named, each data file rebuilt from
#       its recipe) and prints every command of the real run; exits 0 when
#       all are there.
#   bash scripts/gpu-bench.sh --pack
#       Here (the toolchain, no GPU needed): exports, compiles and builds
#       everything into .gpu/bench.tar.xz for a node without the toolchain,
#       and .gpu/ranks.tar.xz (scripts/gpu-bundle.sh ranks). The weights do
#       not travel: each program's data file is made again on the node from
#       a recipe (bench/gpu_bench.py rebuild).
#   bash scripts/gpu-bench.sh --run [ARCHIVE [LOG_DIR]]
#       On the GPU node: runs the archive (default .gpu/bench.tar.xz, logs
#       to LOG_DIR, default /tmp/gpu-bench; where $OUT is set, the table
#       and all logs as one archive go there too: bench.md,
#       gpu-bench-logs.tar.xz). About 10 minutes on an H100.
#   bash scripts/gpu-bench.sh
#       Both on a GPU node that has the toolchain.
# Fails with a clear message, running nothing, where it needs a GPU and
# nvidia-smi sees none. PP_BENCH_PYTHON picks the Python with torch
# (default python3); PP_BENCH_STEPS the steps per run (default 20);
# PP_BENCH_SMALL=1 packs the dry run's small models (to try the flow);
# PP_BENCH_SKIP a comma list of parts to leave out (kernels, programs,
# torch, compile, ranks); JOBS the build's parallelism (default nproc).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
py=${PP_BENCH_PYTHON:-python3}
steps=${PP_BENCH_STEPS:-20}
skip=,${PP_BENCH_SKIP:-},
jobs=${JOBS:-$(nproc)}

mode=all
archive=$root/.gpu/bench.tar.xz
logs=/tmp/gpu-bench
case ${1:-} in
  --dry-run) mode=dry ;;
  --pack) mode=pack ;;
  --run)
    mode=run
    archive=${2:-$archive}
    logs=${3:-$logs}
    ;;
  "") ;;
  *) echo "usage: bash scripts/gpu-bench.sh [--dry-run | --pack | --run [ARCHIVE [LOG_DIR]]]" >&2; exit 2 ;;
esac

# The programs: model:stages:precision (fp32 runs TF32 unless --no-tf32).
programs="gpt:1:fp32 gpt:2:fp32 gpt:1:bf16 gpt:2:bf16 resnet50:1:fp32 resnet50:2:fp32 resnet50:1:bf16 resnet50:2:bf16"
torch_modes="eager-fp32 eager-bf16 compile-bf16"

say() { echo "gpu-bench: $*"; }
fail() { echo "gpu-bench: $*" >&2; exit 1; }
show() { printf '+'; printf ' %q' "$@"; printf '\n'; }
skipped() { [[ $skip == *,$1,* ]]; }

# compile_program MODELS_DIR OUT_DIR MODEL STAGES PRECISION: the program's
# emit-dir (pipeline-opt --pp-compile); its errors in OUT_DIR.log.
compile_args() { # model stages precision -> the --pp-compile option
  local m=1
  [ "$2" -gt 1 ] && m=4
  echo "--pp-compile=cluster=$2xH100 schedule=1f1b microbatches=$m lr=0.01 precision=$3 report= emit-dir=$4"
}
compile_program() {
  local models=$1 out=$2 model=$3 stages=$4 precision=$5
  "$build/bin/pipeline-opt" "$models/$model.onnx" \
    "$(compile_args "$model" "$stages" "$precision" "$out")" -o "$out.mlir" \
    >"$out.log" 2>&1
}

gpu_present() {
  command -v nvidia-smi >/dev/null 2>&1 && [ "$(nvidia-smi --list-gpus 2>/dev/null | wc -l)" -ge 1 ]
}
require_gpu() {
  gpu_present || fail "no GPU: nvidia-smi lists none on this machine. Here, run --dry-run (checks and prints the run) or --pack (builds the archive); run --run ARCHIVE on a GPU node."
}

#===---------------------------------------------------------------------===#
# Inputs
#===---------------------------------------------------------------------===#

check_inputs() { # prints what is missing; returns non-zero if anything is
  local missing=0
  for f in "$build/bin/pipeline-opt" "$build/runtime/pp-rt-crosscheck-cpu" \
    "$build/runtime/pp-rt-crosscheck-cuda" "$build/runtime/libpp_train_cuda.a"; do
    if [ -e "$f" ]; then say "found $f"; else say "not built: $f (scripts/build.sh with nvcc and cuDNN)"; missing=1; fi
  done
  if [ -f "$build/runtime/PPRuntimeConfig.cmake" ]; then
    say "found $build/runtime/PPRuntimeConfig.cmake (generated programs build against it)"
  else
    say "not built: $build/runtime/PPRuntimeConfig.cmake"; missing=1
  fi
  for tool in cmake ninja xz; do
    command -v $tool >/dev/null || { say "missing: $tool"; missing=1; }
  done
  local pyinfo
  if pyinfo=$(/usr/bin/python3 -c '
import numpy, onnx, torch, torchvision
print("torch", torch.__version__, "torchvision", torchvision.__version__,
      "onnx", onnx.__version__, "numpy", numpy.__version__,
      "torch.compile:", "yes" if hasattr(torch, "compile") else "no")' 2>&1); then
    say "/usr/bin/python3 (exports the models): $pyinfo"
  else
    say "/usr/bin/python3 lacks a module the export needs: $pyinfo"; missing=1
  fi
  if pyinfo=$("$py" -c 'import torch, numpy
print(torch.__version__, "cuda" if torch.cuda.is_available() else "no GPU",
      "compile" if hasattr(torch, "compile") else "no torch.compile (torch < 2: the compile-bf16 peer is skipped)")' 2>&1); then
    say "$py (runs the PyTorch peers on the node): torch $pyinfo"
  else
    say "$py: no torch here ($pyinfo); the node's python3 must have it"
  fi
  return $missing
}

#===---------------------------------------------------------------------===#
# Pack: everything the toolchain makes, into a directory
#===---------------------------------------------------------------------===#

pack_into() { # DIR
  local pack=$1 work
  work=$(mktemp -d)
  mkdir -p "$pack/bin" "$pack/lib" "$pack/models" "$pack/programs" "$pack/xcpu"
  cmake --build "$build" -j "$jobs" --target pipeline-opt \
    pp-rt-crosscheck-cpu pp-rt-crosscheck-cuda pp_train_cuda >/dev/null
  cp "$build/runtime/pp-rt-crosscheck-cuda" "$pack/bin/"
  "$build/runtime/pp-rt-crosscheck-cpu" "$pack/xcpu" >/dev/null
  /usr/bin/python3 "$root/bench/gpu_bench.py" export ${PP_BENCH_SMALL:+--small} \
    --out "$work/models" 2>&1 |
    grep -v -e Warning -e '^ ' || true
  cp "$work/models/models.json" "$pack/models/"
  local entry model stages precision name dir
  for entry in $programs; do
    IFS=: read -r model stages precision <<<"$entry"
    name=$model-$stages-$precision
    dir=$work/$name
    if ! compile_program "$work/models" "$dir" "$model" "$stages" "$precision"; then
      say "$name: not built: pipeline-opt: $(grep -m1 error "$dir.log" || tail -1 "$dir.log")"
      grep -m1 error "$dir.log" >"$pack/programs/$name.not-built" || tail -1 "$dir.log" >"$pack/programs/$name.not-built"
      continue
    fi
    cmake -S "$dir" -B "$dir/cuda" -G Ninja -DPP_CUDA=ON >/dev/null
    cmake --build "$dir/cuda" -j "$jobs" >/dev/null
    mkdir -p "$pack/programs/$name"
    cp "$dir/cuda/train" "$pack/programs/$name/"
    /usr/bin/python3 "$root/bench/gpu_bench.py" recipe --data "$dir/program.data" \
      --onnx "$work/models/$model.onnx" --out "$pack/programs/$name/data"
    rm -rf "$dir"
    say "$name: built"
  done
  # The libraries the binaries load, less the C/C++ runtime and the CUDA
  # libraries the node has (cuBLAS, cuDNN, NCCL).
  ldd "$pack"/bin/* "$pack"/programs/*/train 2>/dev/null |
    awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
    while read -r soname path; do
      case $soname in
        libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libgcc_s.so*|libstdc++.so*) ;;
        libcublas*|libcudnn*|libnccl*|libcuda.so*) ;;
        *) cp -L "$path" "$pack/lib/$soname" ;;
      esac
    done
  rm -rf "$work"
}

#===---------------------------------------------------------------------===#
# Run: on the GPU, from a packed directory
#===---------------------------------------------------------------------===#

# peak_begin FILE / peak_end FILE: the GPU's used memory polled every 100 ms;
# peak_end prints the peak less the first reading (MiB).
peak_begin() {
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$1" 2>/dev/null &
  poller=$!
  sleep 0.3
}
peak_end() {
  kill "$poller" 2>/dev/null || true
  wait "$poller" 2>/dev/null || true
  awk 'NR == 1 {base = $1} {if ($1 > max) max = $1} END {print max - base}' "$1"
}

# run_program DIR NAME [train options...]: one generated program's run,
# written to $results/NAME.json.
run_program() {
  local dir=$1 name=$2 log
  shift 2
  log=$results/$name.jsonl
  rm -f "$log"
  say "$name: $dir/train --local --steps $steps --synthetic --seed 1 $*"
  peak_begin "$results/$name.mem"
  local rc=0
  timeout 300 "$dir/train" --local --steps "$steps" --synthetic --seed 1 \
    --data-file "$w/data/$(basename "$dir").data" --log "$log" "$@" \
    >"$results/$name.out" 2>&1 || rc=$?
  local peak
  peak=$(peak_end "$results/$name.mem")
  tail -3 "$results/$name.out"
  "$py" - "$log" "$name" "$rc" "$peak" "$results/$name.json" <<'EOF'
import json, statistics, sys
log, name, rc, peak, out = sys.argv[1:]
model, stages, precision = name.split("-")[:3]
r = dict(model=model, mode=name.split("-", 1)[1], peak_mib=int(float(peak)))
try:
    steps = [json.loads(l) for l in open(log) if '"samples_per_s"' in l]
except OSError:
    steps = []
if rc == "0" and len(steps) > 3:
    r["samples_per_s"] = statistics.median(s["samples_per_s"] for s in steps[3:])
    r["step_ms"] = statistics.median(s["step_ms"] for s in steps[3:])
else:
    r["status"] = f"failed (exit {rc})"
json.dump(r, open(out, "w"))
print(json.dumps(r))
EOF
}

run_from() { # PACK_DIR
  local pack=$1
  require_gpu
  mkdir -p "$logs"
  results=$logs/results
  mkdir -p "$results"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  local gpu
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  # The node's cuBLAS, cuDNN and NCCL: /usr/local/cuda or pip's wheels.
  local libdirs="" lib found
  for lib in libcublas.so.13 libcublasLt.so.13 libcudnn.so.9; do
    found=$(find /usr/local /opt /usr/lib /usr/lib64 -name "$lib" 2>/dev/null | head -1)
    [ -n "$found" ] && libdirs="$libdirs:$(dirname "$found")"
  done
  export LD_LIBRARY_PATH="$pack/lib$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  local status=""
  if ! skipped kernels; then
    mkdir -p "$w/xcuda"
    if timeout 300 "$pack/bin/pp-rt-crosscheck-cuda" "$w/xcuda" >/dev/null &&
      "$py" "$root/python/compare_kernel_runs.py" "$pack/xcpu" "$w/xcuda" | tail -5; then
      status="${status}kernels PASS"$'\n'
    else
      status="${status}kernels FAIL"$'\n'
    fi
  fi
  if ! skipped programs; then
    mkdir -p "$w/data"
    local d name
    for d in "$pack"/programs/*; do
      name=$(basename "$d")
      if [ -f "$d" ]; then # NAME.not-built
        name=${name%.not-built}
        say "$name: not built ($(cat "$d"))"
        echo "{\"model\": \"${name%%-*}\", \"mode\": \"${name#*-}\", \"status\": \"not built\"}" >"$results/$name.json"
        continue
      fi
      if ! "$py" "$root/bench/gpu_bench.py" rebuild --recipe "$d/data" \
        --out "$w/data/$name.data"; then
        echo "{\"model\": \"${name%%-*}\", \"mode\": \"${name#*-}\", \"status\": \"data not rebuilt\"}" >"$results/$name.json"
        continue
      fi
      run_program "$d" "$name"
      [[ $name == *-1-fp32 ]] && run_program "$d" "$name-notf32" --no-tf32
      rm -f "$w/data/$name.data"
    done
  fi
  if ! skipped torch; then
    local model m
    for model in gpt resnet50; do
      for m in $torch_modes; do
        [[ $m == compile-* ]] && skipped compile && continue
        say "torch $model $m"
        peak_begin "$results/torch-$model-$m.mem"
        timeout 400 "$py" "$root/bench/gpu_bench.py" torch --model "$model" \
          --models "$pack/models" --mode "$m" --steps "$steps" \
          --out "$results/torch-$model-$m.json" ||
          echo "{\"model\": \"$model\", \"mode\": \"torch-$m\", \"status\": \"failed\"}" >"$results/torch-$model-$m.json"
        local peak
        peak=$(peak_end "$results/torch-$model-$m.mem")
        "$py" - "$results/torch-$model-$m.json" "$peak" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
r["peak_mib"] = int(float(sys.argv[2]))
r["mode"] = r["mode"] if r["mode"].startswith("torch-") else "torch-" + r["mode"]
json.dump(r, open(sys.argv[1], "w"))
EOF
      done
    done
  fi
  if ! skipped ranks; then
    local ranks=$root/.gpu/ranks.tar.xz
    [ -f "$(dirname "$archive")/ranks.tar.xz" ] && ranks=$(dirname "$archive")/ranks.tar.xz
    if [ -f "$ranks" ]; then
      if PP_BUNDLE_CHECKS=ranks bash "$root/scripts/gpu-bundle-run.sh" "$ranks" "$logs"; then
        status="${status}ranks PASS (then, where the archive was packed: python/check_profile.py --model M --work .gpu/ranks-work/M --results LOG_DIR/ranks)"$'\n'
      else
        status="${status}ranks FAIL"$'\n'
      fi
    else
      status="${status}ranks not run: no $ranks (scripts/gpu-bundle.sh ranks)"$'\n'
    fi
  fi
  "$py" "$root/bench/gpu_bench.py" summary --results "$results" \
    --models "$pack/models" --gpu "$gpu" >"$logs/bench.md"
  printf '\n%s' "$status" | sed 's/^./- &/' >>"$logs/bench.md"
  printf '\n' >>"$root/bench/README.md"
  cat "$logs/bench.md" >>"$root/bench/README.md"
  cat "$logs/bench.md"
  say "results in $logs/bench.md, appended to $root/bench/README.md"
  if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
    cp "$logs/bench.md" "$OUT/"
    tar -C "$logs" -cJf "$OUT/gpu-bench-logs.tar.xz" .
    say "copied to $OUT: bench.md, gpu-bench-logs.tar.xz"
  fi
}

#===---------------------------------------------------------------------===#
# Dry run
#===---------------------------------------------------------------------===#

dry_run() {
  local ok=0
  say "dry run: checking the inputs"
  check_inputs || ok=1
  if gpu_present; then say "a GPU is visible here"; else say "no GPU here (the real run needs one: --run on a GPU node)"; fi
  local work
  work=$(mktemp -d)
  say "exporting the models at a small size (the real run's exporters and ops)"
  if /usr/bin/python3 "$root/bench/gpu_bench.py" export --small --out "$work/models" >"$work/export.log" 2>&1; then
    grep -e '^gpt' -e '^resnet50' "$work/export.log"
  else
    tail -5 "$work/export.log"; say "export failed"; ok=1
  fi
  if [ -x "$build/bin/pipeline-opt" ] && [ -f "$work/models/gpt.onnx" ]; then
    local entry model stages precision
    for entry in $programs; do
      IFS=: read -r model stages precision <<<"$entry"
      if compile_program "$work/models" "$work/$model-$stages-$precision" "$model" "$stages" "$precision"; then
        # Its data file from the recipe the node rebuilds it from.
        if /usr/bin/python3 "$root/bench/gpu_bench.py" recipe \
          --data "$work/$model-$stages-$precision/program.data" \
          --onnx "$work/models/$model.onnx" --out "$work/recipe" >"$work/recipe.log" 2>&1; then
          say "$model $stages stage(s) $precision: compiles; $(cat "$work/recipe.log")"
        else
          say "$model $stages stage(s) $precision: compiles, but its recipe fails: $(tail -1 "$work/recipe.log")"; ok=1
        fi
        rm -rf "$work/$model-$stages-$precision" "$work/recipe"
      else
        say "$model $stages stage(s) $precision: pipeline-opt cannot compile it ($(grep -m1 error "$work/$model-$stages-$precision.log")): the run records it as not built"
      fi
    done
  fi
  say "the commands of the real run:"
  echo "== pack (here: bash scripts/gpu-bench.sh --pack)"
  show cmake --build "$build" -j "$jobs" --target pipeline-opt pp-rt-crosscheck-cpu pp-rt-crosscheck-cuda pp_train_cuda
  show "$build/runtime/pp-rt-crosscheck-cpu" PACK/xcpu
  show /usr/bin/python3 "$root/bench/gpu_bench.py" export --out WORK/models
  for entry in $programs; do
    IFS=: read -r model stages precision <<<"$entry"
    local name=$model-$stages-$precision
    show "$build/bin/pipeline-opt" "WORK/models/$model.onnx" "$(compile_args "$model" "$stages" "$precision" "WORK/$name")" -o "WORK/$name.mlir"
    show cmake -S "WORK/$name" -B "WORK/$name/cuda" -G Ninja -DPP_CUDA=ON
    show cmake --build "WORK/$name/cuda" -j "$jobs"
    show /usr/bin/python3 "$root/bench/gpu_bench.py" recipe --data "WORK/$name/program.data" --onnx "WORK/models/$model.onnx" --out "PACK/programs/$name/data"
  done
  show bash "$root/scripts/gpu-bundle.sh" ranks
  echo "+ tar -C PACK -cf - . | xz -T1 -6 > $root/.gpu/bench.tar.xz"
  echo "== run (on the GPU node: bash scripts/gpu-bench.sh --run .gpu/bench.tar.xz; logs in /tmp/gpu-bench, bench.md and gpu-bench-logs.tar.xz in \$OUT)"
  show nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  show PACK/bin/pp-rt-crosscheck-cuda W/xcuda
  show "$py" "$root/python/compare_kernel_runs.py" PACK/xcpu W/xcuda
  for entry in $programs; do
    IFS=: read -r model stages precision <<<"$entry"
    local name=$model-$stages-$precision
    show "$py" "$root/bench/gpu_bench.py" rebuild --recipe "PACK/programs/$name/data" --out "W/data/$name.data"
    show timeout 300 "PACK/programs/$name/train" --local --steps "$steps" --synthetic --seed 1 --data-file "W/data/$name.data" --log "LOG/results/$name.jsonl"
    [ "$stages-$precision" = 1-fp32 ] &&
      show timeout 300 "PACK/programs/$name/train" --local --steps "$steps" --synthetic --seed 1 --data-file "W/data/$name.data" --log "LOG/results/$name-notf32.jsonl" --no-tf32
  done
  for model in gpt resnet50; do
    for m in $torch_modes; do
      show timeout 400 "$py" "$root/bench/gpu_bench.py" torch --model "$model" --models PACK/models --mode "$m" --steps "$steps" --out "LOG/results/torch-$model-$m.json"
    done
  done
  show env PP_BUNDLE_CHECKS=ranks bash "$root/scripts/gpu-bundle-run.sh" "$root/.gpu/ranks.tar.xz" LOG
  echo "+ $py $root/bench/gpu_bench.py summary --results LOG/results --models PACK/models --gpu GPU_NAME > LOG/bench.md"
  echo "+ cat LOG/bench.md >> $root/bench/README.md"
  echo "(each run under an nvidia-smi memory poller: --query-gpu=memory.used -lms 100)"
  rm -rf "$work"
  if [ $ok -eq 0 ]; then say "dry run: every input is there"; else say "dry run: inputs missing (above)"; fi
  return $ok
}

#===---------------------------------------------------------------------===#

case $mode in
  dry) dry_run ;;
  pack)
    w=$(mktemp -d)
    trap 'rm -rf "$w"' EXIT
    check_inputs >/dev/null || { check_inputs; fail "inputs missing"; }
    pack_into "$w/pack"
    mkdir -p "$root/.gpu"
    # .gpu/ is ignored (a worktree's exclude file is the main checkout's).
    exclude=$(cd "$root" && realpath -m "$(git rev-parse --git-path info/exclude)")
    grep -qx '/.gpu/' "$exclude" 2>/dev/null ||
      { mkdir -p "$(dirname "$exclude")"; echo '/.gpu/' >>"$exclude"; }
    tar -C "$w/pack" -cf - . | xz -T1 -6 >"$root/.gpu/bench.tar.xz"
    ls -l "$root/.gpu/bench.tar.xz"
    skipped ranks || bash "$root/scripts/gpu-bundle.sh" ranks
    say "carry .gpu/bench.tar.xz and .gpu/ranks.tar.xz (the device tool takes 64 MiB a call: if both exceed it, run --run with PP_BENCH_SKIP=ranks, then gpu-bundle-run.sh for the ranks)"
    ;;
  run)
    require_gpu
    [ -f "$archive" ] || fail "no archive $archive (bash scripts/gpu-bench.sh --pack where the toolchain is)"
    w=$(mktemp -d)
    trap 'rm -rf "$w"' EXIT
    tar -C "$w" -xJf "$archive" || fail "cannot unpack $archive"
    run_from "$w"
    ;;
  all)
    require_gpu
    w=$(mktemp -d)
    trap 'rm -rf "$w"' EXIT
    check_inputs >/dev/null || { check_inputs; fail "inputs missing"; }
    pack_into "$w"
    skipped ranks || bash "$root/scripts/gpu-bundle.sh" ranks
    run_from "$w"
    ;;
esac
