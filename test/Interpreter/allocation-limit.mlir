// The interpreter checks each allocation against its limit
// (pp/Support/InputLimits.h) instead of aborting out of memory: a 2^40
// input dim (4 TiB of f32) and a result of 2^62 elements.
// RUN: not pp-interpret %s --func=huge_input --random-inputs 2>&1 | FileCheck %s --check-prefix=INPUT
// INPUT: input 'arg0' (tensor<1099511627776xf32>): a tensor of 4398046511104 bytes exceeds the interpreter's limit of 68719476736 bytes
// RUN: not pp-interpret %s --func=huge_result --random-inputs 2>&1 | FileCheck %s --check-prefix=RESULT
// RESULT: error: cannot allocate 'tensor<4611686018427387904xf32>': a tensor of more than 2^63 bytes exceeds the interpreter's limit of 68719476736 bytes

func.func @huge_input(%x: tensor<1099511627776xf32>) -> tensor<1099511627776xf32> {
  %y = onnx.Relu %x : (tensor<1099511627776xf32>) -> tensor<1099511627776xf32>
  return %y : tensor<1099511627776xf32>
}

func.func @huge_result(%x: tensor<1xf32>) -> tensor<4611686018427387904xf32> {
  %s = onnx.Constant dense<4611686018427387904> : tensor<1xi64>
  %y = onnx.Expand %x, %s : (tensor<1xf32>, tensor<1xi64>) -> tensor<4611686018427387904xf32>
  return %y : tensor<4611686018427387904xf32>
}
