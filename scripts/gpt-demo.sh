#!/usr/bin/env bash
# A byte-level GPT trained on Python's standard library sources as a
# 2-stage 1F1B pipeline on 2 MPI ranks, with its held-out loss and
# perplexity. Not part of scripts/demo.sh: it trains for minutes.
#
#   bash scripts/gpt-demo.sh [WORK_DIR]          (default build/gpt-demo)
#
# 1. python/text_gpt.py data: /usr/lib/python3.N/*.py as bytes, windows of
#    65 bytes (64 in, the next 64 out), the last 5% held out; TinyGPT
#    (vocabulary 256, context 64, d_model 64, 2 heads, 2 blocks, tied
#    output projection: 120576 weights) to ONNX;
# 2. pipeline-opt --pp-compile: 2 stages, 1F1B, 4 micro-batches of 8
#    sequences, Adam; softmax cross-entropy over the last (vocabulary) axis;
# 3. mpirun -np 2 train: $GPT_STEPS steps with --shuffle, a linear warm-up
#    and a cosine decay, a JSON --log and --save-onnx;
#    with --eval-data: the held-out windows evaluated every third of the run
#    and at its end (loss in nats per byte, perplexity exp(loss));
# 4. python/plot_run.py: curves.png; python/text_gpt.py eval: the same
#    held-out loss recomputed from the --save-onnx weights by pp-interpret,
#    against train's last evaluation (they must agree to 1e-4).
#
# GPT_STEPS (default 600), GPT_LR (default 0.003) and GPT_HELDOUT (the
# held-out windows evaluated, default 1024) change the recipe;
# test/Target/Program/gpt-demo.test runs 12 steps.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
work=${1:-$build/gpt-demo}
python=${PYTHON:-/usr/bin/python3}
export PATH=$build/bin:$PATH
mpirun=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
steps=${GPT_STEPS:-600}
lr=${GPT_LR:-0.003}
heldout=${GPT_HELDOUT:-1024}
warmup=$((steps / 5 < 30 ? steps / 5 : 30))   # 30, or a fifth of a short run
micro_batch=8
microbatches=4

mkdir -p "$work"
echo "== gpt: data set and model ($work)"
"$python" "$root/python/text_gpt.py" data --out "$work" --micro-batch $micro_batch \
  --heldout-max "$heldout"
echo "== gpt: compiling a 2-stage 1F1B pipeline ($microbatches micro-batches of $micro_batch sequences)"
pipeline-opt "$work/model.onnx" --batch-size=$micro_batch \
  --pp-compile="cluster=2xT4 schedule=1f1b microbatches=$microbatches optimizer=adam lr=$lr report=$work/plan.txt emit-dir=$work/program" \
  -o "$work/pipeline.mlir"
sed -n '/^== pipeline plan/,/^bottleneck/p' "$work/plan.txt"
bash "$root/scripts/build-program.sh" "$work/program"

every=$(((steps + 2) / 3))
train_flags=(--data "$work/train" --steps "$steps" --shuffle --seed 1
  --lr-schedule cosine --warmup-steps $warmup --log "$work/run.jsonl"
  --save-onnx "$work/trained.onnx" --eval-data "$work/heldout"
  --eval-every "$every")
echo "== gpt: training on 2 MPI ranks ($steps steps, Adam, warm-up then cosine)"
$mpirun -np 2 "$work/program/build/train" "${train_flags[@]}" > "$work/train.out"
grep -E '^step [0-9]+/' "$work/train.out" | awk -v n="$steps" 'NR % int((n + 5) / 6) == 0' | sed 's/  ETA.*//'
grep '^trained' "$work/train.out"
grep '^eval after' "$work/train.out"
"$python" "$root/python/plot_run.py" "$work/run.jsonl" -o "$work/curves.png" \
  --summary --title "byte-level GPT on Python's stdlib, 2-stage 1F1B on 2 MPI ranks"
"$python" "$root/python/text_gpt.py" eval --model "$work/trained.onnx" --data "$work/heldout" \
  --log "$work/run.jsonl"
echo "curves: $work/curves.png, log: $work/run.jsonl"
