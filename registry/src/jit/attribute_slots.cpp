#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "codegen_internal.h"
#include "gpuos/registry/codegen.h"

namespace gpuos::registry {
namespace {

Expected<std::uint64_t> EncodeValue(const AttributeParam& attribute, const std::string& text) {
  const std::string what = "attribute '" + attribute.name + "' (" +
                           AttributeTypeName(attribute.type) + "): '" + text + "'";
  std::string_view digits = text;
  if (!digits.empty() && digits[0] == '+') digits.remove_prefix(1);
  switch (attribute.type) {
    case AttributeType::kBool: {
      if (text != "true" && text != "false") {
        return InvalidArgument(what + " is not a bool; write true or false");
      }
      const long long value = text == "true" ? 1 : 0;
      std::uint64_t bits;
      std::memcpy(&bits, &value, sizeof(bits));
      return bits;
    }
    case AttributeType::kI32:
    case AttributeType::kI64: {
      long long value = 0;
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
      if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty()) {
        return InvalidArgument(what + " is not an integer in range");
      }
      if (attribute.type == AttributeType::kI32 &&
          (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max())) {
        return InvalidArgument(what + " is out of range for i32");
      }
      std::uint64_t bits;
      std::memcpy(&bits, &value, sizeof(bits));
      return bits;
    }
    case AttributeType::kF32:
    case AttributeType::kF64: {
      double value = 0;
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
      if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() ||
          !std::isfinite(value)) {
        return InvalidArgument(what + " is not a finite number");
      }
      std::uint64_t bits;
      std::memcpy(&bits, &value, sizeof(bits));
      return bits;
    }
  }
  return Internal(what + ": unknown attribute type");
}

}  // namespace

Expected<std::vector<std::uint64_t>> EncodeAttributeSlots(
    const OperatorSpec& spec, const std::vector<std::pair<std::string, std::string>>& values) {
  const std::string what = jit::DescribeOperator(spec);
  for (const auto& [name, value] : values) {
    bool known = false;
    for (const AttributeParam& attribute : spec.attributes) known = known || attribute.name == name;
    if (!known) {
      std::string declared;
      for (const AttributeParam& attribute : spec.attributes) {
        declared += (declared.empty() ? "" : ", ") + attribute.name;
      }
      return InvalidArgument(what + ": unknown attribute '" + name +
                             "' (declared: " + (declared.empty() ? "none" : declared) + ")");
    }
  }
  std::vector<std::uint64_t> slots;
  for (const AttributeParam& attribute : spec.attributes) {
    const std::string* text = nullptr;
    for (const auto& [name, value] : values) {
      if (name == attribute.name) text = &value;
    }
    if (text == nullptr && attribute.default_value) text = &*attribute.default_value;
    if (text == nullptr) {
      return InvalidArgument(what + ": attribute '" + attribute.name +
                             "' has no default and was not given a value");
    }
    auto bits = EncodeValue(attribute, *text);
    if (!bits.ok()) return bits.status().WithContext(what);
    slots.push_back(*bits);
  }
  return slots;
}

}  // namespace gpuos::registry
