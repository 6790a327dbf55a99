//===- OptionChecks.h - Validation of numeric tool options ------*- C++ -*-===//
//
// One check for "finite and in range" options (learning rate, momentum,
// betas, budgets ...), so every option states its range the same way and
// NaN or infinity is never accepted silently.
//
//===----------------------------------------------------------------------===//

#ifndef PP_SUPPORT_OPTIONCHECKS_H
#define PP_SUPPORT_OPTIONCHECKS_H

#include "llvm/ADT/StringRef.h"

#include <limits>
#include <optional>
#include <string>

namespace pp {

/// The range an option's value must lie in.
struct OptionRange {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool minInclusive = true;
  bool maxInclusive = true;

  static OptionRange positive() { return {0, kInf, false, true}; }
  static OptionRange nonNegative() { return {0, kInf, true, true}; }
  /// [0, 1).
  static OptionRange unitOpen() { return {0, 1, true, false}; }
  /// [0, 1].
  static OptionRange unit() { return {0, 1, true, true}; }

private:
  static constexpr double kInf = std::numeric_limits<double>::infinity();
};

/// Why `name=value` is invalid ("lr=nan: must be a finite number > 0"), or
/// std::nullopt when it is finite and in `range`.
std::optional<std::string> checkOptionValue(llvm::StringRef name, double value,
                                            const OptionRange &range);

} // namespace pp

#endif // PP_SUPPORT_OPTIONCHECKS_H
