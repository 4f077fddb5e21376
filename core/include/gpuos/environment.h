// Every environment variable gpuos reads, with its default, in one place.
//
// clang-format off
// | variable          | meaning                                | default                          |
// |-------------------|----------------------------------------|----------------------------------|
// | GPUOS_REGISTRY    | path of the repository file            | $XDG_DATA_HOME/gpuos/registry.db |
// | GPUOS_ARCH        | target architecture for builds (sm_90) | the GPU's, else none             |
// | GPUOS_PLUGIN_PATH | ':'-separated plugin directories       | (none)                           |
// | GPUOS_JOBS        | parallel compile jobs                  | hardware threads                 |
//
// Diagnostics (off unless set):
// | GPUOS_PHASE_TIMING | build instrumented images (phase_timing.cuh) | off                         |
// | GPUOS_PTXAS_INFO   | image builds print ptxas's report per unit | off                            |
// | GPUOS_OPERATOR_PRESERVE | registers an operator preserves (0: default ABI) | 0                    |
// | GPUOS_JIT_DEFINES  | NAME[=VALUE] ... macros for image builds  | (none)                           |
// | GPUOS_JIT_DUMP_DIR | image builds write each unit's source and object here | off                  |
// | GPUOS_DEMO_SAMPLES | `gpuos demo` lists every timed run       | off                              |
// | GPUOS_DEMO_TRACE   | `gpuos demo` writes its task timeline here | off                            |
// clang-format on
//
// Read but not ours: XDG_DATA_HOME and HOME (data directory), CUDA_HOME and
// CUDA_PATH (where the toolkit's headers for NVRTC are; default /usr/local/cuda).
//
// docs/configuration.md repeats this table for users; keep both true.
#pragma once

#include <optional>
#include <string>

#include "gpuos/status.h"

namespace gpuos {

// Value of `name` when set and non-empty.
std::optional<std::string> GetEnv(const char* name);

// Whether the diagnostic switch `name` is on: set, non-empty and not "0".
bool EnvFlagOn(const char* name);

// The value of `name` as a decimal integer in [min, max]; nullopt when unset
// or empty. InvalidArgument for other text: "<name> must be <what> from
// <min> to <max>; got '<text>'".
Expected<std::optional<long long>> GetEnvInteger(const char* name, long long min, long long max,
                                                 const std::string& what);

// The user's gpuos data directory: $XDG_DATA_HOME/gpuos, else
// $HOME/.local/share/gpuos. Not created.
std::string DefaultDataDirectory();

// GPUOS_REGISTRY if set, else DefaultDataDirectory() + "/registry.db".
std::string DefaultRegistryPath();

}  // namespace gpuos
