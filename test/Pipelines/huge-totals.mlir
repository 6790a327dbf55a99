// Byte sums the planners form stay below 2^63: a module whose values are
// each within the tensor limit but too large in all, or too many
// micro-batches, is an error (pp/Support/InputLimits.h).
//
// 26 values of 1 TiB each (within the tensor limit), 26 TiB in all: beyond the 16 TiB the
// planners' sums are sized for.
// RUN: not pipeline-opt %s -split-input-file --pp-partition="cluster=2xT4" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TOTAL
// TOTAL: error: pp-partition: the module's values and globals exceed 17592186044416 bytes in all: too large to plan
func.func @main(%x: tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32> {
  %a = onnx.Relu %x : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %b = onnx.Relu %a : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %c = onnx.Relu %b : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %d = onnx.Relu %c : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %e = onnx.Relu %d : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %f = onnx.Relu %e : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %g = onnx.Relu %f : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %h = onnx.Relu %g : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %i = onnx.Relu %h : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %j = onnx.Relu %i : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %k = onnx.Relu %j : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %l = onnx.Relu %k : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %m = onnx.Relu %l : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %n = onnx.Relu %m : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %o = onnx.Relu %n : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %p = onnx.Relu %o : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %q = onnx.Relu %p : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %r = onnx.Relu %q : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %s = onnx.Relu %r : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %t = onnx.Relu %s : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %u = onnx.Relu %t : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %v = onnx.Relu %u : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %w = onnx.Relu %v : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %y = onnx.Relu %w : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  %z = onnx.Relu %y : (tensor<262144x1048576xf32>) -> tensor<262144x1048576xf32>
  return %z : tensor<262144x1048576xf32>
}

// -----

// RUN: not pipeline-opt %s -split-input-file --pp-partition="cluster=2xT4 microbatches=100000" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MB
// MB: error: pp-partition: microbatches must be at most 65536
func.func @main(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %a = onnx.Relu %x : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %a : tensor<4x4xf32>
}
