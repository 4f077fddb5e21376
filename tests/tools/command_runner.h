// Runs a tool of the build as a child process, for end-to-end CLI tests.
#pragma once

#include <string>

#include "temp_dir.h"

namespace gpuos::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr, interleaved
};

// Runs `command_line` through /bin/sh with `env` prepended (e.g.
// "GPUOS_REGISTRY=/tmp/x.db "). Never throws.
CommandResult RunCommand(const std::string& command_line);

}  // namespace gpuos::testing
