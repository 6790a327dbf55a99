//===- EnumOptions.h - Options that take one of a few names -----*- C++ -*-===//
//
// The enums behind the pass options whose value is one of a few names
// (optimizer=adam, precision=fp16, schedule=1f1b), and the llvm::cl parser
// that reads them by those names: an unknown name is an error that lists
// the valid ones, which llvm::cl::values' error does not. An option of type
// std::optional<E> also takes a name for std::nullopt: "" (the default: the
// plan's schedule), or what an UnsetName modifier says ("auto").
//
//===----------------------------------------------------------------------===//
#ifndef PP_SUPPORT_ENUMOPTIONS_H
#define PP_SUPPORT_ENUMOPTIONS_H

#include "pp/Runtime/ScheduleKinds.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

#include <array>
#include <iterator>
#include <optional>
#include <string>
#include <type_traits>

namespace pp {

/// --pp-add-loss kind, --pp-compile loss.
enum class LossKind { SoftmaxCrossEntropy, MSE };
/// --pp-optimizer kind, --pp-compile optimizer.
enum class OptimizerKind { SGD, Adam, AdamW };
/// --pp-partition optimizer: the optimizer state a weight keeps.
enum class OptimizerState { SGD, Momentum, Adam };
/// --pp-optimizer loss-scale (--pp-compile's adds auto: std::nullopt).
enum class LossScale { None, Static, Dynamic };
/// --pp-optimizer lr-schedule: pp/Runtime/LRScheduleKinds.def's kinds.
enum class LRSchedule {
#define PP_LR_SCHEDULE(Enumerator, Name) Enumerator,
#include "pp/Runtime/LRScheduleKinds.def"
};
/// --pp-mixed-precision precision.
enum class Precision { BF16, FP16, FP32 };
/// --pp-partition recompute, --pp-recompute policy.
enum class RecomputePolicy { None, Full, Selective, Auto };

/// The name of each value of an option enum, indexed by the value.
template <typename E> struct EnumNames;
template <> struct EnumNames<LossKind> {
  static constexpr const char *names[] = {"softmax-cross-entropy", "mse"};
};
template <> struct EnumNames<OptimizerKind> {
  static constexpr const char *names[] = {"sgd", "adam", "adamw"};
};
template <> struct EnumNames<OptimizerState> {
  static constexpr const char *names[] = {"sgd", "momentum", "adam"};
};
template <> struct EnumNames<LossScale> {
  static constexpr const char *names[] = {"none", "static", "dynamic"};
};
template <> struct EnumNames<LRSchedule> {
  static constexpr const char *names[] = {
#define PP_LR_SCHEDULE(Enumerator, Name) Name,
#include "pp/Runtime/LRScheduleKinds.def"
  };
};
template <> struct EnumNames<Precision> {
  static constexpr const char *names[] = {"bf16", "fp16", "fp32"};
};
template <> struct EnumNames<RecomputePolicy> {
  static constexpr const char *names[] = {"none", "full", "selective", "auto"};
};
/// The schedules' names are pp/Runtime/ScheduleKinds.def's.
template <> struct EnumNames<kinds::ScheduleKind> {
  static constexpr auto names = [] {
    std::array<const char *, std::size(kinds::kScheduleKinds)> names{};
    for (size_t i = 0; i < names.size(); ++i)
      names[i] = kinds::kScheduleKinds[i].name;
    return names;
  }();
};

/// The name of `value`, as the option spells it ("adamw", "fp16").
template <typename E> llvm::StringRef stringifyEnum(E value) {
  return EnumNames<E>::names[static_cast<size_t>(value)];
}

/// Names std::nullopt in an option of type std::optional<E>.
struct UnsetName {
  llvm::StringRef name;
  template <typename Opt> void apply(Opt &option) const {
    option.getParser().unsetName = name;
  }
};

namespace detail {
template <typename T> struct EnumOf { using type = T; };
template <typename E> struct EnumOf<std::optional<E>> { using type = E; };

/// Parses an option of type T, an option enum or std::optional of one, by
/// name. A generic_parser_base, so that MLIR prints the value by its name.
template <typename T>
class EnumOptionParser : public llvm::cl::generic_parser_base {
public:
  using parser_data_type = T;
  using Enum = typename EnumOf<T>::type;

  struct Value final : llvm::cl::GenericOptionValue {
    explicit Value(T value) : value(value) {}
    bool compare(const T &other) const { return value == other; }
    bool compare(const llvm::cl::GenericOptionValue &other) const override {
      if constexpr (std::is_enum_v<T>) {
        const auto &copy = static_cast<const llvm::cl::OptionValue<T> &>(other);
        return copy.hasValue() && copy.getValue() == value;
      }
      return false;
    }
    T value;
  };
  struct OptionInfo : GenericOptionInfo {
    OptionInfo(llvm::StringRef name, T value)
        : GenericOptionInfo(name, ""), V(value) {}
    Value V;
  };

  explicit EnumOptionParser(llvm::cl::Option &owner)
      : generic_parser_base(owner) {}

  /// Lists the names once the option's modifiers have applied.
  void initialize() {
    if constexpr (!std::is_enum_v<T>)
      Values.emplace_back(unsetName, std::nullopt);
    for (auto [i, name] : llvm::enumerate(EnumNames<Enum>::names))
      Values.emplace_back(name, static_cast<Enum>(i));
  }

  unsigned getNumOptions() const override { return Values.size(); }
  llvm::StringRef getOption(unsigned n) const override {
    return Values[n].Name;
  }
  llvm::StringRef getDescription(unsigned n) const override {
    return Values[n].HelpStr;
  }
  const llvm::cl::GenericOptionValue &
  getOptionValue(unsigned n) const override {
    return Values[n].V;
  }

  /// Returns true (llvm::cl's failure) on a name not listed.
  bool parse(llvm::cl::Option &option, llvm::StringRef, llvm::StringRef arg,
             T &value) {
    for (const OptionInfo &info : Values)
      if (info.Name == arg) {
        value = info.V.value;
        return false;
      }
    return option.error("unknown value '" + arg + "': expected " + listNames());
  }

  /// "'a', 'b' or 'c'"; an empty name (an optional option's default when no
  /// UnsetName is given) is listed last, in words, as '' reads as a typo.
  std::string listNames() const {
    llvm::SmallVector<std::string> names;
    bool takesEmpty = false;
    for (const OptionInfo &info : Values) {
      if (info.Name.empty())
        takesEmpty = true;
      else
        names.push_back("'" + info.Name.str() + "'");
    }
    if (takesEmpty)
      names.push_back("nothing (the default)");
    std::string list;
    for (auto [i, name] : llvm::enumerate(names)) {
      if (i > 0)
        list += i + 1 == names.size() ? " or " : ", ";
      list += name;
    }
    return list;
  }

  /// The name of std::nullopt (UnsetName).
  llvm::StringRef unsetName = "";
  /// Public, as llvm::cl::parser's: mlir::detail::PassOptions reads it.
  llvm::SmallVector<OptionInfo, 8> Values;
};
} // namespace detail
} // namespace pp

/// Makes llvm::cl (and so MLIR pass options) parse T by name.
#define PP_ENUM_OPTION_PARSER(T)                                               \
  template <>                                                                  \
  class llvm::cl::parser<T> : public ::pp::detail::EnumOptionParser<T> {       \
  public:                                                                      \
    explicit parser(llvm::cl::Option &owner) : EnumOptionParser(owner) {}      \
  };

PP_ENUM_OPTION_PARSER(::pp::LossKind)
PP_ENUM_OPTION_PARSER(::pp::OptimizerKind)
PP_ENUM_OPTION_PARSER(::pp::OptimizerState)
PP_ENUM_OPTION_PARSER(::pp::LossScale)
PP_ENUM_OPTION_PARSER(std::optional<::pp::LossScale>)
PP_ENUM_OPTION_PARSER(::pp::LRSchedule)
PP_ENUM_OPTION_PARSER(::pp::Precision)
PP_ENUM_OPTION_PARSER(::pp::RecomputePolicy)
PP_ENUM_OPTION_PARSER(::pp::kinds::ScheduleKind)
PP_ENUM_OPTION_PARSER(std::optional<::pp::kinds::ScheduleKind>)

#undef PP_ENUM_OPTION_PARSER

#endif // PP_SUPPORT_ENUMOPTIONS_H
