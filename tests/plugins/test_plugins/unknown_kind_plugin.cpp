// A current-ABI descriptor declaring a kind gpuos does not know.
#include "gpuos/plugin_abi.h"

namespace {

std::int32_t CreateNothing(const char*, void** object, char*, std::size_t) {
  *object = nullptr;
  return GPUOS_PLUGIN_CREATE_FAILED;
}
void DestroyNothing(void*) {}

constexpr GpuosPluginDescriptor kDescriptor{GPUOS_PLUGIN_ABI_VERSION,
                                            sizeof(GpuosPluginDescriptor),
                                            99u,
                                            GPUOS_PLUGIN_CXX_ABI_TAG,
                                            "test_unknown_kind",
                                            "0.0.1",
                                            "declares kind 99",
                                            &CreateNothing,
                                            &DestroyNothing};

}  // namespace

GPUOS_PLUGIN_ENTRY_POINT { return &kDescriptor; }
