// Every environment variable gpuos reads, with its default, in one place.
//
// | variable          | meaning                                   | default                          |
// |-------------------|-------------------------------------------|----------------------------------|
// | GPUOS_REGISTRY    | path of the repository file               | $XDG_DATA_HOME/gpuos/registry.db |
// |                   |                                           | (~/.local/share/gpuos/...)       |
// | GPUOS_ARCH        | target architecture for builds (sm_90)    | the GPU's, else none             |
// | GPUOS_PLUGIN_PATH | ':'-separated plugin directories          | (none)                           |
// | GPUOS_LOG         | log level: trace debug info warn error off| warn                             |
// | GPUOS_JOBS        | parallel compile jobs                     | hardware threads                 |
// | GPUOS_CACHE_DIR   | (reserved)                                |                                  |
//
// docs/configuration.md repeats this table for users; keep both true.
#pragma once

#include <optional>
#include <string>

namespace gpuos {

// Value of `name` when set and non-empty.
std::optional<std::string> GetEnv(const char* name);

// The user's gpuos data directory: $XDG_DATA_HOME/gpuos, else
// $HOME/.local/share/gpuos. Not created.
std::string DefaultDataDirectory();

// GPUOS_REGISTRY if set, else DefaultDataDirectory() + "/registry.db".
std::string DefaultRegistryPath();

}  // namespace gpuos
