// A plugin built for a future plugin ABI: the host must refuse it by its
// version alone, without calling anything in it.
#include "gpuos/plugin_abi.h"

namespace {

constexpr std::uint32_t kFutureAbiVersion = GPUOS_PLUGIN_ABI_VERSION + 41;

// A different layout than version 1 would have: only the first two fields are
// meant to be read.
struct FutureDescriptor {
  std::uint32_t abi_version;
  std::uint32_t struct_size;
  const char* something_new;
};

constexpr FutureDescriptor kDescriptor{kFutureAbiVersion, sizeof(FutureDescriptor), "?"};

}  // namespace

GPUOS_PLUGIN_ENTRY_POINT { return reinterpret_cast<const GpuosPluginDescriptor*>(&kDescriptor); }
