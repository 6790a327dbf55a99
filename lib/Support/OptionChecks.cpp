//===- OptionChecks.cpp - Validation of numeric tool options ----*- C++ -*-===//

#include "pp/Support/OptionChecks.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

std::optional<std::string> pp::checkOptionValue(llvm::StringRef name,
                                                double value,
                                                const OptionRange &range) {
  bool aboveMin = range.minInclusive ? value >= range.min : value > range.min;
  bool belowMax = range.maxInclusive ? value <= range.max : value < range.max;
  if (std::isfinite(value) && aboveMin && belowMax)
    return std::nullopt;
  auto number = [](double v) {
    return llvm::formatv("{0}", llvm::format("%g", v)).str();
  };
  std::string bounds;
  if (std::isfinite(range.min))
    bounds += " " + std::string(range.minInclusive ? ">=" : ">") + " " +
              number(range.min);
  if (std::isfinite(range.max))
    bounds += std::string(bounds.empty() ? " " : " and ") +
              (range.maxInclusive ? "<=" : "<") + " " + number(range.max);
  return (name + "=" + number(value) + ": must be a finite number" + bounds)
      .str();
}
