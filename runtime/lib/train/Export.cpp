//===- Export.cpp - The trained globals written out -----------------------===//

#include "Export.h"
#include "Checkpoint.h"
#include "Job.h"
#include "SaveONNX.h"
#include "Util.h"

#include <cstdio>
#include <set>

using namespace pp::rt;
using namespace pp::rt::train;

bool pp::rt::train::dumpGlobals(const std::string &dir,
                                const NamedTensors &values,
                                std::string &error) {
  bool ok = makeDirectories(dir, error);
  std::string index;
  std::set<std::string> stems;
  for (size_t i = 0; ok && i < values.size(); ++i) {
    std::string stem = fileStem(values[i].first);
    while (!stems.insert(stem).second)
      stem += "_";
    const HostTensor &t = values[i].second;
    ok = writeNpy(dir + "/" + stem + ".npy", t.dtype, t.shape, t.bytes.data(),
                  error);
    index += values[i].first + "\t" + stem + ".npy\n";
  }
  if (ok) {
    std::string path = dir + "/globals.txt";
    FILE *file = std::fopen(path.c_str(), "w");
    ok = file &&
         std::fwrite(index.data(), 1, index.size(), file) == index.size();
    if (file)
      ok = std::fclose(file) == 0 && ok;
    if (!ok)
      error = "cannot write '" + path + "'";
  }
  if (!ok)
    error = "--dump-globals: " + error;
  return ok;
}

bool pp::rt::train::saveONNX(const Job &job, const NamedTensors &values,
                             std::string &error) {
  const ProgramInfo &p = job.program;
  // Every global is saved (BatchNorm running statistics belong in the
  // deployed model too), but only a trainable one must have an initializer.
  std::vector<bool> required;
  for (const auto &[name, value] : values) {
    bool trainable = false;
    for (const GlobalInfo &g : p.globals)
      if (g.name == name)
        trainable = g.trainable;
    required.push_back(trainable);
  }
  std::string source = resolveNextTo(job.exeDir, p.onnxFile);
  if (p.onnxFile.empty()) {
    error = "--save-onnx: the program was not compiled from an ONNX model";
    return false;
  }
  if (!fileExists(source)) {
    error = "--save-onnx: the source model '" + source + "' is missing";
    return false;
  }
  return saveTrainedONNX(source, job.options.saveOnnx, values, required, error);
}
