// Reads the canonical JSON form of an operator (operator_spec_json.h) back
// into an OperatorSpec, naming the first field that is missing or malformed.
#pragma once

#include <nlohmann/json.hpp>

#include "gpuos/registry/operator_spec.h"
#include "gpuos/status.h"

namespace gpuos::registry::json_reader {

// Never throws. Errors read "operator JSON: <field path>: <what is wrong>".
Expected<OperatorSpec> ReadOperator(const nlohmann::json& document);

}  // namespace gpuos::registry::json_reader
