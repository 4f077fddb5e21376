// The built-in defaults, each exposed as the descriptor a plugin library would
// export, so the host creates them exactly as it creates loaded plugins.
#pragma once

#include <span>

#include "gpuos/plugin_abi.h"

namespace gpuos::builtin_plugins {

const GpuosPluginDescriptor& FifoSchedulerDescriptor();           // "fifo"
const GpuosPluginDescriptor& UnlimitedMemoryManagerDescriptor();  // "unlimited"
const GpuosPluginDescriptor& NoFusionStrategyDescriptor();        // "no_fusion"
const GpuosPluginDescriptor& PersistentExecutorDescriptor();      // "persistent"

// All of the above.
std::span<const GpuosPluginDescriptor* const> Descriptors();

}  // namespace gpuos::builtin_plugins
