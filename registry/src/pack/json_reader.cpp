#include "json_reader.h"

#include <cmath>
#include <initializer_list>
#include <limits>

#include "operator_rules.h"

namespace gpuos::registry::json_reader {
namespace {

using nlohmann::json;

// Reads fields and remembers the first failure; later reads of a failed
// reader return defaults, so the caller checks once at the end.
class Reader {
 public:
  bool failed() const { return error_.has_value(); }
  Status error() const { return *error_; }

  void Fail(const std::string& path, const std::string& what) {
    if (!error_) error_ = InvalidArgument("operator JSON: " + path + ": " + what);
  }

  // `node` must be an object with exactly the given keys (optional ones may
  // be missing).
  bool Object(const json& node, const std::string& path, std::initializer_list<const char*> keys,
              std::initializer_list<const char*> optional_keys = {}) {
    if (!node.is_object()) {
      Fail(path.empty() ? "(top level)" : path, "expected an object");
      return false;
    }
    for (const auto& [key, value] : node.items()) {
      bool known = false;
      for (const char* k : keys) known = known || key == k;
      for (const char* k : optional_keys) known = known || key == k;
      if (!known) Fail(Join(path, key), "unknown member");
    }
    for (const char* k : keys) {
      if (!node.contains(k)) Fail(Join(path, k), "missing");
    }
    return !failed();
  }

  static std::string Join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  static std::string Index(const std::string& path, std::size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }

  std::string String(const json& node, const std::string& path) {
    if (!node.is_string()) {
      Fail(path, "expected a string");
      return {};
    }
    return node.get<std::string>();
  }

  std::optional<std::string> NullableString(const json& node, const std::string& path) {
    if (node.is_null()) return std::nullopt;
    return String(node, path);
  }

  const json& Array(const json& node, const std::string& path) {
    static const json empty = json::array();
    if (!node.is_array()) {
      Fail(path, "expected an array");
      return empty;
    }
    return node;
  }

  std::int64_t Integer(const json& node, const std::string& path, std::int64_t min,
                       std::int64_t max) {
    if (!node.is_number_integer()) {
      Fail(path, "expected an integer");
      return 0;
    }
    if (node.is_number_unsigned() && node.get<std::uint64_t>() > std::uint64_t(max)) {
      Fail(path, "out of range");
      return 0;
    }
    std::int64_t value = node.get<std::int64_t>();
    if (value < min || value > max) {
      Fail(path, "out of range");
      return 0;
    }
    return value;
  }

  double Number(const json& node, const std::string& path) {
    if (node.is_number()) return node.get<double>();
    if (node.is_string()) {
      const auto& text = node.get_ref<const std::string&>();
      if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
      if (text == "inf") return std::numeric_limits<double>::infinity();
      if (text == "-inf") return -std::numeric_limits<double>::infinity();
    }
    Fail(path, "expected a number (or \"inf\", \"-inf\", \"nan\")");
    return 0;
  }

  DType DTypeField(const json& node, const std::string& path) {
    auto dtype = ParseDType(String(node, path));
    if (!dtype && !failed()) Fail(path, "unknown dtype (known: " + rules::KnownDTypeList() + ")");
    return dtype.value_or(DType::kF32);
  }

  SourceLocation Location(const json& node, const std::string& path) {
    SourceLocation location;
    if (!Object(node, path, {"file", "line", "column"})) return location;
    location.file = String(node["file"], Join(path, "file"));
    int max = std::numeric_limits<int>::max();
    location.line = static_cast<int>(Integer(node["line"], Join(path, "line"), 0, max));
    location.column = static_cast<int>(Integer(node["column"], Join(path, "column"), 0, max));
    return location;
  }

  CodeBlock Code(const json& node, const std::string& path) {
    CodeBlock block;
    if (node.is_null()) return block;
    if (!Object(node, path, {"code"}, {"location"})) return block;
    block.code = String(node["code"], Join(path, "code"));
    if (block.code.empty()) Fail(Join(path, "code"), "empty code is written as null");
    if (node.contains("location"))
      block.location = Location(node["location"], Join(path, "location"));
    return block;
  }

  TensorParam Param(const json& node, const std::string& path) {
    TensorParam param;
    if (!Object(node, path, {"name", "dtype", "description"})) return param;
    param.name = String(node["name"], Join(path, "name"));
    if (node["dtype"] == "U") {
      param.type_variable = TypeVariable::kU;
    } else if (node["dtype"] != "T") {
      param.dtype = DTypeField(node["dtype"], Join(path, "dtype"));
    }
    param.description = String(node["description"], Join(path, "description"));
    return param;
  }

  AttributeParam Attribute(const json& node, const std::string& path) {
    AttributeParam attribute;
    if (!Object(node, path, {"name", "type", "default", "description"})) return attribute;
    attribute.name = String(node["name"], Join(path, "name"));
    auto type = ParseAttributeType(String(node["type"], Join(path, "type")));
    if (!type && !failed()) {
      Fail(Join(path, "type"),
           "unknown attribute type (known: " + rules::KnownAttributeTypeList() + ")");
    }
    attribute.type = type.value_or(AttributeType::kF64);
    attribute.default_value = NullableString(node["default"], Join(path, "default"));
    attribute.description = String(node["description"], Join(path, "description"));
    return attribute;
  }

  std::vector<OperatorTest::Tensor> Tensors(const json& node, const std::string& path) {
    std::vector<OperatorTest::Tensor> tensors;
    const json& list = Array(node, path);
    for (std::size_t i = 0; i < list.size() && !failed(); ++i) {
      std::string at = Index(path, i);
      if (!Object(list[i], at, {"name", "shape", "values"})) break;
      OperatorTest::Tensor tensor;
      tensor.name = String(list[i]["name"], Join(at, "name"));
      const json& shape = Array(list[i]["shape"], Join(at, "shape"));
      for (std::size_t d = 0; d < shape.size(); ++d) {
        tensor.shape.push_back(Integer(shape[d], Index(Join(at, "shape"), d), 0,
                                       std::numeric_limits<std::int64_t>::max()));
      }
      const json& values = Array(list[i]["values"], Join(at, "values"));
      for (std::size_t v = 0; v < values.size(); ++v) {
        tensor.values.push_back(Number(values[v], Index(Join(at, "values"), v)));
      }
      tensors.push_back(std::move(tensor));
    }
    return tensors;
  }

  OperatorTest Test(const json& node, const std::string& path) {
    OperatorTest test;
    if (!Object(node, path, {"name", "dtype", "inputs", "expected", "attributes", "tolerance"},
                {"location", "out_dtype"})) {
      return test;
    }
    test.name = String(node["name"], Join(path, "name"));
    test.dtype = DTypeField(node["dtype"], Join(path, "dtype"));
    if (node.contains("out_dtype")) {
      test.out_dtype = DTypeField(node["out_dtype"], Join(path, "out_dtype"));
    }
    test.inputs = Tensors(node["inputs"], Join(path, "inputs"));
    test.expected = Tensors(node["expected"], Join(path, "expected"));
    const json& attributes = Array(node["attributes"], Join(path, "attributes"));
    for (std::size_t i = 0; i < attributes.size() && !failed(); ++i) {
      std::string at = Index(Join(path, "attributes"), i);
      if (!Object(attributes[i], at, {"name", "value"})) break;
      test.attributes.emplace_back(String(attributes[i]["name"], Join(at, "name")),
                                   String(attributes[i]["value"], Join(at, "value")));
    }
    if (!node["tolerance"].is_number()) {
      Fail(Join(path, "tolerance"), "expected a number");
    } else {
      test.tolerance = node["tolerance"].get<double>();
    }
    if (node.contains("location"))
      test.location = Location(node["location"], Join(path, "location"));
    return test;
  }

  void Reduction(const json& node, OperatorSpec* spec) {
    if (node.is_null()) return;
    if (!Object(node, "reduce", {"accumulator", "init", "step", "merge", "finish"})) return;
    ReductionCode& r = spec->reduction;
    r.accumulator = NullableString(node["accumulator"], "reduce.accumulator").value_or("");
    r.init = Code(node["init"], "reduce.init");
    r.step = Code(node["step"], "reduce.step");
    r.merge = Code(node["merge"], "reduce.merge");
    r.finish = Code(node["finish"], "reduce.finish");
  }

 private:
  std::optional<Status> error_;
};

}  // namespace

Expected<OperatorSpec> ReadOperator(const json& document) {
  Reader reader;
  OperatorSpec spec;
  if (!reader.Object(document, "",
                     {"name", "version", "kind", "description", "dtypes", "inputs", "outputs",
                      "attributes", "device_code", "body", "reduce", "tests"},
                     {"location", "out_dtypes"})) {
    return reader.error();
  }
  spec.name = reader.String(document["name"], "name");
  std::string version = reader.String(document["version"], "version");
  if (!reader.failed()) {
    auto parsed = SemVer::Parse(version);
    if (!parsed.ok())
      reader.Fail("version", parsed.status().message());
    else
      spec.version = *parsed;
  }
  std::string kind = reader.String(document["kind"], "kind");
  if (!reader.failed()) {
    auto parsed = ParseOperatorKind(kind);
    if (!parsed)
      reader.Fail("kind", "unknown kind '" + kind + "' (known: elementwise, reduction, custom)");
    spec.kind = parsed.value_or(OperatorKind::kElementwise);
  }
  spec.description = reader.String(document["description"], "description");
  const json& dtypes = reader.Array(document["dtypes"], "dtypes");
  for (std::size_t i = 0; i < dtypes.size(); ++i) {
    spec.dtypes.push_back(reader.DTypeField(dtypes[i], Reader::Index("dtypes", i)));
  }
  if (document.contains("out_dtypes")) {
    const json& out_dtypes = reader.Array(document["out_dtypes"], "out_dtypes");
    for (std::size_t i = 0; i < out_dtypes.size(); ++i) {
      spec.out_dtypes.push_back(reader.DTypeField(out_dtypes[i], Reader::Index("out_dtypes", i)));
    }
  }
  const json& inputs = reader.Array(document["inputs"], "inputs");
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    spec.inputs.push_back(reader.Param(inputs[i], Reader::Index("inputs", i)));
  }
  const json& outputs = reader.Array(document["outputs"], "outputs");
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    spec.outputs.push_back(reader.Param(outputs[i], Reader::Index("outputs", i)));
  }
  const json& attributes = reader.Array(document["attributes"], "attributes");
  for (std::size_t i = 0; i < attributes.size(); ++i) {
    spec.attributes.push_back(reader.Attribute(attributes[i], Reader::Index("attributes", i)));
  }
  spec.device_code = reader.Code(document["device_code"], "device_code");
  spec.body = reader.Code(document["body"], "body");
  reader.Reduction(document["reduce"], &spec);
  const json& tests = reader.Array(document["tests"], "tests");
  for (std::size_t i = 0; i < tests.size(); ++i) {
    spec.tests.push_back(reader.Test(tests[i], Reader::Index("tests", i)));
  }
  if (document.contains("location"))
    spec.location = reader.Location(document["location"], "location");
  if (reader.failed()) return reader.error();
  if (auto problem = rules::FindProblem(spec)) {
    return InvalidArgument(
        "operator JSON: " + (problem->field.empty() ? "" : problem->field + ": ") +
        problem->message);
  }
  return spec;
}

}  // namespace gpuos::registry::json_reader
