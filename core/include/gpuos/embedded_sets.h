// Accessors for the embedded file sets built by gpuos_embed_files().
// Link gpuos_device_sources or gpuos_builtin_packs to use them.
#pragma once

#include <vector>

#include "gpuos/embedded_file.h"

namespace gpuos::device_sources {
// device/include/gpuos/device/*.cuh|h and device/src/*.cu, by relative path.
const std::vector<gpuos::EmbeddedFile>& EmbeddedFiles();
}  // namespace gpuos::device_sources

namespace gpuos::builtin_packs {
// operators/*.yaml, by file name.
const std::vector<gpuos::EmbeddedFile>& EmbeddedFiles();
}  // namespace gpuos::builtin_packs
