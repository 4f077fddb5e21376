#include "yaml_cursor.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace gpuos::registry {
namespace {

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

// yaml-cpp tags plain scalars "?" and quoted or block scalars "!".
bool IsPlain(const YAML::Node& node) { return node.Tag() == "?"; }

// Start of line `line` (0-based) in `text`, or npos.
std::size_t LineStart(std::string_view text, int line) {
  std::size_t pos = 0;
  for (int i = 0; i < line; ++i) {
    pos = text.find('\n', pos);
    if (pos == std::string_view::npos) return pos;
    ++pos;
  }
  return pos;
}

// For a block scalar whose header (`|`, `>`, possibly after an anchor or a
// tag) is at `pos`, the 1-based line and column of its first content line.
std::optional<std::pair<int, int>> BlockScalarStart(std::string_view text, std::size_t pos,
                                                    int header_line) {
  while (pos < text.size() && (text[pos] == '&' || text[pos] == '!')) {
    pos = text.find_first_of(" \t\n", pos);
    if (pos == std::string_view::npos) return std::nullopt;
    pos = text.find_first_not_of(" \t", pos);
    if (pos == std::string_view::npos) return std::nullopt;
  }
  if (pos >= text.size() || (text[pos] != '|' && text[pos] != '>')) return std::nullopt;
  int first_line = header_line + 1;  // 0-based
  int column = 0;
  // The column is the indentation of the first non-blank content line.
  std::size_t start = LineStart(text, first_line);
  while (start != std::string_view::npos && start < text.size()) {
    std::size_t end = text.find('\n', start);
    std::string_view line = text.substr(start, end == std::string_view::npos ? end : end - start);
    std::size_t indent = line.find_first_not_of(' ');
    if (indent != std::string_view::npos && line[indent] != '\r') {
      column = static_cast<int>(indent);
      break;
    }
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return std::make_pair(first_line + 1, column + 1);
}

// A YAML core-schema float or int in decimal form (no hex/octal).
std::optional<double> ParseDecimal(std::string_view text) {
  if (text.empty()) return std::nullopt;
  for (char c : text) {
    bool ok = (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-';
    if (!ok) return std::nullopt;
  }
  std::string_view digits = text;
  if (digits[0] == '+') digits.remove_prefix(1);
  if (digits.empty() || digits[0] == '+') return std::nullopt;
  double value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return value;
}

}  // namespace

SourceLocation YamlDocument::Locate(const YAML::Mark& mark) const {
  if (mark.is_null()) return SourceLocation{file_, 1, 1};
  return SourceLocation{file_, mark.line + 1, mark.column + 1};
}

Status YamlDocument::ErrorAt(const SourceLocation& where, const std::string& path,
                             const std::string& what) const {
  return InvalidArgument(where.ToString() + ": error: " + (path.empty() ? "" : path + ": ") + what);
}

void YamlDocument::Record(const std::string& path, const SourceLocation& where) {
  locations_.emplace(path, where);
}

SourceLocation YamlDocument::LocationOf(const std::string& path) const {
  std::string prefix = path;
  while (true) {
    auto it = locations_.find(prefix);
    if (it != locations_.end()) return it->second;
    std::size_t cut = prefix.find_last_of(".[");
    if (cut == std::string::npos) break;
    prefix.resize(cut);
  }
  auto root = locations_.find("");
  return root != locations_.end() ? root->second : SourceLocation{file_, 1, 1};
}

YamlValue::YamlValue(YamlDocument* document, YAML::Node node, std::string path,
                     std::optional<YAML::Mark> key_mark)
    : document_(document), node_(std::move(node)), path_(std::move(path)) {
  bool block_collection =
      (node_.IsMap() || node_.IsSequence()) && node_.Style() != YAML::EmitterStyle::Flow;
  bool at_key = key_mark && (node_.IsNull() || block_collection);
  location_ = document_->Locate(at_key ? *key_mark : node_.Mark());
  document_->Record(path_, location_);
}

Status YamlValue::Error(const std::string& what) const {
  return document_->ErrorAt(location_, path_, what);
}

std::string YamlValue::Found() const {
  if (node_.IsNull()) return "an empty value";
  if (node_.IsSequence()) return "a list";
  if (node_.IsMap()) return "a mapping";
  if (node_.IsScalar()) {
    return IsPlain(node_) ? "'" + node_.Scalar() + "'"
                          : "the quoted string '" + node_.Scalar() + "'";
  }
  return "an undefined value";
}

Status YamlValue::WrongType(const std::string& expected) const {
  return Error("expected " + expected + ", found " + Found());
}

Expected<std::string> YamlValue::String() const {
  if (!node_.IsScalar()) return WrongType("a string");
  return node_.Scalar();
}

Expected<std::string> YamlValue::PlainScalar(const char* expected) const {
  if (!node_.IsScalar() || !IsPlain(node_)) return WrongType(expected);
  return node_.Scalar();
}

Expected<std::int64_t> YamlValue::Integer() const {
  auto text = PlainScalar("an integer");
  if (!text.ok()) return text.status();
  std::string_view digits = *text;
  if (!digits.empty() && digits[0] == '+') digits.remove_prefix(1);
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || digits[0] == '+' || ec != std::errc() ||
      end != digits.data() + digits.size()) {
    return WrongType("an integer");
  }
  return value;
}

Expected<double> YamlValue::Number() const {
  GPUOS_ASSIGN_OR_RETURN(std::string text, PlainScalar("a number"));
  if (text == "true") return 1.0;
  if (text == "false") return 0.0;
  std::string_view body = text;
  double sign = 1;
  if (!body.empty() && (body[0] == '-' || body[0] == '+')) {
    sign = body[0] == '-' ? -1 : 1;
    body.remove_prefix(1);
  }
  if (body == ".inf" || body == ".Inf" || body == ".INF") {
    return sign * std::numeric_limits<double>::infinity();
  }
  if (text == ".nan" || text == ".NaN" || text == ".NAN") {
    return std::numeric_limits<double>::quiet_NaN();
  }
  auto value = ParseDecimal(text);
  if (!value) return WrongType("a number");
  return *value;
}

Expected<CodeBlock> YamlValue::Code() const {
  GPUOS_ASSIGN_OR_RETURN(std::string code, String());
  CodeBlock block{std::move(code), location_};
  const YAML::Mark mark = node_.Mark();
  std::string_view text = document_->text();
  if (mark.pos >= 0 && static_cast<std::size_t>(mark.pos) < text.size()) {
    char first = text[mark.pos];
    if (auto start = BlockScalarStart(text, mark.pos, mark.line)) {
      block.location.line = start->first;
      block.location.column = start->second;
    } else if (first == '"' || first == '\'') {
      block.location.column += 1;  // the code starts after the quote
    }
  }
  return block;
}

Expected<std::vector<YamlValue>> YamlValue::Sequence() const {
  if (!node_.IsSequence()) return WrongType("a list");
  std::vector<YamlValue> items;
  std::size_t index = 0;
  for (const YAML::Node& item : node_) {
    items.emplace_back(document_, item, path_ + "[" + std::to_string(index++) + "]", std::nullopt);
  }
  return items;
}

Expected<YamlMapping> YamlValue::Mapping(const std::vector<std::string_view>& known_keys) const {
  if (!node_.IsMap()) return WrongType("a mapping");
  YamlMapping mapping;
  mapping.document_ = document_;
  mapping.path_ = path_;
  mapping.location_ = location_;
  std::map<std::string, SourceLocation> seen;
  for (const auto& entry : node_) {
    const YAML::Node& key = entry.first;
    SourceLocation key_location = document_->Locate(key.Mark());
    if (!key.IsScalar()) {
      return document_->ErrorAt(key_location, path_,
                                "a key must be a plain name, not a list or mapping");
    }
    const std::string& name = key.Scalar();
    std::string key_path = Join(path_, name);
    auto [previous, inserted] = seen.emplace(name, key_location);
    if (!inserted) {
      return document_->ErrorAt(key_location, key_path,
                                "duplicate key '" + name + "' (first at line " +
                                    std::to_string(previous->second.line) +
                                    "); remove one of them");
    }
    if (!known_keys.empty() &&
        std::find(known_keys.begin(), known_keys.end(), name) == known_keys.end()) {
      std::string_view closest;
      std::size_t best = std::numeric_limits<std::size_t>::max();
      for (std::string_view known : known_keys) {
        std::size_t distance = EditDistance(name, known);
        if (distance < best) {
          best = distance;
          closest = known;
        }
      }
      std::string hint;
      if (best <= std::max<std::size_t>(2, name.size() / 3)) {
        hint = "did you mean '" + std::string(closest) + "'?";
      } else {
        hint = "known keys: ";
        for (std::size_t i = 0; i < known_keys.size(); ++i) {
          hint += (i ? ", " : "") + std::string(known_keys[i]);
        }
      }
      return document_->ErrorAt(key_location, key_path, "unknown key '" + name + "'; " + hint);
    }
    mapping.entries_.emplace_back(name, YamlValue(document_, entry.second, key_path, key.Mark()));
  }
  return mapping;
}

std::optional<YamlValue> YamlMapping::Find(std::string_view key) const {
  for (const auto& [name, value] : entries_) {
    if (name == key) {
      if (value.IsNull()) return std::nullopt;
      return value;
    }
  }
  return std::nullopt;
}

Expected<YamlValue> YamlMapping::Require(std::string_view key) const {
  if (auto value = Find(key)) return *value;
  for (const auto& [name, value] : entries_) {
    if (name == key) return value.Error("a value is required");
  }
  return document_->ErrorAt(location_, path_, "missing required key '" + std::string(key) + "'");
}

std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace gpuos::registry
