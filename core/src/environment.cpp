#include "gpuos/environment.h"

#include <charconv>
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

Expected<std::optional<long long>> GetEnvInteger(const char* name, long long min, long long max,
                                                 const std::string& what) {
  const auto text = GetEnv(name);
  if (!text) return std::optional<long long>();
  long long value = 0;
  const char* end = text->data() + text->size();
  const auto [stop, error] = std::from_chars(text->data(), end, value);
  if (error != std::errc() || stop != end || value < min || value > max) {
    return InvalidArgument(std::string(name) + " must be " + what + " from " + std::to_string(min) +
                           " to " + std::to_string(max) + "; got '" + *text + "'");
  }
  return std::optional<long long>(value);
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
