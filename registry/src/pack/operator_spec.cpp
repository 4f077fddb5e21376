#include "gpuos/registry/operator_spec.h"

#include <charconv>

#include "operator_rules.h"

namespace gpuos::registry {
namespace {

// One decimal component of a version: digits only, no leading zero unless it
// is "0", fits in 32 bits.
bool ParseVersionPart(std::string_view text, std::uint32_t* out) {
  if (text.empty() || (text.size() > 1 && text[0] == '0')) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::string SemVer::ToString() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

Expected<SemVer> SemVer::Parse(const std::string& text) {
  std::string_view rest = text;
  std::uint32_t parts[3] = {0, 0, 0};
  bool ok = true;
  for (int i = 0; i < 3 && ok; ++i) {
    std::size_t dot = i < 2 ? rest.find('.') : rest.size();
    if (dot == std::string_view::npos) {
      ok = false;
      break;
    }
    ok = ParseVersionPart(rest.substr(0, dot), &parts[i]);
    rest.remove_prefix(i < 2 ? dot + 1 : dot);
  }
  if (!ok) {
    return InvalidArgument("'" + text +
                           "' is not a version; write MAJOR.MINOR.PATCH with decimal numbers "
                           "without leading zeros, e.g. 1.0.0");
  }
  return SemVer{parts[0], parts[1], parts[2]};
}

std::string SourceLocation::ToString() const {
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

const char* OperatorKindName(OperatorKind kind) {
  switch (kind) {
    case OperatorKind::kElementwise:
      return "elementwise";
    case OperatorKind::kReduction:
      return "reduction";
    case OperatorKind::kCustom:
      return "custom";
  }
  return "unknown";
}

std::optional<OperatorKind> ParseOperatorKind(const std::string& name) {
  for (OperatorKind kind :
       {OperatorKind::kElementwise, OperatorKind::kReduction, OperatorKind::kCustom}) {
    if (name == OperatorKindName(kind)) return kind;
  }
  return std::nullopt;
}

const char* AttributeTypeName(AttributeType type) {
  switch (type) {
    case AttributeType::kF32:
      return "f32";
    case AttributeType::kF64:
      return "f64";
    case AttributeType::kI32:
      return "i32";
    case AttributeType::kI64:
      return "i64";
    case AttributeType::kBool:
      return "bool";
  }
  return "unknown";
}

std::optional<AttributeType> ParseAttributeType(const std::string& name) {
  for (AttributeType type : {AttributeType::kF32, AttributeType::kF64, AttributeType::kI32,
                             AttributeType::kI64, AttributeType::kBool}) {
    if (name == AttributeTypeName(type)) return type;
  }
  return std::nullopt;
}

Status ValidateOperator(const OperatorSpec& spec) {
  auto problem = rules::FindProblem(spec);
  if (!problem) return Status::Ok();
  std::string where = "operator '" + spec.name + "'";
  if (!problem->field.empty()) where += ": " + problem->field;
  return InvalidArgument(where + ": " + problem->message);
}

}  // namespace gpuos::registry
