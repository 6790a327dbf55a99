//===- SaveONNX.h - Trained weights into the source ONNX model --*- C++ -*-===//
#ifndef PP_RUNTIME_TRAIN_SAVEONNX_H
#define PP_RUNTIME_TRAIN_SAVEONNX_H

#include "HostTensor.h"

#include <string>
#include <utility>
#include <vector>

namespace pp::rt::train {

/// Copies the model at `source` to `dest` with the initializers named in
/// `values` replaced (raw_data, other data fields cleared). Only float
/// dtypes; false with `error` naming the initializer on a missing name or a
/// shape / dtype mismatch.
bool saveTrainedONNX(
    const std::string &source, const std::string &dest,
    const std::vector<std::pair<std::string, HostTensor>> &values,
    std::string &error);

} // namespace pp::rt::train

#endif // PP_RUNTIME_TRAIN_SAVEONNX_H
