#include "gpuos/environment.h"

#include <cstdlib>

namespace gpuos {

std::optional<std::string> GetEnv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::string DefaultDataDirectory() {
  if (auto xdg = GetEnv("XDG_DATA_HOME")) return *xdg + "/gpuos";
  if (auto home = GetEnv("HOME")) return *home + "/.local/share/gpuos";
  return ".gpuos";
}

std::string DefaultRegistryPath() {
  if (auto path = GetEnv("GPUOS_REGISTRY")) return *path;
  return DefaultDataDirectory() + "/registry.db";
}

}  // namespace gpuos
