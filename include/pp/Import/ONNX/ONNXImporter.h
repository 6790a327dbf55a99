//===- ONNXImporter.h - ONNX model to onnx dialect ------------*- C++ -*-===//
#ifndef PP_IMPORT_ONNX_ONNXIMPORTER_H
#define PP_IMPORT_ONNX_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace pp {

struct ONNXImportOptions {
  /// Value for a symbolic leading (batch) dim of graph inputs, if any.
  std::optional<int64_t> batchSize;
  /// Float initializers whose names match this regex are imported as
  /// constants instead of trainable parameters.
  std::string frozenPattern;
  /// Float initializers whose names match this regex are trained, whatever
  /// the model's metadata or their values say (--frozen-params wins).
  std::string trainablePattern;
  /// Shape-only import, for planning without weights: initializers whose
  /// data lies in external files are not read (the files may be absent) and
  /// become globals of their type only (a `dense_resource` without a blob);
  /// external float initializers of more than one element are trainable
  /// unless --frozen-params / --trainable / the model's metadata say
  /// otherwise. Planning works on such a module; running it or generating
  /// its code fails naming the first global without data.
  bool shapeOnly = false;
};

/// Model metadata (metadata_props) keys that python/pp_export_torch.py
/// writes: JSON arrays of initializer names. When `pp.trainable` is present,
/// exactly the float initializers it names are trained (PyTorch's
/// parameters with requires_grad); `pp.buffers` names the module's buffers.
inline constexpr const char *kTrainableMetadataKey = "pp.trainable";
inline constexpr const char *kBuffersMetadataKey = "pp.buffers";

/// Registers the dialects the importer creates ops of.
void registerONNXImportDialects(mlir::DialectRegistry &registry);

/// Imports the ONNX model in `bytes` (read from `fileName`, which locations
/// and external-data lookups use). Emits diagnostics and returns null on
/// failure; never aborts on malformed input.
mlir::OwningOpRef<mlir::ModuleOp>
importONNXModel(llvm::StringRef bytes, llvm::StringRef fileName,
                mlir::MLIRContext *context, const ONNXImportOptions &options);

/// Prints an importer diagnostic as `file: node 'name' (OpType): error: ...`.
void printImportDiagnostic(mlir::Diagnostic &diag, llvm::raw_ostream &os);

/// Reads and imports an `.onnx` file.
mlir::OwningOpRef<mlir::ModuleOp>
importONNXFile(llvm::StringRef fileName, mlir::MLIRContext *context,
               const ONNXImportOptions &options);

} // namespace pp

#endif // PP_IMPORT_ONNX_ONNXIMPORTER_H
