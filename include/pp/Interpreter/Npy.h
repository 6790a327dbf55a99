//===- Npy.h - Read and write numpy .npy files ------------------*- C++ -*-===//
//
// The subset of the .npy format (versions 1-3) the interpreter exchanges
// with numpy: C-order, little-endian f32, f64, i64, i32, i8, u8 and bool.
//
//===----------------------------------------------------------------------===//

#ifndef PP_INTERPRETER_NPY_H
#define PP_INTERPRETER_NPY_H

#include "pp/Interpreter/Interpreter.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace pp::interp {

/// Parses the bytes of a .npy file; errors say what is malformed.
llvm::Expected<Tensor> parseNpy(llvm::StringRef bytes);
/// Reads a .npy file.
llvm::Expected<Tensor> readNpy(llvm::StringRef path);
/// The bytes of a .npy file (version 1.0) holding `tensor`.
std::string serializeNpy(const Tensor &tensor);
/// Writes a .npy file.
llvm::Error writeNpy(llvm::StringRef path, const Tensor &tensor);

} // namespace pp::interp

#endif // PP_INTERPRETER_NPY_H
