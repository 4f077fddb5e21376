#include "builtin_plugins/builtin_plugins.h"

namespace gpuos::builtin_plugins {

std::span<const GpuosPluginDescriptor* const> Descriptors() {
  static const GpuosPluginDescriptor* const descriptors[] = {
      &FifoSchedulerDescriptor(),
      &UnlimitedMemoryManagerDescriptor(),
      &NoFusionStrategyDescriptor(),
      &PersistentExecutorDescriptor(),
  };
  return descriptors;
}

}  // namespace gpuos::builtin_plugins
