// The `tests:` entries of an operator: small literal cases.
#include "operator_parser.h"
#include "operator_rules.h"

namespace gpuos::registry {
namespace {

Expected<std::vector<double>> ParseValues(const YamlValue& value) {
  GPUOS_ASSIGN_OR_RETURN(std::vector<YamlValue> items, value.Sequence());
  std::vector<double> values;
  values.reserve(items.size());
  for (const YamlValue& item : items) {
    GPUOS_ASSIGN_OR_RETURN(double number, item.Number());
    values.push_back(number);
  }
  return values;
}

// `name: [1, 2, 3]` (1-D) or `name: {shape: [..], values: [..]}`.
Expected<OperatorTest::Tensor> ParseTensor(const std::string& name, const YamlValue& value) {
  OperatorTest::Tensor tensor;
  tensor.name = name;
  if (value.IsSequence()) {
    GPUOS_ASSIGN_OR_RETURN(tensor.values, ParseValues(value));
    return tensor;
  }
  if (!value.IsMapping()) {
    return value.Error("expected a list of values or {shape: [...], values: [...]}");
  }
  GPUOS_ASSIGN_OR_RETURN(YamlMapping map, value.Mapping({"shape", "values"}));
  GPUOS_ASSIGN_OR_RETURN(YamlValue shape_value, map.Require("shape"));
  GPUOS_ASSIGN_OR_RETURN(std::vector<YamlValue> dims, shape_value.Sequence());
  for (const YamlValue& dim : dims) {
    GPUOS_ASSIGN_OR_RETURN(std::int64_t extent, dim.Integer());
    if (extent < 0) return dim.Error("dimensions must be >= 0");
    tensor.shape.push_back(extent);
  }
  GPUOS_ASSIGN_OR_RETURN(YamlValue values, map.Require("values"));
  GPUOS_ASSIGN_OR_RETURN(tensor.values, ParseValues(values));
  return tensor;
}

Expected<std::vector<OperatorTest::Tensor>> ParseTensors(const YamlMapping& test,
                                                         std::string_view key) {
  std::vector<OperatorTest::Tensor> tensors;
  auto value = test.Find(key);
  if (!value) return tensors;
  GPUOS_ASSIGN_OR_RETURN(YamlMapping map, value->Mapping({}));
  for (const auto& [name, tensor] : map.entries()) {
    GPUOS_ASSIGN_OR_RETURN(OperatorTest::Tensor parsed, ParseTensor(name, tensor));
    tensors.push_back(std::move(parsed));
  }
  return tensors;
}

const AttributeParam* FindAttribute(const OperatorSpec& spec, const std::string& name) {
  for (const auto& attribute : spec.attributes) {
    if (attribute.name == name) return &attribute;
  }
  return nullptr;
}

}  // namespace

Expected<OperatorTest> ParseOperatorTest(const YamlValue& entry, const OperatorSpec& spec) {
  GPUOS_ASSIGN_OR_RETURN(YamlMapping map, entry.Mapping({"name", "dtype", "out_dtype", "inputs",
                                                         "attributes", "expected", "tolerance"}));
  OperatorTest test;
  test.location = entry.location();
  GPUOS_ASSIGN_OR_RETURN(YamlValue name, map.Require("name"));
  GPUOS_ASSIGN_OR_RETURN(test.name, name.String());
  GPUOS_ASSIGN_OR_RETURN(YamlValue dtype, map.Require("dtype"));
  GPUOS_ASSIGN_OR_RETURN(std::string dtype_text, dtype.String());
  auto parsed_dtype = ParseDType(dtype_text);
  if (!parsed_dtype) {
    return dtype.Error("unknown dtype '" + dtype_text + "' (known: " + rules::KnownDTypeList() +
                       ")");
  }
  test.dtype = *parsed_dtype;
  // Whether out_dtype is required, allowed and among out_dtypes is an
  // operator rule.
  if (auto out_dtype = map.Find("out_dtype")) {
    GPUOS_ASSIGN_OR_RETURN(std::string out_text, out_dtype->String());
    test.out_dtype = ParseDType(out_text);
    if (!test.out_dtype) {
      return out_dtype->Error("unknown dtype '" + out_text +
                              "' (known: " + rules::KnownDTypeList() + ")");
    }
  }
  GPUOS_ASSIGN_OR_RETURN(test.inputs, ParseTensors(map, "inputs"));
  GPUOS_ASSIGN_OR_RETURN(test.expected, ParseTensors(map, "expected"));
  if (auto attributes = map.Find("attributes")) {
    GPUOS_ASSIGN_OR_RETURN(YamlMapping values, attributes->Mapping({}));
    for (const auto& [attribute_name, value] : values.entries()) {
      GPUOS_ASSIGN_OR_RETURN(std::string text, value.PlainScalar("an unquoted number or bool"));
      // Undeclared names are reported by the operator rules.
      if (const AttributeParam* declared = FindAttribute(spec, attribute_name)) {
        auto canonical = rules::CanonicalAttributeValue(declared->type, text);
        if (!canonical.ok()) return value.Error(canonical.status().message());
        text = *canonical;
      }
      test.attributes.emplace_back(attribute_name, std::move(text));
    }
  }
  if (auto tolerance = map.Find("tolerance")) {
    GPUOS_ASSIGN_OR_RETURN(test.tolerance, tolerance->Number());
  }
  return test;
}

}  // namespace gpuos::registry
