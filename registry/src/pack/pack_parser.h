// The pack parser with the extra locations that cross-pack checks need.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gpuos/registry/operator_spec.h"
#include "gpuos/status.h"

namespace gpuos::registry {

struct ParsedPack {
  OperatorPack pack;
  SourceLocation name_location;                         // of the pack's `name:` value
  std::vector<SourceLocation> operator_name_locations;  // parallel to pack.operators
};

// ParsePack() with locations; see pack_loader.h for the contract.
Expected<ParsedPack> ParsePackWithLocations(std::string_view yaml_text,
                                            const std::string& source_name);

}  // namespace gpuos::registry
