// "no_fusion": every node runs as its own operator.

#include <memory>

#include "builtin_plugins/builtin_plugins.h"
#include "gpuos/plugins/export.h"
#include "gpuos/plugins/fusion_strategy.h"

namespace gpuos::builtin_plugins {
namespace {

class NoFusionStrategy final : public plugins::FusionStrategy {
 public:
  Expected<std::vector<plugins::FusionGroup>> Plan(
      const plugins::FusionGraphView&) noexcept override {
    return std::vector<plugins::FusionGroup>();
  }
};

Expected<std::unique_ptr<NoFusionStrategy>> MakeNoFusionStrategy(
    const plugins::PluginConfig& config) {
  GPUOS_RETURN_IF_ERROR(config.CheckKeys({}));
  return std::make_unique<NoFusionStrategy>();
}

}  // namespace

const GpuosPluginDescriptor& NoFusionStrategyDescriptor() {
  static constexpr GpuosPluginDescriptor descriptor =
      plugins::MakePluginDescriptor<plugins::FusionStrategy, MakeNoFusionStrategy>(
          "no_fusion", "1.0.0", "Fuses nothing; each node is its own operator (default)");
  return descriptor;
}

}  // namespace gpuos::builtin_plugins
