// Rules on operator specs shared by ValidateOperator(), the YAML loader and
// the JSON reader, so that the three agree on what a valid operator is.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "gpuos/registry/operator_spec.h"
#include "gpuos/status.h"

namespace gpuos::registry::rules {

inline constexpr std::size_t kMaxNameLength = 64;

// [a-z][a-z0-9_]*, at most kMaxNameLength characters.
bool IsOperatorName(std::string_view name);
// [a-z][a-z0-9_.-]*, at most kMaxNameLength characters.
bool IsPackName(std::string_view name);
// [a-z_][a-z0-9_]*, at most kMaxNameLength characters (parameters, tests).
bool IsParamName(std::string_view name);

// Offset of the first byte of `text` that is not well-formed UTF-8 (or is a
// NUL, or with !allow_control any control character but tab, CR and LF);
// npos when there is none.
std::size_t FindBadTextByte(std::string_view text, bool allow_control);

// "f32, f16, bf16, f64, i8, u8, i32, i64, bool".
std::string KnownDTypeList();
// "f32, f64, i32, i64, bool".
std::string KnownAttributeTypeList();

// Parses `text` as a value of `type` and returns its canonical text:
// bool "true"/"false"; integers decimal without fraction, in range; floats
// the shortest text that reads back to the same double (finite, and in
// range for f32). The error message says what was expected.
Expected<std::string> CanonicalAttributeValue(AttributeType type, std::string_view text);

// One violated rule: `field` is the path inside the operator ("inputs[1].name",
// "" for the operator itself); `message` says what is wrong and what to do.
struct Problem {
  std::string field;
  std::string message;
};

// The first rule `spec` breaks, in field order; nullopt when valid.
std::optional<Problem> FindProblem(const OperatorSpec& spec);

}  // namespace gpuos::registry::rules
