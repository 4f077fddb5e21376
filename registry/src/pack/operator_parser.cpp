#include "operator_parser.h"

#include "operator_rules.h"

namespace gpuos::registry {
namespace {

Expected<std::string> OptionalString(const YamlMapping& map, std::string_view key) {
  if (auto value = map.Find(key)) return value->String();
  return std::string();
}

Expected<CodeBlock> OptionalCode(const YamlMapping& map, std::string_view key) {
  if (auto value = map.Find(key)) return value->Code();
  return CodeBlock{};
}

Expected<std::vector<YamlValue>> OptionalSequence(const YamlMapping& map, std::string_view key) {
  if (auto value = map.Find(key)) return value->Sequence();
  return std::vector<YamlValue>{};
}

Expected<std::vector<TensorParam>> ParseTensorParams(const YamlMapping& op, std::string_view key) {
  GPUOS_ASSIGN_OR_RETURN(YamlValue list_value, op.Require(key));
  GPUOS_ASSIGN_OR_RETURN(std::vector<YamlValue> list, list_value.Sequence());
  std::vector<TensorParam> params;
  for (const YamlValue& entry : list) {
    GPUOS_ASSIGN_OR_RETURN(YamlMapping map, entry.Mapping({"name", "dtype", "description"}));
    TensorParam param;
    GPUOS_ASSIGN_OR_RETURN(YamlValue name, map.Require("name"));
    GPUOS_ASSIGN_OR_RETURN(param.name, name.String());
    if (auto dtype = map.Find("dtype")) {
      Expected<std::string> dtype_text = dtype->String();
      if (!dtype_text.ok()) return dtype_text.status();
      const std::string& text = *dtype_text;
      // Whether the operator declares U (out_dtypes) is an operator rule.
      if (text == "U") param.type_variable = TypeVariable::kU;
      if (param.type_variable == TypeVariable::kT && text != "T") {
        param.dtype = ParseDType(text);
        if (!param.dtype) {
          return dtype->Error("unknown dtype '" + text + "' (known: " + rules::KnownDTypeList() +
                              ", T, U)");
        }
      }
    }
    GPUOS_ASSIGN_OR_RETURN(param.description, OptionalString(map, "description"));
    params.push_back(std::move(param));
  }
  return params;
}

Expected<std::vector<AttributeParam>> ParseAttributes(const YamlMapping& op) {
  GPUOS_ASSIGN_OR_RETURN(std::vector<YamlValue> list, OptionalSequence(op, "attributes"));
  std::vector<AttributeParam> attributes;
  for (const YamlValue& entry : list) {
    GPUOS_ASSIGN_OR_RETURN(YamlMapping map,
                           entry.Mapping({"name", "type", "default", "description"}));
    AttributeParam attribute;
    GPUOS_ASSIGN_OR_RETURN(YamlValue name, map.Require("name"));
    GPUOS_ASSIGN_OR_RETURN(attribute.name, name.String());
    GPUOS_ASSIGN_OR_RETURN(YamlValue type, map.Require("type"));
    GPUOS_ASSIGN_OR_RETURN(std::string type_name, type.String());
    auto parsed_type = ParseAttributeType(type_name);
    if (!parsed_type) {
      return type.Error("unknown attribute type '" + type_name +
                        "' (known: " + rules::KnownAttributeTypeList() + ")");
    }
    attribute.type = *parsed_type;
    if (auto value = map.Find("default")) {
      GPUOS_ASSIGN_OR_RETURN(std::string text, value->PlainScalar("an unquoted number or bool"));
      auto canonical = rules::CanonicalAttributeValue(attribute.type, text);
      if (!canonical.ok()) return value->Error(canonical.status().message());
      attribute.default_value = *canonical;
    }
    GPUOS_ASSIGN_OR_RETURN(attribute.description, OptionalString(map, "description"));
    attributes.push_back(std::move(attribute));
  }
  return attributes;
}

Status ParseReduction(const YamlMapping& op, ReductionCode* reduction) {
  auto value = op.Find("reduce");
  if (!value) return Status::Ok();
  // Required members are checked by the operator rules, which know the kind.
  GPUOS_ASSIGN_OR_RETURN(YamlMapping map,
                         value->Mapping({"accumulator", "init", "step", "merge", "finish"}));
  GPUOS_ASSIGN_OR_RETURN(reduction->accumulator, OptionalString(map, "accumulator"));
  GPUOS_ASSIGN_OR_RETURN(reduction->init, OptionalCode(map, "init"));
  GPUOS_ASSIGN_OR_RETURN(reduction->step, OptionalCode(map, "step"));
  GPUOS_ASSIGN_OR_RETURN(reduction->merge, OptionalCode(map, "merge"));
  GPUOS_ASSIGN_OR_RETURN(reduction->finish, OptionalCode(map, "finish"));
  return Status::Ok();
}

Status ParseDTypeList(const YamlValue& value, std::vector<DType>* out) {
  GPUOS_ASSIGN_OR_RETURN(std::vector<YamlValue> dtypes, value.Sequence());
  for (const YamlValue& dtype : dtypes) {
    GPUOS_ASSIGN_OR_RETURN(std::string text, dtype.String());
    auto parsed = ParseDType(text);
    if (!parsed) {
      return dtype.Error("unknown dtype '" + text + "' (known: " + rules::KnownDTypeList() + ")");
    }
    out->push_back(*parsed);
  }
  return Status::Ok();
}

Status ParseHeader(const YamlMapping& op, OperatorSpec* spec) {
  GPUOS_ASSIGN_OR_RETURN(YamlValue name, op.Require("name"));
  GPUOS_ASSIGN_OR_RETURN(spec->name, name.String());
  if (!rules::IsOperatorName(spec->name)) {
    return name.Error("'" + spec->name +
                      "' is not a valid operator name; use [a-z][a-z0-9_]*, at most 64 "
                      "characters");
  }
  GPUOS_ASSIGN_OR_RETURN(YamlValue version, op.Require("version"));
  GPUOS_ASSIGN_OR_RETURN(std::string version_text, version.String());
  auto parsed_version = SemVer::Parse(version_text);
  if (!parsed_version.ok()) return version.Error(parsed_version.status().message());
  spec->version = *parsed_version;
  GPUOS_ASSIGN_OR_RETURN(YamlValue kind, op.Require("kind"));
  GPUOS_ASSIGN_OR_RETURN(std::string kind_text, kind.String());
  auto parsed_kind = ParseOperatorKind(kind_text);
  if (!parsed_kind) {
    return kind.Error("unknown kind '" + kind_text + "' (known: elementwise, reduction, custom)");
  }
  spec->kind = *parsed_kind;
  GPUOS_ASSIGN_OR_RETURN(spec->description, OptionalString(op, "description"));
  GPUOS_ASSIGN_OR_RETURN(YamlValue dtypes_value, op.Require("dtypes"));
  GPUOS_RETURN_IF_ERROR(ParseDTypeList(dtypes_value, &spec->dtypes));
  if (auto out_dtypes = op.Find("out_dtypes")) {
    GPUOS_RETURN_IF_ERROR(ParseDTypeList(*out_dtypes, &spec->out_dtypes));
  }
  return Status::Ok();
}

}  // namespace

Expected<OperatorSpec> ParseOperator(const YamlValue& entry) {
  GPUOS_ASSIGN_OR_RETURN(
      YamlMapping op,
      entry.Mapping({"name", "version", "kind", "description", "dtypes", "out_dtypes", "inputs",
                     "outputs", "attributes", "device_code", "body", "reduce", "tests"}));
  OperatorSpec spec;
  spec.location = entry.location();
  GPUOS_RETURN_IF_ERROR(ParseHeader(op, &spec));
  GPUOS_ASSIGN_OR_RETURN(spec.inputs, ParseTensorParams(op, "inputs"));
  GPUOS_ASSIGN_OR_RETURN(spec.outputs, ParseTensorParams(op, "outputs"));
  GPUOS_ASSIGN_OR_RETURN(spec.attributes, ParseAttributes(op));
  GPUOS_ASSIGN_OR_RETURN(spec.device_code, OptionalCode(op, "device_code"));
  GPUOS_ASSIGN_OR_RETURN(spec.body, OptionalCode(op, "body"));
  GPUOS_RETURN_IF_ERROR(ParseReduction(op, &spec.reduction));
  GPUOS_ASSIGN_OR_RETURN(std::vector<YamlValue> tests, OptionalSequence(op, "tests"));
  for (const YamlValue& test : tests) {
    GPUOS_ASSIGN_OR_RETURN(OperatorTest parsed, ParseOperatorTest(test, spec));
    spec.tests.push_back(std::move(parsed));
  }
  if (auto problem = rules::FindProblem(spec)) {
    std::string path = problem->field.empty() ? entry.path() : entry.path() + "." + problem->field;
    // Falls back to the nearest parent the YAML spelled out (a missing key).
    YamlDocument* document = entry.document();
    return document->ErrorAt(document->LocationOf(path), path, problem->message);
  }
  return spec;
}

}  // namespace gpuos::registry
