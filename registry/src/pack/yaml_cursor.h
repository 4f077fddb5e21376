// Typed, located access to a parsed YAML document for the pack loader.
//
// A YamlValue is a yaml-cpp node plus its field path ("operators[1].name")
// and the document it belongs to. Every accessor checks the YAML type and
// returns an error in the loader's format
//   FILE:LINE:COLUMN: error: <field path>: <what is wrong>[; <what to do>]
// Every value that is visited records its location in the document, so that
// rule violations found later (operator_rules.h) can point at the field.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuos/registry/operator_spec.h"
#include "gpuos/status.h"

namespace gpuos::registry {

class YamlDocument {
 public:
  YamlDocument(std::string file, std::string_view text) : file_(std::move(file)), text_(text) {}

  const std::string& file() const { return file_; }
  std::string_view text() const { return text_; }

  // 1-based location of a yaml-cpp mark (0-based).
  SourceLocation Locate(const YAML::Mark& mark) const;
  // "FILE:LINE:COLUMN: error: <path>: <what>" (no "<path>: " when empty).
  Status ErrorAt(const SourceLocation& where, const std::string& path,
                 const std::string& what) const;

  void Record(const std::string& path, const SourceLocation& where);
  // Location of `path`, else of its nearest recorded parent, else 1:1.
  SourceLocation LocationOf(const std::string& path) const;

 private:
  std::string file_;
  std::string_view text_;
  std::map<std::string, SourceLocation> locations_;
};

class YamlMapping;

class YamlValue {
 public:
  // `key_mark` is where the key that introduced this value is, if any. A
  // value is located at its key when it is empty (yaml-cpp places an empty
  // value's mark on the next token) or a block collection (whose mark is
  // its first entry, a line below the key).
  YamlValue(YamlDocument* document, YAML::Node node, std::string path,
            std::optional<YAML::Mark> key_mark);

  const std::string& path() const { return path_; }
  SourceLocation location() const { return location_; }
  YamlDocument* document() const { return document_; }
  Status Error(const std::string& what) const;

  bool IsNull() const { return node_.IsNull(); }
  bool IsSequence() const { return node_.IsSequence(); }
  bool IsMapping() const { return node_.IsMap(); }

  // Any scalar, quoted or not.
  Expected<std::string> String() const;
  // A plain (unquoted) scalar: numbers and booleans are written this way.
  Expected<std::string> PlainScalar(const char* expected) const;
  Expected<std::int64_t> Integer() const;
  // A number: decimal or exponent form, .inf/-.inf/.nan, or true/false (1/0).
  Expected<double> Number() const;
  // Code with the location of its first line (the line after `|` or `>`).
  Expected<CodeBlock> Code() const;
  Expected<std::vector<YamlValue>> Sequence() const;
  // Keys must be unique scalars; with `known_keys` non-empty, every key
  // must be one of them (the error suggests the closest).
  Expected<YamlMapping> Mapping(const std::vector<std::string_view>& known_keys) const;

 private:
  std::string Found() const;                            // "a list", "a mapping", ... for messages
  Status WrongType(const std::string& expected) const;  // "expected X, found Y"

  YamlDocument* document_;
  YAML::Node node_;
  std::string path_;
  SourceLocation location_;
};

// A mapping whose keys were checked by YamlValue::Mapping().
class YamlMapping {
 public:
  const std::string& path() const { return path_; }
  SourceLocation location() const { return location_; }

  // The value of `key`; nullopt when the key is absent or its value is
  // empty (`key:` or `key: ~`), which means "not given".
  std::optional<YamlValue> Find(std::string_view key) const;
  // The value of `key`, or an error at the mapping naming the missing key.
  Expected<YamlValue> Require(std::string_view key) const;
  // Entries in document order.
  const std::vector<std::pair<std::string, YamlValue>>& entries() const { return entries_; }

 private:
  friend class YamlValue;
  YamlDocument* document_ = nullptr;
  std::string path_;
  SourceLocation location_;
  std::vector<std::pair<std::string, YamlValue>> entries_;
};

// Levenshtein distance, for "did you mean" suggestions.
std::size_t EditDistance(std::string_view a, std::string_view b);

}  // namespace gpuos::registry
