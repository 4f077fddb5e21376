#include "gpuos/environment.h"

#include <cstdlib>

namespace gpuos {

std::optional<std::string> GetEnv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

bool EnvFlagOn(const char* name) {
  const auto value = GetEnv(name);
  return value.has_value() && *value != "0";
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
