#include "operator_rules.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>

namespace gpuos::registry::rules {
namespace {

bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool MatchesName(std::string_view name, bool (*first_ok)(char), bool (*rest_ok)(char)) {
  if (name.empty() || name.size() > kMaxNameLength || !first_ok(name[0])) return false;
  for (char c : name.substr(1)) {
    if (!rest_ok(c)) return false;
  }
  return true;
}

bool IsTestNameChar(char c) {
  return IsLower(c) || IsDigit(c) || (c >= 'A' && c <= 'Z') || c == '_' || c == '.' || c == '-';
}

std::string Indexed(const std::string& list, std::size_t i) {
  return list + "[" + std::to_string(i) + "]";
}

Expected<std::string> CanonicalInteger(AttributeType type, std::string_view text) {
  std::string_view digits = text;
  if (!digits.empty() && digits[0] == '+') digits.remove_prefix(1);
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  bool whole = ec == std::errc() && end == digits.data() + digits.size() && !digits.empty() &&
               digits[0] != '+';
  if (!whole) {
    if (ec == std::errc::result_out_of_range) {
      return InvalidArgument("'" + std::string(text) + "' is out of range for " +
                             AttributeTypeName(type));
    }
    return InvalidArgument("'" + std::string(text) + "' is not a decimal integer (type " +
                           AttributeTypeName(type) + " takes no fraction or exponent)");
  }
  if (type == AttributeType::kI32 && (value < std::numeric_limits<std::int32_t>::min() ||
                                      value > std::numeric_limits<std::int32_t>::max())) {
    return InvalidArgument("'" + std::string(text) + "' is out of range for i32");
  }
  return std::to_string(value);
}

Expected<std::string> CanonicalFloat(AttributeType type, std::string_view text) {
  std::string_view number = text;
  if (!number.empty() && number[0] == '+') number.remove_prefix(1);
  double value = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  bool whole = ec == std::errc() && end == number.data() + number.size() && !number.empty() &&
               number[0] != '+';
  if (!whole || !std::isfinite(value)) {
    return InvalidArgument("'" + std::string(text) + "' is not a finite number (type " +
                           AttributeTypeName(type) + ")");
  }
  if (type == AttributeType::kF32 && std::fabs(value) > std::numeric_limits<float>::max()) {
    return InvalidArgument("'" + std::string(text) + "' is out of range for f32");
  }
  if (value == 0) value = 0;  // canonical text of -0 is "0"
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

std::optional<Problem> CheckParams(const OperatorSpec& spec) {
  if (spec.inputs.empty() && spec.kind != OperatorKind::kCustom) {
    return Problem{"inputs", std::string("an ") + OperatorKindName(spec.kind) +
                                 " operator needs at least one input"};
  }
  if (spec.outputs.empty()) return Problem{"outputs", "at least one output is required"};
  std::set<std::string> seen;
  auto check_name = [&](const std::string& field,
                        const std::string& name) -> std::optional<Problem> {
    if (!IsParamName(name)) {
      return Problem{field + ".name", "'" + name +
                                          "' is not a valid parameter name; use [a-z_][a-z0-9_]*, "
                                          "at most 64 characters"};
    }
    if (!seen.insert(name).second) {
      return Problem{field + ".name", "duplicate parameter name '" + name +
                                          "'; names must be unique among inputs, outputs and "
                                          "attributes"};
    }
    return std::nullopt;
  };
  for (std::size_t i = 0; i < spec.inputs.size(); ++i) {
    if (auto p = check_name(Indexed("inputs", i), spec.inputs[i].name)) return p;
  }
  for (std::size_t i = 0; i < spec.outputs.size(); ++i) {
    if (auto p = check_name(Indexed("outputs", i), spec.outputs[i].name)) return p;
  }
  for (std::size_t i = 0; i < spec.attributes.size(); ++i) {
    const AttributeParam& attribute = spec.attributes[i];
    if (auto p = check_name(Indexed("attributes", i), attribute.name)) return p;
    if (attribute.default_value) {
      auto value = CanonicalAttributeValue(attribute.type, *attribute.default_value);
      if (!value.ok())
        return Problem{Indexed("attributes", i) + ".default", value.status().message()};
    }
  }
  return std::nullopt;
}

// A parameter may follow U only when the operator declares out_dtypes, and
// an operator that declares them must use U somewhere (else every pair would
// compile to the same code).
std::optional<Problem> CheckTypeVariables(const OperatorSpec& spec) {
  bool uses_u = false;
  auto check = [&](const std::string& list,
                   const std::vector<TensorParam>& params) -> std::optional<Problem> {
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (params[i].dtype || params[i].type_variable != TypeVariable::kU) continue;
      uses_u = true;
      if (spec.out_dtypes.empty()) {
        return Problem{Indexed(list, i) + ".dtype",
                       "dtype U needs the operator's `out_dtypes:` (the instantiations of U); "
                       "add it or use T or a fixed dtype"};
      }
    }
    return std::nullopt;
  };
  if (auto p = check("inputs", spec.inputs)) return p;
  if (auto p = check("outputs", spec.outputs)) return p;
  if (!spec.out_dtypes.empty() && !uses_u) {
    return Problem{"out_dtypes",
                   "no input or output has dtype U; give the tensor that follows the second "
                   "type variable `dtype: U`, or remove out_dtypes"};
  }
  return std::nullopt;
}

// Text ends up in JSON and in NVRTC sources: it must be UTF-8 without NULs.
std::optional<Problem> CheckText(const OperatorSpec& spec) {
  std::vector<std::pair<std::string, const std::string*>> texts = {
      {"description", &spec.description},
      {"device_code", &spec.device_code.code},
      {"body", &spec.body.code},
      {"reduce.accumulator", &spec.reduction.accumulator},
      {"reduce.init", &spec.reduction.init.code},
      {"reduce.step", &spec.reduction.step.code},
      {"reduce.merge", &spec.reduction.merge.code},
      {"reduce.finish", &spec.reduction.finish.code}};
  for (std::size_t i = 0; i < spec.inputs.size(); ++i) {
    texts.emplace_back(Indexed("inputs", i) + ".description", &spec.inputs[i].description);
  }
  for (std::size_t i = 0; i < spec.outputs.size(); ++i) {
    texts.emplace_back(Indexed("outputs", i) + ".description", &spec.outputs[i].description);
  }
  for (std::size_t i = 0; i < spec.attributes.size(); ++i) {
    texts.emplace_back(Indexed("attributes", i) + ".description", &spec.attributes[i].description);
  }
  for (const auto& [field, text] : texts) {
    if (FindBadTextByte(*text, /*allow_control=*/true) != std::string_view::npos) {
      return Problem{field, "contains a NUL character or invalid UTF-8"};
    }
  }
  return std::nullopt;
}

std::optional<Problem> CheckCode(const OperatorSpec& spec) {
  const ReductionCode& r = spec.reduction;
  bool has_reduce = !r.accumulator.empty() || !r.init.empty() || !r.step.empty() ||
                    !r.merge.empty() || !r.finish.empty();
  if (spec.kind != OperatorKind::kReduction) {
    if (spec.body.empty()) {
      return Problem{"body", std::string("required for an ") + OperatorKindName(spec.kind) +
                                 " operator; write the CUDA C++ statements that compute the "
                                 "outputs"};
    }
    if (has_reduce) {
      return Problem{"reduce", std::string("only a reduction has `reduce`; this operator is ") +
                                   OperatorKindName(spec.kind) +
                                   " (set `kind: reduction` or move the code to `body`)"};
    }
    return std::nullopt;
  }
  if (!spec.body.empty()) {
    return Problem{"body",
                   "a reduction has no body; put its code under `reduce:` (init, step, merge, "
                   "finish)"};
  }
  if (spec.inputs.size() != 1) {
    return Problem{"inputs", "a reduction has exactly one input (it has " +
                                 std::to_string(spec.inputs.size()) + ")"};
  }
  if (spec.outputs.size() != 1) {
    return Problem{"outputs", "a reduction has exactly one output (it has " +
                                  std::to_string(spec.outputs.size()) + ")"};
  }
  if (r.init.empty()) return Problem{"reduce.init", "required; set `acc` to the identity"};
  if (r.step.empty()) return Problem{"reduce.step", "required; fold element `x` into `acc`"};
  if (r.merge.empty()) return Problem{"reduce.merge", "required; fold partial `other` into `acc`"};
  return std::nullopt;
}

std::optional<Problem> CheckTensors(const std::string& field,
                                    const std::vector<OperatorTest::Tensor>& tensors,
                                    const std::vector<TensorParam>& params, const char* what) {
  std::set<std::string> given;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& tensor = tensors[i];
    std::string path = field + "." + tensor.name;
    bool declared = false;
    for (const auto& param : params) declared = declared || param.name == tensor.name;
    if (!declared)
      return Problem{path, "'" + tensor.name + "' is not an " + what + " of this operator"};
    if (!given.insert(tensor.name).second) return Problem{path, "given twice"};
    if (tensor.shape.empty()) continue;
    std::uint64_t elements = 1;
    for (std::int64_t dim : tensor.shape) {
      if (dim < 0) return Problem{path + ".shape", "dimensions must be >= 0"};
      if (dim != 0 && elements > std::numeric_limits<std::uint64_t>::max() / std::uint64_t(dim)) {
        return Problem{path + ".shape", "shape is too large"};
      }
      elements *= static_cast<std::uint64_t>(dim);
    }
    if (elements != tensor.values.size()) {
      return Problem{path + ".values", std::to_string(tensor.values.size()) +
                                           " values for shape with " + std::to_string(elements) +
                                           " elements; give one value per element"};
    }
  }
  for (const auto& param : params) {
    if (!given.count(param.name)) {
      return Problem{field, std::string("missing ") + what + " '" + param.name + "'"};
    }
  }
  return std::nullopt;
}

std::optional<Problem> CheckTest(const OperatorSpec& spec, std::size_t index,
                                 std::set<std::string>& names) {
  const OperatorTest& test = spec.tests[index];
  std::string field = Indexed("tests", index);
  bool name_ok = !test.name.empty() && test.name.size() <= kMaxNameLength;
  for (char c : test.name) name_ok = name_ok && IsTestNameChar(c);
  if (!name_ok) {
    return Problem{field + ".name", "'" + test.name +
                                        "' is not a valid test name; use letters, digits, '_', "
                                        "'.', '-', at most 64 characters"};
  }
  if (!names.insert(test.name).second) {
    return Problem{field + ".name", "duplicate test name '" + test.name + "'"};
  }
  bool dtype_ok = false;
  for (DType dtype : spec.dtypes) dtype_ok = dtype_ok || dtype == test.dtype;
  if (!dtype_ok) {
    return Problem{field + ".dtype", std::string("'") + DTypeName(test.dtype) +
                                         "' is not one of the operator's dtypes"};
  }
  if (spec.out_dtypes.empty() && test.out_dtype) {
    return Problem{field + ".out_dtype",
                   "the operator has no out_dtypes (no type variable U); remove out_dtype"};
  }
  if (!spec.out_dtypes.empty()) {
    if (!test.out_dtype) {
      return Problem{field,
                     "missing out_dtype; the operator instantiates over dtypes x "
                     "out_dtypes, so a test names both (dtype: for T, out_dtype: for U)"};
    }
    bool out_ok = false;
    for (DType dtype : spec.out_dtypes) out_ok = out_ok || dtype == *test.out_dtype;
    if (!out_ok) {
      return Problem{field + ".out_dtype", std::string("'") + DTypeName(*test.out_dtype) +
                                               "' is not one of the operator's out_dtypes"};
    }
  }
  if (auto p = CheckTensors(field + ".inputs", test.inputs, spec.inputs, "input")) return p;
  if (auto p = CheckTensors(field + ".expected", test.expected, spec.outputs, "output")) return p;
  std::set<std::string> given;
  for (const auto& [name, text] : test.attributes) {
    std::string path = field + ".attributes." + name;
    const AttributeParam* declared = nullptr;
    for (const auto& attribute : spec.attributes) {
      if (attribute.name == name) declared = &attribute;
    }
    if (!declared) return Problem{path, "'" + name + "' is not an attribute of this operator"};
    if (!given.insert(name).second) return Problem{path, "given twice"};
    auto value = CanonicalAttributeValue(declared->type, text);
    if (!value.ok()) return Problem{path, value.status().message()};
  }
  if (!(test.tolerance >= 0) || !std::isfinite(test.tolerance)) {
    return Problem{field + ".tolerance", "must be a finite number >= 0"};
  }
  return std::nullopt;
}

}  // namespace

bool IsOperatorName(std::string_view name) {
  return MatchesName(name, IsLower, [](char c) { return IsLower(c) || IsDigit(c) || c == '_'; });
}

bool IsPackName(std::string_view name) {
  return MatchesName(name, IsLower, [](char c) {
    return IsLower(c) || IsDigit(c) || c == '_' || c == '.' || c == '-';
  });
}

bool IsParamName(std::string_view name) {
  return MatchesName(
      name, [](char c) { return IsLower(c) || c == '_'; },
      [](char c) { return IsLower(c) || IsDigit(c) || c == '_'; });
}

std::size_t FindBadTextByte(std::string_view text, bool allow_control) {
  std::size_t i = 0;
  while (i < text.size()) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      bool control = (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f;
      if (c == 0 || (control && !allow_control)) return i;
      ++i;
      continue;
    }
    std::size_t length = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
    if (length == 0 || c > 0xf4 || c == 0xc0 || c == 0xc1 || i + length > text.size()) return i;
    std::uint32_t code = c & (0xff >> (length + 1));
    for (std::size_t k = 1; k < length; ++k) {
      unsigned char next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xc0) != 0x80) return i;
      code = (code << 6) | (next & 0x3f);
    }
    bool overlong = (length == 3 && code < 0x800) || (length == 4 && code < 0x10000);
    if (overlong || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return i;
    i += length;
  }
  return std::string_view::npos;
}

std::string KnownDTypeList() {
  std::string list;
  for (DType dtype : AllDTypes())
    list += (list.empty() ? "" : ", ") + std::string(DTypeName(dtype));
  return list;
}

std::string KnownAttributeTypeList() { return "f32, f64, i32, i64, bool"; }

Expected<std::string> CanonicalAttributeValue(AttributeType type, std::string_view text) {
  switch (type) {
    case AttributeType::kBool:
      if (text == "true" || text == "false") return std::string(text);
      return InvalidArgument("'" + std::string(text) + "' is not a bool; write true or false");
    case AttributeType::kI32:
    case AttributeType::kI64:
      return CanonicalInteger(type, text);
    case AttributeType::kF32:
    case AttributeType::kF64:
      return CanonicalFloat(type, text);
  }
  return Internal("unknown attribute type");
}

std::optional<Problem> FindProblem(const OperatorSpec& spec) {
  if (!IsOperatorName(spec.name)) {
    return Problem{"name", "'" + spec.name +
                               "' is not a valid operator name; use [a-z][a-z0-9_]*, at most 64 "
                               "characters"};
  }
  if (spec.dtypes.empty()) {
    return Problem{"dtypes", "at least one dtype is required (known: " + KnownDTypeList() + ")"};
  }
  std::set<DType> dtypes;
  for (std::size_t i = 0; i < spec.dtypes.size(); ++i) {
    if (!dtypes.insert(spec.dtypes[i]).second) {
      return Problem{Indexed("dtypes", i),
                     std::string("duplicate dtype '") + DTypeName(spec.dtypes[i]) + "'"};
    }
  }
  std::set<DType> out_dtypes;
  for (std::size_t i = 0; i < spec.out_dtypes.size(); ++i) {
    if (!out_dtypes.insert(spec.out_dtypes[i]).second) {
      return Problem{Indexed("out_dtypes", i),
                     std::string("duplicate dtype '") + DTypeName(spec.out_dtypes[i]) + "'"};
    }
  }
  if (auto p = CheckParams(spec)) return p;
  if (auto p = CheckTypeVariables(spec)) return p;
  if (auto p = CheckText(spec)) return p;
  if (auto p = CheckCode(spec)) return p;
  std::set<std::string> test_names;
  for (std::size_t i = 0; i < spec.tests.size(); ++i) {
    if (auto p = CheckTest(spec, i, test_names)) return p;
  }
  return std::nullopt;
}

}  // namespace gpuos::registry::rules
