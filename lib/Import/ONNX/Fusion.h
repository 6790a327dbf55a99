//===- Fusion.h - Op chains the importer fuses ------------------*- C++ -*-===//
//
// Exporters spell some ops as chains of primitive ONNX nodes (torch before
// opset 20 writes nn.GELU as Div, Erf, Add, Mul, Mul, and its tanh
// approximation as nine ops). The importer fuses
// such chains back into the dialect's op, which runs one kernel forward and
// one backward instead of five of each and saves one tensor for the
// backward instead of three. Dropouts that drop nothing go the same way.
//
//===----------------------------------------------------------------------===//

#ifndef PP_LIB_IMPORT_ONNX_FUSION_H
#define PP_LIB_IMPORT_ONNX_FUSION_H

#include "mlir/IR/PatternMatch.h"

namespace pp::onnx {

/// Adds the GELU patterns: x * 0.5 * (1 + erf(x / sqrt(2))) in either
/// association (and x * (1 / sqrt(2)) for the division, the constants on
/// either side) becomes onnx.Gelu, and x * 0.5 * (1 + tanh(sqrt(2 / pi) *
/// (x + 0.044715 * x^3))) (x^3 a Pow or two Muls) onnx.Gelu with
/// approximate = "tanh"; each named after the chain's last node. A
/// Dropout that keeps every element (inference mode or ratio 0) and whose
/// mask is unread becomes its input.
void populateImportFusionPatterns(mlir::RewritePatternSet &patterns);

} // namespace pp::onnx

#endif // PP_LIB_IMPORT_ONNX_FUSION_H
