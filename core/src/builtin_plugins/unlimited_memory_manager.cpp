// "unlimited": loads what the next task requires and never evicts, as if
// device memory had no limit.

#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "builtin_plugins/builtin_plugins.h"
#include "gpuos/plugins/export.h"
#include "gpuos/plugins/memory_manager.h"

namespace gpuos::builtin_plugins {
namespace {

class UnlimitedMemoryManager final : public plugins::MemoryManager {
 public:
  Expected<plugins::MemoryPlan> Plan(const plugins::MemoryRequest& request) noexcept override {
    std::unordered_map<std::uint64_t, bool> resident;
    for (const plugins::TensorState& tensor : request.tensors) {
      resident[tensor.tensor_id] = tensor.resident;
    }
    plugins::MemoryPlan plan;
    std::unordered_set<std::uint64_t> planned;
    for (std::uint64_t id : request.required) {
      auto found = resident.find(id);
      if (found == resident.end()) {
        return InvalidArgument("unlimited memory manager: required tensor " + std::to_string(id) +
                               " is not among the tracked tensors");
      }
      if (!found->second && planned.insert(id).second) plan.load.push_back(id);
    }
    return plan;
  }
};

Expected<std::unique_ptr<UnlimitedMemoryManager>> MakeUnlimitedMemoryManager(
    const plugins::PluginConfig& config) {
  GPUOS_RETURN_IF_ERROR(config.CheckKeys({}));
  return std::make_unique<UnlimitedMemoryManager>();
}

}  // namespace

const GpuosPluginDescriptor& UnlimitedMemoryManagerDescriptor() {
  static constexpr GpuosPluginDescriptor descriptor =
      plugins::MakePluginDescriptor<plugins::MemoryManager, MakeUnlimitedMemoryManager>(
          "unlimited", "1.0.0", "Loads required tensors and never evicts (default)");
  return descriptor;
}

}  // namespace gpuos::builtin_plugins
