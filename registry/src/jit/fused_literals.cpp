// Literal operands and attribute values of fused operators: checked, then
// spelled as C++ that has exactly their value.
#include "fused_literals.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "codegen_internal.h"

namespace gpuos::registry::jit {
namespace {

std::string_view WithoutPlus(std::string_view text) {
  if (text.size() > 1 && text[0] == '+' && text[1] != '-' && text[1] != '+') text.remove_prefix(1);
  return text;
}

// A finite double; `max_magnitude` bounds it (f32 attributes).
Expected<Number> FloatNumber(std::string_view text, double max_magnitude) {
  const std::string_view digits = WithoutPlus(text);
  double value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
      !std::isfinite(value) || std::fabs(value) > max_magnitude) {
    return InvalidArgument("'" + std::string(text) + "' is not a finite number in range");
  }
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  Number number;
  number.text.assign(buffer, result.ptr);
  number.cpp = number.text;
  // A double literal needs a decimal point or an exponent ("1" is an int).
  if (number.cpp.find_first_of(".e") == std::string::npos) number.cpp += ".0";
  return number;
}

Expected<Number> IntegerNumber(std::string_view text, long long low, long long high) {
  const std::string_view digits = WithoutPlus(text);
  long long value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || value < low ||
      value > high) {
    return InvalidArgument("'" + std::string(text) + "' is not a decimal integer in [" +
                           std::to_string(low) + ", " + std::to_string(high) + "]");
  }
  Number number{std::to_string(value), std::to_string(value) + "LL"};
  // -9223372036854775808LL would be the negation of an out-of-range literal.
  if (value == std::numeric_limits<long long>::min()) {
    number.cpp = "(-9223372036854775807LL - 1)";
  }
  return number;
}

// A literal operand of a T step, before conversion.
Expected<Number> OperandNumber(std::string_view text, DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kF64:
      return FloatNumber(text, std::numeric_limits<double>::max());
    case DType::kI8:
      return IntegerNumber(text, -128, 127);
    case DType::kU8:
      return IntegerNumber(text, 0, 255);
    case DType::kI32:
      return IntegerNumber(text, std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
    case DType::kI64:
      return IntegerNumber(text, std::numeric_limits<long long>::min(),
                           std::numeric_limits<long long>::max());
    case DType::kBool:
      if (text != "0" && text != "1") {
        return InvalidArgument("'" + std::string(text) + "' is not 0 or 1");
      }
      return Number{std::string(text), text == "1" ? "true" : "false"};
  }
  return Internal("unknown dtype");
}

}  // namespace

Expected<Number> OperandLiteral(std::string_view text, DType dtype) {
  GPUOS_ASSIGN_OR_RETURN(Number number, OperandNumber(text, dtype));
  number.cpp =
      "::gpuos::device::convert<compute_t>(::gpuos::device::convert<T>(" + number.cpp + "))";
  return number;
}

Expected<Number> AttributeNumber(const AttributeParam& attribute, std::string_view text) {
  switch (attribute.type) {
    case AttributeType::kF32:
      return FloatNumber(text, std::numeric_limits<float>::max());
    case AttributeType::kF64:
      return FloatNumber(text, std::numeric_limits<double>::max());
    case AttributeType::kI32:
      return IntegerNumber(text, std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
    case AttributeType::kI64:
      return IntegerNumber(text, std::numeric_limits<long long>::min(),
                           std::numeric_limits<long long>::max());
    case AttributeType::kBool:
      if (text != "true" && text != "false") {
        return InvalidArgument("'" + std::string(text) + "' is not a bool; write true or false");
      }
      return Number{std::string(text), std::string(text)};
  }
  return Internal("unknown attribute type");
}

Expected<Number> AttributeLiteral(const AttributeParam& attribute, std::string_view text) {
  GPUOS_ASSIGN_OR_RETURN(Number number, AttributeNumber(attribute, text));
  if (attribute.type != AttributeType::kBool) {
    number.cpp = "static_cast<" + jit::AttributeCppType(attribute.type) + ">(" + number.cpp + ")";
  }
  return number;
}

}  // namespace gpuos::registry::jit
