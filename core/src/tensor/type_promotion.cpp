#include "gpuos/type_promotion.h"

#include <optional>
#include <string>

namespace gpuos {
namespace {

bool IsHalfWidthFloat(DType d) { return d == DType::kF16 || d == DType::kBF16; }

std::optional<DType> PromoteSkipUnset(std::optional<DType> a, DType b) {
  return a ? PromoteTypes(*a, b) : b;
}

// PyTorch's combine_categories: the higher-priority result wins unless the
// lower-priority one is of a higher category.
std::optional<DType> CombineCategories(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (IsFloatingPoint(*higher)) return higher;
  if (*higher == DType::kBool || IsFloatingPoint(*lower)) return PromoteTypes(*higher, *lower);
  return higher;
}

}  // namespace

DTypeCategory CategoryOf(DType dtype) {
  if (dtype == DType::kBool) return DTypeCategory::kBool;
  return IsFloatingPoint(dtype) ? DTypeCategory::kFloating : DTypeCategory::kInteger;
}

DType PromoteTypes(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::kBool) return b;
  if (b == DType::kBool) return a;
  const bool a_float = IsFloatingPoint(a);
  const bool b_float = IsFloatingPoint(b);
  if (a_float != b_float) return a_float ? a : b;
  if (a_float) {
    if (IsHalfWidthFloat(a) && IsHalfWidthFloat(b)) return DType::kF32;
    return DTypeSize(a) >= DTypeSize(b) ? a : b;
  }
  // Both integers, different. u8 is the only unsigned one.
  if (a == DType::kU8 || b == DType::kU8) {
    const DType other = a == DType::kU8 ? b : a;
    return other == DType::kI8 ? DType::kI32 : other;
  }
  return DTypeSize(a) >= DTypeSize(b) ? a : b;
}

PromotionOperand PromotionOperand::Tensor(DType dtype, int rank) {
  return {dtype, rank > 0 ? Priority::kDimensioned : Priority::kZeroDim};
}

PromotionOperand PromotionOperand::Scalar(ScalarKind kind) {
  switch (kind) {
    case ScalarKind::kBool:
      return {DType::kBool, Priority::kScalar};
    case ScalarKind::kInt:
      return {DType::kI64, Priority::kScalar};
    case ScalarKind::kFloat:
      break;
  }
  return {DType::kF64, Priority::kScalar};
}

Expected<DType> ResultType(std::span<const PromotionOperand> operands, DType default_float) {
  if (operands.empty()) return InvalidArgument("result type of an operation with no operands");
  if (!IsFloatingPoint(default_float)) {
    return InvalidArgument(std::string("default float dtype must be floating, got ") +
                           DTypeName(default_float));
  }
  std::optional<DType> by_priority[3];
  for (const PromotionOperand& operand : operands) {
    DType dtype = operand.dtype;
    // A Python float is a double, but PyTorch lets it stand for the default dtype.
    if (operand.priority == PromotionOperand::Priority::kScalar && IsFloatingPoint(dtype)) {
      dtype = default_float;
    }
    auto& slot = by_priority[static_cast<int>(operand.priority)];
    slot = PromoteSkipUnset(slot, dtype);
  }
  return *CombineCategories(by_priority[0], CombineCategories(by_priority[1], by_priority[2]));
}

DType ResultType(DType tensor_a, int rank_a, DType tensor_b, int rank_b) {
  const PromotionOperand operands[] = {PromotionOperand::Tensor(tensor_a, rank_a),
                                       PromotionOperand::Tensor(tensor_b, rank_b)};
  return *ResultType(operands);
}

DType ResultType(DType tensor, int rank, ScalarKind scalar) {
  const PromotionOperand operands[] = {PromotionOperand::Tensor(tensor, rank),
                                       PromotionOperand::Scalar(scalar)};
  return *ResultType(operands);
}

bool CanCast(DType from, DType to) {
  return static_cast<int>(CategoryOf(from)) <= static_cast<int>(CategoryOf(to));
}

DType PromoteIntegralToFloat(DType dtype, DType default_float) {
  return IsFloatingPoint(dtype) ? dtype : default_float;
}

}  // namespace gpuos
