// Canonical JSON form of an operator spec: what the repository stores, what
// `--json` prints, and what the content hash of an operator version is
// computed over.
//
// The canonical form leaves out source locations and test locations, so
// moving an operator inside its file does not change its identity; it keeps
// everything that changes behaviour (code, signature, dtypes, defaults).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "gpuos/registry/operator_spec.h"
#include "gpuos/status.h"

namespace gpuos::registry {

// Canonical JSON. `with_locations` adds "location" members (used when the
// repository keeps where a version came from, for error mapping at build
// time); the content hash always uses the form without them.
nlohmann::json OperatorToJson(const OperatorSpec& spec, bool with_locations = false);

// Inverse of OperatorToJson; accepts either form. Errors name the field.
Expected<OperatorSpec> OperatorFromJson(const nlohmann::json& json);

// ContentHash of OperatorToJson(spec, false).dump().
std::string OperatorContentHash(const OperatorSpec& spec);

}  // namespace gpuos::registry
