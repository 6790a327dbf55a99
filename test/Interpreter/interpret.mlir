// pp-interpret on hand-written IR: globals of every initial-value form,
// function calls, shape operands read at run time, and errors that name the
// failing op instead of crashing.

// RUN: rm -rf %t && mkdir -p %t

// RUN: pp-interpret %s --func=globals --print | FileCheck %s --check-prefix=GLOBALS
// GLOBALS: output 0 "w": tensor<2x2xf32> finite
// GLOBALS-NEXT: [1, 2, 3, 4]
// GLOBALS: output 1 "s": tensor<3xi64> min=7 max=7
// GLOBALS-NEXT: [7, 7, 7]
// GLOBALS: output 2 "z": tensor<2xf32> finite
// GLOBALS-NEXT: [0, 0]
// GLOBALS: output 3 "r": tensor<2xf32> finite
// GLOBALS-NEXT: [0.5, -1.5]
// GLOBALS: output 4 "b": tensor<3xbool>
// GLOBALS-NEXT: [1, 0, 1]
// --load-globals sets globals from a --dump-globals directory, so a run can
// continue from another's state; a bad index line names the file and line.
// RUN: pp-interpret %s --func=globals --dump-globals=%t/g
// RUN: %python3 -c "import numpy as np; np.save('%t/g/w.npy', np.array([[5, 6], [7, 8]], np.float32))"
// RUN: pp-interpret %s --func=globals --load-globals=%t/g --print | FileCheck %s --check-prefix=LOADED
// LOADED: output 0 "w": tensor<2x2xf32> finite
// LOADED-NEXT: [5, 6, 7, 8]
// LOADED: output 3 "r": tensor<2xf32> finite
// LOADED-NEXT: [0.5, -1.5]
// RUN: printf 'w\n' > %t/g/globals.txt
// RUN: not pp-interpret %s --func=globals --load-globals=%t/g 2>&1 | FileCheck %s --check-prefix=BADINDEX
// BADINDEX: globals.txt:1: expected NAME<tab>FILE.npy, got 'w'
// RUN: printf 'nope\tw.npy\n' > %t/g/globals.txt
// RUN: not pp-interpret %s --func=globals --load-globals=%t/g 2>&1 | FileCheck %s --check-prefix=NOGLOBAL
// NOGLOBAL: globals.txt:1: no global named 'nope'
onnx.global "trainable" @w : tensor<2x2xf32> = dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
onnx.global "constant" @s : tensor<3xi64> = dense<7> : tensor<3xi64>
onnx.global "state" @z : tensor<2xf32>
onnx.global "trainable" @r : tensor<2xf32> = dense_resource<r_blob> : tensor<2xf32>
onnx.global "constant" @b : tensor<3xi1> = dense<[true, false, true]> : tensor<3xi1>
func.func @globals() -> (tensor<2x2xf32> {onnx.name = "w"}, tensor<3xi64> {onnx.name = "s"},
                         tensor<2xf32> {onnx.name = "z"}, tensor<2xf32> {onnx.name = "r"},
                         tensor<3xi1> {onnx.name = "b"}) {
  %w = onnx.global_read @w : tensor<2x2xf32>
  %s = onnx.global_read @s : tensor<3xi64>
  %z = onnx.global_read @z : tensor<2xf32>
  %r = onnx.global_read @r : tensor<2xf32>
  %b = onnx.global_read @b : tensor<3xi1>
  return %w, %s, %z, %r, %b : tensor<2x2xf32>, tensor<3xi64>, tensor<2xf32>, tensor<2xf32>, tensor<3xi1>
}

// RUN: pp-interpret %s --func=caller --print | FileCheck %s --check-prefix=CALL
// CALL: output 0 "output_0": tensor<2x2xf32>
// CALL-NEXT: [2, 4, 6, 8]
func.func @double(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %y = onnx.Add %x, %x : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}
func.func @caller() -> tensor<2x2xf32> {
  %w = onnx.global_read @w : tensor<2x2xf32>
  %y = func.call @double(%w) : (tensor<2x2xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}

// RUN: pp-interpret %s --func=shapes --print | FileCheck %s --check-prefix=SHAPES
// SHAPES: output 0 "output_0": tensor<3x2xf32>
// SHAPES-NEXT: [0, 3, 1, 4, 2, 5]
// SHAPES: output 1 "output_1": tensor<2x1xf32>
// SHAPES-NEXT: [5, 2]
// SHAPES: output 2 "output_2": tensor<2xi64>
// SHAPES-NEXT: [2, 3]
func.func @shapes() -> (tensor<3x2xf32>, tensor<2x1xf32>, tensor<2xi64>) {
  %x = onnx.Constant dense<[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]> : tensor<6xf32>
  %shape = onnx.Constant dense<[2, -1]> : tensor<2xi64>
  %m = onnx.Reshape %x, %shape : (tensor<6xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  %t = onnx.Transpose %m : (tensor<2x3xf32>) -> tensor<3x2xf32>
  // Last column, rows reversed.
  %starts = onnx.Constant dense<[-1, 2]> : tensor<2xi64>
  %ends = onnx.Constant dense<[-9223372036854775807, 3]> : tensor<2xi64>
  %steps = onnx.Constant dense<[-1, 1]> : tensor<2xi64>
  %sl = onnx.Slice %m, %starts, %ends steps %steps : (tensor<2x3xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<2x1xf32>
  %dims = onnx.Shape %m : (tensor<2x3xf32>) -> tensor<2xi64>
  return %t, %sl, %dims : tensor<3x2xf32>, tensor<2x1xf32>, tensor<2xi64>
}

// A Dropout with a seed attribute draws the same mask on every run.
// RUN: pp-interpret %s --func=dropout --seed=1 --output-dir=%t/d1
// RUN: pp-interpret %s --func=dropout --seed=2 --output-dir=%t/d2
// RUN: cmp %t/d1/output_0.npy %t/d2/output_0.npy
func.func @dropout() -> tensor<64xf32> {
  %x = onnx.Constant dense<1.0> : tensor<64xf32>
  %ratio = onnx.Constant dense<0.5> : tensor<f32>
  %train = onnx.Constant dense<true> : tensor<i1>
  %y, %mask = onnx.Dropout %x ratio %ratio training_mode %train {seed = 42 : i64} : (tensor<64xf32>, tensor<f32>, tensor<i1>) -> (tensor<64xf32>, tensor<64xi1>)
  return %y : tensor<64xf32>
}

// Without a seed attribute the mask follows --seed and the op's stream:
// another stream or another --seed draws another mask, the same stream the
// same one (whatever the op's place in the function).
// RUN: pp-interpret %s --func=dropout_streams --seed=1 --output-dir=%t/s1
// RUN: pp-interpret %s --func=dropout_streams --seed=2 --output-dir=%t/s2
// RUN: %python3 -c "import numpy as np; l = lambda d, i: np.load('%t/' + d + '/output_' + str(i) + '.npy'); print(np.array_equal(l('s1', 0), l('s1', 2)), np.array_equal(l('s1', 0), l('s1', 1)), np.array_equal(l('s1', 0), l('s2', 0)), sorted(set(l('s1', 0).tolist())))" | FileCheck %s --check-prefix=STREAMS
// STREAMS: True False False [0.0, 2.0]
func.func @dropout_streams() -> (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %x = onnx.Constant dense<1.0> : tensor<64xf32>
  %ratio = onnx.Constant dense<0.5> : tensor<f32>
  %train = onnx.Constant dense<true> : tensor<i1>
  %a, %ma = onnx.Dropout %x ratio %ratio training_mode %train {stream = 0 : i64} : (tensor<64xf32>, tensor<f32>, tensor<i1>) -> (tensor<64xf32>, tensor<64xi1>)
  %b, %mb = onnx.Dropout %x ratio %ratio training_mode %train {stream = 1 : i64} : (tensor<64xf32>, tensor<f32>, tensor<i1>) -> (tensor<64xf32>, tensor<64xi1>)
  %c, %mc = onnx.Dropout %x ratio %ratio training_mode %train {stream = 0 : i64} : (tensor<64xf32>, tensor<f32>, tensor<i1>) -> (tensor<64xf32>, tensor<64xi1>)
  return %a, %b, %c : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>
}

// 16-bit floats and unsigned integers: constants, .npy output and input.
// RUN: pp-interpret %s --func=dtypes --print --output-dir=%t/dt | FileCheck %s --check-prefix=DTYPES
// DTYPES: output 0 "h": tensor<3xf16> finite
// DTYPES-NEXT: [1, 65504, -0.5]
// DTYPES: output 1 "bf": tensor<2xbf16> finite
// DTYPES-NEXT: [1, 3.14062]
// DTYPES: output 2 "u": tensor<2xu32>
// DTYPES-NEXT: [4000000000, 7]
// DTYPES: output 3 "v": tensor<2xu64>
// DTYPES-NEXT: [18446744073709551615, 2]
// DTYPES: output 4 "hf": tensor<3xf32> finite
// DTYPES-NEXT: [1, 65504, -0.5]
// RUN: %python3 -c "import numpy as np; print(*(np.load('%t/dt/' + n + '.npy').dtype.str for n in 'h bf u v'.split()))" | FileCheck %s --check-prefix=DESCR
// DESCR: <f2 |V2 <u4 <u8
// RUN: pp-interpret %s --func=echo --print --input=h=%t/dt/h.npy --input=bf=%t/dt/bf.npy --input=u=%t/dt/u.npy --input=v=%t/dt/v.npy | FileCheck %s --check-prefix=ECHO
// ECHO: output 0 "output_0": tensor<3xf16>
// ECHO-NEXT: [1, 65504, -0.5]
// ECHO: output 1 "output_1": tensor<2xbf16>
// ECHO-NEXT: [1, 3.14062]
// ECHO: output 2 "output_2": tensor<2xu32>
// ECHO-NEXT: [4000000000, 7]
// ECHO: output 3 "output_3": tensor<2xu64>
// ECHO-NEXT: [18446744073709551615, 2]
onnx.global "constant" @h : tensor<3xf16> = dense<[1.0, 65504.0, -0.5]> : tensor<3xf16>
onnx.global "constant" @bf : tensor<2xbf16> = dense<[1.0, 3.140625]> : tensor<2xbf16>
onnx.global "constant" @u : tensor<2xui32> = dense<[4000000000, 7]> : tensor<2xui32>
onnx.global "constant" @v : tensor<2xui64> = dense<[18446744073709551615, 2]> : tensor<2xui64>
func.func @dtypes() -> (tensor<3xf16> {onnx.name = "h"}, tensor<2xbf16> {onnx.name = "bf"},
                        tensor<2xui32> {onnx.name = "u"}, tensor<2xui64> {onnx.name = "v"},
                        tensor<3xf32> {onnx.name = "hf"}) {
  %h = onnx.global_read @h : tensor<3xf16>
  %bf = onnx.global_read @bf : tensor<2xbf16>
  %u = onnx.global_read @u : tensor<2xui32>
  %v = onnx.global_read @v : tensor<2xui64>
  %hf = onnx.Cast %h {to = 1 : i64} : (tensor<3xf16>) -> tensor<3xf32>
  return %h, %bf, %u, %v, %hf : tensor<3xf16>, tensor<2xbf16>, tensor<2xui32>, tensor<2xui64>, tensor<3xf32>
}
func.func @echo(%h: tensor<3xf16> {onnx.name = "h"}, %bf: tensor<2xbf16> {onnx.name = "bf"},
                %u: tensor<2xui32> {onnx.name = "u"}, %v: tensor<2xui64> {onnx.name = "v"})
    -> (tensor<3xf16>, tensor<2xbf16>, tensor<2xui32>, tensor<2xui64>) {
  return %h, %bf, %u, %v : tensor<3xf16>, tensor<2xbf16>, tensor<2xui32>, tensor<2xui64>
}

//===--- Errors --------------------------------------------------------------===//

// RUN: not pp-interpret %s --func=unknown 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: interpret.mlir:[[# @LINE + 3]]:8: error: the interpreter has no handler for 'builtin.unrealized_conversion_cast'
func.func @unknown() -> tensor<2xf32> {
  %x = onnx.Constant dense<1.0> : tensor<2xf32>
  %y = builtin.unrealized_conversion_cast %x : tensor<2xf32> to tensor<2xf32>
  return %y : tensor<2xf32>
}

// A kernel's error is reported at the op.
// RUN: %python3 -c "import numpy as np; np.save('%t/idx.npy', np.array([0, 5]))"
// RUN: not pp-interpret %s --func=gather --input=arg0=%t/idx.npy 2>&1 | FileCheck %s --check-prefix=GATHER
// GATHER: interpret.mlir:[[# @LINE + 3]]:8: error: kernel 'gather' failed:
func.func @gather(%i: tensor<2xi64>) -> tensor<2xf32> {
  %x = onnx.Constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %y = onnx.Gather %x, %i : (tensor<3xf32>, tensor<2xi64>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// Bad inputs.
// RUN: not pp-interpret %s --func=gather 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: pp-interpret: error: no value for input 'arg0' (tensor<2xi64>): pass --input=arg0=FILE.npy or --random-inputs
// RUN: echo garbage > %t/bad.npy
// RUN: not pp-interpret %s --func=gather --input=arg0=%t/bad.npy 2>&1 | FileCheck %s --check-prefix=BADNPY
// BADNPY: pp-interpret: error: '{{.*}}bad.npy': malformed .npy: missing the \x93NUMPY magic
// RUN: %python3 -c "import numpy as np; np.save('%t/f.npy', np.zeros((2, 3), order='F'))"
// RUN: not pp-interpret %s --func=gather --input=arg0=%t/f.npy 2>&1 | FileCheck %s --check-prefix=FORTRAN
// FORTRAN: error: '{{.*}}f.npy': Fortran-order .npy arrays are not supported
// RUN: %python3 -c "import numpy as np; np.save('%t/i32.npy', np.array([0, 1], np.int32))"
// RUN: not pp-interpret %s --func=gather --input=arg0=%t/i32.npy 2>&1 | FileCheck %s --check-prefix=DTYPE
// DTYPE: error: input 'arg0' must be tensor<2xi64>, the file holds tensor<2xi32>
// RUN: not pp-interpret %s --func=gather --input=nope=%t/i32.npy 2>&1 | FileCheck %s --check-prefix=NAME
// NAME: error: 'gather' has no input named 'nope'
// RUN: not pp-interpret %s --func=missing 2>&1 | FileCheck %s --check-prefix=FUNC
// FUNC: error: no function with a body named 'missing'

{-#
  dialect_resources: {
    builtin: {
      r_blob: "0x040000000000003f0000c0bf"
    }
  }
#-}
