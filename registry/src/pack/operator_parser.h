// Builds OperatorSpecs from the `operators:` entries of a pack (see
// docs/operator-packs.md for the format).
#pragma once

#include "gpuos/registry/operator_spec.h"
#include "gpuos/status.h"
#include "yaml_cursor.h"

namespace gpuos::registry {

// Parses one `operators[i]` entry and checks it against the operator rules;
// errors point at the offending field.
Expected<OperatorSpec> ParseOperator(const YamlValue& entry);

// Parses one `tests[i]` entry of `spec` (whose signature is already parsed,
// so attribute values can be read as their declared types).
Expected<OperatorTest> ParseOperatorTest(const YamlValue& entry, const OperatorSpec& spec);

}  // namespace gpuos::registry
