//===- SaveONNX.h - Trained weights into the source ONNX model --*- C++ -*-===//
#ifndef PP_RUNTIME_TRAIN_SAVEONNX_H
#define PP_RUNTIME_TRAIN_SAVEONNX_H

#include "HostTensor.h"

#include <string>
#include <utility>
#include <vector>

namespace pp::rt::train {

/// The model at `source`, serialized into `bytes`, with the initializers
/// named in `values` replaced (raw_data, other data fields cleared). Only float
/// dtypes; false with `error` naming the initializer on a shape / dtype
/// mismatch, or when a `required` value (a trainable weight) has no
/// initializer. Other values without one (optimizer state, the step
/// counter) are skipped; BatchNorm running statistics have one and are
/// saved, so the model deploys as trained.
bool saveTrainedONNX(
    const std::string &source,
    const std::vector<std::pair<std::string, HostTensor>> &values,
    const std::vector<bool> &required, std::string &bytes, std::string &error);

} // namespace pp::rt::train

#endif // PP_RUNTIME_TRAIN_SAVEONNX_H
