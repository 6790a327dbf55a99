#!/usr/bin/env bash
# The long matrix of the weight-versioned schedules against their oracle
# (python/check_versioned.py): MLP, the transformer classifier, GPT (tied
# embedding) and resnet18,
# on 2 and 4 stages, in the pipelined interpreter and as generated programs
# under mpirun, drained every step and run as a stream of steps.
# test/Target/Program/versioned-schedules.test and versioned-stream.test run
# a slice.
# Usage: scripts/check-versioned.sh [build dir] [work dir]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
work=${2:-$(mktemp -d)}
export PATH=$build/bin:$PATH
py=/usr/bin/python3
for model in mlp transformer gpt resnet18; do
  steps=2 lr=0.1
  [ "$model" = resnet18 ] && steps=1 lr=0.001
  "$py" "$root/python/check_versioned.py" --model "$model" --stages 2 \
    --microbatches 4 --update-every 2 --steps "$steps" --lr "$lr" --program \
    --work "$work/$model-2"
  "$py" "$root/python/check_versioned.py" --model "$model" --stages 4 \
    --microbatches 8 --update-every 2 --steps "$steps" --lr "$lr" --program \
    --work "$work/$model-4"
  # The same steps as one stream (train and pp-interpret --drain-every 0),
  # and drained every 2 steps with a checkpoint at step 2 and a resume.
  "$py" "$root/python/check_versioned.py" --model "$model" --stages 2 \
    --microbatches 4 --update-every 2 --steps 3 --lr "$lr" --program \
    --drain-every 0 --work "$work/$model-2-stream"
  "$py" "$root/python/check_versioned.py" --model "$model" --stages 4 \
    --microbatches 8 --update-every 2 --steps 3 --lr "$lr" --program \
    --drain-every 0 --work "$work/$model-4-stream"
  "$py" "$root/python/check_versioned.py" --model "$model" --stages 4 \
    --microbatches 8 --update-every 2 --steps 4 --lr "$lr" --program \
    --drain-every 2 --resume-at 2 --work "$work/$model-4-resume"
done | tee "$work/summary.txt"
! grep -q MISMATCH "$work/summary.txt"
