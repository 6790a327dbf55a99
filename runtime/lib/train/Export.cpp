//===- Export.cpp - The trained globals written out -----------------------===//

#include "Export.h"
#include "Checkpoint.h"
#include "Job.h"
#include "SaveONNX.h"
#include "Util.h"

#include "pp/Runtime/Checksum.h"

#include <set>
#include <unistd.h>

using namespace pp::rt;
using namespace pp::rt::train;

namespace {

/// --save-onnx, --save-best (`flag`): the program's source model is there.
bool checkSource(const Job &job, const std::string &flag, std::string &error) {
  const ProgramInfo &p = job.program;
  if (p.onnxFile.empty())
    error = flag + ": the program was not compiled from an ONNX model";
  else if (std::string source = resolveNextTo(job.exeDir, p.onnxFile);
           !fileExists(source))
    error = flag + ": the source model '" + source + "' is missing";
  else if (std::string bytes;
           p.onnxHash != 0 && !readRegularFile(source, bytes, error))
    error = flag + ": " + error;
  else if (uint32_t crc = crc32c(0, bytes.data(), bytes.size());
           p.onnxHash != 0 && crc != p.onnxHash)
    error = flag + ": the source model '" + source +
            "' is not the one the program was compiled from (its CRC-32C is " +
            hex32(crc) + ", the program's model has " + hex32(p.onnxHash) +
            "): was it overwritten? Compile the program again";
  else
    return true;
  return false;
}

/// DIR of --`option` exists (created) and can be written.
bool checkDirectory(const char *option, const std::string &dir,
                    std::string &error) {
  bool ok = makeDirectories(dir, error);
  if (ok && access(dir.c_str(), W_OK | X_OK) != 0) {
    error = withErrno("cannot write into '" + dir + "'");
    ok = false;
  }
  if (!ok)
    error = std::string("--") + option + ": " + error;
  return ok;
}

} // namespace

bool pp::rt::train::checkOutputs(const Job &job, int rank, std::string &error) {
  const TrainOptions &options = job.options;
  if (options.checkpointEvery > 0 &&
      !checkDirectory("checkpoint", options.checkpointDir, error))
    return false;
  if (options.checkpointEvery > 0 &&
      !checkCheckpointDirectory(options.checkpointDir, error)) {
    error = "--checkpoint: " + error;
    return false;
  }
  if (rank != 0)
    return true;
  if (!options.dumpGlobals.empty() &&
      !checkDirectory("dump-globals", options.dumpGlobals, error))
    return false;
  for (auto [flag, path] : {std::pair{"--save-onnx", &options.saveOnnx},
                            {"--save-best", &options.saveBest}}) {
    if (path->empty())
      continue;
    if (!checkSource(job, flag, error))
      return false;
    if (!checkWritablePath(*path, error)) {
      error = std::string(flag) + ": " + error;
      return false;
    }
  }
  return true;
}

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
  ok = ok && writeWholeFile(dir + "/globals.txt", index, error);
  if (!ok)
    error = "--dump-globals: " + error;
  return ok;
}

bool pp::rt::train::saveONNX(const Job &job, const NamedTensors &values,
                             const std::string &path, const char *flag,
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
  std::string source = resolveNextTo(job.exeDir, p.onnxFile), bytes;
  if (!checkSource(job, flag, error))
    return false;
  if (!saveTrainedONNX(source, values, required, bytes, error))
    return false;
  if (!writeWholeFile(path, bytes, error)) {
    error = std::string(flag) + ": " + error;
    return false;
  }
  return true;
}
