// The five kinds of gpuos plugin, as a C++ enum mirroring GPUOS_PLUGIN_KIND_*.
//
// Header-only: plugins include it without linking gpuos.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "gpuos/plugin_abi.h"

namespace gpuos {

enum class PluginKind : std::uint32_t {
  kFrontend = GPUOS_PLUGIN_KIND_FRONTEND,               // builds a task graph from a model
  kFusionStrategy = GPUOS_PLUGIN_KIND_FUSION_STRATEGY,  // groups graph nodes to fuse
  kExecutor = GPUOS_PLUGIN_KIND_EXECUTOR,               // hands ordered tasks to the device
  kScheduler = GPUOS_PLUGIN_KIND_SCHEDULER,             // orders and places ready tasks
  kMemoryManager = GPUOS_PLUGIN_KIND_MEMORY_MANAGER,    // residency under a byte budget
};

inline constexpr PluginKind kAllPluginKinds[] = {PluginKind::kFrontend, PluginKind::kFusionStrategy,
                                                 PluginKind::kExecutor, PluginKind::kScheduler,
                                                 PluginKind::kMemoryManager};

// "frontend", "fusion_strategy", "executor", "scheduler", "memory_manager";
// "unknown" for a value outside the enum.
constexpr const char* PluginKindName(PluginKind kind) {
  switch (kind) {
    case PluginKind::kFrontend:
      return "frontend";
    case PluginKind::kFusionStrategy:
      return "fusion_strategy";
    case PluginKind::kExecutor:
      return "executor";
    case PluginKind::kScheduler:
      return "scheduler";
    case PluginKind::kMemoryManager:
      return "memory_manager";
  }
  return "unknown";
}

// The kind for a raw descriptor value; nullopt for anything not listed.
constexpr std::optional<PluginKind> PluginKindFromValue(std::uint32_t value) {
  for (PluginKind kind : kAllPluginKinds) {
    if (static_cast<std::uint32_t>(kind) == value) return kind;
  }
  return std::nullopt;
}

// Parses a name as printed by PluginKindName.
constexpr std::optional<PluginKind> ParsePluginKind(std::string_view name) {
  for (PluginKind kind : kAllPluginKinds) {
    if (name == PluginKindName(kind)) return kind;
  }
  return std::nullopt;
}

}  // namespace gpuos
