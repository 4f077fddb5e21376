#include <cstdio>
#include <string>

#include "plugin_host_internal.h"

namespace gpuos::plugin_host_internal {
namespace {

bool IsValidPluginName(const char* name) {
  if (name == nullptr) return false;
  std::string_view text(name);
  if (text.empty() || text.size() > 64) return false;
  for (char c : text) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string Hex(std::uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%x", static_cast<unsigned>(value));
  return text;
}

std::string KnownKinds() {
  std::string list;
  for (PluginKind kind : kAllPluginKinds) {
    if (!list.empty()) list += ", ";
    list += std::string(PluginKindName(kind)) + " (" +
            std::to_string(static_cast<std::uint32_t>(kind)) + ")";
  }
  return list;
}

}  // namespace

Expected<PluginInfo> DescribePlugin(const GpuosPluginDescriptor* descriptor,
                                    const std::string& origin) {
  if (descriptor == nullptr) {
    return InvalidArgument(origin + ": the entry point " GPUOS_PLUGIN_ENTRY_POINT_NAME
                                    " returned no descriptor (NULL)");
  }
  // Only the first two fields are common to every ABI version, so nothing
  // else is read before the version matches.
  if (descriptor->abi_version != GPUOS_PLUGIN_ABI_VERSION) {
    return AbiMismatch(origin + " was built for plugin ABI " +
                       std::to_string(descriptor->abi_version) + "; this gpuos uses " +
                       std::to_string(GPUOS_PLUGIN_ABI_VERSION) +
                       "; rebuild the plugin against this gpuos");
  }
  if (descriptor->struct_size < sizeof(GpuosPluginDescriptor)) {
    return AbiMismatch(origin + ": its descriptor is " + std::to_string(descriptor->struct_size) +
                       " bytes but plugin ABI " + std::to_string(GPUOS_PLUGIN_ABI_VERSION) +
                       " needs " + std::to_string(sizeof(GpuosPluginDescriptor)) +
                       "; rebuild the plugin against this gpuos");
  }
  if (descriptor->cxx_abi_tag != GPUOS_PLUGIN_CXX_ABI_TAG) {
    return AbiMismatch(origin + " was built with another C++ standard library configuration (tag " +
                       Hex(descriptor->cxx_abi_tag) + ", this gpuos " +
                       Hex(GPUOS_PLUGIN_CXX_ABI_TAG) +
                       ": library, _GLIBCXX_USE_CXX11_ABI or debug mode differ); rebuild it with "
                       "the compiler and flags gpuos was built with");
  }
  std::optional<PluginKind> kind = PluginKindFromValue(descriptor->kind);
  if (!kind) {
    return InvalidArgument(origin + ": declares unknown plugin kind " +
                           std::to_string(descriptor->kind) + "; known kinds: " + KnownKinds());
  }
  if (!IsValidPluginName(descriptor->name)) {
    return InvalidArgument(origin + ": plugin name '" +
                           std::string(descriptor->name == nullptr ? "(null)" : descriptor->name) +
                           "' is invalid; use 1 to 64 characters of A-Z a-z 0-9 _ . -");
  }
  if (descriptor->version == nullptr) {
    return InvalidArgument(origin + ": plugin '" + descriptor->name +
                           "' has no version string (NULL); set one, e.g. \"1.0.0\"");
  }
  if (descriptor->create == nullptr || descriptor->destroy == nullptr) {
    return InvalidArgument(origin + ": plugin '" + descriptor->name +
                           "' lacks its create or destroy function (NULL)");
  }
  PluginInfo info;
  info.name = descriptor->name;
  info.kind = *kind;
  info.version = descriptor->version;
  info.description = descriptor->description == nullptr ? "" : descriptor->description;
  info.abi_version = descriptor->abi_version;
  return info;
}

}  // namespace gpuos::plugin_host_internal
