// Exit codes shared by gpuos command-line tools (documented in
// docs/gpuos-registry.md; keep both in step).
#pragma once

#include "gpuos/status.h"

namespace gpuos::cli {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,       // anything not listed below (I/O, internal)
  kExitUsage = 2,         // bad command line
  kExitNotFound = 3,      // unknown operator, version, file
  kExitConflict = 4,      // name@version exists with other content, ...
  kExitInvalidInput = 5,  // malformed pack or input file
  kExitCompileError = 6,  // NVRTC or nvJitLink rejected the code
  kExitRepository = 7,    // not a repository, newer schema, read-only, corrupt
  kExitUnavailable = 8,   // no GPU, no driver, repository busy
  kExitVerifyFailed = 9,  // `verify` found problems
};

// The exit code a failed Status maps to (kExitOk for OK).
int ExitCodeFor(const Status& status);

}  // namespace gpuos::cli
