#include "pack_parser.h"

#include <yaml-cpp/yaml.h>

#include <exception>
#include <map>

#include "gpuos/registry/pack_loader.h"
#include "operator_parser.h"
#include "operator_rules.h"
#include "yaml_cursor.h"
#include "yaml_input_guard.h"

namespace gpuos::registry {
namespace {

constexpr int kFormatVersion = 1;

Expected<YAML::Node> LoadDocument(const YamlDocument& document) {
  int second = FindSecondDocument(document.text());
  if (second >= 0) {
    return document.ErrorAt(SourceLocation{document.file(), second + 1, 1}, "",
                            "a pack file holds one YAML document, this starts a second one; put "
                            "each pack in its own file");
  }
  try {
    return YAML::Load(std::string(document.text()));
  } catch (const YAML::Exception& e) {
    return document.ErrorAt(document.Locate(e.mark), "",
                            "invalid YAML: " + e.msg +
                                "; check the indentation and quoting on this line and the one "
                                "before");
  }
}

Status CheckFormat(const YamlValue& root) {
  GPUOS_ASSIGN_OR_RETURN(YamlMapping any_keys, root.Mapping({}));
  auto format_value = any_keys.Find("gpuos_pack");
  if (!format_value) {
    return root.document()->ErrorAt(root.location(), "",
                                    "missing required key 'gpuos_pack'; a pack starts with "
                                    "`gpuos_pack: " +
                                        std::to_string(kFormatVersion) + "`");
  }
  GPUOS_ASSIGN_OR_RETURN(std::int64_t format, format_value->Integer());
  if (format > kFormatVersion) {
    return format_value->Error("this pack is written for a newer gpuos (format " +
                               std::to_string(format) + "; this gpuos reads format " +
                               std::to_string(kFormatVersion) + "); upgrade gpuos");
  }
  if (format < 1) {
    return format_value->Error("format " + std::to_string(format) + " does not exist; write " +
                               "`gpuos_pack: " + std::to_string(kFormatVersion) + "`");
  }
  return Status::Ok();
}

Status ParseOperators(const YamlMapping& root, ParsedPack* parsed) {
  GPUOS_ASSIGN_OR_RETURN(YamlValue operators_value, root.Require("operators"));
  GPUOS_ASSIGN_OR_RETURN(std::vector<YamlValue> entries, operators_value.Sequence());
  if (entries.empty()) {
    return operators_value.Error("a pack needs at least one operator");
  }
  std::map<std::string, std::size_t> first_by_name;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    GPUOS_ASSIGN_OR_RETURN(OperatorSpec spec, ParseOperator(entries[i]));
    std::string name_path = entries[i].path() + ".name";
    SourceLocation name_location = entries[i].document()->LocationOf(name_path);
    auto [first, inserted] = first_by_name.emplace(spec.name, i);
    if (!inserted) {
      return entries[i].document()->ErrorAt(
          name_location, name_path,
          "duplicate operator '" + spec.name + "' (also operators[" +
              std::to_string(first->second) + "] at line " +
              std::to_string(parsed->operator_name_locations[first->second].line) +
              "); operator names are unique in a pack");
    }
    parsed->pack.operators.push_back(std::move(spec));
    parsed->operator_name_locations.push_back(name_location);
  }
  return Status::Ok();
}

Expected<ParsedPack> Parse(std::string_view text, const std::string& source_name) {
  GPUOS_RETURN_IF_ERROR(CheckYamlInput(text, source_name));
  YamlDocument document(source_name, text);
  GPUOS_ASSIGN_OR_RETURN(YAML::Node node, LoadDocument(document));
  if (node.IsNull()) {
    return document.ErrorAt(SourceLocation{source_name, 1, 1}, "",
                            "the file holds no pack; a pack starts with `gpuos_pack: " +
                                std::to_string(kFormatVersion) + "`");
  }
  YamlValue root(&document, node, "", std::nullopt);
  GPUOS_RETURN_IF_ERROR(CheckFormat(root));
  GPUOS_ASSIGN_OR_RETURN(
      YamlMapping map, root.Mapping({"gpuos_pack", "name", "version", "description", "operators"}));
  ParsedPack parsed;
  OperatorPack& pack = parsed.pack;
  pack.format = kFormatVersion;
  pack.source_path = source_name;
  pack.source_text = std::string(text);

  GPUOS_ASSIGN_OR_RETURN(YamlValue name, map.Require("name"));
  GPUOS_ASSIGN_OR_RETURN(pack.name, name.String());
  if (!rules::IsPackName(pack.name)) {
    return name.Error("'" + pack.name +
                      "' is not a valid pack name; use [a-z][a-z0-9_.-]*, at most 64 characters, "
                      "e.g. acme.activations");
  }
  parsed.name_location = name.location();
  GPUOS_ASSIGN_OR_RETURN(YamlValue version, map.Require("version"));
  GPUOS_ASSIGN_OR_RETURN(std::string version_text, version.String());
  auto parsed_version = SemVer::Parse(version_text);
  if (!parsed_version.ok()) return version.Error(parsed_version.status().message());
  pack.version = *parsed_version;
  if (auto description = map.Find("description")) {
    GPUOS_ASSIGN_OR_RETURN(pack.description, description->String());
  }
  GPUOS_RETURN_IF_ERROR(ParseOperators(map, &parsed));
  return parsed;
}

}  // namespace

Expected<ParsedPack> ParsePackWithLocations(std::string_view yaml_text,
                                            const std::string& source_name) {
  try {
    return Parse(yaml_text, source_name);
  } catch (const std::exception& e) {
    // yaml-cpp and the standard library may throw (e.g. bad_alloc); nothing
    // escapes the loader.
    return Internal(source_name +
                    ": error: unexpected failure while reading the pack: " + e.what());
  }
}

Expected<OperatorPack> ParsePack(std::string_view yaml_text, const std::string& source_name) {
  GPUOS_ASSIGN_OR_RETURN(ParsedPack parsed, ParsePackWithLocations(yaml_text, source_name));
  return std::move(parsed.pack);
}

}  // namespace gpuos::registry
