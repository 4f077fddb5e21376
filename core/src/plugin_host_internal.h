// Private pieces shared by the plugin_host*.cpp files.
#pragma once

#include <string>

#include "gpuos/plugin_abi.h"
#include "gpuos/plugin_host.h"
#include "gpuos/status.h"

namespace gpuos::plugin_host_internal {

// Checks a descriptor field by field, ABI version first, and returns what it
// describes. `origin` names the library (or "built-in") in messages; the
// returned info has no path and builtin == false.
Expected<PluginInfo> DescribePlugin(const GpuosPluginDescriptor* descriptor,
                                    const std::string& origin);

}  // namespace gpuos::plugin_host_internal
