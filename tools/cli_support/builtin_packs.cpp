#include "builtin_packs.h"

#include "gpuos/embedded_sets.h"
#include "gpuos/registry/pack_loader.h"

namespace gpuos::cli {

Expected<std::vector<registry::OperatorPack>> LoadBuiltinPacks() {
  std::vector<registry::OperatorPack> packs;
  for (const auto& file : builtin_packs::EmbeddedFiles()) {
    GPUOS_ASSIGN_OR_RETURN(auto pack,
                           registry::ParsePack(file.contents, "builtin:" + std::string(file.name)));
    packs.push_back(std::move(pack));
  }
  return packs;
}

}  // namespace gpuos::cli
