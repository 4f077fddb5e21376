// Human-readable renderings of repository records.
#pragma once

#include <string>

#include "gpuos/registry/operator_spec.h"
#include "gpuos/registry/repository_types.h"

namespace gpuos::cli {

// The spec as indented text: signature, dtypes, attributes, then each code
// block verbatim. Stable line by line, so `diff` can compare two versions.
std::string RenderSpec(const registry::OperatorSpec& spec);

// "2024-05-01 12:34:56" (UTC) from unix milliseconds.
std::string ShortTime(std::int64_t unix_ms);

}  // namespace gpuos::cli
