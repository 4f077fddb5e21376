#include "gpuos/registry/operator_spec_json.h"

#include <cmath>
#include <exception>

#include "gpuos/content_hash.h"
#include "json_reader.h"

namespace gpuos::registry {
namespace {

using nlohmann::json;

json LocationToJson(const SourceLocation& location) {
  return {{"file", location.file}, {"line", location.line}, {"column", location.column}};
}

// Code blocks are objects so that the form with locations can add a
// "location" member beside the code. Empty blocks are null.
json CodeToJson(const CodeBlock& block, bool with_locations) {
  if (block.empty()) return nullptr;
  json out = {{"code", block.code}};
  if (with_locations) out["location"] = LocationToJson(block.location);
  return out;
}

json ParamToJson(const TensorParam& param) {
  const char* variable = param.type_variable == TypeVariable::kU ? "U" : "T";
  return {{"name", param.name},
          {"dtype", param.dtype ? DTypeName(*param.dtype) : variable},
          {"description", param.description}};
}

json AttributeToJson(const AttributeParam& attribute) {
  return {{"name", attribute.name},
          {"type", AttributeTypeName(attribute.type)},
          {"default", attribute.default_value ? json(*attribute.default_value) : json(nullptr)},
          {"description", attribute.description}};
}

// JSON has no inf/nan; those are written as strings.
json NumberToJson(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

json TensorsToJson(const std::vector<OperatorTest::Tensor>& tensors) {
  json out = json::array();
  for (const auto& tensor : tensors) {
    json values = json::array();
    for (double v : tensor.values) values.push_back(NumberToJson(v));
    out.push_back({{"name", tensor.name}, {"shape", tensor.shape}, {"values", values}});
  }
  return out;
}

json TestToJson(const OperatorTest& test, bool with_locations) {
  json attributes = json::array();
  for (const auto& [name, value] : test.attributes) {
    attributes.push_back({{"name", name}, {"value", value}});
  }
  json out = {{"name", test.name},
              {"dtype", DTypeName(test.dtype)},
              {"inputs", TensorsToJson(test.inputs)},
              {"expected", TensorsToJson(test.expected)},
              {"attributes", attributes},
              {"tolerance", test.tolerance}};
  // Only operators with a second type variable have the member, so the JSON
  // (and content hash) of every other operator is what it was before U.
  if (test.out_dtype) out["out_dtype"] = DTypeName(*test.out_dtype);
  if (with_locations) out["location"] = LocationToJson(test.location);
  return out;
}

json ReductionToJson(const OperatorSpec& spec, bool with_locations) {
  if (spec.kind != OperatorKind::kReduction) return nullptr;
  const ReductionCode& r = spec.reduction;
  return {{"accumulator", r.accumulator.empty() ? json(nullptr) : json(r.accumulator)},
          {"init", CodeToJson(r.init, with_locations)},
          {"step", CodeToJson(r.step, with_locations)},
          {"merge", CodeToJson(r.merge, with_locations)},
          {"finish", CodeToJson(r.finish, with_locations)}};
}

}  // namespace

json OperatorToJson(const OperatorSpec& spec, bool with_locations) {
  json dtypes = json::array();
  for (DType dtype : spec.dtypes) dtypes.push_back(DTypeName(dtype));
  json inputs = json::array(), outputs = json::array(), attributes = json::array();
  for (const auto& p : spec.inputs) inputs.push_back(ParamToJson(p));
  for (const auto& p : spec.outputs) outputs.push_back(ParamToJson(p));
  for (const auto& a : spec.attributes) attributes.push_back(AttributeToJson(a));
  json tests = json::array();
  for (const auto& t : spec.tests) tests.push_back(TestToJson(t, with_locations));
  json out = {{"name", spec.name},
              {"version", spec.version.ToString()},
              {"kind", OperatorKindName(spec.kind)},
              {"description", spec.description},
              {"dtypes", dtypes},
              {"inputs", inputs},
              {"outputs", outputs},
              {"attributes", attributes},
              {"device_code", CodeToJson(spec.device_code, with_locations)},
              {"body", CodeToJson(spec.body, with_locations)},
              {"reduce", ReductionToJson(spec, with_locations)},
              {"tests", tests}};
  if (!spec.out_dtypes.empty()) {
    json out_dtypes = json::array();
    for (DType dtype : spec.out_dtypes) out_dtypes.push_back(DTypeName(dtype));
    out["out_dtypes"] = out_dtypes;
  }
  if (with_locations) out["location"] = LocationToJson(spec.location);
  return out;
}

Expected<OperatorSpec> OperatorFromJson(const json& document) {
  try {
    return json_reader::ReadOperator(document);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("operator JSON: ") + e.what());
  }
}

std::string OperatorContentHash(const OperatorSpec& spec) {
  // Replacing invalid UTF-8 (possible only in hand-built specs; the loader
  // rejects it) keeps this from throwing.
  return ContentHash(
      OperatorToJson(spec, false).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace gpuos::registry
