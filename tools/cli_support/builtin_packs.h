// The packs compiled into the binary (operators/*.yaml).
#pragma once

#include <vector>

#include "gpuos/registry/operator_spec.h"
#include "gpuos/status.h"

namespace gpuos::cli {

// Parses every embedded built-in pack; file names appear as "builtin:<file>".
Expected<std::vector<registry::OperatorPack>> LoadBuiltinPacks();

}  // namespace gpuos::cli
