# Sourced by scripts/gpu-check.sh and scripts/gpu-bundle.sh: the test models
# that run end to end on a GPU, as name:batch option:learning rate (MLP's
# and GPT's batches are static). resnet18 runs at batch 32 and lr 0.002: at
# batch 8 its micro-batches of 2 reach BatchNorms over 1x1 maps, where float
# reordering alone moves the loss (the CPU's two convolutions, oneDNN and
# im2col, differ by 11% at step 5); at batch 32 it moves well under 1e-3.
gpu_programs="mlp::0.05 gpt::0.05 resnet18:--batch-size=32:0.002"

# gpu_program_emit BUILD WORK ENTRY: emits the 2-stage 1F1B program of one
# entry of $gpu_programs into WORK/<name> (WORK/<name>.mlir beside it) and
# sets $gpu_program_name and $gpu_program_dir.
gpu_program_emit() {
  local build=$1 work=$2 batch lr
  IFS=: read -r gpu_program_name batch lr <<<"$3"
  gpu_program_dir=$work/$gpu_program_name
  "$build/bin/pipeline-opt" "$build/test/models/$gpu_program_name.onnx" $batch \
    --pp-compile="cluster=2xA100-80 schedule=1f1b microbatches=4 lr=$lr report= emit-dir=$gpu_program_dir" \
    -o "$work/$gpu_program_name.mlir"
}
