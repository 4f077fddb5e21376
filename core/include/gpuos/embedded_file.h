// A file compiled into the binary (device sources, built-in operator packs),
// so gpuos runs from any directory and on air-gapped nodes.
#pragma once

#include <string_view>

namespace gpuos {

struct EmbeddedFile {
  std::string_view name;      // path relative to its source folder
  std::string_view contents;  // the file's bytes; lives as long as the program
};

}  // namespace gpuos
