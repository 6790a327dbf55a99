//===- ONNXImporter.cpp - ONNX model to onnx dialect ------------*- C++ -*-===//
//
// Reads an ONNX ModelProto with libonnx/protobuf and builds a module of
// `onnx` dialect ops with static shapes. Shape sub-graphs fold as nodes are
// imported; every op's location names its ONNX node and op type.
//
// libonnx reports problems by throwing, so this file is built with
// exceptions and turns them into diagnostics at the library boundary.
//
//===----------------------------------------------------------------------===//

#include "pp/Import/ONNX/ONNXImporter.h"
#include "pp/Dialect/ONNX/IR/ONNXOps.h"
#include "pp/Support/InputLimits.h"

#include "Decompose.h"
#include "Einsum.h"
#include "Fusion.h"
#include "Recurrent.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"

#include <cmath>
#include <cstring>

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

using namespace mlir;
namespace onnxpb = ::onnx;

namespace {

constexpr int64_t kMinOpset = 13;
constexpr int64_t kMaxOpset = 17;

/// ONNX's version converter, asked before it runs whether it can upgrade an
/// op: it fails on an internal assertion where an adapter is missing.
class UpgradeChecker
    : public onnxpb::version_conversion::DefaultVersionConverter {
public:
  /// The first version in (from, to] at which `opType` changed and the
  /// converter has no adapter to, if any.
  std::optional<int64_t> missingAdapter(const std::string &opType, int64_t from,
                                        int64_t to) const {
    auto schemas = all_schemas.find(opType);
    if (schemas == all_schemas.end())
      return std::nullopt;
    auto versions = schemas->second.find("");
    if (versions == schemas->second.end())
      return std::nullopt;
    auto opAdapters = adapters.find(opType);
    for (auto it = versions->second.upper_bound(from);
         it != versions->second.end() && it->first <= to; ++it) {
      if (opAdapters == adapters.end())
        return it->first;
      auto fromMap =
          opAdapters->second.find("$" + std::to_string(it->first - 1));
      if (fromMap == opAdapters->second.end() ||
          !fromMap->second.count("$" + std::to_string(it->first)))
        return it->first;
    }
    return std::nullopt;
  }
};

/// Building ONNX's converter copies every op schema, which costs more than
/// importing a small old-opset model: one serves the process.
const UpgradeChecker &upgradeChecker() {
  static const UpgradeChecker checker;
  return checker;
}

/// Constant initializers up to this size become inline `onnx.Constant`s
/// (so shape sub-graphs can fold); larger ones become globals.
constexpr int64_t kMaxInlineConstantElements = 4096;

class Importer {
public:
  Importer(MLIRContext *ctx, StringRef fileName,
           const pp::ONNXImportOptions &options)
      : ctx(ctx), builder(ctx), fileName(fileName), options(options) {}

  OwningOpRef<ModuleOp> run(onnxpb::ModelProto &model);

private:
  InFlightDiagnostic fileError() {
    return emitError(FileLineColLoc::get(ctx, fileName, 0, 0));
  }

  /// The default domain's opset (`opset`, `sourceOpset`): imported once,
  /// and not newer than the importer's.
  LogicalResult readOpsets(const onnxpb::ModelProto &model);
  /// ONNX's checker on the model, which throws what it finds wrong.
  void checkModelWithONNX(const onnxpb::ModelProto &model);
  /// ONNX's checker, then an older opset's model upgraded to kMinOpset;
  /// libonnx's exceptions become diagnostics.
  LogicalResult checkAndUpgradeModel(onnxpb::ModelProto &model);
  /// The checks that ONNX's shape inference and version converter would
  /// crash or hang on, then the upgrade to kMinOpset.
  LogicalResult upgradeModel(onnxpb::ModelProto &model);
  /// An error for the first default-domain node that ONNX's version
  /// converter has no adapter for up to kMinOpset.
  LogicalResult checkUpgradeAdapters(const onnxpb::GraphProto &graph);
  /// Strides, dilations and kernel shapes must be positive.
  LogicalResult checkWindowAttributes(const onnxpb::GraphProto &graph);
  /// ONNX's shape inference and version converter, to kMinOpset.
  LogicalResult convertToMinOpset(onnxpb::ModelProto &model);
  /// An error for a graph input whose static batch dim is not --batch-size.
  LogicalResult checkStaticBatch(ArrayRef<Type> argTypes,
                                 ArrayRef<std::string> argNames);
  /// `main`, whose arguments are the graph inputs that are not
  /// initializers; the builder is left at the start of its body.
  FailureOr<func::FuncOp> createMainFunction(const onnxpb::GraphProto &graph,
                                             Location loc);
  /// Returns the graph outputs from `func`, which must compute the element
  /// types they declare, and sets its type and result names.
  LogicalResult returnGraphOutputs(const onnxpb::GraphProto &graph,
                                   func::FuncOp func, Location loc);
  Location nodeLoc(const onnxpb::NodeProto &node, int index);
  llvm::Expected<std::string> externalDataPath(StringRef location);
  LogicalResult checkGraphOutputs(const onnxpb::GraphProto &graph);
  LogicalResult checkShapeOperandLengths(const onnxpb::GraphProto &graph);
  LogicalResult checkUpgradedDims(const onnxpb::GraphProto &graph,
                                  int64_t opset);
  LogicalResult checkInferredShapes(const onnxpb::GraphProto &graph,
                                    int64_t opset);
  LogicalResult checkOperandRanks(const onnxpb::GraphProto &graph,
                                  const llvm::StringMap<int> &rankOf);
  LogicalResult checkRawDataSizes(const onnxpb::GraphProto &graph);
  LogicalResult checkZeroSize(const onnxpb::NodeProto &node, int index);
  std::string nodeName(const onnxpb::NodeProto &node, int index);

  FailureOr<RankedTensorType>
  importValueType(const onnxpb::ValueInfoProto &info, StringRef what);
  FailureOr<RankedTensorType> tensorType(const onnxpb::TensorProto &tensor,
                                         StringRef what);
  FailureOr<std::vector<char>> tensorBytes(const onnxpb::TensorProto &tensor,
                                           RankedTensorType type,
                                           StringRef what);
  FailureOr<ElementsAttr> denseAttr(const onnxpb::TensorProto &tensor,
                                    StringRef what);
  LogicalResult importInitializers(const onnxpb::GraphProto &graph);
  LogicalResult readTrainableMetadata(const onnxpb::ModelProto &model);
  std::optional<std::string> frozenReason(StringRef name, RankedTensorType type,
                                          ArrayRef<char> bytes);
  LogicalResult importNode(const onnxpb::NodeProto &node, int index);
  /// A node's operands and the segment size of each input (0: absent).
  struct NodeOperands {
    SmallVector<Value> values;
    SmallVector<int32_t> segments;
  };
  /// The operands of a node of op `registered`; an absent optional input
  /// only where the op has operand segments.
  FailureOr<NodeOperands> nodeOperands(const onnxpb::NodeProto &node,
                                       RegisteredOperationName registered,
                                       Location loc, StringRef where);
  /// The attributes of a node of op `registered`: the node's, the schema's
  /// defaults for this opset, the operand segments and the importer's own.
  FailureOr<NamedAttrList> nodeAttributes(const onnxpb::NodeProto &node,
                                          RegisteredOperationName registered,
                                          SmallVector<int32_t> segments,
                                          Location loc, StringRef where);
  /// The result types of op `registered`, through its
  /// InferTypeOpInterface; one at least for each output of the node.
  FailureOr<SmallVector<Type>>
  inferResultTypes(const onnxpb::NodeProto &node,
                   RegisteredOperationName registered, ValueRange operands,
                   DictionaryAttr dict, Location loc, StringRef where);
  /// An error for a result type of a dynamic shape or too large.
  LogicalResult checkResultTypes(TypeRange resultTypes, Location loc,
                                 StringRef where);
  LogicalResult importConstantNode(const onnxpb::NodeProto &node, Location loc);
  LogicalResult importTileNode(const onnxpb::NodeProto &node, Location loc,
                               StringRef where);
  LogicalResult importEinsumNode(const onnxpb::NodeProto &node, Location loc,
                                 StringRef where);
  LogicalResult importDecomposedNode(const onnxpb::NodeProto &node,
                                     Location loc, StringRef where);
  LogicalResult importRecurrentNode(const onnxpb::NodeProto &node, Location loc,
                                    StringRef where);
  /// The value a node reads as `name`; an error at `loc` when nothing
  /// defines it.
  FailureOr<Value> nodeInput(StringRef name, Location loc, StringRef where);
  /// Every input of `node`; an absent one ("") is an error, or null where
  /// `allowAbsent`.
  FailureOr<SmallVector<Value>> nodeInputs(const onnxpb::NodeProto &node,
                                           Location loc, StringRef where,
                                           bool allowAbsent = false);
  FailureOr<Attribute> convertAttribute(const onnxpb::AttributeProto &attr,
                                        Location loc, StringRef where);
  SmallVector<Value> foldOrKeep(Operation *op);

  MLIRContext *ctx;
  OpBuilder builder;
  std::string fileName;
  const pp::ONNXImportOptions &options;
  int64_t opset = 0;
  /// The model's own opset, before ONNX's version converter upgraded it.
  int64_t sourceOpset = 0;
  std::string producer;
  // Which float initializers are trained (see frozenReason).
  std::optional<llvm::Regex> frozenRegex, trainableRegex;
  std::optional<llvm::StringSet<>> metadataTrainable;
  llvm::StringSet<> metadataBuffers;
  ModuleOp module;
  /// Whether --batch-size fixed some graph input's symbolic batch dim.
  bool usedBatchSize = false;
  /// ONNX value name -> SSA value.
  llvm::StringMap<Value> values;
  /// The main graph's initializers.
  llvm::StringSet<> initializerNames;
};

} // namespace

/// Bytes of one element as MLIR stores it (i1 as one byte).
static size_t storageBytes(Type element) {
  return std::max<size_t>(1, element.getIntOrFloatBitWidth() / 8);
}

/// Why a tensor of `shape` and `element` type is too large to import (a
/// dim, its element count or bytes overflow int64 or exceed the limits), or
/// "". A single dim is bounded even when another is 0: ops multiply dims
/// (Flatten's 2 x 2^63-1).
static std::string tensorSizeError(ArrayRef<int64_t> shape, Type element) {
  using namespace pp::limits;
  for (int64_t d : shape)
    if (d > kMaxTensorElements)
      return "a dim of " + std::to_string(d) + ", more than the limit of " +
             std::to_string(kMaxTensorElements);
  std::optional<int64_t> count = 1;
  for (int64_t d : shape)
    if (count && d >= 0)
      count = llvm::checkedMul(*count, d);
  if (!count || *count > kMaxTensorElements)
    return "more than the limit of " + std::to_string(kMaxTensorElements) +
           " elements";
  std::optional<int64_t> bytes =
      llvm::checkedMul(*count, int64_t(storageBytes(element)));
  if (!bytes || *bytes > kMaxTensorBytes)
    return "more than the limit of " + std::to_string(kMaxTensorBytes) +
           " bytes";
  return "";
}

/// "STRING (8)": the ONNX name of a TensorProto data type code.
static std::string dataTypeName(int dataType) {
  std::string name = onnxpb::TensorProto_DataType_IsValid(dataType)
                         ? onnxpb::TensorProto_DataType_Name(dataType)
                         : "unknown";
  return name + " (" + std::to_string(dataType) + ")";
}

Location Importer::nodeLoc(const onnxpb::NodeProto &node, int index) {
  Location file = FileLineColLoc::get(ctx, fileName, index + 1, 0);
  return NameLoc::get(StringAttr::get(ctx, nodeName(node, index)),
                      NameLoc::get(StringAttr::get(ctx, node.op_type()), file));
}

/// The real path of an external data file, which must lie inside the model's
/// directory once symlinks and ".." are resolved.
llvm::Expected<std::string> Importer::externalDataPath(StringRef location) {
  auto fail = [](const Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  if (location.empty())
    return fail("external data has no location");
  if (llvm::sys::path::is_absolute(location))
    return fail("external data location '" + location +
                "' is absolute; it must be relative to the model's directory");
  SmallString<256> dir(llvm::sys::path::parent_path(fileName));
  if (dir.empty())
    dir = ".";
  SmallString<256> realDir, path(dir), realPath;
  llvm::sys::path::append(path, location);
  if (std::error_code ec = llvm::sys::fs::real_path(dir, realDir))
    return fail("cannot resolve the model's directory '" + dir +
                "': " + ec.message());
  if (std::error_code ec = llvm::sys::fs::real_path(path, realPath))
    return fail("cannot read external data file '" + path +
                "': " + ec.message());
  StringRef inside = realPath;
  if (!inside.consume_front(realDir) || inside.empty() ||
      !llvm::sys::path::is_separator(inside.front()))
    return fail("external data location '" + location + "' resolves to '" +
                realPath + "', outside the model's directory '" + realDir +
                "'");
  return std::string(realPath);
}

std::string Importer::nodeName(const onnxpb::NodeProto &node, int index) {
  if (!node.name().empty())
    return node.name();
  return node.op_type() + "_" + std::to_string(index);
}

FailureOr<RankedTensorType>
Importer::importValueType(const onnxpb::ValueInfoProto &info, StringRef what) {
  if (!info.type().has_tensor_type())
    return fileError() << what << " '" << info.name()
                       << "' is not a tensor (sequences, maps and optionals "
                          "are not supported)",
           failure();
  const auto &tensor = info.type().tensor_type();
  Type element =
      pp::onnx::getElementTypeForONNXDataType(ctx, tensor.elem_type());
  if (!element)
    return fileError() << what << " '" << info.name()
                       << "' has unsupported element type "
                       << dataTypeName(tensor.elem_type()),
           failure();
  if (!tensor.has_shape())
    return fileError() << what << " '" << info.name()
                       << "' has no shape: cannot make it static",
           failure();
  SmallVector<int64_t> shape;
  for (int i = 0; i < tensor.shape().dim_size(); ++i) {
    const auto &dim = tensor.shape().dim(i);
    if (dim.has_dim_value() && dim.dim_value() >= 0) {
      shape.push_back(dim.dim_value());
      continue;
    }
    std::string symbol = dim.has_dim_param() ? dim.dim_param() : "?";
    if (i == 0 && options.batchSize) {
      shape.push_back(*options.batchSize);
      usedBatchSize = true;
      continue;
    }
    auto diag = fileError()
                << "unresolvable dynamic shape: " << what << " '" << info.name()
                << "' dim " << i << " is symbolic ('" << symbol << "')";
    if (i == 0)
      diag << "; pass --batch-size=N to fix the batch size";
    return failure();
  }
  std::string tooLarge = tensorSizeError(shape, element);
  if (!tooLarge.empty())
    return fileError() << what << " '" << info.name() << "' of shape "
                       << RankedTensorType::get(shape, element) << " has "
                       << tooLarge,
           failure();
  return RankedTensorType::get(shape, element);
}

FailureOr<RankedTensorType>
Importer::tensorType(const onnxpb::TensorProto &tensor, StringRef what) {
  Type element =
      pp::onnx::getElementTypeForONNXDataType(ctx, tensor.data_type());
  if (!element)
    return fileError() << what << " '" << tensor.name()
                       << "' has unsupported data type "
                       << dataTypeName(tensor.data_type()),
           failure();
  SmallVector<int64_t> shape;
  for (int64_t d : tensor.dims()) {
    if (d < 0)
      return fileError() << what << " '" << tensor.name()
                         << "' has a negative dim " << d,
             failure();
    shape.push_back(d);
  }
  std::string tooLarge = tensorSizeError(shape, element);
  if (!tooLarge.empty())
    return fileError() << what << " '" << tensor.name() << "' has " << tooLarge,
           failure();
  return RankedTensorType::get(shape, element);
}

FailureOr<std::vector<char>>
Importer::tensorBytes(const onnxpb::TensorProto &tensor, RankedTensorType type,
                      StringRef what) {
  Type element = type.getElementType();
  size_t count = type.getNumElements(), width = storageBytes(element);
  size_t byteCount = count * width;
  std::vector<char> bytes;
  auto sizeError = [&](StringRef field, size_t have) {
    return fileError() << what << " '" << tensor.name() << "': " << field
                       << " holds " << have << " values, expected " << count
                       << " for shape " << type,
           failure();
  };
  if (tensor.data_location() == onnxpb::TensorProto::EXTERNAL) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto &entry : tensor.external_data()) {
      if (entry.key() == "location")
        location = entry.value();
      else if ((entry.key() == "offset" || entry.key() == "length") &&
               StringRef(entry.value())
                   .getAsInteger(10, entry.key() == "offset" ? offset : length))
        return fileError() << what << " '" << tensor.name()
                           << "': external data " << entry.key() << " '"
                           << entry.value() << "' is not an integer",
               failure();
    }
    llvm::Expected<std::string> path = externalDataPath(location);
    if (!path)
      return fileError() << what << " '" << tensor.name()
                         << "': " << llvm::toString(path.takeError()),
             failure();
    auto buffer = pp::limits::readRegularFile(
        *path, pp::limits::kMaxExternalDataFileBytes, "external data file");
    if (!buffer)
      return fileError() << what << " '" << tensor.name()
                         << "': " << llvm::toString(buffer.takeError()),
             failure();
    size_t want = length >= 0 ? size_t(length) : byteCount;
    size_t available = (*buffer)->getBufferSize();
    // Without a length the data runs to the end of the file (as ONNX reads
    // it): more bytes than the tensor's are not its data.
    if (length < 0 && offset >= 0 && size_t(offset) <= available &&
        available - size_t(offset) > byteCount)
      return fileError() << what << " '" << tensor.name()
                         << "': external data without a length runs from "
                            "offset "
                         << offset << " to the end of '" << *path << "' ("
                         << available - size_t(offset)
                         << " bytes), more than the " << byteCount
                         << " bytes of shape " << type
                         << " (give its \"length\")",
             failure();
    if (offset < 0 || want != byteCount || size_t(offset) > available ||
        want > available - size_t(offset))
      return fileError() << what << " '" << tensor.name()
                         << "': external data (offset " << offset << ", length "
                         << length << ") in '" << *path << "' (" << available
                         << " bytes) does not hold the " << byteCount
                         << " bytes of shape " << type,
             failure();
    bytes.resize(byteCount);
    if (want > 0)
      std::memcpy(bytes.data(), (*buffer)->getBufferStart() + offset, want);
    return bytes;
  }
  if (tensor.has_raw_data()) {
    if (tensor.raw_data().size() != byteCount)
      return fileError() << what << " '" << tensor.name() << "': raw_data has "
                         << tensor.raw_data().size() << " bytes, expected "
                         << byteCount << " for shape " << type,
             failure();
    bytes.resize(byteCount);
    if (byteCount > 0) // a zero-size tensor: no bytes (and data() may be null)
      std::memcpy(bytes.data(), tensor.raw_data().data(), bytes.size());
    return bytes;
  }
  auto copyTyped = [&](const auto &field, StringRef name,
                       auto convert) -> LogicalResult {
    if (size_t(field.size()) != count)
      return sizeError(name, field.size());
    bytes.resize(byteCount);
    for (size_t i = 0; i < count; ++i) {
      auto v = convert(field.Get(i));
      std::memcpy(bytes.data() + i * width, &v, width);
    }
    return success();
  };
  LogicalResult ok = success();
  switch (tensor.data_type()) {
  case onnxpb::TensorProto::FLOAT:
    ok =
        copyTyped(tensor.float_data(), "float_data", [](float v) { return v; });
    break;
  case onnxpb::TensorProto::DOUBLE:
    ok = copyTyped(tensor.double_data(), "double_data",
                   [](double v) { return v; });
    break;
  case onnxpb::TensorProto::INT64:
    ok = copyTyped(tensor.int64_data(), "int64_data",
                   [](int64_t v) { return v; });
    break;
  case onnxpb::TensorProto::UINT32:
  case onnxpb::TensorProto::UINT64:
    ok = copyTyped(tensor.uint64_data(), "uint64_data",
                   [](uint64_t v) { return v; });
    break;
  default:
    // int32_data carries every type of 32 bits or less (fp16 as its bits).
    ok = copyTyped(tensor.int32_data(), "int32_data",
                   [](int32_t v) { return v; });
    break;
  }
  if (failed(ok))
    return failure();
  return bytes;
}

FailureOr<ElementsAttr> Importer::denseAttr(const onnxpb::TensorProto &tensor,
                                            StringRef what) {
  auto type = tensorType(tensor, what);
  if (failed(type))
    return failure();
  auto bytes = tensorBytes(tensor, *type, what);
  if (failed(bytes))
    return failure();
  if (type->getElementType().isInteger(1)) {
    SmallVector<bool> bits;
    for (char c : *bytes)
      bits.push_back(c != 0);
    return ElementsAttr(DenseElementsAttr::get(*type, bits));
  }
  return ElementsAttr(DenseElementsAttr::getFromRawBuffer(*type, *bytes));
}

LogicalResult Importer::importInitializers(const onnxpb::GraphProto &graph) {
  // BatchNorm running statistics are state, not trainable parameters.
  llvm::StringSet<> stateNames;
  for (const auto &node : graph.node())
    if (node.op_type() == "BatchNormalization")
      for (int i = 3; i < std::min(node.input_size(), 5); ++i)
        stateNames.insert(node.input(i));
  for (auto [regex, pattern, flag] :
       {std::tuple(&frozenRegex, &options.frozenPattern, "--frozen-params"),
        std::tuple(&trainableRegex, &options.trainablePattern,
                   "--trainable")}) {
    if (pattern->empty())
      continue;
    regex->emplace(*pattern);
    std::string regexError;
    if (!(*regex)->isValid(regexError))
      return fileError() << "invalid " << flag << " regex '" << *pattern
                         << "': " << regexError,
             failure();
  }

  // Resize's roi, scales and sizes are parameters of the op, never trained:
  // constants, so that the output shape is static.
  llvm::StringSet<> operandConstants;
  for (const auto &node : graph.node())
    if (node.op_type() == "Resize")
      for (int i = 1; i < node.input_size(); ++i)
        operandConstants.insert(node.input(i));

  OpBuilder moduleBuilder = OpBuilder::atBlockEnd(module.getBody());
  for (const auto &init : graph.initializer()) {
    if (init.name().empty())
      return fileError() << "an initializer has no name", failure();
    if (values.count(init.name()))
      return fileError() << "initializer '" << init.name()
                         << "' is defined twice",
             failure();
    auto type = tensorType(init, "initializer");
    if (failed(type))
      return failure();
    Location loc = NameLoc::get(StringAttr::get(ctx, init.name()),
                                FileLineColLoc::get(ctx, fileName, 0, 0));
    // Float tensors of more than one element are parameters unless
    // frozenReason says otherwise; frozen ones stay globals (named in the
    // plan's summary).
    bool parameterShaped = isa<FloatType>(type->getElementType()) &&
                           type->getRank() > 0 && type->getNumElements() > 1 &&
                           !operandConstants.contains(init.name());
    StringRef kind = pp::onnx::kConstant;
    FailureOr<std::vector<char>> bytes = failure();
    std::optional<std::string> frozen;
    if (options.shapeOnly &&
        init.data_location() == onnxpb::TensorProto::EXTERNAL) {
      // A global of the type only: its resource has no blob.
      if (stateNames.contains(init.name()))
        kind = pp::onnx::kState;
      else if (parameterShaped)
        frozen = frozenReason(init.name(), *type, {});
      if (parameterShaped && !stateNames.contains(init.name()))
        kind = frozen ? pp::onnx::kConstant : pp::onnx::kTrainable;
      auto &manager = DenseResourceElementsHandle::getManagerInterface(ctx);
      auto value = DenseResourceElementsAttr::get(
          *type, manager.insert(init.name(), std::nullopt));
      auto global =
          pp::onnx::GlobalOp::create(moduleBuilder, loc, init.name(), kind,
                                     *type, cast<ElementsAttr>(value));
      if (frozen)
        global->setAttr(pp::onnx::kFrozenReasonAttr,
                        builder.getStringAttr(*frozen));
      values[init.name()] = pp::onnx::GlobalReadOp::create(
          builder, loc, *type, FlatSymbolRefAttr::get(ctx, init.name()));
      continue;
    }
    if (stateNames.contains(init.name())) {
      kind = pp::onnx::kState;
    } else if (parameterShaped) {
      bytes = tensorBytes(init, *type, "initializer");
      if (failed(bytes))
        return failure();
      frozen = frozenReason(init.name(), *type, *bytes);
      kind = frozen ? pp::onnx::kConstant : pp::onnx::kTrainable;
    }

    if (kind == pp::onnx::kConstant && !frozen &&
        type->getNumElements() <= kMaxInlineConstantElements) {
      auto attr = denseAttr(init, "initializer");
      if (failed(attr))
        return failure();
      values[init.name()] = pp::onnx::ConstantOp::create(builder, loc, *attr);
      continue;
    }
    if (failed(bytes))
      bytes = tensorBytes(init, *type, "initializer");
    if (failed(bytes))
      return failure();
    size_t align = storageBytes(type->getElementType());
    auto blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(
        ArrayRef<char>(*bytes), align);
    auto value =
        DenseResourceElementsAttr::get(*type, init.name(), std::move(blob));
    auto global =
        pp::onnx::GlobalOp::create(moduleBuilder, loc, init.name(), kind, *type,
                                   cast<ElementsAttr>(value));
    if (frozen)
      global->setAttr(pp::onnx::kFrozenReasonAttr,
                      builder.getStringAttr(*frozen));
    values[init.name()] = pp::onnx::GlobalReadOp::create(
        builder, loc, *type, FlatSymbolRefAttr::get(ctx, init.name()));
  }
  return success();
}

/// Whether every element of a float tensor is finite, and whether the
/// elements are integers of at least two values (a mask or an index table,
/// never a freshly initialised weight: zero or one-filled ones have one).
static std::pair<bool, bool> scanFloats(RankedTensorType type,
                                        ArrayRef<char> bytes) {
  bool finite = true, integral = true;
  std::optional<double> first;
  bool distinct = false;
  auto visit = [&](double v) {
    if (!std::isfinite(v)) {
      finite = false;
      return;
    }
    if (v != std::nearbyint(v))
      integral = false;
    if (!first)
      first = v;
    else if (v != *first)
      distinct = true;
  };
  Type element = type.getElementType();
  int64_t n = type.getNumElements();
  if (element.isF32() || element.isF64()) {
    for (int64_t i = 0; i < n && finite; ++i) {
      if (element.isF32()) {
        float v;
        std::memcpy(&v, bytes.data() + 4 * i, 4);
        visit(v);
      } else {
        double v;
        std::memcpy(&v, bytes.data() + 8 * i, 8);
        visit(v);
      }
    }
  } else {
    auto attr = DenseElementsAttr::getFromRawBuffer(type, bytes);
    for (const APFloat &v : attr.getValues<APFloat>()) {
      visit(v.convertToDouble());
      if (!finite)
        break;
    }
  }
  return {finite, integral && distinct};
}

std::optional<std::string> Importer::frozenReason(StringRef name,
                                                  RankedTensorType type,
                                                  ArrayRef<char> bytes) {
  if (frozenRegex && frozenRegex->match(name))
    return "matches --frozen-params";
  if (trainableRegex && trainableRegex->match(name))
    return std::nullopt;
  if (metadataTrainable) {
    if (metadataTrainable->contains(name))
      return std::nullopt;
    return metadataBuffers.contains(name)
               ? "a buffer of the PyTorch module"
               : std::string("no trainable parameter in the model's ") +
                     pp::kTrainableMetadataKey;
  }
  if (bytes.empty() && type.getNumElements() > 0)
    return std::nullopt; // Shape-only: no values to look at.
  auto [finite, integral] = scanFloats(type, bytes);
  if (!finite)
    return "holds non-finite values (a mask)";
  if (integral)
    return "holds integers only (a mask or an index table)";
  return std::nullopt;
}

/// Refuses raw_data shorter than its dims in `graph`'s initializers and
/// tensor attributes (subgraphs too), which ONNX's shape inference and
/// version converter would read past the end of.
LogicalResult Importer::checkRawDataSizes(const onnxpb::GraphProto &graph) {
  auto check = [&](const onnxpb::TensorProto &tensor,
                   StringRef what) -> LogicalResult {
    if (!tensor.has_raw_data() ||
        tensor.data_location() == onnxpb::TensorProto::EXTERNAL)
      return success();
    // Other type defects are reported at import; dims ONNX would size a
    // buffer from (negative, or too many elements) are refused here, since
    // its shape inference reads the raw data by them.
    Type element =
        pp::onnx::getElementTypeForONNXDataType(ctx, tensor.data_type());
    if (!element)
      return success();
    SmallVector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
    if (llvm::any_of(shape, [](int64_t d) { return d < 0; }))
      return fileError() << what << " '" << tensor.name()
                         << "': a negative dim in its dims ["
                         << llvm::make_range(shape.begin(), shape.end()) << "]",
             failure();
    if (std::string size = tensorSizeError(shape, element); !size.empty())
      return fileError() << what << " '" << tensor.name() << "': " << size,
             failure();
    auto type = RankedTensorType::get(shape, element);
    size_t byteCount = type.getNumElements() * storageBytes(element);
    // Longer raw_data is read safely, and refused at import.
    if (tensor.raw_data().size() < byteCount)
      return fileError() << what << " '" << tensor.name() << "': raw_data has "
                         << tensor.raw_data().size() << " bytes, expected "
                         << byteCount << " for shape " << type,
             failure();
    return success();
  };
  for (const onnxpb::TensorProto &init : graph.initializer())
    if (failed(check(init, "initializer")))
      return failure();
  for (const onnxpb::NodeProto &node : graph.node())
    for (const onnxpb::AttributeProto &attr : node.attribute()) {
      StringRef what =
          node.op_type() == "Constant" ? "Constant" : "tensor attribute";
      if (attr.has_t() && failed(check(attr.t(), what)))
        return failure();
      for (const onnxpb::TensorProto &t : attr.tensors())
        if (failed(check(t, what)))
          return failure();
      if (attr.has_g() && failed(checkRawDataSizes(attr.g())))
        return failure();
      for (const onnxpb::GraphProto &g : attr.graphs())
        if (failed(checkRawDataSizes(g)))
          return failure();
    }
  return success();
}

/// Refuses a float operand or result of `node` without elements.
LogicalResult Importer::checkZeroSize(const onnxpb::NodeProto &node,
                                      int index) {
  // Empty integer tensors are shape arithmetic (the shape of a scalar), and
  // a Constant is judged where it is used.
  if (node.op_type() == "Constant")
    return success();
  auto check = [&](StringRef name, StringRef role) -> LogicalResult {
    auto it = values.find(name);
    if (name.empty() || it == values.end())
      return success();
    auto type = dyn_cast<RankedTensorType>(it->second.getType());
    if (!type || !isa<FloatType>(type.getElementType()) ||
        type.getNumElements() != 0)
      return success();
    bool initializer = initializerNames.contains(name);
    return emitError(nodeLoc(node, index))
               << "node '" << nodeName(node, index) << "' (" << node.op_type()
               << "): " << role << " '" << name << "'"
               << (initializer ? " (an initializer)" : "")
               << " is a zero-size tensor (" << type
               << "): tensors without elements are not supported",
           failure();
  };
  // Resize's roi and scales may be empty (not given).
  int inputs = node.op_type() == "Resize" ? std::min(node.input_size(), 1)
                                          : node.input_size();
  for (int k = 0; k < inputs; ++k)
    if (failed(check(node.input(k), "input")))
      return failure();
  for (const std::string &output : node.output())
    if (failed(check(output, "output")))
      return failure();
  return success();
}

LogicalResult Importer::checkUpgradedDims(const onnxpb::GraphProto &graph,
                                          int64_t opset) {
  auto check = [&](const onnxpb::ValueInfoProto &info,
                   StringRef what) -> LogicalResult {
    if (!info.type().has_tensor_type())
      return success();
    const auto &shape = info.type().tensor_type().shape();
    for (int d = 0; d < shape.dim_size(); ++d)
      if (shape.dim(d).has_dim_value() &&
          shape.dim(d).dim_value() > pp::limits::kMaxUpgradedDim)
        return fileError() << what << " '" << info.name() << "': dim " << d
                           << " is " << shape.dim(d).dim_value()
                           << ", more than the " << pp::limits::kMaxUpgradedDim
                           << " ONNX's shape inference takes when it "
                              "upgrades a model from opset "
                           << opset << "; re-export it with opset " << kMinOpset
                           << "-" << kMaxOpset;
    return success();
  };
  for (const auto &info : graph.input())
    if (failed(check(info, "input")))
      return failure();
  for (const auto &info : graph.output())
    if (failed(check(info, "output")))
      return failure();
  for (const auto &info : graph.value_info())
    if (failed(check(info, "value")))
      return failure();
  return success();
}

LogicalResult
Importer::checkShapeOperandLengths(const onnxpb::GraphProto &graph) {
  // The declared length of every 1-D value: graph inputs, value_info and
  // initializers (whose dims the checker has matched with their data).
  llvm::StringMap<int64_t> lengths;
  auto declare = [&](const onnxpb::ValueInfoProto &info) {
    if (!info.type().has_tensor_type())
      return;
    const auto &shape = info.type().tensor_type().shape();
    if (shape.dim_size() == 1 && shape.dim(0).has_dim_value())
      lengths[info.name()] = shape.dim(0).dim_value();
  };
  for (const auto &info : graph.input())
    declare(info);
  for (const auto &info : graph.value_info())
    declare(info);
  for (const auto &tensor : graph.initializer())
    if (tensor.dims_size() == 1)
      lengths[tensor.name()] = tensor.dims(0);
  static const std::pair<StringRef, int> shapeOperands[] = {
      {"Expand", 1}, {"Reshape", 1}, {"Tile", 1}, {"ConstantOfShape", 0}};
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnxpb::NodeProto &node = graph.node(i);
    for (auto [opType, operand] : shapeOperands) {
      if (node.op_type() != opType || node.input_size() <= operand)
        continue;
      auto it = lengths.find(node.input(operand));
      if (it == lengths.end() || it->second <= pp::limits::kMaxRank)
        continue;
      return emitError(nodeLoc(node, i))
             << "node '" << nodeName(node, i) << "' (" << node.op_type()
             << "): its shape operand '" << node.input(operand) << "' declares "
             << it->second << " elements, a rank above the limit of "
             << pp::limits::kMaxRank;
    }
  }
  return success();
}

/// The ranks of the values whose shapes the graph states: inputs,
/// value_info (ONNX's shape inference adds there), outputs, initializers.
static llvm::StringMap<int> knownRanks(const onnxpb::GraphProto &graph) {
  llvm::StringMap<int> rankOf;
  auto note = [&](const onnxpb::ValueInfoProto &info) {
    if (info.type().has_tensor_type() && info.type().tensor_type().has_shape())
      rankOf[info.name()] = info.type().tensor_type().shape().dim_size();
  };
  for (const auto &info : graph.input())
    note(info);
  for (const auto &info : graph.value_info())
    note(info);
  for (const auto &info : graph.output())
    note(info);
  for (const auto &tensor : graph.initializer())
    rankOf[tensor.name()] = tensor.dims_size();
  return rankOf;
}

LogicalResult Importer::checkOperandRanks(const onnxpb::GraphProto &graph,
                                          const llvm::StringMap<int> &rankOf) {
  // ONNX's old Gemm shape inference and its 6-to-7 adapter read dims 0 and
  // 1 of A and B unchecked (a SIGSEGV or a read past a vector); its
  // convolution inference trusts W's rank.
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnxpb::NodeProto &node = graph.node(i);
    // ONNX's convolution shape inference takes the kernel's spatial dims
    // from W and indexes X's dims with them: a W of higher rank than X
    // reads past X's dims (a SIGSEGV).
    int weight = node.op_type() == "QLinearConv" ? 3
                 : node.op_type() == "Conv" ||
                         node.op_type() == "ConvTranspose" ||
                         node.op_type() == "ConvInteger"
                     ? 1
                     : -1;
    if (weight >= 0 && node.input_size() > weight) {
      auto x = rankOf.find(node.input(0));
      auto w = rankOf.find(node.input(weight));
      if (x != rankOf.end() && w != rankOf.end() && x->second != w->second)
        return emitError(nodeLoc(node, i))
               << "node '" << nodeName(node, i) << "' (" << node.op_type()
               << "): its weight '" << node.input(weight) << "' has rank "
               << w->second << " but its input '" << node.input(0)
               << "' has rank " << x->second << " (they must be equal)";
    }
    if (node.op_type() != "Gemm")
      continue;
    for (int operand = 0; operand < std::min(2, node.input_size()); ++operand) {
      auto it = rankOf.find(node.input(operand));
      if (it != rankOf.end() && it->second != 2)
        return emitError(nodeLoc(node, i))
               << "node '" << nodeName(node, i) << "' (Gemm): input '"
               << node.input(operand) << "' has rank " << it->second
               << "; Gemm takes matrices (rank 2)";
    }
  }
  return success();
}

LogicalResult Importer::checkInferredShapes(const onnxpb::GraphProto &graph,
                                            int64_t opset) {
  // ONNX's adapters (Gemm 6 to 7, the broadcasting ops, Softmax 12 to 13,
  // ...) index the inferred dims of their inputs without checking that
  // there are any.
  llvm::StringMap<int> rankOf = knownRanks(graph);
  if (failed(checkOperandRanks(graph, rankOf)))
    return failure();
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnxpb::NodeProto &node = graph.node(i);
    for (const std::string &input : node.input())
      if (!input.empty() && !rankOf.count(input))
        return emitError(nodeLoc(node, i))
               << "cannot upgrade node '" << nodeName(node, i) << "' ("
               << node.op_type() << ") from opset " << opset << " to "
               << kMinOpset << ": ONNX's shape inference found no shape for "
               << "its input '" << input << "', which the version converter "
               << "needs; re-export the model with opset " << kMinOpset << "-"
               << kMaxOpset;
  }
  return success();
}

LogicalResult Importer::readTrainableMetadata(const onnxpb::ModelProto &model) {
  for (const auto &prop : model.metadata_props()) {
    bool trainable = prop.key() == pp::kTrainableMetadataKey;
    if (!trainable && prop.key() != pp::kBuffersMetadataKey)
      continue;
    llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(prop.value());
    const llvm::json::Array *names = parsed ? parsed->getAsArray() : nullptr;
    if (!parsed)
      llvm::consumeError(parsed.takeError());
    llvm::StringSet<> set;
    for (const llvm::json::Value &entry :
         names ? *names : llvm::json::Array()) {
      std::optional<StringRef> entryName = entry.getAsString();
      if (!entryName) {
        names = nullptr;
        break;
      }
      set.insert(*entryName);
    }
    if (!names)
      return fileError() << "metadata '" << prop.key()
                         << "' is not a JSON array of initializer names",
             failure();
    if (trainable)
      metadataTrainable = std::move(set);
    else
      metadataBuffers = std::move(set);
  }
  return success();
}

FailureOr<Attribute>
Importer::convertAttribute(const onnxpb::AttributeProto &attr, Location loc,
                           StringRef where) {
  switch (attr.type()) {
  case onnxpb::AttributeProto::INT:
    return Attribute(builder.getI64IntegerAttr(attr.i()));
  case onnxpb::AttributeProto::FLOAT:
    return Attribute(builder.getF32FloatAttr(attr.f()));
  case onnxpb::AttributeProto::STRING:
    return Attribute(builder.getStringAttr(attr.s()));
  case onnxpb::AttributeProto::INTS:
    return Attribute(builder.getDenseI64ArrayAttr(
        SmallVector<int64_t>(attr.ints().begin(), attr.ints().end())));
  case onnxpb::AttributeProto::FLOATS:
    return Attribute(builder.getDenseF32ArrayAttr(
        SmallVector<float>(attr.floats().begin(), attr.floats().end())));
  case onnxpb::AttributeProto::TENSOR: {
    auto value = denseAttr(attr.t(), "tensor attribute");
    if (failed(value))
      return failure();
    return Attribute(*value);
  }
  default:
    return emitError(loc) << where << ": attribute '" << attr.name()
                          << "' has unsupported type "
                          << onnxpb::AttributeProto::AttributeType_Name(
                                 attr.type()),
           failure();
  }
}

LogicalResult Importer::importConstantNode(const onnxpb::NodeProto &node,
                                           Location loc) {
  if (node.attribute_size() != 1 || node.output_size() != 1)
    return emitError(loc)
               << "Constant node '" << node.name()
               << "' needs exactly one value attribute and one output",
           failure();
  const auto &attr = node.attribute(0);
  ElementsAttr value;
  const std::string &name = attr.name();
  if (name == "value") {
    auto v = denseAttr(attr.t(), "Constant");
    if (failed(v))
      return failure();
    value = *v;
  } else if (name == "value_float") {
    value = DenseElementsAttr::get(
        RankedTensorType::get({}, builder.getF32Type()), attr.f());
  } else if (name == "value_int") {
    value = DenseElementsAttr::get(
        RankedTensorType::get({}, builder.getI64Type()), attr.i());
  } else if (name == "value_floats") {
    SmallVector<float> v(attr.floats().begin(), attr.floats().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({int64_t(v.size())}, builder.getF32Type()),
        ArrayRef<float>(v));
  } else if (name == "value_ints") {
    SmallVector<int64_t> v(attr.ints().begin(), attr.ints().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({int64_t(v.size())}, builder.getI64Type()),
        ArrayRef<int64_t>(v));
  } else {
    return emitError(loc) << "Constant node '" << node.name()
                          << "': attribute '" << name << "' is not supported",
           failure();
  }
  values[node.output(0)] = pp::onnx::ConstantOp::create(builder, loc, value);
  return success();
}

/// Tile as Reshape -> Expand -> Reshape: x [d0, d1, ...] viewed as
/// [1, d0, 1, d1, ...], broadcast to [r0, d0, r1, d1, ...] and flattened to
/// [r0 * d0, r1 * d1, ...]. Its gradient is then Expand's (a sum over the
/// repeats).
LogicalResult Importer::importTileNode(const onnxpb::NodeProto &node,
                                       Location loc, StringRef where) {
  if (node.input_size() != 2 || node.output_size() != 1)
    return emitError(loc) << where << " needs 2 inputs and 1 output", failure();
  Value inputs[2];
  for (int i = 0; i < 2; ++i) {
    FailureOr<Value> input = nodeInput(node.input(i), loc, where);
    if (failed(input))
      return failure();
    inputs[i] = *input;
  }
  auto type = dyn_cast<RankedTensorType>(inputs[0].getType());
  auto repeats = pp::onnx::getConstantInts(inputs[1]);
  if (!type || !repeats)
    return emitError(loc) << where << ": 'repeats' is not a constant: the "
                          << "result shape cannot be made static",
           failure();
  if (static_cast<int64_t>(repeats->size()) != type.getRank() ||
      type.getRank() == 0)
    return emitError(loc) << where << ": 'repeats' has " << repeats->size()
                          << " entries for an input of rank " << type.getRank(),
           failure();
  SmallVector<int64_t> spread, expanded, tiled;
  for (auto [dim, repeat] : llvm::zip(type.getShape(), *repeats)) {
    if (repeat < 0)
      return emitError(loc) << where << ": repeats must not be negative",
             failure();
    spread.append({1, dim});
    expanded.append({repeat, dim});
    tiled.push_back(repeat * dim);
  }
  auto shapeConstant = [&](ArrayRef<int64_t> shape) -> Value {
    auto shapeType =
        RankedTensorType::get({int64_t(shape.size())}, builder.getI64Type());
    return pp::onnx::ConstantOp::create(
        builder, loc, DenseIntElementsAttr::get(shapeType, shape));
  };
  auto reshape = [&](Value x, ArrayRef<int64_t> shape) {
    return foldOrKeep(pp::onnx::ReshapeOp::create(builder, loc, x,
                                                  shapeConstant(shape),
                                                  builder.getI64IntegerAttr(0)))
        .front();
  };
  Value view = reshape(inputs[0], spread);
  Value broadcast = foldOrKeep(pp::onnx::ExpandOp::create(
                                   builder, loc, view, shapeConstant(expanded)))
                        .front();
  if (!node.output(0).empty())
    values[node.output(0)] = reshape(broadcast, tiled);
  return success();
}

LogicalResult Importer::importEinsumNode(const onnxpb::NodeProto &node,
                                         Location loc, StringRef where) {
  if (node.output_size() != 1)
    return emitError(loc) << where << " needs 1 output", failure();
  std::string equation;
  bool found = false;
  for (const onnxpb::AttributeProto &attr : node.attribute())
    if (attr.name() == "equation") {
      equation = attr.s();
      found = true;
    }
  if (!found)
    return emitError(loc) << where << " has no 'equation' attribute", failure();
  FailureOr<SmallVector<Value>> operands = nodeInputs(node, loc, where);
  if (failed(operands))
    return failure();
  std::string error;
  FailureOr<Value> result = pp::onnx::buildEinsum(
      builder, loc, equation, *operands,
      [&](Operation *op) { return foldOrKeep(op).front(); }, error);
  if (failed(result))
    return emitError(loc) << where << ": equation '" << equation
                          << "': " << error,
           failure();
  if (!node.output(0).empty())
    values[node.output(0)] = *result;
  return success();
}

/// Ops that Decompose.h builds from other onnx ops.
LogicalResult Importer::importDecomposedNode(const onnxpb::NodeProto &node,
                                             Location loc, StringRef where) {
  if (node.output_size() != 1)
    return emitError(loc) << where << " needs 1 output", failure();
  pp::onnx::DecomposedAttrs attrs;
  attrs.channelSlope = sourceOpset < 7;
  ArrayRef<StringRef> known = pp::onnx::decomposedAttrNames(node.op_type());
  for (const onnxpb::AttributeProto &attr : node.attribute()) {
    if (!llvm::is_contained(known, attr.name()))
      return emitError(loc) << where << ": attribute '" << attr.name()
                            << "' is not supported",
             failure();
    StringRef name = attr.name();
    if (name == "axes")
      attrs.axes.emplace(attr.ints().begin(), attr.ints().end());
    else if (name == "keepdims")
      attrs.keepdims = attr.i();
    else if (name == "noop_with_empty_axes")
      attrs.noopWithEmptyAxes = attr.i();
    else if (name == "mode")
      attrs.mode = attr.s();
    else if (name == "coordinate_transformation_mode")
      attrs.coordinateMode = attr.s();
    else if (name == "nearest_mode")
      attrs.nearestMode = attr.s();
    else if (name == "keep_aspect_ratio_policy")
      attrs.keepAspectRatioPolicy = attr.s();
    else if (name == "antialias")
      attrs.antialias = attr.i();
    else if (name == "exclude_outside")
      attrs.excludeOutside = attr.i();
    else if (name == "upper")
      attrs.upper = attr.i();
    else if (name == "epsilon")
      attrs.epsilon = attr.f();
    else if (name == "detect_negative")
      attrs.detectNegative = attr.i();
    else if (name == "detect_positive")
      attrs.detectPositive = attr.i();
    else if (name == "reduction")
      attrs.reduction = attr.s();
    else if (name == "ignore_index")
      attrs.ignoreIndex = attr.i();
    else if (name == "axis")
      attrs.axis = attr.i();
    else if (name == "select_last_index")
      attrs.selectLastIndex = attr.i();
    else if (name == "exclusive")
      attrs.exclusive = attr.i();
    else if (name == "reverse")
      attrs.reverse = attr.i();
    else if (name == "blocksize")
      attrs.blocksize = attr.i();
    else if (name == "dtype")
      attrs.dtype = attr.i();
    else if (name == "k")
      attrs.k = attr.i();
    else if (name == "bias")
      attrs.bias = attr.f();
    else if (name == "lambd")
      attrs.lambd = attr.f();
  }
  // Absent optional inputs are null; the decomposition checks them.
  FailureOr<SmallVector<Value>> operands =
      nodeInputs(node, loc, where, /*allowAbsent=*/true);
  if (failed(operands))
    return failure();
  std::string error;
  FailureOr<Value> result = pp::onnx::buildDecomposed(
      builder, loc, node.op_type(), *operands, attrs,
      [&](Operation *op) { return foldOrKeep(op).front(); }, error);
  if (failed(result))
    return emitError(loc) << where << ": " << error, failure();
  if (!node.output(0).empty())
    values[node.output(0)] = *result;
  return success();
}

/// RNN, GRU and LSTM, unrolled over their static sequence (Recurrent.h).
LogicalResult Importer::importRecurrentNode(const onnxpb::NodeProto &node,
                                            Location loc, StringRef where) {
  pp::onnx::RecurrentAttrs attrs;
  for (const onnxpb::AttributeProto &attr : node.attribute()) {
    StringRef name = attr.name();
    if (name == "activations")
      attrs.activations.assign(attr.strings().begin(), attr.strings().end());
    else if (name == "activation_alpha" || name == "activation_beta")
      attrs.hasActivationParams = attr.floats_size() > 0;
    else if (name == "clip")
      attrs.hasClip = true;
    else if (name == "direction")
      attrs.direction = attr.s();
    else if (name == "hidden_size")
      attrs.hiddenSize = attr.i();
    else if (name == "input_forget")
      attrs.inputForget = attr.i();
    else if (name == "layout")
      attrs.layout = attr.i();
    else if (name == "linear_before_reset" && node.op_type() == "GRU")
      attrs.linearBeforeReset = attr.i();
    else
      return emitError(loc)
                 << where << ": attribute '" << name << "' is not supported",
             failure();
  }
  FailureOr<SmallVector<Value>> operands =
      nodeInputs(node, loc, where, /*allowAbsent=*/true);
  if (failed(operands))
    return failure();
  std::string error;
  FailureOr<SmallVector<Value>> results = pp::onnx::buildRecurrent(
      builder, loc, node.op_type(), *operands, attrs,
      [&](Operation *op) { return foldOrKeep(op).front(); }, error);
  if (failed(results))
    return emitError(loc) << where << ": " << error, failure();
  if (node.output_size() > static_cast<int>(results->size()))
    return emitError(loc) << where << " has " << node.output_size()
                          << " outputs; it computes " << results->size(),
           failure();
  for (int i = 0; i < node.output_size(); ++i)
    if (!node.output(i).empty())
      values[node.output(i)] = (*results)[i];
  return success();
}

FailureOr<SmallVector<Value>>
Importer::nodeInputs(const onnxpb::NodeProto &node, Location loc,
                     StringRef where, bool allowAbsent) {
  SmallVector<Value> operands;
  for (const std::string &name : node.input()) {
    if (name.empty() && allowAbsent) {
      operands.push_back(Value());
      continue;
    }
    if (name.empty())
      return emitError(loc) << where << ": an absent optional input is not "
                            << "supported",
             failure();
    FailureOr<Value> operand = nodeInput(name, loc, where);
    if (failed(operand))
      return failure();
    operands.push_back(*operand);
  }
  return operands;
}

FailureOr<Value> Importer::nodeInput(StringRef name, Location loc,
                                     StringRef where) {
  auto it = values.find(name);
  if (it == values.end())
    return emitError(loc) << "missing input: " << where << " reads '" << name
                          << "', which no graph input, initializer or "
                             "earlier node defines",
           failure();
  return it->second;
}

SmallVector<Value> Importer::foldOrKeep(Operation *op) {
  SmallVector<Attribute> constants;
  for (Value operand : op->getOperands()) {
    Attribute attr;
    matchPattern(operand, m_Constant(&attr));
    constants.push_back(attr);
  }
  SmallVector<OpFoldResult> folded;
  if (isa<pp::onnx::ConstantOp>(op) || failed(op->fold(constants, folded)) ||
      folded.empty())
    return SmallVector<Value>(op->getResults());
  SmallVector<Value> results;
  for (auto [result, fold] : llvm::zip(op->getResults(), folded)) {
    if (auto value = dyn_cast<Value>(fold)) {
      results.push_back(value);
      continue;
    }
    Operation *constant = op->getDialect()->materializeConstant(
        builder, cast<Attribute>(fold), result.getType(), op->getLoc());
    if (!constant)
      return SmallVector<Value>(op->getResults());
    results.push_back(constant->getResult(0));
  }
  op->erase();
  return results;
}

FailureOr<Importer::NodeOperands>
Importer::nodeOperands(const onnxpb::NodeProto &node,
                       RegisteredOperationName registered, Location loc,
                       StringRef where) {
  // ONNX lists inputs positionally, "" for an absent optional.
  NodeOperands operands;
  bool gap = false;
  for (int i = 0; i < node.input_size(); ++i) {
    const std::string &name = node.input(i);
    if (name.empty()) {
      operands.segments.push_back(0);
      gap = true;
      continue;
    }
    FailureOr<Value> operand = nodeInput(name, loc, where);
    if (failed(operand))
      return failure();
    if (gap && !registered.hasTrait<OpTrait::AttrSizedOperandSegments>())
      return emitError(loc) << where << ": an absent optional input before "
                            << "input #" << i << " is not supported",
             failure();
    operands.values.push_back(*operand);
    operands.segments.push_back(1);
  }
  return operands;
}

FailureOr<NamedAttrList> Importer::nodeAttributes(
    const onnxpb::NodeProto &node, RegisteredOperationName registered,
    SmallVector<int32_t> segments, Location loc, StringRef where) {
  NamedAttrList attrs;
  llvm::StringSet<> inherent;
  for (StringAttr name : registered.getAttributeNames())
    inherent.insert(name.getValue());
  for (const auto &attr : node.attribute()) {
    if (!inherent.contains(attr.name()))
      return emitError(loc) << where << ": attribute '" << attr.name()
                            << "' is not supported",
             failure();
    auto value = convertAttribute(attr, loc, where);
    if (failed(value))
      return failure();
    attrs.set(attr.name(), *value);
  }
  // The ONNX schema's defaults for this opset, for the attributes the node
  // leaves out.
  const onnxpb::OpSchema *schema =
      onnxpb::OpSchemaRegistry::Schema(node.op_type(), opset, "");
  if (schema) {
    for (const auto &[name, formal] : schema->attributes()) {
      if (attrs.get(name) || !formal.default_value.has_name() ||
          !inherent.contains(name))
        continue;
      auto value = convertAttribute(formal.default_value, loc, where);
      if (failed(value))
        return failure();
      attrs.set(name, *value);
    }
  }
  if (registered.hasTrait<OpTrait::AttrSizedOperandSegments>()) {
    size_t formals = schema ? schema->inputs().size() : segments.size();
    if (segments.size() > formals)
      return emitError(loc) << where << " has " << segments.size()
                            << " inputs, at most " << formals << " allowed",
             failure();
    segments.resize(formals, 0);
    // Opset 18's Pad axes: the op has the input before the importer's opsets.
    if (node.op_type() == "Pad")
      segments.resize(4, 0);
    attrs.set("operandSegmentSizes", builder.getDenseI32ArrayAttr(segments));
  }
  // PyTorch's BatchNorm updates the running variance with the unbiased batch
  // variance; ONNX's reference uses the biased one. Keep the producer's.
  if (node.op_type() == "BatchNormalization" && producer == "pytorch")
    attrs.set("unbiased_running_var", builder.getUnitAttr());
  // Split without sizes divides into as many parts as the node has outputs.
  if (node.op_type() == "Split" && node.input_size() < 2 &&
      !attrs.get("num_outputs"))
    attrs.set("num_outputs", builder.getI64IntegerAttr(node.output_size()));
  return attrs;
}

FailureOr<SmallVector<Type>> Importer::inferResultTypes(
    const onnxpb::NodeProto &node, RegisteredOperationName registered,
    ValueRange operands, DictionaryAttr dict, Location loc, StringRef where) {
  // The interface reads the attributes from the op's properties, where it
  // has them.
  auto *inferType = registered.getInterface<InferTypeOpInterface>();
  SmallVector<uint64_t> storage(
      (registered.getOpPropertyByteSize() + sizeof(uint64_t) - 1) /
          sizeof(uint64_t) +
      1);
  bool hasProperties = registered.getOpPropertyByteSize() > 0;
  OpaqueProperties props(hasProperties ? storage.data() : nullptr);
  if (hasProperties)
    registered.initOpProperties(props, OpaqueProperties(nullptr));
  llvm::scope_exit cleanup([&] {
    if (hasProperties)
      registered.destroyOpProperties(props);
  });
  if (hasProperties && failed(registered.setOpPropertiesFromAttribute(
                           registered, props, dict, [&] {
                             return emitError(loc)
                                    << where << ": invalid attribute: ";
                           })))
    return failure();
  for (Value operand : operands)
    if (!isa<RankedTensorType>(operand.getType()))
      return emitError(loc) << where << ": operands must be tensors", failure();
  SmallVector<Type> resultTypes;
  if (failed(inferType->inferReturnTypes(ctx, loc, operands, dict, props, {},
                                         resultTypes)))
    return failure(); // The op's inference reported the cause at `loc`.
  if (node.output_size() > static_cast<int>(resultTypes.size()))
    return emitError(loc) << where << " has " << node.output_size()
                          << " outputs; onnx." << node.op_type() << " supports "
                          << resultTypes.size(),
           failure();
  return resultTypes;
}

LogicalResult Importer::checkResultTypes(TypeRange resultTypes, Location loc,
                                         StringRef where) {
  for (Type type : resultTypes) {
    auto shaped = cast<ShapedType>(type);
    if (!shaped.hasStaticShape())
      return emitError(loc) << "unresolvable dynamic shape: " << where
                            << " computes " << type,
             failure();
    std::string tooLarge =
        tensorSizeError(shaped.getShape(), shaped.getElementType());
    if (!tooLarge.empty())
      return emitError(loc)
                 << where << " computes " << type << ", which has " << tooLarge,
             failure();
  }
  return success();
}

LogicalResult Importer::importNode(const onnxpb::NodeProto &node, int index) {
  Location loc = nodeLoc(node, index);
  std::string where =
      "node '" + nodeName(node, index) + "' (" + node.op_type() + ")";
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return emitError(loc) << "unsupported op: " << where << " is in domain '"
                          << node.domain() << "'; only the default ONNX domain "
                          << "is supported",
           failure();
  if (node.op_type() == "Constant")
    return importConstantNode(node, loc);
  if (node.op_type() == "Tile")
    return importTileNode(node, loc, where);
  if (node.op_type() == "Einsum")
    return importEinsumNode(node, loc, where);
  if (pp::onnx::isDecomposedOp(node.op_type()))
    return importDecomposedNode(node, loc, where);
  if (pp::onnx::isRecurrentOp(node.op_type()))
    return importRecurrentNode(node, loc, where);

  std::string opName = "onnx." + node.op_type();
  std::optional<RegisteredOperationName> registered =
      RegisteredOperationName::lookup(opName, ctx);
  if (!registered ||
      !registered->hasInterface<InferTypeOpInterface>()) // not an ONNX node
    return emitError(loc) << "unsupported op: " << where << " at opset "
                          << opset << " has no onnx dialect equivalent",
           failure();

  FailureOr<NodeOperands> operands =
      nodeOperands(node, *registered, loc, where);
  if (failed(operands))
    return failure();
  FailureOr<NamedAttrList> attrs =
      nodeAttributes(node, *registered, operands->segments, loc, where);
  if (failed(attrs))
    return failure();
  DictionaryAttr dict = attrs->getDictionary(ctx);
  FailureOr<SmallVector<Type>> resultTypes =
      inferResultTypes(node, *registered, operands->values, dict, loc, where);
  if (failed(resultTypes))
    return failure();

  OperationState state(loc, *registered);
  state.addOperands(operands->values);
  state.addTypes(*resultTypes);
  if (registered->getOpPropertyByteSize() > 0)
    state.propertiesAttr = dict;
  Operation *op = builder.create(state);
  if (failed(verify(op, /*verifyRecursively=*/false)))
    return emitError(loc) << "type mismatch in " << where, failure();
  if (failed(checkResultTypes(*resultTypes, loc, where)))
    return failure();

  SmallVector<Value> results = foldOrKeep(op);
  for (int i = 0; i < node.output_size(); ++i)
    if (!node.output(i).empty())
      values[node.output(i)] = results[i];
  return success();
}

LogicalResult Importer::checkGraphOutputs(const onnxpb::GraphProto &graph) {
  llvm::StringSet<> defined;
  for (const auto &input : graph.input())
    defined.insert(input.name());
  for (const auto &init : graph.initializer())
    defined.insert(init.name());
  for (const auto &node : graph.node())
    for (const std::string &output : node.output())
      defined.insert(output);
  for (const auto &output : graph.output())
    if (!defined.contains(output.name()))
      return fileError() << "missing output: graph output '" << output.name()
                         << "' is not computed by any node",
             failure();
  return success();
}

LogicalResult Importer::readOpsets(const onnxpb::ModelProto &model) {
  // A domain imported twice has no one version to read its nodes at.
  llvm::StringMap<int64_t> imported;
  for (const auto &entry : model.opset_import()) {
    bool isDefault = entry.domain().empty() || entry.domain() == "ai.onnx";
    StringRef domain = isDefault ? StringRef() : StringRef(entry.domain());
    auto [it, inserted] = imported.try_emplace(domain, entry.version());
    if (!inserted)
      return fileError() << "the model imports "
                         << (isDefault ? "the default ONNX domain"
                                       : "domain '" + domain.str() + "'")
                         << " twice (opsets " << it->second << " and "
                         << entry.version() << ")",
             failure();
    if (isDefault)
      opset = entry.version();
  }
  if (opset == 0)
    return fileError() << "the model imports no default-domain opset",
           failure();
  sourceOpset = opset;
  if (opset > kMaxOpset)
    return fileError() << "opset " << opset << " is newer than the supported "
                       << kMinOpset << "-" << kMaxOpset,
           failure();
  return success();
}

/// A copy of `model` whose external initializers are graph inputs instead,
/// for ONNX's checker, which looks for their data files.
static onnxpb::ModelProto
withExternalDataAsInputs(const onnxpb::ModelProto &model) {
  onnxpb::ModelProto checked = model;
  onnxpb::GraphProto *graph = checked.mutable_graph();
  google::protobuf::RepeatedPtrField<onnxpb::TensorProto> kept;
  llvm::StringSet<> inputs;
  for (const onnxpb::ValueInfoProto &input : graph->input())
    inputs.insert(input.name());
  for (onnxpb::TensorProto &t : *graph->mutable_initializer()) {
    if (t.data_location() != onnxpb::TensorProto::EXTERNAL) {
      *kept.Add() = std::move(t);
      continue;
    }
    if (!inputs.insert(t.name()).second)
      continue; // Already an input too (IR version < 4).
    onnxpb::ValueInfoProto *input = graph->add_input();
    input->set_name(t.name());
    auto *tensorType = input->mutable_type()->mutable_tensor_type();
    tensorType->set_elem_type(t.data_type());
    for (int64_t dim : t.dims())
      tensorType->mutable_shape()->add_dim()->set_dim_value(dim);
  }
  graph->mutable_initializer()->Swap(&kept);
  return checked;
}

void Importer::checkModelWithONNX(const onnxpb::ModelProto &model) {
  // The checker resolves external data against the model's directory only
  // when it reads the model from its path.
  bool hasExternalData = llvm::any_of(
      model.graph().initializer(), [](const onnxpb::TensorProto &t) {
        return t.data_location() == onnxpb::TensorProto::EXTERNAL;
      });
  if (hasExternalData && options.shapeOnly) {
    // The data files may be absent, and the checker looks for them: it
    // checks a copy where the external initializers are graph inputs.
    onnxpb::checker::check_model(withExternalDataAsInputs(model));
  } else if (hasExternalData && llvm::sys::fs::exists(fileName)) {
    onnxpb::checker::check_model(fileName);
  } else {
    onnxpb::checker::check_model(model);
  }
}

LogicalResult Importer::checkUpgradeAdapters(const onnxpb::GraphProto &graph) {
  const UpgradeChecker &checker = upgradeChecker();
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnxpb::NodeProto &node = graph.node(i);
    if (!node.domain().empty() && node.domain() != "ai.onnx")
      continue;
    if (std::optional<int64_t> version =
            checker.missingAdapter(node.op_type(), opset, kMinOpset))
      return emitError(nodeLoc(node, i))
                 << "cannot upgrade node '" << nodeName(node, i) << "' ("
                 << node.op_type() << ") from opset " << opset << " to "
                 << kMinOpset << ": ONNX's version converter has no "
                 << "adapter for " << node.op_type() << " from opset "
                 << *version - 1 << " to " << *version
                 << "; re-export the model with opset " << kMinOpset << "-"
                 << kMaxOpset,
             failure();
  }
  return success();
}

LogicalResult Importer::checkWindowAttributes(const onnxpb::GraphProto &graph) {
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnxpb::NodeProto &node = graph.node(i);
    for (const onnxpb::AttributeProto &attr : node.attribute()) {
      if (attr.name() != "strides" && attr.name() != "dilations" &&
          attr.name() != "kernel_shape")
        continue;
      for (int64_t v : attr.ints())
        if (v <= 0)
          return emitError(nodeLoc(node, i))
                     << "node '" << nodeName(node, i) << "' (" << node.op_type()
                     << "): attribute '" << attr.name()
                     << "' must be positive, got " << v,
                 failure();
    }
  }
  return success();
}

LogicalResult Importer::convertToMinOpset(onnxpb::ModelProto &model) {
  // Older models are upgraded with ONNX's own version converter, which
  // needs inferred shapes for some adapters.
  try {
    onnxpb::shape_inference::InferShapes(model);
    if (failed(checkInferredShapes(model.graph(), opset)))
      return failure();
    model = upgradeChecker().convert_version(model, onnxpb::OpSetID(opset),
                                             onnxpb::OpSetID(kMinOpset));
  } catch (const std::exception &e) {
    InFlightDiagnostic diag =
        fileError() << "cannot upgrade the model from opset " << opset << " to "
                    << kMinOpset
                    << " (ONNX's version converter failed); re-export "
                       "it with opset "
                    << kMinOpset << "-" << kMaxOpset;
    // Not libonnx's "file:line: function: Assertion `...` failed:".
    StringRef reason = e.what();
    size_t failed = reason.find("failed: ");
    if (failed != StringRef::npos)
      reason = reason.drop_front(failed + strlen("failed: "));
    diag.attachNote() << "the converter reported: " << reason.trim();
    return failure();
  }
  opset = kMinOpset;
  return success();
}

LogicalResult Importer::upgradeModel(onnxpb::ModelProto &model) {
  const onnxpb::GraphProto &graph = model.graph();
  // ONNX's shape inference and version converter read raw_data as
  // its dims say, past the end of a shorter one.
  if (failed(checkRawDataSizes(graph)) || failed(checkUpgradeAdapters(graph)))
    return failure();
  // ONNX's shape inference divides by conv/pool strides and dilations
  // (a zero is SIGFPE, not an exception): check them first.
  if (failed(checkWindowAttributes(graph)))
    return failure();
  // ONNX's shape inference gives Expand (...) an output of as many dims
  // as its unknown shape operand declares elements, and walks a
  // SAME-padded conv's or pool's input dims one stride at a time: 2^63
  // of them is a hang, not an error.
  if (failed(checkShapeOperandLengths(graph)) ||
      failed(checkOperandRanks(graph, knownRanks(graph))) ||
      failed(checkUpgradedDims(graph, opset)))
    return failure();
  return convertToMinOpset(model);
}

LogicalResult Importer::checkAndUpgradeModel(onnxpb::ModelProto &model) {
  try {
    checkModelWithONNX(model);
    if (opset < kMinOpset && failed(upgradeModel(model)))
      return failure();
  } catch (const std::exception &e) {
    InFlightDiagnostic diag = fileError() << "invalid ONNX model: " << e.what();
    if (StringRef(e.what()).contains("doesn't exist or is not accessible"))
      diag.attachNote() << "--shape-only imports the model without its "
                           "external data, to plan it";
    return failure();
  }
  return success();
}

LogicalResult Importer::checkStaticBatch(ArrayRef<Type> argTypes,
                                         ArrayRef<std::string> argNames) {
  for (auto [type, name] : llvm::zip(argTypes, argNames)) {
    auto shaped = cast<RankedTensorType>(type);
    if (shaped.getRank() > 0 && shaped.getDimSize(0) != *options.batchSize)
      return fileError() << "--batch-size=" << *options.batchSize
                         << " does not apply: the model's batch is static "
                         << "(graph input '" << name << "' is " << shaped
                         << "); drop --batch-size or re-export the model "
                         << "with a symbolic batch dim",
             failure();
  }
  return success();
}

FailureOr<func::FuncOp>
Importer::createMainFunction(const onnxpb::GraphProto &graph, Location loc) {
  for (const auto &init : graph.initializer())
    initializerNames.insert(init.name());
  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  for (const auto &input : graph.input()) {
    if (initializerNames.contains(input.name()))
      continue;
    auto type = importValueType(input, "graph input");
    if (failed(type))
      return failure();
    argTypes.push_back(*type);
    argNames.push_back(input.name());
  }
  // A static batch that differs from --batch-size would silently win.
  if (options.batchSize && !usedBatchSize &&
      failed(checkStaticBatch(argTypes, argNames)))
    return failure();

  builder.setInsertionPointToEnd(module.getBody());
  auto func = func::FuncOp::create(builder, loc, "main",
                                   builder.getFunctionType(argTypes, {}));
  Block *entry = func.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(argNames)) {
    values[name] = entry->getArgument(i);
    func.setArgAttr(i, "onnx.name", builder.getStringAttr(name));
  }
  builder.setInsertionPointToStart(entry);
  return func;
}

LogicalResult Importer::returnGraphOutputs(const onnxpb::GraphProto &graph,
                                           func::FuncOp func, Location loc) {
  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  for (const auto &output : graph.output()) {
    // checkGraphOutputs saw that something defines it.
    auto it = values.find(output.name());
    assert(it != values.end() && "graph output not imported");
    auto declared = output.type().tensor_type();
    Type element =
        pp::onnx::getElementTypeForONNXDataType(ctx, declared.elem_type());
    auto actual = cast<RankedTensorType>(it->second.getType());
    if (element && element != actual.getElementType())
      return fileError() << "type mismatch: graph output '" << output.name()
                         << "' is declared with element type " << element
                         << " but computes " << actual,
             failure();
    results.push_back(it->second);
    resultTypes.push_back(actual);
  }
  func::ReturnOp::create(builder, loc, results);
  func.setFunctionType(
      builder.getFunctionType(func.getArgumentTypes(), resultTypes));
  for (auto [i, output] : llvm::enumerate(graph.output()))
    func.setResultAttr(i, "onnx.name", builder.getStringAttr(output.name()));
  return success();
}

OwningOpRef<ModuleOp> Importer::run(onnxpb::ModelProto &model) {
  if (failed(readOpsets(model)))
    return nullptr;
  if (options.batchSize && *options.batchSize <= 0)
    return fileError() << "--batch-size=" << *options.batchSize
                       << " must be positive",
           nullptr;
  // Before ONNX's checker and version converter: the converter crashes on a
  // graph output that nothing computes.
  if (failed(checkGraphOutputs(model.graph())) ||
      failed(checkAndUpgradeModel(model)))
    return nullptr;

  producer = model.producer_name();
  if (failed(readTrainableMetadata(model)))
    return nullptr;
  const onnxpb::GraphProto &graph = model.graph();
  Location moduleLoc = FileLineColLoc::get(ctx, fileName, 0, 0);
  OwningOpRef<ModuleOp> owned = ModuleOp::create(moduleLoc);
  module = *owned;
  module->setAttr("onnx.opset", builder.getI64IntegerAttr(opset));
  if (!graph.name().empty())
    module->setAttr("onnx.graph_name", builder.getStringAttr(graph.name()));

  FailureOr<func::FuncOp> func = createMainFunction(graph, moduleLoc);
  if (failed(func) || failed(importInitializers(graph)))
    return nullptr;
  // Zero-size tensors are refused where a node first meets one: the
  // training passes divide by dims and infer empty types they cannot build.
  for (int i = 0; i < graph.node_size(); ++i)
    if (failed(importNode(graph.node(i), i)) ||
        failed(checkZeroSize(graph.node(i), i)))
      return nullptr;
  // Dropout streams in node order: the same model at another batch size
  // (or split another way later) numbers its Dropouts alike. (ONNX's checker
  // has already rejected a node that sets `stream` itself.)
  pp::onnx::assignDropoutStreams(*func);
  if (failed(returnGraphOutputs(graph, *func, moduleLoc)))
    return nullptr;

  // Drop what folding left dead (the remains of shape sub-graphs) and fuse
  // the chains exporters write for ops the dialect has (Fusion.h).
  RewritePatternSet fusions(ctx);
  pp::onnx::populateImportFusionPatterns(fusions);
  if (failed(applyPatternsGreedily(*func, std::move(fusions))))
    return fileError() << "constant folding did not converge", nullptr;
  if (failed(verify(module)))
    return nullptr;
  return owned;
}

void pp::registerONNXImportDialects(DialectRegistry &registry) {
  registry.insert<pp::onnx::ONNXDialect, func::FuncDialect>();
}

void pp::printImportDiagnostic(Diagnostic &diag, llvm::raw_ostream &os) {
  // Node locations are NameLoc(node, NameLoc(op type, file:index)).
  Location loc = diag.getLocation();
  std::string file, node, opType;
  if (auto name = dyn_cast<NameLoc>(loc)) {
    node = name.getName().str();
    loc = name.getChildLoc();
    if (auto type = dyn_cast<NameLoc>(loc)) {
      opType = type.getName().str();
      loc = type.getChildLoc();
    }
  }
  if (auto fileLoc = dyn_cast<FileLineColLoc>(loc))
    file = fileLoc.getFilename().str();
  os << (file.empty() ? "<unknown>" : file) << ": ";
  if (!node.empty())
    os << (opType.empty() ? "initializer" : "node") << " '" << node << "'"
       << (opType.empty() ? "" : " (" + opType + ")") << ": ";
  switch (diag.getSeverity()) {
  case DiagnosticSeverity::Error:
    os << "error: ";
    break;
  case DiagnosticSeverity::Warning:
    os << "warning: ";
    break;
  case DiagnosticSeverity::Note:
    os << "note: ";
    break;
  case DiagnosticSeverity::Remark:
    os << "remark: ";
    break;
  }
  os << diag << "\n";
  for (Diagnostic &note : diag.getNotes())
    printImportDiagnostic(note, os);
}

OwningOpRef<ModuleOp> pp::importONNXModel(StringRef bytes, StringRef fileName,
                                          MLIRContext *context,
                                          const ONNXImportOptions &options) {
  context->loadDialect<pp::onnx::ONNXDialect, func::FuncDialect>();
  Location fileLoc = FileLineColLoc::get(context, fileName, 0, 0);
  onnxpb::ModelProto model;
  if (bytes.size() > size_t(INT32_MAX) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return emitError(fileLoc) << "not a valid ONNX model: protobuf parsing "
                                 "failed (truncated or not an .onnx file)",
           nullptr;
  if (!model.has_graph() || model.graph().output_size() == 0)
    return emitError(fileLoc) << "not a valid ONNX model: no graph with "
                                 "outputs (truncated or not an .onnx file)",
           nullptr;
  Importer importer(context, fileName, options);
  return importer.run(model);
}

OwningOpRef<ModuleOp> pp::importONNXFile(StringRef fileName,
                                         MLIRContext *context,
                                         const ONNXImportOptions &options) {
  auto buffer = pp::limits::readRegularFile(
      fileName, pp::limits::kMaxModelFileBytes, "model");
  if (!buffer) {
    emitError(FileLineColLoc::get(context, fileName, 0, 0))
        << llvm::toString(buffer.takeError());
    return nullptr;
  }
  return importONNXModel((*buffer)->getBuffer(), fileName, context, options);
}
