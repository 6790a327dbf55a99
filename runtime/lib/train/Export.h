//===- Export.h - The trained globals written out ---------------*- C++ -*-===//
//
// What rank 0 writes from the globals it gathered after training:
// --dump-globals (one .npy per global) and --save-onnx (the source model
// with the trained weights).
//
//===----------------------------------------------------------------------===//
#ifndef PP_RUNTIME_TRAIN_EXPORT_H
#define PP_RUNTIME_TRAIN_EXPORT_H

#include "HostTensor.h"

#include <string>
#include <utility>
#include <vector>

namespace pp::rt::train {

struct Job;

/// Globals by name, in the program's order.
using NamedTensors = std::vector<std::pair<std::string, HostTensor>>;

/// Before training: whether what `rank` writes can be written: the
/// --checkpoint directory (created) and, on rank 0, --dump-globals
/// (created), --save-onnx and --save-best (and their source model).
bool checkOutputs(const Job &job, int rank, std::string &error);

/// --dump-globals DIR: DIR/<stem>.npy per value and DIR/globals.txt (name,
/// tab, file), as pp-interpret --dump-globals writes them.
bool dumpGlobals(const std::string &dir, const NamedTensors &values,
                 std::string &error);

/// --save-onnx, --save-best (`flag`) to `path`: the program's source model
/// (next to the executable) with `values` as its initializers; every
/// trainable global must have one.
bool saveONNX(const Job &job, const NamedTensors &values,
              const std::string &path, const char *flag, std::string &error);

} // namespace pp::rt::train

#endif // PP_RUNTIME_TRAIN_EXPORT_H
